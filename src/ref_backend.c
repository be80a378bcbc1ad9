/* The reference backend's table (vkmha_backend_ops): tensors in host
 * memory, every form of the ops computed now with src/reference.c's
 * functions, and the layer (its weights as fp32 arrays, the forward step by
 * step). Nothing records: vkmha_*_record is unsupported, and a submission is
 * done when vkmha_mha_submit returns. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

typedef struct ref_tensor {
    vkmha_tensor t;
    void *host; /* vkmha__tensor_words(&t) bytes */
} ref_tensor;

typedef struct ref_mha {
    vkmha_mha m;
    /* fp32 copies, NULL if absent, holding the values of m.d.storage_dtype
     * (rounded to it, as the device stores them). */
    float *host[WEIGHT_COUNT];
} ref_mha;

/* ---- arguments ------------------------------------------------------------ */

static void *tensor_host(const vkmha_tensor *t)
{
    return ((const ref_tensor *)t)->host;
}

/* An argument's array: the host array, or the tensor's memory (NULL: absent). */
static void *arg_host(const vkmha_arg *a)
{
    return a->tensor ? (uint8_t *)tensor_host(a->tensor) + a->at : (void *)(uintptr_t)a->host;
}

/* A mask's arrays: the host arrays, or the tensors' memory. */
static mask_r mask_host(const vkmha_mask_arg *m)
{
    mask_r r = m->m;
    if (m->t[0])
        r.key_padding = (const uint8_t *)tensor_host(m->t[0]) + m->at[0];
    if (m->t[1])
        r.full = (const uint8_t *)tensor_host(m->t[1]) + m->at[1];
    if (m->t[2])
        r.bias = (const float *)(const void *)((const uint8_t *)tensor_host(m->t[2]) + m->at[2]);
    return r;
}

/* ---- the context: no state beyond vkmha_context ---------------------------- */

static vkmha_status ctx_create(vkmha_context *ctx, const vkmha_context_desc *desc,
                               bool compile_only)
{
    (void)ctx, (void)desc, (void)compile_only;
    return VKMHA_SUCCESS;
}

static void ctx_destroy(vkmha_context *ctx)
{
    (void)ctx;
}

static vkmha_status ctx_trim(vkmha_context *ctx)
{
    (void)ctx; /* nothing cached */
    return VKMHA_SUCCESS;
}

/* ---- the ops, in every form ------------------------------------------------ */

/* Only running out of host memory can fail. */
static vkmha_status oom(vkmha_context *ctx, vkmha_status st)
{
    return st ? vkmha__fail(ctx, st, "%s: out of host memory", ctx->call) : st;
}

static vkmha_status op_matmul(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                              const vkmha_arg *a, const vkmha_arg *b, const vkmha_arg *bias,
                              const vkmha_arg *c)
{
    uint32_t dt[4] = {a->dtype, b->dtype, bias->dtype, c->dtype};
    (void)run;
    if (!s->quant_b.type)
        return oom(ctx, ref_matmul_typed(ctx, s, dt, arg_host(a), arg_host(b), arg_host(bias),
                                         arg_host(c)));
    /* A quantized B: its values (exact in fp32) as an F32 B [rows][cols]. */
    const vkmha_quant_desc *q = &s->quant_b;
    float *fb = vkmha__alloc(ctx, (size_t)q->rows * q->cols * sizeof *fb);
    if (!fb)
        return oom(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY);
    vkmha__dequantize_f32(q, &s->layout_b, arg_host(b), fb);
    mm_shape fs = *s;
    fs.quant_b.type = 0;
    fs.extent_b = (uint64_t)q->rows * q->cols;
    dt[1] = VKMHA_DTYPE_F32;
    const vkmha_status st =
        ref_matmul_typed(ctx, &fs, dt, arg_host(a), fb, arg_host(bias), arg_host(c));
    vkmha__free(ctx, fb);
    return oom(ctx, st);
}

static vkmha_status op_softmax(vkmha_context *ctx, const vkmha_run *run, const sm_shape *s,
                               const vkmha_arg *x, const vkmha_mask_arg *mask,
                               const vkmha_arg *y)
{
    const mask_r m = mask_host(mask);
    (void)run;
    return oom(ctx, ref_softmax_typed(ctx, s, x->dtype, arg_host(x), &m, y->dtype,
                                      arg_host(y)));
}

