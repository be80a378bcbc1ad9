/* KV caches (vkmha_kv_cache_*) and the causal offset: a decoder run with a
 * cache, prefilled whole or in chunks and then token by token, equals one
 * causal forward over the whole sequence, element by element, on both
 * backends, every attention path and the 16-bit dtypes, with grouped-query
 * heads, d_k != d_v and key padding; entries of different lengths decode in
 * one call, and with their own counts of new tokens (mixed batches);
 * cross-attention reuses the encoder's keys and values; the cache
 * operations; every bad argument; the tensor, submit and record forms; and
 * the ops' causal_offset against the reference. */
#include "util.h"
#include "util_dtype.h"

#include <vkmha_vulkan.h>

/* A layer for these tests: d_model 24, 4 query heads over 2 key/value heads,
 * d_k 8, d_v 12, kdim 20 (cross-attention), biases, post-norm. */
typedef t_layer_desc layer;

enum { D_MODEL = 24, HEADS = 4, KV_HEADS = 2, D_K = 8, D_V = 12, KDIM = 20 };

static void layer_make(layer *l, t_rng *r, bool cross)
{
    t_layer_desc_make(l, r, D_MODEL, HEADS, KV_HEADS, D_K, D_V, cross ? KDIM : D_MODEL, 0.4f);
}

/* A run: a backend or Vulkan variant, a path, the activations' / storage
 * dtype and the cache's. */
typedef struct run {
    vkmha_context *ctx;
    const char *ctx_name;
    vkmha_attention_path path;
    uint32_t kv_splits;
    uint32_t dtype, cache_dtype;
} run;

/* Tolerances against an fp32 / 16-bit computation of the same math. */
static double atol_of(uint32_t dt)
{
    return dt == VKMHA_DTYPE_F32 ? 2e-5 : dt == VKMHA_DTYPE_F16 ? 4e-3 : 3e-2;
}

/* out = forward(query, key, value) on host fp32 arrays converted to the run's
 * dtype (rows x d_model results widened back to fp32). */
static vkmha_status forward(const run *r, vkmha_mha *m, vkmha_mha_io io, size_t n_q,
                            size_t n_kv, uint32_t kd, float *out)
{
    const uint32_t dt = r->dtype;
    void *q = t_to_dt(dt, io.query, n_q * D_MODEL);
    void *k = io.key ? t_to_dt(dt, io.key, n_kv * kd) : NULL;
    void *v = io.value ? t_to_dt(dt, io.value, n_kv * kd) : NULL;
    void *o = malloc(n_q * D_MODEL * 4);
    io.query = q, io.key = k, io.value = v, io.out = o, io.dtype = dt;
    io.attention_path = r->path;
    io.kv_splits = r->kv_splits;
    vkmha_status st = vkmha_mha_forward(m, &io);
    if (!st)
        vkmha__to_f32(dt, o, n_q * D_MODEL, out);
    free(q), free(k), free(v), free(o);
    return st;
}

static vkmha_mha *make_layer(const run *r, const layer *l)
{
    vkmha_mha_desc d = l->d;
    d.storage_dtype = r->dtype;
    vkmha_mha *m = NULL;
    if (vkmha_mha_create(r->ctx, &d, &m) != VKMHA_SUCCESS)
        t_diag("vkmha_mha_create: %s", vkmha_context_last_error(r->ctx));
    return m;
}

/* A case's name (r's context, path and dtypes, then `what`), its layer and
 * a cache of `batch` entries of `capacity` positions in r's cache dtype. */
static bool cached_layer(const run *r, t_rng *rng, const char *what, uint32_t batch,
                         uint32_t capacity, char name[160], layer *l, vkmha_mha **m,
                         vkmha_kv_cache **c)
{
    snprintf(name, 160, "%s, path %d splits %u, dtype %u, cache dtype %u: %s", r->ctx_name,
             r->path, r->kv_splits, r->dtype, r->cache_dtype, what);
    layer_make(l, rng, false);
    *m = make_layer(r, l);
    *c = NULL;
    const vkmha_kv_cache_desc cd = {.batch = batch, .capacity = capacity,
                                    .dtype = r->cache_dtype};
    return *m && !vkmha_kv_cache_create(*m, &cd, c);
}

/* Decoder self-attention: B sequences of T tokens, key padding that keeps
 * position 0 (so no row is fully masked), prefilled P tokens at once then
 * token by token (chunk 0), or in chunks of `chunk` tokens, against one
 * causal forward over all T. */
static void self_case(const run *r, t_rng *rng, uint32_t B, uint32_t T, uint32_t P,
                      uint32_t chunk)
{
    char name[256];
    snprintf(name, sizeof name, "%s, %s, %s, dtype %u, cache dtype %u: %s B %u T %u", r->ctx_name,
             r->path == VKMHA_ATTENTION_PATH_UNFUSED ? "unfused"
             : r->kv_splits                          ? "fused, 3 key splits"
                                                     : "default path",
             "self-attention", r->dtype, r->cache_dtype,
             chunk ? "chunked prefill" : "prefill then steps", B, T);
    layer l;
    layer_make(&l, rng, false);
    float *x = t_random(rng, (size_t)B * T * D_MODEL, -1, 1);
    uint8_t *kp = t_random_mask(rng, (size_t)B * T, 0.25);
    for (uint32_t b = 0; b < B; b++)
        kp[b * T] = 1;
    float *full = t_alloc((size_t)B * T * D_MODEL), *got = t_alloc((size_t)B * T * D_MODEL);
    float *step = t_alloc((size_t)B * T * D_MODEL), *xs = t_alloc((size_t)B * T * D_MODEL);
    uint8_t *kps = malloc((size_t)B * T);
    vkmha_mha *m = make_layer(r, &l);
    vkmha_kv_cache *c = NULL;
    bool ok = m != NULL;
    vkmha_mask mask = {.kinds = VKMHA_MASK_CAUSAL | VKMHA_MASK_KEY_PADDING, .key_padding = kp};
    vkmha_mha_io io = {.batch = B, .len_q = T, .query = x, .key = x, .value = x, .mask = &mask};
    if (ok && forward(r, m, io, (size_t)B * T, (size_t)B * T, D_MODEL, full)) {
        t_diag("%s: full forward: %s", name, vkmha_context_last_error(r->ctx));
        ok = false;
    }
    const vkmha_kv_cache_desc cd = {.batch = B, .capacity = T + 3, .dtype = r->cache_dtype};
    if (ok && vkmha_kv_cache_create(m, &cd, &c)) {
        t_diag("%s: vkmha_kv_cache_create: %s", name, vkmha_context_last_error(r->ctx));
        ok = false;
    }
    for (uint32_t t0 = 0, n; ok && t0 < T; t0 += n) {
        n = chunk ? chunk : t0 == 0 ? P : 1;
        n = n < T - t0 ? n : T - t0;
        /* This call's tokens, and the key padding of every position so far. */
        for (uint32_t b = 0; b < B; b++) {
            memcpy(xs + (size_t)b * n * D_MODEL, x + ((size_t)b * T + t0) * D_MODEL,
                   (size_t)n * D_MODEL * 4);
            memcpy(kps + (size_t)b * (t0 + n), kp + (size_t)b * T, t0 + n);
        }
        vkmha_mask ms = {.kinds = mask.kinds, .key_padding = kps};
        vkmha_mha_io s = {.batch = B, .len_q = n, .query = xs, .key = xs, .value = xs,
                          .mask = &ms, .kv_cache = c};
        if (forward(r, m, s, (size_t)B * n, (size_t)B * n, D_MODEL, step)) {
            t_diag("%s: step at %u: %s", name, t0, vkmha_context_last_error(r->ctx));
            ok = false;
            break;
        }
        for (uint32_t b = 0; b < B; b++)
            memcpy(got + ((size_t)b * T + t0) * D_MODEL, step + (size_t)b * n * D_MODEL,
                   (size_t)n * D_MODEL * 4);
    }
    uint32_t len[8] = {0};
    if (ok && (vkmha_kv_cache_get_lengths(c, 0, B, len) || len[B - 1] != T)) {
        t_diag("%s: the cache's lengths: %u, expected %u", name, len[B - 1], T);
        ok = false;
    }
    const double tol = atol_of(r->dtype > r->cache_dtype ? r->dtype : r->cache_dtype);
    ok = ok && t_close(name, "out", got, full, (size_t)B * T * D_MODEL,
                       r->cache_dtype == r->dtype ? atol_of(r->dtype) : 4 * tol, 1e-3);
    t_report(ok, "%s equals one causal forward", name);
    vkmha_kv_cache_destroy(c);
    vkmha_mha_destroy(m);
    free(x), free(kp), free(full), free(got), free(step), free(xs), free(kps), free(l.mem);
}

