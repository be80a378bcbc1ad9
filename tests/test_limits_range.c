/* Shapes past maxStorageBufferRange (lowered to 64 KiB) and
 * maxMemoryAllocationSize (lowered to 32 KiB) through vkmha_debug_options
 * (the second and third items of tests/test_limits.c's list): arrays and
 * tensors above them run in parts (a matmul in windows, the other ops and
 * the layer in calls of entries, heads or rows, masks moved with them, an
 * attention's keys in windows, KV caches past them, a quantized B's
 * matmul in windows of rows of A and C and of B's rows, copied as
 * matrices of their own, or in calls of blocks of B's rows, and a layer of
 * quantized weights past the range) and match the reference
 * backend; what no part fits is VKMHA_ERROR_UNSUPPORTED with a message
 * naming it (outputs untouched, the context still works). Tolerances: those
 * of tests/test_limits.c. */
#include "util.h"
#include "util_dtype.h"
#include "util_limits.h"

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


/* A mixed batch (io.entry_tokens) past the 64 KiB range: 6 entries of
 * d_model 16 bringing 700, 1, 1, 500, 1300 and 2 tokens (2504 rows, 157
 * KiB of queries) through a cache, RoPE at the default positions, causal:
 * calls of entries whose rows fit (700 + 1 + 1, 500, 2), the entry of 1300
 * (81 KiB) alone in calls of its rows; then a step of one token each (one
 * call). Each call against the reference's one mixed call, and the
 * cache's lengths after them. */
static void mixed_range_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    enum { B = 6, CAP = 1400, D = 16 };
    static const uint32_t counts[2][B] = {{700, 1, 1, 500, 1300, 2}, {1, 1, 1, 1, 1, 1}};
    t_layer l;
    t_layer_make(&l, rng, D, 2, 1, 1, 1, 0, 0);
    l.desc.rope_dims = 8;
    vkmha_mha *mg = NULL, *mr = NULL;
    vkmha_kv_cache *cg = NULL, *cr = NULL;
    const vkmha_kv_cache_desc cd = {.batch = B, .capacity = CAP};
    bool ok = !vkmha_mha_create(gpu, &l.desc, &mg) && !vkmha_mha_create(ref, &l.desc, &mr) &&
              !vkmha_kv_cache_create(mg, &cd, &cg) && !vkmha_kv_cache_create(mr, &cd, &cr);
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    for (int s = 0; s < 2 && ok; s++) {
        uint32_t n = 0;
        for (uint32_t b = 0; b < B; b++)
            n += counts[s][b];
        float *x = t_random(rng, (size_t)n * D, -1, 1), *want = t_alloc((size_t)n * D),
              *got = sentinels((size_t)n * D);
        vkmha_mha_io io = {.batch = B, .len_q = n, .query = x, .key = x, .value = x,
                           .mask = &causal, .entry_tokens = counts[s]};
        io.out = want, io.kv_cache = cr;
        const vkmha_status rst = vkmha_mha_forward(mr, &io);
        io.out = got, io.kv_cache = cg;
        const vkmha_status st = vkmha_mha_forward(mg, &io);
        if (st)
            t_diag("mixed batch past the range, call %d: %s", s, vkmha_context_last_error(gpu));
        ok = !rst && !st &&
             t_close("mixed batch past the range", "out", got, want, (size_t)n * D,
                     T_LAYER_ATOL, T_LAYER_RTOL);
        free(x), free(want), free(got);
    }
    uint32_t len[B];
    ok = ok && !vkmha_kv_cache_get_lengths(cg, 0, B, len);
    for (uint32_t b = 0; ok && b < B; b++)
        ok = len[b] == counts[0][b] + 1;
    t_report(ok,
             "mixed batch of 6 entries, 2504 rows (157 KiB of queries) through a KV cache, "
             "RoPE, causal, then a step each: match the reference [range]");
    vkmha_kv_cache_destroy(cg), vkmha_kv_cache_destroy(cr);
    vkmha_mha_destroy(mg), vkmha_mha_destroy(mr);
    t_layer_free(&l);
}

