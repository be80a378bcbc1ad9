/* The multi-head attention layer: argument checks, weights (copied once by
 * the backend, to the device for Vulkan), and the forward graph:
 *
 *   qp = query W_q^T + b_q     [B*Lq][H*d_k]      (matmul)
 *   kp = key   W_k^T + b_k     [B*Lk][Hkv*d_k]
 *   vp = value W_v^T + b_v     [B*Lk][Hkv*d_v]
 *   qh, kh, vh = split heads   [B][heads][L][d]
 *   oh = attention(qh, kh, vh) [B][H][Lq][d_v]
 *   om = merge heads(oh)       [B*Lq][H*d_v]
 *   out = om W_o^T + b_o       [B*Lq][d_model]    (matmul)
 *   out = LayerNorm(query + out) if post_norm     (layernorm)
 *
 * This file is backend-neutral: the checks, the weights gathered for the
 * backend's table (vkmha_backend_ops), the public forms of the forward
 * (vkmha_mha_record, which takes a VkCommandBuffer, is in src/vk_mha.c) and
 * the submissions' public functions.
 * The reference backend (src/ref_backend.c) does each step literally. The
 * Vulkan backend (src/vk_mha.c) never moves heads: attention reads head h of
 * qp, kp, vp in place through strides and writes om directly (fused or
 * unfused, see src/vk_attention.c), so the split and merge are free.
 */
#include "internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT

/* The projection weights' names in messages. */
static const char *const weight_names[4] = {"desc->w_q", "desc->w_k", "desc->w_v",
                                            "desc->w_o"};

/* Elements of each weight, 0 where it is absent. */
static void weight_sizes(const vkmha_mha_desc *d, uint64_t n[WEIGHT_COUNT])
{
    const uint64_t H = d->n_head, Hkv = d->n_kv_head;
    n[W_Q] = H * d->d_k * d->d_model;
    n[W_K] = Hkv * d->d_k * d->kdim;
    n[W_V] = Hkv * d->d_v * d->vdim;
    n[W_O] = (uint64_t)d->d_model * H * d->d_v;
    n[B_Q] = H * d->d_k;
    n[B_K] = Hkv * d->d_k;
    n[B_V] = Hkv * d->d_v;
    n[B_O] = d->d_model;
    n[GAMMA] = n[BETA] = d->post_norm ? d->d_model : 0;
}

/* desc->weight_quant and weight_group_size (a resolved desc d): every
 * projection weight's inputs whole groups (w_o's: the shard's heads). */
static vkmha_status check_quant(vkmha_context *ctx, const vkmha_mha_desc *d)
{
    const char *fn = ctx->call;
    const uint32_t g = d->weight_group_size;
    if (!d->weight_quant) {
        if (g || d->weights_quantized)
            return vkmha__fail(ctx, INVALID, "%s: desc->%s is set but desc->weight_quant is 0 "
                               "(weights not quantized)", fn,
                               g ? "weight_group_size" : "weights_quantized");
        return VKMHA_SUCCESS;
    }
    if (d->weight_quant > VKMHA_QUANT_Q4Z)
        return vkmha__fail(ctx, INVALID, "%s: desc->weight_quant (%u) is not a "
                           "vkmha_quant_type", fn, d->weight_quant);
    if (!vkmha__quant_group_ok(g))
        return vkmha__fail(ctx, INVALID, "%s: desc->weight_group_size (%u) is not 32, 64 or "
                           "128", fn, g);
    const uint32_t heads = d->head_end ? d->head_end - d->head_begin : d->n_head;
    const uint64_t ins[4] = {d->d_model, d->kdim, d->vdim, (uint64_t)heads * d->d_v};
    static const char *const names[4] = {"d_model", "kdim", "vdim", "d_v"};
    for (int i = 0; i < 4; i++)
        if (ins[i] % g)
            return vkmha__fail(ctx, INVALID, "%s: desc->%s (%u%s) is not a multiple of "
                               "desc->weight_group_size (%u): the groups of w_%c run along "
                               "its inputs", fn, names[i], i < 3 ? (uint32_t)ins[i] : d->d_v,
                               i < 3 ? "" : " times the heads", g, "qkvo"[i]);
    if ((uint64_t)d->head_begin * d->d_v % g)
        return vkmha__fail(ctx, INVALID, "%s: desc->head_begin (%u) times d_v (%u) is not a "
                           "multiple of desc->weight_group_size (%u): a shard's columns of "
                           "w_o must be whole groups of the layer's", fn, d->head_begin,
                           d->d_v, g);
    return VKMHA_SUCCESS;
}

