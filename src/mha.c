/* The multi-head attention layer: argument checks, weights (copied once, to
 * the device for Vulkan), and the forward graph on both backends:
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
 * The reference backend does each step literally. The Vulkan backend never
 * moves heads: attention reads head h of qp, kp, vp in place through strides
 * and writes om directly (fused or unfused, see src/vk_attention.c), so the
 * split and merge are free.
 */
#include "vk_internal.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT

enum weight { W_Q, W_K, W_V, W_O, B_Q, B_K, B_V, B_O, GAMMA, BETA, WEIGHT_COUNT };

/* The forward's descriptor sites, in recording order. */
enum mha_site {
    SITE_PROJ_Q, SITE_PROJ_K, SITE_PROJ_V,
    SITE_ATTENTION, /* VK_ATTENTION_SITES sites */
    SITE_PROJ_O = SITE_ATTENTION + VK_ATTENTION_SITES,
    SITE_NORM,
    SITE_COUNT
};

struct vkmha_mha {
    vkmha_context *ctx;
    vkmha_mha_desc d;               /* defaults resolved, pointers NULL */
    /* Reference backend: fp32 copies, NULL if absent, holding the values of
     * d.storage_dtype (rounded to it, as the device stores them). */
    float *host[WEIGHT_COUNT];
    vk_buffer dev[WEIGHT_COUNT];    /* Vulkan backend: device copies */
    vk_site_pool sites;
};

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
    const char *const names[4] = {"desc->w_q", "desc->w_k", "desc->w_v", "desc->w_o"};
    for (int i = 0; i < 4; i++)
        if (!required[i])
            return vkmha__fail(ctx, INVALID, "%s: %s is NULL", fn, names[i]);
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
                               fn, names[i]);
    weight_sizes(d, sizes);
    for (int i = 0; i < W_O + 1; i++)
        if ((st = vkmha__check_count(ctx, fn, names[i], sizes[i], 4, &bytes)))
            return st;
    return VKMHA_SUCCESS;
}

VKMHA_API void vkmha_mha_destroy(vkmha_mha *mha)
{
    if (!mha)
        return;
    vk_state *vk = mha->ctx->vk;
    for (int i = 0; i < WEIGHT_COUNT; i++) {
        vkmha__free(mha->ctx, mha->host[i]);
        if (vk)
            vk_buffer_destroy(vk, &mha->dev[i]);
    }
    if (vk)
        vk_site_pool_destroy(vk, &mha->sites);
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

/* Copies the weights to the device in the storage dtype (converted on the
 * host as they are written into mapped memory or staging). */
static vkmha_status upload_weights(vkmha_mha *mha, const void *src[WEIGHT_COUNT],
                                   const uint32_t dt[WEIGHT_COUNT],
                                   const uint64_t n[WEIGHT_COUNT])
{
    static const char *const what[WEIGHT_COUNT] = {"w_q", "w_k", "w_v", "w_o", "b_q",
                                                   "b_k", "b_v", "b_o", "norm_gamma",
                                                   "norm_beta"};
    static const vk_kind kinds[SITE_COUNT] = {
        [SITE_PROJ_Q] = KIND_MATMUL, [SITE_PROJ_K] = KIND_MATMUL, [SITE_PROJ_V] = KIND_MATMUL,
        [SITE_ATTENTION] = VK_ATTENTION_SITE_KINDS,
        [SITE_PROJ_O] = KIND_MATMUL, [SITE_NORM] = KIND_LAYERNORM};
    vk_state *vk = mha->ctx->vk;
    const uint32_t sd = mha->d.storage_dtype;
    const uint64_t es = vkmha__dtype_size(sd);
    vkmha_status st;
    for (int i = 0; i < WEIGHT_COUNT; i++) {
        if (!src[i])
            continue;
        char name[64];
        snprintf(name, sizeof name, "desc->%s", what[i]);
        if ((st = vk_check_size(vk, n[i] * es, name)) ||
            (st = vk_buffer_create(vk, n[i] * es, false, false, name, &mha->dev[i])))
            return st;
    }
    if ((st = vk_site_pool_create(vk, kinds, SITE_COUNT, &mha->sites)) ||
        (st = vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL)))
        return st;
    for (int i = 0; i < WEIGHT_COUNT && !st; i++)
        if (src[i])
            st = vk_upload_converted(vk, &mha->dev[i], src[i], dt[i], sd, n[i]);
    return vk_exec_end(vk, st, NULL);
}

