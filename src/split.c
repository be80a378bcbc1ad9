/* Calls whose arrays exceed what one call of the backend can bind (Vulkan:
 * maxStorageBufferRange, and maxMemoryAllocationSize for what it copies host
 * arrays into), on host arrays and on tensors alike: the softmax and the
 * attention run as several calls of whole batch entries, then of heads
 * (groups of query heads sharing a key/value head), then of query rows of
 * one head, each of which fits; split / merge heads, the layer and a batched
 * matmul as several calls of whole batch entries (products). Every part is
 * an independent problem of the same op (the rows of a softmax and the
 * queries of an attention do not interact; a causal mask moves with the
 * first row: causal_offset + i0), so the results are those of one call. A
 * part of a host array is a pointer into it; a part of a tensor is the
 * tensor with the bytes before it (vkmha_arg.at), which the backend binds
 * from there. An attention's keys and values need not fit: the backend's
 * fused path binds them in windows of keys, its unfused path runs one
 * product at a time in windows (host arrays of them must fit an
 * allocation). What does not fit even as one row of one head goes to the
 * backend whole, which refuses a host array naming it; a tensor is refused
 * here (check_part). The reference backend has no such limits. */
#include "split.h"

/* The most bytes one array of a call may have on ctx's device; 0: no limit.
 * A tensor's part is bound from up to 255 bytes below it (descriptor
 * offsets are multiples of the alignment, at most 256). */
uint64_t vkmha__split_limit(const vkmha_context *ctx, const vkmha_run *run)
{
    const uint64_t limit = ctx->storage_range < ctx->allocation_size ? ctx->storage_range
                                                                     : ctx->allocation_size;
    return run->form != FORM_HOST && limit > 256 ? limit - 256 : limit;
}

/* Argument a moved `bytes` on: a host array's pointer, a tensor's `at`. */
vkmha_arg vkmha__arg_at(const vkmha_arg *a, uint64_t bytes)
{
    vkmha_arg r = *a;
    if (r.host)
        r.host = (const char *)r.host + bytes;
    else if (r.tensor)
        r.at += bytes;
    return r;
}

/* A tensor argument's part of `bytes` from a->at: refused (naming it) when
 * it does not fit one binding; host arrays are the backend's to check. */
static vkmha_status check_part(vkmha_context *ctx, const char *name, const vkmha_tensor *t,
                               uint64_t at, uint64_t bytes)
{
    const uint64_t range = ctx->storage_range;
    if (!t || !range || (t->offset + at) % 256 + bytes <= range)
        return VKMHA_SUCCESS;
    return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                       "%s: %s is a tensor of %llu bytes, more than this device's "
                       "maxStorageBufferRange (%llu bytes) lets one binding hold, and no part "
                       "of the call that fits it (a batch entry, a head, a row of queries) is "
                       "small enough",
                       ctx->call, name, (unsigned long long)t->bytes, (unsigned long long)range);
}

/* check_part for a call's arguments (names[i] of a[i], bytes[i] of each). */
vkmha_status vkmha__check_parts(vkmha_context *ctx, const char *const names[],
                                const vkmha_arg *const a[], const uint64_t bytes[], int n)
{
    vkmha_status st = VKMHA_SUCCESS;
    for (int i = 0; i < n && !st; i++)
        st = check_part(ctx, names[i], a[i]->tensor, a[i]->at, bytes[i]);
    return st;
}


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

/* The mask of a part: its arrays moved to its first element (tensors by
 * `at`), the bias's broadcast kept, the causal mask moved with its first
 * row. */
vkmha_mask_arg vkmha__part_mask(const vkmha_mask_arg *ma, uint32_t len_q, uint32_t len_k,
                                const part *p)
{
    vkmha_mask_arg r = *ma;
    const mask_r *m = &ma->m;
    const uint64_t plane = (uint64_t)len_q * len_k;
    const bool per_batch = m->bias_batch > 1, per_head = m->bias_heads > 1;
    /* Bytes to each kind's first element: key padding, full, bias. */
    const uint64_t skip[3] = {
        (uint64_t)p->b0 * len_k, (uint64_t)p->b0 * plane + (uint64_t)p->i0 * len_k,
        (((per_batch ? (uint64_t)p->b0 * m->bias_heads : 0) + (per_head ? p->h0 : 0)) * plane +
         (uint64_t)p->i0 * len_k) * 4};
    for (int i = 0; i < 3; i++)
        if (r.t[i])
            r.at[i] += skip[i];
    /* Host arrays (a tensor's pointer only stands in for it). */
    if (r.m.key_padding && !r.t[0])
        r.m.key_padding += skip[0];
    if (r.m.full && !r.t[1])
        r.m.full += skip[1];
    if (r.m.bias && !r.t[2])
        r.m.bias += skip[2] / 4;
    if (m->bias) {
        r.m.bias_batch = per_batch ? p->nb : 1;
        r.m.bias_heads = per_head ? p->nh : 1;
    }
    /* The per-head arrays move with the first head, the queries' positions
     * with the first row. */
    if (m->alibi)
        r.m.alibi += p->h0;
    if (m->sinks)
        r.m.sinks += p->h0;
    if (m->kinds & (VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW | VKMHA_MASK_ALIBI))
        r.m.causal_offset = (uint32_t)((int32_t)m->causal_offset + (int32_t)p->i0);
    return r;
}

