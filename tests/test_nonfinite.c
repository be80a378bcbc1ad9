/* Hostile inputs as real users write them, on every attention path and both
 * backends: PyTorch float masks holding -inf (blocks of -inf at the start,
 * middle and end of a row, a single allowed key at either end, rows with no
 * allowed key at all, by bias, by key padding and by both), +Inf and NaN in
 * biases and inputs, and logits from 1e4 to 1e30 and down to subnormal.
 *
 * Semantics checked (include/vkmha.h, "Masks"):
 *   - a key masked by a mask kind scores -1e9 (set, not added, even over a
 *     -inf bias), so a row whose keys are all masked averages the values;
 *   - a -inf bias gives that key weight 0, wherever it stands in the row;
 *   - a row whose every score is -inf (every key -inf by bias, none masked)
 *     has no key to attend to: weights 0 and output 0;
 *   - +Inf or NaN in a row's scores make the row NaN.
 * The reference backend is first checked against these rules directly (exact
 * values computed here), then every Vulkan path is compared with it element
 * by element, NaN positions included: the default path, the fused path with
 * the keys in 1, 2, 3 and 7 ranges (split-K), and the unfused path; plus the
 * layer and the softmax op. The -inf, +Inf and NaN problems run again with q,
 * k and v in fp16 (check_paths_f16): the cooperative fused kernel's inputs.
 *
 * Tolerances: as test_attention.c (weights 1e-6 + 1e-5 |ref|, outputs
 * 2e-6 sqrt(len_k) + 1e-5 |ref|) where the logits are exact in fp32 (small
 * integers, scaled by powers of two for 1e30 and subnormal logits). For
 * random large logits, the fp32 rounding of the scores themselves is added:
 * a score of row i is off by at most E_i = 2^-24 ((d_k + 2) scale
 * max_j sum_c |q_ic k_jc| + max_j |bias_ij|), which moves a weight by at most
 * 2 E_i w_ij and an output by at most 2 E_i max |v|. */
#include "util_dtype.h"

#define W_ATOL 1e-6
#define RTOL 1e-5
#define O_ATOL_PER_SQRT_LK 2e-6
#define U32_EPS (1.0 / 16777216.0)

static const t_attention_run runs[] = {
    {VKMHA_ATTENTION_PATH_AUTO, 0, "default path"},
    {VKMHA_ATTENTION_PATH_FUSED, 1, "fused, 1 key range"},
    {VKMHA_ATTENTION_PATH_FUSED, 2, "fused, 2 key ranges"},
    {VKMHA_ATTENTION_PATH_FUSED, 3, "fused, 3 key ranges"},
    {VKMHA_ATTENTION_PATH_FUSED, 7, "fused, 7 key ranges"},
    {VKMHA_ATTENTION_PATH_UNFUSED, 0, "unfused"},
};
#define N_RUNS (sizeof runs / sizeof runs[0])

/* One attention problem: inputs, mask and the reference's answer. */
typedef struct problem {
    const char *name;
    vkmha_attention_desc d;
    t_attention_sizes n;
    float *q, *k, *v, *bias;
    uint8_t *kp;
    vkmha_mask mask;
    float *want, *want_w;
    double *err_bound; /* per row (batch, head, query): E_i above, or NULL */
} problem;

static void problem_init(problem *p, const char *name, uint32_t batch, uint32_t heads,
                         uint32_t kv_heads, uint32_t len_q, uint32_t len_k, uint32_t d_k,
                         uint32_t d_v)
{
    memset(p, 0, sizeof *p);
    p->name = name;
    vkmha_attention_desc d = {batch, heads, kv_heads, len_q, len_k, d_k, d_v, 0, 0, 0, 0};
    p->d = d;
    p->n = t_attention_size(&d);
    p->want = t_alloc(p->n.out);
    p->want_w = t_alloc(p->n.weights);
}

/* A bias [1][1][len_q][len_k] (broadcast over batch and heads), zero. */
static float *problem_bias(problem *p)
{
    p->bias = t_alloc((size_t)p->d.len_q * p->d.len_k);
    p->mask.kinds |= VKMHA_MASK_BIAS;
    p->mask.bias = p->bias;
    p->mask.bias_batch = p->mask.bias_heads = 1;
    return p->bias;
}

