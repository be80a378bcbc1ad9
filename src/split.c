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
#include "internal.h"

/* The most bytes one array of a call may have on ctx's device; 0: no limit.
 * A tensor's part is bound from up to 255 bytes below it (descriptor
 * offsets are multiples of the alignment, at most 256). */
static uint64_t array_limit(const vkmha_context *ctx, const vkmha_run *run)
{
    const uint64_t limit = ctx->storage_range < ctx->allocation_size ? ctx->storage_range
                                                                     : ctx->allocation_size;
    return run->form != FORM_HOST && limit > 256 ? limit - 256 : limit;
}

/* Argument a moved `bytes` on: a host array's pointer, a tensor's `at`. */
static vkmha_arg arg_at(const vkmha_arg *a, uint64_t bytes)
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
static vkmha_status check_parts(vkmha_context *ctx, const char *const names[],
                                const vkmha_arg *const a[], const uint64_t bytes[], int n)
{
    vkmha_status st = VKMHA_SUCCESS;
    for (int i = 0; i < n && !st; i++)
        st = check_part(ctx, names[i], a[i]->tensor, a[i]->at, bytes[i]);
    return st;
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

/* The mask of a part: its arrays moved to its first element (tensors by
 * `at`), the bias's broadcast kept, the causal mask moved with its first
 * row. */
static vkmha_mask_arg part_mask(const vkmha_mask_arg *ma, uint32_t len_q, uint32_t len_k,
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
    if (m->kinds & VKMHA_MASK_CAUSAL)
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
static uint64_t mask_bytes(const mask_r *m, uint32_t len_k, const part *p)
{
    uint64_t sizes[3], most = 0;
    mask_sizes(m, len_k, p, sizes);
    for (int i = 0; i < 3; i++)
        most = sizes[i] > most ? sizes[i] : most;
    return most;
}

/* check_part for the mask tensors of part p (am: its mask, part_mask's). */
static vkmha_status check_mask_parts(vkmha_context *ctx, const vkmha_mask_arg *am,
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
    const uint64_t x = softmax_rows_bytes(s, p), mb = mask_bytes(m, s->len_k, p);
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
    const vkmha_arg ax = arg_at(a->x, at), ay = arg_at(a->y, at);
    const vkmha_mask_arg am = part_mask(a->m, s->len_q, s->len_k, p);
    vkmha_status st = check_parts(ctx, (const char *const[]){"x", "y"},
                                  (const vkmha_arg *const[]){&ax, &ay},
                                  (const uint64_t[]){bytes, bytes}, 2);
    if (!st)
        st = check_mask_parts(ctx, &am, s->len_k, p);
    return st ? st : ctx->ops->softmax(ctx, a->run, &ps, &ax, &am, &ay);
}

vkmha_status vkmha__softmax_split(vkmha_context *ctx, const vkmha_run *run, const sm_shape *s,
                                  const vkmha_arg *x, const vkmha_mask_arg *m,
                                  const vkmha_arg *y)
{
    const softmax_args a = {s, run, x, m, y};
    return run_parts(ctx, s->batch, s->heads, s->len_q, 1, array_limit(ctx, run), softmax_bytes,
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
    sizes[5] = mask_bytes(m, s->len_k, p);
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
    const vkmha_arg aq = arg_at(a->q, row * s->d_k * es), ak = arg_at(a->k, kv * s->d_k * es),
                    av = arg_at(a->v, kv * s->d_v * es), ao = arg_at(a->out, row * s->d_v * es),
                    aw = arg_at(a->weights, row * s->len_k * es);
    const vkmha_mask_arg am = part_mask(a->m, s->len_q, s->len_k, p);
    uint64_t sizes[8];
    attention_sizes(s, &a->m->m, p, aw.tensor != NULL, sizes);
    sizes[1] = sizes[2] = 0; /* k and v: in windows (vk_attention.c) */
    vkmha_status st = check_parts(ctx, (const char *const[]){"q", "k", "v", "out", "weights"},
                                  (const vkmha_arg *const[]){&aq, &ak, &av, &ao, &aw}, sizes, 5);
    if (!st)
        st = check_mask_parts(ctx, &am, s->len_k, p);
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
                     array_limit(ctx, run), attention_bytes, &fit, &m->m,
                     weights->host || weights->tensor, attention_part, &a);
}

/* ---- split and merge heads ---------------------------------------------- */

/* The bytes a block of n rows and nh heads spans in [len][heads][d] ("rows",
 * the split's x and the merge's y) and [heads][len][d] of one entry. */
static uint64_t rows_span(const heads_shape *s, uint64_t n, uint64_t nh, uint64_t es)
{
    return ((n - 1) * s->heads + nh) * s->head_dim * es;
}

static uint64_t heads_span(const heads_shape *s, uint64_t n, uint64_t nh, uint64_t es)
{
    return ((nh - 1) * s->len + n) * s->head_dim * es;
}

/* One entry that does not fit: blocks of rows and heads (a transpose: each
 * block spans few rows of one layout and few heads of the other), bound at
 * the full array's strides (heads_shape.full_len, full_heads). */
static vkmha_status heads_blocks(vkmha_context *ctx, const vkmha_run *run, const heads_shape *s,
                                 bool split, const vkmha_arg *x, const vkmha_arg *y,
                                 uint64_t limit)
{
    const uint64_t es = vkmha__dtype_size(s->dtype), plane = (uint64_t)s->len * s->head_dim * es;
    /* Heads whose rows all fit, else one head's rows in blocks; none for an
     * entry of 2^32 elements or more, whose strides the shaders' 32-bit
     * element indices cannot take. */
    const bool big = (uint64_t)s->len * s->heads * s->head_dim > UINT32_MAX;
    const uint64_t rows_in = limit / (s->head_dim * es); /* rows of d that fit */
    uint64_t nh = big ? 0 : limit / plane, n = 0;
    nh = nh < s->heads ? nh : s->heads;
    if (!big && rows_in) {
        const uint64_t h = nh ? nh : 1;
        if (rows_in >= h) /* the [len][heads][d] span of n rows of h heads */
            n = (rows_in - h) / s->heads + 1;
        if (!nh) /* and n rows of one head in [heads][len][d] */
            n = n < rows_in ? n : rows_in;
        nh = h;
    }
    n = n < s->len ? n : s->len;
    if (!nh || !n) { /* not one row (or 2^32 elements): refused naming the array */
        const uint64_t all = (uint64_t)s->batch * s->len * s->heads * s->head_dim * es;
        vkmha_status st = check_parts(ctx, (const char *const[]){"x", "y"},
                                      (const vkmha_arg *const[]){x, y},
                                      (const uint64_t[]){all, all}, 2);
        return st ? st : ctx->ops->heads(ctx, run, s, split, x, y);
    }
    vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: arrays beyond this device's buffer range: split into calls of blocks of "
               "%llu rows x %llu heads",
               ctx->call, (unsigned long long)n, (unsigned long long)nh);
    vkmha_status st = VKMHA_SUCCESS;
    for (uint32_t b = 0; b < s->batch && !st; b++)
        for (uint64_t h0 = 0; h0 < s->heads && !st; h0 += nh)
            for (uint64_t l0 = 0; l0 < s->len && !st; l0 += n) {
                heads_shape ps = *s;
                ps.batch = 1;
                ps.len = (uint32_t)(s->len - l0 < n ? s->len - l0 : n);
                ps.heads = (uint32_t)(s->heads - h0 < nh ? s->heads - h0 : nh);
                ps.full_len = s->len, ps.full_heads = s->heads;
                const uint64_t entry = (uint64_t)s->len * s->heads * s->head_dim * es,
                               at_rows = b * entry + (l0 * s->heads + h0) * s->head_dim * es,
                               at_heads = b * entry + (h0 * s->len + l0) * s->head_dim * es,
                               span_rows = rows_span(s, ps.len, ps.heads, es),
                               span_heads = heads_span(s, ps.len, ps.heads, es);
                const vkmha_arg ax = arg_at(x, split ? at_rows : at_heads),
                                ay = arg_at(y, split ? at_heads : at_rows);
                if (!(st = check_parts(ctx, (const char *const[]){"x", "y"},
                                       (const vkmha_arg *const[]){&ax, &ay},
                                       (const uint64_t[]){split ? span_rows : span_heads,
                                                          split ? span_heads : span_rows},
                                       2)))
                    st = ctx->ops->heads(ctx, run, &ps, split, &ax, &ay);
            }
    return st;
}

vkmha_status vkmha__heads_split(vkmha_context *ctx, const vkmha_run *run, const heads_shape *s,
                                bool split, const vkmha_arg *x, const vkmha_arg *y)
{
    /* [batch][len][heads][d] and [batch][heads][len][d]: an entry is
     * contiguous in both. */
    const uint64_t limit = array_limit(ctx, run), es = vkmha__dtype_size(s->dtype),
                   entry = (uint64_t)s->len * s->heads * s->head_dim * es;
    if (limit && entry > limit)
        return heads_blocks(ctx, run, s, split, x, y, limit);
    const uint32_t nb = limit ? (uint32_t)(limit / entry < s->batch ? limit / entry : s->batch)
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
        const vkmha_arg ax = arg_at(x, b0 * entry), ay = arg_at(y, b0 * entry);
        const uint64_t bytes = ps.batch * entry;
        if (!(st = check_parts(ctx, (const char *const[]){"x", "y"},
                               (const vkmha_arg *const[]){&ax, &ay},
                               (const uint64_t[]){bytes, bytes}, 2)))
            st = ctx->ops->heads(ctx, run, &ps, split, &ax, &ay);
    }
    return st;
}