/* Entries at different positions: each prompt prefilled alone (batch 1,
 * its own entry), then N steps of all entries in one call, against each
 * sequence's own causal forward. */
static void ragged_case(const run *r, t_rng *rng)
{
    enum { B = 3, N = 4 };
    const uint32_t P[B] = {4, 7, 1};
    char name[160];
    layer l;
    vkmha_mha *m;
    vkmha_kv_cache *c;
    bool ok = cached_layer(r, rng, "ragged decode", B + 1, 16, name, &l, &m, &c);
    float *x[B], *full[B];
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    for (uint32_t b = 0; b < B; b++) {
        const uint32_t T = P[b] + N;
        x[b] = t_random(rng, (size_t)T * D_MODEL, -1, 1);
        full[b] = t_alloc((size_t)T * D_MODEL);
        vkmha_mha_io io = {.len_q = T, .query = x[b], .key = x[b], .value = x[b],
                           .mask = &causal};
        ok = ok && !forward(r, m, io, T, T, D_MODEL, full[b]);
        /* Entry b + 1: entry 0 stays empty, so kv_entry is tested too. */
        vkmha_mha_io p = {.len_q = P[b], .query = x[b], .key = x[b], .value = x[b],
                          .mask = &causal, .kv_cache = c, .kv_entry = b + 1};
        float *o = t_alloc((size_t)P[b] * D_MODEL);
        ok = ok && !forward(r, m, p, P[b], P[b], D_MODEL, o);
        ok = ok && t_close(name, "prefill", o, full[b], (size_t)P[b] * D_MODEL,
                           4 * atol_of(r->cache_dtype), 1e-3);
        free(o);
    }
    float xs[B * D_MODEL], o[B * D_MODEL];
    for (uint32_t s = 0; ok && s < N; s++) {
        for (uint32_t b = 0; b < B; b++)
            memcpy(xs + b * D_MODEL, x[b] + (size_t)(P[b] + s) * D_MODEL, D_MODEL * 4);
        vkmha_mha_io io = {.batch = B, .len_q = 1, .query = xs, .key = xs, .value = xs,
                           .mask = &causal, .kv_cache = c, .kv_entry = 1};
        if (forward(r, m, io, B, B, D_MODEL, o)) {
            t_diag("%s: step %u: %s", name, s, vkmha_context_last_error(r->ctx));
            ok = false;
        }
        for (uint32_t b = 0; ok && b < B; b++)
            ok = t_close(name, "step", o + b * D_MODEL, full[b] + (size_t)(P[b] + s) * D_MODEL,
                         D_MODEL, 4 * atol_of(r->cache_dtype), 1e-3);
    }
    t_report(ok, "%s: entries at different positions decode in one call", name);
    for (uint32_t b = 0; b < B; b++)
        free(x[b]), free(full[b]);
    vkmha_kv_cache_destroy(c);
    vkmha_mha_destroy(m);
    free(l.mem);
}

/* Mixed batches (io.entry_tokens): four sequences stepped through cache
 * entries 1 .. 4 (entry 0 stays empty), each step one call whose entries
 * bring different counts: prompts of 4, 2, 1 and 6 tokens, then decodes
 * beside a chunk of 3, then a decode each (one run of equal counts); each
 * entry's packed rows against one causal forward over its whole sequence.
 * Every other step runs the same entries one call each through a second
 * cache instead, which must give what the mixed call gives. */
static void mixed_case(const run *r, t_rng *rng)
{
    enum { B = 4, STEPS = 3 };
    static const uint32_t counts[STEPS][B] = {{4, 2, 1, 6}, {1, 1, 3, 1}, {1, 1, 1, 1}};
    char name[160];
    layer l;
    vkmha_mha *m;
    vkmha_kv_cache *c;
    bool ok = cached_layer(r, rng, "mixed batch", B + 1, 12, name, &l, &m, &c);
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    uint32_t T[B] = {0}, t0[B] = {0}, total = 0;
    for (uint32_t s = 0; s < STEPS; s++)
        for (uint32_t b = 0; b < B; b++)
            T[b] += counts[s][b];
    float *x[B], *full[B];
    for (uint32_t b = 0; b < B; b++) {
        x[b] = t_random(rng, (size_t)T[b] * D_MODEL, -1, 1);
        full[b] = t_alloc((size_t)T[b] * D_MODEL);
        vkmha_mha_io io = {.len_q = T[b], .query = x[b], .key = x[b], .value = x[b],
                           .mask = &causal};
        ok = ok && !forward(r, m, io, T[b], T[b], D_MODEL, full[b]);
        total += T[b];
    }
    float *xs = t_alloc((size_t)total * D_MODEL), *o = t_alloc((size_t)total * D_MODEL);
    for (uint32_t s = 0; ok && s < STEPS; s++) {
        uint32_t n = 0;
        for (uint32_t b = 0; b < B; b++) {
            memcpy(xs + (size_t)n * D_MODEL, x[b] + (size_t)t0[b] * D_MODEL,
                   (size_t)counts[s][b] * D_MODEL * 4);
            n += counts[s][b];
        }
        vkmha_mha_io io = {.batch = B, .len_q = n, .query = xs, .key = xs, .value = xs,
                           .mask = &causal, .kv_cache = c, .kv_entry = 1,
                           .entry_tokens = counts[s]};
        if (forward(r, m, io, n, n, D_MODEL, o)) {
            t_diag("%s: step %u: %s", name, s, vkmha_context_last_error(r->ctx));
            ok = false;
        }
        for (uint32_t b = 0, row = 0; ok && b < B; row += counts[s][b++]) {
            char what[64];
            snprintf(what, sizeof what, "step %u entry %u", s, b);
            ok = t_close(name, what, o + (size_t)row * D_MODEL,
                         full[b] + (size_t)t0[b] * D_MODEL, (size_t)counts[s][b] * D_MODEL,
                         4 * atol_of(r->cache_dtype), 1e-3);
        }
        uint32_t len[B + 1];
        ok = ok && !vkmha_kv_cache_get_lengths(c, 0, B + 1, len) && len[0] == 0;
        for (uint32_t b = 0; ok && b < B; b++) {
            t0[b] += counts[s][b];
            ok = len[b + 1] == t0[b];
        }
    }
    t_report(ok, "%s: entries with their own counts of new tokens in one call", name);
    for (uint32_t b = 0; b < B; b++)
        free(x[b]), free(full[b]);
    free(xs), free(o);
    vkmha_kv_cache_destroy(c);
    vkmha_mha_destroy(m);
    free(l.mem);
}

