/* Operands past the device's real maxStorageBufferRange, at 128 MiB
 * (lavapipe's; lowered to it through vkmha_debug_options on a device with
 * more): a 4096 x 14336 fp32 weight in vkmha_matmul (224 MiB; op T, so the
 * output's columns go in windows), with a bias, and an MHA layer with
 * d_model 8192 (four weights of 256 MiB) on both attention paths, each
 * against the reference backend element by element, and the debug log must
 * say the matmuls were split into windows; and attention whose one head
 * has 147 MiB of keys and of values (600000 keys of 64 floats, 4 queries
 * of 2 heads sharing them), which the shared-memory fused kernel reads in
 * windows of keys and lavapipe's CPU-shaped one through texel views.
 * test_limits does the same at a lowered 64 KiB on small shapes. Runs once
 * (suite reliability): it takes about 3.5 GiB of host memory (lavapipe's
 * device memory is host memory). */
#include "util.h"

#define RANGE (UINT64_C(128) << 20)

static int g_windows, g_texel;

static void count_windows(void *user, vkmha_log_level level, vkmha_status status,
                          const char *msg)
{
    (void)user, (void)status;
    if (level == VKMHA_LOG_DEBUG && ((strstr(msg, "windows") && strstr(msg, " split into ")) ||
                                     strstr(msg, " bound in windows ")))
        g_windows++;
    else if (level == VKMHA_LOG_DEBUG && strstr(msg, " through texel views "))
        g_texel++;
    else if (level <= VKMHA_LOG_WARN)
        t_log(NULL, level, status, msg);
}

/* A Vulkan context that believes a 128 MiB maxStorageBufferRange. */
static vkmha_context *context_at_range(void)
{
    vkmha_context *gpu = t_context_limited(RANGE, 0, count_windows, NULL);
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    t_diag("maxStorageBufferRange %llu bytes, maxMemoryAllocationSize %llu bytes",
           (unsigned long long)info.device.max_storage_buffer_range,
           (unsigned long long)info.device.max_allocation_size);
    return gpu;
}

/* Reports a call on gpu (st) whose result was `close` to the reference,
 * which must have been bound in one plan of windows (or, where texel is
 * true, read through texel views), then checks the validation layer and
 * destroys gpu. */
static void report_windows(vkmha_context *gpu, vkmha_status st, bool close, bool texel,
                           const char *what)
{
    if (st)
        t_diag("%s", vkmha_context_last_error(gpu));
    const bool bound = texel ? g_windows + g_texel == 1 : g_windows == 1 && g_texel == 0;
    t_report(!st && close && bound,
             "%s: %s, in windows (%d logged) or texel views (%d), matches the reference", what,
             vkmha_status_string(st), g_windows, g_texel);
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
}

static void matmul_case(vkmha_context *ref, t_rng *rng)
{
    const uint32_t m = 3, n = 14336, k = 4096;
    vkmha_context *gpu = context_at_range();
    float *a = t_random(rng, (size_t)m * k, -1, 1), *b = t_random(rng, (size_t)n * k, -1, 1);
    float *bias = t_random(rng, n, -1, 1), *want = t_alloc((size_t)m * n),
          *got = t_alloc((size_t)m * n);
    vkmha_matmul_desc d = {0};
    d.m = m, d.n = n, d.k = k, d.op_b = VKMHA_OP_T;
    g_windows = 0;
    const vkmha_status st = vkmha_matmul(gpu, &d, a, b, bias, got);
    report_windows(gpu, st,
                   !st && !vkmha_matmul(ref, &d, a, b, bias, want) &&
                       t_close("matmul 3 x 14336 x 4096", "c", got, want, (size_t)m * n,
                               2e-6 * sqrt((double)k), 1e-5),
                   false,
                   "matmul 3 x 14336 x 4096 op T, b of 224 MiB past a 128 MiB range, with a "
                   "bias");
    free(a), free(b), free(bias), free(want), free(got);
}