/* Bytes of each mask of a part (uint8 key padding and full mask, fp32
 * bias; 0 where absent). */
static void mask_sizes(const mask_r *m, uint32_t len_k, const part *p, uint64_t sizes[3])
{
    sizes[0] = m->key_padding ? (uint64_t)p->nb * len_k : 0;
    sizes[1] = m->full ? (uint64_t)p->nb * p->ni * len_k : 0;
    sizes[2] = m->bias ? (m->bias_batch > 1 ? p->nb : 1) *
                             (uint64_t)(m->bias_heads > 1 ? p->nh : 1) * p->ni * len_k * 4
                       : 0;
}

/* The largest of them. */
uint64_t vkmha__mask_part_bytes(const mask_r *m, uint32_t len_k, const part *p)
{
    uint64_t sizes[3], most = 0;
    mask_sizes(m, len_k, p, sizes);
    for (int i = 0; i < 3; i++)
        most = sizes[i] > most ? sizes[i] : most;
    return most;
}

/* check_part for the mask tensors of part p (am: its mask, part_mask's). */
vkmha_status vkmha__check_mask_parts(vkmha_context *ctx, const vkmha_mask_arg *am,
                                     uint32_t len_k, const part *p)
{
    static const char *const names[3] = {"mask->key_padding", "mask->full", "mask->bias"};
    uint64_t sizes[3];
    mask_sizes(&am->m, len_k, p, sizes);
    vkmha_status st = VKMHA_SUCCESS;
    for (int i = 0; i < 3 && !st; i++)
        st = check_part(ctx, names[i], am->t[i], am->at[i], sizes[i]);
    return st;
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
    const vkmha_arg *x;
    const vkmha_mask_arg *m;
    const vkmha_arg *y;
} softmax_args;

/* Bytes of a part's rows of x (and of y). */
static uint64_t softmax_rows_bytes(const sm_shape *s, const part *p)
{
    return (uint64_t)p->nb * p->nh * p->ni * s->len_k * vkmha__dtype_size(s->dtype);
}

static uint64_t softmax_bytes(const void *shape, const mask_r *m, const part *p, bool weights)
{
    (void)weights;
    const sm_shape *s = shape;
    const uint64_t x = softmax_rows_bytes(s, p), mb = vkmha__mask_part_bytes(m, s->len_k, p);
    return x > mb ? x : mb;
}

static vkmha_status softmax_part(vkmha_context *ctx, const void *args, const part *p)
{
    const softmax_args *a = args;
    const sm_shape *s = a->s;
    sm_shape ps = *s;
    ps.batch = p->nb, ps.heads = p->nh, ps.len_q = p->ni;
    const uint64_t at = (((uint64_t)p->b0 * s->heads + p->h0) * s->len_q + p->i0) * s->len_k *
                        vkmha__dtype_size(s->dtype),
                   bytes = softmax_rows_bytes(s, p);
    const vkmha_arg ax = vkmha__arg_at(a->x, at), ay = vkmha__arg_at(a->y, at);
    const vkmha_mask_arg am = vkmha__part_mask(a->m, s->len_q, s->len_k, p);
    vkmha_status st = vkmha__check_parts(ctx, (const char *const[]){"x", "y"},
                                  (const vkmha_arg *const[]){&ax, &ay},
                                  (const uint64_t[]){bytes, bytes}, 2);
    if (!st)
        st = vkmha__check_mask_parts(ctx, &am, s->len_k, p);
    return st ? st : ctx->ops->softmax(ctx, a->run, &ps, &ax, &am, &ay);
}

vkmha_status vkmha__softmax_split(vkmha_context *ctx, const vkmha_run *run, const sm_shape *s,
                                  const vkmha_arg *x, const vkmha_mask_arg *m,
                                  const vkmha_arg *y)
{
    const softmax_args a = {s, run, x, m, y};
    return run_parts(ctx, s->batch, s->heads, s->len_q, 1, vkmha__split_limit(ctx, run), softmax_bytes,
                     s, &m->m, false, softmax_part, &a);
}

/* ---- attention ----------------------------------------------------------- */