/* The reference backend's copies: fp32 arrays of the storage dtype's values. */
static vkmha_status copy_weights(vkmha_mha *mha, const void *src[WEIGHT_COUNT],
                                 const uint32_t dt[WEIGHT_COUNT], const uint64_t n[WEIGHT_COUNT])
{
    const uint32_t sd = mha->d.storage_dtype;
    for (int i = 0; i < WEIGHT_COUNT; i++) {
        if (!src[i])
            continue;
        /* Room for the stored values ahead of their fp32 widening. */
        if (!(mha->host[i] = vkmha__alloc(mha->ctx, (size_t)n[i] * sizeof(float))))
            return vkmha__fail(mha->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               "%s: out of host memory", mha->ctx->call);
        vkmha__convert(dt[i], src[i], sd, mha->host[i], (size_t)n[i]);
        if (sd != VKMHA_DTYPE_F32) /* widen in place, from the back */
            for (uint64_t j = n[i]; j-- > 0;)
                vkmha__to_f32(sd, (const uint16_t *)mha->host[i] + j, 1, mha->host[i] + j);
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
    if (!out)
        return vkmha__fail(ctx, INVALID, "%s: out is NULL", ctx->call);
    *out = NULL;
    vkmha_mha *mha = vkmha__calloc(ctx, 1, sizeof *mha);
    if (!mha)
        return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                           "%s: out of host memory", ctx->call);
    mha->ctx = ctx;
    if ((st = check_desc(ctx, desc, &mha->d)))
        goto fail;
    weight_sizes(&mha->d, n);
    if ((st = gather_weights(ctx, &mha->d, n, src, dt, &ones))) {
        vkmha__fail(ctx, st, "%s: out of host memory", ctx->call);
        goto fail;
    }
    if ((st = ctx->vk ? upload_weights(mha, src, dt, n) : copy_weights(mha, src, dt, n)))
        goto fail;
    vkmha__free(ctx, ones);
    /* The layer keeps its own copies: the caller's pointers are not kept. */
    mha->d.w_q = mha->d.w_k = mha->d.w_v = mha->d.w_o = NULL;
    mha->d.b_q = mha->d.b_k = mha->d.b_v = mha->d.b_o = NULL;
    mha->d.norm_gamma = mha->d.norm_beta = NULL;
    *out = mha;
    return VKMHA_SUCCESS;
fail:
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
static const char *const io_names[5] = {"io->query", "io->key", "io->value", "io->out",
                                        "io->attn_weights"};

/* The forward's arguments, from vkmha_mha_io or vkmha_mha_tensors (whose
 * array pointers are then tensor handles). */
typedef struct fwd_args {
    uint32_t batch, len_q, len_k;
    const void *query, *key, *value, *out, *attn_weights;
    vkmha_attention_path attention_path;
    uint32_t kv_splits;
    uint32_t dtype; /* host arrays: io->dtype; tensors: the query's */
} fwd_args;

/* Resolved forward arguments. */
typedef struct fwd {
    uint32_t B, Lq, Lk;
    mask_r mask;
    attn_shape as; /* the attention inside, path and splits checked */
    uint64_t n_query, n_key, n_value, n_out, n_weights; /* elements */
    uint32_t ad;   /* the activations' dtype: io and the projections */
    uint64_t es;   /* its bytes per element */
} fwd;

/* Checks everything but the mask. */
static vkmha_status check_args(vkmha_mha *mha, const fwd_args *io, fwd *f)
{
    vkmha_context *ctx = mha->ctx;
    const vkmha_mha_desc *d = &mha->d;
    const char *fn = ctx->call;
    vkmha_status st;
    uint64_t bytes;
    if (!io->query || !io->key || !io->value || !io->out)
        return vkmha__fail(ctx, INVALID, "%s: io->%s is NULL", fn,
                           !io->query ? "query" : !io->key ? "key" : !io->value ? "value" : "out");
    if (io->len_q == 0)
        return vkmha__fail(ctx, INVALID, "%s: io->len_q is 0 (must be >= 1)", fn);
    if ((st = vkmha__check_dtype(ctx, "io->dtype", io->dtype)))
        return st;
    f->ad = io->dtype;
    f->es = vkmha__dtype_size(f->ad);
    f->B = io->batch ? io->batch : 1;
    f->Lq = io->len_q;
    f->Lk = io->len_k ? io->len_k : io->len_q;
    /* Both backends count the rows of the projections in 32 bits. */
    if ((uint64_t)f->B * f->Lq > UINT32_MAX || (uint64_t)f->B * f->Lk > UINT32_MAX)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: io->batch (%u) * io->%s (%u) rows exceed 2^32 - 1", fn, f->B,
                           (uint64_t)f->B * f->Lq > UINT32_MAX ? "len_q" : "len_k",
                           (uint64_t)f->B * f->Lq > UINT32_MAX ? f->Lq : f->Lk);
    uint64_t counts[5];
    const char *const *names = io_names;
    const bool ok[5] = {
        vkmha__mul_u64((uint64_t)f->B * f->Lq, d->d_model, &counts[0]),
        vkmha__mul_u64((uint64_t)f->B * f->Lk, d->kdim, &counts[1]),
        vkmha__mul_u64((uint64_t)f->B * f->Lk, d->vdim, &counts[2]), true,
        vkmha__mul_u64((uint64_t)f->B * d->n_head, (uint64_t)f->Lq * f->Lk, &counts[4])};
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
    for (int i = 0; i < 3 && !ctx->tensor_call; i++) {
        if (vkmha__overlap(io->out, f->n_out * es, in[i], counts[i] * es))
            return vkmha__fail(ctx, INVALID, "%s: io->out overlaps %s", fn, names[i]);
        if (vkmha__overlap(io->attn_weights, f->n_weights * es, in[i], counts[i] * es))
            return vkmha__fail(ctx, INVALID, "%s: io->attn_weights overlaps %s", fn, names[i]);
    }
    if (!ctx->tensor_call &&
        vkmha__overlap(io->out, f->n_out * es, io->attn_weights, f->n_weights * es))
        return vkmha__fail(ctx, INVALID, "%s: io->attn_weights overlaps io->out", fn);
    f->as = (attn_shape){.batch = f->B, .heads = d->n_head, .kv_heads = d->n_kv_head,
                         .len_q = f->Lq, .len_k = f->Lk, .d_k = d->d_k, .d_v = d->d_v,
                         .scale = d->scale, .dtype = f->ad};
    return vkmha__check_path(ctx, fn, "io->attention_path", "io->kv_splits",
                             io->attention_path, io->kv_splits, &f->as);
}