static vkmha_status check_desc(vkmha_context *ctx, const vkmha_mha_desc *in,
                               vkmha_mha_desc *d)
{
    const char *fn = ctx->call; /* vkmha_mha_create or the loader that calls it */
    if (!in)
        return vkmha__fail(ctx, INVALID, "%s: desc is NULL", fn);
    *d = *in;
    if (d->d_model == 0 || d->n_head == 0)
        return vkmha__fail(ctx, INVALID, "%s: desc->%s is 0 (must be >= 1)", fn,
                           d->d_model == 0 ? "d_model" : "n_head");
    d->n_kv_head = d->n_kv_head ? d->n_kv_head : d->n_head;
    if (d->n_kv_head > d->n_head || d->n_head % d->n_kv_head != 0)
        return vkmha__fail(ctx, INVALID,
                           "%s: desc->n_head (%u) is not a multiple of desc->n_kv_head (%u)", fn,
                           d->n_head, d->n_kv_head);
    if ((d->d_k == 0 || d->d_v == 0) && d->d_model % d->n_head != 0)
        return vkmha__fail(ctx, INVALID,
                           "%s: desc->d_model (%u) is not divisible by desc->n_head (%u), so "
                           "desc->%s has no default; set d_k and d_v explicitly",
                           fn, d->d_model, d->n_head, d->d_k == 0 ? "d_k" : "d_v");
    d->d_k = d->d_k ? d->d_k : d->d_model / d->n_head;
    d->d_v = d->d_v ? d->d_v : d->d_model / d->n_head;
    d->kdim = d->kdim ? d->kdim : d->d_model;
    d->vdim = d->vdim ? d->vdim : d->d_model;
    d->scale = d->scale != 0.0f ? d->scale : (float)(1.0 / sqrt((double)d->d_k));
    d->norm_eps = d->norm_eps != 0.0f ? d->norm_eps : 1e-6f;
    if (!(d->norm_eps > 0.0f))
        return vkmha__fail(ctx, INVALID, "%s: desc->norm_eps (%g) is not positive", fn,
                           (double)d->norm_eps);
    const void *const required[4] = {d->w_q, d->w_k, d->w_v, d->w_o};
    for (int i = 0; i < 4; i++)
        if (!required[i])
            return vkmha__fail(ctx, INVALID, "%s: %s is NULL", fn, weight_names[i]);
    if (!d->post_norm && (d->norm_gamma || d->norm_beta))
        return vkmha__fail(ctx, INVALID, "%s: desc->%s is set but desc->post_norm is false",
                           fn, d->norm_gamma ? "norm_gamma" : "norm_beta");
    vkmha_status st;
    if ((st = vkmha__check_dtype(ctx, "desc->weight_dtype", d->weight_dtype)) ||
        (st = vkmha__check_dtype(ctx, "desc->storage_dtype", d->storage_dtype)))
        return st;
    /* Every weight must be countable without overflow. */
    uint64_t n, bytes, sizes[WEIGHT_COUNT];
    const uint64_t rows[4] = {(uint64_t)d->n_head * d->d_k, (uint64_t)d->n_kv_head * d->d_k,
                              (uint64_t)d->n_kv_head * d->d_v, d->d_model};
    const uint64_t cols[4] = {d->d_model, d->kdim, d->vdim, (uint64_t)d->n_head * d->d_v};
    for (int i = 0; i < 4; i++)
        if (!vkmha__mul_u64(rows[i], cols[i], &n))
            return vkmha__fail(ctx, INVALID, "%s: %s is too large: its size overflows 64 bits",
                               fn, weight_names[i]);
    weight_sizes(d, sizes);
    for (int i = 0; i < W_O + 1; i++)
        if ((st = vkmha__check_count(ctx, fn, weight_names[i], sizes[i], 4, &bytes)))
            return st;
    if (d->head_begin || d->head_end) {
        const uint32_t g = d->n_head / d->n_kv_head;
        if (d->head_begin >= d->head_end || d->head_end > d->n_head)
            return vkmha__fail(ctx, INVALID,
                               "%s: desc->head_begin (%u) and desc->head_end (%u) are not a "
                               "range of heads: a shard needs head_begin < head_end <= "
                               "n_head (%u)",
                               fn, d->head_begin, d->head_end, d->n_head);
        if (d->head_begin % g || d->head_end % g)
            return vkmha__fail(ctx, INVALID,
                               "%s: desc->%s (%u) is not a multiple of n_head / n_kv_head "
                               "(%u): a shard holds whole key/value heads",
                               fn, d->head_begin % g ? "head_begin" : "head_end",
                               d->head_begin % g ? d->head_begin : d->head_end, g);
    }
    if (d->rope_dims % 2 || d->rope_dims > d->d_k)
        return vkmha__fail(ctx, INVALID, "%s: desc->rope_dims (%u) is %s", fn, d->rope_dims,
                           d->rope_dims % 2 ? "odd (RoPE rotates pairs)"
                                            : "above d_k (the dimensions it rotates)");
    if (!d->rope_dims && (d->rope_theta != 0.0f || d->rope_scale != 0.0f || d->rope_layout))
        return vkmha__fail(ctx, INVALID, "%s: desc->%s is set but desc->rope_dims is 0", fn,
                           d->rope_theta != 0.0f ? "rope_theta"
                           : d->rope_scale != 0.0f ? "rope_scale" : "rope_layout");
    d->rope_theta = d->rope_dims && d->rope_theta == 0.0f ? 10000.0f : d->rope_theta;
    d->rope_scale = d->rope_dims && d->rope_scale == 0.0f ? 1.0f : d->rope_scale;
    if (d->rope_dims && !(d->rope_theta > 0.0f && d->rope_theta <= FLT_MAX))
        return vkmha__fail(ctx, INVALID, "%s: desc->rope_theta (%g) is not finite and > 0", fn,
                           (double)d->rope_theta);
    if (d->rope_dims && !(d->rope_scale > 0.0f && d->rope_scale <= FLT_MAX))
        return vkmha__fail(ctx, INVALID, "%s: desc->rope_scale (%g) is not finite and > 0", fn,
                           (double)d->rope_scale);
    if (d->rope_layout > VKMHA_ROPE_INTERLEAVED)
        return vkmha__fail(ctx, INVALID, "%s: desc->rope_layout (%u) is not a "
                           "vkmha_rope_layout", fn, d->rope_layout);
    return check_quant(ctx, d);
}

