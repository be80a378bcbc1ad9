/* KV caches (vkmha_kv_cache_*), backend-neutral: the keys and values are
 * two tensors of the layer's context, the lengths live on the host, and the
 * backends (kv_* entries of vkmha_backend_ops) zero, reorder and, in a
 * forward, append to the tensors. The forward's checks are here too
 * (vkmha__kv_resolve), called by src/mha.c. */
#include "internal.h"

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT

/* The shaders compute causal limits in 32-bit signed arithmetic over
 * positions (shaders/mask.glsl), so positions stay below 2^30. */
#define MAX_CAPACITY (1u << 30)

static const char *const tensor_names[2] = {"desc->keys", "desc->values"};

/* Elements of a row of the keys (which 0) or values (1) tensor: the head
 * dim, or a Q8 cache's row bytes. */
static uint32_t row_elements(const vkmha_mha_desc *d, uint32_t quant, int which)
{
    const uint32_t dim = which ? d->d_v : d->d_k;
    return quant ? vkmha__kv_q8_row_bytes(dim) : dim;
}

/* Elements of the keys (which 0) or values (1) tensor. */
static bool tensor_elements(const vkmha_mha_desc *d, uint32_t batch, uint32_t capacity,
                            uint32_t quant, int which, uint64_t *n)
{
    uint64_t rows;
    return vkmha__mul_u64((uint64_t)batch * d->n_kv_head, capacity, &rows) &&
           vkmha__mul_u64(rows, row_elements(d, quant, which), n);
}

/* The tensors' dtype: desc's, or a Q8 cache's bytes. */
static uint32_t elem_dtype(const vkmha_kv_cache_desc *desc)
{
    return desc->quant ? VKMHA_DTYPE_U8 : desc->dtype;
}

/* The elements of the cache's keys and values (n[2]), checked before
 * anything is allocated for it: their counts, and for its own tensors the
 * most one tensor holds on the device. */
static vkmha_status check_sizes(vkmha_context *ctx, const vkmha_mha_desc *d,
                                const vkmha_kv_cache_desc *desc, uint32_t batch, uint64_t n[2])
{
    vkmha_status st;
    for (int i = 0; i < 2; i++) {
        if (!tensor_elements(d, batch, desc->capacity, desc->quant, i, &n[i]))
            return vkmha__fail(ctx, INVALID, "%s: the cache's %s overflow 64 bits", ctx->call,
                               i ? "values" : "keys");
        uint64_t bytes;
        if ((st = vkmha__check_count(ctx, ctx->call, tensor_names[i], n[i],
                                     vkmha__dtype_size(elem_dtype(desc)), &bytes)))
            return st;
        if (!desc->keys && ctx->tensor_bytes && bytes > ctx->tensor_bytes)
            return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                               "%s: the cache's %s (desc->batch x n_kv_head x desc->capacity x "
                               "head dim: %llu bytes) are more than one tensor holds on this "
                               "device (vkmha_context_info.max_tensor_bytes: %llu bytes, %s); "
                               "lower desc->batch or desc->capacity (several caches of fewer "
                               "entries hold what one cannot)",
                               ctx->call, i ? "values" : "keys", (unsigned long long)bytes,
                               (unsigned long long)ctx->tensor_bytes,
                               ctx->tensor_bytes > ctx->allocation_size
                                   ? "sparse buffers' maxBufferSize and sparseAddressSpaceSize"
                                   : "maxMemoryAllocationSize");
    }
    return VKMHA_SUCCESS;
}

/* The cache's tensors of n[2] elements (check_sizes): the application's
 * (checked), or new ones. */
