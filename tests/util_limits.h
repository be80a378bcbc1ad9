/* The cases and helpers tests/test_limits*.c share: each op and the layer
 * against the reference backend with the debug log counting split passes,
 * and refusals past a limit (outputs untouched, the context still works).
 * Tolerances: those of the op's own test (see tests/test_limits.c). */
#ifndef VKMHA_TEST_UTIL_LIMITS_H
#define VKMHA_TEST_UTIL_LIMITS_H

#include "util.h"
#include "util_dtype.h"

#define SENTINEL 12345.0f

/* The debug log: counts the lines saying a pass was split into several
 * dispatches. */
static int g_splits;
/* Whether the cases must see a split pass (the lowered workgroup counts),
 * or only results (the mobile profile). */
static bool g_need_splits = true;

/* And the lines saying an attention's keys are bound in windows or read
 * through texel views, and that a copy of heads (a KV cache's append) runs
 * in blocks. */
static int g_windows, g_texel, g_blocks;

static inline void count_splits(void *user, vkmha_log_level level, vkmha_status status,
                         const char *msg)
{
    if (level == VKMHA_LOG_DEBUG && strstr(msg, " split into "))
        g_splits++;
    if (level == VKMHA_LOG_DEBUG && strstr(msg, " bound in windows "))
        g_windows++;
    if (level == VKMHA_LOG_DEBUG && strstr(msg, ": heads of ") && strstr(msg, " blocks of "))
        g_blocks++;
    if (level == VKMHA_LOG_DEBUG && strstr(msg, " through texel views "))
        g_texel++;
    t_log(user, level, status, msg);
}

/* Runs `st` (a call on the lowered context) and reports: success, outputs
 * close to the reference, and at least one split dispatch. */
static inline void report_split(const char *name, vkmha_context *gpu, vkmha_status st, bool close)
{
    bool ok = st == VKMHA_SUCCESS && close && (g_splits > 0 || !g_need_splits);
    if (st)
        t_diag("%s: %s: %s", name, vkmha_status_string(st), vkmha_context_last_error(gpu));
    if (g_splits == 0 && g_need_splits)
        t_diag("%s: no pass was split into several dispatches", name);
    t_report(ok, "%s: matches the reference, %d passes split", name, g_splits);
    g_splits = 0;
}

/* A matmul of 16-bit arrays (dt), against the reference on the same
 * arrays: 2 ulp of the output's dtype (ranges of k past the range are
 * summed in fp32 and rounded once; summed in the 16-bit C they were 8 ulp
 * off). */
static inline void matmul_16bit_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, uint32_t dt,
                              uint32_t m, uint32_t n, uint32_t k, vkmha_op op)
{
    char name[160];
    snprintf(name, sizeof name, "matmul %s m %u n %u k %u op %s",
             dt == VKMHA_DTYPE_F16 ? "fp16" : "bf16", m, n, k, op == VKMHA_OP_T ? "T" : "N");
    vkmha_matmul_desc d = {0};
    d.m = m, d.n = n, d.k = k, d.op_b = op, d.dtype = dt;
    float *a = t_random(rng, (size_t)m * k, -1, 1), *b = t_random(rng, (size_t)n * k, -1, 1);
    void *ha = t_to_dt(dt, a, (size_t)m * k), *hb = t_to_dt(dt, b, (size_t)n * k),
         *hw = malloc((size_t)m * n * 2), *hg = malloc((size_t)m * n * 2);
    vkmha_status rst = vkmha_matmul(ref, &d, ha, hb, NULL, hw);
    g_splits = 0;
    vkmha_status st = vkmha_matmul(gpu, &d, ha, hb, NULL, hg);
    float *want = t_from_dt(dt, hw, (size_t)m * n), *got = t_from_dt(dt, hg, (size_t)m * n);
    const double ulp = dt == VKMHA_DTYPE_F16 ? 1.0 / 1024 : 1.0 / 128;
    report_split(name, gpu, st,
                 !rst && !st && t_close(name, "c", got, want, (size_t)m * n, 1e-3, 2 * ulp));
    free(a), free(b), free(ha), free(hb), free(hw), free(hg), free(want), free(got);
}

static inline void matmul_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, uint32_t batch,
                        uint32_t m, uint32_t n, uint32_t k, vkmha_op op, bool broadcast_b)
{
    char name[160];
    snprintf(name, sizeof name, "matmul batch %u m %u n %u k %u op %s%s", batch, m, n, k,
             op == VKMHA_OP_T ? "T" : "N", broadcast_b ? " B broadcast" : "");
    vkmha_matmul_desc d = {0};
    d.batch = batch, d.m = m, d.n = n, d.k = k, d.op_b = op;
    d.stride_b = broadcast_b ? VKMHA_BROADCAST : 0;
    size_t na = (size_t)batch * m * k, nb = (size_t)(broadcast_b ? 1 : batch) * n * k,
           nc = (size_t)batch * m * n;
    float *a = t_random(rng, na, -1, 1), *b = t_random(rng, nb, -1, 1);
    float *bias = t_random(rng, n, -1, 1), *want = t_alloc(nc), *got = t_alloc(nc);
    vkmha_status rst = vkmha_matmul(ref, &d, a, b, bias, want);
    g_splits = 0;
    vkmha_status st = vkmha_matmul(gpu, &d, a, b, bias, got);
    report_split(name, gpu, st,
                 rst == VKMHA_SUCCESS && !st &&
                     t_close(name, "c", got, want, nc, 2e-6 * sqrt((double)k), 1e-5));
    free(a), free(b), free(bias), free(want), free(got);
}

