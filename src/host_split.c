/* Host-array calls whose arrays exceed what one call can bind on the device
 * (maxStorageBufferRange or maxMemoryAllocationSize): the softmax and the
 * attention are run as several calls of whole batch entries, then of heads
 * (groups of query heads sharing a key/value head), then of query rows of one
 * head, each of which fits; split / merge heads and a batched matmul as
 * several calls of whole batch entries. Every part is an independent problem of the same op (the rows of a
 * softmax and the queries of an attention do not interact; a causal mask
 * moves with the first row: causal_offset + i0), so the results are those of
 * one call. What does not fit even as one row of one head (a row of keys, or
 * one head's keys and values) goes to the backend whole, which refuses it
 * naming the array. The reference backend has no such limits. */
#include "internal.h"

/* The most bytes one array of a call may have on ctx's device; 0: no limit. */
static uint64_t array_limit(const vkmha_context *ctx)
{
    return ctx->storage_range < ctx->allocation_size ? ctx->storage_range : ctx->allocation_size;
}

/* A part of a [batch][heads][len_q][...] problem: nb batch entries from b0
 * (all heads, all rows), or nh heads from h0 of entry b0 (all rows), or ni
 * query rows from i0 of head h0 of entry b0. */
typedef struct part {
    uint32_t b0, nb, h0, nh, i0, ni;
} part;

/* The bytes of a part's largest array, for the fit test. */
typedef uint64_t (*part_bytes_fn)(const void *shape, const mask_r *m, const part *p,
                                  bool weights);

/* The largest n <= total such that part p with n units at `level` (0:
 * batch entries, 1: groups of `group` heads, 2: rows) fits `limit`; 0 when
 * not even one unit fits. */
static uint32_t most_units(uint32_t total, uint64_t limit, part_bytes_fn bytes,
                           const void *shape, const mask_r *m, bool weights, part p, int level,
                           uint32_t group)
{
    uint32_t lo = 0, hi = total; /* bytes grow with n: binary search */
    while (lo < hi) {
        const uint32_t n = lo + (hi - lo + 1) / 2;
        part q = p;
        if (level == 0)
            q.nb = n;
        else if (level == 1)
            q.nh = n * group;
        else
            q.ni = n;
        if (bytes(shape, m, &q, weights) <= limit)
            lo = n;
        else
            hi = n - 1;
    }
    return lo;
}

/* The mask of a part: pointers moved to its first element, the bias's
 * broadcast kept, the causal mask moved with its first row. */
static mask_r part_mask(const mask_r *m, uint32_t len_q, uint32_t len_k, const part *p)
{
    mask_r r = *m;
    const uint64_t plane = (uint64_t)len_q * len_k;
    if (r.key_padding)
        r.key_padding += (uint64_t)p->b0 * len_k;
    if (r.full)
        r.full += (uint64_t)p->b0 * plane + (uint64_t)p->i0 * len_k;
    if (r.bias) {
        const bool per_batch = m->bias_batch > 1, per_head = m->bias_heads > 1;
        r.bias += ((per_batch ? (uint64_t)p->b0 * m->bias_heads : 0) + (per_head ? p->h0 : 0)) *
                      plane +
                  (uint64_t)p->i0 * len_k;
        r.bias_batch = per_batch ? p->nb : 1;
        r.bias_heads = per_head ? p->nh : 1;
    }
    if (r.kinds & VKMHA_MASK_CAUSAL)
        r.causal_offset = (uint32_t)((int32_t)r.causal_offset + (int32_t)p->i0);
    return r;
}

/* Bytes of the masks of a part (uint8 masks, fp32 bias). */
static uint64_t mask_bytes(const mask_r *m, uint32_t len_k, const part *p)
{
    const uint64_t rows = (uint64_t)p->nb * p->ni;
    uint64_t most = 0, b;
    if (m->key_padding && (b = (uint64_t)p->nb * len_k) > most)
        most = b;
    if (m->full && (b = rows * len_k) > most)
        most = b;
    if (m->bias &&
        (b = (m->bias_batch > 1 ? p->nb : 1) * (uint64_t)(m->bias_heads > 1 ? p->nh : 1) *
             p->ni * len_k * 4) > most)
        most = b;
    return most;
}

