/* vkmha-demo: one multi-head attention forward on Vulkan and on the scalar
 * reference backend, with the same random weights and inputs; prints the time
 * of each and the largest difference, and fails (exit 1) when an element
 * differs by more than the stated tolerance.
 *
 *   vkmha-demo [--d-model 512] [--heads 8] [--kv-heads H] [--len 128]
 *              [--len-k L] [--batch 2] [--mask none|causal|padding|full|bias|all]
 *              [--bias] [--post-norm] [--path auto|fused|unfused] [--reps 5]
 *              [--validation] [--device N] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vkmha.h"

/* |vulkan - reference| <= ATOL + RTOL * |reference|, as in tests/test_mha.c. */
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

static float *random_array(size_t n, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = uniform(lo, hi);
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void log_stderr(void *user, vkmha_log_level level, vkmha_status status, const char *msg)
{
    (void)user;
    (void)level;
    fprintf(stderr, "vkmha: %s: %s\n", vkmha_status_string(status), msg);
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--d-model N] [--heads N] [--kv-heads N] [--len N] [--len-k N]\n"
            "          [--batch N] [--mask none|causal|padding|full|bias|all] [--bias]\n"
            "          [--post-norm] [--path auto|fused|unfused] [--reps N]\n"
            "          [--validation] [--device N]\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    uint32_t d_model = 512, heads = 8, kv_heads = 0, len = 128, len_k = 0, batch = 2, reps = 5;
    bool bias = false, post_norm = false;
    const char *mask_name = "none", *path_name = "auto";
    vkmha_context_desc vdesc = {0};
    vdesc.log = log_stderr;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--bias"))
            bias = true;
        else if (!strcmp(a, "--post-norm"))
            post_norm = true;
        else if (!strcmp(a, "--validation"))
            vdesc.enable_validation = true;
        else if (!v)
            usage(argv[0]);
        else if (!strcmp(a, "--d-model"))
            d_model = (uint32_t)atoi(v), i++;
        else if (!strcmp(a, "--heads"))
            heads = (uint32_t)atoi(v), i++;
        else if (!strcmp(a, "--kv-heads"))
            kv_heads = (uint32_t)atoi(v), i++;
        else if (!strcmp(a, "--len"))
            len = (uint32_t)atoi(v), i++;
        else if (!strcmp(a, "--len-k"))
            len_k = (uint32_t)atoi(v), i++;
        else if (!strcmp(a, "--batch"))
            batch = (uint32_t)atoi(v), i++;
        else if (!strcmp(a, "--reps"))
            reps = (uint32_t)atoi(v), i++;
        else if (!strcmp(a, "--mask"))
            mask_name = v, i++;
        else if (!strcmp(a, "--path"))
            path_name = v, i++;
        else if (!strcmp(a, "--device"))
            vdesc.use_device_index = true, vdesc.device_index = (uint32_t)atoi(v), i++;
        else
            usage(argv[0]);
    }
    if (reps == 0)
        reps = 1;
    uint32_t Lk = len_k ? len_k : len;
    uint32_t hkv = kv_heads ? kv_heads : heads;

    vkmha_attention_path path = VKMHA_ATTENTION_PATH_AUTO;
    if (!strcmp(path_name, "fused"))
        path = VKMHA_ATTENTION_PATH_FUSED;
    else if (!strcmp(path_name, "unfused"))
        path = VKMHA_ATTENTION_PATH_UNFUSED;
    else if (strcmp(path_name, "auto"))
        usage(argv[0]);

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
    else if (strcmp(mask_name, "none"))
        usage(argv[0]);
    uint8_t *kp = NULL, *full = NULL;
    float *mbias = NULL;
    if (mask.kinds & VKMHA_MASK_KEY_PADDING) {
        /* Batch entry b keeps its first Lk - b keys (padding at the end). */
        kp = malloc((size_t)batch * Lk);
        for (uint32_t b = 0; b < batch; b++)
            for (uint32_t j = 0; j < Lk; j++)
                kp[(size_t)b * Lk + j] = j + b < Lk;
        mask.key_padding = kp;
    }
    if (mask.kinds & VKMHA_MASK_FULL) {
        full = malloc((size_t)batch * len * Lk);
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
    if (heads == 0 || d_model % heads) {
        fprintf(stderr, "--d-model must be a multiple of --heads\n");
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
    float *out_vk = malloc(nq * sizeof(float)), *out_ref = malloc(nq * sizeof(float));
    vkmha_mha_io io = {batch, len, len_k, query, key, value, mask.kinds ? &mask : NULL,
                       out_vk, NULL, path, 0};

    printf("vkmha-demo: batch %u, len_q %u, len_k %u, d_model %u, %u heads (%u kv), mask %s%s%s, "
           "attention path %s\n",
           batch, len, Lk, d_model, heads, hkv, mask_name, bias ? ", biases" : "",
           post_norm ? ", post-norm" : "", path_name);

    vkmha_context *vk = NULL, *ref = NULL;
    vkmha_context_desc rdesc = {0};
    rdesc.backend = VKMHA_BACKEND_REFERENCE;
    rdesc.log = log_stderr;
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
    double *times = malloc(reps * sizeof *times);
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

    io.out = out_ref;
    double t0 = now_ms();
    if (vkmha_mha_forward(mref, &io))
        goto done;
    double t_ref = now_ms() - t0;

    double max_abs = 0, worst_excess = -1;
    size_t worst = 0;
    for (size_t i = 0; i < nq; i++) {
        double e = fabs((double)out_vk[i] - (double)out_ref[i]);
        double excess = e - (ATOL + RTOL * fabs((double)out_ref[i]));
        if (!(e <= max_abs))
            max_abs = e;
        if (!(excess <= worst_excess))
            worst_excess = excess, worst = i;
    }
    printf("vulkan    %10.3f ms  (median of %u)\n", t_vk, reps);
    printf("reference %10.3f ms\n", t_ref);
    printf("max |vulkan - reference| = %.3g (tolerance %.0e + %.0e * |reference|)\n", max_abs,
           ATOL, RTOL);
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
    if (rc && vk && vkmha_context_last_error(vk)[0])
        fprintf(stderr, "error: %s\n", vkmha_context_last_error(vk));
    vkmha_mha_destroy(mvk);
    vkmha_mha_destroy(mref);
    vkmha_context_destroy(vk);
    vkmha_context_destroy(ref);
    free(w_q), free(w_k), free(w_v), free(w_o), free(b_all);
    if (key != query)
        free(key);
    if (value != query)
        free(value);
    free(query), free(out_vk), free(out_ref), free(kp), free(full), free(mbias);
    return rc;
}