/* ---- matmul ---------------------------------------------------------------- */

/* One product on host arrays larger than maxMemoryAllocationSize (each is
 * copied into one allocation): calls of blocks of rows of A and C and, with
 * op T, of columns of C (rows of B) whose parts each fit it (a multiple of
 * 16 where it splits); windows past maxStorageBufferRange are the
 * backend's. B past it with op N (strided columns) goes to the backend
 * whole, which runs it in blocks of B's rows (ranges of k) summed on the
 * device; not one row fitting, too, and the backend refuses it naming the
 * array. */
static vkmha_status matmul_blocks(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                                  const vkmha_arg *a, const vkmha_arg *b, const vkmha_arg *bias,
                                  const vkmha_arg *c)
{
    const uint64_t es = vkmha__dtype_size(s->dtype), most = ctx->allocation_size / es;
    uint64_t nc = s->n, mc = s->m;
    if (s->trans_b && s->extent_b > most)
        nc = vkmha__part16(vkmha__rows_within(most, s->k, s->ldb), s->n);
    const uint64_t rows_a = vkmha__rows_within(most, s->k, s->lda),
                   rows_c = vkmha__rows_within(most, nc, s->ldc);
    mc = rows_a < mc ? rows_a : mc;
    mc = vkmha__part16(rows_c < mc ? rows_c : mc, s->m);
    if (!mc || !nc || (!s->trans_b && s->extent_b > most))
        return ctx->ops->matmul(ctx, run, s, a, b, bias, c);
    vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: arrays beyond this device's maxMemoryAllocationSize: split into calls of "
               "%llu x %llu blocks of C",
               ctx->call, (unsigned long long)mc, (unsigned long long)nc);
    vkmha_status st = VKMHA_SUCCESS;
    for (uint64_t m0 = 0; m0 < s->m && !st; m0 += mc)
        for (uint64_t n0 = 0; n0 < s->n && !st; n0 += nc) {
            mm_shape ps = *s;
            ps.m = (uint32_t)(s->m - m0 < mc ? s->m - m0 : mc);
            ps.n = (uint32_t)(s->n - n0 < nc ? s->n - n0 : nc);
            ps.extent_a = (uint64_t)(ps.m - 1) * s->lda + s->k;
            ps.extent_b = s->trans_b ? (uint64_t)(ps.n - 1) * s->ldb + s->k : s->extent_b;
            ps.extent_c = (uint64_t)(ps.m - 1) * s->ldc + ps.n;
            ps.sa = ps.sb = ps.sc = 0; /* one product: no batch strides */
            const vkmha_arg pa = arg_at(a, m0 * s->lda * es),
                            pb = arg_at(b, s->trans_b ? n0 * s->ldb * es : 0),
                            pbias = arg_at(bias, n0 * es),
                            pc = arg_at(c, (m0 * s->ldc + n0) * es);
            st = ctx->ops->matmul(ctx, run, &ps, &pa, &pb, &pbias, &pc);
        }
    return st;
}


