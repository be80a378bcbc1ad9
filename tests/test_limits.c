/* Shapes beyond the device's limits, on lavapipe, through
 * vkmha_debug_options, which lowers the limits vkmha believes:
 *
 *   - maxComputeWorkGroupCount lowered to 3 x 2 x 2: every op and the layer
 *     split their grids into several dispatches (the debug log must say so
 *     for each call, else the case fails) and still match the reference
 *     backend element by element on odd shapes, on every attention path;
 *   - maxStorageBufferRange lowered to 64 KiB: arrays and tensors above it
 *     run in parts (a matmul in windows, the other ops and the layer in
 *     calls of entries, heads or rows, masks moved with them) and match the
 *     reference; what no part fits is VKMHA_ERROR_UNSUPPORTED with a
 *     message naming it (outputs untouched, the context still works), while
 *     fused attention, whose extra memory is O(len_q), runs shapes whose
 *     score matrix is above the limit;
 *   - maxMemoryAllocationSize lowered to 32 KiB: the same, named after that
 *     limit;
 *   - maxComputeSharedMemorySize lowered to 8 KiB: the fused attention's d256
 *     class no longer fits, vkmha_context_get_kernels says so, and its heads
 *     run unfused.
 * Tolerances are those of the op's own test (test_matmul.c, ...): matmul
 * 2e-6 sqrt(k) + 1e-5 |ref|, softmax and attention weights 1e-6 + 1e-5
 * |ref|, attention outputs 2e-6 sqrt(len_k) + 1e-5 |ref|, heads exact, the
 * layer T_LAYER_ATOL + T_LAYER_RTOL |ref|. */
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

