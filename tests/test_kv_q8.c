/* The 8-bit KV cache (vkmha_kv_cache_desc.quant = VKMHA_QUANT_Q8), on both
 * backends, every attention path (the fused kernels, split-K, the unfused
 * path's fp32 copies, the weights pass; on CPU devices the CPU-shaped
 * kernel's Q8 variant where the head dims are multiples of 4, flash.comp
 * where not; with the cooperative kernel forced (Mesa 26), its variant for
 * the fp16 runs), fp32 and fp16 activations, grouped query heads, head dims
 * that are not multiples of 4 (padded rows), float and 4-bit (Q4Z)
 * projection weights:
 *   - the append: each stored row (fp16 scale, int8 codes, zeros) against
 *     the reference's: scales within one fp16 step, codes within one step
 *     (the two backends' fp32 projections differ in their last bits, and
 *     the device's divisions may be within 2.5 ulp: include/vkmha.h), and
 *     most of them equal;
 *   - the reads: the same cache bytes in both backends (the Vulkan cache's
 *     uploaded into the reference's), then a step that appends nothing:
 *     outputs and weights at the fp32 / fp16 tolerances, so every path must
 *     compute with s * q exactly as the reference does;
 *   - the non-finite rows: a token of +Inf stores the NaN scale 0x7e00 and
 *     codes 0 on both backends, and the queries attending it give NaN;
 *   - the bytes (0.53x an fp16 cache's at d 64), the cache operations on
 *     the rows, and the bad arguments.
 * The rule itself is checked against an independent transcription in
 * tests/python/test_kv_q8.py. */
#include "util.h"
#include "util_dtype.h"

#include "half.h"

enum { HEADS = 4, KV_HEADS = 2, B = 2, CAP = 12 };

/* Row bytes of head dim d (include/vkmha.h). */
static uint32_t row_bytes(uint32_t d)
{
    return 4 + (d + 3) / 4 * 4;
}

/* The cache's keys (v false) or values as stored. */
static uint8_t *raw(vkmha_kv_cache *c, bool v, size_t *n)
{
    vkmha_tensor *t[2];
    vkmha_kv_cache_get_tensors(c, &t[0], &t[1]);
    *n = (size_t)vkmha_tensor_bytes(t[v]);
    uint8_t *b = malloc(*n);
    if (vkmha_tensor_download(t[v], 0, b, *n))
        memset(b, 0xee, *n);
    return b;
}

/* Rows of got against want (d elements a row): scales within one fp16
 * step, codes within one step, padding zero; counts the codes that differ. */
static bool rows_close(const char *name, const uint8_t *got, const uint8_t *want, size_t n,
                       uint32_t d, size_t *differ)
{
    const uint32_t r = row_bytes(d);
    for (size_t at = 0; at < n; at += r) {
        const uint16_t gs = (uint16_t)(got[at] | got[at + 1] << 8),
                       ws = (uint16_t)(want[at] | want[at + 1] << 8);
        if (gs != ws && (gs == 0x7e00 || ws == 0x7e00 || abs((int)gs - (int)ws) > 1)) {
            t_diag("%s: row %zu: scale 0x%04x, reference 0x%04x", name, at / r, gs, ws);
            return false;
        }
        for (uint32_t i = 2; i < r; i++) {
            const bool code = i >= 4 && i < 4 + d;
            const int g = code ? (int8_t)got[at + i] : got[at + i],
                      w = code ? (int8_t)want[at + i] : want[at + i];
            if (g != w && (!code || abs(g - w) > 1 || g == -128)) {
                t_diag("%s: row %zu byte %u: %d, reference %d", name, at / r, i, g, w);
                return false;
            }
            *differ += g != w;
        }
    }
    return true;
}

typedef struct run {
    vkmha_context *ref, *gpu;
    const char *name;
    vkmha_attention_path path;
    uint32_t kv_splits;
    uint32_t dtype;
    /* Head dims: 6 and 10 (rows padded; flash.comp), or 8 and 12 (the
     * CPU-shaped kernel's too, on CPU devices) */
    uint32_t d_k, d_v;
    /* d_model (24), and the projection weights: float, or quantized
     * (VKMHA_QUANT_Q4Z in groups of 32: d_model 64, d_v 16) */
    uint32_t d_model, weight_quant;
} run;

/* The layer (random weights, r's head dims, stored in dtype dt) and a Q8
 * cache of it (batch entries of capacity positions) on the reference (m[0],
 * c[0]) and on r's context (m[1], c[1]); false (said) when any is not made. */
