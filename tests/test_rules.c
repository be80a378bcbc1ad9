/* The score rules of today's decoders (include/vkmha.h, "Masks"): sliding
 * windows (causal and symmetric), ALiBi, logit soft-capping and attention
 * sinks, alone and together with the older mask kinds, GQA and KV caches;
 * and rotary positions in the layer (vkmha_mha_desc.rope_dims).
 *
 * Every Vulkan path and kernel is held to the reference backend element by
 * element, outputs and weights, on shapes that are multiples of no tile:
 * the default path and the fused path with 1 and 3 key ranges on two
 * contexts (the device's default kernel, CPU-shaped on lavapipe, and the
 * workgroup-shared one forced), and the unfused path; fp32 and fp16; the
 * softmax op (rows of 19 and 20 keys: element and vec4 paths); the tensor
 * forms; the layer decoding step by step through a KV cache against the
 * same layer's one causal forward. The reference itself is checked here
 * against values computed by hand for each rule, and against PyTorch
 * transcriptions of the published formulas in tests/python/test_rules.py.
 *
 * Tolerances: fp32 as test_attention.c plus the soft cap's (its tanh is
 * computed from exp in fp32: an absolute error of a few ulp of the cap in a
 * score moves a weight by as much relative): weights 2e-6 + 2e-5 |ref|,
 * outputs 1e-5 + 2e-5 |ref|; fp16 arrays 4 ulp of fp16 at 1 (2e-3). */
#include "util_dtype.h"

#define B 2
#define H 6
#define HKV 3
#define LQ 7
#define LK 19

typedef struct rules_case {
    const char *name;
    uint32_t kinds, window, causal_offset;
    float softcap;
    bool custom_slopes, big_logits, rows_masked;
} rules_case;