static vkmha_status check_io(vkmha_mha *mha, const vkmha_mha_io *io, fwd *f)
{
    vkmha_context *ctx = mha->ctx;
    vkmha_status st;
    if (!io)
        return vkmha__fail(ctx, INVALID, "%s: io is NULL", ctx->call);
    const fwd_args a = {.batch = io->batch, .len_q = io->len_q, .len_k = io->len_k,
                        .query = io->query, .key = io->key, .value = io->value, .out = io->out,
                        .attn_weights = io->attn_weights, .attention_path = io->attention_path,
                        .kv_splits = io->kv_splits, .dtype = io->dtype};
    if ((st = check_args(mha, &a, f)))
        return st;
    return vkmha__check_mask(ctx, ctx->call, io->mask, f->B, mha->d.n_head, f->Lq, f->Lk,
                             &f->mask);
}

/* A projection y [rows][out] = x [rows][in] W^T + b as a resolved matmul. */
static mm_shape projection(uint32_t rows, uint32_t out, uint32_t in)
{
    return (mm_shape){.batch = 1, .m = rows, .n = out, .k = in, .lda = in, .ldb = in,
                      .ldc = out, .trans_b = true, .alpha = 1.0f};
}

/* Rounds fp32 values to a dtype's (as the device stores an activation). */
static void round_to(uint32_t dtype, float *p, uint64_t n)
{
    for (uint64_t i = 0; dtype != VKMHA_DTYPE_F32 && i < n; i++) {
        uint16_t h;
        vkmha__from_f32(dtype, &p[i], 1, &h);
        vkmha__to_f32(dtype, &h, 1, &p[i]);
    }
}