static vkmha_status op_heads(vkmha_context *ctx, const vkmha_run *run, const heads_shape *s,
                             bool split, const vkmha_arg *x, const vkmha_arg *y)
{
    (void)run;
    return oom(ctx, ref_heads_typed(ctx, s, split, x->dtype, arg_host(x), y->dtype,
                                    arg_host(y)));
}

static vkmha_status op_attention(vkmha_context *ctx, const vkmha_run *run,
                                 const attn_shape *s, const vkmha_arg *q, const vkmha_arg *k,
                                 const vkmha_arg *v, const vkmha_mask_arg *mask,
                                 const vkmha_arg *out, const vkmha_arg *weights)
{
    const uint32_t dt[5] = {q->dtype, k->dtype, v->dtype, out->dtype, weights->dtype};
    const mask_r m = mask_host(mask);
    (void)run;
    return oom(ctx, ref_attention_typed(ctx, s, dt, arg_host(q), arg_host(k), arg_host(v), &m,
                                        arg_host(out), arg_host(weights)));
}

/* ---- tensors -------------------------------------------------------------- */

static vkmha_status tensor_alloc(vkmha_tensor *t)
{
    vkmha_context *ctx = t->ctx;
    ref_tensor *r = (ref_tensor *)t;
    if (!(r->host = vkmha__calloc(ctx, 1, (size_t)vkmha__tensor_words(t))))
        return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           ctx->call);
    t->mem = 0; /* host memory */
    t->offset = (uint64_t)(uintptr_t)r->host;
    return VKMHA_SUCCESS;
}

static vkmha_status tensor_wrap(vkmha_context *ctx, const vkmha_tensor_desc *desc,
                                uint64_t buffer, uint64_t offset, uint64_t size,
                                vkmha_tensor **out)
{
    (void)desc, (void)buffer, (void)offset, (void)size, (void)out;
    return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                       "vkmha_tensor_wrap: the reference backend has no Vulkan buffers");
}

static void tensor_free(vkmha_tensor *t)
{
    vkmha__free(t->ctx, ((ref_tensor *)t)->host);
}

static vkmha_status tensor_copy(const vkmha_tensor *t, uint64_t offset, void *host,
                                uint64_t bytes, bool up)
{
    uint8_t *mem = (uint8_t *)tensor_host(t) + offset;
    memcpy(up ? mem : host, up ? host : mem, (size_t)bytes);
    return VKMHA_SUCCESS;
}

/* ---- the layer ------------------------------------------------------------ */