/* A prefill into a KV cache whose one entry's query is past the 64 KiB
 * range (2 entries, 1300 tokens of d_model 16, 2 heads over 1: 81 KiB a
 * query): calls of query rows, the first appending the entry's keys and
 * values, the others attending over the cache, the causal mask moved with
 * the rows; then two steps of one token. Fused and unfused, each call
 * against the reference. With rope_dims, RoPE (GPT-J pairs) on that many
 * of the 8 dims of a head: the first call's append rotates all 1300 keys
 * of its 2 entries (past the range: copied in blocks, each from its rows
 * of the table) while it holds fewer query rows. */
static void kv_cache_rows_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                               uint32_t rope_dims)
{
    enum { B = 2, L = 1300, CAP = 1400, D = 16, STEPS = 2 };
    t_layer l;
    t_layer_make(&l, rng, D, 2, 1, B, L, 0, 0);
    l.desc.rope_dims = rope_dims;
    l.desc.rope_layout = VKMHA_ROPE_INTERLEAVED;
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
                 "query rows, causal, RoPE on %u dims, then %d steps: match the reference "
                 "[range, %s]",
                 rope_dims, STEPS, path ? "unfused" : "fused");
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

/* ---- a quantized B --------------------------------------------------------- */

/* A matmul with a quantized B (type, group) whose A and C, or B, are past
 * `limit` (on_tensors: A and C as fp32 tensors, B a U8 tensor): a B that
 * fits is bound whole, A and C in windows of rows (or calls of blocks of
 * rows); a B past it runs in blocks of its rows, each a quantized matrix
 * of its own: host arrays past an allocation cut into calls (op T:
 * columns of C) or submissions (op N: ranges of k), and past the range
 * (host arrays or tensors, either op) windows of rows copied on the
 * device; against the reference on the same bytes; with a bias. dt: the
 * host arrays' dtype. */
typedef struct quant_shape {
    uint32_t type, group;
    vkmha_op op;
    uint32_t dt, m, n, k;
    bool on_tensors; /* fp32 tensors: dt must be F32 */
} quant_shape;

static void quant_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, const char *limit,
                       const quant_shape *c)
{
    const uint32_t type = c->type, group = c->group, dt = c->dt, m = c->m, n = c->n, k = c->k;
    const vkmha_op op = c->op;
    const bool on_tensors = c->on_tensors;
    static const char *const qn[] = {"", "q8", "q4", "q4z"},
                             *const dn[] = {"f32", "", "f16", "bf16"};
    char name[200];
    snprintf(name, sizeof name, "matmul %s g%u op %s %s m %u n %u k %u%s past %s", qn[type],
             group, op == VKMHA_OP_T ? "T" : "N", dn[dt], m, n, k,
             on_tensors ? " (tensors)" : "", limit);
    vkmha_quant_layout l = {0};
    uint8_t *b = t_quantized(ref, rng, type, group, op == VKMHA_OP_T ? n : k,
                           op == VKMHA_OP_T ? k : n, &l);
    float *a = t_random(rng, (size_t)m * k, -1, 1), *bias = t_random(rng, n, -1, 1);
    bool ok = b != NULL;
    const vkmha_matmul_desc d = {.m = m, .n = n, .k = k, .op_b = op, .dtype = dt,
                                 .b_quant = type, .b_group_size = group};
    float *c0 = sentinels((size_t)m * n);
    void *ha = t_to_dt(dt, a, (size_t)m * k), *hbias = t_to_dt(dt, bias, n),
         *hw = t_to_dt(dt, c0, (size_t)m * n), *hg = t_to_dt(dt, c0, (size_t)m * n);
    ok = ok && !vkmha_matmul(ref, &d, ha, b, hbias, hw);
    vkmha_status st = VKMHA_SUCCESS;
    g_splits = 0;
    if (ok && !on_tensors) {
        st = vkmha_matmul(gpu, &d, ha, b, hbias, hg);
    } else if (ok) {
        vkmha_tensor *ta = put(gpu, VKMHA_DTYPE_F32, (size_t)m * k, a),
                     *tb = put(gpu, VKMHA_DTYPE_U8, l.bytes, b),
                     *tbias = put(gpu, VKMHA_DTYPE_F32, n, bias),
                     *tc = put(gpu, VKMHA_DTYPE_F32, (size_t)m * n, NULL);
        ok = ta && tb && tbias && tc;
        st = ok ? vkmha_matmul_tensor(gpu, &d, ta, tb, tbias, tc) : VKMHA_ERROR_INVALID_ARGUMENT;
        float *got = get(tc, (size_t)m * n);
        memcpy(hg, got, (size_t)m * n * 4);
        free(got);
        vkmha_tensor_destroy(ta), vkmha_tensor_destroy(tb), vkmha_tensor_destroy(tbias);
        vkmha_tensor_destroy(tc);
    }
    float *want = t_from_dt(dt, hw, (size_t)m * n), *got = t_from_dt(dt, hg, (size_t)m * n);
    const double rtol = dt == VKMHA_DTYPE_F32 ? 1e-5 : 2 * t_dt_unit(dt);
    report_split(name, gpu, st,
                 ok && !st && t_close(name, "c", got, want, (size_t)m * n,
                                      2e-6 * sqrt((double)k), rtol));
    free(a), free(bias), free(b), free(ha), free(hbias), free(hw), free(hg), free(c0);
    free(want), free(got);
}