static bool pair_create(const run *r, t_rng *rng, uint32_t dt, uint32_t batch, uint32_t capacity,
                        t_layer_desc *l, vkmha_mha *m[2], vkmha_kv_cache *c[2])
{
    t_layer_desc_make(l, rng, r->d_model, HEADS, KV_HEADS, r->d_k, r->d_v, r->d_model, 0.4f);
    l->d.storage_dtype = dt;
    l->d.weight_quant = r->weight_quant;
    l->d.weight_group_size = r->weight_quant ? 32 : 0;
    m[0] = m[1] = NULL;
    c[0] = c[1] = NULL;
    const vkmha_kv_cache_desc cd = {.batch = batch, .capacity = capacity,
                                    .quant = VKMHA_QUANT_Q8};
    const bool ok = !vkmha_mha_create(r->ref, &l->d, &m[0]) &&
                    !vkmha_mha_create(r->gpu, &l->d, &m[1]) &&
                    !vkmha_kv_cache_create(m[0], &cd, &c[0]) &&
                    !vkmha_kv_cache_create(m[1], &cd, &c[1]);
    if (!ok)
        t_diag("%s: create: %s / %s", r->name, vkmha_context_last_error(r->ref),
               vkmha_context_last_error(r->gpu));
    return ok;
}

static void pair_destroy(t_layer_desc *l, vkmha_mha *m[2], vkmha_kv_cache *c[2])
{
    for (int i = 0; i < 2; i++) {
        vkmha_kv_cache_destroy(c[i]);
        vkmha_mha_destroy(m[i]);
    }
    free(l->mem);
}

/* One forward of both layers (their caches c[0] reference, c[1] Vulkan):
 * x [B][n][d_model] appended (NULL: nothing), outputs and weights widened
 * to fp32. */
static bool step(const run *r, vkmha_mha *m[2], vkmha_kv_cache *c[2], const float *x,
                 const float *q, uint32_t n, float *out[2], float *w[2], uint32_t len_kv)
{
    for (int i = 0; i < 2; i++) {
        void *qd = t_to_dt(r->dtype, q, (size_t)B * n * r->d_model);
        void *xd = x ? t_to_dt(r->dtype, x, (size_t)B * n * r->d_model) : NULL;
        void *o = malloc((size_t)B * n * r->d_model * 4);
        const size_t nw = (size_t)B * HEADS * n * len_kv;
        void *wd = malloc(nw * 4);
        const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
        vkmha_mha_io io = {.batch = B, .len_q = n, .query = qd, .key = xd, .value = xd,
                           .out = o, .attn_weights = wd, .mask = &causal, .dtype = r->dtype,
                           .attention_path = r->path, .kv_splits = r->kv_splits,
                           .kv_cache = c[i]};
        const vkmha_status st = vkmha_mha_forward(m[i], &io);
        if (st)
            t_diag("%s: forward: %s", r->name,
                   vkmha_context_last_error(i ? r->gpu : r->ref));
        else {
            vkmha__to_f32(r->dtype, o, (size_t)B * n * r->d_model, out[i]);
            vkmha__to_f32(r->dtype, wd, nw, w[i]);
        }
        free(qd), free(xd), free(o), free(wd);
        if (st)
            return false;
    }
    return true;
}

/* A prompt of 5 tokens, then 3 steps of one, appended on both backends
 * (rows compared, outputs at a tolerance that a code one step off keeps),
 * then the Vulkan cache's bytes in the reference's and a step that appends
 * nothing (outputs and weights at the dtype's tolerance). */
