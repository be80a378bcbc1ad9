/* Shapes beyond the device's limits, on lavapipe, through
 * vkmha_debug_options, which lowers the limits vkmha believes:
 *
 *   - maxComputeWorkGroupCount lowered to 3 x 2 x 2: every op and the layer
 *     split their grids into several dispatches (the debug log must say so
 *     for each call, else the case fails) and still match the reference
 *     backend element by element on odd shapes, on every attention path;
 *   - maxStorageBufferRange lowered to 64 KiB: arrays and tensors above it
 *     run in parts (a matmul in windows, the other ops and the layer in
 *     calls of entries, heads or rows, masks moved with them) and match the
 *     reference; what no part fits is VKMHA_ERROR_UNSUPPORTED with a
 *     message naming it (outputs untouched, the context still works), while
 *     fused attention, whose extra memory is O(len_q), runs shapes whose
 *     score matrix is above the limit;
 *   - maxMemoryAllocationSize lowered to 32 KiB: the same, named after that
 *     limit;
 *   - maxComputeSharedMemorySize lowered to 8 KiB: the fused attention's d576
 *     class no longer fits, vkmha_context_get_kernels says so, and its heads
 *     run unfused;
 *   - maxPerStageDescriptorStorageBuffers lowered to 10, 7, 6 and 4: the
 *     kernels that bind more are not used, or the context is refused
 *     (storage_buffer_cases).
 * Tolerances are those of the op's own test (test_matmul.c, ...): matmul
 * 2e-6 sqrt(k) + 1e-5 |ref|, softmax and attention weights 1e-6 + 1e-5
 * |ref|, attention outputs 2e-6 sqrt(len_k) + 1e-5 |ref|, heads exact, the
 * layer T_LAYER_ATOL + T_LAYER_RTOL |ref|.
 *
 * This file: the workgroup grid, shared memory, storage buffers, the mobile
 * profile and bad debug options; test_limits_range.c: the storage range and
 * allocation size; test_limits_sparse.c: tensors past
 * maxMemoryAllocationSize. Their shared cases: tests/util_limits.h. */
#include "util.h"
#include "util_dtype.h"
#include "util_limits.h"

/* The debug log: the last attention plan line ("fused attention (...)" or
 * "unfused attention"). */
static char g_plan[512];

static void record_plan(void *user, vkmha_log_level level, vkmha_status status,
                        const char *msg)
{
    if (level == VKMHA_LOG_DEBUG && strstr(msg, " attention"))
        snprintf(g_plan, sizeof g_plan, "%s", msg);
    t_log(user, level, status, msg);
}

/* One attention of head dims dk, dv on `path` on a context of a lowered
 * limit (`limit` names it): the status, and for a success outputs that
 * match the reference and a plan line that says `want_plan` ("fused" or
 * "unfused"); for a failure a message that says want_plan. */
static void limited_attention_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                                   const char *limit, uint32_t dk, uint32_t dv, uint32_t path,
                                   vkmha_status want, const char *want_plan)
{
    const vkmha_attention_desc s = {2, 2, 0, 19, 23, dk, dv, 0, path, 0, 0};
    const t_attention_sizes n = t_attention_size(&s);
    float *q = t_random(rng, n.q, -1, 1), *k = t_random(rng, n.k, -1, 1),
          *v = t_random(rng, n.v, -1, 1), *want_out = t_alloc(n.out), *got = t_alloc(n.out);
    char name[160];
    snprintf(name, sizeof name, "attention dk %u dv %u, %s, path %s", dk, dv, limit,
             path == VKMHA_ATTENTION_PATH_FUSED ? "FUSED" : "AUTO");
    g_plan[0] = '\0';
    vkmha_status st = vkmha_attention(gpu, &s, q, k, v, NULL, got, NULL);
    bool ok = st == want;
    if (st == VKMHA_SUCCESS) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, ": %s attention", want_plan);
        ok = ok && vkmha_attention(ref, &s, q, k, v, NULL, want_out, NULL) == VKMHA_SUCCESS &&
             attention_close(name, got, want_out, n.out, NULL, NULL, 0, s.len_k) &&
             strstr(g_plan, prefix) != NULL;
    } else if (want_plan && !strstr(vkmha_context_last_error(gpu), want_plan)) {
        t_diag("%s: \"%s\" does not say \"%s\"", name, vkmha_context_last_error(gpu),
               want_plan);
        ok = false;
    }
    t_diag("%s: plan \"%s\"", name, g_plan);
    t_report(ok, "%s: %s%s%s", name, vkmha_status_string(want),
             want == VKMHA_SUCCESS ? ", matches the reference, runs " : ", saying ",
             want_plan ? want_plan : "");
    free(q), free(k), free(v), free(want_out), free(got);
}