static void count_splits(void *user, vkmha_log_level level, vkmha_status status,
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
static void report_split(const char *name, vkmha_context *gpu, vkmha_status st, bool close)
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
static void matmul_16bit_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, uint32_t dt,
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

static void matmul_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, uint32_t batch,
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
static void softmax_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, uint32_t len_q,
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
static void heads_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, bool split,
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
static bool attention_close(const char *name, const float *got, const float *want,
                            size_t n_out, const float *got_w, const float *want_w,
                            size_t n_weights, uint32_t len_k)
{
    return (!got_w || t_close(name, "weights", got_w, want_w, n_weights, 1e-6, 1e-5)) &&
           t_close(name, "out", got, want, n_out, 2e-6 * sqrt((double)len_k), 1e-5);
}

static void attention_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
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

static void layer_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
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

static float *sentinels(size_t n)
{
    float *p = t_alloc(n);
    t_fill(p, n, SENTINEL);
    return p;
}

static bool untouched(const float *p, size_t n)
{
    return t_untouched(p, n, SENTINEL, NULL);
}

/* A call refused for a size: UNSUPPORTED, a message starting with `fn:` that
 * names `tensor` and `limit`, the output untouched, and a small matmul on
 * the same context still right. */
static void report_refused(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
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
static void kv_cache_refused(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
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
static vkmha_tensor *put(vkmha_context *gpu, vkmha_dtype dt, size_t n, const void *src)
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
static float *get(vkmha_tensor *t, size_t n)
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
static void report_tensor_out(const char *name, vkmha_context *gpu, vkmha_status st, bool ok,
                              vkmha_tensor *to, const float *want, size_t n)
{
    float *got = get(to, n);
    report_split(name, gpu, st,
                 ok && !st && t_close(name, "out", got, want, n, T_LAYER_ATOL, T_LAYER_RTOL));
    free(got);
}

/* t_mask m as tensors (*tm); false if one could not be made. */
static bool put_mask(vkmha_context *gpu, const t_mask *m, size_t n_kp, size_t n_full,
                     size_t n_bias, vkmha_tensor_mask *tm, vkmha_tensor *t[3])
{
    memset(tm, 0, sizeof *tm);
    t[0] = m->kp ? put(gpu, VKMHA_DTYPE_U8, n_kp, m->kp) : NULL;
    t[1] = m->full ? put(gpu, VKMHA_DTYPE_U8, n_full, m->full) : NULL;
    t[2] = m->bias ? put(gpu, VKMHA_DTYPE_F32, n_bias, m->bias) : NULL;
    *tm = (vkmha_tensor_mask){m->m.kinds,       t[0], t[1], t[2], m->m.bias_batch,
                              m->m.bias_heads, m->m.causal_offset};
    return (!m->kp || t[0]) && (!m->full || t[1]) && (!m->bias || t[2]);
}

/* vkmha_split_heads_tensor / _merge_ (split) of shape d on tensors, exact
 * against the reference on host arrays, the log saying it was split. */
static void heads_tensor_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, bool split,
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
static void tensor_range_cases(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
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

/* Reports a call (st; close: its setup worked and its outputs matched the
 * reference) that must have bound its keys in windows. */
static void report_windows(const char *name, vkmha_context *gpu, vkmha_status st, bool close)
{
    if (st)
        t_diag("%s: %s", name, vkmha_context_last_error(gpu));
    t_report(!st && close && g_windows > 0,
             "%s: keys in windows (%d plans), matches the reference", name, g_windows);
    g_windows = 0;
}

/* On a CPU device the default fused kernel reads keys and values past the
 * 64 KiB range through texel views of their whole buffers (the storage
 * range does not bound those): the attention of key_window_cases without
 * windows, the log saying so, against the reference. */
static void texel_keys_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    if (info.device.type != VKMHA_DEVICE_TYPE_CPU) {
        t_report(true, "keys past the range through texel views: not a CPU device, its fused "
                       "kernel reads windows (key_window_cases)");
        return;
    }
    const vkmha_attention_desc s = {2, 4, 2, 37, 700, 24, 28, 0, VKMHA_ATTENTION_PATH_FUSED,
                                    0, 0};
    const t_attention_sizes n = t_attention_size(&s);
    float *q = t_random(rng, n.q, -1, 1), *k = t_random(rng, n.k, -1, 1),
          *v = t_random(rng, n.v, -1, 1), *want = t_alloc(n.out), *got = t_alloc(n.out);
    g_windows = g_texel = 0;
    const vkmha_status rst = vkmha_attention(ref, &s, q, k, v, NULL, want, NULL),
                       st = vkmha_attention(gpu, &s, q, k, v, NULL, got, NULL);
    const char *name = "attention B 2 H 4 Hkv 2 Lq 37 Lk 700 (66 KiB of keys a head) on the "
                       "CPU-shaped kernel [range]";
    if (st)
        t_diag("%s: %s", name, vkmha_context_last_error(gpu));
    t_report(!rst && !st && g_texel > 0 && g_windows == 0 &&
                 attention_close(name, got, want, n.out, NULL, NULL, 0, 700),
             "%s: read through texel views (%d plans), no windows, matches the reference", name,
             g_texel);
    free(q), free(k), free(v), free(want), free(got);
}

/* Attention whose one head's keys and values are past the 64 KiB range:
 * the fused path binds them in windows of keys (the log says so), on host
 * arrays (fp32 with GQA, every mask kind and the weights, by default and
 * with key splits asked for, which windows ignore; fp16 with causal and key
 * padding masks) and on tensors (masks and weights as tensors too, the call
 * in parts of heads and rows for its bias and weights), each against the
 * reference; the unfused path runs in calls of one query head whose
 * matmuls bind them in windows. Tolerances: test_attention.c's for fp32, 2 ulp for fp16
 * (test_dtype.c's). */
static void key_window_cases(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    const uint32_t kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_FULL | VKMHA_MASK_CAUSAL |
                           VKMHA_MASK_BIAS;
    /* First on this context (no window site made yet): one head on the
     * unfused path, one product each matmul. */
    {
        const vkmha_attention_desc one = {1, 1, 0, 5, 700, 24, 24, 0,
                                          VKMHA_ATTENTION_PATH_UNFUSED, 0, 0};
        const t_attention_sizes n1 = t_attention_size(&one);
        float *q1 = t_random(rng, n1.q, -1, 1), *k1 = t_random(rng, n1.k, -1, 1),
              *v1 = t_random(rng, n1.v, -1, 1), *w1 = t_alloc(n1.out), *g1 = t_alloc(n1.out);
        g_windows = 0;
        const vkmha_status r1 = vkmha_attention(ref, &one, q1, k1, v1, NULL, w1, NULL),
                           s1 = vkmha_attention(gpu, &one, q1, k1, v1, NULL, g1, NULL);
        report_windows("unfused attention of one head with 66 KiB of keys, first on a fresh "
                       "context [range]",
                       gpu, s1,
                       !r1 && !s1 &&
                           attention_close("one head", g1, w1, n1.out, NULL, NULL, 0, 700));
        free(q1), free(k1), free(v1), free(w1), free(g1);
    }
    /* One head's keys: 700 x 24 floats (66 KiB), values 700 x 28 (77 KiB).
     * With a bias per head and the weights the call runs in parts of rows
     * of one head; without them in one call of 4 (entry, key/value head)
     * pairs. */
    const vkmha_attention_desc s = {2, 4, 2, 37, 700, 24, 28, 0, 0, 0, 0};
    const t_attention_sizes n = t_attention_size(&s);
    float *q = t_random(rng, n.q, -1, 1), *k = t_random(rng, n.k, -1, 1),
          *v = t_random(rng, n.v, -1, 1), *want = t_alloc(n.out), *got = t_alloc(n.out),
          *want_w = t_alloc(n.weights), *got_w = t_alloc(n.weights);
    for (int cfg = 0; cfg < 2; cfg++) {
        const bool weights = cfg == 0;
        const uint32_t ck = weights ? kinds : kinds & ~(uint32_t)VKMHA_MASK_BIAS;
        t_mask tm;
        const vkmha_mask *m = t_mask_make(&tm, rng, ck, s.batch, s.heads, s.len_q, s.len_k, 0,
                                          0, false);
        const bool rok = !vkmha_attention(ref, &s, q, k, v, m, want, weights ? want_w : NULL);
        for (int r = 0; r < 2; r++) {
            vkmha_attention_desc d = s;
            d.path = t_attention_runs[r].path, d.kv_splits = t_attention_runs[r].kv_splits;
            g_windows = 0;
            const vkmha_status st = vkmha_attention(gpu, &d, q, k, v, m, got,
                                                    weights ? got_w : NULL);
            char name[200], mname[64];
            snprintf(name, sizeof name,
                     "attention B 2 H 4 Hkv 2 Lq 37 Lk 700 dk 24 dv 28 (66 KiB of keys a head), "
                     "mask %s%s [range, %s]",
                     t_mask_name(ck, mname, sizeof mname), weights ? ", weights" : "",
                     t_attention_runs[r].name);
            report_windows(name, gpu, st,
                           rok && !st &&
                               attention_close(name, got, want, n.out, weights ? got_w : NULL,
                                               want_w, n.weights, 700));
        }
        if (!weights) { /* unfused: calls of one head, its matmuls in windows */
            vkmha_attention_desc du = s;
            du.path = VKMHA_ATTENTION_PATH_UNFUSED;
            g_windows = 0;
            const vkmha_status st = vkmha_attention(gpu, &du, q, k, v, m, got, NULL);
            const char *name = "unfused attention with 66 KiB of keys a head, mask "
                               "+padding+full+causal, in calls whose scores fit [range]";
            report_windows(name, gpu, st,
                           rok && !st &&
                               attention_close(name, got, want, n.out, NULL, NULL, 0, 700));
        }
        t_mask_free(&tm);
    }
    free(q), free(k), free(v), free(want), free(got), free(want_w), free(got_w);

    /* Non-finite scores across windows (a PyTorch float mask as the bias,
     * shared by the heads): row 0 -inf on its first 690 keys (its valid
     * keys only in a later window: the carried -inf maximum must restart),
     * row 1 -inf on every key (output and weights 0), row 2 a bias of +-50
     * (test_nonfinite takes larger logits, whose weights differ from the
     * reference's by an ulp of the score); with the weights, fused (windows)
     * and unfused (products). */
    {
        const vkmha_attention_desc nf = {1, 2, 1, 3, 700, 24, 24, 0, 0, 0, 0};
        const t_attention_sizes nn = t_attention_size(&nf);
        float *nq = t_random(rng, nn.q, -1, 1), *nk = t_random(rng, nn.k, -1, 1),
              *nv = t_random(rng, nn.v, -1, 1), *bias = t_alloc((size_t)3 * 700);
        for (size_t j = 0; j < 700; j++) {
            bias[j] = j < 690 ? -INFINITY : 0.0f;
            bias[700 + j] = -INFINITY;
            bias[1400 + j] = j % 3 ? -50.0f : 50.0f;
        }
        const vkmha_mask bm = {.kinds = VKMHA_MASK_BIAS, .bias = bias, .bias_batch = 1,
                               .bias_heads = 1};
        float *wo = t_alloc(nn.out), *go = t_alloc(nn.out), *ww = t_alloc(nn.weights),
              *gw = t_alloc(nn.weights);
        const bool rok = !vkmha_attention(ref, &nf, nq, nk, nv, &bm, wo, ww);
        for (int path = 0; path < 2; path++) {
            vkmha_attention_desc d = nf;
            d.path = path ? VKMHA_ATTENTION_PATH_UNFUSED : VKMHA_ATTENTION_PATH_FUSED;
            g_windows = 0;
            const vkmha_status st = vkmha_attention(gpu, &d, nq, nk, nv, &bm, go, gw);
            char name[200];
            snprintf(name, sizeof name,
                     "attention with 66 KiB of keys a head, -inf bias over the first window, "
                     "a fully -inf row, a bias of +-50, weights [range, %s]",
                     path ? "unfused" : "fused");
            report_windows(name, gpu, st,
                           rok && !st &&
                               attention_close(name, go, wo, nn.out, gw, ww, nn.weights, 700));
        }
        free(nq), free(nk), free(nv), free(bias), free(wo), free(go), free(ww), free(gw);
    }

    /* fp16: one head's 1500 keys of 24 halves (70 KiB). */
    {
        const vkmha_attention_desc h = {1, 2, 1, 5, 1500, 24, 24, 0, 0, 0, VKMHA_DTYPE_F16};
        const t_attention_sizes hn = t_attention_size(&h);
        float *fq = t_random(rng, hn.q, -2, 2), *fk = t_random(rng, hn.k, -2, 2),
              *fv = t_random(rng, hn.v, -1, 1);
        void *hq = t_to_dt(h.dtype, fq, hn.q), *hk = t_to_dt(h.dtype, fk, hn.k),
             *hv = t_to_dt(h.dtype, fv, hn.v);
        void *out[2] = {calloc(hn.out, 2), calloc(hn.out, 2)},
             *w[2] = {calloc(hn.weights, 2), calloc(hn.weights, 2)};
        t_mask hm;
        const vkmha_mask *mm = t_mask_make(&hm, rng, VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL,
                                           h.batch, h.heads, h.len_q, h.len_k, 0, 0, false);
        const vkmha_status rst = vkmha_attention(ref, &h, hq, hk, hv, mm, out[0], w[0]);
        float *o[2] = {t_from_dt(h.dtype, out[0], hn.out), NULL},
              *ww[2] = {t_from_dt(h.dtype, w[0], hn.weights), NULL};
        for (int path = 0; path < 2; path++) {
            vkmha_attention_desc hp = h;
            hp.path = path ? VKMHA_ATTENTION_PATH_UNFUSED : VKMHA_ATTENTION_PATH_AUTO;
            g_windows = 0;
            const vkmha_status st = vkmha_attention(gpu, &hp, hq, hk, hv, mm, out[1], w[1]);
            char name[200];
            snprintf(name, sizeof name,
                     "attention fp16 B 1 H 2 Hkv 1 Lq 5 Lk 1500 dk 24 (70 KiB of keys a head), "
                     "causal and key padding, weights [range, %s]",
                     path ? "unfused" : "fused");
            free(o[1]), free(ww[1]);
            o[1] = t_from_dt(h.dtype, out[1], hn.out);
            ww[1] = t_from_dt(h.dtype, w[1], hn.weights);
            const double u = 1.0 / 1024; /* one fp16 ulp at 1 */
            report_windows(name, gpu, st,
                           !rst && !st &&
                               t_close(name, "weights", ww[1], ww[0], hn.weights, 2 * u,
                                       2 * u) &&
                               t_close(name, "out", o[1], o[0], hn.out, 2 * u, 2 * u));
        }
        t_mask_free(&hm);
        free(fq), free(fk), free(fv), free(hq), free(hk), free(hv);
        for (int i = 0; i < 2; i++)
            free(out[i]), free(w[i]), free(o[i]), free(ww[i]);
    }

    /* Tensors: k and v of 141 KiB (70 KiB a head), masks and weights as
     * tensors. */
    {
        const vkmha_attention_desc t = {1, 2, 0, 20, 900, 20, 20, 0, 0, 0, 0};
        const t_attention_sizes tn = t_attention_size(&t);
        float *tq_h = t_random(rng, tn.q, -1, 1), *tk_h = t_random(rng, tn.k, -1, 1),
              *tv_h = t_random(rng, tn.v, -1, 1), *twant = t_alloc(tn.out),
              *twant_w = t_alloc(tn.weights);
        t_mask mt;
        t_mask_make(&mt, rng, kinds, t.batch, t.heads, t.len_q, t.len_k, 0, 0, false);
        vkmha_tensor *tq = put(gpu, VKMHA_DTYPE_F32, tn.q, tq_h),
                     *tk = put(gpu, VKMHA_DTYPE_F32, tn.k, tk_h),
                     *tv = put(gpu, VKMHA_DTYPE_F32, tn.v, tv_h),
                     *to = put(gpu, VKMHA_DTYPE_F32, tn.out, NULL),
                     *tw = put(gpu, VKMHA_DTYPE_F32, tn.weights, NULL), *tmk[3];
        vkmha_tensor_mask mask;
        const bool ok = put_mask(gpu, &mt, (size_t)t.len_k, (size_t)t.len_q * t.len_k,
                                 tn.weights, &mask, tmk) &&
                        tq && tk && tv && to && tw &&
                        !vkmha_attention(ref, &t, tq_h, tk_h, tv_h, &mt.m, twant, twant_w);
        g_windows = 0;
        const vkmha_status st = ok ? vkmha_attention_tensor(gpu, &t, tq, tk, tv, &mask, to, tw)
                                   : VKMHA_ERROR_INVALID_ARGUMENT;
        float *tgot = get(to, tn.out), *tgot_w = get(tw, tn.weights);
        const char *name = "vkmha_attention_tensor B 1 H 2 Lq 20 Lk 900 d 20 (70 KiB of keys a "
                           "head), every mask kind and the weights as tensors [range]";
        report_windows(name, gpu, st,
                       ok && !st &&
                           attention_close(name, tgot, twant, tn.out, tgot_w, twant_w,
                                           tn.weights, 900));
        vkmha_tensor_destroy(tq), vkmha_tensor_destroy(tk), vkmha_tensor_destroy(tv);
        vkmha_tensor_destroy(to), vkmha_tensor_destroy(tw);
        for (int i = 0; i < 3; i++)
            vkmha_tensor_destroy(tmk[i]);
        t_mask_free(&mt);
        free(tq_h), free(tk_h), free(tv_h), free(twant), free(twant_w), free(tgot), free(tgot_w);
    }
}

/* The layer whose key projections of one entry are past the 64 KiB range
 * (cross-attention of 2 queries over 700 keys, d_model 32, 4 heads: 88 KiB
 * of key projections an entry): they are written by their matmuls and read
 * by the fused attention in windows, with every mask kind (a bias per
 * head) and the attention weights, on host arrays and on tensors, and on
 * the unfused path (its matmuls one product at a time), against the
 * reference. */
static void layer_keys_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    const uint32_t kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_FULL | VKMHA_MASK_CAUSAL |
                           VKMHA_MASK_BIAS;
    enum { B = 2, LQ = 2, LK = 700, D = 32, H = 4 };
    t_layer e;
    t_layer_make(&e, rng, D, H, 0, B, LQ, LK, kinds);
    vkmha_mha *mg = NULL, *mr = NULL;
    float *want = t_alloc(e.n_out), *got = sentinels(e.n_out), *want_w = t_alloc(e.n_weights),
          *got_w = t_alloc(e.n_weights);
    vkmha_mha_io io = e.io;
    io.out = want, io.attn_weights = want_w;
    bool ok = !vkmha_mha_create(gpu, &e.desc, &mg) && !vkmha_mha_create(ref, &e.desc, &mr) &&
              !vkmha_mha_forward(mr, &io);
    if (!ok)
        t_diag("layer of 88 KiB of key projections: creation or reference: %s / %s",
               vkmha_context_last_error(gpu), vkmha_context_last_error(ref));
    io.out = got, io.attn_weights = got_w;
    io.attention_path = VKMHA_ATTENTION_PATH_FUSED;
    g_windows = 0;
    vkmha_status st = ok ? vkmha_mha_forward(mg, &io) : VKMHA_ERROR_INVALID_ARGUMENT;
    const char *name = "mha forward B 2 Lq 2 Lk 700 d_model 32 H 4 (key projections of 88 KiB "
                       "an entry), every mask kind, weights [range, fused]";
    report_windows(name, gpu, st,
                   ok && !st &&
                       t_close(name, "attn_weights", got_w, want_w, e.n_weights, 1e-6, 1e-5) &&
                       t_close(name, "out", got, want, e.n_out, T_LAYER_ATOL, T_LAYER_RTOL));

    /* The same on tensors, masks and weights as tensors. */
    const size_t n_kv = (size_t)B * LK * D;
    vkmha_tensor *tq = put(gpu, VKMHA_DTYPE_F32, e.n_out, e.io.query),
                 *tk = put(gpu, VKMHA_DTYPE_F32, n_kv, e.io.key),
                 *tv = put(gpu, VKMHA_DTYPE_F32, n_kv, e.io.value),
                 *to = put(gpu, VKMHA_DTYPE_F32, e.n_out, NULL),
                 *tw = put(gpu, VKMHA_DTYPE_F32, e.n_weights, NULL), *tm[3];
    vkmha_tensor_mask mask;
    const bool tok = ok && put_mask(gpu, &e.mask, (size_t)B * LK, (size_t)B * LQ * LK,
                                    e.n_weights, &mask, tm) &&
                     tq && tk && tv && to && tw;
    const vkmha_mha_tensors tio = {.batch = B, .len_q = LQ, .len_k = LK, .query = tq, .key = tk,
                                   .value = tv, .mask = &mask, .out = to, .attn_weights = tw};
    g_windows = 0;
    st = tok ? vkmha_mha_forward_tensor(mg, &tio) : VKMHA_ERROR_INVALID_ARGUMENT;
    float *tgot = get(to, e.n_out), *tgot_w = get(tw, e.n_weights);
    name = "vkmha_mha_forward_tensor of that layer, masks and weights as tensors [range]";
    report_windows(name, gpu, st,
                   tok && !st &&
                       t_close(name, "attn_weights", tgot_w, want_w, e.n_weights, 1e-6, 1e-5) &&
                       t_close(name, "out", tgot, want, e.n_out, T_LAYER_ATOL, T_LAYER_RTOL));
    vkmha_tensor_destroy(tq), vkmha_tensor_destroy(tk), vkmha_tensor_destroy(tv);
    vkmha_tensor_destroy(to), vkmha_tensor_destroy(tw);
    for (int i = 0; tok && i < 3; i++)
        vkmha_tensor_destroy(tm[i]);
    free(tgot), free(tgot_w);

    /* Unfused: its matmuls one (entry, head) product at a time. */
    io.attention_path = VKMHA_ATTENTION_PATH_UNFUSED;
    g_windows = 0;
    st = ok ? vkmha_mha_forward(mg, &io) : VKMHA_ERROR_INVALID_ARGUMENT;
    report_windows("the same layer on the unfused path, one product at a time [range]", gpu,
                   st,
                   ok && !st &&
                       t_close(name, "attn_weights", got_w, want_w, e.n_weights, 1e-6, 1e-5) &&
                       t_close(name, "out", got, want, e.n_out, T_LAYER_ATOL, T_LAYER_RTOL));
    vkmha_mha_destroy(mg), vkmha_mha_destroy(mr);
    free(want), free(got), free(want_w), free(got_w);
    t_layer_free(&e);
}

/* A KV cache past the 64 KiB range (6 entries of 19 KiB of keys): a
 * prefill of 150 tokens (80 unfused, whose scores of one entry must fit),
 * then three steps of one token, for every entry in one call, on the fused
 * and the unfused path, each against the reference (fused: the cache read
 * in windows; unfused: calls of entries whose scores fit, the cache read by
 * the matmuls, one product at a time, in windows). */
static void kv_cache_range_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    enum { B = 6, P = 150, STEPS = 3, CAP = 300 };
    t_layer l;
    t_layer_make(&l, rng, 16, 2, 0, B, P + STEPS, 0, 0); /* inputs of all P + STEPS tokens */
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
        for (uint32_t t0 = 0, n = prefill; ok && t0 < prefill + STEPS; t0 += n, n = 1) {
            for (uint32_t b = 0; b < B; b++) /* tokens t0 .. t0 + n - 1 of each sequence */
                memcpy(x + (size_t)b * n * row, l.io.query + b * seq + (size_t)t0 * row,
                       (size_t)n * row * 4);
            vkmha_mha_io io = {.batch = B, .len_q = n, .query = x, .key = x, .value = x,
                               .mask = &causal, .attention_path = path
                                                                     ? VKMHA_ATTENTION_PATH_UNFUSED
                                                                     : VKMHA_ATTENTION_PATH_FUSED};
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
                 "KV cache of %u entries x %u positions past the range (%u KiB of keys): a "
                 "prefill of %u and %u steps of every entry match the reference [range, %s], "
                 "%s",
                 B, CAP, B * 2 * CAP * 8 * 4 / 1024, prefill, STEPS, path ? "unfused" : "fused",
                 path ? "read by one product at a time" : "read in windows");
        vkmha_kv_cache_destroy(cg), vkmha_kv_cache_destroy(cr);
        free(x), free(want), free(got);
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
static void kv_cache_entry_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
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

/* A prefill into a KV cache whose one entry's query is past the 64 KiB
 * range (2 entries, 1300 tokens of d_model 16, 2 heads over 1: 81 KiB a
 * query): calls of query rows, the first appending the entry's keys and
 * values, the others attending over the cache, the causal mask moved with
 * the rows; then two steps of one token. Fused and unfused, each call
 * against the reference. */
static void kv_cache_rows_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    enum { B = 2, L = 1300, CAP = 1400, D = 16, STEPS = 2 };
    t_layer l;
    t_layer_make(&l, rng, D, 2, 1, B, L, 0, 0);
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    vkmha_mha *mg = NULL, *mr = NULL;
    bool made = !vkmha_mha_create(gpu, &l.desc, &mg) && !vkmha_mha_create(ref, &l.desc, &mr);
    float *want = t_alloc(l.n_out), *got = sentinels(l.n_out);
    for (int path = 0; path < 2 && made; path++) {
        vkmha_kv_cache *cg = NULL, *cr = NULL;
        const vkmha_kv_cache_desc cd = {.batch = B, .capacity = CAP};
        bool ok = !vkmha_kv_cache_create(mg, &cd, &cg) && !vkmha_kv_cache_create(mr, &cd, &cr);
        const vkmha_attention_path ap =
            path ? VKMHA_ATTENTION_PATH_UNFUSED : VKMHA_ATTENTION_PATH_FUSED;
        for (int call = 0; call <= STEPS && ok; call++) {
            /* The prefill, then steps of one token an entry (any of the
             * inputs: [B][1][D] is B rows). */
            const uint32_t n = call ? 1 : L;
            const float *x = l.io.query + (size_t)call * D;
            vkmha_mha_io io = {.batch = B, .len_q = n, .query = x, .key = x, .value = x,
                               .mask = &causal, .attention_path = ap};
            io.out = want, io.kv_cache = cr;
            const vkmha_status rst = vkmha_mha_forward(mr, &io);
            io.out = got, io.kv_cache = cg;
            g_splits = 0;
            const vkmha_status st = vkmha_mha_forward(mg, &io);
            if (st)
                t_diag("KV cache rows, call %d: %s", call, vkmha_context_last_error(gpu));
            ok = !rst && !st && (call || g_splits > 0) &&
                 t_close("KV cache rows", "out", got, want, (size_t)B * n * D, T_LAYER_ATOL,
                         T_LAYER_RTOL);
        }
        t_report(ok,
                 "KV cache prefill of 2 entries x 1300 tokens (81 KiB a query) in calls of "
                 "query rows, causal, then %d steps: match the reference [range, %s]",
                 STEPS, path ? "unfused" : "fused");
        vkmha_kv_cache_destroy(cg), vkmha_kv_cache_destroy(cr);
    }
    vkmha_mha_destroy(mg), vkmha_mha_destroy(mr);
    free(want), free(got);
    t_layer_free(&l);
}

/* One entry of the layer past the 64 KiB range (self-attention of 1300
 * tokens of d_model 16, 2 heads over 1: query, key and output of 81 KiB,
 * key projections of 41 KiB): calls of query rows, each with all of the
 * entry's keys (their projections bind the key and value inputs in
 * windows), with key padding, a full mask, the causal
 * mask and a bias shared by the heads moved with the rows, fused and
 * unfused, against the reference. With per-head bias or attention weights,
 * whose heads interleave the rows, it stays refused naming io->query. */
static void layer_rows_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    const uint32_t L = 1300, kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_FULL |
                                     VKMHA_MASK_CAUSAL | VKMHA_MASK_BIAS;
    t_layer e;
    t_layer_make(&e, rng, 16, 2, 1, 1, L, 0, 0); /* GQA: key projections of 41 KiB */
    t_mask m;
    e.io.mask = t_mask_make(&m, rng, kinds, 1, 2, L, L, 0, 1, false); /* bias_heads 1 */
    vkmha_mha *mg = NULL, *mr = NULL;
    float *want = t_alloc(e.n_out), *got = sentinels(e.n_out);
    bool ok = !vkmha_mha_create(gpu, &e.desc, &mg) && !vkmha_mha_create(ref, &e.desc, &mr);
    for (int path = 0; path < 2 && ok; path++) {
        vkmha_mha_io io = e.io;
        io.attention_path = path ? VKMHA_ATTENTION_PATH_UNFUSED : VKMHA_ATTENTION_PATH_FUSED;
        io.out = want;
        vkmha_status rst = vkmha_mha_forward(mr, &io);
        io.out = got;
        g_splits = 0;
        vkmha_status st = vkmha_mha_forward(mg, &io);
        char name[200];
        snprintf(name, sizeof name,
                 "mha forward of one entry of 1300 tokens, d_model 16, GQA (81 KiB) in calls "
                 "of query rows, every mask kind [range, %s]",
                 path ? "unfused" : "fused");
        report_split(name, gpu, st,
                     !rst && !st &&
                         t_close(name, "out", got, want, e.n_out, T_LAYER_ATOL, T_LAYER_RTOL));
    }
    t_mask_free(&m);
    e.io.mask = t_mask_make(&m, rng, kinds, 1, 2, L, L, 0, 0, false); /* per head */
    vkmha_mha_io io = e.io;
    io.out = got;
    for (size_t i = 0; i < e.n_out; i++)
        got[i] = SENTINEL;
    report_refused(ref, gpu, rng, mg ? vkmha_mha_forward(mg, &io) : VKMHA_ERROR_INVALID_ARGUMENT,
                   "vkmha_mha_forward", "io->query", "maxStorageBufferRange",
                   untouched(got, e.n_out),
                   "mha forward of that entry with a bias per head [range]");
    vkmha_mha_destroy(mg), vkmha_mha_destroy(mr);
    free(want), free(got);
    t_mask_free(&m);
    t_layer_free(&e);
}