static void decode_case(const run *r, t_rng *rng)
{
    char name[192];
    snprintf(name, sizeof name, "%s, %s, dtype %u, d_k %u d_v %u%s: Q8 cache decode", r->name,
             r->path == VKMHA_ATTENTION_PATH_UNFUSED ? "unfused"
             : r->kv_splits                          ? "fused, 3 key splits"
                                                     : "default path",
             r->dtype, r->d_k, r->d_v, r->weight_quant ? ", Q4Z weights" : "");
    t_layer_desc l;
    vkmha_mha *m[2];
    vkmha_kv_cache *c[2];
    bool ok = pair_create(r, rng, r->dtype, B, CAP, &l, m, c);
    enum { T = 8, P = 5 };
    float *x = t_random(rng, (size_t)B * T * r->d_model, -1, 1);
    float *xs = t_alloc((size_t)B * T * r->d_model), *out[2], *w[2];
    for (int i = 0; i < 2; i++)
        out[i] = t_alloc((size_t)B * T * r->d_model), w[i] = t_alloc((size_t)B * HEADS * T * CAP);
    /* A code one step off moves a key or value element by its row's scale
     * (max / 127): about 1e-3 of an output here. */
    const double loose = r->dtype == VKMHA_DTYPE_F32 ? 2e-3 : 8e-3;
    const double tight = r->dtype == VKMHA_DTYPE_F32 ? 2e-5 : 4e-3;
    size_t differ = 0, codes = 0;
    for (uint32_t t0 = 0, n; ok && t0 < T; t0 += n) {
        n = t0 ? 1 : P;
        for (uint32_t b = 0; b < B; b++)
            memcpy(xs + (size_t)b * n * r->d_model, x + ((size_t)b * T + t0) * r->d_model,
                   (size_t)n * r->d_model * 4);
        ok = step(r, m, c, xs, xs, n, out, w, t0 + n) &&
             t_close(name, "out", out[1], out[0], (size_t)B * n * r->d_model, loose, 1e-2) &&
             t_close(name, "weights", w[1], w[0], (size_t)B * HEADS * n * (t0 + n), loose, 1e-2);
    }
    for (int v = 0; ok && v < 2; v++) {
        size_t n0, n1;
        uint8_t *g = raw(c[1], v, &n1), *want = raw(c[0], v, &n0);
        const uint32_t d = v ? r->d_v : r->d_k;
        ok = n0 == n1 && n0 == (size_t)B * KV_HEADS * CAP * row_bytes(d) &&
             rows_close(name, g, want, n0, d, &differ);
        codes += (size_t)B * KV_HEADS * T * d;
        /* The reads: the Vulkan cache's bytes in the reference's. */
        vkmha_tensor *t[2];
        vkmha_kv_cache_get_tensors(c[0], &t[0], &t[1]); /* the reference's */
        ok = ok && !vkmha_tensor_upload(t[v], 0, g, n1);
        free(g), free(want);
    }
    if (differ * 50 > codes) {
        t_diag("%s: %zu of %zu codes one step from the reference's", name, differ, codes);
        ok = false;
    }
    float *q = t_random(rng, (size_t)B * 2 * r->d_model, -1, 1);
    ok = ok && step(r, m, c, NULL, q, 2, out, w, T) &&
         t_close(name, "out (the same bytes)", out[1], out[0], (size_t)B * 2 * r->d_model, tight,
                 1e-3) &&
         t_close(name, "weights (the same bytes)", w[1], w[0], (size_t)B * HEADS * 2 * T, tight,
                 1e-3);
    t_report(ok, "%s: the rows as the reference stores them (%zu of %zu codes one step off), "
                 "the same bytes read alike", name, differ, codes);
    pair_destroy(&l, m, c);
    for (int i = 0; i < 2; i++)
        free(out[i]), free(w[i]);
    free(x), free(xs), free(q);
}

/* A token of +Inf: its key and value rows store the NaN scale and codes 0
 * on both backends, and every query that attends it gets NaN. */
static void nonfinite_case(const run *r, t_rng *rng)
{
    char name[160];
    snprintf(name, sizeof name, "%s, path %d, d_k %u d_v %u: Q8 cache, a token of +Inf",
             r->name, r->path, r->d_k, r->d_v);
    t_layer_desc l;
    vkmha_mha *m[2];
    vkmha_kv_cache *c[2];
    bool ok = pair_create(r, rng, VKMHA_DTYPE_F32, B, CAP, &l, m, c);
    enum { T = 4 };
    float *x = t_random(rng, (size_t)B * T * r->d_model, -1, 1);
    for (uint32_t i = 0; i < r->d_model; i++) /* entry 1, token 2 */
        x[((size_t)1 * T + 2) * r->d_model + i] = INFINITY;
    float *out[2], *w[2];
    for (int i = 0; i < 2; i++)
        out[i] = t_alloc((size_t)B * T * r->d_model), w[i] = t_alloc((size_t)B * HEADS * T * T);
    ok = ok && step(r, m, c, x, x, T, out, w, T) &&
         t_close(name, "out", out[1], out[0], (size_t)B * T * r->d_model, 2e-3, 1e-2);
    /* Every output of entry 1 is NaN: rows 2 and 3 attend the token, rows
     * 0 and 1 give its causally masked key weight 0, and 0 times its NaN
     * value is NaN (as an F32 cache's NaN value would be); entry 0's are
     * finite. */
    for (size_t i = 0; ok && i < (size_t)T * r->d_model; i++)
        ok = isnan(out[1][(size_t)T * r->d_model + i]) && isfinite(out[1][i]);
    if (!ok)
        t_diag("%s: outputs: entry 1 NaN and entry 0 finite expected", name);
    for (int v = 0; ok && v < 2; v++) {
        size_t n;
        const uint32_t rb = row_bytes(v ? r->d_v : r->d_k);
        for (int i = 0; ok && i < 2; i++) {
            uint8_t *g = raw(c[i], v, &n);
            /* Entry 1, every kv head, position 2. */
            for (uint32_t h = 0; ok && h < KV_HEADS; h++) {
                const uint8_t *row = g + (((size_t)1 * KV_HEADS + h) * CAP + 2) * rb;
                ok = row[0] == 0x00 && row[1] == 0x7e;
                for (uint32_t k = 2; ok && k < rb; k++)
                    ok = row[k] == 0;
            }
            if (!ok)
                t_diag("%s: %s backend's %s row: not the NaN scale and zero codes", name,
                       i ? "Vulkan" : "reference", v ? "value" : "key");
            free(g);
        }
    }
    t_report(ok, "%s: NaN scale, zero codes, its entry's outputs NaN", name);
    pair_destroy(&l, m, c);
    for (int i = 0; i < 2; i++)
        free(out[i]), free(w[i]);
    free(x);
}