static const rules_case cases[] = {
    {"causal window 5, bottom-right", VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW, 5, LK - LQ, 0,
     false, false, false},
    {"symmetric window 4, offset 6", VKMHA_MASK_WINDOW, 4, 6, 0, false, false, false},
    {"ALiBi (standard slopes) + causal + key padding",
     VKMHA_MASK_ALIBI | VKMHA_MASK_CAUSAL | VKMHA_MASK_KEY_PADDING, 0, LK - LQ, 0, false, false,
     false},
    {"soft cap 3 on logits near 1e3 + per-head bias", VKMHA_MASK_SOFTCAP | VKMHA_MASK_BIAS, 0, 0,
     3.0f, false, true, false},
    {"sinks + top-left causal + full mask with empty rows",
     VKMHA_MASK_SINKS | VKMHA_MASK_CAUSAL | VKMHA_MASK_FULL, 0, 0, 0, false, false, true},
    {"every rule: window 6, ALiBi (given), cap 8, sinks, bias, key padding",
     VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW | VKMHA_MASK_ALIBI | VKMHA_MASK_SOFTCAP |
         VKMHA_MASK_SINKS | VKMHA_MASK_BIAS | VKMHA_MASK_KEY_PADDING,
     6, LK - LQ, 8.0f, true, true, false},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* One case's arrays, and its mask. */
typedef struct rules_inputs {
    float *q, *k, *v, *bias, *slopes, *sinks;
    uint8_t *kp, *full;
    vkmha_mask mask;
} rules_inputs;

static void inputs_make(rules_inputs *in, t_rng *r, const rules_case *c, uint32_t d_k,
                        uint32_t d_v, uint32_t len_k)
{
    const float amp = c->big_logits ? 12.0f : 1.0f; /* scores up to ~1e3 */
    memset(in, 0, sizeof *in);
    in->q = t_random(r, (size_t)B * H * LQ * d_k, -amp, amp);
    in->k = t_random(r, (size_t)B * HKV * len_k * d_k, -amp, amp);
    in->v = t_random(r, (size_t)B * HKV * len_k * d_v, -1, 1);
    in->bias = t_random(r, (size_t)H * LQ * len_k, -2, 2);
    in->slopes = t_alloc(H);
    in->sinks = t_random(r, H, -2, 2);
    in->kp = t_random_mask(r, (size_t)B * len_k, 0.3);
    in->full = t_random_mask(r, (size_t)B * LQ * len_k, 0.3);
    if (c->rows_masked) /* rows 1 and 4 of entry 0: every key masked */
        for (uint32_t j = 0; j < len_k; j++)
            in->full[1 * len_k + j] = in->full[4 * len_k + j] = 0;
    if (c->custom_slopes)
        for (uint32_t h = 0; h < H; h++)
            in->slopes[h] = t_uniform(r, 0.05f, 0.8f);
    else
        vkmha_alibi_slopes(H, in->slopes);
    vkmha_mask *m = &in->mask;
    m->kinds = c->kinds;
    m->causal_offset = c->causal_offset;
    m->window = c->window;
    m->softcap = c->softcap;
    if (c->kinds & VKMHA_MASK_KEY_PADDING)
        m->key_padding = in->kp;
    if (c->kinds & VKMHA_MASK_FULL)
        m->full = in->full;
    if (c->kinds & VKMHA_MASK_BIAS) {
        m->bias = in->bias;
        m->bias_batch = 1;
    }
    if (c->kinds & VKMHA_MASK_ALIBI)
        m->alibi = in->slopes;
    if (c->kinds & VKMHA_MASK_SINKS)
        m->sinks = in->sinks;
}

static void inputs_free(rules_inputs *in)
{
    free(in->q), free(in->k), free(in->v), free(in->bias), free(in->slopes), free(in->sinks);
    free(in->kp), free(in->full);
}

/* ---- the reference against hand-computed values ------------------------- */

/* One query, three keys, one head, d_k = 1 (scale 1): each rule's score
 * and softmax written out. */
static void reference_by_hand(vkmha_context *ref)
{
    const vkmha_attention_desc d = {.heads = 1, .len_q = 2, .len_k = 4, .d_k = 1, .d_v = 1,
                                    .scale = 1.0f};
    const float q[2] = {1.0f, 2.0f}, k[4] = {0.5f, -1.0f, 2.0f, 3.0f},
                v[4] = {1.0f, 10.0f, 100.0f, 1000.0f};
    const float slope = 0.25f, sink = 0.5f, cap = 2.0f;
    /* Every rule: causal offset 2 (query i at position i + 2), window 2,
     * ALiBi, cap, sink. Query 0 at 2 sees keys 1, 2; query 1 at 3 keys 2, 3. */
    const vkmha_mask m = {.kinds = VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW | VKMHA_MASK_ALIBI |
                                   VKMHA_MASK_SOFTCAP | VKMHA_MASK_SINKS,
                          .causal_offset = 2, .window = 2, .softcap = cap,
                          .alibi = &slope, .sinks = &sink};
    float out[2], w[8];
    bool ok = vkmha_attention(ref, &d, q, k, v, &m, out, w) == VKMHA_SUCCESS;
    double want_w[8], want_o[2];
    for (int i = 0; i < 2; i++) {
        double s[4], mx = sink, sum = 0.0;
        for (int j = 0; j < 4; j++) {
            const int pos = i + 2;
            const bool seen = j <= pos && pos - j < 2;
            s[j] = seen ? cap * tanh(q[i] * k[j] / cap) - slope * (pos - j) : -1e9;
            mx = fmax(mx, s[j]);
        }
        sum = exp(sink - mx);
        for (int j = 0; j < 4; j++)
            sum += exp(s[j] - mx);
        want_o[i] = 0.0;
        for (int j = 0; j < 4; j++) {
            want_w[i * 4 + j] = exp(s[j] - mx) / sum;
            want_o[i] += want_w[i * 4 + j] * v[j];
        }
    }
    for (int i = 0; i < 8 && ok; i++)
        ok = fabs(w[i] - want_w[i]) <= 1e-6;
    for (int i = 0; i < 2 && ok; i++)
        ok = fabs(out[i] - want_o[i]) <= 1e-5 * fabs(want_o[i]);
    t_report(ok, "reference: every rule on one head by hand (window, ALiBi, cap, sink)");

    /* A sink takes the whole weight of a row whose keys are all masked. */
    const uint8_t none[4] = {0, 0, 0, 0};
    const vkmha_mask ms = {.kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_SINKS,
                           .key_padding = none, .sinks = &sink};
    ok = vkmha_attention(ref, &d, q, k, v, &ms, out, w) == VKMHA_SUCCESS;
    for (int i = 0; i < 8 && ok; i++)
        ok = w[i] == 0.0f;
    t_report(ok && out[0] == 0.0f && out[1] == 0.0f,
             "reference: a row with every key masked puts all weight on the sink (output 0)");

    /* The standard slopes: 8 heads 2^-1 .. 2^-8; 6 heads: 4 of 4 heads
     * (2^-2, 2^-4, 2^-6, 2^-8), then 2^-1, 2^-3 of 8 heads. */
    float s8[8], s6[6];
    ok = vkmha_alibi_slopes(8, s8) == VKMHA_SUCCESS && vkmha_alibi_slopes(6, s6) == VKMHA_SUCCESS;
    for (int h = 0; h < 8 && ok; h++)
        ok = s8[h] == ldexpf(1.0f, -(h + 1));
    const int e6[6] = {-2, -4, -6, -8, -1, -3};
    for (int h = 0; h < 6 && ok; h++)
        ok = s6[h] == ldexpf(1.0f, e6[h]);
    t_report(ok && vkmha_alibi_slopes(0, s6) == VKMHA_ERROR_INVALID_ARGUMENT &&
                 vkmha_alibi_slopes(3, NULL) == VKMHA_ERROR_INVALID_ARGUMENT,
             "vkmha_alibi_slopes: BLOOM's slopes for 8 and 6 heads; bad arguments refused");
}

/* ---- attention on every path -------------------------------------------- */

static const t_attention_run runs[] = {
    {VKMHA_ATTENTION_PATH_AUTO, 0, "default path"},
    {VKMHA_ATTENTION_PATH_FUSED, 1, "fused, 1 key range"},
    {VKMHA_ATTENTION_PATH_FUSED, 3, "fused, 3 key ranges"},
    {VKMHA_ATTENTION_PATH_UNFUSED, 0, "unfused"},
};

/* The outputs' tolerances against the reference (absolute, relative), and
 * the weights' absolute one, for dtype dt. */
typedef struct tolerances {
    double out, rel, weights;
} tolerances;

static tolerances tolerances_of(uint32_t dt)
{
    const bool f32 = dt == VKMHA_DTYPE_F32;
    return (tolerances){.out = f32 ? 1e-5 : 2e-3, .rel = f32 ? 2e-5 : 2e-3,
                        .weights = f32 ? 2e-6 : 2e-3};
}

static void attention_case(vkmha_context *ref, vkmha_context *const gpus[2], t_rng *r,
                           const rules_case *c, uint32_t d_k, uint32_t d_v, uint32_t dt)
{
    rules_inputs in;
    inputs_make(&in, r, c, d_k, d_v, LK);
    const vkmha_attention_desc d = {.batch = B, .heads = H, .kv_heads = HKV, .len_q = LQ,
                                    .len_k = LK, .d_k = d_k, .d_v = d_v, .dtype = dt};
    const t_attention_sizes n = t_attention_size(&d);
    /* The reference reads the same rounded inputs. */
    void *q = t_to_dt(dt, in.q, n.q), *k = t_to_dt(dt, in.k, n.k), *v = t_to_dt(dt, in.v, n.v);
    const size_t es = vkmha__dtype_size(dt);
    void *want = malloc(n.out * es), *want_w = malloc(n.weights * es), *got = malloc(n.out * es),
         *got_w = malloc(n.weights * es);
    const bool ref_ok =
        vkmha_attention(ref, &d, q, k, v, &in.mask, want, want_w) == VKMHA_SUCCESS;
    const tolerances tol = tolerances_of(dt);
    for (int g = 0; g < 2; g++)
        for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ri++) {
            if (g == 1 && runs[ri].path == VKMHA_ATTENTION_PATH_UNFUSED)
                continue; /* the same softmax as context 0's */
            char name[256];
            snprintf(name, sizeof name, "%s, %s, d_k %u, d_v %u, %s, %s", c->name,
                     dt == VKMHA_DTYPE_F32 ? "fp32" : "fp16", d_k, d_v,
                     g ? "workgroup-shared kernel" : "default kernel", runs[ri].name);
            vkmha_attention_desc dr = d;
            dr.path = runs[ri].path;
            dr.kv_splits = runs[ri].kv_splits;
            const vkmha_status st = vkmha_attention(gpus[g], &dr, q, k, v, &in.mask, got, got_w);
            if (st != VKMHA_SUCCESS)
                t_diag("%s: %s (%s)", name, vkmha_status_string(st),
                       vkmha_context_last_error(gpus[g]));
            t_report(ref_ok && st == VKMHA_SUCCESS &&
                         t_close_dt(name, "out", dt, got, want, n.out, tol.out, tol.rel) &&
                         t_close_dt(name, "weights", dt, got_w, want_w, n.weights, tol.weights,
                                    tol.rel),
                     "%s", name);
        }
    free(q), free(k), free(v), free(want), free(want_w), free(got), free(got_w);
    inputs_free(&in);
}

/* ---- long rows: the blocks a window or the causal mask hide -------------------- */

/* Rows of `shape` whose key blocks the masks hide from whole query blocks
 * (a window, the causal mask, key padding, a full mask, a -inf bias), so
 * that the fused kernels skip them, under each of the masks, then again
 * with a NaN value at key nan_key, hidden from every row, which must still
 * make every output NaN (0 * NaN, include/vkmha.h) where the skipping
 * kernel only scans the values it skips; with nan_keys, a third time with
 * a NaN key there instead (its value restored): behind a -inf bias its
 * score is NaN and its rows NaN, so a block must not be skipped for its
 * bias alone without its keys looked at. Weights are not asked for: the
 * weights pass never skips. */
