/* Head shards (vkmha_mha_desc.head_begin / head_end): the sum of 2 and of 4
 * shards' outputs, plus b_o, then the post-norm applied on the host, equals
 * the whole layer, element by element, on both backends, in fp32 and with
 * 16-bit weights, with grouped-query heads, d_k != d_v, cross-attention
 * (kdim != d_model) and masks; a cached decode step per shard sums to the
 * whole layer's; every bad range is refused with its field's name. */
#include "util.h"
#include "half.h"

/* d_model 24, 8 query heads over 4 key/value heads, d_k 6, d_v 5, kdim 20. */
enum { D = 24, H = 8, HKV = 4, DK = 6, DV = 5, KD = 20, B = 2, LQ = 5, LK = 7 };

typedef t_layer_desc layer;

static void layer_make(layer *l, t_rng *r)
{
    t_layer_desc_make(l, r, D, H, HKV, DK, DV, KD, 0.5f);
}

/* The layer's values of n parameters: rounded to its storage dtype. */
static void stored(const vkmha_mha_desc *d, const float *p, size_t n, float *out)
{
    uint16_t h[D];
    for (size_t i = 0; i < n; i++)
        out[i] = p[i];
    if (d->storage_dtype != VKMHA_DTYPE_F32) {
        vkmha__from_f32(d->storage_dtype, p, n, h);
        vkmha__to_f32(d->storage_dtype, h, n, out);
    }
}

/* y = LayerNorm(x + s) with the layer's gamma, beta (as it stores them) and
 * eps, per row (as the layer's post-norm; double accumulation). */
static void post_norm(const vkmha_mha_desc *d, const float *x, const float *s, float *y,
                      uint32_t rows)
{
    float g[D], b[D];
    stored(d, d->norm_gamma, D, g);
    stored(d, d->norm_beta, D, b);
    for (uint32_t r = 0; r < rows; r++) {
        double t[D], mean = 0, var = 0;
        for (int c = 0; c < D; c++)
            mean += t[c] = (double)x[r * D + c] + s[r * D + c];
        mean /= D;
        for (int c = 0; c < D; c++)
            var += (t[c] - mean) * (t[c] - mean);
        const double sd = sqrt(var / D + 1e-6);
        for (int c = 0; c < D; c++)
            y[r * D + c] = (float)(g[c] * (t[c] - mean) / sd + b[c]);
    }
}

/* The whole layer against the sum of `n` shards of equal heads. */
static void sum_case(vkmha_context *ctx, const char *ctx_name, t_rng *rng, uint32_t n,
                     uint32_t storage)
{
    char name[160];
    snprintf(name, sizeof name, "%s, %u shards, storage dtype %u", ctx_name, n, storage);
    layer l;
    layer_make(&l, rng);
    l.d.storage_dtype = storage;
    float *q = t_random(rng, B * LQ * D, -1, 1), *kv = t_random(rng, B * LK * KD, -1, 1);
    float *want = t_alloc(B * LQ * D), *part = t_alloc(B * LQ * D), *sum = t_alloc(B * LQ * D);
    float *got = t_alloc(B * LQ * D);
    t_mask tm;
    vkmha_mha_io io = {.batch = B, .len_q = LQ, .len_k = LK, .query = q, .key = kv,
                       .value = kv, .out = want,
                       .mask = t_mask_make(&tm, rng, VKMHA_MASK_KEY_PADDING | VKMHA_MASK_BIAS,
                                           B, H, LQ, LK, 0, 1, false)};
    vkmha_mha *full = NULL;
    bool ok = !vkmha_mha_create(ctx, &l.d, &full) && !vkmha_mha_forward(full, &io);
    /* The bias broadcasts over heads: the same for every shard. */
    for (size_t i = 0; i < B * LQ * D; i++)
        sum[i] = 0.0f;
    for (uint32_t s = 0; ok && s < n; s++) {
        vkmha_mha_desc sd = l.d;
        sd.head_begin = s * (H / n);
        sd.head_end = (s + 1) * (H / n);
        vkmha_mha *m = NULL;
        io.out = part;
        ok = !vkmha_mha_create(ctx, &sd, &m) && !vkmha_mha_forward(m, &io);
        vkmha_mha_desc got_d;
        ok = ok && !vkmha_mha_get_desc(m, &got_d) && got_d.n_head == H / n &&
             got_d.n_kv_head == HKV / n && !got_d.post_norm && got_d.head_begin == sd.head_begin;
        if (!ok)
            t_diag("%s: shard %u: %s", name, s, vkmha_context_last_error(ctx));
        for (size_t i = 0; ok && i < B * LQ * D; i++)
            sum[i] += part[i];
        vkmha_mha_destroy(m);
    }
    /* + b_o, then the post-norm the engine applies (with the parameters as
     * the whole layer stores them). */
    float b_o[D];
    stored(&l.d, l.d.b_o, D, b_o);
    for (size_t i = 0; i < B * LQ * D; i++)
        sum[i] += b_o[i % D];
    post_norm(&l.d, q, sum, got, B * LQ);
    const double atol = storage == VKMHA_DTYPE_F32 ? 2e-5 : 2e-3;
    ok = ok && t_close(name, "out", got, want, B * LQ * D, atol, 1e-3);
    t_report(ok, "%s: the shards' sum + b_o, post-normed, equals the whole layer", name);
    vkmha_mha_destroy(full);
    t_mask_free(&tm);
    free(q), free(kv), free(want), free(part), free(sum), free(got), free(l.mem);
}