/* The backend's matmul, or one product's blocks (matmul_blocks). */
static vkmha_status matmul_call(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                                const vkmha_arg *a, const vkmha_arg *b, const vkmha_arg *bias,
                                const vkmha_arg *c)
{
    const uint64_t es = vkmha__dtype_size(s->dtype), most = ctx->allocation_size;
    if (s->batch == 1 && run->form == FORM_HOST && most &&
        (s->extent_a * es > most || s->extent_b * es > most || s->extent_c * es > most))
        return matmul_blocks(ctx, run, s, a, b, bias, c);
    return ctx->ops->matmul(ctx, run, s, a, b, bias, c);
}

vkmha_status vkmha__matmul_split(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                                 const vkmha_arg *a, const vkmha_arg *b, const vkmha_arg *bias,
                                 const vkmha_arg *c)
{
    const uint64_t limit = array_limit(ctx, run), es = vkmha__dtype_size(s->dtype);
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
    if (nb == s->batch)
        return matmul_call(ctx, run, s, a, b, bias, c);
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
        const vkmha_arg aa = arg_at(a, b0 * s->sa * es), ab = arg_at(b, b0 * s->sb * es),
                        ac = arg_at(c, b0 * s->sc * es);
        st = matmul_call(ctx, run, &ps, &aa, &ab, bias, &ac);
    }
    return st;
}