static void hidden_keys(vkmha_context *ref, vkmha_context *const gpus[2], t_rng *r,
                        const char *shape, const vkmha_attention_desc *d,
                        const vkmha_mask *masks, const char *const mask_names[], int n_masks,
                        uint32_t nan_key, bool nan_keys)
{
    const t_attention_sizes n = t_attention_size(d);
    float *q = t_random(r, n.q, -1, 1), *k = t_random(r, n.k, -1, 1), *v = t_random(r, n.v, -1, 1);
    const uint32_t dt = d->dtype;
    const size_t es = vkmha__dtype_size(dt);
    void *want = malloc(n.out * es), *got = malloc(n.out * es);
    const tolerances tol = tolerances_of(dt);
    const size_t v_at = (size_t)nan_key * d->d_v + d->d_v / 2;
    const float v_was = v[v_at];
    static const char *const nan_names[3] = {"", ", a NaN value hidden from every row",
                                             ", a NaN key hidden from every row"};
    for (int nan = 0; nan < (nan_keys ? 3 : 2); nan++) {
        v[v_at] = nan == 1 ? NAN : v_was;
        if (nan == 2)
            k[(size_t)nan_key * d->d_k + d->d_k / 2] = NAN;
        void *qt = t_to_dt(dt, q, n.q), *kt = t_to_dt(dt, k, n.k), *vt = t_to_dt(dt, v, n.v);
        for (int mi = 0; mi < n_masks; mi++) {
            bool ok = !vkmha_attention(ref, d, qt, kt, vt, &masks[mi], want, NULL);
            if (!ok)
                t_diag("%s, %s: reference: %s", shape, mask_names[mi],
                       vkmha_context_last_error(ref));
            for (int g = 0; g < 2; g++)
                for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ri++) {
                    vkmha_attention_desc dr = *d;
                    dr.path = runs[ri].path;
                    dr.kv_splits = runs[ri].kv_splits;
                    char name[200];
                    snprintf(name, sizeof name, "%s%s, %s%s, %s, %s", shape,
                             dt == VKMHA_DTYPE_F32 ? "" : ", fp16", mask_names[mi],
                             nan_names[nan],
                             g ? "workgroup-shared kernel" : "default kernel", runs[ri].name);
                    const bool gok = ok && !vkmha_attention(gpus[g], &dr, qt, kt, vt,
                                                            &masks[mi], got, NULL);
                    t_report(gok && t_close_dt(name, "out", dt, got, want, n.out, tol.out, tol.rel),
                             "%s", name);
                }
        }
        free(qt), free(kt), free(vt);
    }
    free(q), free(k), free(v), free(want), free(got);
}

/* 40 queries over 1100 keys (as the causal case below) whose blocks data
 * hide: keys 100-227 and from 300 on padded, or every key (each row the
 * mean of the values: blocks of -1e9 scores count); the same keys -inf in a bias
 * (keys 100-227 only for rows below 20, the others random there); a full
 * mask hiding them from rows 20 on, and every key from rows 36-39 (the mean
 * of the values: their blocks' -1e9 scores count); key padding from 600 on and a -inf bias
 * on keys 300-599 (blocks of -1e9 and -inf scores). The NaN at key 1050. */
static void data_hidden(vkmha_context *ref, vkmha_context *const gpus[2], t_rng *r)
{
    enum { LEN_Q = 40, LEN_K = 1100 };
    const vkmha_attention_desc d = {.heads = 2, .kv_heads = 1, .len_q = LEN_Q, .len_k = LEN_K,
                                    .d_k = 8, .d_v = 8};
    uint8_t *kp = malloc(LEN_K), *kp_tail = malloc(LEN_K), *full = malloc(LEN_Q * LEN_K),
            *kp_none = calloc(LEN_K, 1);
    float *bias = t_random(r, LEN_Q * LEN_K, -2, 2), *bias_mid = t_alloc(LEN_Q * LEN_K);
    for (uint32_t i = 0; i < LEN_Q; i++)
        for (uint32_t j = 0; j < LEN_K; j++) {
            const bool mid = j >= 100 && j < 228, hidden = j >= 300 || mid;
            kp[j] = !hidden;
            kp_tail[j] = j < 600;
            full[i * LEN_K + j] = !(hidden && i >= 20) && i < 36;
            if (j >= 300 || (mid && i < 20))
                bias[i * LEN_K + j] = -INFINITY;
            bias_mid[i * LEN_K + j] = j >= 300 && j < 600 ? -INFINITY : 0.5f;
        }
    const vkmha_mask masks[5] = {
        {.kinds = VKMHA_MASK_KEY_PADDING, .key_padding = kp},
        {.kinds = VKMHA_MASK_KEY_PADDING, .key_padding = kp_none},
        {.kinds = VKMHA_MASK_BIAS, .bias = bias, .bias_heads = 1},
        {.kinds = VKMHA_MASK_FULL, .full = full},
        {.kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_BIAS, .key_padding = kp_tail,
         .bias = bias_mid, .bias_heads = 1}};
    hidden_keys(ref, gpus, r, "40 x 1100 keys", &d, masks,
                (const char *const[]){"key padding", "every key padded", "-inf bias",
                                      "full mask", "key padding + -inf bias"},
                5, 1050, true);
    /* fp16 (the cooperative-matrix kernel where it is forced): every key
     * padded, key padding + -inf bias. */
    vkmha_attention_desc d16 = d;
    d16.dtype = VKMHA_DTYPE_F16;
    hidden_keys(ref, gpus, r, "40 x 1100 keys", &d16, (const vkmha_mask[]){masks[1], masks[4]},
                (const char *const[]){"every key padded", "key padding + -inf bias"}, 2, 1050,
                true);
    free(kp), free(kp_tail), free(full), free(bias), free(bias_mid), free(kp_none);
}

/* 45 queries over 301 keys (d 16, GQA 2:1): a causal window of 16
 * (bottom-right) and a symmetric one of 20 (queries from key 150) with
 * sinks; symmetric windows past the keys: of 20 from position 400, which
 * no row sees a key of (each row the mean of the values), and of 16 from
 * position 290, whose rows 26-44 see none: blocks met before any key
 * settles a row (a split-K range's, all of them) take the online
 * softmax's step of -1e9 scores; the NaN at key 3. Then 40 causal queries from key 0 over 1100
 * keys: past the 1024 keys CPU devices visit per dispatch, so the
 * workgroup-shared kernel's chunks resume the partial state and skip the
 * blocks past the diagonal there (and in the split-K ranges of the runs);
 * the NaN at key 1050. */
static void long_rows(vkmha_context *ref, vkmha_context *const gpus[2], t_rng *r)
{
    const vkmha_attention_desc windows = {.heads = 2, .kv_heads = 1, .len_q = 45, .len_k = 301,
                                          .d_k = 16, .d_v = 16};
    const vkmha_mask masks[4] = {
        {.kinds = VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW, .window = 16, .causal_offset = 301 - 45},
        {.kinds = VKMHA_MASK_WINDOW | VKMHA_MASK_SINKS, .window = 20, .causal_offset = 150,
         .sinks = (const float[2]){0.5f, -1.0f}},
        {.kinds = VKMHA_MASK_WINDOW, .window = 20, .causal_offset = 400},
        {.kinds = VKMHA_MASK_WINDOW, .window = 16, .causal_offset = 290}};
    hidden_keys(ref, gpus, r, "45 x 301 keys", &windows, masks,
                (const char *const[]){"causal window 16", "symmetric window 20 + sinks",
                                      "symmetric window 20 at 400 (no row sees a key)",
                                      "symmetric window 16 at 290 (rows 26-44 see no key)"},
                4, 3, false);
    vkmha_attention_desc w16 = windows;
    w16.dtype = VKMHA_DTYPE_F16;
    hidden_keys(ref, gpus, r, "45 x 301 keys", &w16, &masks[3],
                (const char *const[]){"symmetric window 16 at 290 (rows 26-44 see no key)"}, 1, 3,
                false);
    const vkmha_attention_desc causal = {.heads = 2, .kv_heads = 1, .len_q = 40, .len_k = 1100,
                                         .d_k = 8, .d_v = 8};
    hidden_keys(ref, gpus, r, "40 x 1100 keys", &causal,
                &(const vkmha_mask){.kinds = VKMHA_MASK_CAUSAL}, (const char *const[]){"causal"},
                1, 1050, false);
    data_hidden(ref, gpus, r);
}