static vkmha_status cache_tensors(vkmha_kv_cache *c, const vkmha_kv_cache_desc *desc,
                                  const uint64_t n[2])
{
    vkmha_context *ctx = c->mha->ctx;
    vkmha_tensor *t[2] = {desc->keys, desc->values};
    vkmha_status st;
    for (int i = 0; i < 2; i++) {
        if (t[i]) {
            vkmha_arg a;
            if ((st = c->d.quant ? vkmha__tensor_arg_u8(ctx, tensor_names[i], t[i], n[i], &a)
                                 : vkmha__tensor_arg(ctx, tensor_names[i], t[i], false, n[i],
                                                     &a)))
                return st;
            /* (A Q8 cache's: vkmha__tensor_arg_u8 asked U8.) */
            if (!c->d.quant && a.dtype != c->elem_dtype)
                return vkmha__fail(ctx, INVALID, "%s: %s has dtype %u, desc->dtype is %u",
                                   ctx->call, tensor_names[i], a.dtype, c->d.dtype);
            /* A Q8 cache's rows are read and written a word at a time. */
            if (c->d.quant && t[i]->offset % 4)
                return vkmha__fail(ctx, INVALID, "%s: %s starts %llu bytes into its buffer: a "
                                   "Q8 cache's tensors start on a multiple of 4 bytes",
                                   ctx->call, tensor_names[i],
                                   (unsigned long long)t[i]->offset);
            continue;
        }
        /* Own tensors: vkmha_tensor_create's. */
        const vkmha_tensor_desc td = {c->elem_dtype, 4,
                                      {c->d.batch, c->mha->d.n_kv_head, c->d.capacity,
                                       c->row[i]}};
        if ((st = vkmha__tensor_new(ctx, &td, &t[i])))
            return st;
        if ((st = ctx->ops->tensor_alloc(t[i]))) {
            vkmha_tensor_destroy(t[i]);
            return st;
        }
        c->own = true;
        (i ? &c->d.values : &c->d.keys)[0] = t[i];
    }
    c->d.keys = t[0];
    c->d.values = t[1];
    if (t[0] == t[1] || vkmha__tensors_overlap(t[0], t[1]))
        return vkmha__fail(ctx, INVALID, "%s: desc->keys and desc->values share memory",
                           ctx->call);
    return VKMHA_SUCCESS;
}

/* Frees c and what it holds; backend: its backend state exists. */
static void cache_free(vkmha_kv_cache *c, bool backend)
{
    vkmha_context *ctx = c->mha->ctx;
    if (backend)
        ctx->ops->kv_free(c);
    if (c->own) {
        vkmha_tensor_destroy(c->d.keys);
        vkmha_tensor_destroy(c->d.values);
    }
    vkmha__free(ctx, c->lengths);
    vkmha__free(ctx, c->call_lengths);
    vkmha__free(ctx, c);
}

VKMHA_API vkmha_status vkmha_kv_cache_create(vkmha_mha *mha, const vkmha_kv_cache_desc *desc,
                                             vkmha_kv_cache **out)
{
    if (out)
        *out = NULL;
    if (!mha)
        return INVALID;
    vkmha_context *ctx = mha->ctx;
    vkmha__begin_call(ctx, "vkmha_kv_cache_create");
    vkmha_status st;
    if (!out)
        return vkmha__fail(ctx, INVALID, "%s: out is NULL", ctx->call);
    if (!desc)
        return vkmha__fail(ctx, INVALID, "%s: desc is NULL", ctx->call);
    if (desc->capacity == 0)
        return vkmha__fail(ctx, INVALID, "%s: desc->capacity is 0 (must be >= 1)", ctx->call);
    if (desc->capacity > MAX_CAPACITY)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: desc->capacity (%u) is above 2^30 positions", ctx->call,
                           desc->capacity);
    if ((st = vkmha__check_dtype(ctx, "desc->dtype", desc->dtype)))
        return st;
    if (desc->quant > VKMHA_QUANT_Q4Z)
        return vkmha__fail(ctx, INVALID, "%s: desc->quant (%u) is not a vkmha_quant_type",
                           ctx->call, desc->quant);
    if (desc->quant && desc->quant != VKMHA_QUANT_Q8)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: desc->quant (%u): a KV cache is F32, F16, BF16 or Q8 "
                           "(VKMHA_QUANT_Q8)", ctx->call, desc->quant);
    if (desc->quant && desc->dtype)
        return vkmha__fail(ctx, INVALID, "%s: desc->dtype (%u) with desc->quant Q8: leave it 0 "
                           "(a Q8 cache stores codes and scales)", ctx->call, desc->dtype);
    if (!desc->keys != !desc->values)
        return vkmha__fail(ctx, INVALID, "%s: desc->%s is NULL but desc->%s is not (give both "
                           "tensors or neither)",
                           ctx->call, desc->keys ? "values" : "keys",
                           desc->keys ? "keys" : "values");
    /* Sizes first: the entries' lengths below are 8 bytes an entry. */
    const uint32_t batch = desc->batch ? desc->batch : 1;
    uint64_t n[2];
    if ((st = check_sizes(ctx, &mha->d, desc, batch, n)))
        return st;
    vkmha_kv_cache *c = vkmha__calloc(ctx, 1, ctx->ops->kv_size);
    if (c) {
        c->lengths = vkmha__calloc(ctx, batch, sizeof *c->lengths);
        c->call_lengths = vkmha__calloc(ctx, batch, sizeof *c->call_lengths);
    }
    if (!c || !c->lengths || !c->call_lengths) {
        if (c) {
            vkmha__free(ctx, c->lengths);
            vkmha__free(ctx, c->call_lengths);
        }
        vkmha__free(ctx, c);
        return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           ctx->call);
    }
    c->mha = mha;
    c->d = *desc;
    c->d.batch = batch;
    c->d.keys = c->d.values = NULL;
    c->n_kv_head = mha->d.n_kv_head;
    c->d_k = mha->d.d_k;
    c->d_v = mha->d.d_v;
    c->elem_dtype = elem_dtype(desc);
    for (int i = 0; i < 2; i++)
        c->row[i] = row_elements(&mha->d, desc->quant, i);
    bool created = false;
    if (!(st = cache_tensors(c, desc, n)) && !(st = ctx->ops->kv_create(c))) {
        created = true;
        st = ctx->ops->kv_clear(c, 0, batch, 0);
    }
    if (st) {
        cache_free(c, created);
        return st;
    }
    *out = c;
    return VKMHA_SUCCESS;
}