static void range_cases(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, const char *limit)
{
    char label[200];
    /* Past maxStorageBufferRange a matmul binds windows of its operands;
     * past maxMemoryAllocationSize one product runs as calls of blocks (the
     * log says "split into" for both). */
    const bool windows = strstr(limit, "Range") != NULL;
    /* Arrays of 80 KiB: above both lowered limits (64 and 32 KiB). */
    float *a = t_random(rng, 160 * 128, -1, 1), *b = t_random(rng, 8 * 128, -1, 1);
    if (windows) {
        /* A over rows; B (op T: [n][k]) over its rows, C over both, with a
         * bias; both at once; odd sizes; vec4 loads (k % 4 == 0). */
        matmul_case(ref, gpu, rng, 1, 160, 8, 128, VKMHA_OP_N, false);
        matmul_case(ref, gpu, rng, 1, 7, 161, 127, VKMHA_OP_T, false);
        matmul_case(ref, gpu, rng, 1, 100, 120, 200, VKMHA_OP_T, false);
        matmul_case(ref, gpu, rng, 1, 150, 3, 129, VKMHA_OP_N, false);
        /* B past the range with op N: ranges of k (rows of B), each added
         * to C by the next; with A and C past it too; odd sizes; a row of
         * a few (the few-rows matmul on CPU devices). */
        matmul_case(ref, gpu, rng, 1, 2, 160, 128, VKMHA_OP_N, false);
        matmul_case(ref, gpu, rng, 1, 150, 140, 131, VKMHA_OP_N, false);
        matmul_case(ref, gpu, rng, 1, 33, 301, 70, VKMHA_OP_N, false);
        matmul_16bit_case(ref, gpu, rng, VKMHA_DTYPE_F16, 21, 301, 150, VKMHA_OP_N);
        matmul_16bit_case(ref, gpu, rng, VKMHA_DTYPE_BF16, 21, 301, 150, VKMHA_OP_N);
        /* A tensor past the range: created; vkmha_matmul_tensor binds it in
         * windows (b, op T: [n][k]). */
        {
            const uint32_t n = 160, k = 128, m = 5; /* b: 80 KiB */
            const vkmha_tensor_desc tb = {VKMHA_DTYPE_F32, 2, {n, k}},
                                    ta = {VKMHA_DTYPE_F32, 2, {m, k}},
                                    tc = {VKMHA_DTYPE_F32, 2, {m, n}};
            vkmha_tensor *xa = NULL, *xb = NULL, *xc = NULL;
            float *ha = t_random(rng, (size_t)m * k, -1, 1), *hb = t_random(rng, (size_t)n * k, -1, 1);
            float *want_t = t_alloc((size_t)m * n), *got_t = sentinels((size_t)m * n);
            vkmha_matmul_desc mt = {0};
            mt.m = m, mt.n = n, mt.k = k, mt.op_b = VKMHA_OP_T;
            vkmha_status st = vkmha_tensor_create(gpu, &tb, &xb);
            bool ok = !st && !vkmha_tensor_create(gpu, &ta, &xa) &&
                      !vkmha_tensor_create(gpu, &tc, &xc) &&
                      !vkmha_tensor_upload(xa, 0, ha, (uint64_t)m * k * 4) &&
                      !vkmha_tensor_upload(xb, 0, hb, (uint64_t)n * k * 4) &&
                      !vkmha_matmul(ref, &mt, ha, hb, NULL, want_t);
            g_splits = 0;
            vkmha_status sm = ok ? vkmha_matmul_tensor(gpu, &mt, xa, xb, NULL, xc) : st;
            ok = ok && !sm && !vkmha_tensor_download(xc, 0, got_t, (uint64_t)m * n * 4) &&
                 g_splits > 0 &&
                 t_close("tensor b of 80 KiB", "c", got_t, want_t, (size_t)m * n,
                         2e-6 * sqrt((double)k), 1e-5);
            if (!ok)
                t_diag("%s", vkmha_context_last_error(gpu));
            t_report(ok, "tensor b of 80 KiB past the range: created, vkmha_matmul_tensor in "
                         "windows matches the reference: %s",
                     vkmha_status_string(sm));
            vkmha_tensor_destroy(xa), vkmha_tensor_destroy(xb), vkmha_tensor_destroy(xc);
            free(ha), free(hb), free(want_t), free(got_t);
        }
        /* Batched operands past the range: calls of fewer products. */
        matmul_case(ref, gpu, rng, 2, 80, 8, 128, VKMHA_OP_N, true);
        matmul_case(ref, gpu, rng, 5, 30, 40, 100, VKMHA_OP_T, false);
        tensor_range_cases(ref, gpu, rng);
        /* Keys past the range: on CPU devices the default fused kernel
         * reads them through texel views of whole buffers; the GPUs' kernel
         * (shared memory, forced here) reads them in windows. */
        texel_keys_case(ref, gpu, rng);
        vkmha_debug_options sd = {.max_storage_buffer_range = 64 * 1024,
                                  .fused_kernel = VKMHA_FUSED_KERNEL_SHARED};
        vkmha_context *shared = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &sd, count_splits, NULL);
        key_window_cases(ref, shared, rng);
        layer_keys_case(ref, shared, rng);
        kv_cache_range_case(ref, shared, rng);
        kv_cache_entry_case(ref, shared, rng);
        kv_cache_rows_case(ref, shared, rng);
        t_report_validation(shared);
        vkmha_context_destroy(shared);
        layer_rows_case(ref, gpu, rng);
    } else {
        /* Host arrays past maxMemoryAllocationSize (each is copied into one
         * allocation): calls of blocks of rows of A and C and, with op T,
         * columns of C (rows of B), with a bias; batched, per product. */
        matmul_case(ref, gpu, rng, 1, 160, 8, 128, VKMHA_OP_N, false);
        matmul_case(ref, gpu, rng, 1, 7, 161, 127, VKMHA_OP_T, false);
        matmul_case(ref, gpu, rng, 1, 100, 120, 200, VKMHA_OP_T, false);
        matmul_case(ref, gpu, rng, 3, 90, 70, 130, VKMHA_OP_T, false);
        /* B past it with op N: blocks of its rows (ranges of k), one
         * submission each, summed into C on the device (16-bit C: in fp32,
         * added by the last block); odd sizes, with a bias. */
        matmul_case(ref, gpu, rng, 1, 2, 160, 128, VKMHA_OP_N, false);
        matmul_case(ref, gpu, rng, 1, 7, 131, 203, VKMHA_OP_N, false);
        matmul_16bit_case(ref, gpu, rng, VKMHA_DTYPE_F16, 21, 301, 150, VKMHA_OP_N);
        matmul_16bit_case(ref, gpu, rng, VKMHA_DTYPE_BF16, 21, 301, 150, VKMHA_OP_N);
        /* A KV cache whose keys (2 x 2 x 300 x 8 floats: 38 KiB) one
         * allocation cannot hold: refused naming what to lower, unless
         * the context makes sparse tensors (then: sparse_cases). */
        vkmha_context_info info;
        vkmha_context_get_info(gpu, &info);
        if (!info.sparse_tensors) {
            kv_cache_refused(ref, gpu, rng, 300, limit,
                             "a KV cache of 38 KiB of keys [maxMemoryAllocationSize]");
        } else {
            t_report(info.max_tensor_bytes > 32 * 1024,
                     "sparse tensors past maxMemoryAllocationSize: max_tensor_bytes %llu",
                     (unsigned long long)info.max_tensor_bytes);
        }
    }

    /* Host arrays past the limit: the softmax and the attention run as
     * several calls (whole batch entries, then heads, then query rows of one
     * head; the log says "split into"), every mask kind, against the
     * reference. */
    softmax_case(ref, gpu, rng, 37, 75);  /* B 2 H 3: entries */
    softmax_case(ref, gpu, rng, 300, 40); /* heads */
    softmax_case(ref, gpu, rng, 600, 40); /* rows of one head, the causal mask moved */
    const uint32_t kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_FULL | VKMHA_MASK_CAUSAL |
                           VKMHA_MASK_BIAS;
    const vkmha_attention_desc by_entry = {4, 2, 0, 64, 64, 16, 16, 0, 0, 0, 0},
                               by_head = {1, 8, 2, 100, 50, 16, 12, 0, 0, 0, 0},
                               by_row = {1, 1, 0, 500, 40, 16, 16, 0, 0, 0, 0};
    attention_case(ref, gpu, rng, &by_entry, kinds, true); /* weights of 128 KiB */
    attention_case(ref, gpu, rng, &by_head, kinds, true);  /* GQA: one query head a call */
    attention_case(ref, gpu, rng, &by_row, kinds, true);

    /* Split and merge heads: calls of whole batch entries (4 of 25 KiB);
     * one entry past the limit: blocks of rows and heads (a transpose), d 28
     * element by element and 32 in vec4 rows (88 and 101 KiB an entry). */
    for (int split = 1; split >= 0; split--) {
        char fmt[160];
        snprintf(fmt, sizeof fmt, "%%s_heads B 4 L 100 H 4 d 16 (100 KiB) in calls of batch "
                                  "entries [%s]", limit);
        heads_case(ref, gpu, rng, split, &(vkmha_heads_desc){4, 100, 4, 16, 0}, fmt);
        for (uint32_t dim = 28; dim <= 32; dim += 4) {
            snprintf(fmt, sizeof fmt, "%%s_heads B 2 L 161 H 5 d %u in blocks of rows and "
                                      "heads [%s]", dim, limit);
            heads_case(ref, gpu, rng, split, &(vkmha_heads_desc){2, 161, 5, dim, 0}, fmt);
        }
    }
    /* One head's rows past it (601 x 30 floats: 70 KiB): blocks of rows of
     * one head, both ways. */
    for (int split = 1; split >= 0; split--) {
        char fmt[160];
        snprintf(fmt, sizeof fmt, "%%s_heads B 2 L 601 H 3 d 30 (70 KiB a head) in blocks of "
                                  "rows of one head [%s]", limit);
        heads_case(ref, gpu, rng, split, &(vkmha_heads_desc){2, 601, 3, 30, 0}, fmt);
    }

    /* Attention: q, k, v, out of 8 KiB, scores [1][2][64][256] of 128 KiB. */
    vkmha_attention_desc ad = {1, 2, 0, 64, 256, 16, 16, 0, VKMHA_ATTENTION_PATH_UNFUSED, 0, 0};
    float *q = t_random(rng, 2 * 64 * 16, -1, 1), *k = t_random(rng, 2 * 256 * 16, -1, 1),
          *v = t_random(rng, 2 * 256 * 16, -1, 1);
    float *out = sentinels(2 * 64 * 16), *w = sentinels(2 * 64 * 256), *want = t_alloc(2 * 64 * 16);
    /* The unfused path asked for: calls whose scores fit (one head, 64
     * KiB), against the reference. */
    snprintf(label, sizeof label, "unfused attention with scores of 128 KiB [%s]", limit);
    vkmha_status rst = vkmha_attention(ref, &ad, q, k, v, NULL, want, NULL);
    g_splits = 0;
    vkmha_status st = vkmha_attention(gpu, &ad, q, k, v, NULL, out, NULL);
    report_split(label, gpu, st,
                 !st && !rst &&
                     attention_close(label, out, want, 2 * 64 * 16, NULL, NULL, 0, 256));
    ad.path = VKMHA_ATTENTION_PATH_FUSED;
    for (size_t i = 0; i < 2 * 64 * 16; i++)
        out[i] = SENTINEL;
    st = vkmha_attention(gpu, &ad, q, k, v, NULL, out, NULL);
    t_report(!st && !rst &&
                 attention_close("fused above the limit", out, want, 2 * 64 * 16, NULL, NULL, 0,
                                 256),
             "fused attention with scores of 128 KiB above the limit runs and matches the "
             "reference [%s]: %s",
             limit, vkmha_status_string(st));

    /* The layer: weights above the limit (past the range: the projections
     * bind them in windows; past maxMemoryAllocationSize: kept in blocks of
     * rows, one projection a block), on both attention paths, against the
     * reference. */
    t_layer big;
    t_layer_make(&big, rng, 160, 4, 0, 1, 2, 0, 0); /* every weight: 100 KiB */
    for (int sdt = 0; sdt < (windows ? 1 : 2); sdt++) { /* fp16 weights: 50 KiB */
        big.desc.storage_dtype = sdt ? VKMHA_DTYPE_F16 : VKMHA_DTYPE_F32;
        vkmha_mha *mha = NULL, *mr_big = NULL;
        snprintf(label, sizeof label, "mha_create with w_q of %s [%s]",
                 sdt ? "50 KiB stored as fp16" : "100 KiB", limit);
        g_splits = 0;
        st = vkmha_mha_create(gpu, &big.desc, &mha);
        const int made_split = g_splits;
        float *got_b = sentinels(big.n_out), *want_b = t_alloc(big.n_out);
        bool ok = !st && !vkmha_mha_create(ref, &big.desc, &mr_big) &&
                  (windows || made_split == 4);
        if (st)
            t_diag("%s: %s", label, vkmha_context_last_error(gpu));
        vkmha_mha_io io = big.io;
        io.out = want_b;
        ok = ok && !vkmha_mha_forward(mr_big, &io);
        for (int path = 0; path < 2 && ok; path++) {
            io.out = got_b;
            io.attention_path = path ? VKMHA_ATTENTION_PATH_UNFUSED : VKMHA_ATTENTION_PATH_FUSED;
            g_splits = 0;
            st = vkmha_mha_forward(mha, &io);
            if (st)
                t_diag("%s", vkmha_context_last_error(gpu));
            ok = !st && (!windows || g_splits > 0) &&
                 t_close(label, "out", got_b, want_b, big.n_out, T_LAYER_ATOL, T_LAYER_RTOL);
        }
        t_report(ok, "%s: created, its projections in %s, both paths match the reference",
                 label, windows ? "windows" : "blocks of rows (4 weights split)");
        vkmha_mha_destroy(mha);
        vkmha_mha_destroy(mr_big);
        free(got_b), free(want_b);
    }
    t_layer_free(&big);

    /* The layer on inputs past the limit that one batch entry fits: calls of
     * whole entries, each entry's key padding moving with it. */
    {
        t_layer e;
        t_layer_make(&e, rng, 16, 2, 0, 3, 400, 0, VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL);
        vkmha_mha *mg = NULL, *mr = NULL;
        float *got_e = sentinels(e.n_out), *want_e = t_alloc(e.n_out);
        vkmha_mha_io io = e.io;
        io.attn_weights = NULL; /* [3][2][400][400]: one entry's would not fit */
        bool ok = !vkmha_mha_create(gpu, &e.desc, &mg) && !vkmha_mha_create(ref, &e.desc, &mr);
        io.out = want_e;
        ok = ok && !vkmha_mha_forward(mr, &io);
        io.out = got_e;
        g_splits = 0;
        st = ok ? vkmha_mha_forward(mg, &io) : VKMHA_ERROR_INVALID_ARGUMENT;
        if (st)
            t_diag("%s", vkmha_context_last_error(gpu));
        t_report(ok && !st && g_splits > 0 &&
                     t_close("layer by entries", "out", got_e, want_e, e.n_out, T_LAYER_ATOL,
                             T_LAYER_RTOL),
                 "mha forward B 3 L 400 d_model 16 (query of 75 KiB) in calls of batch entries "
                 "[%s]: %s, matches the reference",
                 limit, vkmha_status_string(st));
        vkmha_mha_destroy(mg);
        vkmha_mha_destroy(mr);
        free(got_e), free(want_e);
        t_layer_free(&e);
    }

    t_layer l;
    t_layer_make(&l, rng, 16, 2, 0, 1, 640, 0, VKMHA_MASK_CAUSAL); /* query: 40 KiB */
    float *got = sentinels(l.n_out), *want_l = t_alloc(l.n_out);
    vkmha_mha *mg = NULL, *mr = NULL;
    st = vkmha_mha_create(gpu, &l.desc, &mg);
    t_report(st == VKMHA_SUCCESS && vkmha_mha_create(ref, &l.desc, &mr) == VKMHA_SUCCESS,
             "mha_create d_model 16 under the limit [%s]: %s", limit, vkmha_status_string(st));
    if (mg && mr) {
        vkmha_mha_io io = l.io;
        io.out = got;
        snprintf(label, sizeof label, "mha forward with io->query of 40 KiB [%s]", limit);
        bool query_over = strstr(limit, "Allocation") != NULL; /* 32 KiB, not 64 */
        if (query_over) {
            report_refused(ref, gpu, rng, vkmha_mha_forward(mg, &io), "vkmha_mha_forward",
                           "io->query", limit, untouched(got, l.n_out), label);
            io.len_q = 320; /* 20 KiB */
        }
        /* The unfused path's scores (2 x Lq^2 x 4 bytes) past the limit:
         * calls of query rows whose scores fit. */
        io.attention_path = VKMHA_ATTENTION_PATH_UNFUSED;
        io.out = want_l;
        rst = vkmha_mha_forward(mr, &io);
        io.out = got;
        snprintf(label, sizeof label, "unfused mha forward with scores above the limit [%s]",
                 limit);
        size_t n = (size_t)io.len_q * 16;
        g_splits = 0;
        st = vkmha_mha_forward(mg, &io);
        report_split(label, gpu, st,
                     !st && !rst &&
                         t_close(label, "out", got, want_l, n, T_LAYER_ATOL, T_LAYER_RTOL));
        io.attention_path = VKMHA_ATTENTION_PATH_AUTO;
        for (size_t i = 0; i < l.n_out; i++)
            got[i] = SENTINEL;
        st = vkmha_mha_forward(mg, &io);
        if (st)
            t_diag("%s", vkmha_context_last_error(gpu));
        t_report(!st && !rst && t_close("fused layer above the limit", "out", got, want_l, n,
                                        T_LAYER_ATOL, T_LAYER_RTOL),
                 "the same forward on the fused path runs and matches the reference [%s]: %s",
                 limit, vkmha_status_string(st));
    }
    vkmha_mha_destroy(mg);
    vkmha_mha_destroy(mr);
    free(got), free(want_l);
    t_layer_free(&l);
    free(a), free(b), free(q), free(k), free(v), free(out), free(w),
        free(want);
}