/* What a quantized B cannot run as: with op N one row of C past `limit`
 * (a window of B's columns would be a range of every row's planes).
 * UNSUPPORTED naming the array, C untouched. */
static void quant_refused(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, const char *limit,
                          uint32_t type, vkmha_op op, uint32_t m, uint32_t n, uint32_t k,
                          const char *array, bool on_tensors)
{
    char label[200];
    snprintf(label, sizeof label, "matmul %s op %s m %u n %u k %u%s: %s past %s, refused",
             type == VKMHA_QUANT_Q8 ? "q8" : "q4", op == VKMHA_OP_T ? "T" : "N", m, n, k,
             on_tensors ? " (tensors)" : "", array, limit);
    vkmha_quant_layout l = {0};
    uint8_t *b = t_quantized(ref, rng, type, 32, op == VKMHA_OP_T ? n : k,
                           op == VKMHA_OP_T ? k : n, &l);
    float *a = t_random(rng, (size_t)m * k, -1, 1), *c = sentinels((size_t)m * n);
    const vkmha_matmul_desc d = {.m = m, .n = n, .k = k, .op_b = op, .b_quant = type,
                                 .b_group_size = 32};
    vkmha_status st = VKMHA_ERROR_INVALID_ARGUMENT;
    if (b) {
        if (!on_tensors) {
            st = vkmha_matmul(gpu, &d, a, b, NULL, c);
        } else {
            vkmha_tensor *ta = put(gpu, VKMHA_DTYPE_F32, (size_t)m * k, a),
                         *tb = put(gpu, VKMHA_DTYPE_U8, l.bytes, b),
                         *tc = put(gpu, VKMHA_DTYPE_F32, (size_t)m * n, c);
            if (ta && tb && tc)
                st = vkmha_matmul_tensor(gpu, &d, ta, tb, NULL, tc);
            free(c);
            c = get(tc, (size_t)m * n);
            /* The download cleared the message: the same call again, for
             * report_refused to read it. */
            if (ta && tb && tc)
                st = vkmha_matmul_tensor(gpu, &d, ta, tb, NULL, tc);
            vkmha_tensor_destroy(ta), vkmha_tensor_destroy(tb), vkmha_tensor_destroy(tc);
        }
    }
    char tensor[8];
    snprintf(tensor, sizeof tensor, ": %s", array);
    report_refused(ref, gpu, rng, st, on_tensors ? "vkmha_matmul_tensor" : "vkmha_matmul",
                   tensor, limit, untouched(c, (size_t)m * n), label);
    free(a), free(c), free(b);
}

/* A quantized B (q8, 80 KiB) in blocks of its rows: op N past the 64 KiB
 * range (windows copied on the device), op T past 32 KiB allocations
 * (calls of blocks cut on the host) and op N past them (submissions of
 * blocks sliced on the host), on a context whose allocator fails the call's 1st,
 * 2nd, ... host allocation in turn (a new context each time) until the
 * call needs no failure: always OUT_OF_HOST_MEMORY, the same call then
 * right on that context, no block left after it is destroyed. */
