/* Determinism: the same inputs give bitwise identical outputs (memcmp, NaN
 * payloads and signed zeros included) across repeated calls on one context
 * and across two contexts on the same device, for the layer's forward on
 * every attention path (t_attention_runs, with the attention weights) and
 * for every op (matmul, softmax, split / merge heads, attention on every
 * path). The second context first runs larger calls, so that its cached
 * buffers differ in size from the first's: results must not depend on them.
 * Shapes are odd and decode-like (split-K, several key chunks) to exercise
 * every reduction order the shaders have. */
#include "util.h"

#define REPEATS 3

typedef struct result {
    float *a, *b; /* outputs, weights (or NULL) */
    size_t na, nb;
} result;

typedef vkmha_status (*call_fn)(vkmha_context *ctx, const void *arg, result *out);

/* ---- the calls ------------------------------------------------------------- */

typedef struct layer_arg {
    t_layer *l;
    vkmha_mha *mha[3]; /* on g_ctx[0], g_ctx[1] and the reference context */
    size_t run;        /* t_attention_runs index */
} layer_arg;

static vkmha_context *g_ctx[2];

static vkmha_status layer_call(vkmha_context *ctx, const void *arg, result *out)
{
    const layer_arg *la = (const layer_arg *)arg;
    vkmha_mha_io io = la->l->io;
    io.out = out->a;
    io.attn_weights = out->b;
    io.attention_path = t_attention_runs[la->run].path;
    io.kv_splits = t_attention_runs[la->run].kv_splits;
    return vkmha_mha_forward(la->mha[ctx == g_ctx[0] ? 0 : ctx == g_ctx[1] ? 1 : 2], &io);
}

typedef struct op_arg {
    int op; /* 0 matmul, 1 softmax, 2 split, 3 merge, 4 attention */
    vkmha_matmul_desc mm;
    vkmha_softmax_desc sm;
    vkmha_heads_desc hd;
    vkmha_attention_desc at;
    const vkmha_mask *mask;
    const float *x, *y, *z; /* inputs */
} op_arg;

static vkmha_status op_call(vkmha_context *ctx, const void *arg, result *out)
{
    const op_arg *o = (const op_arg *)arg;
    switch (o->op) {
    case 0:
        return vkmha_matmul(ctx, &o->mm, o->x, o->y, o->z, out->a);
    case 1:
        return vkmha_softmax(ctx, &o->sm, o->x, o->mask, out->a);
    case 2:
        return vkmha_split_heads(ctx, &o->hd, o->x, out->a);
    case 3:
        return vkmha_merge_heads(ctx, &o->hd, o->x, out->a);
    default:
        return vkmha_attention(ctx, &o->at, o->x, o->y, o->z, o->mask, out->a, out->b);
    }
}

/* ---- checking ---------------------------------------------------------------- */

static void result_alloc(result *r, size_t na, size_t nb)
{
    r->na = na, r->nb = nb;
    r->a = t_alloc(na);
    r->b = nb ? t_alloc(nb) : NULL;
}

static bool same_bits(const result *x, const result *y, const char *name, const char *what)
{
    size_t n = x->na;
    const float *p = x->a, *q = y->a;
    for (int part = 0; part < 2; part++) {
        if (n && memcmp(p, q, n * sizeof *p) != 0) {
            for (size_t i = 0; i < n; i++)
                if (memcmp(&p[i], &q[i], sizeof *p) != 0) {
                    t_diag("%s: %s %s[%zu] %.9g vs %.9g", name, what, part ? "weights" : "out",
                           i, (double)p[i], (double)q[i]);
                    break;
                }
            return false;
        }
        n = x->nb, p = x->b, q = y->b;
    }
    return true;
}

/* REPEATS calls on context 0 and one on context 1: every result identical to
 * the first, and the first close to the reference (so that the identical
 * results are also right). */