/* 2 x 3 x len_q rows: len_q 37 makes 222 rows, more than the 12 lowered
 * workgroups even at 16 rows per workgroup (CPU devices' row-per-invocation
 * shader); len_k 75 and 76 take its scalar and vec4 paths. */
static inline void softmax_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, uint32_t len_q,
                         uint32_t len_k)
{
    char name[96];
    snprintf(name, sizeof name, "softmax B 2 H 3 Lq %u Lk %u, every mask kind", len_q, len_k);
    vkmha_softmax_desc d = {2, 3, len_q, len_k, 0.5f, 0};
    size_t n = (size_t)2 * 3 * len_q * len_k;
    float *x = t_random(rng, n, -4, 4), *want = t_alloc(n), *got = t_alloc(n);
    t_mask tm;
    const vkmha_mask *m =
        t_mask_make(&tm, rng,
                    VKMHA_MASK_KEY_PADDING | VKMHA_MASK_FULL | VKMHA_MASK_CAUSAL |
                        VKMHA_MASK_BIAS,
                    2, 3, len_q, len_k, 1, 0, true);
    vkmha_status rst = vkmha_softmax(ref, &d, x, m, want);
    g_splits = 0;
    vkmha_status st = vkmha_softmax(gpu, &d, x, m, got);
    report_split(name, gpu, st, !rst && !st && t_close(name, "y", got, want, n, 1e-6, 1e-5));
    free(x), free(want), free(got);
    t_mask_free(&tm);
}

/* vkmha_split_heads / _merge_ (split) of shape d on host arrays, exact
 * against the reference, the log saying it was split ("name" with
 * "split" / "merge" for %s). */
static inline void heads_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, bool split,
                       const vkmha_heads_desc *d, const char *name_fmt)
{
    char name[200];
    snprintf(name, sizeof name, name_fmt, split ? "split" : "merge");
    const size_t n = (size_t)(d->batch ? d->batch : 1) * d->len * d->heads * d->head_dim;
    float *x = t_random(rng, n, -1, 1), *want = t_alloc(n), *got = t_alloc(n);
    vkmha_status rst = (split ? vkmha_split_heads : vkmha_merge_heads)(ref, d, x, want);
    g_splits = 0;
    vkmha_status st = (split ? vkmha_split_heads : vkmha_merge_heads)(gpu, d, x, got);
    report_split(name, gpu, st, !rst && !st && t_close(name, "y", got, want, n, 0, 0));
    free(x), free(want), free(got);
}

/* An fp32 attention's outputs against the reference's, with
 * test_attention.c's tolerances: the weights (got_w NULL: none) 1e-6 + 1e-5
 * |ref|, out 2e-6 sqrt(len_k) + 1e-5 |ref|. */
static inline bool attention_close(const char *name, const float *got, const float *want,
                            size_t n_out, const float *got_w, const float *want_w,
                            size_t n_weights, uint32_t len_k)
{
    return (!got_w || t_close(name, "weights", got_w, want_w, n_weights, 1e-6, 1e-5)) &&
           t_close(name, "out", got, want, n_out, 2e-6 * sqrt((double)len_k), 1e-5);
}

static inline void attention_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                           const vkmha_attention_desc *shape, uint32_t kinds, bool weights)
{
    const vkmha_attention_desc *s = shape;
    const uint32_t hkv = s->kv_heads ? s->kv_heads : s->heads;
    const t_attention_sizes n = t_attention_size(s);
    const size_t nq = n.q, nk = n.k, nv = n.v, no = n.out, nw = n.weights;
    float *q = t_random(rng, nq, -1, 1), *k = t_random(rng, nk, -1, 1),
          *v = t_random(rng, nv, -1, 1);
    float *want = t_alloc(no), *got = t_alloc(no);
    float *want_w = weights ? t_alloc(nw) : NULL, *got_w = weights ? t_alloc(nw) : NULL;
    t_mask tm;
    const vkmha_mask *m =
        t_mask_make(&tm, rng, kinds, s->batch, s->heads, s->len_q, s->len_k, 0, 1, false);
    vkmha_attention_desc d = *s;
    vkmha_status rst = vkmha_attention(ref, &d, q, k, v, m, want, want_w);
    for (size_t r = 0; r < T_ATTENTION_RUNS; r++) {
        char name[200], mname[64];
        snprintf(name, sizeof name, "attention B %u H %u Hkv %u Lq %u Lk %u dk %u dv %u mask %s%s [%s]",
                 s->batch, s->heads, hkv, s->len_q, s->len_k, s->d_k, s->d_v,
                 t_mask_name(kinds, mname, sizeof mname), weights ? " weights" : "",
                 t_attention_runs[r].name);
        d.path = t_attention_runs[r].path;
        d.kv_splits = t_attention_runs[r].kv_splits;
        g_splits = 0;
        vkmha_status st = vkmha_attention(gpu, &d, q, k, v, m, got, got_w);
        bool close = !rst && !st &&
                     attention_close(name, got, want, no, got_w, want_w, nw, s->len_k);
        report_split(name, gpu, st, close);
    }
    free(q), free(k), free(v), free(want), free(got), free(want_w), free(got_w);
    t_mask_free(&tm);
}