/* maxComputeSharedMemorySize lowered to 8 KiB with the workgroup-shared
 * fused kernel forced: no block of the d576 class fits (the smallest, 1 x 4,
 * takes 13916 bytes: vk_flash_shared_bytes), so vkmha_context_get_kernels
 * lists flash_d576 as not available and every kernel it lists fits 8 KiB;
 * heads up to 256 wide still run fused (d256 in 2 x 4 blocks, 7288 bytes),
 * wider ones unfused (the default path) or not at all (the fused path:
 * UNSUPPORTED). */
static void shared_memory_cases(vkmha_context *ref, t_rng *rng)
{
    vkmha_debug_options small = {.fused_kernel = VKMHA_FUSED_KERNEL_SHARED,
                                 .max_shared_memory = 8192};
    vkmha_context *gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &small, record_plan, NULL);
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    t_report(info.device.max_shared_memory == 8192,
             "get_info reports maxComputeSharedMemorySize %u (lowered)",
             info.device.max_shared_memory);
    vkmha_kernel_info all[80], d256, d576;
    uint32_t n = 80;
    bool ok = vkmha_context_get_kernels(gpu, &n, all) == VKMHA_SUCCESS && n <= 80;
    for (uint32_t i = 0; ok && i < n; i++)
        if (all[i].shared_bytes > 8192) {
            t_diag("%s takes %u bytes of shared memory", all[i].name, all[i].shared_bytes);
            ok = false;
        }
    ok = ok && kernel_find(gpu, "flash_d256", &d256) && d256.available &&
         kernel_find(gpu, "flash_d576", &d576) && !d576.available && !d576.shader[0] &&
         d576.param_count == 0 && !strcmp(d576.op, "attention");
    t_report(ok, "get_kernels with 8 KiB of shared memory: flash_d576 not available, "
                 "flash_d256 available (%u bytes), every kernel within 8 KiB",
             d256.shared_bytes);
    const char *limit = "8 KiB of shared memory";
    limited_attention_case(ref, gpu, rng, limit, 100, 72, VKMHA_ATTENTION_PATH_FUSED,
                           VKMHA_SUCCESS, "fused");
    limited_attention_case(ref, gpu, rng, limit, 200, 136, VKMHA_ATTENTION_PATH_FUSED,
                           VKMHA_SUCCESS, "fused");
    limited_attention_case(ref, gpu, rng, limit, 300, 264, VKMHA_ATTENTION_PATH_AUTO,
                           VKMHA_SUCCESS, "unfused");
    limited_attention_case(ref, gpu, rng, limit, 300, 264, VKMHA_ATTENTION_PATH_FUSED,
                           VKMHA_ERROR_UNSUPPORTED, "head dims up to 256");
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
}

/* maxPerStageDescriptorStorageBuffers lowered (Vulkan's minimum is 4;
 * some phones' drivers report 4): the workgroup-shared fused kernel binds 11 storage
 * buffers, the CPU-shaped one and the softmax 7 (vkmha_device_info).
 *   - 10, the workgroup-shared kernel forced, without push descriptors (so
 *     that descriptor sets are allocated, none of the fused kernel's
 *     interface): no flash_d* kernel available, the attention of the
 *     default path runs unfused and matches the reference, the fused path
 *     is UNSUPPORTED naming the limit, the layer is right;
 *   - 7: the CPU-shaped fused kernel (a CPU device's) at exactly its count
 *     still runs the fused path (on GPUs, which have no CPU-shaped kernel,
 *     the fused path is then UNSUPPORTED as above);
 *   - 6 and 4: vkmha_context_create is UNSUPPORTED naming the limit and the
 *     softmax kernel, and leaves no context. */