/* ---- the layer ----------------------------------------------------------- */

/* The layer's call of n entries from b0 and ni query rows from i0 (all of
 * an entry's rows, or rows of one entry): its shape, masks, cache entries
 * and arguments; per[]: each argument's bytes per entry. */
static vkmha_status layer_part(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                               const vkmha_arg args[5], const uint64_t per[5], uint32_t b0,
                               uint32_t n, uint32_t i0, uint32_t ni)
{
    vkmha_context *ctx = mha->ctx;
    const vkmha_mha_desc *d = &mha->d;
    const uint64_t row = (uint64_t)d->d_model * f->es, H = d->n_head, L = f->as.len_k;
    mha_fwd p = *f;
    p.B = p.as.batch = n;
    p.Lq = p.as.len_q = ni;
    p.n_query = p.n_out = (uint64_t)n * ni * d->d_model;
    p.n_key = (uint64_t)n * f->Lk * d->kdim;
    p.n_value = (uint64_t)n * f->Lk * d->vdim;
    p.n_weights = n * H * ni * L;
    const part pm = {b0, n, 0, (uint32_t)H, i0, ni};
    p.mask = part_mask(&f->mask, f->Lq, (uint32_t)L, &pm);
    p.entry = f->entry + b0;
    p.old = f->old ? f->old + b0 : NULL;
    p.lengths = f->lengths ? f->lengths + b0 : NULL;
    p.as.lengths = f->as.lengths ? f->as.lengths + b0 : NULL;
    const uint64_t q_at = ((uint64_t)b0 * f->Lq + i0) * row;
    vkmha_arg a[5] = {arg_at(&args[0], q_at), arg_at(&args[1], b0 * per[1]),
                      arg_at(&args[2], b0 * per[2]), arg_at(&args[3], q_at),
                      arg_at(&args[4], b0 * per[4])};
    if (f->cache && i0 > 0) {
        /* The entry's first rows appended its keys and values: the others
         * attend over what the cache then holds (the lengths of the call),
         * as a call without key and value does. */
        p.append = false;
        p.Lk = 0;
        p.n_key = p.n_value = 0;
        a[1].host = a[2].host = NULL;
        a[1].tensor = a[2].tensor = NULL;
        a[1].at = a[2].at = 0;
    }
    /* The key and value inputs are read only by their projections, which
     * bind them in windows (vk_mha.c). */
    const uint64_t bytes[5] = {n * ni * row, 0, 0, n * ni * row, n * per[4]};
    vkmha_status st = check_parts(ctx, vkmha__mha_io_names,
                                  (const vkmha_arg *const[]){&a[0], &a[1], &a[2], &a[3], &a[4]},
                                  bytes, 5);
    if (!st)
        st = check_mask_parts(ctx, &p.mask, (uint32_t)L, &pm);
    return st ? st : ctx->ops->mha_forward(mha, run, &p, a);
}