static inline void layer_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    t_layer l;
    t_layer_make(&l, rng, 32, 4, 2, 2, 100, 23, /* 200 rows: the LayerNorm splits too */
                 VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL | VKMHA_MASK_BIAS);
    vkmha_mha *mr = NULL, *mg = NULL;
    float *want = t_alloc(l.n_out), *got = t_alloc(l.n_out);
    float *want_w = t_alloc(l.n_weights), *got_w = t_alloc(l.n_weights);
    vkmha_status rst = vkmha_mha_create(ref, &l.desc, &mr);
    g_splits = 0;
    vkmha_status st = vkmha_mha_create(gpu, &l.desc, &mg);
    t_report(st == VKMHA_SUCCESS && rst == VKMHA_SUCCESS,
             "mha_create on the lowered context: %s", vkmha_status_string(st));
    vkmha_mha_io io = l.io;
    io.out = want;
    io.attn_weights = want_w;
    if (!rst)
        rst = vkmha_mha_forward(mr, &io);
    for (size_t r = 0; st == VKMHA_SUCCESS && r < T_ATTENTION_RUNS; r++) {
        char name[160];
        snprintf(name, sizeof name,
                 "mha forward B 2 Lq 100 Lk 23 d_model 32 H 4 Hkv 2 post-norm, masks, weights [%s]",
                 t_attention_runs[r].name);
        io.out = got;
        io.attn_weights = got_w;
        io.attention_path = t_attention_runs[r].path;
        io.kv_splits = t_attention_runs[r].kv_splits;
        g_splits = 0;
        vkmha_status fst = vkmha_mha_forward(mg, &io);
        bool close = !rst && !fst &&
                     t_close(name, "attn_weights", got_w, want_w, l.n_weights, 1e-6, 1e-5) &&
                     t_close(name, "out", got, want, l.n_out, T_LAYER_ATOL, T_LAYER_RTOL);
        report_split(name, gpu, fst, close);
    }
    vkmha_mha_destroy(mr);
    vkmha_mha_destroy(mg);
    free(want), free(got), free(want_w), free(got_w);
    t_layer_free(&l);
}

/* ---- size limits ---------------------------------------------------------- */

static inline float *sentinels(size_t n)
{
    float *p = t_alloc(n);
    t_fill(p, n, SENTINEL);
    return p;
}

static inline bool untouched(const float *p, size_t n)
{
    return t_untouched(p, n, SENTINEL, NULL);
}

/* A call refused for a size: UNSUPPORTED, a message starting with `fn:` that
 * names `tensor` and `limit`, the output untouched, and a small matmul on
 * the same context still right. */
static inline void report_refused(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                           vkmha_status st, const char *fn, const char *tensor,
                           const char *limit, bool outputs_untouched, const char *label)
{
    const char *msg = vkmha_context_last_error(gpu);
    bool ok = st == VKMHA_ERROR_UNSUPPORTED && strncmp(msg, fn, strlen(fn)) == 0 &&
              msg[strlen(fn)] == ':' && strstr(msg, tensor) && strstr(msg, limit) &&
              outputs_untouched;
    if (!ok)
        t_diag("%s: %s, \"%s\" (wanted UNSUPPORTED naming %s and %s), outputs %s", label,
               vkmha_status_string(st), msg, tensor, limit,
               outputs_untouched ? "untouched" : "written");
    vkmha_matmul_desc d = {0};
    d.m = 5, d.n = 7, d.k = 3;
    float *a = t_random(rng, 15, -1, 1), *b = t_random(rng, 21, -1, 1);
    float want[35], got[35];
    bool works = vkmha_matmul(ref, &d, a, b, NULL, want) == VKMHA_SUCCESS &&
                 vkmha_matmul(gpu, &d, a, b, NULL, got) == VKMHA_SUCCESS &&
                 t_close(label, "follow-up matmul", got, want, 35, 1e-5, 1e-5);
    free(a), free(b);
    t_report(ok && works, "%s: UNSUPPORTED naming %s, then the context works", label, tensor);
}

/* A KV cache of 2 entries x `capacity` positions of 2 heads of 8 floats
 * (keys and values each) on a context whose tensors cannot hold them:
 * refused naming desc->capacity and `limit` (a cache made anyway is freed). */