/* The debug log: the last attention plan line ("fused attention (...)" or
 * "unfused attention"). */
static char g_plan[512];

static void record_plan(void *user, vkmha_log_level level, vkmha_status status,
                        const char *msg)
{
    if (level == VKMHA_LOG_DEBUG && strstr(msg, " attention"))
        snprintf(g_plan, sizeof g_plan, "%s", msg);
    t_log(user, level, status, msg);
}

/* One attention of head dims dk, dv on `path`: the status, and for a
 * success outputs that match the reference and a plan line that says
 * `want_plan` ("fused" or "unfused"); for a failure a message that says
 * want_plan. */
static void shared_attention_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                                  uint32_t dk, uint32_t dv, uint32_t path, vkmha_status want,
                                  const char *want_plan)
{
    const vkmha_attention_desc s = {2, 2, 0, 19, 23, dk, dv, 0, path, 0, 0};
    const t_attention_sizes n = t_attention_size(&s);
    float *q = t_random(rng, n.q, -1, 1), *k = t_random(rng, n.k, -1, 1),
          *v = t_random(rng, n.v, -1, 1), *want_out = t_alloc(n.out), *got = t_alloc(n.out);
    char name[160];
    snprintf(name, sizeof name, "attention dk %u dv %u, 8 KiB of shared memory, path %s", dk,
             dv, path == VKMHA_ATTENTION_PATH_FUSED ? "FUSED" : "AUTO");
    g_plan[0] = '\0';
    vkmha_status st = vkmha_attention(gpu, &s, q, k, v, NULL, got, NULL);
    bool ok = st == want;
    if (st == VKMHA_SUCCESS) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, ": %s attention", want_plan);
        ok = ok && vkmha_attention(ref, &s, q, k, v, NULL, want_out, NULL) == VKMHA_SUCCESS &&
             attention_close(name, got, want_out, n.out, NULL, NULL, 0, s.len_k) &&
             strstr(g_plan, prefix) != NULL;
    } else if (want_plan && !strstr(vkmha_context_last_error(gpu), want_plan)) {
        t_diag("%s: \"%s\" does not say \"%s\"", name, vkmha_context_last_error(gpu),
               want_plan);
        ok = false;
    }
    t_diag("%s: plan \"%s\"", name, g_plan);
    t_report(ok, "%s: %s%s%s", name, vkmha_status_string(want),
             want == VKMHA_SUCCESS ? ", matches the reference, runs " : ", saying ",
             want_plan ? want_plan : "");
    free(q), free(k), free(v), free(want_out), free(got);
}