uint32_t vkmha__rope_position(const mha_fwd *f, uint32_t b, uint32_t t, bool key)
{
    const uint32_t row = key ? t : f->q0 + t;
    if (f->positions)
        return f->positions[(uint64_t)b * f->pos_ld + row];
    return (f->old ? f->old[b] : 0) + row;
}

void vkmha__rope_angle(const vkmha_mha_desc *d, uint32_t pos, uint32_t i, double *c,
                       double *s)
{
    const double a = (double)pos / d->rope_scale *
                     pow((double)d->rope_theta, -2.0 * i / d->rope_dims);
    *c = cos(a);
    *s = sin(a);
}

void vkmha__rope_rows(const vkmha_mha_desc *d, float *x, uint32_t rows, uint32_t heads,
                      uint64_t ld, const mha_fwd *f, bool key)
{
    const uint32_t half = d->rope_dims / 2;
    for (uint32_t r = 0; r < rows; r++) {
        const uint32_t b = r / (key ? f->Lk : f->Lq), t = r % (key ? f->Lk : f->Lq);
        const uint32_t pos = vkmha__rope_position(f, b, t, key);
        for (uint32_t i = 0; i < half; i++) {
            double c, s;
            vkmha__rope_angle(d, pos, i, &c, &s);
            const uint32_t a = d->rope_layout == VKMHA_ROPE_INTERLEAVED ? 2 * i : i,
                           e = d->rope_layout == VKMHA_ROPE_INTERLEAVED ? 2 * i + 1 : i + half;
            for (uint32_t h = 0; h < heads; h++) {
                float *p = x + r * ld + (uint64_t)h * d->d_k;
                const double x0 = p[a], x1 = p[e];
                p[a] = (float)(x0 * c - x1 * s);
                p[e] = (float)(x1 * c + x0 * s);
            }
        }
    }
}

/* The projection weights of a shard (d, as shard_desc leaves it) cut from
 * the whole layer's quantized ones (whole, the desc before): new matrices
 * in owned[0 .. 3] (freed by the caller). */
static vkmha_status shard_quantized(const vkmha_context *ctx, const vkmha_mha_desc *whole,
                                    vkmha_mha_desc *d, void *owned[4])
{
    const uint32_t kv0 = whole->head_begin / (whole->n_head / whole->n_kv_head);
    const uint32_t r0[4] = {whole->head_begin * whole->d_k, kv0 * whole->d_k,
                            kv0 * whole->d_v, 0};
    const void **w[4] = {&d->w_q, &d->w_k, &d->w_v, &d->w_o};
    for (int i = 0; i < 4; i++) {
        const vkmha_quant_desc q = vkmha__weight_quant(whole, i),
                               sub = vkmha__weight_quant(d, i);
        const vkmha_quant_layout l = vkmha__quant_layout(&q), sl = vkmha__quant_layout(&sub);
        if (!(owned[i] = vkmha__alloc(ctx, (size_t)sl.bytes)))
            return VKMHA_ERROR_OUT_OF_HOST_MEMORY;
        vkmha__quant_slice(&q, &l, *w[i], r0[i], i == 3 ? whole->head_begin * whole->d_v : 0,
                           &sub, &sl, owned[i]);
        *w[i] = owned[i];
    }
    return VKMHA_SUCCESS;
}

/* A head shard (d->head_begin, head_end of the whole layer's resolved desc
 * d) as the smaller layer it computes: its rows of the projections (whole
 * rows: pointers into the caller's weights, or of quantized ones copies),
 * its columns of w_o (a copy), no b_o and no post-norm; the copies in
 * owned[0 .. 3], freed by the caller. */
static vkmha_status shard_desc(const vkmha_context *ctx, vkmha_mha_desc *d, void *owned[4])
{
    const vkmha_mha_desc whole = *d;
    const uint32_t g = d->n_head / d->n_kv_head, h0 = d->head_begin, h1 = d->head_end;
    const uint32_t kv0 = h0 / g;
    const size_t es = vkmha__dtype_size(d->weight_dtype);
#define AT(p, elems) ((p) ? (const void *)((const uint8_t *)(p) + (size_t)(elems) * es) : NULL)
    d->b_q = AT(d->b_q, (size_t)h0 * d->d_k);
    d->b_k = AT(d->b_k, (size_t)kv0 * d->d_k);
    d->b_v = AT(d->b_v, (size_t)kv0 * d->d_v);
    if (!d->weights_quantized) {
        d->w_q = AT(d->w_q, (size_t)h0 * d->d_k * d->d_model);
        d->w_k = AT(d->w_k, (size_t)kv0 * d->d_k * d->kdim);
        d->w_v = AT(d->w_v, (size_t)kv0 * d->d_v * d->vdim);
    }
#undef AT
    d->n_head = h1 - h0;
    d->n_kv_head = (h1 - h0) / g;
    d->b_o = NULL;
    d->post_norm = false;
    d->norm_gamma = d->norm_beta = NULL;
    if (d->weights_quantized)
        return shard_quantized(ctx, &whole, d, owned);
    const size_t col0 = (size_t)h0 * d->d_v * es, cols = (size_t)(h1 - h0) * d->d_v * es,
                 row = (size_t)whole.n_head * d->d_v * es; /* bytes of a row of w_o */
    uint8_t *o = vkmha__alloc(ctx, cols * d->d_model);
    if (!o)
        return VKMHA_ERROR_OUT_OF_HOST_MEMORY;
    for (uint32_t r = 0; r < d->d_model; r++)
        memcpy(o + r * cols, (const uint8_t *)d->w_o + r * row + col0, cols);
    d->w_o = owned[3] = o;
    return VKMHA_SUCCESS;
}