static void problem_free(problem *p)
{
    free(p->q), free(p->k), free(p->v), free(p->bias), free(p->kp);
    free(p->want), free(p->want_w), free(p->err_bound);
}

static const vkmha_mask *problem_mask(const problem *p)
{
    return p->mask.kinds ? &p->mask : NULL;
}

static const float *val(const problem *p, uint32_t b, uint32_t h, uint32_t j);

/* E_i of the header comment for every row. */
static void problem_error_bounds(problem *p)
{
    const vkmha_attention_desc *d = &p->d;
    const uint32_t B = d->batch, H = d->heads, Hkv = d->kv_heads ? d->kv_heads : H;
    const double scale = d->scale != 0.0f ? d->scale : 1.0 / sqrt((double)d->d_k);
    p->err_bound = (double *)calloc((size_t)B * H * d->len_q, sizeof(double));
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t i = 0; i < d->len_q; i++) {
                const float *qi = p->q + (((size_t)b * H + h) * d->len_q + i) * d->d_k;
                double worst = 0.0, worst_bias = 0.0;
                for (uint32_t j = 0; j < d->len_k; j++) {
                    const float *kj =
                        p->k + (((size_t)b * Hkv + h / (H / Hkv)) * d->len_k + j) * d->d_k;
                    double s = 0.0;
                    for (uint32_t c = 0; c < d->d_k; c++)
                        s += fabs((double)qi[c] * kj[c]);
                    worst = fmax(worst, s);
                    if (p->bias)
                        worst_bias = fmax(worst_bias, fabs(p->bias[(size_t)i * d->len_k + j]));
                }
                p->err_bound[((size_t)b * H + h) * d->len_q + i] =
                    U32_EPS * ((d->d_k + 2) * scale * worst + worst_bias);
            }
}

/* Element-wise with NaN positions exact; per-row bound added when set. */
static bool compare(const problem *p, const char *what, const float *got, const float *want,
                    size_t row_len, double atol, double v_max)
{
    const size_t n = (size_t)p->d.batch * p->d.heads * p->d.len_q * row_len;
    for (size_t e = 0; e < n; e++) {
        const double g = got[e], w = want[e];
        const bool gf = isfinite(g), wf = isfinite(w);
        if (gf != wf || (!gf && !(isnan(g) && isnan(w)) && g != w)) {
            t_diag("%s: %s[%zu] = %g, reference %g (non-finite mismatch)", p->name, what, e, g,
                   w);
            return false;
        }
        if (!gf)
            continue;
        double tol = atol + RTOL * fabs(w);
        if (p->err_bound) {
            const double E = p->err_bound[e / row_len];
            tol += v_max > 0.0 ? 2.0 * E * v_max : 2.0 * E * fabs(w);
        }
        if (fabs(g - w) > tol) {
            t_diag("%s: %s[%zu] = %.9g, reference %.9g, |diff| %.3g > %.3g", p->name, what, e,
                   g, w, fabs(g - w), tol);
            return false;
        }
    }
    return true;
}

/* The returned weights are the softmax the output was computed with, to
 * fp32 rounding, whatever the rounding of the scores themselves: each row
 * sums to what the reference's row sums to (1, or 0 for an all -inf row),
 * and out equals weights * v. At logits of 3e4, one ulp of a score is 0.2%
 * of a weight, so weights computed from differently rounded scores than the
 * row statistics fail this by far. */