/* Runs `run(part)` over the parts of a [batch][heads][len_q] problem that
 * fit `limit`: whole entries, else heads of one entry (in steps of `group`),
 * else rows of one head. */
typedef vkmha_status (*part_run_fn)(vkmha_context *ctx, const void *args, const part *p);

static vkmha_status run_parts(vkmha_context *ctx, uint32_t batch, uint32_t heads, uint32_t len_q,
                              uint32_t group, uint64_t limit, part_bytes_fn bytes,
                              const void *shape, const mask_r *m, bool weights, part_run_fn run,
                              const void *args)
{
    const part whole = {0, batch, 0, heads, 0, len_q};
    if (!limit || bytes(shape, m, &whole, weights) <= limit)
        return run(ctx, args, &whole);
    const uint32_t nb = most_units(batch, limit, bytes, shape, m, weights,
                                   (part){0, 0, 0, heads, 0, len_q}, 0, 1);
    vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: arrays beyond this device's buffer range: split into calls of %s", ctx->call,
               nb ? "batch entries" : "heads or query rows");
    vkmha_status st = VKMHA_SUCCESS;
    if (nb) {
        for (uint32_t b0 = 0; b0 < batch && !st; b0 += nb) {
            const part p = {b0, batch - b0 < nb ? batch - b0 : nb, 0, heads, 0, len_q};
            st = run(ctx, args, &p);
        }
        return st;
    }
    /* Heads of one entry, in whole groups (query heads of one key/value head). */
    uint32_t nh = most_units(heads / group, limit, bytes, shape, m, weights,
                             (part){0, 1, 0, 0, 0, len_q}, 1, group) * group;
    if (!nh && group > 1 && bytes(shape, m, &(part){0, 1, 0, 1, 0, len_q}, weights) <= limit)
        nh = 1; /* one query head with its key/value head */
    for (uint32_t b0 = 0; b0 < batch && !st; b0++) {
        if (nh) {
            for (uint32_t h0 = 0; h0 < heads && !st; h0 += nh) {
                const part p = {b0, 1, h0, heads - h0 < nh ? heads - h0 : nh, 0, len_q};
                st = run(ctx, args, &p);
            }
            continue;
        }
        const uint32_t ni = most_units(len_q, limit, bytes, shape, m, weights,
                                       (part){0, 1, 0, 1, 0, 0}, 2, 1);
        if (!ni) /* not one row: the backend refuses it, naming the array */
            return run(ctx, args, &whole);
        for (uint32_t h0 = 0; h0 < heads && !st; h0++)
            for (uint32_t i0 = 0; i0 < len_q && !st; i0 += ni) {
                const part p = {b0, 1, h0, 1, i0, len_q - i0 < ni ? len_q - i0 : ni};
                st = run(ctx, args, &p);
            }
    }
    return st;
}

/* ---- softmax ------------------------------------------------------------- */

typedef struct softmax_args {
    const sm_shape *s;
    const vkmha_run *run;
    const char *x;
    const mask_r *m;
    char *y;
} softmax_args;

static uint64_t softmax_bytes(const void *shape, const mask_r *m, const part *p, bool weights)
{
    const sm_shape *s = shape;
    (void)weights;
    const uint64_t x = (uint64_t)p->nb * p->nh * p->ni * s->len_k * vkmha__dtype_size(s->dtype),
                   mb = mask_bytes(m, s->len_k, p);
    return x > mb ? x : mb;
}