/* Decode shapes (one or two queries: the CPU-shaped kernel's lanes over
 * keys, which skip what a window hides where it hides at least 3/4 of the
 * keys, each lane taking its share of the visible keys first) over 2003
 * keys (d 16, GQA 2:1): a causal window of 100 at the end; a symmetric one
 * of 64 at position 1000 (hidden keys on both sides); two queries under the
 * causal window; and windows whose rows never settle, so that every hidden
 * key counts: key padding on the window's keys (each row the mean of every
 * value) and a -inf bias on them (the mean of the hidden keys' values); the
 * NaN at key 3. Then one query over 32768 keys with a causal window of
 * 5001 in one key range (kv_splits 1): past the 16384 keys the CPU-shaped
 * kernel visits per dispatch, each lane's list of keys (its 628 visible,
 * then 3472 hidden ones: 4100) in two dispatches of 2048 and the rest; with
 * a NaN value at key 3470, the 4099th of lane 0's list (every key visited:
 * the row's output NaN), then at key 26000 (in the last of the values'
 * scan's four workgroups of the head). */
static void decode_hidden(vkmha_context *ref, vkmha_context *const gpus[2], t_rng *r)
{
    enum { LEN_K = 2003, WIN = 100, SYM = 64, AT = 1000, LONG = 32768, LONG_WIN = 5001 };
    const vkmha_attention_desc one = {.heads = 2, .kv_heads = 1, .len_q = 1, .len_k = LEN_K,
                                      .d_k = 16, .d_v = 16};
    uint8_t *kp = malloc(LEN_K);
    float *bias = t_alloc(LEN_K);
    for (uint32_t j = 0; j < LEN_K; j++) {
        const bool seen = j >= LEN_K - WIN;
        kp[j] = !seen;
        bias[j] = seen ? -INFINITY : 0.25f;
    }
    const uint32_t CW = VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW;
    const vkmha_mask masks[4] = {
        {.kinds = CW, .window = WIN, .causal_offset = LEN_K - 1},
        {.kinds = VKMHA_MASK_WINDOW, .window = SYM, .causal_offset = AT},
        {.kinds = CW | VKMHA_MASK_KEY_PADDING, .window = WIN, .causal_offset = LEN_K - 1,
         .key_padding = kp},
        {.kinds = CW | VKMHA_MASK_BIAS, .window = WIN, .causal_offset = LEN_K - 1, .bias = bias,
         .bias_heads = 1}};
    hidden_keys(ref, gpus, r, "1 x 2003 keys", &one, masks,
                (const char *const[]){"causal window 100", "symmetric window 64 at 1000",
                                      "causal window 100, its keys padded (no row settles)",
                                      "causal window 100, its keys -inf (no row settles)"},
                4, 3, false);
    vkmha_attention_desc two = one;
    two.len_q = 2;
    hidden_keys(ref, gpus, r, "2 x 2003 keys", &two,
                &(const vkmha_mask){.kinds = CW, .window = WIN, .causal_offset = LEN_K - 2},
                (const char *const[]){"causal window 100"}, 1, 3, false);
    const vkmha_attention_desc longer = {.heads = 1, .len_q = 1, .len_k = LONG, .d_k = 8,
                                         .d_v = 8, .path = VKMHA_ATTENTION_PATH_FUSED,
                                         .kv_splits = 1};
    const t_attention_sizes n = t_attention_size(&longer);
    float *q = t_random(r, n.q, -1, 1), *k = t_random(r, n.k, -1, 1), *v = t_random(r, n.v, -1, 1),
          *want = t_alloc(n.out), *got = t_alloc(n.out);
    const vkmha_mask lm = {.kinds = CW, .window = LONG_WIN, .causal_offset = LONG - 1};
    static const uint32_t nan_at[3] = {0, 3470, 26000};
    for (int nan = 0; nan < 3; nan++) {
        if (nan)
            v[(size_t)nan_at[nan - 1] * longer.d_v + 1] = 0.5f;
        v[(size_t)nan_at[nan] * longer.d_v + 1] = nan ? NAN : 0.5f;
        char name[120];
        snprintf(name, sizeof name, "1 x 32768 keys, causal window 5001, 1 key range%s",
                 nan == 1 ? ", a NaN value at key 3470" : nan ? ", a NaN value at key 26000" : "");
        t_report(!vkmha_attention(ref, &longer, q, k, v, &lm, want, NULL) &&
                     !vkmha_attention(gpus[0], &longer, q, k, v, &lm, got, NULL) &&
                     t_close(name, "out", got, want, n.out, 1e-5, 2e-5),
                 "%s", name);
    }
    free(kp), free(bias), free(q), free(k), free(v), free(want), free(got);
}

/* ---- the softmax op --------------------------------------------------------- */

static void softmax_case(vkmha_context *ref, vkmha_context *gpu, t_rng *r, const rules_case *c,
                         uint32_t len_k)
{
    rules_inputs in;
    inputs_make(&in, r, c, 4, 4, len_k);
    const size_t n = (size_t)B * H * LQ * len_k;
    const float amp = c->big_logits ? 300.0f : 3.0f;
    float *x = t_random(r, n, -amp, amp), *want = t_alloc(n), *got = t_alloc(n);
    const vkmha_softmax_desc d = {.batch = B, .heads = H, .len_q = LQ, .len_k = len_k,
                                  .scale = 0.5f};
    bool ok = vkmha_softmax(ref, &d, x, &in.mask, want) == VKMHA_SUCCESS &&
              vkmha_softmax(gpu, &d, x, &in.mask, got) == VKMHA_SUCCESS;
    char name[256];
    snprintf(name, sizeof name, "softmax op, rows of %u keys: %s", len_k, c->name);
    t_report(ok && t_close(name, "y", got, want, n, 2e-6, 2e-5), "%s", name);
    free(x), free(want), free(got);
    inputs_free(&in);
}

/* ---- the tensor forms ---------------------------------------------------------- */

static vkmha_tensor *tensor_of(vkmha_context *ctx, const float *x, size_t n)
{
    const vkmha_tensor_desc td = {.dtype = VKMHA_DTYPE_F32, .rank = 1, .dims = {(uint32_t)n}};
    vkmha_tensor *t = NULL;
    if (vkmha_tensor_create(ctx, &td, &t) || (x && vkmha_tensor_upload(t, 0, x, n * 4))) {
        vkmha_tensor_destroy(t);
        return NULL;
    }
    return t;
}

