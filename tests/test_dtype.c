/* fp16 and bf16 storage (issue 12) on Vulkan against the reference backend,
 * for every op and the layer, on host arrays and tensors, with the device's
 * native 16-bit storage and with the packed path (two values per uint) that
 * devices without storageBuffer16BitAccess run.
 *
 * Tolerances, per dtype, from the unit roundoff u of the stored format
 * (fp16 2^-11, bf16 2^-8): both backends round the output of an op once,
 * to nearest even, from an fp32 (Vulkan) or double (reference) value of the
 * same 16-bit inputs, so an op's results differ by at most one unit in the
 * last place where the two values straddle a rounding boundary: rtol 2u
 * (2 ulps at the bottom of a binade), atol 2u times the magnitude of the
 * terms (a result near 0 made of terms of size ~1). The layer rounds four
 * activations on the way (projections, attention output, output before the
 * LayerNorm; the reference rounds at the same points), whose 1-ulp
 * differences propagate: rtol and atol 8u.
 *
 * Exactness: a split_heads with one head is a copy, so an fp32 tensor
 * copied into an fp16 / bf16 tensor shows the device's rounding bit for bit
 * against src/half.c: ties to even, saturation at the largest finite value
 * (65504 stays finite where plain conversion would give Inf), Inf and NaN
 * kept, subnormals. */
#include "util_dtype.h"

static const uint32_t dtypes16[2] = {VKMHA_DTYPE_F16, VKMHA_DTYPE_BF16};

static const char *dt_name(uint32_t dt)
{
    return dt == VKMHA_DTYPE_F16 ? "f16" : dt == VKMHA_DTYPE_BF16 ? "bf16" : "f32";
}

/* Unit roundoff of a dtype's storage. */
/* ---- exact rounding: fp32 tensor -> 16-bit tensor ------------------------- */