static vkmha_status softmax_part(vkmha_context *ctx, const void *args, const part *p)
{
    const softmax_args *a = args;
    const sm_shape *s = a->s;
    sm_shape ps = *s;
    ps.batch = p->nb, ps.heads = p->nh, ps.len_q = p->ni;
    const uint64_t at = (((uint64_t)p->b0 * s->heads + p->h0) * s->len_q + p->i0) * s->len_k *
                        vkmha__dtype_size(s->dtype);
    const vkmha_arg ax = {.host = a->x + at, .dtype = s->dtype},
                    ay = {.host = a->y + at, .dtype = s->dtype};
    const vkmha_mask_arg am = {.m = part_mask(a->m, s->len_q, s->len_k, p)};
    return ctx->ops->softmax(ctx, a->run, &ps, &ax, &am, &ay);
}

vkmha_status vkmha__softmax_host(vkmha_context *ctx, const vkmha_run *run, const sm_shape *s,
                                 const void *x, const mask_r *m, void *y)
{
    const softmax_args a = {s, run, x, m, y};
    return run_parts(ctx, s->batch, s->heads, s->len_q, 1, array_limit(ctx), softmax_bytes, s,
                     m, false, softmax_part, &a);
}

/* ---- attention ----------------------------------------------------------- */

typedef struct attention_args {
    const attn_shape *s;
    const vkmha_run *run;
    const char *q, *k, *v;
    const mask_r *m;
    char *out, *weights;
} attention_args;

/* Key/value heads of a part: all of its entries', its groups', or the one
 * its single query head reads. */
static uint32_t part_kv_heads(const attn_shape *s, const part *p)
{
    const uint32_t group = s->heads / s->kv_heads;
    return p->nh == s->heads ? s->kv_heads : p->nh >= group ? p->nh / group : 1;
}

static uint64_t attention_bytes(const void *shape, const mask_r *m, const part *p, bool weights)
{
    const attn_shape *s = shape;
    const uint64_t es = vkmha__dtype_size(s->dtype), rows = (uint64_t)p->nb * p->nh * p->ni,
                   kvh = (uint64_t)p->nb * part_kv_heads(s, p);
    /* The fused path's fp32 partial outputs: one per key range asked for,
     * or the output's size (several key chunks a range); vk_attention.c. */
    const uint64_t splits = s->kv_splits > 1 ? s->kv_splits : 1;
    const uint64_t sizes[7] = {rows * s->d_k * es, rows * s->d_v * es,
                               weights ? rows * s->len_k * es : 0, kvh * s->len_k * s->d_k * es,
                               kvh * s->len_k * s->d_v * es, mask_bytes(m, s->len_k, p),
                               splits * rows * (s->d_v > 2 ? s->d_v : 2) * 4};
    uint64_t most = 0;
    for (int i = 0; i < 7; i++)
        most = sizes[i] > most ? sizes[i] : most;
    return most;
}

static vkmha_status attention_part(vkmha_context *ctx, const void *args, const part *p)
{
    const attention_args *a = args;
    const attn_shape *s = a->s;
    const uint64_t es = vkmha__dtype_size(s->dtype), group = s->heads / s->kv_heads;
    attn_shape ps = *s;
    ps.batch = p->nb, ps.heads = p->nh, ps.len_q = p->ni, ps.kv_heads = part_kv_heads(s, p);
    const uint64_t row = ((uint64_t)p->b0 * s->heads + p->h0) * s->len_q + p->i0,
                   kv = ((uint64_t)p->b0 * s->kv_heads + p->h0 / group) * s->len_k;
    const vkmha_arg aq = {.host = a->q + row * s->d_k * es, .dtype = s->dtype},
                    ak = {.host = a->k + kv * s->d_k * es, .dtype = s->dtype},
                    av = {.host = a->v + kv * s->d_v * es, .dtype = s->dtype},
                    ao = {.host = a->out + row * s->d_v * es, .dtype = s->dtype},
                    aw = {.host = a->weights ? a->weights + row * s->len_k * es : NULL,
                          .dtype = s->dtype};
    const vkmha_mask_arg am = {.m = part_mask(a->m, s->len_q, s->len_k, p)};
    return ctx->ops->attention(ctx, a->run, &ps, &aq, &ak, &av, &am, &ao, &aw);
}