static void storage_buffer_cases(vkmha_context *ref, t_rng *rng)
{
    vkmha_debug_options ten = {.fused_kernel = VKMHA_FUSED_KERNEL_SHARED,
                               .no_push_descriptors = true,
                               .max_storage_buffers_per_stage = 10};
    vkmha_context *gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &ten, record_plan, NULL);
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    t_report(info.device.max_storage_buffers_per_stage == 10 && !info.push_descriptors,
             "get_info reports maxPerStageDescriptorStorageBuffers %u (lowered)",
             info.device.max_storage_buffers_per_stage);
    vkmha_kernel_info all[80];
    uint32_t n = 80, flash = 0;
    bool ok = vkmha_context_get_kernels(gpu, &n, all) == VKMHA_SUCCESS && n <= 80;
    for (uint32_t i = 0; ok && i < n; i++)
        if (!strncmp(all[i].name, "flash_d", 7) || !strncmp(all[i].name, "flash_coop_d", 12)) {
            flash++;
            if (all[i].available) {
                t_diag("%s is available", all[i].name);
                ok = false;
            }
        }
    t_report(ok && flash >= 6, "get_kernels with 10 storage buffers a stage: none of the %u "
                               "workgroup-shared fused kernels available", flash);
    const char *limit = "10 storage buffers a stage";
    limited_attention_case(ref, gpu, rng, limit, 64, 40, VKMHA_ATTENTION_PATH_AUTO,
                           VKMHA_SUCCESS, "unfused");
    limited_attention_case(ref, gpu, rng, limit, 64, 40, VKMHA_ATTENTION_PATH_FUSED,
                           VKMHA_ERROR_UNSUPPORTED, "maxPerStageDescriptorStorageBuffers (10)");
    /* The layer of layer_case (masks, weights), on the default path. */
    t_layer l;
    t_layer_make(&l, rng, 32, 4, 2, 2, 100, 23,
                 VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL | VKMHA_MASK_BIAS);
    vkmha_mha *mr = NULL, *mg = NULL;
    float *want = t_alloc(l.n_out), *got = t_alloc(l.n_out);
    float *want_w = t_alloc(l.n_weights), *got_w = t_alloc(l.n_weights);
    vkmha_mha_io io = l.io, gio = l.io;
    io.out = want, io.attn_weights = want_w, gio.out = got, gio.attn_weights = got_w;
    const char *name = "mha forward B 2 Lq 100 Lk 23 d_model 32 H 4 Hkv 2, masks, weights, "
                       "10 storage buffers a stage";
    vkmha_status st = vkmha_mha_create(gpu, &l.desc, &mg);
    st = st ? st : vkmha_mha_forward(mg, &gio);
    t_report(st == VKMHA_SUCCESS && !vkmha_mha_create(ref, &l.desc, &mr) &&
                 !vkmha_mha_forward(mr, &io) &&
                 t_close(name, "attn_weights", got_w, want_w, l.n_weights, 1e-6, 1e-5) &&
                 t_close(name, "out", got, want, l.n_out, T_LAYER_ATOL, T_LAYER_RTOL),
             "%s: %s, matches the reference", name, vkmha_status_string(st));
    vkmha_mha_destroy(mr);
    vkmha_mha_destroy(mg);
    free(want), free(got), free(want_w), free(got_w);
    t_layer_free(&l);
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);

    vkmha_debug_options seven = {.max_storage_buffers_per_stage = 7};
    gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &seven, record_plan, NULL);
    vkmha_context_get_info(gpu, &info);
    const bool cpu = info.device.type == VKMHA_DEVICE_TYPE_CPU;
    limited_attention_case(ref, gpu, rng, "7 storage buffers a stage", 64, 40,
                           VKMHA_ATTENTION_PATH_FUSED,
                           cpu ? VKMHA_SUCCESS : VKMHA_ERROR_UNSUPPORTED,
                           cpu ? "fused" : "maxPerStageDescriptorStorageBuffers (7)");
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);

    const uint32_t refused[] = {6, 4};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        vkmha_debug_options d = {.max_storage_buffers_per_stage = refused[i]};
        vkmha_context_desc cd = {.backend = VKMHA_BACKEND_VULKAN, .debug = &d};
        vkmha_context *c = NULL;
        char want[64];
        snprintf(want, sizeof want, "maxPerStageDescriptorStorageBuffers is %u", refused[i]);
        const vkmha_status st = vkmha_context_create(&cd, &c);
        const char *msg = vkmha_context_last_error(NULL);
        t_report(st == VKMHA_ERROR_UNSUPPORTED && !c && strstr(msg, want) &&
                     strstr(msg, "softmax"),
                 "%u storage buffers a stage: context creation %s (%s)", refused[i],
                 vkmha_status_string(st), msg);
        vkmha_context_destroy(c);
    }
}