/* maxComputeSharedMemorySize lowered to 8 KiB with the workgroup-shared
 * fused kernel forced: no block of the d256 class fits (the smallest takes
 * 10412 bytes, src/vk_pipeline.c), so vkmha_context_get_kernels lists
 * flash_d256 as not available and every kernel it lists fits 8 KiB; heads
 * up to 128 wide still run fused, wider ones unfused (the default path) or
 * not at all (the fused path: UNSUPPORTED). */
static void shared_memory_cases(vkmha_context *ref, t_rng *rng)
{
    vkmha_debug_options small = {.fused_kernel = VKMHA_FUSED_KERNEL_SHARED,
                                 .max_shared_memory = 8192};
    vkmha_context *gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &small, record_plan, NULL);
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    t_report(info.device.max_shared_memory == 8192,
             "get_info reports maxComputeSharedMemorySize %u (lowered)",
             info.device.max_shared_memory);
    vkmha_kernel_info all[64], d128, d256;
    uint32_t n = 64;
    bool ok = vkmha_context_get_kernels(gpu, &n, all) == VKMHA_SUCCESS && n <= 64;
    for (uint32_t i = 0; ok && i < n; i++)
        if (all[i].shared_bytes > 8192) {
            t_diag("%s takes %u bytes of shared memory", all[i].name, all[i].shared_bytes);
            ok = false;
        }
    ok = ok && kernel_find(gpu, "flash_d128", &d128) && d128.available &&
         kernel_find(gpu, "flash_d256", &d256) && !d256.available && !d256.shader[0] &&
         d256.param_count == 0 && !strcmp(d256.op, "attention");
    t_report(ok, "get_kernels with 8 KiB of shared memory: flash_d256 not available, "
                 "flash_d128 available (%u bytes), every kernel within 8 KiB",
             d128.shared_bytes);
    shared_attention_case(ref, gpu, rng, 100, 72, VKMHA_ATTENTION_PATH_FUSED, VKMHA_SUCCESS,
                          "fused");
    shared_attention_case(ref, gpu, rng, 200, 136, VKMHA_ATTENTION_PATH_AUTO, VKMHA_SUCCESS,
                          "unfused");
    shared_attention_case(ref, gpu, rng, 200, 136, VKMHA_ATTENTION_PATH_FUSED,
                          VKMHA_ERROR_UNSUPPORTED, "head dims up to 128");
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
}