static inline void kv_cache_refused(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                             uint32_t capacity, const char *limit, const char *label)
{
    t_layer l;
    t_layer_make(&l, rng, 16, 2, 0, 1, 4, 0, 0);
    vkmha_mha *mg = NULL;
    vkmha_kv_cache *cache = (vkmha_kv_cache *)(uintptr_t)1;
    const vkmha_kv_cache_desc cd = {.batch = 2, .capacity = capacity};
    const vkmha_status st = vkmha_mha_create(gpu, &l.desc, &mg)
                                ? VKMHA_ERROR_INVALID_ARGUMENT
                                : vkmha_kv_cache_create(mg, &cd, &cache);
    report_refused(ref, gpu, rng, st, "vkmha_kv_cache_create", "desc->capacity", limit,
                   cache == NULL, label);
    vkmha_kv_cache_destroy(st ? NULL : cache);
    vkmha_mha_destroy(mg);
    t_layer_free(&l);
}

/* ---- tensors past the range ----------------------------------------------- */

/* A rank-1 tensor of n elements of dt on gpu, holding src (NULL: unset);
 * NULL on failure (reported). */
static inline vkmha_tensor *put(vkmha_context *gpu, vkmha_dtype dt, size_t n, const void *src)
{
    const vkmha_tensor_desc d = {dt, 1, {(uint32_t)n}};
    vkmha_tensor *t = NULL;
    const uint64_t bytes = (uint64_t)n * (dt == VKMHA_DTYPE_U8 ? 1 : 4);
    if (vkmha_tensor_create(gpu, &d, &t) || (src && vkmha_tensor_upload(t, 0, src, bytes))) {
        t_diag("tensor of %zu elements: %s", n, vkmha_context_last_error(gpu));
        vkmha_tensor_destroy(t);
        return NULL;
    }
    return t;
}

/* The fp32 tensor t's n elements, downloaded (sentinels if that failed). */
static inline float *get(vkmha_tensor *t, size_t n)
{
    float *p = sentinels(n);
    const vkmha_status st = t ? vkmha_tensor_download(t, 0, p, (uint64_t)n * 4) : VKMHA_SUCCESS;
    if (st)
        t_diag("download: %s", vkmha_status_string(st));
    return p;
}

/* Reports a layer call on tensors (st; ok: its setup worked) whose output
 * tensor `to` must match want (n elements) within the layer's tolerance,
 * the call split. */
static inline void report_tensor_out(const char *name, vkmha_context *gpu, vkmha_status st, bool ok,
                              vkmha_tensor *to, const float *want, size_t n)
{
    float *got = get(to, n);
    report_split(name, gpu, st,
                 ok && !st && t_close(name, "out", got, want, n, T_LAYER_ATOL, T_LAYER_RTOL));
    free(got);
}

/* t_mask m as tensors (*tm); false if one could not be made. */
static inline bool put_mask(vkmha_context *gpu, const t_mask *m, size_t n_kp, size_t n_full,
                     size_t n_bias, vkmha_tensor_mask *tm, vkmha_tensor *t[3])
{
    memset(tm, 0, sizeof *tm);
    t[0] = m->kp ? put(gpu, VKMHA_DTYPE_U8, n_kp, m->kp) : NULL;
    t[1] = m->full ? put(gpu, VKMHA_DTYPE_U8, n_full, m->full) : NULL;
    t[2] = m->bias ? put(gpu, VKMHA_DTYPE_F32, n_bias, m->bias) : NULL;
    *tm = (vkmha_tensor_mask){.kinds = m->m.kinds, .key_padding = t[0], .full = t[1],
                              .bias = t[2], .bias_batch = m->m.bias_batch,
                              .bias_heads = m->m.bias_heads,
                              .causal_offset = m->m.causal_offset};
    return (!m->kp || t[0]) && (!m->full || t[1]) && (!m->bias || t[2]);
}

/* vkmha_split_heads_tensor / _merge_ (split) of shape d on tensors, exact
 * against the reference on host arrays, the log saying it was split. */
static inline void heads_tensor_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, bool split,
                              const vkmha_heads_desc *d, const char *name)
{
    const size_t n = (size_t)d->batch * d->len * d->heads * d->head_dim;
    float *x = t_random(rng, n, -1, 1), *want = t_alloc(n);
    vkmha_tensor *tx = put(gpu, VKMHA_DTYPE_F32, n, x), *ty = put(gpu, VKMHA_DTYPE_F32, n, NULL);
    const bool ok = tx && ty &&
                    !(split ? vkmha_split_heads : vkmha_merge_heads)(ref, d, x, want);
    g_splits = 0;
    const vkmha_status st =
        ok ? (split ? vkmha_split_heads_tensor : vkmha_merge_heads_tensor)(gpu, d, tx, ty)
           : VKMHA_ERROR_INVALID_ARGUMENT;
    float *got = get(ty, n);
    report_split(name, gpu, st, ok && !st && t_close(name, "y", got, want, n, 0, 0));
    vkmha_tensor_destroy(tx), vkmha_tensor_destroy(ty);
    free(x), free(want), free(got);
}