int main(void)
{
    t_rng rng = {99};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);

    /* maxComputeWorkGroupCount 3 x 2 x 2. */
    vkmha_debug_options grid = {.max_workgroup_count = {3, 2, 2}};
    vkmha_context *gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &grid, count_splits, NULL);
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    t_report(info.device.max_workgroup_count[0] == 3 && info.device.max_workgroup_count[1] == 2 &&
                 info.device.max_workgroup_count[2] == 2,
             "vkmha_context_get_info reports the lowered maxComputeWorkGroupCount %u x %u x %u",
             info.device.max_workgroup_count[0], info.device.max_workgroup_count[1],
             info.device.max_workgroup_count[2]);
    matmul_case(ref, gpu, &rng, 5, 129, 75, 17, VKMHA_OP_T, false);
    matmul_case(ref, gpu, &rng, 3, 67, 36, 20, VKMHA_OP_N, true); /* vec4 loads */
    matmul_case(ref, gpu, &rng, 1, 300, 9, 3, VKMHA_OP_N, false);
    softmax_case(ref, gpu, &rng, 37, 75);
    softmax_case(ref, gpu, &rng, 37, 76);
    heads_case(ref, gpu, &rng, true, &(vkmha_heads_desc){2, 37, 3, 24, 0},
               "%s_heads B 2 L 37 H 3 d 24");
    heads_case(ref, gpu, &rng, false, &(vkmha_heads_desc){2, 37, 3, 24, 0},
               "%s_heads B 2 L 37 H 3 d 24");
    /* 130 queries: 3 blocks of a GPU's 64 per (batch, head), 24 workgroups
     * (37 fit the 12 lowered ones on an H100 without a split). */
    const vkmha_attention_desc gqa = {2, 4, 2, 130, 75, 16, 24, 0, 0, 0, 0};
    attention_case(ref, gpu, &rng, &gqa,
                   VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL | VKMHA_MASK_BIAS, true);
    /* Decode-like: split-K and several key chunks per range on CPU devices. */
    const vkmha_attention_desc decode = {1, 8, 2, 3, 2100, 8, 8, 0, 0, 0, 0};
    attention_case(ref, gpu, &rng, &decode, VKMHA_MASK_KEY_PADDING, false);
    layer_case(ref, gpu, &rng);
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);

    shared_memory_cases(ref, &rng);
    storage_buffer_cases(ref, &rng);

    /* The mobile profile: every limit it names lowered (where the device's
     * is higher), every kernel within them, the ops and the layer right. */
    vkmha_debug_options mobile = {.profile = VKMHA_DEBUG_PROFILE_MOBILE};
    gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &mobile, NULL, NULL);
    vkmha_context_get_info(gpu, &info);
    const vkmha_device_info *di = &info.device;
    bool ok = di->max_shared_memory <= 16384 && di->max_workgroup_invocations <= 128 &&
              di->max_workgroup_size[0] <= 128 && di->max_workgroup_size[1] <= 128 &&
              di->max_workgroup_size[2] <= 128 && di->max_storage_buffer_range <= (128u << 20) &&
              di->max_allocation_size <= (256u << 20) && !info.push_descriptors &&
              !info.subgroup_ops_used && !info.native_16bit_storage;
    vkmha_kernel_info kernels[64];
    uint32_t n_kernels = 64;
    ok = ok && vkmha_context_get_kernels(gpu, &n_kernels, kernels) == VKMHA_SUCCESS;
    for (uint32_t i = 0; ok && i < n_kernels && i < 64; i++)
        if (kernels[i].available && (kernels[i].workgroup_size > 128 ||
                                     kernels[i].shared_bytes > 16384)) {
            t_diag("mobile profile: kernel %s: %u invocations, %u shared bytes",
                   kernels[i].name, kernels[i].workgroup_size, kernels[i].shared_bytes);
            ok = false;
        }
    t_report(ok, "the mobile profile: shared memory %u, %u invocations (%u x %u x %u), "
                 "storage range %llu, allocations %llu, no push descriptors, no subgroup "
                 "arithmetic, no 16-bit storage; every kernel within them",
             di->max_shared_memory, di->max_workgroup_invocations, di->max_workgroup_size[0],
             di->max_workgroup_size[1], di->max_workgroup_size[2],
             (unsigned long long)di->max_storage_buffer_range,
             (unsigned long long)di->max_allocation_size);
    g_need_splits = false;
    matmul_case(ref, gpu, &rng, 5, 129, 75, 17, VKMHA_OP_T, false);
    softmax_case(ref, gpu, &rng, 37, 75);
    heads_case(ref, gpu, &rng, true, &(vkmha_heads_desc){2, 37, 3, 24, 0},
               "%s_heads B 2 L 37 H 3 d 24");
    attention_case(ref, gpu, &rng, &gqa,
                   VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL | VKMHA_MASK_BIAS, true);
    attention_case(ref, gpu, &rng, &decode, VKMHA_MASK_KEY_PADDING, false);
    layer_case(ref, gpu, &rng);
    g_need_splits = true;
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
    const struct {
        vkmha_debug_options d;
        const char *word;
    } bad[] = {{{.profile = 7}, "profile"},
                 {{.max_workgroup_invocations = UINT32_MAX}, "max_workgroup_invocations"},
                 {{.max_storage_buffers_per_stage = UINT32_MAX},
                  "max_storage_buffers_per_stage"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vkmha_context_desc cd = {.backend = VKMHA_BACKEND_VULKAN, .debug = &bad[i].d};
        vkmha_context *c = NULL;
        vkmha_status st = vkmha_context_create(&cd, &c);
        t_report(st == VKMHA_ERROR_INVALID_ARGUMENT && !c &&
                     strstr(vkmha_context_last_error(NULL), bad[i].word),
                 "desc->debug with a bad %s: %s (%s)", bad[i].word, vkmha_status_string(st),
                 vkmha_context_last_error(NULL));
        vkmha_context_destroy(c);
    }

    vkmha_context_destroy(ref);
    return t_finish();
}