/* The layer's copies: fp32 arrays of the storage dtype's values. */
static vkmha_status mha_weights(vkmha_mha *mha, const void *const src[WEIGHT_COUNT],
                                const uint32_t dt[WEIGHT_COUNT], const uint64_t n[WEIGHT_COUNT])
{
    float **host = ((ref_mha *)mha)->host;
    const uint32_t sd = mha->d.storage_dtype;
    for (int i = 0; i < WEIGHT_COUNT; i++) {
        if (!src[i])
            continue;
        /* Room for the stored values ahead of their fp32 widening. */
        if (!(host[i] = vkmha__alloc(mha->ctx, (size_t)n[i] * sizeof(float))))
            return vkmha__fail(mha->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               "%s: out of host memory", mha->ctx->call);
        if (mha->d.weight_quant && i <= W_O) { /* the values, exact in fp32 */
            const vkmha_quant_desc q = vkmha__weight_quant(&mha->d, i);
            const vkmha_quant_layout l = vkmha__quant_layout(&q);
            vkmha__dequantize_f32(&q, &l, src[i], host[i]);
            continue;
        }
        vkmha__convert(dt[i], src[i], sd, host[i], (size_t)n[i]);
        if (sd != VKMHA_DTYPE_F32) /* widen in place, from the back */
            for (uint64_t j = n[i]; j-- > 0;)
                vkmha__to_f32(sd, (const uint16_t *)host[i] + j, 1, host[i] + j);
    }
    return VKMHA_SUCCESS;
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

/* ---- KV caches: the tensors' host memory --------------------------------- */

/* Byte offset of (entry e, kv head h, position t) in the keys (v false) or
 * values: rows of c->row[v] elements (a Q8 cache's: bytes). */
static size_t cache_at(const vkmha_kv_cache *c, uint32_t e, uint32_t h, uint32_t t, bool v)
{
    return ((((size_t)e * c->n_kv_head + h) * c->d.capacity + t) * c->row[v]) *
           vkmha__dtype_size(c->elem_dtype);
}

static vkmha_status kv_create(vkmha_kv_cache *c)
{
    (void)c;
    return VKMHA_SUCCESS;
}

static void kv_free(vkmha_kv_cache *c)
{
    (void)c;
}

static vkmha_status kv_clear(vkmha_kv_cache *c, uint32_t first, uint32_t count, uint32_t from)
{
    uint8_t *mem[2] = {tensor_host(c->d.keys), tensor_host(c->d.values)};
    for (int i = 0; i < 2; i++)
        for (uint32_t e = first; e < first + count; e++)
            for (uint32_t h = 0; h < c->n_kv_head; h++)
                memset(mem[i] + cache_at(c, e, h, from, i), 0,
                       cache_at(c, 0, 0, c->d.capacity - from, i));
    return VKMHA_SUCCESS;
}

static vkmha_status kv_reorder(vkmha_kv_cache *c, const uint32_t *src)
{
    vkmha_context *ctx = c->mha->ctx;
    vkmha_tensor *t[2] = {c->d.keys, c->d.values};
    for (int i = 0; i < 2; i++) {
        const size_t entry = cache_at(c, 1, 0, 0, i); /* bytes per entry */
        uint8_t *mem = tensor_host(t[i]), *tmp = vkmha__alloc(ctx, entry * c->d.batch);
        if (!tmp)
            return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                               ctx->call);
        for (uint32_t e = 0; e < c->d.batch; e++)
            memcpy(tmp + e * entry, mem + src[e] * entry, entry);
        memcpy(mem, tmp, entry * c->d.batch);
        vkmha__free(ctx, tmp);
    }
    return VKMHA_SUCCESS;
}

/* Stores the new positions of projection p ([B][Lk][Hkv][dim], fp32 values of
 * the activations' dtype) into the keys (v false) or values after each
 * entry's old length, in the cache's dtype (rounded to it as the device
 * stores them), or quantized row by row (Q8). */
static void cache_append(const mha_fwd *f, bool v, const float *p)
{
    const vkmha_kv_cache *c = f->cache;
    const uint32_t hkv = c->n_kv_head, dim = v ? c->d_v : c->d_k;
    uint8_t *mem = tensor_host(v ? c->d.values : c->d.keys);
    for (uint32_t b = 0; b < f->B; b++)
        for (uint32_t s = 0; s < f->Lk; s++)
            for (uint32_t h = 0; h < hkv; h++) {
                const float *x = p + (((size_t)b * f->Lk + s) * hkv + h) * dim;
                uint8_t *row = mem + cache_at(c, f->entry + b, h, f->old[b] + s, v);
                if (c->d.quant)
                    vkmha__kv_q8_quantize(x, dim, row);
                else
                    vkmha__convert(VKMHA_DTYPE_F32, x, c->d.dtype, row, dim);
            }
}

/* The call's entries of the keys (v false) or values as fp32 split heads
 * [B][Hkv][len_k][dim] (positions past an entry's length are zeros there). */
static void cache_gather(const mha_fwd *f, bool v, float *out)
{
    const vkmha_kv_cache *c = f->cache;
    const uint8_t *mem = tensor_host(v ? c->d.values : c->d.keys);
    const uint32_t len = f->as.len_k, dim = v ? c->d_v : c->d_k;
    for (uint32_t b = 0; b < f->B; b++)
        for (uint32_t h = 0; h < c->n_kv_head; h++) {
            float *o = out + (((size_t)b * c->n_kv_head + h) * len) * dim;
            if (!c->d.quant) {
                vkmha__to_f32(c->d.dtype, mem + cache_at(c, f->entry + b, h, 0, v),
                              (size_t)len * dim, o);
                continue;
            }
            for (uint32_t t = 0; t < len; t++)
                vkmha__kv_q8_dequantize(mem + cache_at(c, f->entry + b, h, t, v), dim,
                                        o + (size_t)t * dim);
        }
}

