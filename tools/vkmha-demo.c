/* vkmha-demo: one multi-head attention forward on Vulkan and on the scalar
 * reference backend, with the same random weights and inputs; prints the time
 * of each and the largest difference, and fails (exit 1) when an element
 * differs by more than the stated tolerance.
 *
 *   vkmha-demo [--d-model 512] [--heads 8] [--kv-heads H] [--len 128]
 *              [--len-k L] [--batch 2] [--mask none|causal|padding|full|bias|all]
 *              [--bias] [--post-norm] [--path auto|fused|unfused] [--reps 5]
 *              [--dtype f32|f16|bf16] [--validation] [--device N] [--verbose]
 *              (--help describes them) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vkmha.h"
#include "cli.h"
#include "half.h" /* src/half.c: the library's fp16 / bf16 rounding */

/* |vulkan - reference| <= ATOL + RTOL * |reference|, as in tests/test_mha.c;
 * with --dtype f16 / bf16, 8 units of the format's roundoff each, as in
 * tests/test_dtype.c (the layer rounds four activations on the way). */
#define ATOL 1e-5
#define RTOL 1e-4

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static float uniform(float lo, float hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((rng_state >> 40) * (1.0 / 16777216.0));
}

/* malloc, or exit with status 1 after a message (sizes from the options). */
static void *alloc_or_exit(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "vkmha-demo: out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static float *random_array(size_t n, float lo, float hi)
{
    float *p = alloc_or_exit(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = uniform(lo, hi);
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    uint32_t d_model = 512, heads = 8, kv_heads = 0, len = 128, len_k = 0, batch = 2, reps = 5;
    bool bias = false, post_norm = false, verbose = false;
    const char *mask_name = "none", *path_name = "auto", *dtype_name = "f32";
    vkmha_context_desc vdesc = {0};
    static const char *const masks[] = {"none", "causal", "padding", "full", "bias", "all", NULL};
    static const char *const paths[] = {"auto", "fused", "unfused", NULL};
    static const char *const dtypes[] = {"f32", "f16", "bf16", NULL};
    /* Limits keep every array size far from size_t overflow; memory runs out
     * first (a message and exit status 1). */
    const cli_opt opts[] = {
        CLI_U32("--d-model", "N", d_model, 1, 65536, "model width (default 512; a multiple of --heads)"),
        CLI_U32("--heads", "N", heads, 1, 65536, "query heads (default 8)"),
        CLI_U32("--kv-heads", "N", kv_heads, 1, 65536,
                "key/value heads, dividing --heads (default: --heads)"),
        CLI_U32("--len", "N", len, 1, 1u << 20, "query length (default 128)"),
        CLI_U32("--len-k", "N", len_k, 1, 1u << 20,
                "key length, cross-attention (default: self-attention, --len)"),
        CLI_U32("--batch", "N", batch, 1, 65536, "batch size (default 2)"),
        CLI_CHOICE("--mask", "KIND", mask_name, masks, "mask kinds (default none)"),
        CLI_FLAG("--bias", bias, "projection biases"),
        CLI_FLAG("--post-norm", post_norm, "out = LayerNorm(query + attention)"),
        CLI_CHOICE("--path", "PATH", path_name, paths, "attention path (default auto)"),
        CLI_CHOICE("--dtype", "TYPE", dtype_name, dtypes,
                   "weights stored and activations computed in f32 (default), f16 or bf16"),
        CLI_U32("--reps", "N", reps, 1, 100000,
                "timed Vulkan forwards, the median is printed (default 5)"),
        CLI_FLAG("--validation", vdesc.enable_validation,
                 "enable the Vulkan validation layer; any message fails the demo"),
        {.name = "--device", .metavar = "N",
         .help = "Vulkan device N of vkmha-info's list (default: automatic)",
         .u32 = &vdesc.device_index, .given = &vdesc.use_device_index},
        CLI_FLAG("--verbose", verbose,
                 "also print vkmha's debug and info messages (each forward's plan)"),
    };
    CLI_PARSE("vkmha-demo",
              "One multi-head attention forward on Vulkan and on the scalar reference backend,\n"
              "with the same random weights and inputs: prints the time of each and the\n"
              "largest difference; exit status 1 when an element differs by more than\n"
              "1e-5 + 1e-4 * |reference| (f16: 8 * 2^-11 each, bf16: 8 * 2^-8) or on any\n"
              "error, 2 for bad options.",
              opts, argc, argv);
    /* Warnings and errors always (the validation layer's included), the
     * plan of each forward only with --verbose. */
    vdesc.log = cli_log_stderr;
    vdesc.log_level = verbose ? VKMHA_LOG_DEBUG : VKMHA_LOG_DEFAULT;
    uint32_t Lk = len_k ? len_k : len;
    uint32_t hkv = kv_heads ? kv_heads : heads;

    const uint32_t dtype = !strcmp(dtype_name, "f16")    ? VKMHA_DTYPE_F16
                           : !strcmp(dtype_name, "bf16") ? VKMHA_DTYPE_BF16
                                                         : VKMHA_DTYPE_F32;
    const double atol = dtype == VKMHA_DTYPE_F16 ? 8 * 0x1p-11
                        : dtype == VKMHA_DTYPE_BF16 ? 8 * 0x1p-8 : ATOL,
                 rtol = dtype == VKMHA_DTYPE_F32 ? RTOL : atol;
    vkmha_attention_path path = VKMHA_ATTENTION_PATH_AUTO;
    if (!strcmp(path_name, "fused"))
        path = VKMHA_ATTENTION_PATH_FUSED;
    else if (!strcmp(path_name, "unfused"))
        path = VKMHA_ATTENTION_PATH_UNFUSED;

    vkmha_mask mask = {0};
    if (!strcmp(mask_name, "causal"))
        mask.kinds = VKMHA_MASK_CAUSAL;
    else if (!strcmp(mask_name, "padding"))
        mask.kinds = VKMHA_MASK_KEY_PADDING;
    else if (!strcmp(mask_name, "full"))
        mask.kinds = VKMHA_MASK_FULL;
    else if (!strcmp(mask_name, "bias"))
        mask.kinds = VKMHA_MASK_BIAS;
    else if (!strcmp(mask_name, "all"))
        mask.kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_FULL | VKMHA_MASK_CAUSAL |
                     VKMHA_MASK_BIAS;
    uint8_t *kp = NULL, *full = NULL;
    float *mbias = NULL;
    if (mask.kinds & VKMHA_MASK_KEY_PADDING) {
        /* Batch entry b keeps its first Lk - b keys (padding at the end). */
        kp = alloc_or_exit((size_t)batch * Lk);
        for (uint32_t b = 0; b < batch; b++)
            for (uint32_t j = 0; j < Lk; j++)
                kp[(size_t)b * Lk + j] = j + b < Lk;
        mask.key_padding = kp;
    }
    if (mask.kinds & VKMHA_MASK_FULL) {
        full = alloc_or_exit((size_t)batch * len * Lk);
        for (size_t i = 0; i < (size_t)batch * len * Lk; i++)
            full[i] = uniform(0, 1) > 0.2f;
        mask.full = full;
    }
    if (mask.kinds & VKMHA_MASK_BIAS) {
        mbias = random_array((size_t)heads * len * Lk, -1, 1);
        mask.bias = mbias;
        mask.bias_batch = 1;
    }

    vkmha_mha_desc d = {0};
    d.d_model = d_model;
    d.n_head = heads;
    d.n_kv_head = kv_heads;
    d.post_norm = post_norm;
    if (d_model % heads || heads % hkv) {
        fprintf(stderr, "vkmha-demo: --d-model (%u) must be a multiple of --heads (%u), and "
                        "--heads of --kv-heads (%u)\n(vkmha-demo --help lists the options)\n",
                d_model, heads, hkv);
        return 2;
    }
    uint32_t dh = d_model / heads;
    float bound = 1.0f / sqrtf((float)d_model);
    float *w_q = random_array((size_t)d_model * d_model, -bound, bound);
    float *w_k = random_array((size_t)hkv * dh * d_model, -bound, bound);
    float *w_v = random_array((size_t)hkv * dh * d_model, -bound, bound);
    float *w_o = random_array((size_t)d_model * d_model, -bound, bound);
    float *b_all = bias ? random_array((size_t)4 * d_model, -bound, bound) : NULL;
    d.w_q = w_q;
    d.w_k = w_k;
    d.w_v = w_v;
    d.w_o = w_o;
    if (bias) {
        d.b_q = b_all;
        d.b_k = b_all + d_model;
        d.b_v = b_all + 2 * d_model;
        d.b_o = b_all + 3 * d_model;
    }
    size_t nq = (size_t)batch * len * d_model, nk = (size_t)batch * Lk * d_model;
    float *query = random_array(nq, -1, 1);
    float *key = len_k ? random_array(nk, -1, 1) : query;
    float *value = len_k ? random_array(nk, -1, 1) : query;
    float *out_vk = alloc_or_exit(nq * sizeof(float)), *out_ref = alloc_or_exit(nq * sizeof(float));
    /* Both backends get the same 16-bit inputs; outputs are widened to
     * compare (the weights are rounded by vkmha_mha_create, storage_dtype). */
    const size_t es = vkmha__dtype_size(dtype);
    void *q16 = alloc_or_exit(nq * es), *k16 = query, *v16 = query;
    void *o16 = alloc_or_exit(nq * es);
    vkmha__from_f32(dtype, query, nq, q16);
    if (len_k) {
        k16 = alloc_or_exit(nk * es), v16 = alloc_or_exit(nk * es);
        vkmha__from_f32(dtype, key, nk, k16);
        vkmha__from_f32(dtype, value, nk, v16);
    } else {
        k16 = v16 = q16;
    }
    d.storage_dtype = dtype;
    vkmha_mha_io io = {.batch = batch, .len_q = len, .len_k = len_k, .query = q16,
                       .key = k16, .value = v16, .mask = mask.kinds ? &mask : NULL,
                       .out = o16, .attention_path = path, .dtype = dtype};

    printf("vkmha-demo: batch %u, len_q %u, len_k %u, d_model %u, %u heads (%u kv), mask %s%s%s, "
           "attention path %s, %s\n",
           batch, len, Lk, d_model, heads, hkv, mask_name, bias ? ", biases" : "",
           post_norm ? ", post-norm" : "", path_name, dtype_name);

    vkmha_context *vk = NULL, *ref = NULL;
    vkmha_context_desc rdesc = {0};
    rdesc.backend = VKMHA_BACKEND_REFERENCE;
    rdesc.log = cli_log_stderr;
    vkmha_mha *mvk = NULL, *mref = NULL;
    int rc = 1;
    if (vkmha_context_create(&vdesc, &vk) || vkmha_context_create(&rdesc, &ref) ||
        vkmha_mha_create(vk, &d, &mvk) || vkmha_mha_create(ref, &d, &mref))
        goto done;
    vkmha_context_info info;
    vkmha_context_get_info(vk, &info);
    printf("device: %s (%s %s)\n", info.device.name, info.device.driver_name,
           info.device.driver_info);

    /* Vulkan: one warm-up (pipelines, buffers), then the median of reps. */
    if (vkmha_mha_forward(mvk, &io))
        goto done;
    double *times = alloc_or_exit(reps * sizeof *times);
    for (uint32_t r = 0; r < reps; r++) {
        double t0 = now_ms();
        if (vkmha_mha_forward(mvk, &io)) {
            free(times);
            goto done;
        }
        times[r] = now_ms() - t0;
    }
    qsort(times, reps, sizeof *times, cmp_double);
    double t_vk = times[reps / 2];
    free(times);
    vkmha__to_f32(dtype, o16, nq, out_vk);

    double t0 = now_ms();
    if (vkmha_mha_forward(mref, &io))
        goto done;
    double t_ref = now_ms() - t0;
    vkmha__to_f32(dtype, o16, nq, out_ref);

    double max_abs = 0, worst_excess = -1;
    size_t worst = 0;
    for (size_t i = 0; i < nq; i++) {
        double e = fabs((double)out_vk[i] - (double)out_ref[i]);
        /* NaN against a number is a failure; NaN against NaN agrees. */
        double excess = isnan(e) ? (isnan(out_vk[i]) && isnan(out_ref[i]) ? -1 : INFINITY)
                                 : e - (atol + rtol * fabs((double)out_ref[i]));
        if (!(e <= max_abs))
            max_abs = e;
        if (!(excess <= worst_excess))
            worst_excess = excess, worst = i;
    }
    printf("vulkan    %10.3f ms  (median of %u)\n", t_vk, reps);
    printf("reference %10.3f ms\n", t_ref);
    printf("max |vulkan - reference| = %.3g (tolerance %.2g + %.2g * |reference|)\n", max_abs,
           atol, rtol);
    if (vdesc.enable_validation)
        printf("validation layer messages: %llu\n",
               (unsigned long long)(vkmha_context_get_info(vk, &info), info.validation_messages));
    rc = worst_excess > 0 || (vdesc.enable_validation && info.validation_messages) ? 1 : 0;
    if (worst_excess > 0)
        printf("FAIL: out[%zu] = %.9g, reference %.9g\n", worst, (double)out_vk[worst],
               (double)out_ref[worst]);
    else
        printf("PASS\n");
done:
    /* Errors were printed by cli_log_stderr (every failure reaches the logger). */
    vkmha_mha_destroy(mvk);
    vkmha_mha_destroy(mref);
    vkmha_context_destroy(vk);
    vkmha_context_destroy(ref);
    free(w_q), free(w_k), free(w_v), free(w_o), free(b_all);
    if (key != query)
        free(key);
    if (value != query)
        free(value);
    if (k16 != q16)
        free(k16), free(v16);
    free(q16), free(o16);
    free(query), free(out_vk), free(out_ref), free(kp), free(full), free(mbias);
    return rc;
}