/* Cross-attention: the encoder's output (S positions, kdim features, key
 * padding) appended on the first step, reused by the next ones (key and value
 * NULL), against forwards without a cache. */
static void cross_case(const run *r, t_rng *rng)
{
    enum { B = 2, S = 9, STEPS = 3 };
    char name[160];
    snprintf(name, sizeof name, "%s, path %d splits %u, dtype %u: cross-attention cache",
             r->ctx_name, r->path, r->kv_splits, r->dtype);
    layer l;
    layer_make(&l, rng, true);
    vkmha_mha *m = make_layer(r, &l);
    vkmha_kv_cache *c = NULL;
    const vkmha_kv_cache_desc cd = {.batch = B, .capacity = S, .dtype = r->dtype};
    bool ok = m && !vkmha_kv_cache_create(m, &cd, &c);
    float *enc = t_random(rng, (size_t)B * S * KDIM, -1, 1);
    uint8_t *kp = t_random_mask(rng, (size_t)B * S, 0.3);
    kp[0] = kp[S] = 1;
    const vkmha_mask mask = {.kinds = VKMHA_MASK_KEY_PADDING, .key_padding = kp};
    for (uint32_t s = 0; ok && s < STEPS; s++) {
        float *q = t_random(rng, (size_t)B * D_MODEL, -1, 1);
        float want[B * D_MODEL], got[B * D_MODEL];
        vkmha_mha_io io = {.batch = B, .len_q = 1, .len_k = S, .query = q, .key = enc,
                           .value = enc, .mask = &mask};
        ok = !forward(r, m, io, B, (size_t)B * S, KDIM, want);
        io.kv_cache = c;
        if (s > 0)
            io.key = io.value = NULL;
        if (ok && forward(r, m, io, B, (size_t)B * S, KDIM, got)) {
            t_diag("%s: step %u: %s", name, s, vkmha_context_last_error(r->ctx));
            ok = false;
        }
        ok = ok && t_close(name, "out", got, want, B * D_MODEL, atol_of(r->dtype), 1e-3);
        free(q);
    }
    uint32_t len[B];
    ok = ok && !vkmha_kv_cache_get_lengths(c, 0, B, len) && len[0] == S && len[1] == S;
    t_report(ok, "%s: projected once, reused", name);
    vkmha_kv_cache_destroy(c);
    vkmha_mha_destroy(m);
    free(enc), free(kp), free(l.mem);
}

/* Every view of a cache tensor as fp32 (keys: d_k, values: d_v). */
static float *cache_read(vkmha_kv_cache *c, bool values, size_t *n)
{
    vkmha_tensor *t[2];
    vkmha_kv_cache_get_tensors(c, &t[0], &t[1]);
    vkmha_tensor_desc td;
    vkmha_tensor_get_desc(t[values], &td);
    *n = (size_t)td.dims[0] * td.dims[1] * td.dims[2] * td.dims[3];
    const size_t es = td.dtype == VKMHA_DTYPE_F32 ? 4 : 2;
    void *raw = malloc(*n * es);
    float *f = t_alloc(*n);
    if (vkmha_tensor_download(t[values], 0, raw, *n * es) == VKMHA_SUCCESS)
        vkmha__to_f32(td.dtype, raw, *n, f);
    free(raw);
    return f;
}

/* The cache operations: truncate (zeros after the length, the same tokens
 * again give the same keys), reorder (entries follow), reset, the bytes. */