static bool self_consistent(const problem *p, const float *got, const float *got_w,
                            double o_atol)
{
    const vkmha_attention_desc *d = &p->d;
    const size_t rows = (size_t)d->batch * d->heads * d->len_q;
    for (size_t r = 0; r < rows; r++) {
        const float *w = got_w + r * d->len_k, *o = got + r * d->d_v;
        const float *want_w = p->want_w + r * d->len_k;
        double sum = 0.0, want_sum = 0.0;
        for (uint32_t j = 0; j < d->len_k; j++)
            sum += w[j], want_sum += want_w[j];
        if (isnan(want_sum))
            continue;
        if (!(fabs(sum - want_sum) <= 1e-5)) {
            t_diag("%s: weights of row %zu sum to %.9g, reference %.9g", p->name, r, sum,
                   want_sum);
            return false;
        }
        const uint32_t b = (uint32_t)(r / ((size_t)d->heads * d->len_q)),
                       h = (uint32_t)(r / d->len_q % d->heads);
        for (uint32_t c = 0; c < d->d_v; c++) {
            double pv = 0.0;
            for (uint32_t j = 0; j < d->len_k; j++)
                pv += (double)w[j] * val(p, b, h, j)[c]; /* 0 * NaN is NaN */
            const bool same = isnan(pv)      ? isnan(o[c])
                              : !isfinite(pv) ? o[c] == pv
                                              : fabs(pv - o[c]) <= o_atol + RTOL * fabs(pv);
            if (!same) {
                t_diag("%s: row %zu out[%u] = %.9g, weights * v = %.9g", p->name, r, c,
                       (double)o[c], pv);
                return false;
            }
        }
    }
    return true;
}

/* Runs the reference, then every path of gpu, comparing outputs and weights. */
static void check_paths(vkmha_context *ref, vkmha_context *gpu, problem *p)
{
    vkmha_status st = vkmha_attention(ref, &p->d, p->q, p->k, p->v, problem_mask(p), p->want,
                                      p->want_w);
    if (!t_report(st == VKMHA_SUCCESS, "%s: reference backend runs", p->name))
        t_diag("%s", vkmha_context_last_error(ref));
    double v_max = 0.0;
    for (size_t e = 0; e < p->n.v; e++)
        if (isfinite(p->v[e]))
            v_max = fmax(v_max, fabs(p->v[e]));
    float *got = t_alloc(p->n.out), *got_w = t_alloc(p->n.weights);
    const double o_atol = O_ATOL_PER_SQRT_LK * sqrt((double)p->d.len_k);
    for (size_t r = 0; r < N_RUNS; r++) {
        vkmha_attention_desc d = p->d;
        d.path = runs[r].path;
        d.kv_splits = runs[r].kv_splits;
        bool ok = true;
        for (int with_weights = 1; with_weights >= 0 && ok; with_weights--) {
            st = vkmha_attention(gpu, &d, p->q, p->k, p->v, problem_mask(p), got,
                                 with_weights ? got_w : NULL);
            T_EXPECT_STATUS(st, VKMHA_SUCCESS, ok);
            if (st)
                t_diag("%s", vkmha_context_last_error(gpu));
            if (ok && with_weights)
                ok = compare(p, "weights", got_w, p->want_w, p->d.len_k, W_ATOL, 0.0) &&
                     self_consistent(p, got, got_w, o_atol);
            if (ok)
                ok = compare(p, with_weights ? "out (with weights)" : "out", got, p->want,
                             p->d.d_v, o_atol, v_max);
        }
        t_report(ok, "%s [%s] matches the reference", p->name, runs[r].name);
    }
    free(got), free(got_w);
}

/* The problem with q, k and v in fp16 (rounded; masks and bias as they are)
 * on every run of gpu, against the reference on the same fp16 inputs: NaN
 * and Inf at the same places, then 2 units of fp16 (test_dtype.c's bound:
 * the cooperative fused kernel rounds its weights P to fp16, which moves an
 * output by at most 2^-11 max |v|). The fp16 fused runs take that kernel
 * where the context has it (GPUs with matrix units; the mesa26 setup forces
 * it on lavapipe), else the workgroup-shared or CPU-shaped one. */
