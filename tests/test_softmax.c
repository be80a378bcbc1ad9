/* vkmha_softmax on Vulkan vs the reference backend: row lengths below, at
 * and above the workgroup size, scale, every mask kind alone and combined,
 * fully masked rows, logits around +-1e4, and in-place use.
 *
 * Tolerance: |gpu - ref| <= ATOL + RTOL * |ref| per weight. The inputs are
 * exact in fp32 and max-subtraction keeps exp's argument <= 0, so the error
 * is a few ulp of exp and of the row sum. */
#include "util.h"

#define ATOL 1e-6
#define RTOL 1e-5

typedef struct sm_case {
    uint32_t batch, heads, len_q, len_k;
    float scale;
    uint32_t kinds;   /* vkmha_mask_kind */
    uint32_t bias_batch, bias_heads;
    float center;     /* inputs uniform in center +- spread */
    float spread;
    bool fully_masked_row; /* key padding of batch 0 masks everything */
    bool in_place;
} sm_case;

static void run_case(vkmha_context *ref, vkmha_context *gpu, const char *tag, t_rng *rng, const sm_case *c)
{
    char name[200], mname[64];
    snprintf(name, sizeof name,
             "softmax B %u H %u Lq %u Lk %u scale %g mask %s bias %ux%u center %g%s%s",
             c->batch, c->heads, c->len_q, c->len_k, (double)c->scale, t_mask_name(c->kinds, mname, sizeof mname), c->bias_batch,
             c->bias_heads, (double)c->center, c->fully_masked_row ? " fully-masked-row" : "",
             c->in_place ? " in-place" : "");
    size_t n = (size_t)c->batch * c->heads * c->len_q * c->len_k;
    float *x = t_random(rng, n, c->center - c->spread, c->center + c->spread);
    float *want = t_alloc(n), *got = t_alloc(n);
    t_mask tm;
    const vkmha_mask *m = t_mask_make(&tm, rng, c->kinds, c->batch, c->heads, c->len_q, c->len_k,
                                      c->bias_batch, c->bias_heads, c->fully_masked_row);
    vkmha_softmax_desc d = {c->batch, c->heads, c->len_q, c->len_k, c->scale, 0};
    bool ok = true;
    T_EXPECT_STATUS(vkmha_softmax(ref, &d, x, m, want), VKMHA_SUCCESS, ok);
    if (c->in_place) {
        memcpy(got, x, n * sizeof *x);
        T_EXPECT_STATUS(vkmha_softmax(gpu, &d, got, m, got), VKMHA_SUCCESS, ok);
    } else {
        T_EXPECT_STATUS(vkmha_softmax(gpu, &d, x, m, got), VKMHA_SUCCESS, ok);
    }
    if (!ok)
        t_diag("%s", vkmha_context_last_error(gpu));
    if (ok)
        ok = t_close(name, "y", got, want, n, ATOL, RTOL);
    /* A fully masked row is exactly uniform, as masked_fill(-1e9) gives:
     * every weight the same, 1/len_k within the 2.5 ulp Vulkan allows a
     * division (NVIDIA's is not correctly rounded). */
    const float uniform = 1.0f / (float)c->len_k,
                div_ulps = 3 * (nextafterf(uniform, 1.0f) - uniform);
    if (ok && c->fully_masked_row)
        for (uint32_t j = 0; j < c->len_k && ok; j++)
            if (got[j] != got[0] || fabsf(got[j] - uniform) > div_ulps) {
                t_diag("%s: fully masked row y[%u] = %.9g (y[0] = %.9g), expected 1/%u", name,
                       j, (double)got[j], (double)got[0], c->len_k);
                ok = false;
            }
    t_report(ok, "%s [%s]", name, tag);
    free(x);
    free(want);
    free(got);
    t_mask_free(&tm);
}

int main(void)
{
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    t_rng rng = {7};
    const uint32_t KP = VKMHA_MASK_KEY_PADDING, FULL = VKMHA_MASK_FULL,
                   CAUSAL = VKMHA_MASK_CAUSAL, BIAS = VKMHA_MASK_BIAS;
    static const sm_case cases[] = {
        /* B H Lq Lk scale kinds bb bh center spread fully in-place */
        {1, 1, 1, 1, 0, 0, 0, 0, 0, 3, false, false},
        {1, 1, 3, 17, 0, 0, 0, 0, 0, 3, false, false},
        {2, 3, 5, 75, 0.125f, 0, 0, 0, 0, 8, false, false},
        {1, 2, 4, 129, 0, 0, 0, 0, 0, 3, false, true},
        {2, 1, 3, 300, 0, 0, 0, 0, 0, 3, false, false},
        {1, 1, 2, 1000, 0, 0, 0, 0, 0, 3, false, false}, /* rows longer than a workgroup */
        {2, 2, 7, 17, 0, KP, 0, 0, 0, 3, false, false},
        {2, 2, 7, 17, 0, FULL, 0, 0, 0, 3, false, false},
        {1, 3, 17, 17, 0, CAUSAL, 0, 0, 0, 3, false, false},
        {1, 2, 5, 12, 0, CAUSAL, 0, 0, 0, 3, false, false},  /* causal, Lq < Lk */
        {1, 2, 12, 5, 0, CAUSAL, 0, 0, 0, 3, false, false},  /* causal, Lq > Lk */
        {2, 3, 4, 33, 0, BIAS, 1, 1, 0, 3, false, false},    /* bias broadcast */
        {2, 3, 4, 33, 0, BIAS, 0, 0, 0, 3, false, false},    /* bias per batch and head */
        {2, 3, 4, 33, 0.5f, BIAS, 2, 1, 0, 3, false, false}, /* bias per batch */
        {2, 3, 4, 33, 0, BIAS, 1, 3, 0, 3, false, false},    /* bias per head */
        {2, 2, 9, 9, 0.7f, KP | FULL | CAUSAL | BIAS, 1, 2, 0, 3, false, false},
        {2, 2, 3, 75, 0, KP, 0, 0, 0, 3, true, false},       /* fully masked row */
        {2, 1, 4, 40, 0, KP | CAUSAL, 0, 0, 0, 3, true, false},
        {1, 2, 3, 129, 0, 0, 0, 0, 1e4f, 20, false, false},  /* logits around +1e4 */
        {1, 2, 3, 129, 0, KP, 0, 0, -1e4f, 20, false, false},/* around -1e4, masked */
        /* A fully masked row of logits spread over +-1e4: -1e9 is set, not
         * added, so the row is exactly uniform (x - 1e9 would not be). */
        {2, 2, 3, 64, 0, KP, 0, 0, 0, 1e4f, true, false},
    };
    /* Reductions with subgroup arithmetic, then with shared memory only. */
    for (int variant = 0; variant < 2; variant++) {
        vkmha_context *gpu = t_context(VKMHA_BACKEND_VULKAN,
                                       variant ? VKMHA_CONTEXT_NO_SUBGROUP_OPS : 0);
        const char *tag = variant ? "shared-memory reduction" : "subgroup reduction";
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_case(ref, gpu, tag, &rng, &cases[i]);
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
    }
    vkmha_context_destroy(ref);
    return t_finish();
}