VKMHA_API void vkmha_kv_cache_destroy(vkmha_kv_cache *c)
{
    if (c)
        cache_free(c, true);
}

VKMHA_API vkmha_status vkmha_kv_cache_get_desc(const vkmha_kv_cache *c, vkmha_kv_cache_desc *out)
{
    if (!c)
        return INVALID;
    if (!out) {
        vkmha__begin_call(c->mha->ctx, "vkmha_kv_cache_get_desc");
        return vkmha__fail(c->mha->ctx, INVALID, "vkmha_kv_cache_get_desc: out is NULL");
    }
    *out = c->d;
    return VKMHA_SUCCESS;
}

VKMHA_API uint64_t vkmha_kv_cache_bytes(const vkmha_kv_cache *c)
{
    if (!c)
        return 0;
    const uint64_t rows = (uint64_t)c->d.batch * c->n_kv_head * c->d.capacity;
    return rows * (c->row[0] + c->row[1]) * vkmha__dtype_size(c->elem_dtype) +
           4ull * c->d.batch;
}

/* Starts a public call on cache c; INVALID (named) for a NULL cache. */
static vkmha_status begin(vkmha_kv_cache *c, const char *fn)
{
    if (!c)
        return INVALID;
    vkmha__begin_call(c->mha->ctx, fn);
    return VKMHA_SUCCESS;
}

/* Checks entries first .. first + count - 1 of c. */
static vkmha_status check_range(vkmha_kv_cache *c, const char *first_name, uint32_t first,
                                uint32_t count, const char *count_name)
{
    vkmha_context *ctx = c->mha->ctx;
    if (first >= c->d.batch || count > c->d.batch - first)
        return vkmha__fail(ctx, INVALID,
                           "%s: %s (%u) + %s (%u) exceeds the cache's %u entries", ctx->call,
                           first_name, first, count_name, count, c->d.batch);
    return VKMHA_SUCCESS;
}

VKMHA_API vkmha_status vkmha_kv_cache_get_lengths(const vkmha_kv_cache *cache, uint32_t first,
                                                  uint32_t count, uint32_t *lengths)
{
    vkmha_kv_cache *c = (vkmha_kv_cache *)(uintptr_t)cache;
    vkmha_status st;
    if ((st = begin(c, "vkmha_kv_cache_get_lengths")) ||
        (count && (st = check_range(c, "first", first, count, "count"))))
        return st;
    if (!lengths && count)
        return vkmha__fail(c->mha->ctx, INVALID, "%s: lengths is NULL", c->mha->ctx->call);
    for (uint32_t i = 0; i < count; i++)
        lengths[i] = c->lengths[first + i];
    return VKMHA_SUCCESS;
}

VKMHA_API vkmha_status vkmha_kv_cache_reset(vkmha_kv_cache *c)
{
    vkmha_status st;
    if ((st = begin(c, "vkmha_kv_cache_reset")) ||
        (st = c->mha->ctx->ops->kv_clear(c, 0, c->d.batch, 0)))
        return st;
    for (uint32_t e = 0; e < c->d.batch; e++)
        c->lengths[e] = 0;
    return VKMHA_SUCCESS;
}

/* Entry `entry` (VKMHA_ALL_ENTRIES: every one) holds `length` positions,
 * zeros past them; shorten_only: a length above an entry's is refused. */