VKMHA_API void vkmha_mha_destroy(vkmha_mha *mha)
{
    if (!mha)
        return;
    mha->ctx->ops->mha_free(mha);
    vkmha__free(mha->ctx, mha);
}

/* The weights of `in` in order, each with its dtype (gamma / beta defaulted
 * to fp32 ones / zeros). */
static vkmha_status gather_weights(const vkmha_context *ctx, const vkmha_mha_desc *in,
                                   const uint64_t n[WEIGHT_COUNT],
                                   const void *src[WEIGHT_COUNT], uint32_t dt[WEIGHT_COUNT],
                                   float **ones)
{
    src[W_Q] = in->w_q;
    src[W_K] = in->w_k;
    src[W_V] = in->w_v;
    src[W_O] = in->w_o;
    src[B_Q] = in->b_q;
    src[B_K] = in->b_k;
    src[B_V] = in->b_v;
    src[B_O] = in->b_o;
    src[GAMMA] = in->norm_gamma;
    src[BETA] = in->norm_beta;
    for (int i = 0; i < WEIGHT_COUNT; i++)
        dt[i] = in->weight_dtype;
    *ones = NULL;
    if (!in->post_norm)
        return VKMHA_SUCCESS;
    /* One array of ones followed by zeros serves both defaults. */
    if (!src[GAMMA] || !src[BETA]) {
        *ones = vkmha__calloc(ctx, 2 * n[GAMMA], sizeof(float));
        if (!*ones)
            return VKMHA_ERROR_OUT_OF_HOST_MEMORY;
        for (uint64_t i = 0; i < n[GAMMA]; i++)
            (*ones)[i] = 1.0f;
        if (!src[GAMMA]) {
            src[GAMMA] = *ones;
            dt[GAMMA] = VKMHA_DTYPE_F32;
        }
        if (!src[BETA]) {
            src[BETA] = *ones + n[GAMMA];
            dt[BETA] = VKMHA_DTYPE_F32;
        }
    }
    return VKMHA_SUCCESS;
}

/* The projection weights src[W_Q .. W_O] (of dt[]) quantized as the layer
 * keeps them (vkmha__weight_quant) into new arrays out[] (freed by the
 * caller), which replace them in src (dtype U8). */
static vkmha_status quantize_weights(vkmha_mha *mha, const void *src[WEIGHT_COUNT],
                                     uint32_t dt[WEIGHT_COUNT], void *out[4])
{
    vkmha_context *ctx = mha->ctx;
    vkmha_status st;
    for (int i = 0; i < 4; i++) {
        const vkmha_quant_desc q = vkmha__weight_quant(&mha->d, i);
        const vkmha_quant_layout l = vkmha__quant_layout(&q);
        if (!(out[i] = vkmha__alloc(ctx, (size_t)l.bytes)))
            return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                               ctx->call);
        if ((st = vkmha__quantize(ctx, &q, &l, dt[i], src[i], out[i], weight_names[i])))
            return st;
        src[i] = out[i];
        dt[i] = VKMHA_DTYPE_U8;
    }
    return VKMHA_SUCCESS;
}

/* Projection weights given quantized (desc->weights_quantized): their
 * bytes checked (vkmha__quant_check), src[W_Q .. W_O] marked U8. */