static void conversion(vkmha_context *gpu, const char *tag, uint32_t dt, uint32_t dim)
{
    static const float special[] = {65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, -1e30f,
                                    3.3895314e38f, 3.40282347e38f, -3.40282347e38f,
                                    INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 0x1p-24f,
                                    0x1p-25f, 0x3p-26f, 0x1.ff8p-15f, 0x1p-14f, 1.0f,
                                    1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 1.0f + 0x1p-8f,
                                    1.0f + 0x3p-8f, -2.5f, 1e-40f};
    const uint32_t len = 37;
    const size_t n = (size_t)len * dim;
    char name[160];
    snprintf(name, sizeof name, "f32 -> %s copy rounds as src/half.c, head_dim %u [%s]",
             dt_name(dt), dim, tag);
    t_rng rng = {dim};
    float *x = t_random(&rng, n, -70000, 70000);
    for (size_t i = 0; i < n; i++) {
        if (i % 3 == 0)
            x[i] = special[(i / 3) % (sizeof special / sizeof special[0])];
        else if (i % 3 == 1)
            x[i] *= 1e-9f; /* around fp16's subnormals */
    }
    vkmha_tensor *tx = NULL, *ty = NULL;
    vkmha_tensor_desc dx = {VKMHA_DTYPE_F32, 1, {(uint32_t)n}};
    vkmha_tensor_desc dy = {dt, 1, {(uint32_t)n}};
    uint16_t *got = calloc(n + 2, 2);
    bool ok = true;
    T_EXPECT_STATUS(vkmha_tensor_create(gpu, &dx, &tx), VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS(vkmha_tensor_create(gpu, &dy, &ty), VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS(vkmha_tensor_upload(tx, 0, x, n * 4), VKMHA_SUCCESS, ok);
    vkmha_heads_desc hd = {1, len, 1, dim, 0};
    T_EXPECT_STATUS(vkmha_split_heads_tensor(gpu, &hd, tx, ty), VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS(vkmha_tensor_download(ty, 0, got, n * 2), VKMHA_SUCCESS, ok);
    for (size_t i = 0; ok && i < n; i++) {
        uint16_t want = dt == VKMHA_DTYPE_F16 ? vkmha__float_to_half(x[i])
                                              : vkmha__float_to_bf16(x[i]);
        if (got[i] != want) {
            t_diag("%s: element %zu = %a: device 0x%04x, src/half.c 0x%04x", name, i,
                   (double)x[i], got[i], want);
            ok = false;
        }
    }
    t_report(ok, "%s", name);
    vkmha_tensor_destroy(tx);
    vkmha_tensor_destroy(ty);
    free(x);
    free(got);
}

/* ---- matmul --------------------------------------------------------------- */

static void matmul_host(vkmha_context *ref, vkmha_context *gpu, const char *tag, uint32_t dt,
                        uint32_t batch, uint32_t m, uint32_t n, uint32_t k, bool trans_b)
{
    char name[160];
    snprintf(name, sizeof name, "matmul %s B %u %ux%ux%u op %s bias [%s]", dt_name(dt), batch,
             m, n, k, trans_b ? "T" : "N", tag);
    t_rng rng = {m * 131 + n * 7 + k};
    const size_t na = (size_t)batch * m * k, nb = (size_t)batch * k * n, nc = (size_t)batch * m * n;
    float *fa = t_random(&rng, na, -1, 1), *fb = t_random(&rng, nb, -1, 1),
          *fbias = t_random(&rng, n, -1, 1);
    void *a = t_to_dt(dt, fa, na), *b = t_to_dt(dt, fb, nb), *bias = t_to_dt(dt, fbias, n);
    void *want = calloc(nc + 2, 2), *got = calloc(nc + 2, 2);
    vkmha_matmul_desc d = {.batch = batch, .m = m, .n = n, .k = k,
                           .op_b = trans_b ? VKMHA_OP_T : VKMHA_OP_N, .dtype = dt};
    bool ok = true;
    T_EXPECT_STATUS(vkmha_matmul(ref, &d, a, b, bias, want), VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS(vkmha_matmul(gpu, &d, a, b, bias, got), VKMHA_SUCCESS, ok);
    /* Terms of size ~1: the sum of k products is ~sqrt(k). */
    const double u = t_dt_unit(dt), mag = sqrt((double)k);
    if (ok)
        ok = t_close_dt(name, "c", dt, got, want, nc, 2 * u * mag, 2 * u);
    t_report(ok, "%s", name);
    free(fa), free(fb), free(fbias), free(a), free(b), free(bias), free(want), free(got);
}

/* Tensors of mixed dtypes: weights of one dtype times activations of another. */
static vkmha_tensor *tensor_of(vkmha_context *ctx, uint32_t dt, const float *x, size_t n)
{
    vkmha_tensor *t = NULL;
    vkmha_tensor_desc d = {dt, 1, {(uint32_t)n}};
    void *p = t_to_dt(dt, x, n);
    if (vkmha_tensor_create(ctx, &d, &t) || vkmha_tensor_upload(t, 0, p, n * vkmha__dtype_size(dt)))
        t = NULL;
    free(p);
    return t;
}

static void *download(vkmha_tensor *t, size_t bytes)
{
    void *p = calloc(bytes + 4, 1);
    if (vkmha_tensor_download(t, 0, p, bytes) != VKMHA_SUCCESS) {
        free(p);
        return NULL;
    }
    return p;
}

static void matmul_mixed(vkmha_context *ref, vkmha_context *gpu, const char *tag,
                         const uint32_t dt[4])
{
    char name[160];
    const uint32_t m = 45, n = 70, k = 67;
    snprintf(name, sizeof name, "matmul tensors a %s b %s bias %s c %s %ux%ux%u op T [%s]",
             dt_name(dt[0]), dt_name(dt[1]), dt_name(dt[2]), dt_name(dt[3]), m, n, k, tag);
    t_rng rng = {dt[0] + 4 * dt[1] + 16 * dt[3]};
    float *fa = t_random(&rng, (size_t)m * k, -1, 1), *fb = t_random(&rng, (size_t)n * k, -1, 1),
          *fbias = t_random(&rng, n, -1, 1), *zero = t_alloc((size_t)m * n);
    vkmha_context *ctx[2] = {ref, gpu};
    void *out[2] = {NULL, NULL};
    vkmha_matmul_desc d = {.batch = 1, .m = m, .n = n, .k = k, .op_b = VKMHA_OP_T};
    bool ok = true;
    for (int c = 0; c < 2; c++) {
        vkmha_tensor *a = tensor_of(ctx[c], dt[0], fa, (size_t)m * k),
                     *b = tensor_of(ctx[c], dt[1], fb, (size_t)n * k),
                     *bias = tensor_of(ctx[c], dt[2], fbias, n),
                     *cc = tensor_of(ctx[c], dt[3], zero, (size_t)m * n);
        ok = ok && a && b && bias && cc;
        if (ok)
            T_EXPECT_STATUS(vkmha_matmul_tensor(ctx[c], &d, a, b, bias, cc), VKMHA_SUCCESS, ok);
        if (ok)
            out[c] = download(cc, (size_t)m * n * vkmha__dtype_size(dt[3]));
        ok = ok && out[c];
        vkmha_tensor_destroy(a), vkmha_tensor_destroy(b), vkmha_tensor_destroy(bias);
        vkmha_tensor_destroy(cc);
    }
    const double u = t_dt_unit(dt[3]) > 0x1p-20 ? t_dt_unit(dt[3]) : 1e-6;
    if (ok)
        ok = t_close_dt(name, "c", dt[3], out[1], out[0], (size_t)m * n, 2 * u * sqrt(k), 2 * u);
    t_report(ok, "%s", name);
    free(fa), free(fb), free(fbias), free(zero), free(out[0]), free(out[1]);
}

/* ---- softmax and heads ---------------------------------------------------- */

static void softmax_host(vkmha_context *ref, vkmha_context *gpu, const char *tag, uint32_t dt,
                         uint32_t len_k, float lo, float hi, float scale)
{
    char name[160];
    const uint32_t batch = 2, heads = 3, len_q = 5;
    const size_t n = (size_t)batch * heads * len_q * len_k;
    snprintf(name, sizeof name, "softmax %s len_k %u x in [%g, %g] scale %g causal [%s]",
             dt_name(dt), len_k, lo, hi, scale, tag);
    t_rng rng = {len_k};
    float *fx = t_random(&rng, n, lo, hi);
    void *x = t_to_dt(dt, fx, n), *want = calloc(n + 2, 2), *got = calloc(n + 2, 2);
    vkmha_softmax_desc d = {batch, heads, len_q, len_k, scale, dt};
    vkmha_mask mask = {.kinds = VKMHA_MASK_CAUSAL};
    bool ok = true;
    T_EXPECT_STATUS(vkmha_softmax(ref, &d, x, &mask, want), VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS(vkmha_softmax(gpu, &d, x, &mask, got), VKMHA_SUCCESS, ok);
    if (ok)
        ok = t_close_dt(name, "y", dt, got, want, n, 2 * t_dt_unit(dt), 2 * t_dt_unit(dt));
    t_report(ok, "%s", name);
    free(fx), free(x), free(want), free(got);
}

static void heads_host(vkmha_context *ref, vkmha_context *gpu, const char *tag, uint32_t dt,
                       bool split, uint32_t head_dim)
{
    char name[160];
    const uint32_t batch = 2, len = 13, heads = 3;
    const size_t n = (size_t)batch * len * heads * head_dim;
    snprintf(name, sizeof name, "%s heads %s head_dim %u [%s]", split ? "split" : "merge",
             dt_name(dt), head_dim, tag);
    t_rng rng = {head_dim};
    float *fx = t_random(&rng, n, -3, 3);
    void *x = t_to_dt(dt, fx, n), *want = calloc(n + 2, 2), *got = calloc(n + 2, 2);
    vkmha_heads_desc d = {batch, len, heads, head_dim, dt};
    bool ok = true;
    T_EXPECT_STATUS((split ? vkmha_split_heads : vkmha_merge_heads)(ref, &d, x, want),
                    VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS((split ? vkmha_split_heads : vkmha_merge_heads)(gpu, &d, x, got),
                    VKMHA_SUCCESS, ok);
    if (ok && memcmp(got, want, n * 2) != 0) { /* a permutation: bit for bit */
        t_diag("%s: differs from the reference", name);
        ok = false;
    }
    t_report(ok, "%s", name);
    free(fx), free(x), free(want), free(got);
}

/* ---- attention ------------------------------------------------------------ */

/* Desc d on both backends, q, k and v rounded to dt: true when the outputs
 * and the weights agree within 2 units of dt (NaN / Inf at the same
 * places). *gpu_out (if not NULL): the Vulkan output widened, to free. */
static bool attention_both(vkmha_context *ref, vkmha_context *gpu, const char *name, uint32_t dt,
                           const vkmha_attention_desc *d, const float *fq, const float *fk,
                           const float *fv, const vkmha_mask *mask, float **gpu_out)
{
    const t_attention_sizes n = t_attention_size(d);
    void *q = t_to_dt(dt, fq, n.q), *k = t_to_dt(dt, fk, n.k), *v = t_to_dt(dt, fv, n.v);
    void *out[2] = {calloc(n.out + 2, 2), calloc(n.out + 2, 2)},
         *w[2] = {calloc(n.weights + 2, 2), calloc(n.weights + 2, 2)};
    bool ok = true;
    T_EXPECT_STATUS(vkmha_attention(ref, d, q, k, v, mask, out[0], w[0]), VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS(vkmha_attention(gpu, d, q, k, v, mask, out[1], w[1]), VKMHA_SUCCESS, ok);
    const double u = t_dt_unit(dt);
    if (ok)
        ok = t_close_dt(name, "out", dt, out[1], out[0], n.out, 2 * u, 2 * u) &&
             t_close_dt(name, "weights", dt, w[1], w[0], n.weights, 2 * u, 2 * u);
    if (gpu_out)
        *gpu_out = t_from_dt(dt, out[1], n.out);
    free(q), free(k), free(v), free(out[0]), free(out[1]), free(w[0]), free(w[1]);
    return ok;
}

/* Causal: 19 queries, 53 keys, query i sees keys up to i. Not causal: 37
 * queries see all of 75 keys, so every key of every block counts (the tail
 * of a key block, the last columns of a head). */
static void attention_host(vkmha_context *ref, vkmha_context *gpu, const char *tag, uint32_t dt,
                           const t_attention_run *run, uint32_t d_k, float range, bool nan,
                           bool causal)
{
    char name[200];
    vkmha_attention_desc d = {2, 4, 2, causal ? 19 : 37, causal ? 53 : 75, d_k, d_k + 4,
                              range > 10 ? 1.0f : 0.0f, run->path, run->kv_splits, dt};
    const t_attention_sizes n = t_attention_size(&d);
    snprintf(name, sizeof name, "attention %s dk %u |q|,|k| <= %g%s %s, weights, %s [%s]",
             dt_name(dt), d_k, range, nan ? " NaN in v" : "",
             causal ? "causal" : "no mask, 37 x 75", run->name, tag);
    t_rng rng = {d_k * 3 + (uint64_t)range};
    float *fq = t_random(&rng, n.q, -range, range), *fk = t_random(&rng, n.k, -range, range),
          *fv = t_random(&rng, n.v, -1, 1);
    if (nan)
        fv[5 * d.d_v + 1] = NAN; /* key 5 of batch 0, head 0: every later row is NaN */
    const vkmha_mask mask = {.kinds = causal ? VKMHA_MASK_CAUSAL : 0};
    float *o = NULL;
    bool ok = attention_both(ref, gpu, name, dt, &d, fq, fk, fv, &mask, &o);
    if (ok && range > 10) /* logits beyond 65504 must stay finite */
        for (size_t i = 0; i < n.out && ok; i++)
            if (!isfinite(o[i])) {
                t_diag("%s: out[%zu] = %g with finite inputs", name, i, (double)o[i]);
                ok = false;
            }
    t_report(ok, "%s", name);
    free(o), free(fq), free(fk), free(fv);
}

/* A PyTorch float mask in 16-bit attention (on the cooperative fused kernel
 * where the context has it): -inf blocks at the start and end of rows, a row
 * with one allowed key, a row with none (weights and output 0), a row
 * without -inf, and key padding that masks a batch entry's every key (its
 * rows average the values), on the default and the split fused paths,
 * against the reference on the same 16-bit inputs (NaN / Inf positions
 * equal, then 2 units of the dtype). d 40 or 100: depth and width tails. */
static void attention_neg_inf(vkmha_context *ref, vkmha_context *gpu, const char *tag,
                              uint32_t dt, const t_attention_run *run, uint32_t DK)
{
    enum { NB = 2, NH = 2, LQ = 5, LK = 37 };
    char name[200];
    snprintf(name, sizeof name,
             "attention %s dk %u, -inf float mask and a fully padded entry, %s [%s]", dt_name(dt),
             DK, run->name, tag);
    vkmha_attention_desc d = {NB, NH, NH, LQ, LK, DK, DK, 0.0f, run->path, run->kv_splits, dt};
    const t_attention_sizes n = t_attention_size(&d);
    t_rng rng = {77};
    float *fq = t_random(&rng, n.q, -1, 1), *fk = t_random(&rng, n.k, -1, 1),
          *fv = t_random(&rng, n.v, -1, 1), *bias = t_random(&rng, NH * LQ * LK, -2, 2);
    for (uint32_t h = 0; h < NH; h++)
        for (uint32_t j = 0; j < LK; j++) {
            float *row = bias + (size_t)h * LQ * LK;
            if (j < 10)
                row[0 * LK + j] = -INFINITY; /* a block at the start */
            if (j != LK - 1)
                row[1 * LK + j] = -INFINITY; /* one allowed key, the last */
            row[2 * LK + j] = -INFINITY;     /* none: weights and output 0 */
            if (j >= 20)
                row[4 * LK + j] = -INFINITY; /* a block at the end */
        }
    uint8_t padding[NB * LK];
    for (uint32_t j = 0; j < NB * LK; j++)
        padding[j] = j < LK; /* entry 0 keeps every key, entry 1 none */
    const vkmha_mask mask = {.kinds = VKMHA_MASK_BIAS | VKMHA_MASK_KEY_PADDING,
                             .key_padding = padding, .bias = bias, .bias_batch = 1,
                             .bias_heads = NH};
    t_report(attention_both(ref, gpu, name, dt, &d, fq, fk, fv, &mask, NULL), "%s", name);
    free(fq), free(fk), free(fv), free(bias);
}

/* ---- the layer ------------------------------------------------------------ */

/* The layer with weights given as wdt, stored as sdt, activations adt; with
 * attn_weights (then the concat of the heads has its own buffer) or without
 * (it overwrites the query projection, and the unfused path keeps its fp32
 * scores apart from any 16-bit array). */
static void layer(vkmha_context *ref, vkmha_context *gpu, const char *tag, uint32_t wdt,
                  uint32_t sdt, uint32_t adt, vkmha_attention_path path, bool weights)
{
    char name[200];
    snprintf(name, sizeof name,
             "layer d_model 36 H 4 Hkv 2 B 2 L 23 weights given %s stored %s, "
             "activations %s, %s path%s [%s]",
             dt_name(wdt), dt_name(sdt), dt_name(adt),
             path == VKMHA_ATTENTION_PATH_UNFUSED ? "unfused" : "default",
             weights ? ", attn_weights" : "", tag);
    t_rng rng = {wdt + 4 * sdt + 16 * adt};
    t_layer l;
    t_layer_make(&l, &rng, 36, 4, 2, 2, 23, 0, VKMHA_MASK_CAUSAL);
    const vkmha_mha_desc *fd = &l.desc;
    const size_t n_w[4] = {36 * 36, 18 * 36, 18 * 36, 36 * 36};
    const size_t n_b[4] = {36, 18, 18, 36};
    vkmha_mha_desc d = *fd;
    const void *fw[4] = {fd->w_q, fd->w_k, fd->w_v, fd->w_o};
    const void *fb[4] = {fd->b_q, fd->b_k, fd->b_v, fd->b_o};
    void *w[4], *b[4], *gamma = t_to_dt(wdt, fd->norm_gamma, 36), *beta = t_to_dt(wdt, fd->norm_beta, 36);
    for (int i = 0; i < 4; i++) {
        w[i] = t_to_dt(wdt, fw[i], n_w[i]);
        b[i] = t_to_dt(wdt, fb[i], n_b[i]);
    }
    d.w_q = w[0], d.w_k = w[1], d.w_v = w[2], d.w_o = w[3];
    d.b_q = b[0], d.b_k = b[1], d.b_v = b[2], d.b_o = b[3];
    d.norm_gamma = gamma, d.norm_beta = beta;
    d.weight_dtype = wdt;
    d.storage_dtype = sdt;
    vkmha_mha_io io = l.io;
    void *x = t_to_dt(adt, io.query, l.n_out);
    io.query = io.key = io.value = x;
    io.dtype = adt;
    io.attention_path = path;
    const size_t es = vkmha__dtype_size(adt);
    void *out[2] = {calloc(l.n_out, es), calloc(l.n_out, es)},
         *aw[2] = {calloc(l.n_weights, es), calloc(l.n_weights, es)};
    vkmha_context *ctx[2] = {ref, gpu};
    bool ok = true;
    for (int c = 0; c < 2 && ok; c++) {
        vkmha_mha *mha = NULL;
        T_EXPECT_STATUS(vkmha_mha_create(ctx[c], &d, &mha), VKMHA_SUCCESS, ok);
        io.out = out[c];
        io.attn_weights = weights ? aw[c] : NULL;
        if (ok)
            T_EXPECT_STATUS(vkmha_mha_forward(mha, &io), VKMHA_SUCCESS, ok);
        vkmha_mha_destroy(mha);
    }
    const double u = t_dt_unit(adt) > t_dt_unit(sdt) ? t_dt_unit(adt) : t_dt_unit(sdt);
    if (ok)
        ok = t_close_dt(name, "out", adt, out[1], out[0], l.n_out, 8 * u, 8 * u) &&
             t_close_dt(name, "attn_weights", adt, aw[1], aw[0], l.n_weights, 8 * u, 8 * u);
    t_report(ok, "%s", name);
    for (int i = 0; i < 4; i++)
        free(w[i]), free(b[i]);
    free(gamma), free(beta), free(x), free(out[0]), free(out[1]), free(aw[0]), free(aw[1]);
    t_layer_free(&l);
}

/* The layer on tensors of a 16-bit dtype, computed now and submitted, against
 * the reference backend's; a key tensor of another dtype is refused. */
static void layer_tensors(vkmha_context *ref, vkmha_context *gpu, const char *tag, uint32_t dt)
{
    char name[160];
    snprintf(name, sizeof name, "layer on %s tensors (forward_tensor and submit) [%s]",
             dt_name(dt), tag);
    t_rng rng = {dt * 7};
    t_layer l;
    t_layer_make(&l, &rng, 32, 4, 0, 2, 9, 0, VKMHA_MASK_CAUSAL);
    vkmha_mha_desc d = l.desc;
    d.storage_dtype = dt;
    const size_t es = vkmha__dtype_size(dt);
    vkmha_context *ctx[2] = {ref, gpu};
    void *out[3] = {NULL, NULL, NULL};
    bool ok = true;
    for (int c = 0; c < 2 && ok; c++) {
        vkmha_mha *mha = NULL;
        vkmha_tensor *x = tensor_of(ctx[c], dt, l.io.query, l.n_out);
        const float *zero = t_alloc(l.n_out);
        vkmha_tensor *y = tensor_of(ctx[c], dt, zero, l.n_out);
        vkmha_tensor *key32 = tensor_of(ctx[c], VKMHA_DTYPE_F32, zero, l.n_out);
        free((void *)zero);
        ok = x && y && key32;
        T_EXPECT_STATUS(vkmha_mha_create(ctx[c], &d, &mha), VKMHA_SUCCESS, ok);
        vkmha_mha_tensors io = {.batch = 2, .len_q = 9, .query = x, .key = x, .value = x,
                                .out = y};
        if (ok)
            T_EXPECT_STATUS(vkmha_mha_forward_tensor(mha, &io), VKMHA_SUCCESS, ok);
        if (ok)
            out[c] = download(y, l.n_out * es);
        if (ok && c == 1) { /* submitted: the same bits */
            vkmha_submission *sub = NULL;
            T_EXPECT_STATUS(vkmha_mha_submit(mha, &io, &sub), VKMHA_SUCCESS, ok);
            T_EXPECT_STATUS(vkmha_submission_wait(sub, UINT64_MAX), VKMHA_SUCCESS, ok);
            vkmha_submission_destroy(sub);
            out[2] = ok ? download(y, l.n_out * es) : NULL;
            if (!out[2] || memcmp(out[1], out[2], l.n_out * es)) {
                t_diag("%s: submitted forward differs from forward_tensor", name);
                ok = false;
            }
        }
        io.key = key32;
        if (ok && !(vkmha_mha_forward_tensor(mha, &io) == VKMHA_ERROR_INVALID_ARGUMENT &&
                    strstr(vkmha_context_last_error(ctx[c]), "io->key"))) {
            t_diag("%s: a key of another dtype: \"%s\"", name,
                   vkmha_context_last_error(ctx[c]));
            ok = false;
        }
        vkmha_mha_destroy(mha);
        vkmha_tensor_destroy(x), vkmha_tensor_destroy(y), vkmha_tensor_destroy(key32);
    }
    if (ok)
        ok = t_close_dt(name, "out", dt, out[1], out[0], l.n_out, 8 * t_dt_unit(dt),
                        8 * t_dt_unit(dt));
    t_report(ok, "%s", name);
    free(out[0]), free(out[1]), free(out[2]);
    t_layer_free(&l);
}

/* Device memory of a layer's weights, stored as sdt: a 16-bit storage halves it. */
static void weight_memory(vkmha_context *gpu, const char *tag)
{
    t_rng rng = {99};
    t_layer l;
    t_layer_make(&l, &rng, 256, 4, 0, 1, 8, 0, 0);
    uint64_t bytes[2] = {0, 0};
    bool ok = true;
    for (int i = 0; i < 2; i++) {
        vkmha_context_info before, after;
        vkmha_mha *mha = NULL;
        vkmha_mha_desc d = l.desc;
        d.storage_dtype = i ? VKMHA_DTYPE_F16 : VKMHA_DTYPE_F32;
        T_EXPECT_STATUS(vkmha_context_get_info(gpu, &before), VKMHA_SUCCESS, ok);
        T_EXPECT_STATUS(vkmha_mha_create(gpu, &d, &mha), VKMHA_SUCCESS, ok);
        T_EXPECT_STATUS(vkmha_context_get_info(gpu, &after), VKMHA_SUCCESS, ok);
        bytes[i] = after.device_memory_bytes - before.device_memory_bytes;
        vkmha_mha_destroy(mha);
    }
    /* 4 * 256^2 weights: 1 MiB in fp32, 512 KiB in fp16, plus biases and
     * allocation rounding. */
    ok = ok && bytes[0] >= 4u * 256 * 256 * 4 && bytes[1] * 2 <= bytes[0] + bytes[0] / 20;
    t_report(ok, "layer weights stored as f16 take %llu bytes of device memory, f32 %llu [%s]",
             (unsigned long long)bytes[1], (unsigned long long)bytes[0], tag);
    t_layer_free(&l);
}

/* Bad dtypes name the field. */
static void bad_dtypes(vkmha_context *ctx)
{
    float x[16] = {0}, y[16];
    vkmha_softmax_desc sd = {1, 1, 2, 2, 0, 7};
    bool ok = vkmha_softmax(ctx, &sd, x, NULL, y) == VKMHA_ERROR_INVALID_ARGUMENT &&
              strstr(vkmha_context_last_error(ctx), "desc->dtype");
    sd.dtype = VKMHA_DTYPE_U8;
    ok = ok && vkmha_softmax(ctx, &sd, x, NULL, y) == VKMHA_ERROR_INVALID_ARGUMENT;
    vkmha_mha_desc md = {0};
    md.d_model = 4, md.n_head = 1, md.w_q = md.w_k = md.w_v = md.w_o = x;
    md.storage_dtype = 9;
    vkmha_mha *mha = NULL;
    ok = ok && vkmha_mha_create(ctx, &md, &mha) == VKMHA_ERROR_INVALID_ARGUMENT &&
         strstr(vkmha_context_last_error(ctx), "desc->storage_dtype") && !mha;
    t_report(ok, "dtype fields out of range are INVALID_ARGUMENT naming the field");
}

int main(void)
{
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    bad_dtypes(ref);
    /* The device's native 16-bit storage where it has it, and the packed
     * path; then the workgroup-shared fused kernel (CPU devices default to
     * the CPU-shaped one). */
    const struct {
        bool packed;
        vkmha_fused_kernel kernel;
        const char *tag;
    } variants[] = {{false, VKMHA_FUSED_KERNEL_AUTO, "native 16-bit"},
                    {true, VKMHA_FUSED_KERNEL_AUTO, "packed 16-bit"},
                    {false, VKMHA_FUSED_KERNEL_SHARED, "native 16-bit, shared fused kernel"}};
    for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
        vkmha_debug_options dbg = {.fused_kernel = variants[vi].kernel,
                                   .no_native_16bit = variants[vi].packed};
        vkmha_context *gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &dbg, NULL, NULL);
        const char *tag = variants[vi].tag;
        vkmha_context_info info;
        if (vkmha_context_get_info(gpu, &info) == VKMHA_SUCCESS)
            t_diag("%s: native_16bit_storage %d", tag, info.native_16bit_storage);
        if (vi == 1)
            t_report(!info.native_16bit_storage, "no_native_16bit turns native storage off");
        for (int di = 0; di < 2; di++) {
            const uint32_t dt = dtypes16[di];
            if (vi < 2) {
                conversion(gpu, tag, dt, 5);
                conversion(gpu, tag, dt, 8);
                matmul_host(ref, gpu, tag, dt, 2, 37, 45, 67, true);
                matmul_host(ref, gpu, tag, dt, 1, 70, 33, 64, false);
                heads_host(ref, gpu, tag, dt, true, 7);
                heads_host(ref, gpu, tag, dt, false, 8);
                softmax_host(ref, gpu, tag, dt, 41, -4, 4, 0.5f);
                softmax_host(ref, gpu, tag, dt, 64, 30000, 60000, 2.0f); /* logits > 65504 */
            }
            /* The unfused path does not depend on the fused kernel: once per
             * storage (vi < 2). The head-dim classes past d32 (split fused
             * kernel with weights: the costliest pipelines to compile here)
             * alternate between the dtypes, so that each variant runs one of
             * each class and each dtype runs both classes over the variants. */
            for (size_t r = 0; r < T_ATTENTION_RUNS; r++)
                if (vi < 2 || t_attention_runs[r].path != VKMHA_ATTENTION_PATH_UNFUSED)
                    attention_host(ref, gpu, tag, dt, &t_attention_runs[r], 16, 1.0f, false,
                                   true);
            attention_host(ref, gpu, tag, dt, &t_attention_runs[0], 8, 150.0f, false, true);
            if (vi < 2)
                attention_host(ref, gpu, tag, dt, &t_attention_runs[2], 8, 150.0f, false, true);
            attention_host(ref, gpu, tag, dt, &t_attention_runs[0], 16, 1.0f, true, true);
            const uint32_t wide = (vi + di) % 2 ? 100 : 40;
            attention_host(ref, gpu, tag, dt, &t_attention_runs[1], wide, 1.0f, false, false);
            attention_neg_inf(ref, gpu, tag, dt, &t_attention_runs[0], wide);
            attention_neg_inf(ref, gpu, tag, dt, &t_attention_runs[1], wide);
            layer(ref, gpu, tag, dt, dt, dt, VKMHA_ATTENTION_PATH_AUTO, true);
            layer(ref, gpu, tag, dt, dt, dt, VKMHA_ATTENTION_PATH_AUTO, false);
            layer_tensors(ref, gpu, tag, dt);
            if (vi < 2) {
                layer(ref, gpu, tag, dt, dt, dt, VKMHA_ATTENTION_PATH_UNFUSED, true);
                layer(ref, gpu, tag, dt, dt, dt, VKMHA_ATTENTION_PATH_UNFUSED, false);
            }
        }
        if (vi < 2) {
            static const uint32_t mixes[][4] = {
                {VKMHA_DTYPE_F32, VKMHA_DTYPE_F16, VKMHA_DTYPE_F16, VKMHA_DTYPE_F32},
                {VKMHA_DTYPE_BF16, VKMHA_DTYPE_F32, VKMHA_DTYPE_F32, VKMHA_DTYPE_F16},
                {VKMHA_DTYPE_F16, VKMHA_DTYPE_BF16, VKMHA_DTYPE_F32, VKMHA_DTYPE_BF16}};
            for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; m++)
                matmul_mixed(ref, gpu, tag, mixes[m]);
            /* fp16 weights with fp32 activations (given as fp32, stored as fp16). */
            layer(ref, gpu, tag, VKMHA_DTYPE_F32, VKMHA_DTYPE_F16, VKMHA_DTYPE_F32,
                  VKMHA_ATTENTION_PATH_AUTO, true);
            layer(ref, gpu, tag, VKMHA_DTYPE_F16, VKMHA_DTYPE_BF16, VKMHA_DTYPE_F32,
                  VKMHA_ATTENTION_PATH_UNFUSED, false);
            weight_memory(gpu, tag);
        }
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
    }
    vkmha_context_destroy(ref);
    return t_finish();
}