vkmha_status vkmha__mha_forward_split(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                                      const vkmha_arg args[5])
{
    vkmha_context *ctx = mha->ctx;
    const vkmha_mha_desc *d = &mha->d;
    const uint64_t limit = array_limit(ctx, run), es = f->es, Lq = f->Lq, Lk = f->Lk,
                   L = f->as.len_k, H = d->n_head, Hkv = d->n_kv_head;
    const uint64_t splits = f->as.kv_splits > 1 ? f->as.kv_splits : 1;
    const bool weights = args[4].host || args[4].tensor,
               unfused = f->as.path == VKMHA_ATTENTION_PATH_UNFUSED;
    const uint64_t dim = d->d_k > d->d_v ? d->d_k : d->d_v;
    /* One batch entry's arguments (io[]), then its other arrays: the
     * projections and the concat of the heads, the fused path's fp32
     * partial outputs, the masks, a KV cache's entry (bound from the call's
     * first entry when the cache is past the range, and read in windows:
     * vk_mha.c, vk_attention.c), and the unfused path's fp32 scores when
     * that path is asked for. The key and value inputs are bound in windows:
     * only the copies of host arrays must fit an allocation. */
    const uint64_t per[11] = {Lq * d->d_model * es, Lk * d->kdim * es, Lk * d->vdim * es,
                              Lq * d->d_model * es, weights ? H * Lq * L * es : 0,
                              Lq * H * dim * es, Lk * Hkv * dim * es,
                              splits * Lq * H * (d->d_v > 2 ? d->d_v : 2) * 4,
                              mask_bytes(&f->mask.m, (uint32_t)L,
                                         &(part){0, 1, 0, (uint32_t)H, 0, (uint32_t)Lq}),
                              f->cache ? Hkv * f->cache->d.capacity * dim *
                                             vkmha__dtype_size(f->cache->d.dtype)
                                       : 0,
                              unfused ? H * Lq * L * 4 : 0};
    /* The key and value projections (per[6]) and a cache's entries (per[9])
     * too, which the attention reads in windows: the projections must fit an
     * allocation (a slot's). */
    uint64_t entry = 0;
    for (int i = 0; i < 11; i++)
        if (i != 1 && i != 2 && i != 6 && i != 9)
            entry = per[i] > entry ? per[i] : entry;
    const uint64_t kv_in = per[1] > per[2] ? per[1] : per[2],
                   alloc = run->form == FORM_HOST ? ctx->allocation_size : 0, kv_proj = per[6];
    uint64_t nb = limit && entry ? limit / entry : f->B;
    if (alloc && kv_in && alloc / kv_in < nb)
        nb = alloc / kv_in;
    if (limit && kv_proj && ctx->allocation_size / kv_proj < nb)
        nb = ctx->allocation_size / kv_proj;
    nb = nb < f->B ? nb : f->B;
    uint32_t ni = (uint32_t)Lq;
    if (nb == 0 && !weights && !(f->mask.m.bias && f->mask.m.bias_heads > 1) &&
        (!alloc || kv_in <= alloc) && per[6] <= ctx->allocation_size &&
        (!f->mask.m.key_padding || L <= limit)) {
        /* Not one entry: rows of its queries (each row's query and output,
         * projection and concat, partial outputs, scores, mask rows), all
         * of its keys each time (a KV cache's: the first rows append the
         * new ones, layer_part). */
        const uint64_t per_row[6] = {d->d_model * es, H * dim * es,
                                     splits * H * (d->d_v > 2 ? d->d_v : 2) * 4,
                                     unfused ? H * L * 4 : 0, f->mask.m.full ? L : 0,
                                     f->mask.m.bias ? L * 4 : 0};
        uint64_t most = Lq;
        for (int i = 0; i < 6; i++)
            if (per_row[i] && limit / per_row[i] < most)
                most = limit / per_row[i];
        if (most) {
            nb = 1;
            ni = (uint32_t)most;
        }
    }
    if (!limit || nb == 0) /* fits, or not one row does: the backend names it */
        nb = f->B;
    const bool whole = nb == f->B && ni == Lq;
    if (whole)
        return layer_part(mha, run, f, args, per, 0, f->B, 0, (uint32_t)Lq);
    vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: arrays beyond this device's buffer range: split into calls of %llu batch "
               "entries of %u query rows",
               ctx->call, (unsigned long long)nb, ni);
    /* vkmha_mha_submit: the parts record into one submission. */
    vkmha_run part_run = *run;
    vkmha_submission *open = NULL;
    vkmha_status st = VKMHA_SUCCESS;
    if (run->form == FORM_SUBMIT && (st = ctx->ops->parts_open(ctx, &part_run, &open)))
        return st;
    for (uint32_t b0 = 0; b0 < f->B && !st; b0 += (uint32_t)nb)
        for (uint32_t i0 = 0; i0 < Lq && !st; i0 += ni)
            st = layer_part(mha, &part_run, f, args, per, b0,
                            (uint32_t)(f->B - b0 < nb ? f->B - b0 : nb), i0,
                            (uint32_t)(Lq - i0 < ni ? Lq - i0 : ni));
    return open ? ctx->ops->parts_close(ctx, open, st, run->sub) : st;
}