static void check_paths_f16(vkmha_context *ref, vkmha_context *gpu, const problem *p)
{
    const uint32_t dt = VKMHA_DTYPE_F16;
    const double u = t_dt_unit(dt);
    vkmha_attention_desc d = p->d;
    d.dtype = dt;
    void *q = t_to_dt(dt, p->q, p->n.q), *k = t_to_dt(dt, p->k, p->n.k),
         *v = t_to_dt(dt, p->v, p->n.v);
    void *want = calloc(p->n.out + 2, 2), *want_w = calloc(p->n.weights + 2, 2),
         *got = calloc(p->n.out + 2, 2), *got_w = calloc(p->n.weights + 2, 2);
    char name[200];
    snprintf(name, sizeof name, "%s, fp16", p->name);
    bool ref_ok = true;
    T_EXPECT_STATUS(vkmha_attention(ref, &d, q, k, v, problem_mask(p), want, want_w),
                    VKMHA_SUCCESS, ref_ok);
    for (size_t r = 0; r < N_RUNS && ref_ok; r++) {
        d.path = runs[r].path;
        d.kv_splits = runs[r].kv_splits;
        bool ok = true;
        T_EXPECT_STATUS(vkmha_attention(gpu, &d, q, k, v, problem_mask(p), got, got_w),
                        VKMHA_SUCCESS, ok);
        if (!ok)
            t_diag("%s", vkmha_context_last_error(gpu));
        ok = ok && t_close_dt(name, "weights", dt, got_w, want_w, p->n.weights, 2 * u, 2 * u) &&
             t_close_dt(name, "out", dt, got, want, p->n.out, 2 * u, 2 * u);
        t_report(ok, "%s [%s] matches the reference on the same fp16 inputs", name, runs[r].name);
    }
    t_report(ref_ok, "%s: reference backend runs", name);
    free(q), free(k), free(v), free(want), free(want_w), free(got), free(got_w);
}

/* The reference's row (b, h, i): weights and output. */
static const float *ref_w(const problem *p, uint32_t b, uint32_t h, uint32_t i)
{
    return p->want_w + (((size_t)b * p->d.heads + h) * p->d.len_q + i) * p->d.len_k;
}
static const float *ref_out(const problem *p, uint32_t b, uint32_t h, uint32_t i)
{
    return p->want + (((size_t)b * p->d.heads + h) * p->d.len_q + i) * p->d.d_v;
}
static const float *val(const problem *p, uint32_t b, uint32_t h, uint32_t j)
{
    const uint32_t Hkv = p->d.kv_heads ? p->d.kv_heads : p->d.heads;
    return p->v + (((size_t)b * Hkv + h / (p->d.heads / Hkv)) * p->d.len_k + j) * p->d.d_v;
}

/* The reference's rows of every (b, h) at query i: weights exactly `w_of(j)`
 * (NaN: the row is NaN) and output sum_j w_of(j) v_j within 1e-6. */
typedef double (*weight_fn)(const problem *p, uint32_t i, uint32_t j);

static bool rule_holds(const problem *p, uint32_t b_first, uint32_t b_last, uint32_t i,
                       weight_fn w_of)
{
    for (uint32_t b = b_first; b <= b_last; b++)
        for (uint32_t h = 0; h < p->d.heads; h++) {
            const float *w = ref_w(p, b, h, i), *o = ref_out(p, b, h, i);
            for (uint32_t j = 0; j < p->d.len_k; j++) {
                const double want = w_of(p, i, j);
                if (isnan(want) ? !isnan(w[j]) : fabs(w[j] - want) > 1e-7) {
                    t_diag("row b %u h %u i %u: weight[%u] = %g, expected %g", b, h, i, j,
                           (double)w[j], want);
                    return false;
                }
            }
            for (uint32_t c = 0; c < p->d.d_v; c++) {
                double want = 0.0;
                for (uint32_t j = 0; j < p->d.len_k; j++) {
                    const double wj = w_of(p, i, j);
                    want += wj * val(p, b, h, j)[c];
                }
                if (isnan(want) ? !isnan(o[c]) : fabs(o[c] - want) > 1e-6) {
                    t_diag("row b %u h %u i %u: out[%u] = %g, expected %g", b, h, i, c,
                           (double)o[c], want);
                    return false;
                }
            }
        }
    return true;
}