/* ---- tensors past maxMemoryAllocationSize ---------------------------------- */

/* A tensor of 1.5 MiB past the 64 KiB allocations (24 pages): a round
 * trip through upload and download is exact, whole and in a piece across
 * its first page boundary; then vkmha_matmul_tensor with it as b (op T)
 * matches the reference. Past 1 MiB: Mesa 25's lavapipe reads texel views
 * of a sparse buffer wrong from there (vkmha makes none for them). */
static void sparse_tensor_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    enum { N = 3001, K = 128, M = 5 }; /* b: 1.47 MiB */
    const size_t nb = (size_t)N * K;
    float *hb = t_random(rng, nb, -1, 1), *back = sentinels(nb), *ha = t_random(rng, M * K, -1, 1);
    float piece[6], *want = t_alloc(M * N), *got = sentinels(M * N);
    vkmha_tensor *a = put(gpu, VKMHA_DTYPE_F32, M * K, ha), *b = put(gpu, VKMHA_DTYPE_F32, nb, hb),
                 *c = put(gpu, VKMHA_DTYPE_F32, M * N, NULL);
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    bool trip = b && !vkmha_tensor_download(b, 0, back, nb * 4) && !memcmp(back, hb, nb * 4) &&
                !vkmha_tensor_download(b, 65536 - 12, piece, sizeof piece) &&
                !memcmp(piece, hb + 16384 - 3, sizeof piece);
    t_report(trip && info.device_memory_bytes >= nb * 4,
             "a tensor of 1.5 MiB past maxMemoryAllocationSize (64 KiB): created, uploaded and "
             "downloaded exactly, whole and across a page boundary");
    vkmha_matmul_desc d = {0};
    d.m = M, d.n = N, d.k = K, d.op_b = VKMHA_OP_T;
    g_splits = 0;
    const vkmha_status st = a && b && c ? vkmha_matmul_tensor(gpu, &d, a, b, NULL, c)
                                        : VKMHA_ERROR_INVALID_ARGUMENT;
    free(got);
    got = get(c, M * N);
    report_split("vkmha_matmul_tensor, b of 1.5 MiB past maxMemoryAllocationSize", gpu, st,
                 !vkmha_matmul(ref, &d, ha, hb, NULL, want) &&
                     t_close("sparse b", "c", got, want, M * N, 2e-6 * sqrt((double)K), 1e-5));
    vkmha_tensor_destroy(a), vkmha_tensor_destroy(b), vkmha_tensor_destroy(c);
    free(hb), free(back), free(ha), free(want), free(got);
}