/* The reference forward: fp32 with double accumulation, rounding each
 * activation to the activations' dtype where the Vulkan backend stores it
 * (projections, attention output, output before the LayerNorm). */
static vkmha_status forward_reference(vkmha_mha *mha, const vkmha_mha_io *io, const fwd *f)
{
    const vkmha_mha_desc *d = &mha->d;
    float *const *w = mha->host;
    const uint32_t H = d->n_head, Hkv = d->n_kv_head, ad = f->ad;
    const uint32_t rq = f->B * f->Lq, rk = f->B * f->Lk;
    const size_t nq = (size_t)rq * H * d->d_k, nk = (size_t)rk * Hkv * d->d_k,
                 nv = (size_t)rk * Hkv * d->d_v, no = (size_t)rq * H * d->d_v;
    const size_t nin = (size_t)(f->n_query + f->n_key + f->n_value), nout = (size_t)f->n_out,
                 nw = io->attn_weights ? (size_t)f->n_weights : 0;
    const bool typed = ad != VKMHA_DTYPE_F32;
    vkmha_status st = VKMHA_SUCCESS;
    /* One allocation: qp, kp, vp, qh, kh, vh, oh, om, and for 16-bit
     * activations fp32 copies of the inputs, the output and the weights. */
    float *mem = vkmha__alloc(mha->ctx, (2 * (nq + nk + nv) + 2 * no +
                                         (typed ? nin + nout + nw : 0)) * sizeof(float));
    if (!mem)
        return vkmha__fail(mha->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                           "%s: out of host memory", mha->ctx->call);
    float *qp = mem, *kp = qp + nq, *vp = kp + nk, *qh = vp + nv, *kh = qh + nq, *vh = kh + nk,
          *oh = vh + nv, *om = oh + no;
    const float *query = io->query, *key = io->key, *value = io->value;
    float *out = io->out, *weights = io->attn_weights;
    if (typed) {
        float *x = om + no;
        vkmha__to_f32(ad, io->query, (size_t)f->n_query, x);
        query = x;
        vkmha__to_f32(ad, io->key, (size_t)f->n_key, x += f->n_query);
        key = x;
        vkmha__to_f32(ad, io->value, (size_t)f->n_value, x += f->n_key);
        value = x;
        out = x + f->n_value;
        weights = io->attn_weights ? out + nout : NULL;
    }

    mm_shape s = projection(rq, H * d->d_k, d->d_model);
    ref_matmul(&s, query, w[W_Q], w[B_Q], qp);
    s = projection(rk, Hkv * d->d_k, d->kdim);
    ref_matmul(&s, key, w[W_K], w[B_K], kp);
    s = projection(rk, Hkv * d->d_v, d->vdim);
    ref_matmul(&s, value, w[W_V], w[B_V], vp);
    round_to(ad, qp, nq);
    round_to(ad, kp, nk);
    round_to(ad, vp, nv);

    heads_shape hq = {f->B, f->Lq, H, d->d_k, 0}, hk = {f->B, f->Lk, Hkv, d->d_k, 0},
                hv = {f->B, f->Lk, Hkv, d->d_v, 0}, ho = {f->B, f->Lq, H, d->d_v, 0};
    ref_split_heads(&hq, qp, qh);
    ref_split_heads(&hk, kp, kh);
    ref_split_heads(&hv, vp, vh);
    const attn_shape as = f->as;
    if ((st = ref_attention(mha->ctx, &as, qh, kh, vh, &f->mask, oh, weights))) {
        vkmha__fail(mha->ctx, st, "%s: out of host memory", mha->ctx->call);
        goto done;
    }
    round_to(ad, oh, no);
    ref_merge_heads(&ho, oh, om);
    s = projection(rq, d->d_model, H * d->d_v);
    ref_matmul(&s, om, w[W_O], w[B_O], out);
    if (d->post_norm) {
        round_to(ad, out, nout);
        ref_layernorm(rq, d->d_model, out, query, w[GAMMA], w[BETA], d->norm_eps, out);
    }
    if (typed) {
        vkmha__from_f32(ad, out, nout, io->out);
        if (weights)
            vkmha__from_f32(ad, weights, nw, io->attn_weights);
    }
done:
    vkmha__free(mha->ctx, mem);
    return st;
}