/* The forward on host arrays p (query, key, value, out, attn_weights; NULL:
 * absent): fp32 with double accumulation, rounding each activation to the
 * activations' dtype where the Vulkan backend stores it (projections,
 * attention output, output before the LayerNorm). */
static vkmha_status forward(vkmha_mha *mha, const mha_fwd *f, void *const p[5],
                            const mask_r *mask)
{
    const vkmha_mha_desc *d = &mha->d;
    float *const *w = ((ref_mha *)mha)->host;
    const uint32_t H = d->n_head, Hkv = d->n_kv_head, ad = f->ad;
    const uint32_t rq = f->B * f->Lq, rk = f->B * f->Lk;
    const size_t nq = (size_t)rq * H * d->d_k, nk = (size_t)rk * Hkv * d->d_k,
                 nv = (size_t)rk * Hkv * d->d_v, no = (size_t)rq * H * d->d_v;
    /* The attention's keys and values: the projections, or a cache's. */
    const size_t nkh = (size_t)f->B * Hkv * f->as.len_k * d->d_k,
                 nvh = (size_t)f->B * Hkv * f->as.len_k * d->d_v;
    const size_t nin = (size_t)(f->n_query + f->n_key + f->n_value), nout = (size_t)f->n_out,
                 nw = p[4] ? (size_t)f->n_weights : 0;
    const bool typed = ad != VKMHA_DTYPE_F32;
    vkmha_status st = VKMHA_SUCCESS;
    /* One allocation: qp, kp, vp, qh, kh, vh, oh, om, and for 16-bit
     * activations fp32 copies of the inputs, the output and the weights. */
    float *mem = vkmha__alloc(mha->ctx, (2 * nq + nk + nv + nkh + nvh + 2 * no +
                                         (typed ? nin + nout + nw : 0)) * sizeof(float));
    if (!mem)
        return vkmha__fail(mha->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                           "%s: out of host memory", mha->ctx->call);
    float *qp = mem, *kp = qp + nq, *vp = kp + nk, *qh = vp + nv, *kh = qh + nq,
          *vh = kh + nkh, *oh = vh + nvh, *om = oh + no;
    const float *query = p[0], *key = p[1], *value = p[2];
    float *out = p[3], *weights = p[4];
    if (typed) {
        float *x = om + no;
        vkmha__to_f32(ad, p[0], (size_t)f->n_query, x);
        query = x;
        vkmha__to_f32(ad, p[1], (size_t)f->n_key, x += f->n_query);
        key = x;
        vkmha__to_f32(ad, p[2], (size_t)f->n_value, x += f->n_key);
        value = x;
        out = x + f->n_value;
        weights = p[4] ? out + nout : NULL;
    }

    mm_shape s = vkmha__projection(rq, H * d->d_k, d->d_model);
    ref_matmul(&s, query, w[W_Q], w[B_Q], qp);
    s = vkmha__projection(rk, Hkv * d->d_k, d->kdim);
    ref_matmul(&s, key, w[W_K], w[B_K], kp);
    s = vkmha__projection(rk, Hkv * d->d_v, d->vdim);
    ref_matmul(&s, value, w[W_V], w[B_V], vp);
    round_to(ad, qp, nq);
    round_to(ad, kp, nk);
    round_to(ad, vp, nv);
    if (d->rope_dims) { /* the new keys are the queries' tokens (mha.c) */
        vkmha__rope_rows(d, qp, rq, H, (uint64_t)H * d->d_k, f, false);
        round_to(ad, qp, nq);
        if (f->append) {
            vkmha__rope_rows(d, kp, rk, Hkv, (uint64_t)Hkv * d->d_k, f, true);
            round_to(ad, kp, nk);
        }
    }

    heads_shape hq = {.batch = f->B, .len = f->Lq, .heads = H, .head_dim = d->d_k},
                hk = {.batch = f->B, .len = f->Lk, .heads = Hkv, .head_dim = d->d_k},
                hv = {.batch = f->B, .len = f->Lk, .heads = Hkv, .head_dim = d->d_v},
                ho = {.batch = f->B, .len = f->Lq, .heads = H, .head_dim = d->d_v};
    ref_split_heads(&hq, qp, qh);
    if (!f->cache) {
        ref_split_heads(&hk, kp, kh);
        ref_split_heads(&hv, vp, vh);
    } else {
        if (f->append) {
            cache_append(f, false, kp);
            cache_append(f, true, vp);
        }
        cache_gather(f, false, kh);
        cache_gather(f, true, vh);
    }
    const attn_shape as = f->as;
    if ((st = ref_attention(mha->ctx, &as, qh, kh, vh, mask, oh, weights))) {
        vkmha__fail(mha->ctx, st, "%s: out of host memory", mha->ctx->call);
        goto done;
    }
    round_to(ad, oh, no);
    ref_merge_heads(&ho, oh, om);
    s = vkmha__projection(rq, d->d_model, H * d->d_v);
    ref_matmul(&s, om, w[W_O], w[B_O], out);
    if (d->post_norm) {
        round_to(ad, out, nout);
        ref_layernorm(rq, d->d_model, out, query, w[GAMMA], w[BETA], d->norm_eps, out);
    }
    if (typed) {
        vkmha__from_f32(ad, out, nout, p[3]);
        if (weights)
            vkmha__from_f32(ad, weights, nw, p[4]);
    }
done:
    vkmha__free(mha->ctx, mem);
    return st;
}