vkmha_status vkmha__attention_host(vkmha_context *ctx, const vkmha_run *run, const attn_shape *s,
                                   const void *q, const void *k, const void *v, const mask_r *m,
                                   void *out, void *weights)
{
    const attention_args a = {s, run, q, k, v, m, out, weights};
    return run_parts(ctx, s->batch, s->heads, s->len_q, s->heads / s->kv_heads, array_limit(ctx),
                     attention_bytes, s, m, weights != NULL, attention_part, &a);
}

/* ---- split and merge heads ---------------------------------------------- */

vkmha_status vkmha__heads_host(vkmha_context *ctx, const vkmha_run *run, const heads_shape *s,
                               bool split, const void *x, void *y)
{
    /* [batch][len][heads][d] and [batch][heads][len][d]: an entry is
     * contiguous in both. */
    const uint64_t limit = array_limit(ctx), es = vkmha__dtype_size(s->dtype),
                   entry = (uint64_t)s->len * s->heads * s->head_dim * es;
    const uint32_t nb = limit && entry <= limit ? (uint32_t)(limit / entry < s->batch
                                                                 ? limit / entry
                                                                 : s->batch)
                                                : s->batch;
    vkmha_status st = VKMHA_SUCCESS;
    if (nb < s->batch)
        vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                   "%s: arrays beyond this device's buffer range: split into calls of %u batch "
                   "entries",
                   ctx->call, nb);
    for (uint32_t b0 = 0; b0 < s->batch && !st; b0 += nb) {
        heads_shape ps = *s;
        ps.batch = s->batch - b0 < nb ? s->batch - b0 : nb;
        const vkmha_arg ax = {.host = (const char *)x + b0 * entry, .dtype = s->dtype},
                        ay = {.host = (char *)y + b0 * entry, .dtype = s->dtype};
        st = ctx->ops->heads(ctx, run, &ps, split, &ax, &ay);
    }
    return st;
}

/* ---- batched matmul ------------------------------------------------------ */

vkmha_status vkmha__matmul_host(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                                const void *a, const void *b, const void *bias, void *c)
{
    const uint64_t limit = array_limit(ctx), es = vkmha__dtype_size(s->dtype);
    /* One matrix of each: the extent without the batch strides. */
    const uint64_t one_a = s->extent_a - (s->batch - 1) * s->sa,
                   one_b = s->extent_b - (s->batch - 1) * s->sb,
                   one_c = s->extent_c - (s->batch - 1) * s->sc;
    uint32_t nb = s->batch;
    /* A single product is windowed by the backend (vk_record_matmul). */
    while (limit && nb > 1 &&
           (((nb - 1) * s->sa + one_a) * es > limit || ((nb - 1) * s->sb + one_b) * es > limit ||
            ((nb - 1) * s->sc + one_c) * es > limit))
        nb = nb / 2 > 1 ? nb / 2 : 1;
    const vkmha_arg abias = {.host = bias, .dtype = s->dtype};
    if (nb == s->batch) {
        const vkmha_arg aa = {.host = a, .dtype = s->dtype}, ab = {.host = b, .dtype = s->dtype},
                        ac = {.host = c, .dtype = s->dtype};
        return ctx->ops->matmul(ctx, run, s, &aa, &ab, &abias, &ac);
    }
    vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: arrays beyond this device's buffer range: split into calls of %u products",
               ctx->call, nb);
    vkmha_status st = VKMHA_SUCCESS;
    for (uint32_t b0 = 0; b0 < s->batch && !st; b0 += nb) {
        mm_shape ps = *s;
        ps.batch = s->batch - b0 < nb ? s->batch - b0 : nb;
        ps.extent_a = (ps.batch - 1) * s->sa + one_a;
        ps.extent_b = (ps.batch - 1) * s->sb + one_b;
        ps.extent_c = (ps.batch - 1) * s->sc + one_c;
        const vkmha_arg aa = {.host = (const char *)a + b0 * s->sa * es, .dtype = s->dtype},
                        ab = {.host = (const char *)b + b0 * s->sb * es, .dtype = s->dtype},
                        ac = {.host = (char *)c + b0 * s->sc * es, .dtype = s->dtype};
        st = ctx->ops->matmul(ctx, run, &ps, &aa, &ab, &abias, &ac);
    }
    return st;
}