static vkmha_status check_quantized(vkmha_mha *mha, const void *src[WEIGHT_COUNT],
                                    uint32_t dt[WEIGHT_COUNT])
{
    vkmha_status st;
    for (int i = 0; i < 4; i++) {
        const vkmha_quant_desc q = vkmha__weight_quant(&mha->d, i);
        const vkmha_quant_layout l = vkmha__quant_layout(&q);
        if ((st = vkmha__quant_check(mha->ctx, &q, &l, src[i], weight_names[i])))
            return st;
        dt[i] = VKMHA_DTYPE_U8;
    }
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__mha_create(vkmha_context *ctx, const vkmha_mha_desc *desc, vkmha_mha **out)
{
    vkmha_status st;
    uint64_t n[WEIGHT_COUNT];
    const void *src[WEIGHT_COUNT];
    uint32_t dt[WEIGHT_COUNT];
    float *ones = NULL;
    void *shard[4] = {NULL, NULL, NULL, NULL}, *quantized[4] = {NULL, NULL, NULL, NULL};
    if (!out)
        return vkmha__fail(ctx, INVALID, "%s: out is NULL", ctx->call);
    *out = NULL;
    vkmha_mha *mha = vkmha__calloc(ctx, 1, ctx->ops->mha_size);
    if (!mha)
        return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                           "%s: out of host memory", ctx->call);
    mha->ctx = ctx;
    if ((st = check_desc(ctx, desc, &mha->d)))
        goto fail;
    if ((mha->d.head_begin || mha->d.head_end) && (st = shard_desc(ctx, &mha->d, shard))) {
        vkmha__fail(ctx, st, "%s: out of host memory", ctx->call);
        goto fail;
    }
    weight_sizes(&mha->d, n);
    if ((st = gather_weights(ctx, &mha->d, n, src, dt, &ones))) {
        vkmha__fail(ctx, st, "%s: out of host memory", ctx->call);
        goto fail;
    }
    if (mha->d.weight_quant && (st = mha->d.weights_quantized
                                         ? check_quantized(mha, src, dt)
                                         : quantize_weights(mha, src, dt, quantized)))
        goto fail;
    if ((st = ctx->ops->mha_weights(mha, src, dt, n)))
        goto fail;
    for (int i = 0; i < 4; i++) {
        vkmha__free(ctx, quantized[i]);
        vkmha__free(ctx, shard[i]);
    }
    vkmha__free(ctx, ones);
    /* The layer keeps its own copies: the caller's pointers are not kept. */
    mha->d.w_q = mha->d.w_k = mha->d.w_v = mha->d.w_o = NULL;
    mha->d.b_q = mha->d.b_k = mha->d.b_v = mha->d.b_o = NULL;
    mha->d.norm_gamma = mha->d.norm_beta = NULL;
    *out = mha;
    return VKMHA_SUCCESS;
fail:
    for (int i = 0; i < 4; i++) {
        vkmha__free(ctx, quantized[i]);
        vkmha__free(ctx, shard[i]);
    }
    vkmha__free(ctx, ones);
    vkmha_mha_destroy(mha);
    return st;
}

VKMHA_API vkmha_status vkmha_mha_create(vkmha_context *ctx, const vkmha_mha_desc *desc,
                                        vkmha_mha **out)
{
    if (out)
        *out = NULL;
    if (!ctx)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    vkmha__begin_call(ctx, "vkmha_mha_create");
    return vkmha__mha_create(ctx, desc, out);
}

VKMHA_API vkmha_status vkmha_mha_get_desc(const vkmha_mha *mha, vkmha_mha_desc *out)
{
    if (!mha)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    if (!out) {
        vkmha__begin_call(mha->ctx, "vkmha_mha_get_desc");
        return vkmha__fail(mha->ctx, INVALID, "vkmha_mha_get_desc: out is NULL");
    }
    *out = mha->d;
    return VKMHA_SUCCESS;
}

/* The forward's tensors, in the order of the counts below. */
const char *const vkmha__mha_io_names[5] = {"io->query", "io->key", "io->value", "io->out",
                                        "io->attn_weights"};

/* The forward's arguments, from vkmha_mha_io or vkmha_mha_tensors (whose
 * array pointers are then tensor handles). */
typedef struct fwd_args {
    uint32_t batch, len_q, len_k;
    const void *query, *key, *value, *out, *attn_weights;
    vkmha_attention_path attention_path;
    uint32_t kv_splits;
    uint32_t dtype; /* host arrays: io->dtype; tensors: the query's */
    vkmha_kv_cache *kv_cache;
    uint32_t kv_entry;
    const uint32_t *positions, *entry_tokens;
} fwd_args;

/* RoPE's arguments: positions only with it, each below 2^31; new keys
 * only as the queries' tokens. */
static vkmha_status check_positions(vkmha_mha *mha, const fwd_args *io, mha_fwd *f)
{
    vkmha_context *ctx = mha->ctx;
    const char *fn = ctx->call;
    if (!mha->d.rope_dims) {
        if (io->positions)
            return vkmha__fail(ctx, INVALID, "%s: io->positions is set but the layer has no "
                               "RoPE (desc->rope_dims 0)", fn);
        return VKMHA_SUCCESS;
    }
    if (f->append && f->Lk != f->Lq)
        return vkmha__fail(ctx, INVALID, "%s: io->len_k (%u) differs from io->len_q (%u): "
                           "RoPE (desc->rope_dims) rotates new keys at the queries' positions",
                           fn, f->Lk, f->Lq);
    for (uint32_t b = 0; !io->positions && f->old && b < f->B; b++)
        if ((uint64_t)f->old[b] + (f->tokens ? f->tokens[b] : f->Lq) - 1 > INT32_MAX)
            return vkmha__fail(ctx, INVALID, "%s: the KV cache entry %u's positions pass "
                               "2^31 - 1", fn, f->entry + b);
    f->positions = io->positions;
    return VKMHA_SUCCESS;
}

/* RoPE's positions' values, once every other argument is checked (no array
 * is read before). */
static vkmha_status check_position_values(vkmha_context *ctx, const mha_fwd *f)
{
    const uint64_t n = f->tokens ? f->Lq : (uint64_t)f->B * f->Lq;
    for (uint64_t i = 0; f->positions && i < n; i++)
        if (f->positions[i] > INT32_MAX)
            return vkmha__fail(ctx, INVALID, "%s: io->positions[%llu] (%u) is beyond 2^31 - 1",
                               ctx->call, (unsigned long long)i, f->positions[i]);
    return VKMHA_SUCCESS;
}