static void tensor_forms(vkmha_context *gpu, t_rng *r)
{
    const rules_case *c = &cases[N_CASES - 1];
    rules_inputs in;
    inputs_make(&in, r, c, 12, 8, LK);
    const vkmha_attention_desc d = {.batch = B, .heads = H, .kv_heads = HKV, .len_q = LQ,
                                    .len_k = LK, .d_k = 12, .d_v = 8};
    const t_attention_sizes n = t_attention_size(&d);
    float *want = t_alloc(n.out), *got = t_alloc(n.out);
    bool ok = vkmha_attention(gpu, &d, in.q, in.k, in.v, &in.mask, want, NULL) == VKMHA_SUCCESS;
    vkmha_tensor *tq = tensor_of(gpu, in.q, n.q), *tk = tensor_of(gpu, in.k, n.k),
                 *tv = tensor_of(gpu, in.v, n.v), *to = tensor_of(gpu, NULL, n.out),
                 *tb = tensor_of(gpu, in.bias, (size_t)H * LQ * LK);
    const vkmha_tensor_desc kd = {.dtype = VKMHA_DTYPE_U8, .rank = 1, .dims = {B * LK}};
    vkmha_tensor *tkp = NULL;
    ok = ok && tq && tk && tv && to && tb && !vkmha_tensor_create(gpu, &kd, &tkp) &&
         !vkmha_tensor_upload(tkp, 0, in.kp, B * LK);
    const vkmha_tensor_mask tm = {.kinds = in.mask.kinds, .key_padding = tkp, .bias = tb,
                                  .bias_batch = 1, .causal_offset = in.mask.causal_offset,
                                  .window = in.mask.window, .softcap = in.mask.softcap,
                                  .alibi = in.mask.alibi, .sinks = in.mask.sinks};
    ok = ok && vkmha_attention_tensor(gpu, &d, tq, tk, tv, &tm, to, NULL) == VKMHA_SUCCESS &&
         !vkmha_tensor_download(to, 0, got, n.out * 4);
    const char *name = "vkmha_attention_tensor with every rule equals vkmha_attention";
    t_report(ok && t_close(name, "out", got, want, n.out, 1e-6, 1e-6), "%s", name);
    vkmha_tensor_destroy(tq), vkmha_tensor_destroy(tk), vkmha_tensor_destroy(tv);
    vkmha_tensor_destroy(to), vkmha_tensor_destroy(tb), vkmha_tensor_destroy(tkp);
    free(want), free(got);
    inputs_free(&in);
}

/* ---- the layer through a KV cache ------------------------------------------------ */

/* A GQA layer (d_model 24, 6 heads, 2 key/value heads) over 11 tokens: one
 * causal forward with a window of 4, ALiBi, a cap and sinks, against the same
 * tokens prefilled in a chunk of 5 then decoded one at a time through a KV
 * cache (the window and ALiBi's positions follow each entry's end), on both
 * backends. */
static void layer_decode(vkmha_context *ctx, const char *be, t_rng *r)
{
    enum { D = 24, NH = 6, NKV = 2, L = 11, CHUNK = 5 };
    t_rng rr = *r; /* the same weights and tokens on every backend */
    t_layer_desc ld;
    t_layer_desc_make(&ld, &rr, D, NH, NKV, D / NH, D / NH, D, 0.4f);
    float *x = t_random(&rr, (size_t)L * D, -1, 1), *sinks = t_random(&rr, NH, -1, 1);
    float slopes[NH];
    vkmha_alibi_slopes(NH, slopes);
    const vkmha_mask m = {.kinds = VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW | VKMHA_MASK_ALIBI |
                                   VKMHA_MASK_SOFTCAP | VKMHA_MASK_SINKS,
                          .window = 4, .softcap = 2.5f, .alibi = slopes, .sinks = sinks};
    float *whole = t_alloc((size_t)L * D), *steps = t_alloc((size_t)L * D);
    vkmha_mha *mha = NULL;
    vkmha_kv_cache *cache = NULL;
    const vkmha_kv_cache_desc cd = {.batch = 1, .capacity = L};
    bool ok = !vkmha_mha_create(ctx, &ld.d, &mha) && !vkmha_kv_cache_create(mha, &cd, &cache);
    vkmha_mha_io io = {.batch = 1, .len_q = L, .query = x, .key = x, .value = x, .out = whole,
                       .mask = &m};
    ok = ok && !vkmha_mha_forward(mha, &io);
    for (uint32_t t = 0; t < L && ok;) {
        const uint32_t n = t == 0 ? CHUNK : 1;
        const float *xt = x + (size_t)t * D;
        vkmha_mha_io s = {.batch = 1, .len_q = n, .query = xt, .key = xt, .value = xt,
                          .out = steps + (size_t)t * D, .mask = &m, .kv_cache = cache};
        const vkmha_status st = vkmha_mha_forward(mha, &s);
        if (st)
            t_diag("%s: step at %u: %s", be, t, vkmha_context_last_error(ctx));
        ok = st == VKMHA_SUCCESS;
        t += n;
    }
    char name[200];
    snprintf(name, sizeof name,
             "%s: layer with window, ALiBi, cap and sinks decoded through a KV cache equals "
             "its causal forward",
             be);
    t_report(ok && t_close(name, "out", steps, whole, (size_t)L * D, T_LAYER_ATOL,
                           T_LAYER_RTOL),
             "%s", name);
    vkmha_kv_cache_destroy(cache);
    vkmha_mha_destroy(mha);
    free(ld.mem), free(x), free(sinks), free(whole), free(steps);
}

/* ---- RoPE in the layer ----------------------------------------------------------- */

/* A layer of desc d on ctx (*mg, which the caller destroys) forwarding io
 * with run ri's path and key splits into out; false on an error. */
static bool run_forward(vkmha_context *ctx, const vkmha_mha_desc *d, const vkmha_mha_io *io,
                        size_t ri, float *out, vkmha_mha **mg)
{
    vkmha_mha_io r = *io;
    r.out = out;
    r.attention_path = runs[ri].path;
    r.kv_splits = runs[ri].kv_splits;
    return !vkmha_mha_create(ctx, d, mg) && !vkmha_mha_forward(*mg, &r);
}

/* A GQA layer (d_model 24, 6 heads of d_k 8, 2 key/value heads) with RoPE
 * on 6 of its 8 dims (theta 500, scale 2), both pair layouts, explicit
 * positions (entry 1 left-padded), on each Vulkan context and path against
 * the reference: the whole prompt (fp32 and fp16 activations, and as
 * tensors), then a prompt of 4 and single tokens through an f32, an f16
 * and a Q8 KV cache, step by step (the append rotates the new keys: its
 * copies heads_cpu_rope and kv_q8_rope on the default context, heads_rope
 * on one with the workgroup-per-row kernels, VKMHA_ROW_KERNELS=gpu; the
 * workgroup-shared kernel rotates the queries as it loads them). */
static const char *const rope_kernels[3] = {"default kernel", "workgroup-shared kernel",
                                            "workgroup-per-row copies"};