static void check(const char *name, call_fn fn, const void *arg, vkmha_context *ref, size_t na,
                  size_t nb, double atol, double rtol)
{
    result first, again, want;
    result_alloc(&first, na, nb);
    result_alloc(&again, na, nb);
    result_alloc(&want, na, nb);
    bool ok = fn(g_ctx[0], arg, &first) == VKMHA_SUCCESS;
    ok = ok && (ref == NULL || fn(ref, arg, &want) == VKMHA_SUCCESS);
    if (ok && ref)
        ok = t_close(name, "out", first.a, want.a, na, atol, rtol) &&
             (!nb || t_close(name, "weights", first.b, want.b, nb, atol, rtol));
    int same_runs = 0;
    for (int r = 1; r < REPEATS; r++) {
        for (size_t i = 0; i < na; i++)
            again.a[i] = (float)r; /* not what the call writes */
        bool st = fn(g_ctx[0], arg, &again) == VKMHA_SUCCESS;
        same_runs += st && same_bits(&first, &again, name, "repeat");
    }
    t_report(ok && same_runs == REPEATS - 1,
             "%s: %d calls on one context bitwise identical (and close to the reference)", name,
             REPEATS);
    for (size_t i = 0; i < na; i++)
        again.a[i] = -1.0f;
    bool other = fn(g_ctx[1], arg, &again) == VKMHA_SUCCESS &&
                 same_bits(&first, &again, name, "other context");
    t_report(other, "%s: a second context on the same device gives the same bits", name);
    free(first.a), free(first.b), free(again.a), free(again.b), free(want.a), free(want.b);
}

