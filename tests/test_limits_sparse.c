/* Tensors past maxMemoryAllocationSize (tests/test_limits.c's list): sparse
 * buffers of pages where the device binds them (Mesa 25's lavapipe), a
 * refusal naming desc->dims and why where it does not (Mesa 22, or
 * no_sparse_binding). Tolerances: those of tests/test_limits.c. */
#include "util.h"
#include "util_dtype.h"
#include "util_limits.h"

/* ---- tensors past maxMemoryAllocationSize ---------------------------------- */

/* A tensor of 1.5 MiB past the 64 KiB allocations (24 pages): a round
 * trip through upload and download is exact, whole and in a piece across
 * its first page boundary; then vkmha_matmul_tensor with it as b (op T)
 * matches the reference. Past 1 MiB: Mesa 25's lavapipe reads texel views
 * of a sparse buffer wrong from there (vkmha makes none for them). */
static void sparse_tensor_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    enum { N = 3001, K = 128, M = 5 }; /* b: 1.47 MiB */
    const size_t nb = (size_t)N * K;
    float *hb = t_random(rng, nb, -1, 1), *back = sentinels(nb), *ha = t_random(rng, M * K, -1, 1);
    float piece[6], *want = t_alloc(M * N), *got = sentinels(M * N);
    vkmha_tensor *a = put(gpu, VKMHA_DTYPE_F32, M * K, ha), *b = put(gpu, VKMHA_DTYPE_F32, nb, hb),
                 *c = put(gpu, VKMHA_DTYPE_F32, M * N, NULL);
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    bool trip = b && !vkmha_tensor_download(b, 0, back, nb * 4) && !memcmp(back, hb, nb * 4) &&
                !vkmha_tensor_download(b, 65536 - 12, piece, sizeof piece) &&
                !memcmp(piece, hb + 16384 - 3, sizeof piece);
    t_report(trip && info.device_memory_bytes >= nb * 4,
             "a tensor of 1.5 MiB past maxMemoryAllocationSize (64 KiB): created, uploaded and "
             "downloaded exactly, whole and across a page boundary");
    vkmha_matmul_desc d = {0};
    d.m = M, d.n = N, d.k = K, d.op_b = VKMHA_OP_T;
    g_splits = 0;
    const vkmha_status st = a && b && c ? vkmha_matmul_tensor(gpu, &d, a, b, NULL, c)
                                        : VKMHA_ERROR_INVALID_ARGUMENT;
    free(got);
    got = get(c, M * N);
    report_split("vkmha_matmul_tensor, b of 1.5 MiB past maxMemoryAllocationSize", gpu, st,
                 !vkmha_matmul(ref, &d, ha, hb, NULL, want) &&
                     t_close("sparse b", "c", got, want, M * N, 2e-6 * sqrt((double)K), 1e-5));
    vkmha_tensor_destroy(a), vkmha_tensor_destroy(b), vkmha_tensor_destroy(c);
    free(hb), free(back), free(ha), free(want), free(got);
}

/* A quantized b (q4z, groups of 64, op T) of 3001 x 128: 228 KiB in four
 * 64 KiB pages, past the 64 KiB range too: vkmha_matmul_tensor copies
 * windows of its rows out of the sparse buffer (across page boundaries)
 * and matches the reference on the same bytes. */