static void rope_layer(vkmha_context *ref, vkmha_context *const gpus[3], t_rng *r)
{
    const char *const *kernels = rope_kernels;
    enum { D = 24, NH = 6, NKV = 2, DK = 8, L = 9, NB = 2 };
    t_layer_desc ld;
    t_layer_desc_make(&ld, r, D, NH, NKV, DK, DK, D, 0.4f);
    ld.d.post_norm = false;
    ld.d.norm_gamma = ld.d.norm_beta = NULL;
    ld.d.rope_dims = 6;
    ld.d.rope_theta = 500.0f;
    ld.d.rope_scale = 2.0f;
    float *x = t_random(r, (size_t)NB * L * D, -1, 1);
    uint32_t pos[NB * L];
    for (uint32_t t = 0; t < L; t++) {
        pos[t] = 40 + t;
        pos[L + t] = t < 2 ? 0 : t - 2;
    }
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    const size_t n = (size_t)NB * L * D;
    float *want = t_alloc(n), *got = t_alloc(n);
    for (uint32_t layout = 0; layout < 2; layout++) {
        ld.d.rope_layout = layout;
        vkmha_mha *mr = NULL;
        bool ok = !vkmha_mha_create(ref, &ld.d, &mr);
        vkmha_mha_io io = {.batch = NB, .len_q = L, .query = x, .key = x, .value = x,
                           .out = want, .mask = &causal, .positions = pos};
        ok = ok && !vkmha_mha_forward(mr, &io);
        for (int g = 0; g < 3; g++)
            for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ri++) {
                if (g && runs[ri].path == VKMHA_ATTENTION_PATH_UNFUSED)
                    continue;
                char name[200];
                snprintf(name, sizeof name, "RoPE %s, %s, %s: whole prompt at given positions",
                         layout ? "interleaved" : "half-split", kernels[g], runs[ri].name);
                vkmha_mha *mg = NULL;
                const bool gok = ok && run_forward(gpus[g], &ld.d, &io, ri, got, &mg);
                t_report(gok && t_close(name, "out", got, want, n, T_LAYER_ATOL, T_LAYER_RTOL),
                         "%s", name);
                /* Decode through each cache kind, on both backends alike (the
                 * Q8 append is one kernel on every context); on the
                 * workgroup-shared kernel, which rotates the queries as it
                 * loads them, a decode step's query heads folded into the
                 * rows of their key head. */
                static const char *const kinds[3] = {"an f32", "an f16", "a Q8"};
                for (uint32_t ck = 0; ck < 3 && !(g == 2 && ck == 2); ck++) {
                    const vkmha_kv_cache_desc cd = {
                        .batch = NB, .capacity = L,
                        .dtype = ck == 1 ? VKMHA_DTYPE_F16 : VKMHA_DTYPE_F32,
                        .quant = ck == 2 ? VKMHA_QUANT_Q8 : 0};
                    vkmha_kv_cache *cr = NULL, *cg = NULL;
                    bool sok = gok && !vkmha_kv_cache_create(mr, &cd, &cr) &&
                               !vkmha_kv_cache_create(mg, &cd, &cg);
                    float *sx = t_alloc((size_t)NB * 4 * D), *sw = t_alloc((size_t)NB * 4 * D),
                          *sg = t_alloc((size_t)NB * 4 * D);
                    uint32_t sp[NB * 4];
                    for (uint32_t t = 0; t < L && sok;) {
                        const uint32_t m = t == 0 ? 4 : 1;
                        for (uint32_t b = 0; b < NB; b++) {
                            memcpy(sx + (size_t)b * m * D, x + ((size_t)b * L + t) * D,
                                   (size_t)m * D * sizeof(float));
                            for (uint32_t i = 0; i < m; i++)
                                sp[b * m + i] = pos[b * L + t + i];
                        }
                        vkmha_mha_io s = {.batch = NB, .len_q = m, .query = sx, .key = sx,
                                          .value = sx, .out = sw, .mask = &causal,
                                          .kv_cache = cr, .positions = sp};
                        sok = !vkmha_mha_forward(mr, &s);
                        s.out = sg;
                        s.kv_cache = cg;
                        s.attention_path = runs[ri].path;
                        s.kv_splits = runs[ri].kv_splits;
                        sok = sok && !vkmha_mha_forward(mg, &s) &&
                              t_close(name, "step", sg, sw, (size_t)NB * m * D, T_LAYER_ATOL,
                                      T_LAYER_RTOL);
                        t += m;
                    }
                    t_report(sok, "RoPE %s, %s, %s: decoded through %s cache step by step",
                             layout ? "interleaved" : "half-split", kernels[g], runs[ri].name,
                             kinds[ck]);
                    vkmha_kv_cache_destroy(cr);
                    vkmha_kv_cache_destroy(cg);
                    free(sx), free(sw), free(sg);
                }
                vkmha_mha_destroy(mg);
            }
        /* fp16 activations, and the tensor form with host positions. */
        vkmha_mha *mg = NULL;
        void *x16 = t_to_dt(VKMHA_DTYPE_F16, x, n), *w16 = malloc(n * 2), *g16 = malloc(n * 2);
        vkmha_mha_io h = io;
        h.query = h.key = h.value = x16;
        h.out = w16;
        h.dtype = VKMHA_DTYPE_F16;
        bool hok = ok && !vkmha_mha_forward(mr, &h) && !vkmha_mha_create(gpus[0], &ld.d, &mg);
        h.out = g16;
        hok = hok && !vkmha_mha_forward(mg, &h);
        t_report(hok && t_close_dt("RoPE fp16", "out", VKMHA_DTYPE_F16, g16, w16, n, 4e-3, 4e-3),
                 "RoPE %s: fp16 activations", layout ? "interleaved" : "half-split");
        vkmha_tensor *tx = tensor_of(gpus[0], x, n), *to = tensor_of(gpus[0], NULL, n);
        const vkmha_tensor_mask tc = {.kinds = VKMHA_MASK_CAUSAL};
        const vkmha_mha_tensors ti = {.batch = NB, .len_q = L, .query = tx, .key = tx,
                                      .value = tx, .out = to, .mask = &tc, .positions = pos};
        hok = tx && to && !vkmha_mha_forward_tensor(mg, &ti) &&
              !vkmha_tensor_download(to, 0, got, n * 4);
        t_report(hok && t_close("RoPE tensors", "out", got, want, n, T_LAYER_ATOL, T_LAYER_RTOL),
                 "RoPE %s: the tensor form with host positions",
                 layout ? "interleaved" : "half-split");
        vkmha_tensor_destroy(tx), vkmha_tensor_destroy(to);
        vkmha_mha_destroy(mg);
        vkmha_mha_destroy(mr);
        free(x16), free(w16), free(g16);
    }
    free(ld.mem), free(x), free(want), free(got);
}

/* The same layer and a cache of cd on the reference (index 0) and on gpu
 * (1): false on an error. pair_destroy destroys what was made. */
typedef struct rope_pair {
    vkmha_mha *m[2];
    vkmha_kv_cache *c[2];
} rope_pair;

static bool pair_make(rope_pair *pr, vkmha_context *ref, vkmha_context *gpu,
                      const vkmha_mha_desc *d, const vkmha_kv_cache_desc *cd)
{
    vkmha_context *const ctx[2] = {ref, gpu};
    *pr = (rope_pair){{NULL, NULL}, {NULL, NULL}};
    bool ok = true;
    for (int i = 0; i < 2; i++)
        ok = ok && !vkmha_mha_create(ctx[i], d, &pr->m[i]) &&
             !vkmha_kv_cache_create(pr->m[i], cd, &pr->c[i]);
    return ok;
}

static void pair_destroy(rope_pair *pr)
{
    for (int i = 0; i < 2; i++) {
        vkmha_kv_cache_destroy(pr->c[i]);
        vkmha_mha_destroy(pr->m[i]);
    }
}

/* RoPE through a cache whose entries hold different lengths: entry 0
 * prefilled with 3 tokens, entry 1 with 5, then 3 steps of one token for
 * both in one call (the append's runs of equal old lengths then start at
 * entry 1 too, each with its rows of the table), f32 and Q8 caches, on
 * the default and workgroup-per-row contexts against the reference. */