/* Which slot holds input `p`: an earlier slot when the same pointer with the
 * same size was already uploaded (self-attention uploads once). */
static vk_slot input_slot(const void *p, uint64_t n, const void *const prev[],
                          const uint64_t prev_n[], const vk_slot prev_slot[], int count,
                          vk_slot own)
{
    for (int i = 0; i < count; i++)
        if (p == prev[i] && n == prev_n[i])
            return prev_slot[i];
    return own;
}

/* ad: the dtype of x and y, sd: of the weights. */
static vk_matmul_args projection_args(const vk_buffer *x, const vk_buffer *w,
                                      const vk_buffer *b, vk_buffer *y, uint32_t rows,
                                      uint32_t out, uint32_t in, uint32_t ad, uint32_t sd)
{
    const mm_shape s = projection(rows, out, in);
    return vk_matmul_args_of(&s, x, w, b->buf ? b : NULL, y,
                             VK_DT(0, ad) | VK_DT(1, sd) | VK_DT(2, sd) | VK_DT(3, ad));
}

/* The buffers of one Vulkan forward: inputs, masks, output, weights (the
 * caller's tensors, or the context's slots). */
typedef struct fwd_bufs {
    const vk_buffer *query, *key, *value;
    const vk_buffer *masks[3];
    vk_buffer *out;
    vk_buffer *weights; /* the caller's tensor, or NULL (host arrays: a slot) */
} fwd_bufs;

/* The concat of the heads [B*Lq][H*d_v] overwrites the query projection
 * when the two have the same layout (d_k == d_v): attention reads each block
 * of queries before writing the same block of outputs. Not when the fused
 * path returns weights: its weights pass reads the queries again after the
 * outputs are written. */
static bool concat_in_place(const vkmha_mha_desc *d, const vk_attn_plan *plan)
{
    return d->d_k == d->d_v && !(plan->fused && plan->weights);
}

/* Everything a forward needs besides its inputs and output, before
 * recording: projection, concat and attention scratch. */
static vkmha_status prepare_vulkan(vkmha_mha *mha, const fwd *f, bool weights,
                                   vk_buffer *weights_buf, vk_attn_plan *plan)
{
    vk_state *vk = mha->ctx->vk;
    const vkmha_mha_desc *d = &mha->d;
    const uint32_t H = d->n_head, Hkv = d->n_kv_head;
    const uint64_t rq = (uint64_t)f->B * f->Lq, rk = (uint64_t)f->B * f->Lk, es = f->es;
    const uint32_t ad = f->ad;
    vkmha_status st;
    if ((st = vk_slot_ensure(vk, SLOT_Q_PROJ, rq * H * d->d_k * es)) ||
        (st = vk_slot_ensure(vk, SLOT_K_PROJ, rk * Hkv * d->d_k * es)) ||
        (st = vk_slot_ensure(vk, SLOT_V_PROJ, rk * Hkv * d->d_v * es)) ||
        (st = vk_attention_prepare(vk, &f->as, weights, weights_buf,
                                   (const vk_buffer *const[4]){&vk->slots[SLOT_Q_PROJ],
                                                               &vk->slots[SLOT_K_PROJ],
                                                               &vk->slots[SLOT_V_PROJ], NULL},
                                   VK_DT(0, ad) | VK_DT(1, ad) | VK_DT(2, ad) | VK_DT(3, ad) |
                                       VK_DT(4, ad),
                                   plan)) ||
        (!concat_in_place(d, plan) &&
         (st = vk_slot_ensure(vk, SLOT_O_HEADS, rq * H * d->d_v * es))))
        return st;
    return VKMHA_SUCCESS;
}