static void ops_case(vkmha_context *ctx, const char *ctx_name, t_rng *rng)
{
    enum { B = 3, T = 5, CAP = 8 };
    char name[128];
    snprintf(name, sizeof name, "%s: cache operations", ctx_name);
    layer l;
    layer_make(&l, rng, false);
    vkmha_mha *m = NULL;
    vkmha_kv_cache *c = NULL;
    const vkmha_kv_cache_desc cd = {.batch = B, .capacity = CAP, .dtype = VKMHA_DTYPE_F16};
    bool ok = !vkmha_mha_create(ctx, &l.d, &m) && !vkmha_kv_cache_create(m, &cd, &c);
    ok = ok && vkmha_kv_cache_bytes(c) == (uint64_t)B * KV_HEADS * CAP * (D_K + D_V) * 2 + 4 * B;
    float *x = t_random(rng, (size_t)B * T * D_MODEL, -1, 1), *o = t_alloc((size_t)B * T * D_MODEL);
    vkmha_mha_io io = {.batch = B, .len_q = T, .query = x, .key = x, .value = x, .out = o,
                       .kv_cache = c};
    ok = ok && !vkmha_mha_forward(m, &io);
    size_t n;
    float *k0 = cache_read(c, false, &n), *v0 = cache_read(c, true, &(size_t){0});
    /* Truncate entry 1 to 2, then append its tokens 2.. again: same cache. */
    ok = ok && !vkmha_kv_cache_truncate(c, 1, 2);
    uint32_t len[B];
    ok = ok && !vkmha_kv_cache_get_lengths(c, 0, B, len) && len[0] == T && len[1] == 2 &&
         len[2] == T;
    float *k1 = cache_read(c, false, &n);
    const size_t run = (size_t)CAP * D_K; /* one (entry, head) */
    for (uint32_t h = 0; ok && h < KV_HEADS; h++)
        for (size_t i = 2 * D_K; ok && i < run; i++)
            ok = k1[(1 * KV_HEADS + h) * run + i] == 0.0f;
    if (!ok)
        t_diag("%s: positions past a truncated length are not zeros", name);
    io.batch = 1, io.len_q = T - 2, io.kv_entry = 1;
    io.query = io.key = io.value = x + ((size_t)T + 2) * D_MODEL;
    ok = ok && !vkmha_mha_forward(m, &io);
    float *k2 = cache_read(c, false, &n);
    ok = ok && t_close(name, "keys after truncate + append", k2, k0, n, 0, 0);
    /* Reorder: 2, 2, 0 (a copy and a move). */
    const uint32_t src[B] = {2, 2, 0};
    ok = ok && !vkmha_kv_cache_truncate(c, 0, 3) && !vkmha_kv_cache_reorder(c, src);
    ok = ok && !vkmha_kv_cache_get_lengths(c, 0, B, len) && len[0] == T && len[1] == T &&
         len[2] == 3;
    float *v3 = cache_read(c, true, &n);
    const size_t ve = (size_t)KV_HEADS * CAP * D_V; /* values per entry */
    ok = ok && t_close(name, "values of entry 0 after reorder", v3, v0 + 2 * ve, ve, 0, 0) &&
         t_close(name, "values of entry 1 after reorder", v3 + ve, v0 + 2 * ve, ve, 0, 0);
    for (uint32_t h = 0; ok && h < KV_HEADS; h++)
        ok = t_close(name, "values of entry 2 after reorder", v3 + 2 * ve + h * CAP * D_V,
                     v0 + h * CAP * D_V, 3 * D_V, 0, 0);
    ok = ok && !vkmha_kv_cache_reset(c) && !vkmha_kv_cache_get_lengths(c, 0, B, len) &&
         len[0] == 0 && len[1] == 0 && len[2] == 0;
    float *k4 = cache_read(c, false, &n);
    for (size_t i = 0; ok && i < n; i++)
        ok = k4[i] == 0.0f;
    /* set_length: keys written into the tensor become entry 1's first 3
     * positions; a forward without an append attends over them. */
    vkmha_tensor *tk;
    vkmha_kv_cache_get_tensors(c, &tk, NULL);
    uint16_t ones[3 * D_K];
    for (size_t i = 0; i < 3 * D_K; i++)
        ones[i] = 0x3c00; /* 1.0 in fp16 */
    ok = ok && !vkmha_tensor_upload(tk, (size_t)KV_HEADS * CAP * D_K * 2, ones, sizeof ones) &&
         !vkmha_kv_cache_set_length(c, 1, 3) && !vkmha_kv_cache_get_lengths(c, 1, 1, len) &&
         len[0] == 3 && vkmha_kv_cache_set_length(c, 1, CAP + 1) == VKMHA_ERROR_INVALID_ARGUMENT;
    io.kv_entry = 1, io.len_q = 1, io.key = io.value = NULL;
    ok = ok && !vkmha_mha_forward(m, &io);
    float *k5 = cache_read(c, false, &n);
    for (size_t i = 0; ok && i < n; i++)
        ok = k5[i] == (i >= KV_HEADS * run && i < KV_HEADS * run + 3 * D_K ? 1.0f : 0.0f);
    free(k5);
    t_report(ok, "%s", name);
    free(k0), free(v0), free(k1), free(k2), free(v3), free(k4), free(x), free(o);
    vkmha_kv_cache_destroy(c);
    vkmha_mha_destroy(m);
    free(l.mem);
}

/* Every bad argument: a clear status naming it, nothing changed, and the
 * context still works. */
static void errors_case(vkmha_context *ctx, const char *ctx_name, t_rng *rng)
{
    char name[128];
    snprintf(name, sizeof name, "%s: bad arguments", ctx_name);
    layer l, l2;
    layer_make(&l, rng, false);
    layer_make(&l2, rng, false);
    vkmha_mha *m = NULL, *m2 = NULL;
    vkmha_kv_cache *c = NULL, *c2 = NULL;
    bool ok = !vkmha_mha_create(ctx, &l.d, &m) && !vkmha_mha_create(ctx, &l2.d, &m2);
    const vkmha_kv_cache_desc cd = {.batch = 2, .capacity = 6};
    ok = ok && !vkmha_kv_cache_create(m, &cd, &c) && !vkmha_kv_cache_create(m2, &cd, &c2);
    struct {
        vkmha_kv_cache_desc d;
        const char *word;
    } bad_desc[] = {{{.capacity = 0}, "capacity"},
                    {{.capacity = 4, .dtype = 7}, "dtype"},
                    {{.capacity = 4, .keys = (vkmha_tensor *)&l}, "values"},
                    /* 2^32 - 1 entries of 2^30 positions, 2 heads of 8: the
                     * keys' elements overflow 64 bits. */
                    {{.batch = UINT32_MAX, .capacity = 1u << 30}, "keys"}};
    for (size_t i = 0; ok && i < sizeof bad_desc / sizeof bad_desc[0]; i++) {
        vkmha_kv_cache *x = (vkmha_kv_cache *)&l;
        vkmha_status st = vkmha_kv_cache_create(m, &bad_desc[i].d, &x);
        ok = st == VKMHA_ERROR_INVALID_ARGUMENT && x == NULL &&
             t_has_word(vkmha_context_last_error(ctx), bad_desc[i].word);
        if (!ok)
            t_diag("%s: desc %zu: %s (%s)", name, i, vkmha_status_string(st),
                   vkmha_context_last_error(ctx));
    }
    float *x = t_random(rng, 8 * D_MODEL, -1, 1), *o = t_alloc(8 * D_MODEL);
    static const uint32_t tok_11[2] = {1, 1}, tok_20[2] = {2, 0}, tok_21[2] = {2, 1};
    static const uint8_t keep[2 * 6] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const vkmha_mask padded = {.kinds = VKMHA_MASK_KEY_PADDING, .key_padding = keep};
    /* Fill entry 0 to 5 of 6. */
    vkmha_mha_io io = {.len_q = 5, .query = x, .key = x, .value = x, .out = o, .kv_cache = c};
    ok = ok && !vkmha_mha_forward(m, &io);
    struct {
        vkmha_mha_io io;
        const char *word;
    } bad_io[] = {
        {{.len_q = 2, .query = x, .key = x, .value = x, .out = o, .kv_cache = c}, "capacity"},
        {{.batch = 2, .len_q = 1, .query = x, .key = x, .value = x, .out = o, .kv_cache = c,
          .kv_entry = 1},
         "kv_entry"},
        {{.len_q = 1, .query = x, .key = x, .value = x, .out = o, .kv_cache = c2},
         "another"},
        {{.len_q = 1, .query = x, .key = x, .out = o, .kv_cache = c}, "value"},
        {{.len_q = 1, .query = x, .out = o, .kv_cache = c, .kv_entry = 1}, "empty"},
        {{.len_q = 1, .query = x, .key = x, .value = x, .out = o, .kv_entry = 1}, "kv_entry"},
        /* Mixed batches: counts that do not add up, a 0, one past its
         * entry's capacity, no cache, new keys that are not the tokens, and
         * what has no packed shape. */
        {{.batch = 2, .len_q = 3, .query = x, .key = x, .value = x, .out = o, .kv_cache = c,
          .entry_tokens = tok_11}, "entry_tokens"},
        {{.batch = 2, .len_q = 2, .query = x, .key = x, .value = x, .out = o, .kv_cache = c,
          .entry_tokens = tok_20}, "entry_tokens"},
        {{.batch = 2, .len_q = 3, .query = x, .key = x, .value = x, .out = o, .kv_cache = c,
          .entry_tokens = tok_21}, "capacity"},
        {{.batch = 2, .len_q = 2, .query = x, .key = x, .value = x, .out = o,
          .entry_tokens = tok_11}, "entry_tokens"},
        {{.batch = 2, .len_q = 2, .len_k = 1, .query = x, .key = x, .value = x, .out = o,
          .kv_cache = c, .entry_tokens = tok_11}, "len_k"},
        {{.batch = 2, .len_q = 2, .query = x, .key = x, .value = x, .out = o, .kv_cache = c,
          .mask = &padded, .entry_tokens = tok_11}, "key_padding"},
        {{.batch = 2, .len_q = 2, .query = x, .key = x, .value = x, .out = o, .kv_cache = c,
          .attn_weights = o + 4 * D_MODEL, .entry_tokens = tok_11}, "attn_weights"},
    };
    for (size_t i = 0; ok && i < sizeof bad_io / sizeof bad_io[0]; i++) {
        vkmha_status st = vkmha_mha_forward(m, &bad_io[i].io);
        ok = st == VKMHA_ERROR_INVALID_ARGUMENT &&
             t_has_word(vkmha_context_last_error(ctx), bad_io[i].word);
        if (!ok)
            t_diag("%s: io %zu: %s (%s)", name, i, vkmha_status_string(st),
                   vkmha_context_last_error(ctx));
    }
    uint32_t len[2];
    ok = ok && !vkmha_kv_cache_get_lengths(c, 0, 2, len) && len[0] == 5 && len[1] == 0;
    if (ok && strstr(vkmha_context_last_error(ctx), "entry 0 holds 5 of its 6") == NULL) {
        /* The capacity message names the entry and the lengths. */
        vkmha_mha_forward(m, &bad_io[0].io);
        ok = strstr(vkmha_context_last_error(ctx), "entry 0 holds 5 of its 6 positions") &&
             strstr(vkmha_context_last_error(ctx), "appending 2");
        if (!ok)
            t_diag("%s: capacity message: %s", name, vkmha_context_last_error(ctx));
    }
    const uint32_t bad_src[2] = {0, 2};
    ok = ok && vkmha_kv_cache_truncate(c, 0, 6) == VKMHA_ERROR_INVALID_ARGUMENT &&
         vkmha_kv_cache_truncate(c, 2, 0) == VKMHA_ERROR_INVALID_ARGUMENT &&
         vkmha_kv_cache_reorder(c, bad_src) == VKMHA_ERROR_INVALID_ARGUMENT &&
         t_has_word(vkmha_context_last_error(ctx), "src") &&
         vkmha_kv_cache_reorder(c, NULL) == VKMHA_ERROR_INVALID_ARGUMENT &&
         vkmha_kv_cache_get_lengths(c, 1, 2, len) == VKMHA_ERROR_INVALID_ARGUMENT;
    ok = ok && !vkmha_kv_cache_get_lengths(c, 0, 2, len) && len[0] == 5 && len[1] == 0;
    /* causal_offset without its kind (the ops and the layer). */
    const vkmha_mask bad_mask = {.causal_offset = 1};
    vkmha_mha_io mio = {.len_q = 2, .query = x, .key = x, .value = x, .out = o,
                        .mask = &bad_mask};
    ok = ok && vkmha_mha_forward(m, &mio) == VKMHA_ERROR_INVALID_ARGUMENT &&
         t_has_word(vkmha_context_last_error(ctx), "causal_offset");
    ok = ok && t_context_works(ctx, name);
    t_report(ok, "%s", name);
    free(x), free(o);
    vkmha_kv_cache_destroy(c);
    vkmha_kv_cache_destroy(c2);
    vkmha_mha_destroy(m);
    vkmha_mha_destroy(m2);
    free(l.mem), free(l2.mem);
}