static void layer_case(vkmha_context *ref, t_rng *rng)
{
    t_layer l;
    t_layer_make(&l, rng, 8192, 64, 0, 1, 3, 0, VKMHA_MASK_CAUSAL); /* weights: 256 MiB */
    vkmha_context *gpu = context_at_range();
    float *got = t_alloc(l.n_out), *want = t_alloc(l.n_out);
    vkmha_mha *mg = NULL, *mr = NULL;
    vkmha_status st = vkmha_mha_create(gpu, &l.desc, &mg);
    if (st)
        t_diag("%s", vkmha_context_last_error(gpu));
    vkmha_mha_io io = l.io;
    io.out = want;
    const bool made = !st && !vkmha_mha_create(ref, &l.desc, &mr) && !vkmha_mha_forward(mr, &io);
    t_report(made, "mha_create d_model 8192 (four weights of 256 MiB past a 128 MiB range): %s",
             vkmha_status_string(st));
    for (int path = 0; path < 2 && made; path++) {
        io.out = got;
        io.attention_path = path ? VKMHA_ATTENTION_PATH_UNFUSED : VKMHA_ATTENTION_PATH_FUSED;
        g_windows = 0;
        st = vkmha_mha_forward(mg, &io);
        if (st)
            t_diag("%s", vkmha_context_last_error(gpu));
        t_report(!st && g_windows == 4 &&
                     t_close("d_model 8192", "out", got, want, l.n_out, T_LAYER_ATOL,
                             T_LAYER_RTOL),
                 "mha forward d_model 8192, 64 heads, L 3, causal [%s]: %s, the four "
                 "projections in windows (%d logged), matches the reference",
                 path ? "unfused" : "fused", vkmha_status_string(st), g_windows);
    }
    vkmha_mha_destroy(mg);
    vkmha_mha_destroy(mr);
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
    free(got), free(want);
    t_layer_free(&l);
}

/* On the default fused kernel (on CPU devices the CPU-shaped one, which
 * reads keys through texel views of whole buffers; on GPUs windows) and on
 * the shared-memory one (windows). */
static void attention_case(vkmha_context *ref, t_rng *rng)
{
    const vkmha_attention_desc d = {1, 2, 1, 4, 600000, 64, 64, 0, 0, 0, 0};
    const size_t nq = (size_t)2 * 4 * 64, nk = (size_t)600000 * 64;
    float *q = t_random(rng, nq, -1, 1), *k = t_random(rng, nk, -1, 1),
          *v = t_random(rng, nk, -1, 1), *want = t_alloc(nq), *got = t_alloc(nq);
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL}; /* the last 4 positions */
    const bool rok = !vkmha_attention(ref, &d, q, k, v, &causal, want, NULL);
    for (int shared = 0; shared < 2; shared++) {
        vkmha_context *gpu = t_context_limited_ex(
            RANGE, 0, shared ? VKMHA_FUSED_KERNEL_SHARED : 0, count_windows, NULL);
        g_windows = g_texel = 0;
        const vkmha_status st = vkmha_attention(gpu, &d, q, k, v, &causal, got, NULL);
        char what[200];
        snprintf(what, sizeof what,
                 "attention H 2 Hkv 1 Lq 4 Lk 600000 d 64, causal, 147 MiB of keys a head past "
                 "a 128 MiB range [%s fused kernel]",
                 shared ? "shared-memory" : "default");
        report_windows(gpu, st,
                       rok && !st &&
                           t_close("attention 600000 keys", "out", got, want, nq,
                                   2e-6 * sqrt(600000.0), 1e-5),
                       !shared, what);
    }
    free(q), free(k), free(v), free(want), free(got);
}

int main(void)
{
    t_rng rng = {8192};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    matmul_case(ref, &rng);
    layer_case(ref, &rng);
    attention_case(ref, &rng);
    vkmha_context_destroy(ref);
    return t_finish();
}