/* Records the forward (after the inputs are on the device). */
static vkmha_status record_forward(vkmha_mha *mha, const fwd *f, vk_attn_plan *plan,
                                   const fwd_bufs *b)
{
    vk_state *vk = mha->ctx->vk;
    const vkmha_mha_desc *d = &mha->d;
    const vk_buffer *w = mha->dev;
    vk_site *site = mha->sites.sites;
    vkmha_status st;
    const uint32_t H = d->n_head, Hkv = d->n_kv_head;
    const uint32_t rq = f->B * f->Lq, rk = f->B * f->Lk;
    vk_buffer *concat = &vk->slots[concat_in_place(d, plan) ? SLOT_Q_PROJ : SLOT_O_HEADS];
    for (int i = 0; i < 3; i++)
        plan->masks[i] = b->masks[i];

    /* Projections (independent of each other: no barrier between them). */
    const uint32_t ad = f->ad, sd = d->storage_dtype;
    vk_matmul_args pq = projection_args(b->query, &w[W_Q], &w[B_Q], &vk->slots[SLOT_Q_PROJ],
                                        rq, H * d->d_k, d->d_model, ad, sd);
    vk_matmul_args pk = projection_args(b->key, &w[W_K], &w[B_K], &vk->slots[SLOT_K_PROJ],
                                        rk, Hkv * d->d_k, d->kdim, ad, sd);
    vk_matmul_args pv = projection_args(b->value, &w[W_V], &w[B_V], &vk->slots[SLOT_V_PROJ],
                                        rk, Hkv * d->d_v, d->vdim, ad, sd);
    if ((st = vk_record_matmul(vk, &site[SITE_PROJ_Q], &pq)) ||
        (st = vk_record_matmul(vk, &site[SITE_PROJ_K], &pk)) ||
        (st = vk_record_matmul(vk, &site[SITE_PROJ_V], &pv)))
        return st;
    vk_barrier(vk);

    const vk_heads_view vq = vk_view_merged(&vk->slots[SLOT_Q_PROJ], H, f->Lq, d->d_k, ad),
                        vkv = vk_view_merged(&vk->slots[SLOT_K_PROJ], Hkv, f->Lk, d->d_k, ad),
                        vv = vk_view_merged(&vk->slots[SLOT_V_PROJ], Hkv, f->Lk, d->d_v, ad),
                        vo = vk_view_merged(concat, H, f->Lq, d->d_v, ad);
    if ((st = vk_record_attention(vk, &site[SITE_ATTENTION], plan, &f->mask, &vq, &vkv, &vv,
                                  &vo)))
        return st;
    vk_barrier(vk);

    vk_matmul_args po = projection_args(concat, &w[W_O], &w[B_O], b->out, rq, d->d_model,
                                        H * d->d_v, ad, sd);
    if ((st = vk_record_matmul(vk, &site[SITE_PROJ_O], &po)))
        return st;
    if (d->post_norm) {
        vk_barrier(vk);
        if ((st = vk_record_layernorm(vk, &site[SITE_NORM], rq, d->d_model, d->norm_eps,
                                      b->query, &w[GAMMA], &w[BETA], b->out,
                                      VK_DT(0, ad) | VK_DT(1, sd) | VK_DT(2, sd) |
                                          VK_DT(3, ad))))
            return st;
    }
    return VKMHA_SUCCESS;
}

/* The forward on host arrays: vk_run_host's record step. */
typedef struct forward_op {
    vkmha_mha *mha;
    const fwd *f;
    vk_attn_plan *plan;
    const fwd_bufs *b;
} forward_op;

static vkmha_status record_op(vk_state *vk, const void *arg)
{
    const forward_op *o = arg;
    (void)vk;
    return record_forward(o->mha, o->f, o->plan, o->b);
}