/* The tensor, submit and record forms of a cached step equal the host form. */
static void forms_case(vkmha_context *ctx, t_rng *rng)
{
    const char *name = "Vulkan: cached steps on tensors, submitted and recorded";
    enum { T = 6 };
    layer l;
    layer_make(&l, rng, false);
    vkmha_mha *m = NULL;
    vkmha_kv_cache *ch = NULL, *ct = NULL;
    const vkmha_kv_cache_desc cd = {.capacity = T};
    bool ok = !vkmha_mha_create(ctx, &l.d, &m) && !vkmha_kv_cache_create(m, &cd, &ch) &&
              !vkmha_kv_cache_create(m, &cd, &ct);
    float *x = t_random(rng, (size_t)T * D_MODEL, -1, 1);
    const vkmha_tensor_desc td = {VKMHA_DTYPE_F32, 2, {1, D_MODEL}};
    vkmha_tensor *tx = NULL, *to = NULL;
    ok = ok && !vkmha_tensor_create(ctx, &td, &tx) && !vkmha_tensor_create(ctx, &td, &to);
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    const vkmha_tensor_mask tcausal = {.kinds = VKMHA_MASK_CAUSAL};
    for (uint32_t t = 0; ok && t < T; t++) {
        float want[D_MODEL], got[D_MODEL];
        const float *xt = x + (size_t)t * D_MODEL;
        vkmha_mha_io io = {.len_q = 1, .query = xt, .key = xt, .value = xt, .out = want,
                           .mask = &causal, .kv_cache = ch};
        ok = !vkmha_mha_forward(m, &io) && !vkmha_tensor_upload(tx, 0, xt, D_MODEL * 4);
        vkmha_mha_tensors ti = {.len_q = 1, .query = tx, .key = tx, .value = tx, .out = to,
                                .mask = &tcausal, .kv_cache = ct};
        vkmha_status st = VKMHA_SUCCESS;
        if (t % 3 == 0) {
            st = vkmha_mha_forward_tensor(m, &ti);
        } else if (t % 3 == 1) {
            vkmha_submission *s = NULL;
            st = vkmha_mha_submit(m, &ti, &s);
            if (!st)
                st = vkmha_submission_wait(s, UINT64_MAX);
            vkmha_submission_destroy(s);
        } else {
            VkCommandBuffer cmd = VK_NULL_HANDLE;
            /* A null command buffer is refused (examples/embed.c records a
             * cached step for real, in the engine's command buffer). */
            st = vkmha_mha_record(m, cmd, &ti);
            if (st != VKMHA_ERROR_INVALID_ARGUMENT) {
                t_diag("%s: record into a null command buffer: %s", name,
                       vkmha_status_string(st));
                ok = false;
            }
            /* The cache is unchanged by the refused call: run the step. */
            st = vkmha_mha_forward_tensor(m, &ti);
        }
        if (st) {
            t_diag("%s: step %u: %s", name, t, vkmha_context_last_error(ctx));
            ok = false;
        }
        ok = ok && !vkmha_tensor_download(to, 0, got, D_MODEL * 4) &&
             t_close(name, "out", got, want, D_MODEL, 0, 0);
    }
    t_report(ok, "%s", name);
    vkmha_tensor_destroy(tx), vkmha_tensor_destroy(to);
    vkmha_kv_cache_destroy(ch), vkmha_kv_cache_destroy(ct);
    vkmha_mha_destroy(m);
    free(x), free(l.mem);
}