/* ---- the layer ----------------------------------------------------------- */

vkmha_status vkmha__mha_forward_host(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                                     const vkmha_arg args[5])
{
    vkmha_context *ctx = mha->ctx;
    const vkmha_mha_desc *d = &mha->d;
    const uint64_t limit = array_limit(ctx), es = f->es, Lq = f->Lq, Lk = f->Lk,
                   L = f->as.len_k, H = d->n_head, Hkv = d->n_kv_head;
    const uint64_t splits = f->as.kv_splits > 1 ? f->as.kv_splits : 1;
    /* One batch entry's arrays: the inputs and output, the projections and
     * the concat of the heads, the attention weights, the fused path's fp32
     * partial outputs, and the masks. */
    const uint64_t per[9] = {Lq * d->d_model * es, Lk * d->kdim * es, Lk * d->vdim * es,
                             Lq * H * d->d_k * es, Lq * H * d->d_v * es,
                             Lk * Hkv * (d->d_k > d->d_v ? d->d_k : d->d_v) * es,
                             args[4].host ? H * Lq * L * es : 0,
                             splits * Lq * H * (d->d_v > 2 ? d->d_v : 2) * 4,
                             mask_bytes(&f->mask.m, (uint32_t)L,
                                        &(part){0, 1, 0, (uint32_t)H, 0, (uint32_t)Lq})};
    uint64_t entry = 0;
    for (int i = 0; i < 9; i++)
        entry = per[i] > entry ? per[i] : entry;
    const uint32_t nb = limit && entry ? (uint32_t)(limit / entry < f->B ? limit / entry : f->B)
                                       : f->B;
    if (!limit || entry * f->B <= limit || nb == 0) /* fits, or not one entry does */
        return ctx->ops->mha_forward(mha, run, f, args);
    vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: arrays beyond this device's buffer range: split into calls of %u batch "
               "entries",
               ctx->call, nb);
    vkmha_status st = VKMHA_SUCCESS;
    for (uint32_t b0 = 0; b0 < f->B && !st; b0 += nb) {
        const uint32_t n = f->B - b0 < nb ? f->B - b0 : nb;
        mha_fwd p = *f;
        p.B = p.as.batch = n;
        p.n_query = p.n_out = n * Lq * d->d_model;
        p.n_key = n * Lk * d->kdim;
        p.n_value = n * Lk * d->vdim;
        p.n_weights = n * H * Lq * L;
        p.mask.m = part_mask(&f->mask.m, (uint32_t)Lq, (uint32_t)L,
                             &(part){b0, n, 0, (uint32_t)H, 0, (uint32_t)Lq});
        p.entry = f->entry + b0;
        p.old = f->old ? f->old + b0 : NULL;
        p.lengths = f->lengths ? f->lengths + b0 : NULL;
        p.as.lengths = f->as.lengths ? f->as.lengths + b0 : NULL;
        const uint64_t at[5] = {b0 * Lq * d->d_model, b0 * Lk * d->kdim, b0 * Lk * d->vdim,
                                b0 * Lq * d->d_model, b0 * H * Lq * L};
        vkmha_arg a[5];
        for (int i = 0; i < 5; i++) {
            a[i] = args[i];
            if (a[i].host)
                a[i].host = (const char *)a[i].host + at[i] * es;
        }
        st = ctx->ops->mha_forward(mha, run, &p, a);
    }
    return st;
}