/* The tensor forms of the ops that run in parts, on tensors past the lowered
 * 64 KiB range, masks as tensors past it too: each matches the reference on
 * host arrays and the log says the call was split; a softmax row past the
 * range is refused naming x, and vkmha_mha_submit records a layer that
 * runs in parts into one submission. */
static inline void tensor_range_cases(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    const uint32_t kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_FULL | VKMHA_MASK_CAUSAL |
                           VKMHA_MASK_BIAS;
    /* Softmax: B 1 H 2 (one head a call, the per-head bias moved by head)
     * and B 1 H 1 (rows of one head, the causal mask and the full mask
     * moved by row). */
    static const uint32_t sm[2][4] = {{1, 2, 160, 64}, {1, 1, 400, 64}};
    for (int c = 0; c < 2; c++) {
        const vkmha_softmax_desc d = {sm[c][0], sm[c][1], sm[c][2], sm[c][3], 0.5f, 0};
        const size_t n = (size_t)d.batch * d.heads * d.len_q * d.len_k;
        float *x = t_random(rng, n, -4, 4), *want = t_alloc(n);
        t_mask m;
        t_mask_make(&m, rng, kinds, d.batch, d.heads, d.len_q, d.len_k, 0, 0, false);
        vkmha_tensor *tx = put(gpu, VKMHA_DTYPE_F32, n, x), *ty = put(gpu, VKMHA_DTYPE_F32, n, NULL),
                     *tm[3];
        vkmha_tensor_mask mask;
        bool ok = put_mask(gpu, &m, (size_t)d.batch * d.len_k, n / d.heads, n, &mask, tm) &&
                  tx && ty && !vkmha_softmax(ref, &d, x, &m.m, want);
        g_splits = 0;
        const vkmha_status st = ok ? vkmha_softmax_tensor(gpu, &d, tx, &mask, ty) : VKMHA_ERROR_INVALID_ARGUMENT;
        float *got = get(ty, n);
        char name[120];
        snprintf(name, sizeof name,
                 "vkmha_softmax_tensor B %u H %u Lq %u Lk %u (%zu KiB), every mask kind as "
                 "tensors [range]",
                 d.batch, d.heads, d.len_q, d.len_k, n * 4 / 1024);
        report_split(name, gpu, st, ok && !st && t_close(name, "y", got, want, n, 1e-6, 1e-5));
        vkmha_tensor_destroy(tx), vkmha_tensor_destroy(ty);
        for (int i = 0; i < 3; i++)
            vkmha_tensor_destroy(tm[i]);
        free(x), free(want), free(got);
        t_mask_free(&m);
    }

    /* Attention, GQA: one query head a call (q, out of 50 KiB; weights and
     * the per-head bias of 156 KiB), on both paths. */
    {
        const vkmha_attention_desc s = {1, 8, 2, 100, 50, 16, 12, 0, 0, 0, 0};
        const t_attention_sizes n = t_attention_size(&s);
        float *q = t_random(rng, n.q, -1, 1), *k = t_random(rng, n.k, -1, 1),
              *v = t_random(rng, n.v, -1, 1), *want = t_alloc(n.out),
              *want_w = t_alloc(n.weights);
        t_mask m;
        t_mask_make(&m, rng, kinds, s.batch, s.heads, s.len_q, s.len_k, 0, 0, false);
        vkmha_tensor *tq = put(gpu, VKMHA_DTYPE_F32, n.q, q), *tk = put(gpu, VKMHA_DTYPE_F32, n.k, k),
                     *tv = put(gpu, VKMHA_DTYPE_F32, n.v, v),
                     *to = put(gpu, VKMHA_DTYPE_F32, n.out, NULL),
                     *tw = put(gpu, VKMHA_DTYPE_F32, n.weights, NULL), *tm[3];
        vkmha_tensor_mask mask;
        bool ok = put_mask(gpu, &m, (size_t)s.len_k, (size_t)s.len_q * s.len_k, n.weights,
                           &mask, tm) &&
                  tq && tk && tv && to && tw && !vkmha_attention(ref, &s, q, k, v, &m.m, want, want_w);
        for (int path = 0; path < 2; path++) {
            vkmha_attention_desc d = s;
            d.path = path ? VKMHA_ATTENTION_PATH_UNFUSED : VKMHA_ATTENTION_PATH_FUSED;
            g_splits = 0;
            const vkmha_status st =
                ok ? vkmha_attention_tensor(gpu, &d, tq, tk, tv, &mask, to, tw) : VKMHA_ERROR_INVALID_ARGUMENT;
            float *got = get(to, n.out), *got_w = get(tw, n.weights);
            char name[160];
            snprintf(name, sizeof name,
                     "vkmha_attention_tensor B 1 H 8 Hkv 2 Lq 100 Lk 50, weights of 156 KiB, "
                     "every mask kind as tensors [range, %s]",
                     path ? "unfused" : "fused");
            report_split(name, gpu, st,
                         ok && !st &&
                             attention_close(name, got, want, n.out, got_w, want_w, n.weights,
                                             50));
            free(got), free(got_w);
        }
        vkmha_tensor_destroy(tq), vkmha_tensor_destroy(tk), vkmha_tensor_destroy(tv);
        vkmha_tensor_destroy(to), vkmha_tensor_destroy(tw);
        for (int i = 0; i < 3; i++)
            vkmha_tensor_destroy(tm[i]);
        free(q), free(k), free(v), free(want), free(want_w);
        t_mask_free(&m);
    }

    /* Split heads: calls of whole batch entries (4 of 25 KiB); merge heads
     * of one entry of 88 KiB: blocks of rows and heads. */
    heads_tensor_case(ref, gpu, rng, true, &(vkmha_heads_desc){4, 100, 4, 16, 0},
                      "vkmha_split_heads_tensor B 4 L 100 H 4 d 16 (100 KiB) [range]");
    heads_tensor_case(ref, gpu, rng, false, &(vkmha_heads_desc){1, 161, 5, 28, 0},
                      "vkmha_merge_heads_tensor B 1 L 161 H 5 d 28 (88 KiB) in blocks [range]");
    heads_tensor_case(ref, gpu, rng, true, &(vkmha_heads_desc){1, 601, 3, 30, 0},
                      "vkmha_split_heads_tensor B 1 L 601 H 3 d 30 (70 KiB a head) in blocks "
                      "of rows [range]");

    /* The layer: calls of whole batch entries, the key padding tensor moved
     * with each; vkmha_mha_submit records them into one submission. */
    {
        t_layer e;
        t_layer_make(&e, rng, 16, 2, 0, 3, 400, 0, VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL);
        vkmha_mha *mg = NULL, *mr = NULL;
        float *want = t_alloc(e.n_out);
        vkmha_mha_io io = e.io;
        io.out = want;
        vkmha_tensor *tq = put(gpu, VKMHA_DTYPE_F32, e.n_out, e.io.query),
                     *to = put(gpu, VKMHA_DTYPE_F32, e.n_out, NULL), *tm[3];
        vkmha_tensor_mask mask;
        bool ok = put_mask(gpu, &e.mask, 3 * 400, 0, 0, &mask, tm) && tq && to &&
                  !vkmha_mha_create(gpu, &e.desc, &mg) && !vkmha_mha_create(ref, &e.desc, &mr) &&
                  !vkmha_mha_forward(mr, &io);
        const vkmha_mha_tensors tio = {.batch = 3, .len_q = 400, .query = tq, .key = tq,
                                       .value = tq, .mask = &mask, .out = to};
        g_splits = 0;
        const vkmha_status st = ok ? vkmha_mha_forward_tensor(mg, &tio) : VKMHA_ERROR_INVALID_ARGUMENT;
        report_tensor_out("vkmha_mha_forward_tensor B 3 L 400 d_model 16 (query of 75 KiB) "
                          "[range]",
                          gpu, st, ok, to, want, e.n_out);
        /* vkmha_mha_submit: the parts recorded into one submission, into
         * an output cleared first. */
        vkmha_submission *sub = NULL;
        float *zeros = t_alloc(e.n_out);
        for (size_t i = 0; i < e.n_out; i++)
            zeros[i] = 0.0f;
        const bool cleared = to && !vkmha_tensor_upload(to, 0, zeros, (uint64_t)e.n_out * 4);
        g_splits = 0;
        vkmha_status sst =
            mg && cleared ? vkmha_mha_submit(mg, &tio, &sub) : VKMHA_ERROR_INVALID_ARGUMENT;
        if (!sst)
            sst = vkmha_submission_wait(sub, UINT64_MAX);
        vkmha_submission_destroy(sub);
        report_tensor_out("vkmha_mha_submit of the same layer, its parts in one submission "
                          "[range]",
                          gpu, sst, ok, to, want, e.n_out);
        free(zeros);
        vkmha_mha_destroy(mg), vkmha_mha_destroy(mr);
        vkmha_tensor_destroy(tq), vkmha_tensor_destroy(to);
        for (int i = 0; i < 3; i++)
            vkmha_tensor_destroy(tm[i]);
        free(want);
        t_layer_free(&e);
    }

    /* A mask tensor that no part fits while the data does: the layer of one
     * entry (its rows do not take a per-head bias) with a bias per head of
     * 78 KiB. Refused naming mask->bias, the output untouched (bound whole
     * it would be read past the range). */
    {
        t_layer e;
        t_layer_make(&e, rng, 16, 2, 0, 1, 100, 0, VKMHA_MASK_BIAS);
        const size_t nb = (size_t)2 * 100 * 100;
        vkmha_mha *mg = NULL;
        float *sent = sentinels(e.n_out);
        vkmha_tensor *tq = put(gpu, VKMHA_DTYPE_F32, e.n_out, e.io.query),
                     *to = put(gpu, VKMHA_DTYPE_F32, e.n_out, sent),
                     *tb = put(gpu, VKMHA_DTYPE_F32, nb, e.mask.bias);
        const vkmha_tensor_mask mask = {.kinds = VKMHA_MASK_BIAS, .bias = tb};
        const vkmha_mha_tensors tio = {.batch = 1, .len_q = 100, .query = tq, .key = tq,
                                       .value = tq, .mask = &mask, .out = to};
        const vkmha_status st = tq && to && tb && !vkmha_mha_create(gpu, &e.desc, &mg)
                                    ? vkmha_mha_forward_tensor(mg, &tio)
                                    : VKMHA_ERROR_INVALID_ARGUMENT;
        report_refused(ref, gpu, rng, st, "vkmha_mha_forward_tensor", "mask->bias",
                       "maxStorageBufferRange", true,
                       "vkmha_mha_forward_tensor with a per-head bias tensor of 78 KiB [range]");
        float *got = get(to, e.n_out); /* after: a download clears the last error */
        t_report(untouched(got, e.n_out), "the refused forward left its output untouched");
        vkmha_mha_destroy(mg);
        vkmha_tensor_destroy(tq), vkmha_tensor_destroy(to), vkmha_tensor_destroy(tb);
        free(sent), free(got);
        t_layer_free(&e);
    }

    /* One row of 20000 keys (78 KiB): no part fits; refused naming x. */
    {
        const vkmha_softmax_desc d = {1, 1, 2, 20000, 1.0f, 0};
        vkmha_tensor *tx = put(gpu, VKMHA_DTYPE_F32, 40000, NULL),
                     *ty = put(gpu, VKMHA_DTYPE_F32, 40000, NULL);
        report_refused(ref, gpu, rng,
                       tx && ty ? vkmha_softmax_tensor(gpu, &d, tx, NULL, ty)
                                : VKMHA_ERROR_INVALID_ARGUMENT,
                       "vkmha_softmax_tensor", "x is a tensor", "maxStorageBufferRange", true,
                       "vkmha_softmax_tensor with a row of 78 KiB [range]");
        vkmha_tensor_destroy(tx), vkmha_tensor_destroy(ty);
    }
}