/* A mixed batch on tensors (forward_tensor, then submitted) equals the host
 * form's, step after step through three caches alike. */
static void mixed_forms_case(vkmha_context *ctx, t_rng *rng)
{
    const char *name = "Vulkan: mixed batches on tensors and submitted";
    enum { B = 3, N = 7 };
    static const uint32_t steps[2][B] = {{3, 1, 3}, {1, 2, 1}};
    layer l;
    layer_make(&l, rng, false);
    vkmha_mha *m = NULL;
    vkmha_kv_cache *c[3] = {NULL, NULL, NULL};
    const vkmha_kv_cache_desc cd = {.batch = B, .capacity = 8};
    bool ok = !vkmha_mha_create(ctx, &l.d, &m);
    for (int i = 0; i < 3; i++)
        ok = ok && !vkmha_kv_cache_create(m, &cd, &c[i]);
    float *x = t_random(rng, (size_t)N * D_MODEL, -1, 1), *want = t_alloc(N * D_MODEL),
          *got = t_alloc(N * D_MODEL);
    const vkmha_tensor_desc td = {VKMHA_DTYPE_F32, 2, {N, D_MODEL}};
    vkmha_tensor *tx = NULL, *to = NULL;
    ok = ok && !vkmha_tensor_create(ctx, &td, &tx) && !vkmha_tensor_create(ctx, &td, &to) &&
         !vkmha_tensor_upload(tx, 0, x, (size_t)N * D_MODEL * 4);
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    const vkmha_tensor_mask tcausal = {.kinds = VKMHA_MASK_CAUSAL};
    for (int s = 0; ok && s < 2; s++) {
        const uint32_t n = steps[s][0] + steps[s][1] + steps[s][2];
        vkmha_mha_io io = {.batch = B, .len_q = n, .query = x, .key = x, .value = x,
                           .out = want, .mask = &causal, .kv_cache = c[0],
                           .entry_tokens = steps[s]};
        vkmha_mha_tensors ti = {.batch = B, .len_q = n, .query = tx, .key = tx, .value = tx,
                                .out = to, .mask = &tcausal, .kv_cache = c[1],
                                .entry_tokens = steps[s]};
        ok = !vkmha_mha_forward(m, &io) && !vkmha_mha_forward_tensor(m, &ti) &&
             !vkmha_tensor_download(to, 0, got, (size_t)n * D_MODEL * 4) &&
             t_close(name, "tensors", got, want, (size_t)n * D_MODEL, 0, 0);
        vkmha_submission *sub = NULL;
        ti.kv_cache = c[2];
        ok = ok && !vkmha_mha_submit(m, &ti, &sub) && !vkmha_submission_wait(sub, UINT64_MAX) &&
             !vkmha_tensor_download(to, 0, got, (size_t)n * D_MODEL * 4) &&
             t_close(name, "submitted", got, want, (size_t)n * D_MODEL, 0, 0);
        vkmha_submission_destroy(sub);
        if (!ok)
            t_diag("%s: step %d: %s", name, s, vkmha_context_last_error(ctx));
    }
    t_report(ok, "%s", name);
    vkmha_tensor_destroy(tx), vkmha_tensor_destroy(to);
    for (int i = 0; i < 3; i++)
        vkmha_kv_cache_destroy(c[i]);
    vkmha_mha_destroy(m);
    free(x), free(want), free(got), free(l.mem);
}

/* y[n] = w[n][:] . x + b[n] (torch.nn.Linear) over `in` inputs, in double. */
static void linear(double *y, const float *w, const float *bias, const float *xf,
                   const double *xd, uint32_t n, uint32_t in)
{
    for (uint32_t o = 0; o < n; o++) {
        double a = bias[o];
        for (uint32_t c = 0; c < in; c++)
            a += (double)w[(size_t)o * in + c] * (xf ? (double)xf[c] : xd[c]);
        y[o] = a;
    }
}

/* The layer's forward over a KV cache in double, written from vkmha.h's
 * words alone (not the reference backend): entry b attends over its L[b]
 * key inputs kin[b] (its cached positions, then what the call appends),
 * query i seeing keys j <= L[b] - len_q + i + offset; a row whose every key
 * is masked takes uniform weights over the entry's keys; weights past L[b]
 * are 0. No post-norm. out [B][lq][D_MODEL], weights [B][HEADS][lq][len_kv]. */