/* A mixed batch's counts (io->entry_tokens): with a KV cache and new keys
 * as the packed tokens (len_k 0 or len_q), each >= 1, adding up to len_q;
 * no attention weights (they have no packed shape). */
static vkmha_status check_tokens(vkmha_context *ctx, const fwd_args *io)
{
    const char *fn = ctx->call;
    const uint32_t B = io->batch ? io->batch : 1;
    if (!io->kv_cache)
        return vkmha__fail(ctx, INVALID, "%s: io->entry_tokens is set without io->kv_cache (a "
                           "mixed batch's entries are a KV cache's)", fn);
    if (io->len_k && io->len_k != io->len_q)
        return vkmha__fail(ctx, INVALID, "%s: io->len_k (%u) differs from io->len_q (%u) with "
                           "io->entry_tokens: the new keys are the packed tokens", fn,
                           io->len_k, io->len_q);
    if (io->attn_weights)
        return vkmha__fail(ctx, INVALID, "%s: io->attn_weights is set with io->entry_tokens (a "
                           "mixed batch's weights have no [batch][H][len_q][len_kv] shape)", fn);
    uint64_t sum = 0;
    for (uint32_t b = 0; b < B; b++) {
        if (!io->entry_tokens[b])
            return vkmha__fail(ctx, INVALID, "%s: io->entry_tokens[%u] is 0 (each entry brings "
                               ">= 1 token)", fn, b);
        sum += io->entry_tokens[b];
    }
    if (sum != io->len_q)
        return vkmha__fail(ctx, INVALID, "%s: io->entry_tokens add up to %llu, not io->len_q "
                           "(%u, the packed rows)", fn, (unsigned long long)sum, io->len_q);
    return VKMHA_SUCCESS;
}

/* Checks everything but the mask. */
static vkmha_status check_args(vkmha_mha *mha, const fwd_args *io, mha_fwd *f)
{
    vkmha_context *ctx = mha->ctx;
    const vkmha_mha_desc *d = &mha->d;
    const char *fn = ctx->call;
    vkmha_status st;
    uint64_t bytes;
    /* With a KV cache, key and value both NULL: attend over what it holds. */
    const bool append = !io->kv_cache || io->key || io->value;
    if (io->kv_cache && !io->key != !io->value)
        return vkmha__fail(ctx, INVALID,
                           "%s: io->%s is NULL but io->%s is not (with io->kv_cache give both, "
                           "or neither to attend over what the cache holds)",
                           fn, io->key ? "value" : "key", io->key ? "key" : "value");
    if (!io->query || (append && (!io->key || !io->value)) || !io->out)
        return vkmha__fail(ctx, INVALID, "%s: io->%s is NULL", fn,
                           !io->query ? "query" : !io->key ? "key" : !io->value ? "value" : "out");
    if (!io->kv_cache && io->kv_entry)
        return vkmha__fail(ctx, INVALID, "%s: io->kv_entry is %u without io->kv_cache", fn,
                           io->kv_entry);
    if (io->len_q == 0)
        return vkmha__fail(ctx, INVALID, "%s: io->len_q is 0 (must be >= 1)", fn);
    if ((st = vkmha__check_dtype(ctx, "io->dtype", io->dtype)) ||
        (io->entry_tokens && (st = check_tokens(ctx, io))))
        return st;
    f->ad = io->dtype;
    f->es = vkmha__dtype_size(f->ad);
    f->B = io->batch ? io->batch : 1;
    f->Lq = io->len_q;
    f->Lk = io->len_k ? io->len_k : io->len_q;
    f->cache = NULL;
    f->append = true;
    f->old = f->lengths = NULL;
    f->entry = 0;
    f->positions = NULL;
    f->pos_ld = f->Lq;
    f->q0 = 0;
    f->tokens = io->entry_tokens;
    f->parts = NULL;
    f->n_parts = 0;
    if (io->kv_cache && (st = vkmha__kv_resolve(mha, io->kv_cache, io->kv_entry, f->Lk,
                                                f->tokens, append, f)))
        return st;
    if ((st = check_positions(mha, io, f)))
        return st;
    /* The attention's keys: the new ones, or a cache's (f->as.len_k). */
    const uint32_t kv_len = io->kv_cache ? f->as.len_k : f->Lk;
    /* Both backends count the rows of the projections in 32 bits. A mixed
     * batch's are packed: len_q of them. */
    const uint64_t per = f->tokens ? 1 : f->B, rows_q = per * f->Lq, rows_k = per * f->Lk;
    if (rows_q > UINT32_MAX || rows_k > UINT32_MAX)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: io->batch (%u) * io->%s (%u) rows exceed 2^32 - 1", fn, f->B,
                           rows_q > UINT32_MAX ? "len_q" : "len_k",
                           rows_q > UINT32_MAX ? f->Lq : f->Lk);
    uint64_t counts[5];
    const char *const *names = vkmha__mha_io_names;
    const bool ok[5] = {
        vkmha__mul_u64(rows_q, d->d_model, &counts[0]),
        vkmha__mul_u64(rows_k, d->kdim, &counts[1]),
        vkmha__mul_u64(rows_k, d->vdim, &counts[2]), true,
        f->tokens ? (counts[4] = 0, true) /* refused: check_tokens */
                  : vkmha__mul_u64((uint64_t)f->B * d->n_head, (uint64_t)f->Lq * kv_len,
                                   &counts[4])};
    for (int i = 0; i < 5; i++)
        if (!ok[i])
            return vkmha__fail(ctx, INVALID, "%s: %s size (io->batch * io->len_q/len_k * "
                               "features) overflows 64 bits", fn, names[i]);
    counts[3] = counts[0];
    for (int i = 0; i < 5; i++)
        if ((st = vkmha__check_count(ctx, fn, names[i], counts[i], f->es, &bytes)))
            return st;
    f->n_query = counts[0];
    f->n_key = counts[1];
    f->n_value = counts[2];
    f->n_out = counts[3];
    f->n_weights = counts[4];
    const void *in[3] = {io->query, io->key, io->value};
    const uint64_t es = f->es;
    for (int i = 0; i < 3 && !ctx->tensor_call && in[i]; i++) {
        if (vkmha__overlap(io->out, f->n_out * es, in[i], counts[i] * es))
            return vkmha__fail(ctx, INVALID, "%s: io->out overlaps %s", fn, names[i]);
        if (vkmha__overlap(io->attn_weights, f->n_weights * es, in[i], counts[i] * es))
            return vkmha__fail(ctx, INVALID, "%s: io->attn_weights overlaps %s", fn, names[i]);
    }
    if (!ctx->tensor_call &&
        vkmha__overlap(io->out, f->n_out * es, io->attn_weights, f->n_weights * es))
        return vkmha__fail(ctx, INVALID, "%s: io->attn_weights overlaps io->out", fn);
    f->as = (attn_shape){.batch = f->B, .heads = d->n_head, .kv_heads = d->n_kv_head,
                         .len_q = f->Lq, .len_k = kv_len, .d_k = d->d_k, .d_v = d->d_v,
                         .scale = d->scale, .dtype = f->ad, .lengths = f->lengths};
    return vkmha__check_path(ctx, fn, "io->attention_path", "io->kv_splits",
                             io->attention_path, io->kv_splits, &f->as);
}