static void rope_ragged(vkmha_context *ref, vkmha_context *const gpus[3], t_rng *r)
{
    enum { D = 24, NH = 6, NKV = 2, DK = 8, NB = 2, CAP = 8 };
    t_layer_desc ld;
    t_layer_desc_make(&ld, r, D, NH, NKV, DK, DK, D, 0.4f);
    ld.d.rope_dims = 8;
    ld.d.rope_theta = 100.0f;
    float *x = t_random(r, (size_t)NB * CAP * D, -1, 1), *want = t_alloc((size_t)NB * 5 * D),
          *got = t_alloc((size_t)NB * 5 * D);
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    for (uint32_t layout = 0; layout < 2; layout++)
        for (int g = 0; g < 3; g += 2)
            for (uint32_t q8 = 0; q8 < 2 && !(g && q8); q8++) {
                ld.d.rope_layout = layout;
                const vkmha_kv_cache_desc cd = {.batch = NB, .capacity = CAP,
                                                .quant = q8 ? VKMHA_QUANT_Q8 : 0};
                rope_pair pr;
                bool ok = pair_make(&pr, ref, gpus[g], &ld.d, &cd);
                /* (entries, first entry, tokens) of each call */
                static const uint32_t calls[5][3] = {{1, 0, 3}, {1, 1, 5}, {2, 0, 1},
                                                     {2, 0, 1}, {2, 0, 1}};
                for (int s = 0; s < 5 && ok; s++) {
                    const uint32_t nb = calls[s][0], n = calls[s][2];
                    float *xs = x + (size_t)s * NB * D;
                    for (int i = 0; i < 2 && ok; i++) {
                        const vkmha_mha_io io = {.batch = nb, .len_q = n, .query = xs,
                                                 .key = xs, .value = xs,
                                                 .out = i ? got : want, .mask = &causal,
                                                 .kv_cache = pr.c[i], .kv_entry = calls[s][1]};
                        ok = !vkmha_mha_forward(pr.m[i], &io);
                    }
                    ok = ok && t_close("RoPE ragged", "out", got, want, (size_t)nb * n * D,
                                       T_LAYER_ATOL, T_LAYER_RTOL);
                }
                t_report(ok, "RoPE %s, %s: entries of 3 and 5 cached tokens stepped in one "
                         "call through %s cache",
                         layout ? "interleaved" : "half-split", rope_kernels[g],
                         q8 ? "a Q8" : "an f32");
                pair_destroy(&pr);
            }
    free(ld.mem), free(x), free(want), free(got);
}

/* RoPE in mixed batches (io.entry_tokens): three cache entries stepped by
 * calls whose entries bring 4, 2, 5 tokens, then 1, 3, 1, then one each
 * (each call's runs of equal counts are parts with their own rows of the
 * table, written one after another into one command buffer; on the
 * workgroup-shared kernel each part's queries are rotated at its q load),
 * both pair layouts, on the default and workgroup-shared contexts against
 * the reference's same calls. */
static void rope_mixed(vkmha_context *ref, vkmha_context *const gpus[3], t_rng *r)
{
    enum { D = 24, NH = 6, NKV = 2, DK = 8, NB = 3, CAP = 12, STEPS = 3 };
    static const uint32_t counts[STEPS][NB] = {{4, 2, 5}, {1, 3, 1}, {1, 1, 1}};
    t_layer_desc ld;
    t_layer_desc_make(&ld, r, D, NH, NKV, DK, DK, D, 0.4f);
    ld.d.rope_dims = 8;
    ld.d.rope_theta = 50.0f;
    float *x = t_random(r, (size_t)11 * D, -1, 1), *want = t_alloc((size_t)11 * D),
          *got = t_alloc((size_t)11 * D);
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    for (uint32_t layout = 0; layout < 2; layout++)
        for (int g = 0; g < 2; g++) {
            ld.d.rope_layout = layout;
            const vkmha_kv_cache_desc cd = {.batch = NB, .capacity = CAP};
            rope_pair pr;
            bool ok = pair_make(&pr, ref, gpus[g], &ld.d, &cd);
            for (int s = 0; s < STEPS && ok; s++) {
                const uint32_t n = counts[s][0] + counts[s][1] + counts[s][2];
                for (int i = 0; i < 2 && ok; i++) {
                    const vkmha_mha_io io = {.batch = NB, .len_q = n, .query = x, .key = x,
                                             .value = x, .out = i ? got : want, .mask = &causal,
                                             .kv_cache = pr.c[i], .entry_tokens = counts[s]};
                    ok = !vkmha_mha_forward(pr.m[i], &io);
                }
                ok = ok && t_close("RoPE mixed", "out", got, want, (size_t)n * D, T_LAYER_ATOL,
                                   T_LAYER_RTOL);
            }
            t_report(ok, "RoPE %s, %s: mixed batches of 4 + 2 + 5, 1 + 3 + 1, 1 + 1 + 1 tokens "
                     "through a cache",
                     layout ? "interleaved" : "half-split", rope_kernels[g]);
            pair_destroy(&pr);
        }
    free(ld.mem), free(x), free(want), free(got);
}

/* ---- MLA's head sizes in the layer ---------------------------------------------- */

/* DeepSeek's MLA in its absorbed form is multi-query attention of d_k 576
 * (512 latent + 64 rotary dims) and d_v 512: a layer of 4 such heads over
 * one key / value head (d_model 32, RoPE on 64 dims, causal), whole on each
 * Vulkan context and path against the reference, then a prompt of 5 and
 * single tokens through an f32 and a Q8 KV cache, step by step, against the
 * reference's steps (the d576 kernels; the Q8 one reads 8-bit rows). */