/* A tensor create refused: UNSUPPORTED naming desc->dims and `why`, nothing
 * held, and the context still works (report_refused's follow-up). */
static void tensor_refused(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                           const vkmha_tensor_desc *d, const char *why, const char *label)
{
    vkmha_context_info before, after;
    vkmha_context_get_info(gpu, &before);
    vkmha_tensor *t = (vkmha_tensor *)(uintptr_t)1;
    const vkmha_status st = vkmha_tensor_create(gpu, d, &t);
    vkmha_context_get_info(gpu, &after);
    report_refused(ref, gpu, rng, st, "vkmha_tensor_create", "desc->dims", why,
                   !t && after.device_memory_bytes == before.device_memory_bytes, label);
}

/* A context of 64 KiB allocations that makes no sparse tensors (`why`:
 * what its message says): max_tensor_bytes is the allocation; a 70 KiB
 * tensor is refused naming desc->dims and why, a KV cache of 75 KiB of keys
 * naming desc->capacity. */
static void no_sparse_cases(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, const char *why)
{
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    t_report(!info.sparse_tensors && info.max_tensor_bytes == 64 * 1024,
             "no sparse tensors [%s]: max_tensor_bytes is maxMemoryAllocationSize (%llu)", why,
             (unsigned long long)info.max_tensor_bytes);
    const vkmha_tensor_desc past = {VKMHA_DTYPE_F32, 1, {70 * 1024 / 4}};
    char label[120];
    snprintf(label, sizeof label, "a tensor of 70 KiB past maxMemoryAllocationSize [%s]", why);
    tensor_refused(ref, gpu, rng, &past, why, label);
    snprintf(label, sizeof label, "a KV cache of 75 KiB of keys [%s]", why);
    kv_cache_refused(ref, gpu, rng, 600, "max_tensor_bytes", label);
}

/* Tensors past maxMemoryAllocationSize (64 KiB, and maxStorageBufferRange
 * 64 KiB: every tensor past the range is past it too). Where the context
 * binds sparse buffers (Mesa 25's lavapipe; not Mesa 22's), they are made
 * of several allocations and every op, the layer and a KV cache's own
 * tensors run on them against the reference; an allocation failing on the
 * second page leaves nothing held; a tensor past max_tensor_bytes is
 * refused. Where it does not, and with desc->debug->no_sparse_binding,
 * they are refused naming desc->dims and why. */
static void sparse_cases(vkmha_context *ref, t_rng *rng)
{
    const vkmha_debug_options sd = {.max_storage_buffer_range = 64 * 1024,
                                    .max_allocation_size = 64 * 1024};
    vkmha_context *gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &sd, count_splits, NULL);
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    const vkmha_tensor_desc past = {VKMHA_DTYPE_F32, 1, {70 * 1024 / 4}}; /* 70 KiB */
    t_diag("sparse tensors: %s, max_tensor_bytes %llu", info.sparse_tensors ? "yes" : "no",
           (unsigned long long)info.max_tensor_bytes);
    if (info.sparse_tensors) {
        t_report(info.max_tensor_bytes > 64 * 1024,
                 "sparse tensors: max_tensor_bytes %llu, past maxMemoryAllocationSize",
                 (unsigned long long)info.max_tensor_bytes);
        sparse_tensor_case(ref, gpu, rng);
        tensor_range_cases(ref, gpu, rng);
        /* The allocations lowered, the range not: the sparse b bound whole
         * (on CPU devices the matmul reads B through texel views where a
         * buffer has them). */
        vkmha_debug_options whole = {.max_allocation_size = 64 * 1024};
        vkmha_context *bound = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &whole, count_splits, NULL);
        g_need_splits = false;
        sparse_tensor_case(ref, bound, rng);
        g_need_splits = true;
        t_report_validation(bound);
        vkmha_context_destroy(bound);
        /* Past max_tensor_bytes (dims of 32 bits: two of them). */
        const uint64_t words = info.max_tensor_bytes / 4 + 1;
        const vkmha_tensor_desc huge = {VKMHA_DTYPE_F32, 2,
                                        {(uint32_t)((words + 65535) / 65536), 65536}};
        tensor_refused(ref, gpu, rng, &huge, "maxBufferSize",
                       "a tensor past max_tensor_bytes [sparse]");
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
        /* KV caches whose own keys and values are sparse, read in windows by
         * the workgroup-shared fused kernel (the CPU-shaped one reads texel
         * views): 112 KiB of keys on 64 KiB allocations, and 287 KiB on
         * 280 KiB ones (its host key input of 262 KiB is one allocation). */
        vkmha_debug_options kd = sd;
        kd.fused_kernel = VKMHA_FUSED_KERNEL_SHARED;
        gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &kd, count_splits, NULL);
        kv_cache_range_case(ref, gpu, rng);
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
        kd.max_allocation_size = 280 * 1024;
        gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &kd, count_splits, NULL);
        kv_cache_entry_case(ref, gpu, rng);
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
        /* The second page's allocation fails (the context's only earlier
         * one: its placeholder buffer, without the self-check): nothing is
         * held, and the next tensor works. */
        vkmha_debug_options fail = sd;
        fail.fail_device_allocation_at = 3;
        gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &fail, count_splits, NULL);
        vkmha_context_get_info(gpu, &info);
        const uint64_t held = info.device_memory_bytes;
        vkmha_tensor *t = (vkmha_tensor *)(uintptr_t)1;
        vkmha_status st = vkmha_tensor_create(gpu, &past, &t);
        const bool refused = st == VKMHA_ERROR_OUT_OF_DEVICE_MEMORY && !t &&
                             strstr(vkmha_context_last_error(gpu), "vkAllocateMemory");
        if (!refused)
            t_diag("%s: %s", vkmha_status_string(st), vkmha_context_last_error(gpu));
        vkmha_context_get_info(gpu, &info);
        const bool freed = info.device_memory_bytes == held;
        float *x = t_random(rng, past.dims[0], -1, 1), *y = sentinels(past.dims[0]);
        st = vkmha_tensor_create(gpu, &past, &t);
        const bool works = !st && !vkmha_tensor_upload(t, 0, x, 70 * 1024) &&
                           !vkmha_tensor_download(t, 0, y, 70 * 1024) &&
                           !memcmp(x, y, 70 * 1024);
        vkmha_tensor_destroy(t);
        vkmha_context_trim(gpu); /* the copies' staging */
        vkmha_context_get_info(gpu, &info);
        t_report(refused && freed && works && info.device_memory_bytes == held,
                 "a sparse tensor's second allocation failing: OUT_OF_DEVICE_MEMORY, nothing "
                 "held; the next one works, and its destruction frees it all");
        free(x), free(y);
    } else {
        no_sparse_cases(ref, gpu, rng, "sparseBinding");
    }
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);

    /* desc->debug->no_sparse_binding: as a device without it. */
    vkmha_debug_options off = sd;
    off.no_sparse_binding = true;
    gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &off, count_splits, NULL);
    no_sparse_cases(ref, gpu, rng, "no_sparse_binding");
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
}