static void sparse_quant_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    enum { N = 3001, K = 128, M = 3 };
    vkmha_quant_layout l = {0};
    uint8_t *hb = t_quantized(ref, rng, VKMHA_QUANT_Q4Z, 64, N, K, &l);
    float *ha = t_random(rng, M * K, -1, 1), *want = t_alloc(M * N), *got = NULL;
    const bool ok = hb != NULL;
    vkmha_tensor *a = put(gpu, VKMHA_DTYPE_F32, M * K, ha),
                 *b = ok ? put(gpu, VKMHA_DTYPE_U8, l.bytes, hb) : NULL,
                 *c = put(gpu, VKMHA_DTYPE_F32, M * N, NULL);
    const vkmha_matmul_desc d = {.m = M, .n = N, .k = K, .op_b = VKMHA_OP_T,
                                 .b_quant = VKMHA_QUANT_Q4Z, .b_group_size = 64};
    g_splits = 0;
    const vkmha_status st = a && b && c ? vkmha_matmul_tensor(gpu, &d, a, b, NULL, c)
                                        : VKMHA_ERROR_INVALID_ARGUMENT;
    got = get(c, M * N);
    report_split("vkmha_matmul_tensor, a q4z b of 228 KiB past maxMemoryAllocationSize and the "
                 "range: windows of its rows copied from the sparse buffer", gpu, st,
                 ok && !vkmha_matmul(ref, &d, ha, hb, NULL, want) &&
                     t_close("sparse quantized b", "c", got, want, M * N,
                             2e-6 * sqrt((double)K), 1e-5));
    vkmha_tensor_destroy(a), vkmha_tensor_destroy(b), vkmha_tensor_destroy(c);
    free(ha), free(want), free(got), free(hb);
}

/* A tensor create refused: UNSUPPORTED naming desc->dims and `why`, nothing
 * held, and the context still works (report_refused's follow-up). */
static void tensor_refused(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                           const vkmha_tensor_desc *d, const char *why, const char *label)
{
    vkmha_context_info before, after;
    vkmha_context_get_info(gpu, &before);
    vkmha_tensor *t = (vkmha_tensor *)(uintptr_t)1;
    const vkmha_status st = vkmha_tensor_create(gpu, d, &t);
    vkmha_context_get_info(gpu, &after);
    report_refused(ref, gpu, rng, st, "vkmha_tensor_create", "desc->dims", why,
                   !t && after.device_memory_bytes == before.device_memory_bytes, label);
}

/* A context of 64 KiB allocations that makes no sparse tensors (`why`:
 * what its message says): max_tensor_bytes is the allocation; a 70 KiB
 * tensor is refused naming desc->dims and why, a KV cache of 75 KiB of keys
 * naming desc->capacity. */
static void no_sparse_cases(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, const char *why)
{
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    t_report(!info.sparse_tensors && info.max_tensor_bytes == 64 * 1024,
             "no sparse tensors [%s]: max_tensor_bytes is maxMemoryAllocationSize (%llu)", why,
             (unsigned long long)info.max_tensor_bytes);
    const vkmha_tensor_desc past = {VKMHA_DTYPE_F32, 1, {70 * 1024 / 4}};
    char label[120];
    snprintf(label, sizeof label, "a tensor of 70 KiB past maxMemoryAllocationSize [%s]", why);
    tensor_refused(ref, gpu, rng, &past, why, label);
    snprintf(label, sizeof label, "a KV cache of 75 KiB of keys [%s]", why);
    kv_cache_refused(ref, gpu, rng, 600, "max_tensor_bytes", label);
}

/* Tensors past maxMemoryAllocationSize (64 KiB, and maxStorageBufferRange
 * 64 KiB: every tensor past the range is past it too). Where the context
 * binds sparse buffers (Mesa 25's lavapipe; not Mesa 22's), they are made
 * of several allocations and every op, the layer and a KV cache's own
 * tensors run on them against the reference; an allocation failing on the
 * second page leaves nothing held; a tensor past max_tensor_bytes is
 * refused. Where it does not, and with desc->debug->no_sparse_binding,
 * they are refused naming desc->dims and why. */