static void quant_cut_alloc_failures(vkmha_context *ref, t_rng *rng, vkmha_op op,
                                     const vkmha_debug_options *dbg, const char *limit)
{
    const uint32_t m = 2, n = op == VKMHA_OP_T ? 600 : 128, k = op == VKMHA_OP_T ? 128 : 600;
    t_counting c = {0};
    vkmha_allocator al = {t_counting_alloc, NULL, t_counting_free, &c};
    vkmha_context_desc cd = {0};
    cd.enable_validation = t_validation();
    cd.flags = VKMHA_CONTEXT_NO_SELF_CHECK;
    cd.allocator = &al;
    cd.debug = dbg;
    cd.log = t_log;
    vkmha_quant_layout l = {0};
    uint8_t *b = t_quantized(ref, rng, VKMHA_QUANT_Q8, 32, op == VKMHA_OP_T ? n : k,
                           op == VKMHA_OP_T ? k : n, &l);
    float *a = t_random(rng, (size_t)m * k, -1, 1), *want = t_alloc((size_t)m * n),
          *got = t_alloc((size_t)m * n);
    const vkmha_matmul_desc d = {.m = m, .n = n, .k = k, .op_b = op,
                                 .b_quant = VKMHA_QUANT_Q8, .b_group_size = 32};
    bool ok = b && !vkmha_matmul(ref, &d, a, b, NULL, want);
    long points = 0, bad = 0;
    for (long i = 1; ok && i < 1000; i++) {
        c = (t_counting){0};
        vkmha_context *gpu = NULL;
        if (vkmha_context_create(&cd, &gpu)) {
            ok = false;
            break;
        }
        c.fail_at = c.total + i;
        vkmha_status st = vkmha_matmul(gpu, &d, a, b, NULL, got);
        c.fail_at = 0;
        const bool failed = c.failed > 0;
        if (failed) {
            points++;
            if (st != VKMHA_ERROR_OUT_OF_HOST_MEMORY)
                t_diag("failing allocation %ld of the call: %s", i, vkmha_status_string(st));
            bad += st != VKMHA_ERROR_OUT_OF_HOST_MEMORY;
            st = vkmha_matmul(gpu, &d, a, b, NULL, got); /* usable after it */
        }
        const bool right = !st && t_close("the cut", "c", got, want, (size_t)m * n,
                                          2e-6 * sqrt((double)k), 1e-5);
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
        if (!right || c.live) {
            t_diag("failing allocation %ld: then %s, %ld blocks left after destroy", i,
                   right ? "right" : "wrong", c.live);
            bad++;
        }
        if (!failed) /* the call needed fewer than i allocations */
            break;
    }
    t_report(ok && points > 0 && !bad,
             "a quantized b in blocks of rows (op %s past %s): each of the call's %ld host "
             "allocations failed in turn gives OUT_OF_HOST_MEMORY, then the call matches the "
             "reference, nothing left after destroy (%ld wrong)",
             op == VKMHA_OP_T ? "T" : "N", limit, points, bad);
    free(a), free(want), free(got), free(b);
}

static void quant_range_cases(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                              const char *limit)
{
    const uint32_t Q8 = VKMHA_QUANT_Q8, Q4 = VKMHA_QUANT_Q4, Q4Z = VKMHA_QUANT_Q4Z,
                   F32 = VKMHA_DTYPE_F32, F16 = VKMHA_DTYPE_F16, BF16 = VKMHA_DTYPE_BF16;
    const vkmha_op T = VKMHA_OP_T, N = VKMHA_OP_N;
    const quant_shape cases[] = {
        /* A of 112 KiB (fp32) or 88 KiB (fp16), C of 47 KiB; k and m not
         * multiples of any tile; every type; both ops. */
        {Q4, 32, T, F32, 301, 40, 96, false},
        {Q8, 64, N, F32, 211, 128, 70, false},
        {Q4Z, 32, T, F16, 701, 33, 64, false},
        {Q8, 32, T, BF16, 700, 17, 64, false},
        /* A few rows of A (the few-rows kernels) past it: 5 x 4096. */
        {Q4, 128, T, F32, 5, 9, 4096, false},
        /* B past it (op T, host arrays): blocks of its rows, each a
         * quantized matrix of its own (past the range windows copied on
         * the device, past an allocation calls cut on the host); 80 KiB
         * of q8 with 2 rows of A,
         * 70 KiB of q4z with A past it too (fp16), 86 KiB of q4 (an odd
         * n). */
        {Q8, 32, T, F32, 2, 600, 128, false},
        {Q4Z, 64, T, F16, 301, 1000, 128, false},
        {Q4, 32, T, F32, 7, 1219, 128, false},
        /* B past it with op N (ranges of k summed: in C, or for fp16 in
         * fp32 sums): 80 KiB of q8; 110 KiB of q4z. */
        {Q8, 32, N, F32, 2, 128, 600, false},
        {Q4Z, 32, N, F16, 13, 192, 1000, false},
        /* Tensors past the range (past an allocation: test_limits_sparse):
         * A and C; B (q8 op T, 80 KiB: windows of its rows copied, columns
         * of C; q4z op N, 77 KiB: ranges of k; q4, an odd n, A past it). */
        {Q4Z, 64, T, F32, 300, 24, 128, true},
        {Q8, 32, T, F32, 2, 600, 128, true},
        {Q4Z, 32, N, F32, 3, 128, 1100, true},
        {Q4, 32, T, F32, 400, 1219, 96, true},
    };
    const bool range = strstr(limit, "Range") != NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (range || !cases[i].on_tensors)
            quant_case(ref, gpu, rng, limit, &cases[i]);
    /* A C row of 80 KiB (op N, k 1). */
    quant_refused(ref, gpu, rng, limit, Q4, N, 2, 20480, 1, "c", false);
    if (range)
        quant_refused(ref, gpu, rng, limit, Q4, N, 2, 20480, 1, "c", true);
}