/* A KV cache past the 64 KiB range (6 entries of 19 KiB of keys): a
 * prefill of 150 tokens (80 unfused, whose scores of one entry must fit),
 * then three steps of one token, for every entry in one call, on the fused
 * and the unfused path, each against the reference (fused: the cache read
 * in windows; unfused: calls of entries whose scores fit, the cache read by
 * the matmuls, one product at a time, in windows). With rope_dims, RoPE on
 * that many of a head's 8 dims: the append rotates the keys as it copies
 * them into the cache in blocks of entries, each from its rows of the
 * table (explicit positions, entry b's shifted by 5 b, so that no two
 * entries' rows are alike). */
static inline void kv_cache_range_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                                       uint32_t rope_dims)
{
    enum { B = 6, P = 150, STEPS = 3, CAP = 300 };
    t_layer l;
    t_layer_make(&l, rng, 16, 2, 0, B, P + STEPS, 0, 0); /* inputs of all P + STEPS tokens */
    l.desc.rope_dims = rope_dims;
    const size_t row = 16, seq = (size_t)(P + STEPS) * row;
    vkmha_mha *mg = NULL, *mr = NULL;
    bool ok = !vkmha_mha_create(gpu, &l.desc, &mg) && !vkmha_mha_create(ref, &l.desc, &mr);
    for (int path = 0; path < 2 && ok; path++) {
        vkmha_kv_cache *cg = NULL, *cr = NULL;
        const vkmha_kv_cache_desc cd = {.batch = B, .capacity = CAP};
        ok = !vkmha_kv_cache_create(mg, &cd, &cg) && !vkmha_kv_cache_create(mr, &cd, &cr);
        const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
        float *x = t_alloc((size_t)B * P * row), *want = t_alloc((size_t)B * P * row),
              *got = sentinels((size_t)B * P * row);
        g_splits = g_windows = 0;
        const uint32_t prefill = path ? 80 : P;
        uint32_t *pos = malloc(sizeof *pos * B * P);
        for (uint32_t t0 = 0, n = prefill; ok && pos && t0 < prefill + STEPS; t0 += n, n = 1) {
            for (uint32_t b = 0; b < B; b++) { /* tokens t0 .. t0 + n - 1 of each sequence */
                memcpy(x + (size_t)b * n * row, l.io.query + b * seq + (size_t)t0 * row,
                       (size_t)n * row * 4);
                for (uint32_t i = 0; i < n; i++)
                    pos[b * n + i] = t0 + i + 5 * b;
            }
            vkmha_mha_io io = {.batch = B, .len_q = n, .query = x, .key = x, .value = x,
                               .mask = &causal, .attention_path = path
                                                                     ? VKMHA_ATTENTION_PATH_UNFUSED
                                                                     : VKMHA_ATTENTION_PATH_FUSED,
                               .positions = rope_dims ? pos : NULL};
            io.out = want, io.kv_cache = cr;
            vkmha_status rst = vkmha_mha_forward(mr, &io);
            io.out = got, io.kv_cache = cg;
            vkmha_status st = vkmha_mha_forward(mg, &io);
            if (st)
                t_diag("KV cache past the range, tokens %u..: %s", t0,
                       vkmha_context_last_error(gpu));
            ok = !rst && !st &&
                 t_close("KV cache past the range", "out", got, want, (size_t)B * n * row,
                         T_LAYER_ATOL, T_LAYER_RTOL);
        }
        t_report(ok && (path ? g_splits : g_windows) > 0,
                 "KV cache of %u entries x %u positions past the range (%u KiB of keys), "
                 "RoPE on %u dims: a prefill of %u and %u steps of every entry match the "
                 "reference [range, %s], %s",
                 B, CAP, B * 2 * CAP * 8 * 4 / 1024, rope_dims, prefill, STEPS,
                 path ? "unfused" : "fused",
                 path ? "read by one product at a time" : "read in windows");
        vkmha_kv_cache_destroy(cg), vkmha_kv_cache_destroy(cr);
        free(x), free(want), free(got), free(pos);
    }
    vkmha_mha_destroy(mg), vkmha_mha_destroy(mr);
    t_layer_free(&l);
}