static vkmha_status set_length(vkmha_kv_cache *c, const char *fn, uint32_t entry,
                               uint32_t length, bool shorten_only)
{
    vkmha_status st;
    if ((st = begin(c, fn)))
        return st;
    vkmha_context *ctx = c->mha->ctx;
    const bool all = entry == VKMHA_ALL_ENTRIES;
    if (!all && (st = check_range(c, "entry", entry, 1, "1")))
        return st;
    if (length > c->d.capacity)
        return vkmha__fail(ctx, INVALID, "%s: length (%u) is above the capacity (%u)",
                           ctx->call, length, c->d.capacity);
    const uint32_t first = all ? 0 : entry, count = all ? c->d.batch : 1;
    for (uint32_t e = first; shorten_only && e < first + count; e++)
        if (length > c->lengths[e])
            return vkmha__fail(ctx, INVALID,
                               "%s: length (%u) is above entry %u's length (%u): truncate "
                               "only shortens",
                               ctx->call, length, e, c->lengths[e]);
    if ((st = ctx->ops->kv_clear(c, first, count, length)))
        return st;
    for (uint32_t e = first; e < first + count; e++)
        c->lengths[e] = length;
    return VKMHA_SUCCESS;
}

VKMHA_API vkmha_status vkmha_kv_cache_truncate(vkmha_kv_cache *c, uint32_t entry,
                                               uint32_t length)
{
    return set_length(c, "vkmha_kv_cache_truncate", entry, length, true);
}

VKMHA_API vkmha_status vkmha_kv_cache_set_length(vkmha_kv_cache *c, uint32_t entry,
                                                 uint32_t length)
{
    return set_length(c, "vkmha_kv_cache_set_length", entry, length, false);
}

VKMHA_API vkmha_status vkmha_kv_cache_reorder(vkmha_kv_cache *c, const uint32_t *src)
{
    vkmha_status st;
    if ((st = begin(c, "vkmha_kv_cache_reorder")))
        return st;
    vkmha_context *ctx = c->mha->ctx;
    if (!src)
        return vkmha__fail(ctx, INVALID, "%s: src is NULL", ctx->call);
    for (uint32_t e = 0; e < c->d.batch; e++)
        if (src[e] >= c->d.batch)
            return vkmha__fail(ctx, INVALID, "%s: src[%u] (%u) is not an entry (the cache has %u)",
                               ctx->call, e, src[e], c->d.batch);
    if ((st = ctx->ops->kv_reorder(c, src)))
        return st;
    for (uint32_t e = 0; e < c->d.batch; e++)
        c->call_lengths[e] = c->lengths[src[e]];
    for (uint32_t e = 0; e < c->d.batch; e++)
        c->lengths[e] = c->call_lengths[e];
    return VKMHA_SUCCESS;
}

VKMHA_API vkmha_status vkmha_kv_cache_get_tensors(vkmha_kv_cache *c, vkmha_tensor **keys,
                                                  vkmha_tensor **values)
{
    if (!c)
        return INVALID;
    if (keys)
        *keys = c->d.keys;
    if (values)
        *values = c->d.values;
    return VKMHA_SUCCESS;
}

/* ---- the forward ---------------------------------------------------------- */

vkmha_status vkmha__kv_resolve(vkmha_mha *mha, vkmha_kv_cache *c, uint32_t entry,
                               uint32_t len_k, const uint32_t *tokens, bool append, mha_fwd *f)
{
    vkmha_context *ctx = mha->ctx;
    const char *fn = ctx->call;
    vkmha_status st;
    if (c->mha != mha)
        return vkmha__fail(ctx, INVALID, "%s: io->kv_cache belongs to another layer", fn);
    if ((st = check_range(c, "io->kv_entry", entry, f->B, "io->batch")))
        return st;
    uint32_t most = 0;
    for (uint32_t b = 0; b < f->B; b++) {
        const uint32_t e = entry + b, old = c->lengths[e], n = tokens ? tokens[b] : len_k;
        if (append && n > c->d.capacity - old)
            return vkmha__fail(ctx, INVALID,
                               "%s: io->kv_cache entry %u holds %u of its %u positions: "
                               "appending %u (%s) would pass its capacity",
                               fn, e, old, c->d.capacity, n,
                               tokens ? "its io->entry_tokens" : "io->len_k");
        if (!append && old == 0)
            return vkmha__fail(ctx, INVALID,
                               "%s: io->kv_cache entry %u is empty and io->key, io->value are "
                               "NULL: nothing to attend to (give them to fill it)",
                               fn, e);
        const uint32_t len = old + (append ? n : 0);
        c->call_lengths[b] = len;
        most = len > most ? len : most;
    }
    f->cache = c;
    f->entry = entry;
    f->append = append;
    f->old = &c->lengths[entry];
    f->lengths = c->call_lengths;
    f->Lk = append ? len_k : 0;
    f->as.len_k = most;
    return VKMHA_SUCCESS;
}

void vkmha__kv_commit(const mha_fwd *f)
{
    if (!f->cache)
        return;
    for (uint32_t b = 0; b < f->B; b++)
        f->cache->lengths[f->entry + b] = f->lengths[b];
}