static void oracle_cached(const layer *l, uint32_t B, const float *const *kin,
                          const uint32_t *L, uint32_t len_kv, const float *q_in, uint32_t lq,
                          uint32_t offset, float *out, float *weights)
{
    const vkmha_mha_desc *d = &l->d;
    for (uint32_t b = 0; b < B; b++) {
        double k[64][KV_HEADS * D_K], v[64][KV_HEADS * D_V];
        for (uint32_t j = 0; j < L[b]; j++) {
            const float *x = kin[b] + (size_t)j * D_MODEL;
            linear(k[j], d->w_k, d->b_k, x, NULL, KV_HEADS * D_K, D_MODEL);
            linear(v[j], d->w_v, d->b_v, x, NULL, KV_HEADS * D_V, D_MODEL);
        }
        for (uint32_t i = 0; i < lq; i++) {
            double q[HEADS * D_K], cat[HEADS * D_V], y[D_MODEL];
            linear(q, d->w_q, d->b_q, q_in + ((size_t)b * lq + i) * D_MODEL, NULL, HEADS * D_K,
                   D_MODEL);
            /* The last key query i sees (may be negative: none). */
            const int64_t last = (int64_t)L[b] - lq + i + offset;
            for (uint32_t h = 0; h < HEADS; h++) {
                const uint32_t g = h / (HEADS / KV_HEADS);
                double s[64], mx = -INFINITY, sum = 0;
                for (uint32_t j = 0; j < L[b]; j++) {
                    double dot = 0;
                    for (uint32_t c = 0; c < D_K; c++)
                        dot += q[h * D_K + c] * k[j][g * D_K + c];
                    s[j] = (int64_t)j > last ? -1e9 : dot / sqrt((double)D_K);
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (uint32_t j = 0; j < L[b]; j++)
                    sum += (s[j] = exp(s[j] - mx));
                float *w = weights + (((size_t)b * HEADS + h) * lq + i) * len_kv;
                for (uint32_t j = 0; j < len_kv; j++)
                    w[j] = j < L[b] ? (float)(s[j] / sum) : 0.0f;
                for (uint32_t c = 0; c < D_V; c++) {
                    double a = 0;
                    for (uint32_t j = 0; j < L[b]; j++)
                        a += s[j] / sum * v[j][g * D_V + c];
                    cat[h * D_V + c] = a;
                }
            }
            linear(y, d->w_o, d->b_o, NULL, cat, D_MODEL, HEADS * D_V);
            for (uint32_t c = 0; c < D_MODEL; c++)
                out[((size_t)b * lq + i) * D_MODEL + c] = (float)y[c];
        }
    }
}

/* vkmha_mha_forward of io (self-attention: key and value are the query or
 * NULL), or the same call on tensors (vkmha_mha_forward_tensor, the mask
 * as a tensor mask: vkmha__tensor_mask's path) when `tensors`. */
static vkmha_status forward_io(vkmha_context *ctx, vkmha_mha *m, const vkmha_mha_io *io,
                               size_t n_q, size_t n_w, bool tensors)
{
    if (!tensors)
        return vkmha_mha_forward(m, io);
    vkmha_tensor *t[3] = {NULL, NULL, NULL}; /* query, out, weights */
    const size_t n[3] = {n_q, n_q, n_w};
    vkmha_status st = VKMHA_SUCCESS;
    for (int i = 0; i < 3 && !st; i++) {
        const vkmha_tensor_desc td = {VKMHA_DTYPE_F32, 1, {(uint32_t)n[i]}};
        st = vkmha_tensor_create(ctx, &td, &t[i]);
    }
    const vkmha_tensor_mask tm = {.kinds = io->mask->kinds,
                                  .causal_offset = io->mask->causal_offset};
    const vkmha_mha_tensors ti = {.batch = io->batch, .len_q = io->len_q, .query = t[0],
                                  .key = io->key ? t[0] : NULL, .value = io->value ? t[0] : NULL,
                                  .out = t[1], .attn_weights = t[2], .mask = &tm,
                                  .kv_cache = io->kv_cache, .attention_path = io->attention_path,
                                  .kv_splits = io->kv_splits};
    if (!st)
        st = vkmha_tensor_upload(t[0], 0, io->query, n_q * 4);
    if (!st)
        st = vkmha_mha_forward_tensor(m, &ti);
    if (!st)
        st = vkmha_tensor_download(t[1], 0, io->out, n_q * 4);
    if (!st)
        st = vkmha_tensor_download(t[2], 0, io->attn_weights, n_w * 4);
    for (int i = 0; i < 3; i++)
        vkmha_tensor_destroy(t[i]);
    return st;
}

/* causal_offset with a KV cache, against oracle_cached: two entries holding
 * 3 and 6 positions, then len_q 2, 5 and 9 new queries (below, between and
 * above the cached lengths), appended or not, at offsets from 0 to far past
 * the key axis, on host arrays and on tensors; outputs and weights. Each
 * call starts from the prefilled cache (the appended positions truncated
 * away). */
static void offset_rule_case(const run *r, t_rng *rng)
{
    enum { B = 2, MAX_Q = 9 };
    const uint32_t P[B] = {3, 6}, lens_q[] = {2, 5, 9};
    const uint32_t offsets[] = {0, 1, 2, 3, 5, 8, 11, 15, 100, 65536, UINT32_MAX};
    layer l;
    layer_make(&l, rng, false);
    l.d.post_norm = false;
    l.d.norm_gamma = l.d.norm_beta = NULL;
    vkmha_mha *m = make_layer(r, &l);
    vkmha_kv_cache *c = NULL;
    const vkmha_kv_cache_desc cd = {.batch = B, .capacity = 6 + MAX_Q};
    bool ok = m && !vkmha_kv_cache_create(m, &cd, &c);
    /* Entry b's key inputs: its prefix, then the queries of a call. */
    float *kin[B], *out = t_alloc(B * MAX_Q * D_MODEL), *want = t_alloc(B * MAX_Q * D_MODEL);
    float *w = t_alloc(B * HEADS * MAX_Q * 15), *ww = t_alloc(B * HEADS * MAX_Q * 15);
    float *xq = t_random(rng, B * MAX_Q * D_MODEL, -1, 1);
    char name[200];
    for (uint32_t b = 0; b < B; b++) {
        kin[b] = t_random(rng, (6 + MAX_Q) * D_MODEL, -1, 1);
        /* Prefill entry b alone (a causal prompt), itself checked. */
        const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
        vkmha_mha_io io = {.len_q = P[b], .query = kin[b], .key = kin[b], .value = kin[b],
                           .out = out, .attn_weights = w, .mask = &causal, .kv_cache = c,
                           .kv_entry = b, .attention_path = r->path, .kv_splits = r->kv_splits};
        snprintf(name, sizeof name, "%s, path %d splits %u: prefill of entry %u", r->ctx_name,
                 r->path, r->kv_splits, b);
        oracle_cached(&l, 1, (const float *const *)&kin[b], &P[b], P[b], kin[b], P[b], 0,
                      want, ww);
        ok = ok && !vkmha_mha_forward(m, &io) &&
             t_close(name, "out", out, want, P[b] * D_MODEL, 2e-5, 1e-4) &&
             t_close(name, "weights", w, ww, HEADS * P[b] * P[b], 1e-6, 1e-5);
    }
    for (size_t qi = 0; ok && qi < sizeof lens_q / sizeof lens_q[0]; qi++)
        for (int append = 0; ok && append < 2; append++)
            for (size_t o = 0; ok && o < sizeof offsets / sizeof offsets[0]; o++) {
                const uint32_t lq = lens_q[qi];
                uint32_t L[B], len_kv = 0;
                for (uint32_t b = 0; b < B; b++) {
                    L[b] = P[b] + (append ? lq : 0);
                    len_kv = L[b] > len_kv ? L[b] : len_kv;
                    for (uint32_t i = 0; append && i < lq; i++)
                        memcpy(kin[b] + (size_t)(P[b] + i) * D_MODEL,
                               xq + ((size_t)b * lq + i) * D_MODEL, D_MODEL * 4);
                }
                const vkmha_mask mask = {.kinds = VKMHA_MASK_CAUSAL,
                                         .causal_offset = offsets[o]};
                vkmha_mha_io io = {.batch = B, .len_q = lq, .query = xq,
                                   .key = append ? xq : NULL, .value = append ? xq : NULL,
                                   .out = out, .attn_weights = w, .mask = &mask,
                                   .kv_cache = c, .attention_path = r->path,
                                   .kv_splits = r->kv_splits};
                snprintf(name, sizeof name,
                         "%s, path %d splits %u: cached 3 and 6, len_q %u, %s, causal_offset %u%s",
                         r->ctx_name, r->path, r->kv_splits, lq,
                         append ? "appended" : "nothing appended", offsets[o],
                         o % 2 ? ", tensors" : "");
                oracle_cached(&l, B, (const float *const *)kin, L, len_kv, xq, lq, offsets[o],
                              want, ww);
                /* Every other call on tensors. */
                if (forward_io(r->ctx, m, &io, B * lq * D_MODEL, B * HEADS * lq * len_kv,
                               o % 2)) {
                    t_diag("%s: %s", name, vkmha_context_last_error(r->ctx));
                    ok = false;
                }
                ok = ok && t_close(name, "out", out, want, B * lq * D_MODEL, 2e-5, 1e-4) &&
                     t_close(name, "weights", w, ww, B * HEADS * lq * len_kv, 1e-6, 1e-5);
                for (uint32_t b = 0; ok && append && b < B; b++)
                    ok = !vkmha_kv_cache_truncate(c, b, P[b]);
            }
    t_report(ok, "%s, path %d splits %u: causal_offset 0 ... 2^32 - 1 over a KV cache, len_q "
                 "below and above the cached lengths, appended or not, against the header's rule "
                 "in double",
             r->ctx_name, r->path, r->kv_splits);
    vkmha_kv_cache_destroy(c);
    vkmha_mha_destroy(m);
    for (uint32_t b = 0; b < B; b++)
        free(kin[b]);
    free(out), free(want), free(w), free(ww), free(xq), free(l.mem);
}

/* vkmha_attention and vkmha_softmax with causal_offset on every path
 * against the reference, and the reference against its own square causal
 * attention (bottom-right alignment: the last len_q rows). */
static void offset_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    enum { B = 2, H = 2, LQ = 5, LK = 11, D = 8 };
    const uint32_t offsets[] = {0, LK - LQ, 2, LK + 3, UINT32_MAX};
    float *q = t_random(rng, B * H * LK * D, -1, 1), *k = t_random(rng, B * H * LK * D, -1, 1);
    float *v = t_random(rng, B * H * LK * D, -1, 1);
    float want[B * H * LQ * D], got[B * H * LQ * D], ww[B * H * LQ * LK], gw[B * H * LQ * LK];
    bool ok = true;
    for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
        const vkmha_mask mask = {.kinds = VKMHA_MASK_CAUSAL, .causal_offset = offsets[o]};
        vkmha_attention_desc d = {.batch = B, .heads = H, .len_q = LQ, .len_k = LK, .d_k = D,
                                  .d_v = D};
        /* q: the last LQ rows of a square problem's queries, per head. */
        float *qs = t_alloc(B * H * LQ * D);
        for (uint32_t bh = 0; bh < B * H; bh++)
            memcpy(qs + bh * LQ * D, q + (bh * LK + LK - LQ) * D, LQ * D * 4);
        ok = ok && !vkmha_attention(ref, &d, qs, k, v, &mask, want, ww);
        if (offsets[o] == LK - LQ) { /* against the square problem's last rows */
            vkmha_attention_desc sq = d;
            sq.len_q = LK;
            const vkmha_mask square = {.kinds = VKMHA_MASK_CAUSAL};
            float *os = t_alloc(B * H * LK * D);
            ok = ok && !vkmha_attention(ref, &sq, q, k, v, &square, os, NULL);
            for (uint32_t bh = 0; ok && bh < B * H; bh++)
                ok = t_close("bottom-right causal", "reference out", want + bh * LQ * D,
                             os + (bh * LK + LK - LQ) * D, LQ * D, 1e-6, 1e-6);
            free(os);
        }
        for (size_t p = 0; ok && p < T_ATTENTION_RUNS; p++) {
            d.path = t_attention_runs[p].path;
            d.kv_splits = t_attention_runs[p].kv_splits;
            char name[128];
            snprintf(name, sizeof name, "causal_offset %u, %s", offsets[o],
                     t_attention_runs[p].name);
            ok = !vkmha_attention(gpu, &d, qs, k, v, &mask, got, gw) &&
                 t_close(name, "out", got, want, B * H * LQ * D, 1e-5, 1e-4) &&
                 t_close(name, "weights", gw, ww, B * H * LQ * LK, 1e-6, 1e-5);
        }
        /* The softmax on the reference's scores (its weights as logits). */
        const vkmha_softmax_desc sd = {.batch = B, .heads = H, .len_q = LQ, .len_k = LK};
        float sw[B * H * LQ * LK], sg[B * H * LQ * LK];
        ok = ok && !vkmha_softmax(ref, &sd, ww, &mask, sw) &&
             !vkmha_softmax(gpu, &sd, ww, &mask, sg) &&
             t_close("softmax causal_offset", "y", sg, sw, B * H * LQ * LK, 1e-6, 1e-5);
        free(qs);
    }
    t_report(ok, "vkmha_attention / vkmha_softmax causal_offset 0, bottom-right, 2, past len_k and 2^32 - 1, "
                 "past len_k, every path, against the reference");
    free(q), free(k), free(v);
}