/* A KV cache one of whose heads is past the 64 KiB range (2 entries x 1
 * key/value head (2 query heads) x 2300 positions x 8 floats: 72 KiB a
 * head): 2100 keys and values
 * appended to each entry by a call of 3 queries (cross-attention: the
 * projections of 131 KiB an entry copied into the cache in blocks of rows of
 * one head), then 3 steps of one token with the causal mask, each against
 * the reference, the cache read in windows of keys (the second step on the
 * unfused path: its matmuls one product at a time). */
static inline void kv_cache_entry_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    enum { B = 2, FILL = 2100, CAP = 2300, Q = 3, STEPS = 3, D = 16 };
    t_layer l;
    t_layer_make(&l, rng, D, 2, 1, B, Q, FILL, 0); /* 2 query heads over 1 */
    vkmha_mha *mg = NULL, *mr = NULL;
    vkmha_kv_cache *cg = NULL, *cr = NULL;
    const vkmha_kv_cache_desc cd = {.batch = B, .capacity = CAP};
    bool ok = !vkmha_mha_create(gpu, &l.desc, &mg) && !vkmha_mha_create(ref, &l.desc, &mr) &&
              !vkmha_kv_cache_create(mg, &cd, &cg) && !vkmha_kv_cache_create(mr, &cd, &cr);
    if (!ok)
        t_diag("KV cache of 72 KiB a head: %s", vkmha_context_last_error(gpu));
    float *want = t_alloc((size_t)B * Q * D), *got = sentinels((size_t)B * Q * D);
    vkmha_mha_io io = l.io;
    io.out = want, io.kv_cache = cr;
    vkmha_status rst = ok ? vkmha_mha_forward(mr, &io) : VKMHA_ERROR_INVALID_ARGUMENT;
    io.out = got, io.kv_cache = cg;
    g_windows = g_blocks = 0;
    vkmha_status st = ok ? vkmha_mha_forward(mg, &io) : VKMHA_ERROR_INVALID_ARGUMENT;
    if (st)
        t_diag("KV cache of 72 KiB a head, the fill: %s", vkmha_context_last_error(gpu));
    t_report(!rst && !st && g_windows > 0 && g_blocks > 0 &&
                 t_close("KV cache fill", "out", got, want, (size_t)B * Q * D, T_LAYER_ATOL,
                         T_LAYER_RTOL),
             "KV cache of 72 KiB a head: 3 queries appending 2100 keys to each of 2 entries "
             "(the append in blocks, the cache read in windows) match the reference [range]");
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    for (int step = 0; step < STEPS; step++) {
        const float *x = l.io.query + (size_t)step * D; /* any token of the inputs */
        vkmha_mha_io si = {.batch = B, .len_q = 1, .query = x, .key = x, .value = x,
                           .mask = &causal};
        if (step == 1) /* unfused: the matmuls one product at a time */
            si.attention_path = VKMHA_ATTENTION_PATH_UNFUSED;
        si.out = want, si.kv_cache = cr;
        rst = ok ? vkmha_mha_forward(mr, &si) : VKMHA_ERROR_INVALID_ARGUMENT;
        si.out = got, si.kv_cache = cg;
        g_windows = 0;
        st = ok ? vkmha_mha_forward(mg, &si) : VKMHA_ERROR_INVALID_ARGUMENT;
        if (st)
            t_diag("KV cache of 72 KiB a head, step %d: %s", step,
                   vkmha_context_last_error(gpu));
        t_report(!rst && !st && g_windows > 0 &&
                     t_close("KV cache step", "out", got, want, (size_t)B * D, T_LAYER_ATOL,
                             T_LAYER_RTOL),
                 "KV cache of 72 KiB a head: step %d of both entries (causal, %s) matches the "
                 "reference [range]",
                 step, step == 1 ? "unfused" : "fused");
    }
    vkmha_kv_cache_destroy(cg), vkmha_kv_cache_destroy(cr);
    vkmha_mha_destroy(mg), vkmha_mha_destroy(mr);
    free(want), free(got);
    t_layer_free(&l);
}

#endif