int main(void)
{
    t_rng rng = {99};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);

    /* maxComputeWorkGroupCount 3 x 2 x 2. */
    vkmha_debug_options grid = {.max_workgroup_count = {3, 2, 2}};
    vkmha_context *gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &grid, count_splits, NULL);
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    t_report(info.device.max_workgroup_count[0] == 3 && info.device.max_workgroup_count[1] == 2 &&
                 info.device.max_workgroup_count[2] == 2,
             "vkmha_context_get_info reports the lowered maxComputeWorkGroupCount %u x %u x %u",
             info.device.max_workgroup_count[0], info.device.max_workgroup_count[1],
             info.device.max_workgroup_count[2]);
    matmul_case(ref, gpu, &rng, 5, 129, 75, 17, VKMHA_OP_T, false);
    matmul_case(ref, gpu, &rng, 3, 67, 36, 20, VKMHA_OP_N, true); /* vec4 loads */
    matmul_case(ref, gpu, &rng, 1, 300, 9, 3, VKMHA_OP_N, false);
    softmax_case(ref, gpu, &rng, 37, 75);
    softmax_case(ref, gpu, &rng, 37, 76);
    heads_case(ref, gpu, &rng, true, &(vkmha_heads_desc){2, 37, 3, 24, 0},
               "%s_heads B 2 L 37 H 3 d 24");
    heads_case(ref, gpu, &rng, false, &(vkmha_heads_desc){2, 37, 3, 24, 0},
               "%s_heads B 2 L 37 H 3 d 24");
    /* 130 queries: 3 blocks of a GPU's 64 per (batch, head), 24 workgroups
     * (37 fit the 12 lowered ones on an H100 without a split). */
    const vkmha_attention_desc gqa = {2, 4, 2, 130, 75, 16, 24, 0, 0, 0, 0};
    attention_case(ref, gpu, &rng, &gqa,
                   VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL | VKMHA_MASK_BIAS, true);
    /* Decode-like: split-K and several key chunks per range on CPU devices. */
    const vkmha_attention_desc decode = {1, 8, 2, 3, 2100, 8, 8, 0, 0, 0, 0};
    attention_case(ref, gpu, &rng, &decode, VKMHA_MASK_KEY_PADDING, false);
    layer_case(ref, gpu, &rng);
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);

    /* maxStorageBufferRange 64 KiB, then maxMemoryAllocationSize 32 KiB. */
    vkmha_debug_options range = {.max_storage_buffer_range = 64 * 1024};
    gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &range, count_splits, NULL);
    vkmha_context_get_info(gpu, &info);
    t_report(info.device.max_storage_buffer_range == 64 * 1024 &&
                 info.device.max_workgroup_count[0] >= 65535,
             "get_info reports maxStorageBufferRange %llu (lowered), workgroup counts kept",
             (unsigned long long)info.device.max_storage_buffer_range);
    range_cases(ref, gpu, &rng, "maxStorageBufferRange");
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);

    vkmha_debug_options alloc = {.max_allocation_size = 32 * 1024};
    gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &alloc, count_splits, NULL);
    vkmha_context_get_info(gpu, &info);
    t_report(info.device.max_allocation_size == 32 * 1024,
             "get_info reports maxMemoryAllocationSize %llu (lowered)",
             (unsigned long long)info.device.max_allocation_size);
    range_cases(ref, gpu, &rng, "maxMemoryAllocationSize");
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);

    sparse_cases(ref, &rng);
    shared_memory_cases(ref, &rng);

    /* The mobile profile: every limit it names lowered (where the device's
     * is higher), every kernel within them, the ops and the layer right. */
    vkmha_debug_options mobile = {.profile = VKMHA_DEBUG_PROFILE_MOBILE};
    gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &mobile, NULL, NULL);
    vkmha_context_get_info(gpu, &info);
    const vkmha_device_info *di = &info.device;
    bool ok = di->max_shared_memory <= 16384 && di->max_workgroup_invocations <= 128 &&
              di->max_workgroup_size[0] <= 128 && di->max_workgroup_size[1] <= 128 &&
              di->max_workgroup_size[2] <= 128 && di->max_storage_buffer_range <= (128u << 20) &&
              di->max_allocation_size <= (256u << 20) && !info.push_descriptors &&
              !info.subgroup_ops_used && !info.native_16bit_storage;
    vkmha_kernel_info kernels[64];
    uint32_t n_kernels = 64;
    ok = ok && vkmha_context_get_kernels(gpu, &n_kernels, kernels) == VKMHA_SUCCESS;
    for (uint32_t i = 0; ok && i < n_kernels && i < 64; i++)
        if (kernels[i].available && (kernels[i].workgroup_size > 128 ||
                                     kernels[i].shared_bytes > 16384)) {
            t_diag("mobile profile: kernel %s: %u invocations, %u shared bytes",
                   kernels[i].name, kernels[i].workgroup_size, kernels[i].shared_bytes);
            ok = false;
        }
    t_report(ok, "the mobile profile: shared memory %u, %u invocations (%u x %u x %u), "
                 "storage range %llu, allocations %llu, no push descriptors, no subgroup "
                 "arithmetic, no 16-bit storage; every kernel within them",
             di->max_shared_memory, di->max_workgroup_invocations, di->max_workgroup_size[0],
             di->max_workgroup_size[1], di->max_workgroup_size[2],
             (unsigned long long)di->max_storage_buffer_range,
             (unsigned long long)di->max_allocation_size);
    g_need_splits = false;
    matmul_case(ref, gpu, &rng, 5, 129, 75, 17, VKMHA_OP_T, false);
    softmax_case(ref, gpu, &rng, 37, 75);
    heads_case(ref, gpu, &rng, true, &(vkmha_heads_desc){2, 37, 3, 24, 0},
               "%s_heads B 2 L 37 H 3 d 24");
    attention_case(ref, gpu, &rng, &gqa,
                   VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL | VKMHA_MASK_BIAS, true);
    attention_case(ref, gpu, &rng, &decode, VKMHA_MASK_KEY_PADDING, false);
    layer_case(ref, gpu, &rng);
    g_need_splits = true;
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
    const struct {
        vkmha_debug_options d;
        const char *word;
    } bad[] = {{{.profile = 7}, "profile"}, {{.max_workgroup_invocations = UINT32_MAX}, "max_workgroup_invocations"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vkmha_context_desc cd = {.backend = VKMHA_BACKEND_VULKAN, .debug = &bad[i].d};
        vkmha_context *c = NULL;
        vkmha_status st = vkmha_context_create(&cd, &c);
        t_report(st == VKMHA_ERROR_INVALID_ARGUMENT && !c &&
                     strstr(vkmha_context_last_error(NULL), bad[i].word),
                 "desc->debug with a bad %s: %s (%s)", bad[i].word, vkmha_status_string(st),
                 vkmha_context_last_error(NULL));
        vkmha_context_destroy(c);
    }

    vkmha_context_destroy(ref);
    return t_finish();
}