/* -inf patterns, one per query row, in a bias broadcast over batch and heads. */
enum { ROW_NEG_START, ROW_NEG_MIDDLE, ROW_NEG_END, ROW_ONLY_FIRST, ROW_ONLY_LAST, ROW_ALL_NEG,
       ROW_TRIU, ROW_PATTERNS };

static bool neg_inf_at(uint32_t pattern, uint32_t i, uint32_t j, uint32_t len_k)
{
    switch (pattern) {
    case ROW_NEG_START: return j < len_k * 3 / 5; /* several whole key blocks */
    case ROW_NEG_MIDDLE: return j >= len_k / 4 && j < len_k * 3 / 4;
    case ROW_NEG_END: return j >= len_k / 3;
    case ROW_ONLY_FIRST: return j != 0;
    case ROW_ONLY_LAST: return j != len_k - 1;
    case ROW_ALL_NEG: return true;
    default: return j > i * 23; /* torch.triu(full(-inf), 1), keys spread out */
    }
}

/* The row pattern of query i: rows cycle through the patterns. */
static uint32_t pattern_of(uint32_t i)
{
    return i % ROW_PATTERNS;
}

/* Softmax weight of key j in row i when the bias is 0 or -inf: uniform over
 * the finite keys; 0 everywhere when none is finite. */
static double weight_uniform_finite(const problem *p, uint32_t i, uint32_t j)
{
    uint32_t finite = 0;
    for (uint32_t jj = 0; jj < p->d.len_k; jj++)
        finite += !isinf(p->bias[(size_t)i * p->d.len_k + jj]);
    if (finite == 0 || isinf(p->bias[(size_t)i * p->d.len_k + j]))
        return 0.0;
    return 1.0 / finite;
}
static double weight_uniform_all(const problem *p, uint32_t i, uint32_t j)
{
    (void)i, (void)j;
    return 1.0 / p->d.len_k;
}

/* -inf bias patterns with q = 0 (every finite score 0, so the exact weights
 * are known), then with random q, k. With key padding, batch entry 1 has
 * every key padded: its rows are masked by padding only, and where the bias
 * is -inf by both (the mask sets -1e9 over -inf), so they are uniform. */
static void neg_inf_bias_cases(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                               uint32_t len_k, bool padding)
{
    char name[160];
    for (int random_qk = 0; random_qk < 2; random_qk++) {
        snprintf(name, sizeof name, "-inf bias rows, Lk %u, %s q k%s", len_k,
                 random_qk ? "random" : "zero", padding ? ", batch 1 fully padded" : "");
        problem p;
        problem_init(&p, name, 2, 4, 2, ROW_PATTERNS + 2, len_k, 16, 12);
        p.q = random_qk ? t_random(rng, p.n.q, -1, 1) : t_alloc(p.n.q);
        p.k = t_random(rng, p.n.k, -1, 1);
        p.v = t_random(rng, p.n.v, -1, 1);
        float *bias = problem_bias(&p);
        for (uint32_t i = 0; i < p.d.len_q; i++)
            for (uint32_t j = 0; j < len_k; j++)
                bias[(size_t)i * len_k + j] =
                    neg_inf_at(pattern_of(i), i, j, len_k) ? -INFINITY : 0.0f;
        if (padding) {
            p.kp = (uint8_t *)malloc((size_t)2 * len_k);
            memset(p.kp, 1, len_k);      /* batch 0: nothing padded */
            memset(p.kp + len_k, 0, len_k); /* batch 1: everything */
            p.mask.kinds |= VKMHA_MASK_KEY_PADDING;
            p.mask.key_padding = p.kp;
        }
        check_paths(ref, gpu, &p);
        check_paths_f16(ref, gpu, &p);
        if (!random_qk) {
            bool ok = true;
            for (uint32_t i = 0; i < p.d.len_q && ok; i++)
                ok = rule_holds(&p, 0, 0, i, weight_uniform_finite) &&
                     (!padding || rule_holds(&p, 1, 1, i, weight_uniform_all)) &&
                     (padding || rule_holds(&p, 1, 1, i, weight_uniform_finite));
            t_report(ok, "%s: reference weights uniform over the finite keys, 0 and output 0 "
                     "where every key is -inf%s", name,
                     padding ? ", uniform over all keys where every key is padded" : "");
        }
        problem_free(&p);
    }
}