int main(void)
{
    t_rng rng = {0x6b76636163686521ull};
    const t_cache_contexts cx = t_cache_contexts_create();
    vkmha_context *ref = cx.ref, *gpu = cx.gpu, *gpu_shared = cx.shared;
    const struct {
        vkmha_context *ctx;
        const char *name;
    } ctxs[] = {{ref, "reference"}, {gpu, "Vulkan"}, {gpu_shared, "Vulkan, workgroup-shared kernel"}};
    static const uint32_t dtypes[3][2] = {{VKMHA_DTYPE_F32, VKMHA_DTYPE_F32},
                                          {VKMHA_DTYPE_F16, VKMHA_DTYPE_F16},
                                          {VKMHA_DTYPE_BF16, VKMHA_DTYPE_BF16}};
    for (size_t c = 0; c < 3; c++)
        for (size_t p = 0; p < T_ATTENTION_RUNS; p++) {
            if (c == 0 && p > 0)
                continue; /* the reference ignores the path */
            for (size_t d = 0; d < 3; d++) {
                const run r = {ctxs[c].ctx, ctxs[c].name, t_attention_runs[p].path,
                               t_attention_runs[p].kv_splits, dtypes[d][0], dtypes[d][1]};
                self_case(&r, &rng, 2, 11, 4, 0);
                if (d == 0)
                    self_case(&r, &rng, 2, 11, 0, 3);
                if (d == 0 || c == 1)
                    ragged_case(&r, &rng);
                if (d == 0 || (c == 1 && p == 0))
                    mixed_case(&r, &rng);
                if (d == 0)
                    cross_case(&r, &rng);
            }
            /* fp32 activations over an fp16 cache. */
            const run mixed = {ctxs[c].ctx, ctxs[c].name, t_attention_runs[p].path,
                               t_attention_runs[p].kv_splits, VKMHA_DTYPE_F32,
                               VKMHA_DTYPE_F16};
            self_case(&mixed, &rng, 2, 9, 3, 0);
            ragged_case(&mixed, &rng);
            mixed_case(&mixed, &rng);
            const run f32 = {ctxs[c].ctx, ctxs[c].name, t_attention_runs[p].path,
                             t_attention_runs[p].kv_splits, VKMHA_DTYPE_F32, VKMHA_DTYPE_F32};
            offset_rule_case(&f32, &rng);
        }
    ops_case(ref, "reference", &rng);
    ops_case(gpu, "Vulkan", &rng);
    errors_case(ref, "reference", &rng);
    errors_case(gpu, "Vulkan", &rng);
    forms_case(gpu, &rng);
    mixed_forms_case(gpu, &rng);
    offset_case(ref, gpu, &rng);
    offset_case(ref, gpu_shared, &rng);
    t_cache_contexts_destroy(&cx);
    return t_finish();
}