static void sparse_cases(vkmha_context *ref, t_rng *rng)
{
    const vkmha_debug_options sd = {.max_storage_buffer_range = 64 * 1024,
                                    .max_allocation_size = 64 * 1024};
    vkmha_context *gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &sd, count_splits, NULL);
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    const vkmha_tensor_desc past = {VKMHA_DTYPE_F32, 1, {70 * 1024 / 4}}; /* 70 KiB */
    t_diag("sparse tensors: %s, max_tensor_bytes %llu", info.sparse_tensors ? "yes" : "no",
           (unsigned long long)info.max_tensor_bytes);
    if (info.sparse_tensors) {
        t_report(info.max_tensor_bytes > 64 * 1024,
                 "sparse tensors: max_tensor_bytes %llu, past maxMemoryAllocationSize",
                 (unsigned long long)info.max_tensor_bytes);
        sparse_tensor_case(ref, gpu, rng);
        sparse_quant_case(ref, gpu, rng);
        tensor_range_cases(ref, gpu, rng);
        /* The allocations lowered, the range not: the sparse b bound whole
         * (on CPU devices the matmul reads B through texel views where a
         * buffer has them). */
        vkmha_debug_options whole = {.max_allocation_size = 64 * 1024};
        vkmha_context *bound = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &whole, count_splits, NULL);
        g_need_splits = false;
        sparse_tensor_case(ref, bound, rng);
        g_need_splits = true;
        t_report_validation(bound);
        vkmha_context_destroy(bound);
        /* Past max_tensor_bytes (dims of 32 bits: two of them). */
        const uint64_t words = info.max_tensor_bytes / 4 + 1;
        const vkmha_tensor_desc huge = {VKMHA_DTYPE_F32, 2,
                                        {(uint32_t)((words + 65535) / 65536), 65536}};
        tensor_refused(ref, gpu, rng, &huge, "maxBufferSize",
                       "a tensor past max_tensor_bytes [sparse]");
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
        /* KV caches whose own keys and values are sparse, read in windows by
         * the workgroup-shared fused kernel (the CPU-shaped one reads texel
         * views): 112 KiB of keys on 64 KiB allocations, and 287 KiB on
         * 280 KiB ones (its host key input of 262 KiB is one allocation). */
        vkmha_debug_options kd = sd;
        kd.fused_kernel = VKMHA_FUSED_KERNEL_SHARED;
        gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &kd, count_splits, NULL);
        kv_cache_range_case(ref, gpu, rng, 0);
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
        kd.max_allocation_size = 280 * 1024;
        gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &kd, count_splits, NULL);
        kv_cache_entry_case(ref, gpu, rng);
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
        /* The second page's allocation fails (the context's only earlier
         * one: its placeholder buffer, without the self-check): nothing is
         * held, and the next tensor works. */
        vkmha_debug_options fail = sd;
        fail.fail_device_allocation_at = 3;
        gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &fail, count_splits, NULL);
        vkmha_context_get_info(gpu, &info);
        const uint64_t held = info.device_memory_bytes;
        vkmha_tensor *t = (vkmha_tensor *)(uintptr_t)1;
        vkmha_status st = vkmha_tensor_create(gpu, &past, &t);
        const bool refused = st == VKMHA_ERROR_OUT_OF_DEVICE_MEMORY && !t &&
                             strstr(vkmha_context_last_error(gpu), "vkAllocateMemory");
        if (!refused)
            t_diag("%s: %s", vkmha_status_string(st), vkmha_context_last_error(gpu));
        vkmha_context_get_info(gpu, &info);
        const bool freed = info.device_memory_bytes == held;
        float *x = t_random(rng, past.dims[0], -1, 1), *y = sentinels(past.dims[0]);
        st = vkmha_tensor_create(gpu, &past, &t);
        const bool works = !st && !vkmha_tensor_upload(t, 0, x, 70 * 1024) &&
                           !vkmha_tensor_download(t, 0, y, 70 * 1024) &&
                           !memcmp(x, y, 70 * 1024);
        vkmha_tensor_destroy(t);
        vkmha_context_trim(gpu); /* the copies' staging */
        vkmha_context_get_info(gpu, &info);
        t_report(refused && freed && works && info.device_memory_bytes == held,
                 "a sparse tensor's second allocation failing: OUT_OF_DEVICE_MEMORY, nothing "
                 "held; the next one works, and its destruction frees it all");
        free(x), free(y);
    } else {
        no_sparse_cases(ref, gpu, rng, "sparseBinding");
    }
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);

    /* desc->debug->no_sparse_binding: as a device without it. */
    vkmha_debug_options off = sd;
    off.no_sparse_binding = true;
    gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &off, count_splits, NULL);
    no_sparse_cases(ref, gpu, rng, "no_sparse_binding");
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
}

int main(void)
{
    t_rng rng = {99};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    sparse_cases(ref, &rng);
    vkmha_context_destroy(ref);
    return t_finish();
}