static double weight_nan(const problem *p, uint32_t i, uint32_t j)
{
    (void)p, (void)i, (void)j;
    return NAN;
}

/* +Inf and NaN in the bias and in q, k, v. */
static void nan_inf_cases(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    problem p;
    problem_init(&p, "+Inf and NaN in the bias", 2, 2, 0, 6, 130, 8, 8);
    p.q = t_random(rng, p.n.q, -1, 1);
    p.k = t_random(rng, p.n.k, -1, 1);
    p.v = t_random(rng, p.n.v, -1, 1);
    float *bias = problem_bias(&p);
    bias[1 * 130 + 100] = INFINITY; /* row 1: +Inf late in the row */
    bias[3 * 130 + 0] = NAN;        /* row 3: NaN first */
    for (uint32_t j = 0; j < 130; j++)
        bias[4 * 130 + j] = j == 70 ? NAN : -INFINITY; /* row 4: -inf around a NaN */
    check_paths(ref, gpu, &p);
    check_paths_f16(ref, gpu, &p);
    bool ok = rule_holds(&p, 0, 1, 1, weight_nan) && rule_holds(&p, 0, 1, 3, weight_nan) &&
              rule_holds(&p, 0, 1, 4, weight_nan);
    t_report(ok, "+Inf and NaN in the bias: the reference's rows are NaN");
    problem_free(&p);

    problem_init(&p, "NaN and Inf in q, k and v", 2, 2, 1, 6, 130, 8, 8);
    p.q = t_random(rng, p.n.q, -1, 1);
    p.k = t_random(rng, p.n.k, -1, 1);
    p.v = t_random(rng, p.n.v, -1, 1);
    p.q[(size_t)(1 * 2 + 1) * 6 * 8 + 2 * 8 + 3] = NAN; /* b 1, h 1, query 2 */
    p.k[(size_t)0 * 130 * 8 + 90 * 8 + 5] = INFINITY;  /* b 0: key 90 */
    p.v[(size_t)(1 * 130 + 129) * 8 + 7] = NAN;        /* b 1: last value, column 7 */
    p.v[(size_t)(1 * 130 + 5) * 8 + 1] = -INFINITY;    /* b 1: value 5, column 1 */
    check_paths(ref, gpu, &p);
    check_paths_f16(ref, gpu, &p);
    problem_free(&p);

    /* A NaN value behind a key whose weight is 0 (a -inf bias): 0 * NaN is
     * NaN, in the reference and on every path. */
    problem_init(&p, "NaN value behind a -inf key", 1, 1, 0, 3, 100, 8, 8);
    p.q = t_random(rng, p.n.q, -1, 1);
    p.k = t_random(rng, p.n.k, -1, 1);
    p.v = t_random(rng, p.n.v, -1, 1);
    bias = problem_bias(&p);
    for (uint32_t i = 0; i < 3; i++)
        bias[(size_t)i * 100 + 77] = -INFINITY;
    p.v[77 * 8 + 2] = NAN;
    check_paths(ref, gpu, &p);
    check_paths_f16(ref, gpu, &p);
    problem_free(&p);
}

/* Small integers times 2^e: products and sums are exact in fp32 for |e|
 * within range, so the reference and fp32 see the same logits. */
static float *scaled_integers(t_rng *r, size_t n, int lo, int hi, int e)
{
    float *p = t_alloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = ldexpf((float)(lo + (int)(t_next(r) % (uint64_t)(hi - lo + 1))), e);
    return p;
}

/* Logits up to 3e4 and 1e30 (exact, and random with the rounding bound) and
 * down to subnormal products. */