/* Skipping over a Q8 cache (its values' scan reads only the rows' scales):
 * a prompt of 400 tokens prefilled causally (rows in blocks skip what the
 * causal mask hides), the Vulkan cache's bytes into the reference's, then a
 * decode step under a causal window of 48 (lanes over keys skip the 352
 * keys before it), at the fp32 tolerance; again with a token of +Inf at
 * position 10 (its rows' NaN scale), hidden from the step by the window:
 * the step's outputs are NaN (0 times its NaN values), so no kernel may
 * skip its rows unread. Entry 0 of a batch of 2 (entry 1's prompt shorter:
 * 300 tokens). */
static void window_case(const run *r, t_rng *rng)
{
    enum { P = 400, P1 = 300, W = 48 };
    for (int inf = 0; inf < 2; inf++) {
        char name[200];
        snprintf(name, sizeof name, "%s, %s: Q8 cache of %u tokens, decode under a window of %u%s",
                 r->name,
                 r->path == VKMHA_ATTENTION_PATH_UNFUSED ? "unfused"
                 : r->kv_splits                          ? "fused, 3 key splits"
                                                         : "default path",
                 P, W, inf ? ", a token of +Inf hidden by it" : "");
        t_layer_desc l;
        vkmha_mha *m[2];
        vkmha_kv_cache *c[2];
        bool ok = pair_create(r, rng, VKMHA_DTYPE_F32, 2, P + 1, &l, m, c);
        const size_t D = r->d_model;
        float *x = t_random(rng, 2 * P * D, -1, 1), *q = t_random(rng, 2 * D, -1, 1);
        if (inf)
            for (size_t i = 0; i < D; i++)
                x[10 * D + i] = INFINITY;
        float *out[2] = {t_alloc(2 * P * D), t_alloc(2 * P * D)};
        const uint32_t counts[2] = {P, P1};
        const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL},
                         window = {.kinds = VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW, .window = W};
        for (int i = 0; ok && i < 2; i++) {
            const vkmha_mha_io prefill = {.batch = 2, .len_q = P + P1, .query = x, .key = x,
                                          .value = x, .out = out[i], .mask = &causal,
                                          .attention_path = r->path, .kv_splits = r->kv_splits,
                                          .kv_cache = c[i], .entry_tokens = counts};
            ok = !vkmha_mha_forward(m[i], &prefill);
        }
        /* A code one step off: about 1e-3 of an output (decode_case). */
        ok = ok && t_close(name, "prefill", out[1], out[0], (P + P1) * D, 2e-3, 1e-2);
        for (int v = 0; ok && v < 2; v++) {
            size_t n;
            uint8_t *g = raw(c[1], v, &n);
            vkmha_tensor *t[2];
            vkmha_kv_cache_get_tensors(c[0], &t[0], &t[1]);
            ok = !vkmha_tensor_upload(t[v], 0, g, n);
            free(g);
        }
        for (int i = 0; ok && i < 2; i++) {
            const vkmha_mha_io step = {.batch = 2, .len_q = 1, .query = q, .key = q, .value = q,
                                       .out = out[i], .mask = &window,
                                       .attention_path = r->path, .kv_splits = r->kv_splits,
                                       .kv_cache = c[i]};
            ok = !vkmha_mha_forward(m[i], &step);
        }
        ok = ok && t_close(name, "step", out[1], out[0], 2 * D, 2e-5, 1e-4);
        if (ok && inf) /* entry 0's step NaN, entry 1's finite */
            for (size_t i = 0; ok && i < D; i++)
                ok = isnan(out[1][i]) && isfinite(out[1][D + i]);
        if (!ok)
            t_diag("%s: %s / %s", name, vkmha_context_last_error(r->ref),
                   vkmha_context_last_error(r->gpu));
        t_report(ok, "%s", name);
        pair_destroy(&l, m, c);
        free(out[0]), free(out[1]), free(x), free(q);
    }
}