static void mla_layer(vkmha_context *ref, vkmha_context *const gpus[2], t_rng *r)
{
    enum { D = 32, NH = 4, DK = 576, DV = 512, L = 8, CHUNK = 5 };
    t_layer_desc ld;
    t_layer_desc_make(&ld, r, D, NH, 1, DK, DV, D, 0.4f);
    ld.d.rope_dims = 64;
    float *x = t_random(r, (size_t)L * D, -1, 1), *want = t_alloc((size_t)L * D),
          *got = t_alloc((size_t)L * D), *sw = t_alloc((size_t)L * D);
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    vkmha_mha *mr = NULL;
    vkmha_mha_io io = {.batch = 1, .len_q = L, .query = x, .key = x, .value = x, .out = want,
                       .mask = &causal};
    const bool ok = !vkmha_mha_create(ref, &ld.d, &mr) && !vkmha_mha_forward(mr, &io);
    for (int g = 0; g < 2; g++)
        for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ri++) {
            if (g && runs[ri].path == VKMHA_ATTENTION_PATH_UNFUSED)
                continue;
            const char *kernel = g ? "workgroup-shared kernel" : "default kernel";
            vkmha_mha *mg = NULL;
            const bool gok = ok && run_forward(gpus[g], &ld.d, &io, ri, got, &mg);
            if (!gok)
                t_diag("MLA layer: %s", vkmha_context_last_error(gpus[g]));
            t_report(gok && t_close("MLA layer", "out", got, want, (size_t)L * D, T_LAYER_ATOL,
                                    T_LAYER_RTOL),
                     "MLA layer (4 heads of d_k 576, d_v 512 over one key head, RoPE 64): "
                     "whole prompt, %s, %s",
                     kernel, runs[ri].name);
            for (uint32_t q8 = 0; q8 < 2 && runs[ri].path != VKMHA_ATTENTION_PATH_UNFUSED; q8++) {
                const vkmha_kv_cache_desc cd = {.capacity = L, .quant = q8 ? VKMHA_QUANT_Q8 : 0};
                vkmha_kv_cache *cr = NULL, *cg = NULL;
                bool sok = gok && !vkmha_kv_cache_create(mr, &cd, &cr) &&
                           !vkmha_kv_cache_create(mg, &cd, &cg);
                for (uint32_t t = 0; t < L && sok;) {
                    const uint32_t m = t == 0 ? CHUNK : 1;
                    const float *xt = x + (size_t)t * D;
                    vkmha_mha_io s = {.batch = 1, .len_q = m, .query = xt, .key = xt,
                                      .value = xt, .out = sw, .mask = &causal, .kv_cache = cr};
                    sok = !vkmha_mha_forward(mr, &s);
                    s.out = got;
                    s.kv_cache = cg;
                    s.attention_path = runs[ri].path;
                    s.kv_splits = runs[ri].kv_splits;
                    sok = sok && !vkmha_mha_forward(mg, &s) &&
                          t_close("MLA step", "out", got, sw, (size_t)m * D, T_LAYER_ATOL,
                                  T_LAYER_RTOL);
                    t += m;
                }
                t_report(sok, "MLA layer, %s, %s: decoded through %s cache step by step",
                         kernel, runs[ri].name, q8 ? "a Q8" : "an f32");
                vkmha_kv_cache_destroy(cr);
                vkmha_kv_cache_destroy(cg);
            }
            vkmha_mha_destroy(mg);
        }
    vkmha_mha_destroy(mr);
    free(ld.mem), free(x), free(want), free(got), free(sw);
}

/* ---- bad input ---------------------------------------------------------------- */

static void bad_input(vkmha_context *ctx, const char *be)
{
    const vkmha_attention_desc d = {.heads = 2, .len_q = 2, .len_k = 3, .d_k = 4, .d_v = 4};
    float q[16] = {0}, k[24] = {0}, v[24] = {0}, out[16], ok_sl[2] = {0.5f, 0.25f},
          nan_sl[2] = {0.5f, NAN};
    const struct {
        vkmha_mask m;
        const char *field;
    } bad[] = {
        {{.kinds = VKMHA_MASK_WINDOW}, "window"},
        {{.window = 3}, "window"},
        {{.kinds = VKMHA_MASK_SOFTCAP}, "softcap"},
        {{.kinds = VKMHA_MASK_SOFTCAP, .softcap = -1.0f}, "softcap"},
        {{.kinds = VKMHA_MASK_SOFTCAP, .softcap = NAN}, "softcap"},
        {{.kinds = VKMHA_MASK_SOFTCAP, .softcap = INFINITY}, "softcap"},
        {{.kinds = VKMHA_MASK_ALIBI}, "alibi"},
        {{.alibi = ok_sl}, "alibi"},
        {{.kinds = VKMHA_MASK_ALIBI, .alibi = nan_sl}, "alibi"},
        {{.kinds = VKMHA_MASK_SINKS, .sinks = nan_sl}, "sinks"},
        {{.kinds = VKMHA_MASK_SINKS}, "sinks"},
        {{.causal_offset = 1}, "causal_offset"},
        {{.kinds = VKMHA_MASK_WINDOW, .window = 2, .causal_offset = 0x7fffffffu},
         "causal_offset"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        t_fill(out, 16, 7.0f);
        const vkmha_status st = vkmha_attention(ctx, &d, q, k, v, &bad[i].m, out, NULL);
        const char *msg = vkmha_context_last_error(ctx);
        char name[160];
        snprintf(name, sizeof name, "%s: bad rule %zu (mask->%s) refused, naming it", be, i,
                 bad[i].field);
        const bool named = strstr(msg, bad[i].field) != NULL;
        if (!named)
            t_diag("%s: message '%s'", name, msg);
        t_report(st == VKMHA_ERROR_INVALID_ARGUMENT && named &&
                     t_untouched(out, 16, 7.0f, "out"),
                 "%s", name);
    }
    /* The context works after them, and a window needs no causal mask to
     * take an offset. */
    const vkmha_mask good = {.kinds = VKMHA_MASK_WINDOW, .window = 2, .causal_offset = 1};
    t_report(vkmha_attention(ctx, &d, q, k, v, &good, out, NULL) == VKMHA_SUCCESS &&
                 t_context_works(ctx, be),
             "%s: the context works after the refusals", be);
}

int main(void)
{
    t_pin_libraries();
    t_rng r = {0x5eed2907u};
    const t_cache_contexts cx = t_cache_contexts_create();
    if (!cx.ref || !cx.gpu || !cx.shared) {
        t_report(false, "contexts created");
        return t_finish();
    }
    reference_by_hand(cx.ref);
    vkmha_context *const gpus[2] = {cx.gpu, cx.shared};
    /* RoPE's appends also through the workgroup-per-row copies (heads.comp) */
    setenv("VKMHA_ROW_KERNELS", "gpu", 1);
    vkmha_context *const rows_gpu = t_context(VKMHA_BACKEND_VULKAN, 0);
    unsetenv("VKMHA_ROW_KERNELS");
    vkmha_context *const gpus3[3] = {cx.gpu, cx.shared, rows_gpu};
    for (size_t c = 0; c < N_CASES; c++) {
        attention_case(cx.ref, gpus, &r, &cases[c], 12, 8, VKMHA_DTYPE_F32);
        attention_case(cx.ref, gpus, &r, &cases[c], 10, 6, VKMHA_DTYPE_F32);
        softmax_case(cx.ref, cx.gpu, &r, &cases[c], 19);
        softmax_case(cx.ref, cx.gpu, &r, &cases[c], 20);
    }
    attention_case(cx.ref, gpus, &r, &cases[N_CASES - 1], 12, 8, VKMHA_DTYPE_F16);
    attention_case(cx.ref, gpus, &r, &cases[4], 16, 8, VKMHA_DTYPE_F16);
    /* MLA's head dims (the d576 kernels) under every rule, fp32 and fp16 */
    attention_case(cx.ref, gpus, &r, &cases[N_CASES - 1], 576, 512, VKMHA_DTYPE_F32);
    attention_case(cx.ref, gpus, &r, &cases[4], 576, 512, VKMHA_DTYPE_F16);
    mla_layer(cx.ref, gpus, &r);
    tensor_forms(cx.gpu, &r);
    long_rows(cx.ref, gpus, &r);
    decode_hidden(cx.ref, gpus, &r);
    rope_layer(cx.ref, gpus3, &r);
    rope_ragged(cx.ref, gpus3, &r);
    rope_mixed(cx.ref, gpus3, &r);
    layer_decode(cx.ref, "reference", &r);
    layer_decode(cx.gpu, "vulkan", &r);
    layer_decode(cx.shared, "vulkan, workgroup-shared kernel", &r);
    bad_input(cx.ref, "reference");
    bad_input(cx.gpu, "vulkan");
    t_report_validation(rows_gpu);
    vkmha_context_destroy(rows_gpu);
    t_cache_contexts_destroy(&cx);
    return t_finish();
}