static void large_logit_cases(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    static const struct {
        const char *name;
        int lo, hi, e; /* q, k: integers in [lo, hi] times 2^e */
        float scale;
        bool random;   /* random floats of the same range instead */
    } cases[] = {
        {"logits ~3e4, exact", -45, 45, 0, 1.0f, false},
        {"logits ~1e30, exact", -45, 45, 45, 1.0f, false},
        {"logits ~3e4 by a tiny scale, exact", -45, 45, 10, 1.0f / 1048576.0f * 1.0f, false},
        {"subnormal products, exact", -45, 45, -70, 1.0f, false},
        {"logits ~3e4, random", -45, 45, 0, 1.0f, true},
        {"logits ~1e30, random", -45, 45, 45, 1.0f, true},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        problem p;
        problem_init(&p, cases[c].name, 2, 3, 0, 9, 131, 16, 10);
        p.d.scale = cases[c].scale;
        if (cases[c].random) {
            const float a = ldexpf((float)cases[c].hi, cases[c].e);
            p.q = t_random(rng, p.n.q, -a, a);
            p.k = t_random(rng, p.n.k, -a, a);
        } else {
            p.q = scaled_integers(rng, p.n.q, cases[c].lo, cases[c].hi, cases[c].e);
            p.k = scaled_integers(rng, p.n.k, cases[c].lo, cases[c].hi, cases[c].e);
        }
        p.v = t_random(rng, p.n.v, -1, 1);
        if (cases[c].random)
            problem_error_bounds(&p);
        check_paths(ref, gpu, &p);
        problem_free(&p);
    }
}

/* A key range crossing the CPU devices' 1024 keys per dispatch: the first
 * 1100 keys -inf (a whole dispatch of them), or all but the last key. */
static void long_row_cases(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    problem p;
    problem_init(&p, "-inf over the first 1100 of 2100 keys", 1, 2, 0, 3, 2100, 8, 8);
    p.q = t_random(rng, p.n.q, -1, 1);
    p.k = t_random(rng, p.n.k, -1, 1);
    p.v = t_random(rng, p.n.v, -1, 1);
    float *bias = problem_bias(&p);
    for (uint32_t j = 0; j < 2100; j++) {
        bias[j] = j < 1100 ? -INFINITY : 0.0f;
        bias[2100 + j] = j < 2099 ? -INFINITY : 0.0f;
        bias[2 * 2100 + j] = -INFINITY;
    }
    check_paths(ref, gpu, &p);
    problem_free(&p);
}

/* The layer with a PyTorch-style float mask: -inf above the diagonal
 * (torch.triu(torch.full((L, L), -inf), 1)), and one query row with every
 * key -inf. */
static void layer_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    const uint32_t L = 70, D = 48, H = 4;
    t_layer l;
    t_layer_make(&l, rng, D, H, 2, 2, L, 0, 0);
    float *bias = t_alloc((size_t)L * L);
    for (uint32_t i = 0; i < L; i++)
        for (uint32_t j = 0; j < L; j++)
            bias[(size_t)i * L + j] = j > i || i == 33 ? -INFINITY : 0.0f;
    vkmha_mask m = {0};
    m.kinds = VKMHA_MASK_BIAS;
    m.bias = bias;
    m.bias_batch = m.bias_heads = 1;
    l.io.mask = &m;
    float *want = t_alloc(l.n_out), *got = t_alloc(l.n_out);
    float *want_w = t_alloc(l.n_weights), *got_w = t_alloc(l.n_weights);
    vkmha_mha *lr = NULL, *lg = NULL;
    bool ok = true;
    T_EXPECT_STATUS(vkmha_mha_create(ref, &l.desc, &lr), VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS(vkmha_mha_create(gpu, &l.desc, &lg), VKMHA_SUCCESS, ok);
    l.io.out = want;
    l.io.attn_weights = want_w;
    if (ok)
        T_EXPECT_STATUS(vkmha_mha_forward(lr, &l.io), VKMHA_SUCCESS, ok);
    bool zero_row = ok;
    for (uint32_t b = 0; b < 2 && zero_row; b++)
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t j = 0; j < L; j++)
                zero_row = zero_row && want_w[(((size_t)b * H + h) * L + 33) * L + j] == 0.0f;
    t_report(zero_row, "layer, triu -inf mask: the reference's all -inf row has weights 0");
    for (size_t r = 0; r < N_RUNS && ok; r++) {
        bool run_ok = true;
        l.io.attention_path = runs[r].path;
        l.io.kv_splits = runs[r].kv_splits;
        l.io.out = got;
        l.io.attn_weights = got_w;
        T_EXPECT_STATUS(vkmha_mha_forward(lg, &l.io), VKMHA_SUCCESS, run_ok);
        run_ok = run_ok &&
                 t_close("layer triu -inf", "weights", got_w, want_w, l.n_weights, W_ATOL,
                         RTOL) &&
                 t_close("layer triu -inf", "out", got, want, l.n_out, T_LAYER_ATOL,
                         T_LAYER_RTOL);
        l.io.attn_weights = NULL;
        T_EXPECT_STATUS(vkmha_mha_forward(lg, &l.io), VKMHA_SUCCESS, run_ok);
        run_ok = run_ok && t_close("layer triu -inf, no weights", "out", got, want, l.n_out,
                                   T_LAYER_ATOL, T_LAYER_RTOL);
        t_report(run_ok, "layer, triu -inf float mask and an all -inf row [%s]",
                 runs[r].name);
    }
    vkmha_mha_destroy(lr);
    vkmha_mha_destroy(lg);
    free(bias), free(want), free(got), free(want_w), free(got_w);
    t_layer_free(&l);
}

