/* vkmha_mha_forward on Vulkan vs the reference backend: self- and
 * cross-attention, Lq != Lk, d_k != d_v, kdim != vdim != d_model, GQA and
 * MQA, biases on and off, post-norm on and off (with given and default gamma
 * and beta), every mask kind and their combinations, a fully masked row, and
 * returned attention weights; each case on the default (fused) attention
 * path, the fused path with the keys split in 3, and the unfused path.
 *
 * Weights follow torch.nn.Linear's init (uniform +-1/sqrt(in)), inputs are
 * uniform in [-1, 1]. Tolerances: output |gpu - ref| <= 1e-5 + 1e-4 |ref|
 * (five chained fp32 stages against double accumulation; the post-norm
 * divides by a standard deviation, which amplifies absolute errors), weights
 * <= 1e-6 + 1e-5 |ref|. */
#include "util.h"

#define OUT_ATOL 1e-5
#define OUT_RTOL 1e-4
#define W_ATOL 1e-6
#define W_RTOL 1e-5

typedef struct mha_case {
    uint32_t batch, len_q, len_k; /* len_k 0: self-attention, one pointer */
    uint32_t d_model, n_head, n_kv_head, d_k, d_v, kdim, vdim;
    bool bias, post_norm, norm_params;
    uint32_t kinds, bias_batch, bias_heads;
    bool fully_masked_row, weights;
} mha_case;

static float *linear_weight(t_rng *r, uint32_t out, uint32_t in)
{
    float bound = 1.0f / sqrtf((float)in);
    return t_random(r, (size_t)out * in, -bound, bound);
}

static void run_case(vkmha_context *ref, vkmha_context *gpu, const char *tag, t_rng *rng, const mha_case *c)
{
    char name[300], mname[64];
    bool self = c->len_k == 0;
    uint32_t Lk = self ? c->len_q : c->len_k;
    snprintf(name, sizeof name,
             "mha B %u Lq %u Lk %u d_model %u H %u Hkv %u dk %u dv %u kdim %u vdim %u bias %d "
             "post_norm %d%s mask %s%s%s%s",
             c->batch, c->len_q, Lk, c->d_model, c->n_head, c->n_kv_head, c->d_k, c->d_v,
             c->kdim, c->vdim, c->bias, c->post_norm, c->norm_params ? " (gamma, beta)" : "",
             t_mask_name(c->kinds, mname, sizeof mname),
             c->fully_masked_row ? " fully-masked-row" : "", c->weights ? " weights" : "",
             self ? " self" : "");

    vkmha_mha_desc d = {0};
    d.d_model = c->d_model;
    d.n_head = c->n_head;
    d.n_kv_head = c->n_kv_head;
    d.d_k = c->d_k;
    d.d_v = c->d_v;
    d.kdim = c->kdim;
    d.vdim = c->vdim;
    uint32_t H = c->n_head, Hkv = c->n_kv_head ? c->n_kv_head : H;
    uint32_t dk = c->d_k ? c->d_k : c->d_model / H, dv = c->d_v ? c->d_v : c->d_model / H;
    uint32_t kdim = c->kdim ? c->kdim : c->d_model, vdim = c->vdim ? c->vdim : c->d_model;
    float *w_q = linear_weight(rng, H * dk, c->d_model), *w_k = linear_weight(rng, Hkv * dk, kdim),
          *w_v = linear_weight(rng, Hkv * dv, vdim), *w_o = linear_weight(rng, c->d_model, H * dv);
    float *b_q = NULL, *b_k = NULL, *b_v = NULL, *b_o = NULL, *gamma = NULL, *beta = NULL;
    d.w_q = w_q;
    d.w_k = w_k;
    d.w_v = w_v;
    d.w_o = w_o;
    if (c->bias) {
        d.b_q = b_q = t_random(rng, H * dk, -0.5f, 0.5f);
        d.b_k = b_k = t_random(rng, Hkv * dk, -0.5f, 0.5f);
        d.b_v = b_v = t_random(rng, Hkv * dv, -0.5f, 0.5f);
        d.b_o = b_o = t_random(rng, c->d_model, -0.5f, 0.5f);
    }
    d.post_norm = c->post_norm;
    if (c->norm_params) {
        d.norm_gamma = gamma = t_random(rng, c->d_model, 0.5f, 1.5f);
        d.norm_beta = beta = t_random(rng, c->d_model, -0.5f, 0.5f);
    }

    size_t nq = (size_t)c->batch * c->len_q * c->d_model, nk = (size_t)c->batch * Lk * kdim,
           nv = (size_t)c->batch * Lk * vdim, nw = (size_t)c->batch * H * c->len_q * Lk;
    float *query = t_random(rng, nq, -1, 1);
    float *key = self ? query : t_random(rng, nk, -1, 1);
    float *value = self ? query : t_random(rng, nv, -1, 1);
    float *want = t_alloc(nq), *got = t_alloc(nq);
    float *want_w = c->weights ? t_alloc(nw) : NULL, *got_w = c->weights ? t_alloc(nw) : NULL;
    t_mask tm;
    vkmha_mha_io io = {c->batch, c->len_q, c->len_k, query, key, value,
                       t_mask_make(&tm, rng, c->kinds, c->batch, H, c->len_q, Lk, c->bias_batch,
                                   c->bias_heads, c->fully_masked_row),
                       NULL, NULL, 0, 0, 0, NULL, 0, NULL, NULL};

    bool ok = true;
    vkmha_mha *mr = NULL, *mg = NULL;
    T_EXPECT_STATUS(vkmha_mha_create(ref, &d, &mr), VKMHA_SUCCESS, ok);
    vkmha_status st = vkmha_mha_create(gpu, &d, &mg);
    T_EXPECT_STATUS(st, VKMHA_SUCCESS, ok);
    if (st)
        t_diag("%s", vkmha_context_last_error(gpu));
    if (ok) {
        io.out = want;
        io.attn_weights = want_w;
        T_EXPECT_STATUS(vkmha_mha_forward(mr, &io), VKMHA_SUCCESS, ok);
    }
    for (size_t r = 0; r < T_ATTENTION_RUNS; r++) {
        bool run_ok = ok;
        io.out = got;
        io.attn_weights = got_w;
        io.attention_path = t_attention_runs[r].path;
        io.kv_splits = t_attention_runs[r].kv_splits;
        if (run_ok) {
            st = vkmha_mha_forward(mg, &io);
            T_EXPECT_STATUS(st, VKMHA_SUCCESS, run_ok);
            if (st)
                t_diag("%s", vkmha_context_last_error(gpu));
        }
        if (run_ok && c->weights)
            run_ok = t_close(name, "attn_weights", got_w, want_w, nw, W_ATOL, W_RTOL);
        if (run_ok)
            run_ok = t_close(name, "out", got, want, nq, OUT_ATOL, OUT_RTOL);
        t_report(run_ok, "%s [%s, %s]", name, t_attention_runs[r].name, tag);
    }
    vkmha_mha_destroy(mr);
    vkmha_mha_destroy(mg);
    float *owned[] = {w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o, gamma, beta, want, got, want_w, got_w};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        free(owned[i]);
    if (!self) {
        free(key);
        free(value);
    }
    free(query);
    t_mask_free(&tm);
}