/* A layer of 8-bit projection weights of 68 KiB each (d_model 256, groups
 * of 32) past `limit`: past the 64 KiB range its projections copy windows
 * of the weights' rows (a prompt of 5 tokens, then 3 steps over a KV
 * cache: the few-rows kernels), against the reference on the same
 * quantized values; past the 32 KiB allocation, creation is refused naming
 * desc->w_q. */
static void quant_layer_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                             const char *limit)
{
    enum { D = 256, H = 4 };
    char name[200];
    t_layer_desc ld;
    t_layer_desc_make(&ld, rng, D, H, H, D / H, D / H, D, 0.1f);
    ld.d.weight_quant = VKMHA_QUANT_Q8;
    ld.d.weight_group_size = 32;
    if (!strstr(limit, "Range")) {
        vkmha_mha *m = NULL;
        snprintf(name, sizeof name, "layer of q8 projection weights of 68 KiB past %s", limit);
        const vkmha_status st = vkmha_mha_create(gpu, &ld.d, &m);
        report_refused(ref, gpu, rng, st, "vkmha_mha_create", "desc->w_q", limit, !m, name);
        vkmha_mha_destroy(m);
        free(ld.mem);
        return;
    }
    snprintf(name, sizeof name, "layer of q8 projection weights of 68 KiB past %s over a KV "
             "cache: prompt 5, 3 steps", limit);
    g_splits = 0;
    report_split(name, gpu, VKMHA_SUCCESS, t_layer_cache_steps(ref, gpu, rng, &ld.d, name));
    free(ld.mem);
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
    quant_range_cases(ref, gpu, rng, limit);
    quant_layer_case(ref, gpu, rng, limit);
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
        kv_cache_range_case(ref, shared, rng, 0);
        kv_cache_range_case(ref, shared, rng, 8);
        kv_cache_entry_case(ref, shared, rng);
        mixed_range_case(ref, shared, rng);
        kv_cache_rows_case(ref, shared, rng, 0);
        kv_cache_rows_case(ref, shared, rng, 6);
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

int main(void)
{
    t_rng rng = {99};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    vkmha_context *gpu;
    vkmha_context_info info;

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
    quant_cut_alloc_failures(ref, &rng, VKMHA_OP_N, &range, "maxStorageBufferRange");

    vkmha_debug_options alloc = {.max_allocation_size = 32 * 1024};
    gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &alloc, count_splits, NULL);
    vkmha_context_get_info(gpu, &info);
    t_report(info.device.max_allocation_size == 32 * 1024,
             "get_info reports maxMemoryAllocationSize %llu (lowered)",
             (unsigned long long)info.device.max_allocation_size);
    range_cases(ref, gpu, &rng, "maxMemoryAllocationSize");
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
    quant_cut_alloc_failures(ref, &rng, VKMHA_OP_T, &alloc, "maxMemoryAllocationSize");
    quant_cut_alloc_failures(ref, &rng, VKMHA_OP_N, &alloc, "maxMemoryAllocationSize");

    vkmha_context_destroy(ref);
    return t_finish();
}
