/*
 * The reference backend: plain scalar C11 implementations of every op, the
 * oracle the Vulkan backend is tested against (VKMHA_BACKEND_REFERENCE).
 *
 * Written for obviousness, not speed: one loop per index, no blocking, no
 * shared code with the shaders. Every sum (dot products, softmax
 * denominators, LayerNorm statistics) is accumulated in double and only the
 * final result is rounded to float, so the reference's own rounding error is
 * far below the tolerances the GPU results are compared with and does not
 * depend on summation order.
 *
 * The arguments arrive already checked and resolved (src/check.c); nothing
 * here validates them again. Index arithmetic is done in uint64_t so that
 * no product of two uint32_t sizes can overflow. The backend's table around
 * these functions (tensors, the layer, every public form) is
 * src/ref_backend.c.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Matmul                                                                   */
/* ------------------------------------------------------------------------ */

void ref_matmul(const mm_shape *s, const float *a, const float *b, const float *bias,
                float *c)
{
    for (uint64_t bt = 0; bt < s->batch; bt++) {
        const float *ab = a + bt * s->sa;
        const float *bb = b + bt * s->sb;
        float *cb = c + bt * s->sc;
        for (uint64_t i = 0; i < s->m; i++) {
            for (uint64_t j = 0; j < s->n; j++) {
                double acc = 0.0;
                for (uint64_t p = 0; p < s->k; p++) {
                    double av = (double)ab[i * s->lda + p];
                    double bv = s->trans_b ? (double)bb[j * s->ldb + p]
                                           : (double)bb[p * s->ldb + j];
                    acc += av * bv;
                }
                double r = (double)s->alpha * acc;
                if (bias)
                    r += (double)bias[j];
                cb[i * s->ldc + j] = (float)r;
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Masks                                                                    */
/* ------------------------------------------------------------------------ */

bool ref_is_masked(const mask_r *mask, uint32_t b, uint32_t i, uint32_t j,
                   uint32_t len_q, uint32_t len_k, uint32_t len_b)
{
    if (!mask)
        return false;
    if ((mask->kinds & VKMHA_MASK_KEY_PADDING) &&
        mask->key_padding[(uint64_t)b * len_k + j] == 0)
        return true;
    if ((mask->kinds & VKMHA_MASK_FULL) &&
        mask->full[((uint64_t)b * len_q + i) * len_k + j] == 0)
        return true;
    /* Query i stands at key position i + offset, the offset shifted by the
     * keys the entry lacks (a KV cache's entries); it sees keys up to it. */
    const int64_t d = ref_position(mask, i, len_k, len_b) - (int64_t)j;
    if ((mask->kinds & VKMHA_MASK_CAUSAL) && d < 0)
        return true;
    /* The window: d < window back (and ahead without the causal mask). */
    if ((mask->kinds & VKMHA_MASK_WINDOW) &&
        (d >= (int64_t)mask->window ||
         (!(mask->kinds & VKMHA_MASK_CAUSAL) && -d >= (int64_t)mask->window)))
        return true;
    return false;
}

int64_t ref_position(const mask_r *mask, uint32_t i, uint32_t len_k, uint32_t len_b)
{
    return (int64_t)i + (int32_t)mask->causal_offset + (int64_t)len_b - len_k;
}

double ref_bias(const mask_r *mask, uint32_t b, uint32_t h, uint32_t i, uint32_t j,
                uint32_t len_q, uint32_t len_k)
{
    if (!mask || !(mask->kinds & VKMHA_MASK_BIAS))
        return 0.0;
    uint64_t bb = mask->bias_batch == 1 ? 0 : b;
    uint64_t hh = mask->bias_heads == 1 ? 0 : h;
    uint64_t idx = ((bb * mask->bias_heads + hh) * len_q + i) * len_k + j;
    return (double)mask->bias[idx];
}

/* The score of (b, h, i, j) entering the softmax (include/vkmha.h, "Masks"):
 * the scaled dot product soft-capped, plus the bias and ALiBi's, then -1e9
 * if masked (set, not added: masked_fill semantics). len_b: the keys of
 * batch entry b (len_k but in a KV cache). */
static double score(const mask_r *mask, uint32_t b, uint32_t h, uint32_t i, uint32_t j,
                    uint32_t len_q, uint32_t len_k, uint32_t len_b, double scaled)
{
    if (ref_is_masked(mask, b, i, j, len_q, len_k, len_b))
        return VKMHA_MASKED_SCORE;
    if (mask && (mask->kinds & VKMHA_MASK_SOFTCAP))
        scaled = mask->softcap * tanh(scaled / mask->softcap);
    double x = scaled + ref_bias(mask, b, h, i, j, len_q, len_k);
    if (mask && (mask->kinds & VKMHA_MASK_ALIBI))
        x -= (double)mask->alibi[h] * (double)(ref_position(mask, i, len_k, len_b) - j);
    return x;
}

/* Head h's sink logit (-inf: none, which changes no softmax). */
static double sink_of(const mask_r *mask, uint32_t h)
{
    return mask && (mask->kinds & VKMHA_MASK_SINKS) ? (double)mask->sinks[h] : -INFINITY;
}

/* Softmax of row[0..n) in place, max-subtracted, with a sink logit in the
 * denominator (-inf: none). Non-finite scores: any NaN makes the row NaN,
 * and so does +Inf (exp(inf - inf)); a row whose every score is -inf (a
 * -inf bias on every key: masked keys are -1e9, not -inf) has no key to
 * attend to and becomes zeros, never exp(-inf - -inf) = NaN. The shaders do
 * the same. */
static void softmax_row(double *row, uint32_t n, double sink)
{
    double mx = sink;
    for (uint32_t j = 0; j < n; j++) {
        if (isnan(row[j])) {
            for (uint32_t i = 0; i < n; i++)
                row[i] = NAN;
            return;
        }
        if (row[j] > mx)
            mx = row[j];
    }
    if (mx == -INFINITY) {
        for (uint32_t j = 0; j < n; j++)
            row[j] = 0.0;
        return;
    }
    double sum = exp(sink - mx);
    for (uint32_t j = 0; j < n; j++) {
        row[j] = exp(row[j] - mx);
        sum += row[j];
    }
    for (uint32_t j = 0; j < n; j++)
        row[j] /= sum;
}

/* ------------------------------------------------------------------------ */
/* Softmax                                                                  */
/* ------------------------------------------------------------------------ */

vkmha_status ref_softmax(const vkmha_context *ctx, const sm_shape *s, const float *x, const mask_r *mask, float *y)
{
    double *row = (double *)vkmha__alloc(ctx, (size_t)s->len_k * sizeof(double));
    if (!row)
        return VKMHA_ERROR_OUT_OF_HOST_MEMORY;
    for (uint32_t b = 0; b < s->batch; b++) {
        for (uint32_t h = 0; h < s->heads; h++) {
            for (uint32_t i = 0; i < s->len_q; i++) {
                uint64_t base =
                    (((uint64_t)b * s->heads + h) * s->len_q + i) * s->len_k;
                /* Read the whole row before writing any of it: y may be x. */
                for (uint32_t j = 0; j < s->len_k; j++) {
                    row[j] = score(mask, b, h, i, j, s->len_q, s->len_k, s->len_k,
                                   (double)s->scale * (double)x[base + j]);
                }
                softmax_row(row, s->len_k, sink_of(mask, h));
                for (uint32_t j = 0; j < s->len_k; j++)
                    y[base + j] = (float)row[j];
            }
        }
    }
    vkmha__free(ctx, row);
    return VKMHA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Head split / merge                                                       */
/* ------------------------------------------------------------------------ */

void ref_split_heads(const heads_shape *s, const float *x, float *y)
{
    uint64_t width = (uint64_t)s->heads * s->head_dim;
    for (uint64_t b = 0; b < s->batch; b++)
        for (uint64_t t = 0; t < s->len; t++)
            for (uint64_t h = 0; h < s->heads; h++)
                for (uint64_t d = 0; d < s->head_dim; d++)
                    y[((b * s->heads + h) * s->len + t) * s->head_dim + d] =
                        x[(b * s->len + t) * width + h * s->head_dim + d];
}

void ref_merge_heads(const heads_shape *s, const float *x, float *y)
{
    uint64_t width = (uint64_t)s->heads * s->head_dim;
    for (uint64_t b = 0; b < s->batch; b++)
        for (uint64_t t = 0; t < s->len; t++)
            for (uint64_t h = 0; h < s->heads; h++)
                for (uint64_t d = 0; d < s->head_dim; d++)
                    y[(b * s->len + t) * width + h * s->head_dim + d] =
                        x[((b * s->heads + h) * s->len + t) * s->head_dim + d];
}

/* ------------------------------------------------------------------------ */
/* Attention                                                                */
/* ------------------------------------------------------------------------ */

vkmha_status ref_attention(const vkmha_context *ctx, const attn_shape *s, const float *q, const float *k,
                           const float *v, const mask_r *mask, float *out,
                           float *weights)
{
    double *p = (double *)vkmha__alloc(ctx, (size_t)s->len_k * sizeof(double));
    if (!p)
        return VKMHA_ERROR_OUT_OF_HOST_MEMORY;
    uint32_t group = s->heads / s->kv_heads; /* query heads per kv head */
    for (uint32_t b = 0; b < s->batch; b++) {
        for (uint32_t h = 0; h < s->heads; h++) {
            uint64_t hkv = h / group;
            const float *qh = q + ((uint64_t)b * s->heads + h) * s->len_q * s->d_k;
            const float *kh = k + ((uint64_t)b * s->kv_heads + hkv) * s->len_k * s->d_k;
            const float *vh = v + ((uint64_t)b * s->kv_heads + hkv) * s->len_k * s->d_v;
            float *oh = out + ((uint64_t)b * s->heads + h) * s->len_q * s->d_v;
            float *wh = weights
                            ? weights + ((uint64_t)b * s->heads + h) * s->len_q * s->len_k
                            : NULL;
            /* A KV cache entry's keys past its length do not exist. */
            const uint32_t len_b = s->lengths ? s->lengths[b] : s->len_k;
            for (uint32_t i = 0; i < s->len_q; i++) {
                const float *qi = qh + (uint64_t)i * s->d_k;
                for (uint32_t j = 0; j < len_b; j++) {
                    const float *kj = kh + (uint64_t)j * s->d_k;
                    double dot = 0.0;
                    for (uint32_t d = 0; d < s->d_k; d++)
                        dot += (double)qi[d] * (double)kj[d];
                    p[j] = score(mask, b, h, i, j, s->len_q, s->len_k, len_b,
                                 (double)s->scale * dot);
                }
                softmax_row(p, len_b, sink_of(mask, h));
                if (wh)
                    for (uint32_t j = 0; j < s->len_k; j++)
                        wh[(uint64_t)i * s->len_k + j] = j < len_b ? (float)p[j] : 0.0f;
                for (uint32_t d = 0; d < s->d_v; d++) {
                    double acc = 0.0;
                    for (uint32_t j = 0; j < len_b; j++)
                        acc += p[j] * (double)vh[(uint64_t)j * s->d_v + d];
                    oh[(uint64_t)i * s->d_v + d] = (float)acc;
                }
            }
        }
    }
    vkmha__free(ctx, p);
    return VKMHA_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* LayerNorm                                                                */
/* ------------------------------------------------------------------------ */

void ref_layernorm(uint32_t rows, uint32_t cols, const float *x, const float *res,
                   const float *gamma, const float *beta, float eps, float *y)
{
    for (uint64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        const float *rr = res ? res + r * cols : NULL;
        float *yr = y + r * cols;
        /* Two passes for the statistics, then one write pass that reads
         * x[c] and res[c] before writing y[c]: safe when y aliases x. */
        double sum = 0.0;
        for (uint32_t c = 0; c < cols; c++)
            sum += (double)xr[c] + (rr ? (double)rr[c] : 0.0);
        double mean = sum / (double)cols;
        double sq = 0.0;
        for (uint32_t c = 0; c < cols; c++) {
            double t = (double)xr[c] + (rr ? (double)rr[c] : 0.0);
            sq += (t - mean) * (t - mean);
        }
        double var = sq / (double)cols;
        double sd = sqrt(var + (double)eps);
        for (uint32_t c = 0; c < cols; c++) {
            double t = (double)xr[c] + (rr ? (double)rr[c] : 0.0);
            double g = gamma ? (double)gamma[c] : 1.0;
            double bt = beta ? (double)beta[c] : 0.0;
            yr[c] = (float)(g * (t - mean) / sd + bt);
        }
    }
}

/* ---- typed arrays --------------------------------------------------------- */
/* The reference computes in fp32 arrays (with double accumulation): 16-bit
 * inputs are widened to fp32 copies (exactly), and fp32 results are rounded
 * into 16-bit outputs as the shaders store them (src/half.c). */

typedef struct ref_arrays {
    float *tmp[6];
    int n;
} ref_arrays;

/* An fp32 array for `n` elements of src: src itself for F32, else a copy
 * (kept in r for release), widened from src for an input, left for the
 * computation to fill for an output. NULL src stays NULL. */
static vkmha_status widen(const vkmha_context *ctx, ref_arrays *r, uint32_t dtype,
                          const void *src, uint64_t n, bool input, float **out)
{
    if (!src || dtype == VKMHA_DTYPE_F32) {
        *out = (float *)(uintptr_t)src;
        return VKMHA_SUCCESS;
    }
    float *t = vkmha__alloc(ctx, (size_t)n * sizeof *t);
    if (!t)
        return VKMHA_ERROR_OUT_OF_HOST_MEMORY;
    if (input)
        vkmha__to_f32(dtype, src, (size_t)n, t);
    r->tmp[r->n++] = t;
    *out = t;
    return VKMHA_SUCCESS;
}

static void release(const vkmha_context *ctx, ref_arrays *r)
{
    for (int i = 0; i < r->n; i++)
        vkmha__free(ctx, r->tmp[i]);
}

/* Rounds the fp32 result `f` back into dst when it is a copy. */
static void narrow(uint32_t dtype, const float *f, const void *dst, uint64_t n)
{
    if (f && f != dst)
        vkmha__from_f32(dtype, f, (size_t)n, (void *)(uintptr_t)dst);
}

vkmha_status ref_matmul_typed(const vkmha_context *ctx, const mm_shape *s,
                              const uint32_t dt[4], const void *a, const void *b,
                              const void *bias, void *c)
{
    ref_arrays r = {0};
    float *fa, *fb, *fbias, *fc;
    vkmha_status st;
    if ((st = widen(ctx, &r, dt[0], a, s->extent_a, true, &fa)) ||
        (st = widen(ctx, &r, dt[1], b, s->extent_b, true, &fb)) ||
        (st = widen(ctx, &r, dt[2], bias, s->n, true, &fbias)) ||
        (st = widen(ctx, &r, dt[3], c, s->extent_c, false, &fc))) {
        release(ctx, &r);
        return st;
    }
    ref_matmul(s, fa, fb, fbias, fc);
    /* Only the rows of C the product writes: the caller's data between rows
     * (ldc > n) stays as it was, bit for bit. */
    const size_t es = vkmha__dtype_size(dt[3]);
    if (fc != c)
        for (uint32_t z = 0; z < s->batch; z++)
            for (uint32_t i = 0; i < s->m; i++) {
                const uint64_t o = z * s->sc + (uint64_t)i * s->ldc;
                vkmha__from_f32(dt[3], fc + o, s->n, (uint8_t *)c + o * es);
            }
    release(ctx, &r);
    return VKMHA_SUCCESS;
}

vkmha_status ref_softmax_typed(const vkmha_context *ctx, const sm_shape *s, uint32_t dt_x,
                               const void *x, const mask_r *mask, uint32_t dt_y, void *y)
{
    ref_arrays r = {0};
    const uint64_t n = (uint64_t)s->batch * s->heads * s->len_q * s->len_k;
    float *fx, *fy = NULL;
    vkmha_status st = widen(ctx, &r, dt_x, x, n, true, &fx);
    if (!st && x == y && dt_x == dt_y) /* in place */
        fy = fx;
    else if (!st)
        st = widen(ctx, &r, dt_y, y, n, false, &fy);
    if (!st && !(st = ref_softmax(ctx, s, fx, mask, fy)))
        narrow(dt_y, fy, y, n);
    release(ctx, &r);
    return st;
}

vkmha_status ref_heads_typed(const vkmha_context *ctx, const heads_shape *s, bool split,
                             uint32_t dt_x, const void *x, uint32_t dt_y, void *y)
{
    ref_arrays r = {0};
    const uint64_t n = (uint64_t)s->batch * s->len * s->heads * s->head_dim;
    float *fx, *fy;
    vkmha_status st;
    if (!(st = widen(ctx, &r, dt_x, x, n, true, &fx)) &&
        !(st = widen(ctx, &r, dt_y, y, n, false, &fy))) {
        (split ? ref_split_heads : ref_merge_heads)(s, fx, fy);
        narrow(dt_y, fy, y, n);
    }
    release(ctx, &r);
    return st;
}

vkmha_status ref_attention_typed(const vkmha_context *ctx, const attn_shape *s,
                                 const uint32_t dt[5], const void *q, const void *k,
                                 const void *v, const mask_r *mask, void *out, void *weights)
{
    ref_arrays r = {0};
    const uint64_t nq = (uint64_t)s->batch * s->heads * s->len_q * s->d_k,
                   nk = (uint64_t)s->batch * s->kv_heads * s->len_k * s->d_k,
                   nv = (uint64_t)s->batch * s->kv_heads * s->len_k * s->d_v,
                   no = (uint64_t)s->batch * s->heads * s->len_q * s->d_v,
                   nw = (uint64_t)s->batch * s->heads * s->len_q * s->len_k;
    float *fq, *fk, *fv, *fo, *fw;
    vkmha_status st;
    if (!(st = widen(ctx, &r, dt[0], q, nq, true, &fq)) &&
        !(st = widen(ctx, &r, dt[1], k, nk, true, &fk)) &&
        !(st = widen(ctx, &r, dt[2], v, nv, true, &fv)) &&
        !(st = widen(ctx, &r, dt[3], out, no, false, &fo)) &&
        !(st = widen(ctx, &r, dt[4], weights, nw, false, &fw)) &&
        !(st = ref_attention(ctx, s, fq, fk, fv, mask, fo, fw))) {
        narrow(dt[3], fo, out, no);
        narrow(dt[4], fw, weights, nw);
    }
    release(ctx, &r);
    return st;
}