int main(void)
{
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    t_rng rng = {5};
    const uint32_t KP = VKMHA_MASK_KEY_PADDING, FULL = VKMHA_MASK_FULL,
                   CAUSAL = VKMHA_MASK_CAUSAL, BIAS = VKMHA_MASK_BIAS;
    static const mha_case cases[] = {
        /* B Lq Lk | d_model H Hkv dk dv kdim vdim | bias norm params | kinds bb bh | fully weights */
        {1, 1, 0, 8, 1, 0, 0, 0, 0, 0, false, false, false, 0, 0, 0, false, true},
        {2, 17, 0, 64, 8, 0, 0, 0, 0, 0, true, false, false, 0, 0, 0, false, true},
        {2, 17, 0, 64, 8, 0, 0, 0, 0, 0, true, true, false, 0, 0, 0, false, false},
        {2, 3, 75, 48, 4, 0, 0, 0, 20, 36, true, false, false, 0, 0, 0, false, true}, /* cross */
        {1, 75, 3, 48, 4, 0, 0, 0, 36, 20, false, true, true, 0, 0, 0, false, false},
        {2, 13, 29, 40, 5, 0, 12, 6, 0, 0, true, true, true, 0, 0, 0, false, true}, /* dk != dv */
        {1, 129, 0, 96, 6, 2, 0, 0, 0, 0, true, true, true, CAUSAL, 0, 0, false, false}, /* GQA */
        {2, 20, 30, 64, 8, 1, 0, 0, 17, 0, false, false, false, KP, 0, 0, false, true}, /* MQA */
        {2, 9, 0, 32, 4, 0, 0, 0, 0, 0, true, false, false, FULL, 0, 0, false, true},
        {2, 9, 11, 32, 4, 2, 0, 0, 0, 0, true, true, false, BIAS, 1, 1, false, true},
        {2, 9, 11, 32, 4, 0, 0, 0, 0, 0, false, true, true, BIAS, 2, 4, false, false},
        {2, 16, 0, 32, 4, 0, 0, 0, 0, 0, true, true, true, KP | CAUSAL, 0, 0, false, true},
        {2, 12, 0, 24, 3, 0, 0, 0, 0, 0, true, true, true, KP | FULL | CAUSAL | BIAS, 1, 3, false, true},
        {2, 7, 19, 24, 4, 2, 0, 0, 10, 14, true, true, true, KP, 0, 0, true, true}, /* fully masked */
        {1, 3, 0, 16, 2, 0, 0, 0, 0, 0, true, true, false, CAUSAL, 0, 0, false, true},
        {2, 75, 75, 64, 4, 0, 0, 0, 0, 0, true, true, true, KP | CAUSAL, 0, 0, false, false}, /* not self */
        {1, 300, 0, 64, 4, 0, 0, 0, 0, 0, true, true, true, CAUSAL, 0, 0, false, false},
        {2, 128, 0, 128, 8, 0, 0, 0, 0, 0, true, false, false, 0, 0, 0, false, false}, /* aligned */
    };
    for (size_t variant = 0; variant < T_VK_VARIANTS; variant++) {
        vkmha_context *gpu = t_context_variant(&t_vk_variants[variant]);
        const char *tag = t_vk_variants[variant].tag;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_case(ref, gpu, tag, &rng, &cases[i]);
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
    }
    vkmha_context_destroy(ref);
    return t_finish();
}