/* vkmha_softmax with the same rows, on both backends. */
static void softmax_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    const uint32_t rows = 9, n = 300;
    float *x = t_random(rng, (size_t)rows * n, -3, 3);
    float *bias = t_alloc((size_t)rows * n);
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t j = 0; j < n; j++)
            bias[(size_t)i * n + j] = neg_inf_at(pattern_of(i), i, j, n) ? -INFINITY : 0.0f;
    bias[7 * n + 10] = INFINITY;
    bias[8 * n + 299] = NAN;
    vkmha_softmax_desc d = {1, 1, rows, n, 0, 0};
    vkmha_mask m = {0};
    m.kinds = VKMHA_MASK_BIAS;
    m.bias = bias;
    float *want = t_alloc((size_t)rows * n), *got = t_alloc((size_t)rows * n);
    bool ok = true;
    T_EXPECT_STATUS(vkmha_softmax(ref, &d, x, &m, want), VKMHA_SUCCESS, ok);
    bool rules = ok;
    for (uint32_t j = 0; j < n && rules; j++)
        rules = want[(size_t)ROW_ALL_NEG * n + j] == 0.0f && isnan(want[7 * n + j]) &&
                isnan(want[8 * n + j]) && (j == n - 1 || want[(size_t)ROW_ONLY_LAST * n + j] == 0.0f);
    rules = rules && want[(size_t)ROW_ONLY_LAST * n + n - 1] == 1.0f;
    t_report(rules, "softmax: the reference gives zeros for an all -inf row, 1 at a single "
             "allowed key, NaN rows for +Inf and NaN");
    T_EXPECT_STATUS(vkmha_softmax(gpu, &d, x, &m, got), VKMHA_SUCCESS, ok);
    t_report(ok && t_close("softmax -inf rows", "y", got, want, (size_t)rows * n, W_ATOL, RTOL),
             "softmax with -inf, +Inf and NaN bias rows matches the reference");
    free(x), free(bias), free(want), free(got);
}

int main(void)
{
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    t_rng rng = {2026};
    for (size_t variant = 0; variant < T_VK_VARIANTS; variant++) {
        vkmha_context *gpu = t_context_variant(&t_vk_variants[variant]);
        neg_inf_bias_cases(ref, gpu, &rng, 200, false);
        neg_inf_bias_cases(ref, gpu, &rng, 200, true);
        neg_inf_bias_cases(ref, gpu, &rng, 37, false);
        nan_inf_cases(ref, gpu, &rng);
        softmax_case(ref, gpu, &rng);
        if (t_vk_variants[variant].flags == 0) {
            large_logit_cases(ref, gpu, &rng);
            long_row_cases(ref, gpu, &rng);
            layer_case(ref, gpu, &rng);
        }
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
    }
    vkmha_context_destroy(ref);
    return t_finish();
}