/* The bytes, the operations on the rows (reorder, truncate), bad arguments. */
static void api_case(vkmha_context *ctx, const char *ctx_name, t_rng *rng)
{
    char name[96];
    snprintf(name, sizeof name, "%s: Q8 cache", ctx_name);
    t_layer_desc l;
    t_layer_desc_make(&l, rng, 128, 2, 2, 64, 64, 128, 0.4f);
    vkmha_mha *m = NULL;
    vkmha_kv_cache *q8 = NULL, *f16 = NULL;
    bool ok = !vkmha_mha_create(ctx, &l.d, &m);
    const vkmha_kv_cache_desc dq = {.batch = 2, .capacity = 5, .quant = VKMHA_QUANT_Q8},
                              dh = {.batch = 2, .capacity = 5, .dtype = VKMHA_DTYPE_F16};
    ok = ok && !vkmha_kv_cache_create(m, &dq, &q8) && !vkmha_kv_cache_create(m, &dh, &f16);
    const double ratio = ok ? (double)(vkmha_kv_cache_bytes(q8) - 8) /
                                  (double)(vkmha_kv_cache_bytes(f16) - 8)
                            : 0;
    ok = ok && vkmha_kv_cache_bytes(q8) == 2ull * 2 * 5 * (68 + 68) + 8 && ratio < 0.54;
    vkmha_kv_cache_desc got;
    ok = ok && !vkmha_kv_cache_get_desc(q8, &got) && got.quant == VKMHA_QUANT_Q8;
    vkmha_tensor *keys = NULL;
    vkmha_tensor_desc td;
    ok = ok && !vkmha_kv_cache_get_tensors(q8, &keys, NULL) && !vkmha_tensor_get_desc(keys, &td) &&
         td.dtype == VKMHA_DTYPE_U8 && td.dims[3] == 68;
    t_report(ok, "%s: U8 rows of 68 bytes at d 64, %.3fx an fp16 cache's bytes", name, ratio);

    /* Reorder and truncate move and zero whole rows. */
    float *x = t_random(rng, (size_t)2 * 3 * 128, -1, 1);
    vkmha_mha_io io = {.batch = 2, .len_q = 3, .query = x, .key = x, .value = x,
                       .out = t_alloc((size_t)2 * 3 * 128), .kv_cache = q8};
    ok = !vkmha_mha_forward(m, &io);
    size_t n;
    uint8_t *before = raw(q8, false, &n);
    const uint32_t src[2] = {1, 0};
    ok = ok && !vkmha_kv_cache_reorder(q8, src) && !vkmha_kv_cache_truncate(q8, 0, 1);
    uint8_t *after = raw(q8, false, &n);
    const size_t entry = n / 2, run = 5 * 68;
    for (uint32_t h = 0; ok && h < 2; h++) {
        ok = !memcmp(after + h * run, before + entry + h * run, 68) &&
             !memcmp(after + entry + h * run, before + h * run, 3 * 68);
        for (size_t i = 68; ok && i < run; i++)
            ok = after[h * run + i] == 0;
    }
    t_report(ok, "%s: reorder moves rows, truncate zeroes them", name);
    free(before), free(after), free(x), free((void *)io.out);

    /* Bad arguments. */
    const struct {
        vkmha_kv_cache_desc d;
        vkmha_status want;
        const char *field;
    } bad[] = {
        {{.capacity = 4, .quant = VKMHA_QUANT_Q4}, VKMHA_ERROR_UNSUPPORTED, "desc->quant"},
        {{.capacity = 4, .quant = VKMHA_QUANT_Q4Z}, VKMHA_ERROR_UNSUPPORTED, "desc->quant"},
        {{.capacity = 4, .quant = 9}, VKMHA_ERROR_INVALID_ARGUMENT, "desc->quant"},
        {{.capacity = 4, .quant = VKMHA_QUANT_Q8, .dtype = VKMHA_DTYPE_F16},
         VKMHA_ERROR_INVALID_ARGUMENT, "desc->dtype"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vkmha_kv_cache *c = NULL;
        const vkmha_status st = vkmha_kv_cache_create(m, &bad[i].d, &c);
        t_report(st == bad[i].want && !c && strstr(vkmha_context_last_error(ctx), bad[i].field),
                 "%s: bad desc %zu: %s naming %s (%s)", name, i, vkmha_status_string(st),
                 bad[i].field, vkmha_context_last_error(ctx));
    }
    /* The application's tensors: U8, of the rows' bytes. */
    vkmha_tensor *kt = NULL, *vt = NULL;
    const vkmha_tensor_desc f32 = {VKMHA_DTYPE_F32, 4, {1, 2, 4, 68}},
                            u8 = {VKMHA_DTYPE_U8, 4, {1, 2, 4, 68}};
    vkmha_kv_cache *c = NULL;
    ok = !vkmha_tensor_create(ctx, &f32, &kt) && !vkmha_tensor_create(ctx, &f32, &vt);
    vkmha_kv_cache_desc own = {.capacity = 4, .quant = VKMHA_QUANT_Q8, .keys = kt, .values = vt};
    vkmha_status st = vkmha_kv_cache_create(m, &own, &c);
    ok = ok && st == VKMHA_ERROR_INVALID_ARGUMENT && !c &&
         strstr(vkmha_context_last_error(ctx), "U8");
    if (!ok)
        t_diag("%s: F32 tensors: %s (%s)", name, vkmha_status_string(st),
               vkmha_context_last_error(ctx));
    vkmha_tensor_destroy(kt), vkmha_tensor_destroy(vt);
    kt = vt = NULL;
    ok = ok && !vkmha_tensor_create(ctx, &u8, &kt) && !vkmha_tensor_create(ctx, &u8, &vt);
    own.keys = kt, own.values = vt;
    if (ok && (st = vkmha_kv_cache_create(m, &own, &c))) {
        t_diag("%s: U8 tensors: %s (%s)", name, vkmha_status_string(st),
               vkmha_context_last_error(ctx));
        ok = false;
    }
    vkmha_kv_cache_destroy(c);
    vkmha_tensor_destroy(kt), vkmha_tensor_destroy(vt);
    t_report(ok, "%s: the application's tensors: F32 refused, U8 of the rows' bytes taken", name);
    vkmha_kv_cache_destroy(q8);
    vkmha_kv_cache_destroy(f16);
    vkmha_mha_destroy(m);
    free(l.mem);
}

int main(void)
{
    t_rng rng = {0x71386b7663616368ull};
    const t_cache_contexts cx = t_cache_contexts_create();
    vkmha_context *ref = cx.ref, *gpu = cx.gpu, *gpu_shared = cx.shared;
    const struct {
        vkmha_context *ctx;
        const char *name;
    } ctxs[] = {{gpu, "Vulkan"}, {gpu_shared, "Vulkan, workgroup-shared kernel"}};
    for (size_t c = 0; c < 2; c++)
        for (size_t p = 0; p < T_ATTENTION_RUNS; p++)
            for (uint32_t v = 0; v < 4; v++) {
                const bool f16 = v & 1, wide = v & 2;
                const run r = {ref, ctxs[c].ctx, ctxs[c].name, t_attention_runs[p].path,
                               t_attention_runs[p].kv_splits,
                               f16 ? VKMHA_DTYPE_F16 : VKMHA_DTYPE_F32, wide ? 8 : 6,
                               wide ? 12 : 10, 24, VKMHA_QUANT_NONE};
                decode_case(&r, &rng);
                if (!f16)
                    nonfinite_case(&r, &rng);
                if (!f16 && wide)
                    window_case(&r, &rng);
                /* With 4-bit projection weights (issue 28's GPTQ-style layer). */
                const run rq = {ref, ctxs[c].ctx, ctxs[c].name, t_attention_runs[p].path,
                                t_attention_runs[p].kv_splits, r.dtype, 8, 16, 64,
                                VKMHA_QUANT_Q4Z};
                if (wide)
                    decode_case(&rq, &rng);
            }
    api_case(ref, "reference", &rng);
    api_case(gpu, "Vulkan", &rng);
    t_cache_contexts_destroy(&cx);
    return t_finish();
}