typedef struct attention_args {
    const attn_shape *s;
    const vkmha_run *run;
    const vkmha_arg *q, *k, *v;
    const vkmha_mask_arg *m;
    const vkmha_arg *out, *weights;
} attention_args;

/* A shape and how its keys and values count for the fit: bound in windows
 * by the backend (the fused path's windows of keys, the unfused path's
 * products), they need not fit a binding, only an allocation when they are
 * host arrays (kv_most; 0: no limit). */
typedef struct attention_fit {
    const attn_shape *s;
    uint64_t kv_most;
} attention_fit;

/* Key/value heads of a part: all of its entries', its groups', or the one
 * its single query head reads. */
static uint32_t part_kv_heads(const attn_shape *s, const part *p)
{
    const uint32_t group = s->heads / s->kv_heads;
    return p->nh == s->heads ? s->kv_heads : p->nh >= group ? p->nh / group : 1;
}

/* The bytes of a part's arrays: q, k, v, out, weights, then the masks, the
 * fused path's fp32 partial outputs (one per key range asked for, or the
 * output's size: several key chunks a range) and the unfused path's fp32
 * scores when that path is asked for (vk_attention.c). */
static void attention_sizes(const attn_shape *s, const mask_r *m, const part *p, bool weights,
                            uint64_t sizes[8])
{
    const uint64_t es = vkmha__dtype_size(s->dtype), rows = (uint64_t)p->nb * p->nh * p->ni,
                   kvh = (uint64_t)p->nb * part_kv_heads(s, p);
    const uint64_t splits = s->kv_splits > 1 ? s->kv_splits : 1;
    sizes[0] = rows * s->d_k * es;
    sizes[1] = kvh * s->len_k * s->d_k * es;
    sizes[2] = kvh * s->len_k * s->d_v * es;
    sizes[3] = rows * s->d_v * es;
    sizes[4] = weights ? rows * s->len_k * es : 0;
    sizes[5] = vkmha__mask_part_bytes(m, s->len_k, p);
    sizes[6] = splits * rows * (s->d_v > 2 ? s->d_v : 2) * 4;
    sizes[7] = s->path == VKMHA_ATTENTION_PATH_UNFUSED ? rows * s->len_k * 4 : 0;
}

static uint64_t attention_bytes(const void *shape, const mask_r *m, const part *p, bool weights)
{
    const attention_fit *fit = shape;
    uint64_t sizes[8], most = 0;
    attention_sizes(fit->s, m, p, weights, sizes);
    for (int i = 0; i < 8; i++) {
        if (i == 1 || i == 2) {
            if (fit->kv_most && sizes[i] > fit->kv_most)
                return UINT64_MAX;
            continue;
        }
        most = sizes[i] > most ? sizes[i] : most;
    }
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
    const vkmha_arg aq = vkmha__arg_at(a->q, row * s->d_k * es), ak = vkmha__arg_at(a->k, kv * s->d_k * es),
                    av = vkmha__arg_at(a->v, kv * s->d_v * es), ao = vkmha__arg_at(a->out, row * s->d_v * es),
                    aw = vkmha__arg_at(a->weights, row * s->len_k * es);
    const vkmha_mask_arg am = vkmha__part_mask(a->m, s->len_q, s->len_k, p);
    uint64_t sizes[8];
    attention_sizes(s, &a->m->m, p, aw.tensor != NULL, sizes);
    sizes[1] = sizes[2] = 0; /* k and v: in windows (vk_attention.c) */
    vkmha_status st = vkmha__check_parts(ctx, (const char *const[]){"q", "k", "v", "out", "weights"},
                                  (const vkmha_arg *const[]){&aq, &ak, &av, &ao, &aw}, sizes, 5);
    if (!st)
        st = vkmha__check_mask_parts(ctx, &am, s->len_k, p);
    return st ? st : ctx->ops->attention(ctx, a->run, &ps, &aq, &ak, &av, &am, &ao, &aw);
}

vkmha_status vkmha__attention_split(vkmha_context *ctx, const vkmha_run *run,
                                    const attn_shape *s, const vkmha_arg *q, const vkmha_arg *k,
                                    const vkmha_arg *v, const vkmha_mask_arg *m,
                                    const vkmha_arg *out, const vkmha_arg *weights)
{
    const attention_args a = {s, run, q, k, v, m, out, weights};
    /* The backend binds k and v in windows past maxStorageBufferRange; host
     * arrays of them are copied into one allocation each. */
    const attention_fit fit = {s, run->form == FORM_HOST ? ctx->allocation_size : 0};
    return run_parts(ctx, s->batch, s->heads, s->len_q, s->heads / s->kv_heads,
                     vkmha__split_limit(ctx, run), attention_bytes, &fit, &m->m,
                     weights->host || weights->tensor, attention_part, &a);
}