static vkmha_status forward_vulkan(vkmha_mha *mha, const vkmha_mha_io *io, const fwd *f)
{
    vk_state *vk = mha->ctx->vk;
    vkmha_status st;
    const uint64_t es = f->es;
    const void *ins[3] = {io->query, io->key, io->value};
    const uint64_t in_n[3] = {f->n_query, f->n_key, f->n_value};
    vk_slot in_slot[3] = {SLOT_Q_IN, SLOT_K_IN, SLOT_V_IN};
    for (int i = 1; i < 3; i++)
        in_slot[i] = input_slot(ins[i], in_n[i], ins, in_n, in_slot, i, in_slot[i]);

    /* Sizes first, so that a message names the caller's tensor. */
    const uint64_t io_n[5] = {f->n_query, f->n_key, f->n_value, f->n_out,
                              io->attn_weights ? f->n_weights : 0};
    for (int i = 0; i < 5; i++)
        if ((st = vk_check_size(vk, io_n[i] * es, io_names[i])))
            return st;
    for (int i = 0; i < 3; i++) {
        if (in_slot[i] != (vk_slot)(SLOT_Q_IN + i))
            continue;
        if ((st = vk_slot_ensure(vk, in_slot[i], in_n[i] * es)))
            return st;
    }
    /* 16-bit weights are written in SLOT_WEIGHTS, as into a weights tensor. */
    vk_buffer *wbuf = io->attn_weights && f->ad != VKMHA_DTYPE_F32 ? &vk->slots[SLOT_WEIGHTS]
                                                                   : NULL;
    vk_attn_plan plan;
    if ((wbuf && (st = vk_slot_ensure(vk, SLOT_WEIGHTS, f->n_weights * es))) ||
        (st = prepare_vulkan(mha, f, io->attn_weights != NULL, wbuf, &plan)) ||
        (st = vk_slot_ensure(vk, SLOT_OUT, f->n_out * es)))
        return st;
    fwd_bufs b = {.query = &vk->slots[in_slot[0]], .key = &vk->slots[in_slot[1]],
                  .value = &vk->slots[in_slot[2]], .out = &vk->slots[SLOT_OUT],
                  .weights = wbuf};
    vk_mask_slots(vk, b.masks);
    const forward_op op = {mha, f, &plan, &b};
    const size_t no = (size_t)(f->n_out * es), nw = (size_t)(f->n_weights * es);
    vk_host_call call = {.mask = &f->mask, .batch = f->B, .len_q = f->Lq, .len_k = f->Lk,
                         .down = {{&vk->slots[SLOT_OUT], io->out, no, 1, no, 1, no},
                                  {plan.scores, io->attn_weights, nw, 1, nw, 1, nw}},
                         .record = record_op, .arg = &op};
    for (int i = 0; i < 3; i++)
        if (in_slot[i] == (vk_slot)(SLOT_Q_IN + i)) /* not an earlier input's */
            call.up[i] = (vk_host_upload){&vk->slots[in_slot[i]], ins[i], in_n[i] * es};
    return vk_run_host(vk, &call);
}

VKMHA_API vkmha_status vkmha_mha_forward(vkmha_mha *mha, const vkmha_mha_io *io)
{
    fwd f;
    vkmha_status st;
    if (!mha)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    vkmha__begin_call(mha->ctx, "vkmha_mha_forward");
    if ((st = check_io(mha, io, &f)))
        return st;
    return mha->ctx->vk ? forward_vulkan(mha, io, &f) : forward_reference(mha, io, &f);
}

/* The forward on tensors: computed now (MODE_SYNC), recorded into cmd
 * (MODE_RECORD) or submitted (MODE_SUBMIT, *sub set). */