/* With a KV cache the causal mask is aligned to each entry's end: query i of
 * an entry of L keys sees j <= L - len_q + i + causal_offset, which is the
 * shaders' (and the reference's) i + offset + L - len_k with the offset
 * shifted by len_k - len_q (vkmha__check_mask shifts, then clamps). */
static int64_t causal_shift(const mha_fwd *f)
{
    return f->cache && !f->tokens ? (int64_t)f->as.len_k - f->Lq : 0;
}

/* A mixed batch's mask: no arrays per batch entry (they have no packed
 * shape); the causal alignment is each part's (vkmha__mha_forward_mixed). */
static vkmha_status check_mixed_mask(vkmha_context *ctx, const mha_fwd *f)
{
    static const struct {
        uint32_t kind;
        const char *name;
    } per_entry[] = {{VKMHA_MASK_KEY_PADDING, "key_padding"},
                     {VKMHA_MASK_FULL, "full"},
                     {VKMHA_MASK_BIAS, "bias"}};
    for (size_t i = 0; f->tokens && i < VKMHA_ARRAY_LEN(per_entry); i++)
        if (f->mask.m.kinds & per_entry[i].kind)
            return vkmha__fail(ctx, INVALID, "%s: io->mask->%s is set with io->entry_tokens (a "
                               "mixed batch has causal, window, soft cap, ALiBi and sinks; "
                               "not masks of arrays per batch entry)",
                               ctx->call, per_entry[i].name);
    return VKMHA_SUCCESS;
}

static vkmha_status check_io(vkmha_mha *mha, const vkmha_mha_io *io, mha_fwd *f)
{
    vkmha_context *ctx = mha->ctx;
    vkmha_status st;
    if (!io)
        return vkmha__fail(ctx, INVALID, "%s: io is NULL", ctx->call);
    const fwd_args a = {.batch = io->batch, .len_q = io->len_q, .len_k = io->len_k,
                        .query = io->query, .key = io->key, .value = io->value, .out = io->out,
                        .attn_weights = io->attn_weights, .attention_path = io->attention_path,
                        .kv_splits = io->kv_splits, .dtype = io->dtype,
                        .kv_cache = io->kv_cache, .kv_entry = io->kv_entry,
                        .positions = io->positions, .entry_tokens = io->entry_tokens};
    if ((st = check_args(mha, &a, f)))
        return st;
    f->mask.t[0] = f->mask.t[1] = f->mask.t[2] = NULL; /* host arrays */
    f->mask.at[0] = f->mask.at[1] = f->mask.at[2] = 0;
    if ((st = vkmha__check_mask(ctx, ctx->call, io->mask, f->B, mha->d.n_head, f->Lq,
                                f->as.len_k, causal_shift(f), &f->mask.m)) ||
        (st = check_mixed_mask(ctx, f)))
        return st;
    return check_position_values(ctx, f);
}

mm_shape vkmha__projection(uint32_t rows, uint32_t out, uint32_t in)
{
    return (mm_shape){.batch = 1, .m = rows, .n = out, .k = in, .lda = in, .ldb = in,
                      .ldc = out, .trans_b = true, .alpha = 1.0f};
}