/* A cached decode step per shard (one KV cache each) sums to the whole
 * layer's cached step. */
static void cached_case(vkmha_context *ctx, const char *ctx_name, t_rng *rng)
{
    enum { T = 4 };
    char name[128];
    snprintf(name, sizeof name, "%s, 2 shards with a KV cache each", ctx_name);
    layer l;
    layer_make(&l, rng);
    l.d.kdim = l.d.vdim = 0; /* self-attention */
    float *w_k = t_random(rng, HKV * DK * D, -0.5f, 0.5f), *w_v = t_random(rng, HKV * DV * D, -0.5f, 0.5f);
    l.d.w_k = w_k, l.d.w_v = w_v;
    vkmha_mha *m[3] = {NULL, NULL, NULL};
    vkmha_kv_cache *c[3] = {NULL, NULL, NULL};
    const vkmha_kv_cache_desc cd = {.capacity = T};
    bool ok = true;
    for (int i = 0; i < 3 && ok; i++) {
        vkmha_mha_desc sd = l.d;
        sd.head_begin = i ? (uint32_t)(i - 1) * (H / 2) : 0;
        sd.head_end = i ? (uint32_t)i * (H / 2) : 0;
        ok = !vkmha_mha_create(ctx, &sd, &m[i]) && !vkmha_kv_cache_create(m[i], &cd, &c[i]);
    }
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    float *x = t_random(rng, T * D, -1, 1);
    for (uint32_t t = 0; ok && t < T; t++) {
        float out[3][D], got[D];
        for (int i = 0; i < 3 && ok; i++) {
            vkmha_mha_io io = {.len_q = 1, .query = x + t * D, .key = x + t * D,
                               .value = x + t * D, .mask = &causal, .out = out[i],
                               .kv_cache = c[i]};
            ok = !vkmha_mha_forward(m[i], &io);
        }
        float sum[D];
        for (int j = 0; j < D; j++)
            sum[j] = out[1][j] + out[2][j] + ((const float *)l.d.b_o)[j];
        post_norm(&l.d, x + t * D, sum, got, 1);
        ok = ok && t_close(name, "out", got, out[0], D, 2e-5, 1e-3);
    }
    t_report(ok, "%s: every step's sum equals the whole layer's", name);
    for (int i = 0; i < 3; i++) {
        vkmha_kv_cache_destroy(c[i]);
        vkmha_mha_destroy(m[i]);
    }
    free(x), free(w_k), free(w_v), free(l.mem);
}

static void bad_ranges(vkmha_context *ctx, const char *ctx_name, t_rng *rng)
{
    const struct {
        uint32_t h0, h1;
        const char *word;
    } bad[] = {{2, 2, "head_begin"}, {4, 2, "head_begin"}, {0, 9, "head_end"},
               {1, 4, "head_begin"}, {0, 3, "head_end"},   {0, 0xffffffffu, "head_end"}};
    layer l;
    layer_make(&l, rng);
    bool ok = true;
    for (size_t i = 0; ok && i < sizeof bad / sizeof bad[0]; i++) {
        vkmha_mha_desc sd = l.d;
        sd.head_begin = bad[i].h0, sd.head_end = bad[i].h1;
        vkmha_mha *m = (vkmha_mha *)&l;
        vkmha_status st = vkmha_mha_create(ctx, &sd, &m);
        ok = st == VKMHA_ERROR_INVALID_ARGUMENT && m == NULL &&
             t_has_word(vkmha_context_last_error(ctx), bad[i].word);
        if (!ok)
            t_diag("[%u, %u): %s: %s", bad[i].h0, bad[i].h1, vkmha_status_string(st),
                   vkmha_context_last_error(ctx));
    }
    ok = ok && t_context_works(ctx, "after bad shards");
    t_report(ok, "%s: bad head ranges are refused, naming the field", ctx_name);
    free(l.mem);
}

int main(void)
{
    t_rng rng = {0x5348415244ull};
    vkmha_context *ctxs[2] = {t_context(VKMHA_BACKEND_REFERENCE, 0),
                              t_context(VKMHA_BACKEND_VULKAN, 0)};
    const char *names[2] = {"reference", "Vulkan"};
    for (int c = 0; c < 2; c++) {
        for (uint32_t n = 2; n <= 4; n += 2) {
            sum_case(ctxs[c], names[c], &rng, n, VKMHA_DTYPE_F32);
            sum_case(ctxs[c], names[c], &rng, n, VKMHA_DTYPE_F16);
        }
        sum_case(ctxs[c], names[c], &rng, 2, VKMHA_DTYPE_BF16);
        cached_case(ctxs[c], names[c], &rng);
        bad_ranges(ctxs[c], names[c], &rng);
    }
    t_report_validation(ctxs[1]);
    vkmha_context_destroy(ctxs[0]);
    vkmha_context_destroy(ctxs[1]);
    return t_finish();
}