static vkmha_status forward_tensors(vkmha_mha *mha, vk_mode mode, VkCommandBuffer cmd,
                                    const vkmha_mha_tensors *io, vkmha_submission **sub)
{
    static const char *const fns[3] = {"vkmha_mha_forward_tensor", "vkmha_mha_record",
                                       "vkmha_mha_submit"};
    vkmha_context *ctx = mha->ctx;
    vkmha_status st;
    fwd f;
    vkmha__begin_call(ctx, fns[mode]);
    ctx->tensor_call = true;
    if (mode == MODE_SUBMIT) {
        if (!sub)
            return vkmha__fail(ctx, INVALID, "%s: out is NULL", ctx->call);
        *sub = NULL;
    }
    if (mode == MODE_RECORD && !ctx->vk)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: the reference backend has no command buffers", ctx->call);
    if (mode == MODE_RECORD && cmd == VK_NULL_HANDLE)
        return vkmha__fail(ctx, INVALID, "%s: cmd is VK_NULL_HANDLE", ctx->call);
    if (!io)
        return vkmha__fail(ctx, INVALID, "%s: io is NULL", ctx->call);
    /* The query's dtype is the activations': checked against the others below. */
    const void *host[5];
    vk_buffer *buf[5];
    uint32_t dt[5];
    const char *const *names = io_names;
    const vkmha_tensor *const t[5] = {io->query, io->key, io->value, io->out,
                                      io->attn_weights};
    if (io->query && (st = vkmha__tensor_arg(ctx, names[0], t[0], false, 0, &host[0], &buf[0],
                                             &dt[0])))
        return st;
    const fwd_args a = {.batch = io->batch, .len_q = io->len_q, .len_k = io->len_k,
                        .query = io->query, .key = io->key, .value = io->value, .out = io->out,
                        .attn_weights = io->attn_weights, .attention_path = io->attention_path,
                        .kv_splits = io->kv_splits,
                        .dtype = io->query ? dt[0] : VKMHA_DTYPE_F32};
    if ((st = check_args(mha, &a, &f)))
        return st;
    const uint64_t n[5] = {f.n_query, f.n_key, f.n_value, f.n_out, f.n_weights};
    for (int i = 0; i < 5; i++) {
        if ((st = vkmha__tensor_arg(ctx, names[i], t[i], i == 4, n[i], &host[i], &buf[i],
                                    &dt[i])))
            return st;
        if (t[i] && dt[i] != f.ad)
            return vkmha__fail(ctx, INVALID,
                               "%s: %s's dtype (%u) differs from io->query's (%u): the layer's "
                               "inputs and outputs share one dtype",
                               ctx->call, names[i], dt[i], f.ad);
    }
    for (int o = 3; o < 5; o++)
        for (int i = 0; i < o; i++)
            if (t[o] && vkmha__tensors_overlap(t[o], t[i]))
                return vkmha__fail(ctx, INVALID, "%s: %s shares memory with %s", ctx->call,
                                   names[o], names[i]);
    fwd_bufs b = {.query = buf[0], .key = buf[1], .value = buf[2], .out = buf[3],
                  .weights = buf[4]};
    if ((st = vkmha__tensor_mask(ctx, io->mask, f.B, mha->d.n_head, f.Lq, f.Lk, &f.mask,
                                 b.masks)))
        return st;
    if (!ctx->vk) {
        const vkmha_mha_io hio = {.batch = io->batch, .len_q = io->len_q, .len_k = io->len_k,
                                  .query = host[0], .key = host[1], .value = host[2],
                                  .out = (void *)(uintptr_t)host[3],
                                  .attn_weights = (void *)(uintptr_t)host[4],
                                  .attention_path = io->attention_path,
                                  .kv_splits = io->kv_splits, .dtype = f.ad};
        if ((st = forward_reference(mha, &hio, &f)))
            return st;
        if (mode == MODE_SUBMIT && !(*sub = vk_submission_done(ctx)))
            return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                               ctx->call);
        return VKMHA_SUCCESS;
    }
    vk_state *vk = ctx->vk;
    vk_attn_plan plan;
    if ((st = prepare_vulkan(mha, &f, b.weights != NULL, b.weights, &plan)))
        return st;
    if ((st = vk_exec_begin(vk, mode, cmd, sub)))
        return st;
    return vk_exec_end(vk, record_forward(mha, &f, &plan, &b), sub);
}

VKMHA_API vkmha_status vkmha_mha_forward_tensor(vkmha_mha *mha, const vkmha_mha_tensors *io)
{
    return mha ? forward_tensors(mha, MODE_SYNC, VK_NULL_HANDLE, io, NULL) : INVALID;
}

VKMHA_API vkmha_status vkmha_mha_record(vkmha_mha *mha, VkCommandBuffer cmd,
                                        const vkmha_mha_tensors *io)
{
    return mha ? forward_tensors(mha, MODE_RECORD, cmd, io, NULL) : INVALID;
}

VKMHA_API vkmha_status vkmha_mha_submit(vkmha_mha *mha, const vkmha_mha_tensors *io,
                                        vkmha_submission **out)
{
    if (out)
        *out = NULL;
    return mha ? forward_tensors(mha, MODE_SUBMIT, VK_NULL_HANDLE, io, out) : INVALID;
}