VKMHA_API vkmha_status vkmha_mha_forward(vkmha_mha *mha, const vkmha_mha_io *io)
{
    mha_fwd f;
    vkmha_status st;
    if (!mha)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    vkmha__begin_call(mha->ctx, "vkmha_mha_forward");
    if ((st = check_io(mha, io, &f)))
        return st;
    static const vkmha_run run = {.form = FORM_HOST};
    const vkmha_arg args[5] = {{.host = io->query, .dtype = f.ad},
                               {.host = io->key, .dtype = f.ad},
                               {.host = io->value, .dtype = f.ad},
                               {.host = io->out, .dtype = f.ad},
                               {.host = io->attn_weights, .dtype = f.ad}};
    if (!(st = vkmha__mha_forward_split(mha, &run, &f, args)))
        vkmha__kv_commit(&f);
    return st;
}

vkmha_status vkmha__mha_forward_tensors(vkmha_mha *mha, const vkmha_run *run,
                                        const vkmha_mha_tensors *io)
{
    static const char *const fns[] = {[FORM_TENSOR] = "vkmha_mha_forward_tensor",
                                      [FORM_RECORD] = "vkmha_mha_record",
                                      [FORM_SUBMIT] = "vkmha_mha_submit"};
    vkmha_context *ctx = mha->ctx;
    vkmha_status st;
    mha_fwd f;
    if ((st = vkmha__tensor_call(ctx, run, fns[run->form])))
        return st;
    if (!io)
        return vkmha__fail(ctx, INVALID, "%s: io is NULL", ctx->call);
    /* The query's dtype is the activations': checked against the others below. */
    vkmha_arg arg[5];
    const char *const *names = vkmha__mha_io_names;
    const vkmha_tensor *const t[5] = {io->query, io->key, io->value, io->out,
                                      io->attn_weights};
    if (io->query && (st = vkmha__tensor_arg(ctx, names[0], t[0], false, 0, &arg[0])))
        return st;
    const fwd_args a = {.batch = io->batch, .len_q = io->len_q, .len_k = io->len_k,
                        .query = io->query, .key = io->key, .value = io->value, .out = io->out,
                        .attn_weights = io->attn_weights, .attention_path = io->attention_path,
                        .kv_splits = io->kv_splits,
                        .dtype = io->query ? arg[0].dtype : VKMHA_DTYPE_F32,
                        .kv_cache = io->kv_cache, .kv_entry = io->kv_entry,
                        .positions = io->positions, .entry_tokens = io->entry_tokens};
    if ((st = check_args(mha, &a, &f)))
        return st;
    const uint64_t n[5] = {f.n_query, f.n_key, f.n_value, f.n_out, f.n_weights};
    for (int i = 0; i < 5; i++) {
        const bool optional = i == 4 || ((i == 1 || i == 2) && !f.append);
        if ((st = vkmha__tensor_arg(ctx, names[i], t[i], optional, n[i], &arg[i])))
            return st;
        if (t[i] && arg[i].dtype != f.ad)
            return vkmha__fail(ctx, INVALID,
                               "%s: %s's dtype (%u) differs from io->query's (%u): the layer's "
                               "inputs and outputs share one dtype",
                               ctx->call, names[i], arg[i].dtype, f.ad);
    }
    for (int o = 3; o < 5; o++)
        for (int i = 0; i < o; i++)
            if (t[o] && vkmha__tensors_overlap(t[o], t[i]))
                return vkmha__fail(ctx, INVALID, "%s: %s shares memory with %s", ctx->call,
                                   names[o], names[i]);
    if ((st = vkmha__tensor_mask(ctx, io->mask, f.B, mha->d.n_head, f.Lq, f.as.len_k,
                                 causal_shift(&f), &f.mask)) ||
        (st = check_mixed_mask(ctx, &f)) || (st = check_position_values(ctx, &f)))
        return st;
    if (!(st = vkmha__mha_forward_split(mha, run, &f, arg)))
        vkmha__kv_commit(&f);
    return st;
}

VKMHA_API vkmha_status vkmha_mha_forward_tensor(vkmha_mha *mha, const vkmha_mha_tensors *io)
{
    static const vkmha_run run = {.form = FORM_TENSOR};
    return mha ? vkmha__mha_forward_tensors(mha, &run, io) : INVALID;
}

VKMHA_API vkmha_status vkmha_mha_submit(vkmha_mha *mha, const vkmha_mha_tensors *io,
                                        vkmha_submission **out)
{
    if (out)
        *out = NULL;
    const vkmha_run run = {.form = FORM_SUBMIT, .sub = out};
    return mha ? vkmha__mha_forward_tensors(mha, &run, io) : INVALID;
}

/* ---- submissions (the Vulkan backend's: src/vk_submission.c) -------------- */

vkmha_submission *vkmha__submission_done(vkmha_context *ctx)
{
    vkmha_submission *s = vkmha__calloc(ctx, 1, sizeof *s);
    if (s) {
        s->ctx = ctx;
        s->done = true;
    }
    return s;
}

VKMHA_API vkmha_status vkmha_submission_wait(vkmha_submission *s, uint64_t timeout_ns)
{
    if (!s)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    return s->done ? s->status : s->ctx->ops->submission_wait(s, timeout_ns);
}

VKMHA_API vkmha_status vkmha_submission_poll(vkmha_submission *s)
{
    if (!s)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    return s->done ? s->status : s->ctx->ops->submission_poll(s);
}

VKMHA_API void vkmha_submission_destroy(vkmha_submission *s)
{
    if (s)
        s->ctx->ops->submission_free(s);
}