static void mha_free(vkmha_mha *mha)
{
    for (int i = 0; i < WEIGHT_COUNT; i++)
        vkmha__free(mha->ctx, ((ref_mha *)mha)->host[i]);
}

/* One call's forward (io: its arguments). */
static vkmha_status forward_args(vkmha_mha *mha, const mha_fwd *f, const vkmha_arg io[5])
{
    void *p[5];
    for (int i = 0; i < 5; i++)
        p[i] = arg_host(&io[i]);
    const mask_r m = mask_host(&f->mask);
    return forward(mha, f, p, &m);
}

static vkmha_status mha_forward(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                                const vkmha_arg io[5])
{
    vkmha_context *ctx = mha->ctx;
    vkmha_status st = f->n_parts ? VKMHA_SUCCESS : forward_args(mha, f, io);
    for (uint32_t i = 0; i < f->n_parts && !st; i++) { /* a mixed batch's parts in turn */
        vkmha_arg a[5];
        vkmha__part_args(&mha->d, f, &f->parts[i], io, a);
        st = forward_args(mha, &f->parts[i].f, a);
    }
    if (st || run->form != FORM_SUBMIT)
        return st;
    if (!(*run->sub = vkmha__submission_done(ctx)))
        return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           ctx->call);
    return VKMHA_SUCCESS;
}

/* ---- submissions: done when made ------------------------------------------ */

static vkmha_status submission_poll(vkmha_submission *s)
{
    return s->status;
}

static vkmha_status submission_wait(vkmha_submission *s, uint64_t timeout_ns)
{
    (void)timeout_ns;
    return submission_poll(s);
}

static void submission_free(vkmha_submission *s)
{
    vkmha__free(s->ctx, s);
}

static void ctx_info(const vkmha_context *ctx, vkmha_context_info *out)
{
    (void)ctx;
    snprintf(out->device.name, sizeof out->device.name, "reference");
}

/* No device kernels. */
static void ctx_kernels(const vkmha_context *ctx, uint32_t *count, vkmha_kernel_info *out)
{
    (void)ctx, (void)out;
    *count = 0;
}

const vkmha_backend_ops vkmha__reference_ops = {
    .create = ctx_create,
    .destroy = ctx_destroy,
    .trim = ctx_trim,
    .info = ctx_info,
    .kernels = ctx_kernels,
    .no_commands = "the reference backend has no command buffers",
    .matmul = op_matmul,
    .softmax = op_softmax,
    .heads = op_heads,
    .attention = op_attention,
    .tensor_size = sizeof(ref_tensor),
    .tensor_alloc = tensor_alloc,
    .tensor_wrap = tensor_wrap,
    .tensor_free = tensor_free,
    .tensor_copy = tensor_copy,
    .mha_size = sizeof(ref_mha),
    .mha_weights = mha_weights,
    .mha_free = mha_free,
    .mha_forward = mha_forward,
    .kv_size = sizeof(vkmha_kv_cache),
    .kv_create = kv_create,
    .kv_free = kv_free,
    .kv_clear = kv_clear,
    .kv_reorder = kv_reorder,
    .submission_wait = submission_wait,
    .submission_poll = submission_poll,
    .submission_free = submission_free,
};