int main(void)
{
    t_rng rng = {4242};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    g_ctx[0] = t_context(VKMHA_BACKEND_VULKAN, 0);
    g_ctx[1] = t_context(VKMHA_BACKEND_VULKAN, 0);

    /* Context 1 grows its buffers first, on other shapes. */
    {
        t_layer big;
        t_layer_make(&big, &rng, 64, 8, 0, 3, 130, 0, VKMHA_MASK_CAUSAL);
        vkmha_mha *m = NULL;
        float *out = t_alloc(big.n_out), *w = t_alloc(big.n_weights);
        vkmha_mha_io io = big.io;
        io.out = out;
        io.attn_weights = w;
        bool ok = vkmha_mha_create(g_ctx[1], &big.desc, &m) == VKMHA_SUCCESS &&
                  vkmha_mha_forward(m, &io) == VKMHA_SUCCESS;
        t_report(ok, "the second context first runs a larger layer (its buffers grow)");
        vkmha_mha_destroy(m);
        free(out), free(w);
        t_layer_free(&big);
    }

    /* The layer on every attention path, with its weights. */
    t_layer l;
    t_layer_make(&l, &rng, 48, 6, 2, 2, 37, 75,
                 VKMHA_MASK_KEY_PADDING | VKMHA_MASK_FULL | VKMHA_MASK_BIAS);
    layer_arg la = {&l, {NULL, NULL, NULL}, 0};
    /* Decode shape: one query, 3000 keys: split-K and key chunks. */
    t_layer dec;
    t_layer_make(&dec, &rng, 32, 4, 1, 1, 1, 3000, VKMHA_MASK_KEY_PADDING);
    layer_arg da = {&dec, {NULL, NULL, NULL}, 0};
    vkmha_context *const all[3] = {g_ctx[0], g_ctx[1], ref};
    for (int c = 0; c < 3; c++)
        if (vkmha_mha_create(all[c], &l.desc, &la.mha[c]) ||
            vkmha_mha_create(all[c], &dec.desc, &da.mha[c])) {
            printf("Bail out! cannot create the layers\n");
            return 1;
        }
    for (size_t r = 0; r < T_ATTENTION_RUNS; r++) {
        char name[128];
        snprintf(name, sizeof name, "mha forward B 2 Lq 37 Lk 75 GQA, masks [%s]",
                 t_attention_runs[r].name);
        la.run = da.run = r;
        check(name, layer_call, &la, ref, l.n_out, l.n_weights, T_LAYER_ATOL, T_LAYER_RTOL);
        snprintf(name, sizeof name, "mha forward decode Lq 1 Lk 3000 MQA [%s]",
                 t_attention_runs[r].name);
        check(name, layer_call, &da, ref, dec.n_out, dec.n_weights, T_LAYER_ATOL,
              T_LAYER_RTOL);
    }

    /* The ops (each close to the reference too). */
    /* Inputs for every op below: the largest is attention's k, 2 x 2 x 1500 x 16. */
    const size_t n_in = (size_t)2 * 2 * 1500 * 16;
    float *x = t_random(&rng, n_in, -2, 2), *y = t_random(&rng, n_in, -2, 2),
          *z = t_random(&rng, n_in, -2, 2);
    t_mask tm;
    op_arg o = {0};
    o.x = x, o.y = y, o.z = z;
    o.op = 0;
    o.mm.batch = 3, o.mm.m = 67, o.mm.n = 45, o.mm.k = 131, o.mm.op_b = VKMHA_OP_T;
    check("matmul batch 3 m 67 n 45 k 131 op T bias", op_call, &o, ref, 3 * 67 * 45, 0,
          2e-6 * sqrt(131.0), 1e-5);
    o.mm.op_b = VKMHA_OP_N, o.mm.k = 128, o.mm.n = 48; /* vec4 loads */
    check("matmul batch 3 m 67 n 48 k 128 op N bias", op_call, &o, ref, 3 * 67 * 48, 0,
          2e-6 * sqrt(128.0), 1e-5);
    o.op = 1;
    o.sm = (vkmha_softmax_desc){2, 3, 17, 300, 0.7f, 0};
    o.mask = t_mask_make(&tm, &rng, VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL | VKMHA_MASK_BIAS,
                         2, 3, 17, 300, 1, 0, false);
    check("softmax B 2 H 3 Lq 17 Lk 300, masks", op_call, &o, ref, 2 * 3 * 17 * 300, 0, 1e-6,
          1e-5);
    t_mask_free(&tm);
    o.mask = NULL;
    o.op = 2;
    o.hd = (vkmha_heads_desc){2, 37, 3, 24, 0};
    check("split_heads B 2 L 37 H 3 d 24", op_call, &o, ref, 2 * 37 * 3 * 24, 0, 0, 0);
    o.op = 3;
    check("merge_heads B 2 L 37 H 3 d 24", op_call, &o, ref, 2 * 37 * 3 * 24, 0, 0, 0);
    o.op = 4;
    o.mask = t_mask_make(&tm, &rng, VKMHA_MASK_FULL | VKMHA_MASK_CAUSAL, 2, 4, 29, 1500, 0, 0,
                         false);
    for (size_t r = 0; r < T_ATTENTION_RUNS; r++) {
        char name[128];
        snprintf(name, sizeof name, "attention B 2 H 4 Hkv 2 Lq 29 Lk 1500 dk 16 dv 8 [%s]",
                 t_attention_runs[r].name);
        o.at = (vkmha_attention_desc){2, 4, 2, 29, 1500, 16, 8, 0, t_attention_runs[r].path,
                                      t_attention_runs[r].kv_splits, 0};
        check(name, op_call, &o, ref, 2 * 4 * 29 * 8, 2 * 4 * 29 * 1500,
              2e-6 * sqrt(1500.0), 1e-5);
    }
    t_mask_free(&tm);
    free(x), free(y), free(z);

    for (int c = 0; c < 3; c++) {
        vkmha_mha_destroy(la.mha[c]);
        vkmha_mha_destroy(da.mha[c]);
    }
    t_layer_free(&l);
    t_layer_free(&dec);
    t_report_validation(g_ctx[0]);
    t_report_validation(g_ctx[1]);
    vkmha_context_destroy(g_ctx[0]);
    vkmha_context_destroy(g_ctx[1]);
    vkmha_context_destroy(ref);
    return t_finish();
}
