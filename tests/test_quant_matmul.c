/* vkmha_matmul and vkmha_matmul_tensor with a quantized B
 * (vkmha_matmul_desc.b_quant) on Vulkan vs the reference backend, element
 * by element: Q8, Q4 and Q4Z at group sizes 32, 64 and 128, op T ([n][k],
 * groups along k: a torch.nn.Linear weight) and op N ([k][n], groups along
 * n), f32 / f16 / bf16 activations, bias, alpha, padded rows of A and C,
 * a B broadcast over a batch, sizes that are multiples of no tile (k and n
 * only as the groups require), on every matmul kernel the device has for
 * them: the CPU-shaped register kernel (vec4 texel reads of A and scalar
 * reads), its few-rows form (lanes over columns), the shared-memory tile
 * kernel and the GPUs' few-rows GEMV (forced through matmul_tile). Also:
 * bytes no quantizer writes (an Inf scale: the same elements non-finite; a
 * zero point above 15, the int8 code -128: the same values) read alike by
 * both backends; on Mesa 26's lavapipe (the mesa26 setup) the fp16 cases
 * run on the cooperative-matrix kernel, which scales each group's sums
 * (op T) or multiplies each value as two fp16 halves (op N); op N on
 * values whose products and sums are exact in fp32 (subnormal scales,
 * values past fp16's range, both in one product) gives the reference's
 * bits on every kernel, a profiled context showing which kernel ran them,
 * and on a cooperative tile twice as wide as the automatic one (a step
 * over two groups, one with an Inf scale); the tensor form (a U8 tensor b,
 * mixed activation dtypes); bad arguments refused naming them, the context
 * working after each. The independent check of the values (numpy's
 * transcription of the format) is tests/python/test_quant.py's.
 *
 * Tolerance: both backends multiply the same activations by the same
 * dequantized weights (exact in fp32); the reference sums in double, the
 * kernels in fp32: |gpu - ref| <= ATOL_PER_SQRT_K * sqrt(k) + rtol |ref|,
 * rtol 1e-5 for an fp32 C, two roundings of C for 16-bit ones (2^-10 for
 * fp16, 2^-7 for bf16). */
#include "util_dtype.h"

#define ATOL_PER_SQRT_K 4e-6

static const char *const qnames[] = {"", "q8", "q4", "q4z"};
static const char *const dnames[] = {"f32", "u8", "f16", "bf16"};

typedef struct qcase {
    uint32_t type, group;
    vkmha_op op;
    uint32_t batch, m, n, k;
    uint32_t dt; /* a, bias, c */
    bool bias, broadcast;
    float alpha;
    uint32_t pad_lda, pad_ldc;
} qcase;

static double rtol_of(uint32_t dt)
{
    return dt == VKMHA_DTYPE_F32 ? 1e-5 : 2 * t_dt_unit(dt);
}

/* B's quantized bytes for case c: random weights in [-1, 1] quantized on
 * the host (*bytes set). */
static uint8_t *quantized_b(vkmha_context *ref, t_rng *rng, const qcase *c, uint64_t *bytes)
{
    vkmha_quant_layout l = {0};
    uint8_t *b = t_quantized(ref, rng, c->type, c->group, c->op == VKMHA_OP_T ? c->n : c->k,
                             c->op == VKMHA_OP_T ? c->k : c->n, &l);
    *bytes = l.bytes;
    return b;
}

static void edit_inf_scale(uint8_t *b, const qcase *c);

/* Case c on host arrays: gpu against ref. edit (may be NULL) changes B's
 * bytes before both run (bytes no quantizer writes). */
static void run_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, const qcase *c,
                     const char *ctx_name, void (*edit)(uint8_t *, const qcase *),
                     const char *edit_name)
{
    char name[256];
    snprintf(name, sizeof name,
             "[%s] %s g%u op %s batch %u m %u n %u k %u %s bias %d alpha %g pads %u/%u%s%s%s",
             ctx_name, qnames[c->type], c->group, c->op == VKMHA_OP_T ? "T" : "N", c->batch,
             c->m, c->n, c->k, dnames[c->dt], c->bias, (double)c->alpha, c->pad_lda,
             c->pad_ldc, c->broadcast ? " broadcast b" : "", edit_name ? ", " : "",
             edit_name ? edit_name : "");
    vkmha_matmul_desc d = {.batch = c->batch, .m = c->m, .n = c->n, .k = c->k, .op_b = c->op,
                           .alpha = c->alpha, .dtype = c->dt, .b_quant = c->type,
                           .b_group_size = c->group};
    d.lda = c->pad_lda ? c->k + c->pad_lda : 0;
    d.ldc = c->pad_ldc ? c->n + c->pad_ldc : 0;
    d.stride_b = c->broadcast ? VKMHA_BROADCAST : 0;
    const uint32_t lda = c->k + c->pad_lda, ldc = c->n + c->pad_ldc, B = c->batch ? c->batch : 1;
    const size_t na = (size_t)B * c->m * lda, nc = (size_t)B * c->m * ldc;
    uint64_t nb = 0;
    uint8_t *b = quantized_b(ref, rng, c, &nb);
    if (!b) {
        t_report(false, "%s: quantizing b: %s", name, vkmha_context_last_error(ref));
        return;
    }
    if (edit)
        edit(b, c);
    float *a = t_random(rng, na, -1, 1), *bias = c->bias ? t_random(rng, c->n, -1, 1) : NULL;
    float *sentinel = t_alloc(nc);
    t_fill(sentinel, nc, 12288.0f); /* exact in every dtype: padding must keep it */
    void *a_dt = t_to_dt(c->dt, a, na), *bias_dt = bias ? t_to_dt(c->dt, bias, c->n) : NULL,
         *want = t_to_dt(c->dt, sentinel, nc), *got = t_to_dt(c->dt, sentinel, nc);
    bool ok = true;
    T_EXPECT_STATUS(vkmha_matmul(ref, &d, a_dt, b, bias_dt, want), VKMHA_SUCCESS, ok);
    const vkmha_status st = vkmha_matmul(gpu, &d, a_dt, b, bias_dt, got);
    T_EXPECT_STATUS(st, VKMHA_SUCCESS, ok);
    if (st)
        t_diag("%s", vkmha_context_last_error(gpu));
    float *g = t_from_dt(c->dt, got, nc), *w = t_from_dt(c->dt, want, nc);
    /* A scale that is not finite makes its products non-finite (Inf or NaN:
     * which, the order of the kernel's operations decides; the cooperative
     * kernel scales sums, the others each value): the same elements must
     * be non-finite. */
    for (size_t i = 0; edit == edit_inf_scale && i < nc; i++)
        if (!isfinite(g[i]) && !isfinite(w[i]))
            g[i] = w[i] = 0.0f;
    const double atol = ATOL_PER_SQRT_K * sqrt((double)c->k) * (c->alpha ? fabs(c->alpha) : 1);
    ok = ok && t_close(name, "c", g, w, nc, atol, rtol_of(c->dt));
    for (size_t i = 0; ok && i < nc; i++)
        if (i % ldc >= c->n && g[i] != 12288.0f) {
            t_diag("%s: padding c[%zu] was overwritten (%g)", name, i, (double)g[i]);
            ok = false;
        }
    t_report(ok, "%s", name);
    free(a), free(bias), free(sentinel), free(a_dt), free(bias_dt), free(want), free(got);
    free(g), free(w), free(b);
}

/* ---- bytes no quantizer writes --------------------------------------------- */

static uint64_t layout_bytes_scales(const qcase *c, uint64_t *zeros)
{
    /* The header's layout, written out: values, fp16 scales, then zeros. */
    const uint64_t rows = c->op == VKMHA_OP_T ? c->n : c->k,
                   cols = c->op == VKMHA_OP_T ? c->k : c->n,
                   values = rows * cols / (c->type == VKMHA_QUANT_Q8 ? 1 : 2);
    *zeros = (values + 2 * rows * (cols / c->group) + 15) / 16 * 16;
    return values;
}

/* Row 1's second group: an Inf scale (its products non-finite). */
static void edit_inf_scale(uint8_t *b, const qcase *c)
{
    uint64_t zeros;
    const uint64_t scales = layout_bytes_scales(c, &zeros),
                   cols = c->op == VKMHA_OP_T ? c->k : c->n, g = cols / c->group + 1;
    b[scales + 2 * g] = 0x00, b[scales + 2 * g + 1] = 0x7c; /* +Inf */
}

/* Every zero point with its high bits set (read: the low 4 bits). */
static void edit_zero_high(uint8_t *b, const qcase *c)
{
    uint64_t zeros;
    const uint64_t rows = c->op == VKMHA_OP_T ? c->n : c->k,
                   cols = c->op == VKMHA_OP_T ? c->k : c->n;
    layout_bytes_scales(c, &zeros);
    for (uint64_t i = 0; i < rows * (cols / c->group); i++)
        b[zeros + i] |= 0xa0;
}

/* Q8: every fifth code -128 (the quantizer writes -127 .. 127). */
static void edit_code_min(uint8_t *b, const qcase *c)
{
    const uint64_t n = (uint64_t)c->n * c->k;
    for (uint64_t i = 0; i < n; i += 5)
        b[i] = 0x80;
}

/* ---- op N's values exactly ---------------------------------------------- */

/* Q8 op N of group size g with fp16 A and C on values whose products and
 * sums are exact in fp32, so that every kernel must give the reference's
 * bits, m 9, in three forms (mode):
 *   0  subnormal scales, A of +-2^12 .. 3 2^12: values of up to 17
 *      significant bits in units of 2^-24, whose two fp16 halves the
 *      cooperative kernel's op N must both keep; k 5 (scalar loads of A);
 *   1  scales of 8192 with codes of magnitude 16 or more (values of 2^17
 *      and more, past fp16's range and past 65504 twice: that kernel stages
 *      such a step times a power of two), A of +-2^-12 .. 3 2^-12; k 12
 *      (vec4 loads of A: the kernels' vec pipelines);
 *   2  both in one product, apart in its steps of k: rows of k below the
 *      cooperative kernel's step (bk, where the context lists it, else 32)
 *      as in 1 with codes in even columns only, the rows after them as in 0
 *      in odd columns only (a step's power of two is its own); k bk + 8.
 * profiled: gpu is a VKMHA_CONTEXT_PROFILE context, whose steps must
 * include matmul_coop where it lists that kernel (the mesa26 setup forces
 * it), matmul_coop_vec where k is a multiple of 4. */
static void exact_n_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, uint32_t g,
                         int mode, const char *ctx_name, bool profiled)
{
    static const char *const forms[3] = {
        "subnormal scales", "scales 8192, codes +-16 .. 127 (values past 2 x 65504)",
        "steps of k of scales 8192 then subnormal ones"};
    vkmha_kernel_info k;
    const bool listed = kernel_find(gpu, "matmul_coop", &k) && k.available;
    const uint32_t bk = listed ? kernel_param(&k, "BK") : 32,
                   kk = mode == 2 ? bk + 8 : mode == 1 ? 12 : 5;
    const qcase c = {VKMHA_QUANT_Q8, g, VKMHA_OP_N, 1, 9, 2 * g, kk, VKMHA_DTYPE_F16, false,
                     false, 0, 0, 0};
    char name[200];
    snprintf(name, sizeof name, "[%s] q8 g%u op N m 9 n %u k %u f16, %s: the reference's bits",
             ctx_name, g, c.n, kk, forms[mode]);
    uint64_t nb = 0, zeros;
    uint8_t *b = quantized_b(ref, rng, &c, &nb);
    const uint64_t scales = layout_bytes_scales(&c, &zeros);
    for (uint64_t i = 0; b && i < scales; i++) { /* codes, row r = i / n */
        const bool big = mode == 1 || (mode == 2 && i / c.n < bk);
        int mag = big ? 16 + (int)(t_next(rng) % 112) : (int)(t_next(rng) % 128);
        if (mode == 2 && (i % 2 == 0) != big)
            mag = 0;
        b[i] = (uint8_t)(int8_t)(t_next(rng) & 1 ? -mag : mag);
    }
    for (uint64_t i = 0; b && i < (uint64_t)kk * (c.n / g); i++) { /* scales, row i / (n / g) */
        const bool big = mode == 1 || (mode == 2 && i / (c.n / g) < bk);
        const uint16_t h = big ? 0x7000 : (uint16_t)(1 + t_next(rng) % 0x3ff);
        b[scales + 2 * i] = (uint8_t)h, b[scales + 2 * i + 1] = (uint8_t)(h >> 8);
    }
    float *a = t_alloc((size_t)9 * kk);
    for (uint32_t i = 0; i < 9 * kk; i++) {
        const bool big = mode == 1 || (mode == 2 && i % kk < bk);
        a[i] = (float)(1 + t_next(rng) % 3) * (t_next(rng) & 1 ? -1.0f : 1.0f) *
               (big ? 0x1p-12f : 0x1p12f);
    }
    const vkmha_matmul_desc d = {.m = 9, .n = c.n, .k = kk, .op_b = VKMHA_OP_N,
                                 .dtype = VKMHA_DTYPE_F16, .b_quant = VKMHA_QUANT_Q8,
                                 .b_group_size = g};
    void *a16 = t_to_dt(VKMHA_DTYPE_F16, a, (size_t)9 * kk);
    uint16_t *want = calloc((size_t)9 * c.n, 2), *got = calloc((size_t)9 * c.n, 2);
    bool ok = b && want && got && !vkmha_matmul(ref, &d, a16, b, NULL, want);
    const vkmha_status st = ok ? vkmha_matmul(gpu, &d, a16, b, NULL, got) : VKMHA_SUCCESS;
    if (st)
        t_diag("%s: %s", name, vkmha_context_last_error(gpu));
    ok = ok && !st && t_close_dt(name, "c", VKMHA_DTYPE_F16, got, want, (size_t)9 * c.n, 0, 0);
    if (ok && profiled) { /* the kernel that ran it */
        static vkmha_profile_step steps[VKMHA_MAX_PROFILE_STEPS];
        uint32_t n = VKMHA_MAX_PROFILE_STEPS;
        const char *ran = "no matmul";
        ok = !vkmha_context_get_profile(gpu, &n, steps);
        for (uint32_t i = 0; ok && i < n; i++)
            if (!strncmp(steps[i].name, "matmul", 6))
                ran = steps[i].name;
        ok = ok && (listed ? !strcmp(ran, mode ? "matmul_coop_vec" : "matmul_coop")
                           : strncmp(ran, "matmul_coop", 11) != 0);
        t_report(ok, "%s: ran on %s (matmul_coop listed available: %s)", name, ran,
                 listed ? "yes" : "no");
    } else {
        t_report(ok, "%s", name);
    }
    free(b), free(a), free(a16), free(want), free(got);
}

/* ---- the tensor form ------------------------------------------------------- */

static vkmha_tensor *tensor_of(vkmha_context *ctx, uint32_t dt, uint64_t n, const void *data)
{
    const vkmha_tensor_desc td = {.dtype = dt, .rank = 1, .dims = {(uint32_t)n}};
    vkmha_tensor *t = NULL;
    if (vkmha_tensor_create(ctx, &td, &t))
        return NULL;
    const uint64_t bytes = dt == VKMHA_DTYPE_U8 ? (n + 3) / 4 * 4 : n * (dt ? 2 : 4);
    if (data && vkmha_tensor_upload(t, 0, data, dt == VKMHA_DTYPE_U8 ? n : bytes)) {
        vkmha_tensor_destroy(t);
        return NULL;
    }
    return t;
}

/* The tensor form on both backends: A f16, bias f32, C bf16 (each tensor
 * its own dtype), B a U8 tensor; against the host form of the reference
 * with the same values. */
static void tensor_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, const char *ctx_name)
{
    const qcase c = {VKMHA_QUANT_Q4Z, 64, VKMHA_OP_T, 1, 5, 21, 128, VKMHA_DTYPE_F32, true, false,
                     0, 0, 0};
    char name[160];
    snprintf(name, sizeof name, "[%s] tensors: q4z g64 op T m 5 n 21 k 128, a f16, bias f32, "
             "c bf16", ctx_name);
    uint64_t nb = 0;
    uint8_t *b = quantized_b(ref, rng, &c, &nb);
    float *a = t_random(rng, 5 * 128, -1, 1), *bias = t_random(rng, 21, -1, 1);
    void *a16 = t_to_dt(VKMHA_DTYPE_F16, a, 5 * 128);
    vkmha_matmul_desc d = {.m = 5, .n = 21, .k = 128, .op_b = VKMHA_OP_T,
                           .b_quant = VKMHA_QUANT_Q4Z, .b_group_size = 64};
    bool ok = b != NULL;
    float *want = t_alloc(5 * 21), *got = t_alloc(5 * 21);
    for (int be = 0; ok && be < 2; be++) {
        vkmha_context *ctx = be ? gpu : ref;
        vkmha_tensor *ta = tensor_of(ctx, VKMHA_DTYPE_F16, 5 * 128, a16),
                     *tb = tensor_of(ctx, VKMHA_DTYPE_U8, nb, b),
                     *tbias = tensor_of(ctx, VKMHA_DTYPE_F32, 21, bias),
                     *tc = tensor_of(ctx, VKMHA_DTYPE_BF16, 5 * 21, NULL);
        uint16_t c16[5 * 21];
        ok = ta && tb && tbias && tc;
        T_EXPECT_STATUS(ok ? vkmha_matmul_tensor(ctx, &d, ta, tb, tbias, tc)
                           : VKMHA_ERROR_OUT_OF_DEVICE_MEMORY,
                        VKMHA_SUCCESS, ok);
        if (!ok)
            t_diag("%s: %s", name, vkmha_context_last_error(ctx));
        ok = ok && !vkmha_tensor_download(tc, 0, c16, sizeof c16);
        if (ok)
            vkmha__to_f32(VKMHA_DTYPE_BF16, c16, 5 * 21, be ? got : want);
        /* A b tensor of a float dtype, and one a byte short. */
        if (ok && be) {
            vkmha_tensor *f = tensor_of(ctx, VKMHA_DTYPE_F32, nb, NULL),
                         *shorter = tensor_of(ctx, VKMHA_DTYPE_U8, nb - 1, NULL);
            ok = t_report(f && shorter &&
                              vkmha_matmul_tensor(ctx, &d, ta, f, tbias, tc) ==
                                  VKMHA_ERROR_INVALID_ARGUMENT &&
                              t_message_names(name, vkmha_context_last_error(ctx),
                                              "vkmha_matmul_tensor", "b", "U8") &&
                              vkmha_matmul_tensor(ctx, &d, ta, shorter, tbias, tc) ==
                                  VKMHA_ERROR_INVALID_ARGUMENT &&
                              t_message_names(name, vkmha_context_last_error(ctx),
                                              "vkmha_matmul_tensor", "b", NULL) &&
                              t_context_works(ctx, name),
                          "[%s] tensors: a quantized b of dtype F32, or a byte short: refused "
                          "naming b", ctx_name);
            vkmha_tensor_destroy(f);
            vkmha_tensor_destroy(shorter);
        }
        vkmha_tensor_destroy(ta), vkmha_tensor_destroy(tb);
        vkmha_tensor_destroy(tbias), vkmha_tensor_destroy(tc);
    }
    ok = ok && t_close(name, "c", got, want, 5 * 21, ATOL_PER_SQRT_K * sqrt(128.0),
                       rtol_of(VKMHA_DTYPE_BF16));
    t_report(ok, "%s", name);
    free(b), free(a), free(bias), free(a16), free(want), free(got);
}

/* ---- bad arguments --------------------------------------------------------- */

static void bad_cases(vkmha_context *ctx, const char *be)
{
    float a[64 * 4], c[64 * 4];
    uint8_t b[4096];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    const vkmha_matmul_desc good = {.m = 2, .n = 3, .k = 64, .op_b = VKMHA_OP_T,
                                    .b_quant = VKMHA_QUANT_Q8, .b_group_size = 32};
    struct {
        const char *what, *arg, *extra;
        vkmha_matmul_desc d;
    } bad[] = {
        {"b_quant 4", "desc->b_quant", "vkmha_quant_type", good},
        {"group size 48", "desc->b_group_size", "32", good},
        {"op T, k 48 not a multiple of the group", "desc->k", "b_group_size", good},
        {"op N, n 3 not a multiple of the group", "desc->n", "b_group_size", good},
        {"ldb set", "desc->ldb", "packed", good},
        {"batch 2, stride_b packed", "desc->stride_b", "VKMHA_BROADCAST", good},
        {"batch 1, stride_b 500", "desc->stride_b", "VKMHA_BROADCAST", good},
        {"b_group_size without b_quant", "desc->b_group_size", "b_quant", good},
    };
    bad[0].d.b_quant = 4;
    bad[1].d.b_group_size = 48;
    bad[2].d.k = 48;
    bad[3].d.op_b = VKMHA_OP_N;
    bad[4].d.ldb = 80;
    bad[5].d.batch = 2;
    bad[6].d.stride_b = 500;
    bad[7].d.b_quant = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[160];
        snprintf(name, sizeof name, "%s: quantized b, %s: refused naming %s", be, bad[i].what,
                 bad[i].arg);
        t_fill(c, 64 * 4, 7.0f);
        const vkmha_status st = vkmha_matmul(ctx, &bad[i].d, a, b, NULL, c);
        bool untouched = true;
        for (int j = 0; j < 64 * 4; j++)
            untouched = untouched && c[j] == 7.0f;
        t_report(st == VKMHA_ERROR_INVALID_ARGUMENT &&
                     t_message_names(name, vkmha_context_last_error(ctx), "vkmha_matmul",
                                     bad[i].arg, bad[i].extra) &&
                     untouched && t_context_works(ctx, name),
                 "%s", name);
    }
}

/* ---- the layer with quantized weights ------------------------------------- */

/* The layer's out and weights on `ctx` (io as made, its out and weights
 * given here); false after a message. */
static bool layer_run(vkmha_context *ctx, const vkmha_mha_desc *d, vkmha_mha_io io,
                      float *out, float *weights, const char *name)
{
    vkmha_mha *mha = NULL;
    io.out = out;
    io.attn_weights = weights;
    vkmha_status st = vkmha_mha_create(ctx, d, &mha);
    if (!st)
        st = vkmha_mha_forward(mha, &io);
    if (st)
        t_diag("%s: %s", name, vkmha_context_last_error(ctx));
    vkmha_mha_destroy(mha);
    return !st;
}

/* d's projection weights (fp32) replaced by copies holding the values of
 * their quantization (type, group): the float layer the quantized one must
 * compute; *mem frees them. */
static bool dequantized_desc(vkmha_context *ref, vkmha_mha_desc *d, uint32_t type,
                             uint32_t group, float **mem)
{
    const uint32_t heads = d->head_end ? d->head_end - d->head_begin : d->n_head;
    const uint32_t rows[4] = {d->n_head * (d->d_k ? d->d_k : d->d_model / d->n_head),
                              (d->n_kv_head ? d->n_kv_head : d->n_head) *
                                  (d->d_k ? d->d_k : d->d_model / d->n_head),
                              (d->n_kv_head ? d->n_kv_head : d->n_head) *
                                  (d->d_v ? d->d_v : d->d_model / d->n_head),
                              d->d_model};
    const uint32_t cols[4] = {d->d_model, d->kdim ? d->kdim : d->d_model,
                              d->vdim ? d->vdim : d->d_model,
                              d->n_head * (d->d_v ? d->d_v : d->d_model / d->n_head)};
    const void **w[4] = {&d->w_q, &d->w_k, &d->w_v, &d->w_o};
    size_t total = 0;
    for (int i = 0; i < 4; i++)
        total += (size_t)rows[i] * cols[i];
    float *p = *mem = t_alloc(total);
    (void)heads;
    for (int i = 0; i < 4; i++) {
        /* w_o of a shard: the groups run along the shard's columns, which
         * the layer quantizes from its slice; the whole matrix's groups of
         * those columns are the same groups when the shard's first column
         * is a multiple of the group size (the tests' shards are). */
        const vkmha_quant_desc q = {type, group, rows[i], cols[i]};
        vkmha_quant_layout l;
        if (vkmha_quant_layout_of(ref, &q, &l))
            return false;
        uint8_t *b = malloc(l.bytes);
        const bool ok = b && !vkmha_quantize(ref, &q, VKMHA_DTYPE_F32, *w[i], b, l.bytes) &&
                        !vkmha_dequantize(ref, &q, b, l.bytes, VKMHA_DTYPE_F32, p);
        free(b);
        if (!ok)
            return false;
        *w[i] = p;
        p += (size_t)rows[i] * cols[i];
    }
    return true;
}

static void layer_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, uint32_t type,
                       uint32_t group, uint32_t path, uint32_t shard, const char *ctx_name)
{
    char name[200];
    snprintf(name, sizeof name, "[%s] layer %s g%u, d_model 128, 4 heads over 2, path %s%s",
             ctx_name, qnames[type], group, path == VKMHA_ATTENTION_PATH_FUSED ? "fused"
                                                 : path ? "unfused" : "auto",
             shard ? ", shard of heads 2..4" : "");
    t_layer l;
    t_layer_make(&l, rng, 128, 4, 2, 2, 7, 0, VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL);
    l.io.attention_path = path;
    vkmha_mha_desc d = l.desc;
    if (shard)
        d.head_begin = 2, d.head_end = 4;
    d.weight_quant = type;
    d.weight_group_size = group;
    float *want = t_alloc(l.n_out), *got = t_alloc(l.n_out), *flat = t_alloc(l.n_out),
          *ww = t_alloc(l.n_weights), *gw = t_alloc(l.n_weights), *mem = NULL;
    /* The float layer on the quantization's values (the reference): the
     * quantized layer must compute exactly it. */
    vkmha_mha_desc fd = l.desc;
    if (shard)
        fd.head_begin = 2, fd.head_end = 4;
    bool ok = dequantized_desc(ref, &fd, type, group, &mem) &&
              layer_run(ref, &fd, l.io, flat, NULL, name) &&
              layer_run(ref, &d, l.io, want, ww, name) && layer_run(gpu, &d, l.io, got, gw, name);
    const size_t nw = shard ? l.n_weights / 2 : l.n_weights;
    ok = ok && t_close(name, "reference vs the float layer on the dequantized weights", want,
                       flat, l.n_out, 1e-6, 1e-6) &&
         t_close(name, "out", got, want, l.n_out, T_LAYER_ATOL, T_LAYER_RTOL) &&
         t_close(name, "attn_weights", gw, ww, nw, 1e-6, 1e-5);
    t_report(ok, "%s", name);
    free(want), free(got), free(flat), free(ww), free(gw), free(mem);
    t_layer_free(&l);
}

/* The layer given its weights already quantized (weights_quantized: the
 * host's vkmha_quantize of the whole layer's weights, a shard cutting its
 * part from them) against the same layer quantizing the float weights at
 * creation: the same values, so the same outputs, bit for bit, on both
 * backends. */
static void prequantized_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, uint32_t type,
                              uint32_t group, bool shard, const char *ctx_name)
{
    char name[200];
    snprintf(name, sizeof name, "[%s] layer %s g%u given quantized%s: the same outputs as "
             "quantized at creation", ctx_name, qnames[type], group,
             shard ? ", shard of heads 2..4" : "");
    t_layer l;
    t_layer_make(&l, rng, 128, 4, 2, 1, 5, 0, VKMHA_MASK_CAUSAL);
    vkmha_mha_desc d = l.desc;
    d.weight_quant = type;
    d.weight_group_size = group;
    if (shard)
        d.head_begin = 2, d.head_end = 4;
    vkmha_mha_desc pq = d;
    pq.weights_quantized = true;
    const void **w[4] = {&pq.w_q, &pq.w_k, &pq.w_v, &pq.w_o};
    const uint32_t rows[4] = {128, 64, 64, 128}, cols[4] = {128, 128, 128, 128};
    uint8_t *bytes[4] = {NULL, NULL, NULL, NULL};
    bool ok = true;
    for (int i = 0; i < 4 && ok; i++) {
        const vkmha_quant_desc q = {type, group, rows[i], cols[i]};
        vkmha_quant_layout ql;
        ok = !vkmha_quant_layout_of(ref, &q, &ql) && (bytes[i] = malloc(ql.bytes)) &&
             !vkmha_quantize(ref, &q, VKMHA_DTYPE_F32, *w[i], bytes[i], ql.bytes);
        *w[i] = bytes[i];
    }
    float *out[2][2];
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 2; k++)
            out[b][k] = t_alloc(l.n_out);
    for (int b = 0; b < 2 && ok; b++)
        ok = layer_run(b ? gpu : ref, &d, l.io, out[b][0], NULL, name) &&
             layer_run(b ? gpu : ref, &pq, l.io, out[b][1], NULL, name);
    for (int b = 0; b < 2 && ok; b++)
        if (memcmp(out[b][0], out[b][1], l.n_out * sizeof(float))) {
            t_diag("%s: the %s backend's outputs differ", name, b ? "Vulkan" : "reference");
            ok = false;
        }
    t_report(ok, "%s", name);
    for (int i = 0; i < 4; i++)
        free(bytes[i]);
    for (int b = 0; b < 2; b++)
        free(out[b][0]), free(out[b][1]);
    t_layer_free(&l);
}

/* A decode: a prompt of 5 positions, then 3 steps of one, through a KV
 * cache, each step's out against the reference's. */
static void layer_cache_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, uint32_t type,
                             uint32_t group, const char *ctx_name)
{
    char name[160];
    snprintf(name, sizeof name, "[%s] layer %s g%u over a KV cache: prompt 5, 3 steps",
             ctx_name, qnames[type], group);
    t_layer_desc ld;
    t_layer_desc_make(&ld, rng, 128, 4, 2, 32, 32, 128, 0.1f);
    ld.d.weight_quant = type;
    ld.d.weight_group_size = group;
    t_report(t_layer_cache_steps(ref, gpu, rng, &ld.d, name), "%s", name);
    free(ld.mem);
}

/* Bad layer descs, refused naming the field (or the weight, row and
 * group), nothing created, the context working after. */
static void layer_bad_cases(vkmha_context *ctx, t_rng *rng, const char *be)
{
    t_layer_desc ld;
    t_layer_desc_make(&ld, rng, 128, 4, 2, 32, 32, 128, 0.1f);
    struct {
        const char *what, *arg, *extra;
        uint32_t type, group, d_model_96, shard, nan;
    } bad[] = {
        {"weight_quant 4", "desc->weight_quant", "vkmha_quant_type", 4, 32, 0, 0, 0},
        {"group size 16", "desc->weight_group_size", "32", 1, 16, 0, 0, 0},
        {"group size without weight_quant", "desc->weight_group_size", "weight_quant", 0, 32,
         0, 0, 0},
        {"kdim 96 with groups of 64", "desc->kdim", "weight_group_size", 2, 64, 1, 0, 0},
        {"a shard of 1 head of 32 with groups of 64", "desc->d_v", "weight_group_size", 3, 64,
         0, 1, 0},
        {"w_k holding NaN", "desc->w_k", "row 3, group 1", 1, 32, 0, 0, 1},
        {"weights_quantized without weight_quant", "desc->weights_quantized", "weight_quant",
         0, 0, 0, 0, 2},
        {"a shard from head 1 (column 32) with groups of 64", "desc->head_begin",
         "weight_group_size", 2, 64, 0, 2, 0},
        {"a given w_o with an Inf scale", "desc->w_o", "row 2, group 1", 3, 64, 0, 0, 3},
        {"a given w_q with a zero point of 16", "desc->w_q", "row 0, group 0", 3, 32, 0, 0, 4},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[160];
        snprintf(name, sizeof name, "%s: layer with %s: refused naming %s", be, bad[i].what,
                 bad[i].arg);
        vkmha_mha_desc d = ld.d;
        void *wo_inf = NULL;
        d.weight_quant = bad[i].type;
        d.weight_group_size = bad[i].group;
        float *wk = NULL;
        if (bad[i].d_model_96) { /* kdim 96: w_k and w_v [64][96] */
            d.kdim = d.vdim = 96;
            wk = t_random(rng, 64 * 96, -1, 1);
            d.w_k = d.w_v = wk;
        }
        if (bad[i].shard) { /* heads 0..1, or 1..3, of 4 over 4 key/value heads */
            d.n_kv_head = 4, d.w_k = d.w_v = d.w_q;
            d.head_begin = bad[i].shard - 1;
            d.head_end = bad[i].shard == 1 ? 1 : 3;
        }
        if (bad[i].nan == 1) {
            wk = t_alloc(64 * 128);
            memcpy(wk, d.w_k, 64 * 128 * sizeof *wk);
            wk[3 * 128 + 40] = NAN;
            d.w_k = wk;
        }
        if (bad[i].nan >= 2) /* given quantized: zero bytes, a scale or zero point set */
            d.weights_quantized = true;
        if (bad[i].nan >= 3) {
            /* room for the largest of the four (w_q, w_o [128][128] in Q4Z) */
            wk = calloc(128 * 128 + 2 * 128 * 4 + 128 * 4 + 64, 1);
            d.w_q = d.w_k = d.w_v = d.w_o = wk;
            uint8_t *q = (uint8_t *)wk;
            if (bad[i].nan == 3) { /* w_o [128][128] Q4Z g64: scales at 8192 */
                uint8_t *o = wo_inf = calloc(128 * 128, 1);
                o[8192 + 2 * (2 * 2 + 1) + 1] = 0x7c; /* row 2, group 1: +Inf */
                d.w_o = o;
            } else { /* w_q Q4Z g32: its zero points after 8192 + 2 * 512 bytes */
                q[8192 + 1024] = 16;
            }
        }
        vkmha_mha *mha = (vkmha_mha *)&d; /* must be set to NULL */
        const vkmha_status st = vkmha_mha_create(ctx, &d, &mha);
        t_report(st == VKMHA_ERROR_INVALID_ARGUMENT && !mha &&
                     t_message_names(name, vkmha_context_last_error(ctx), "vkmha_mha_create",
                                     bad[i].arg, bad[i].extra) &&
                     t_context_works(ctx, name),
                 "%s", name);
        vkmha_mha_destroy(mha);
        free(wk);
        free(wo_inf);
    }
    free(ld.mem);
}

int main(void)
{
    t_rng rng = {0x5eed28};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    bad_cases(ref, "reference");
    layer_bad_cases(ref, &rng, "reference");

    /* The device's own kernels, then the shared-memory tile kernel (with the
     * GPUs' few-rows GEMV, where the context has subgroup arithmetic). */
    static const vkmha_tile_config shared = {16, 16, 8, 4, 4, 0, VKMHA_MATMUL_VARIANT_SHARED};
    const struct {
        const char *name;
        const vkmha_tile_config *tile;
    } contexts[] = {{"auto", NULL}, {"shared 16x16x8", &shared}};
    const vkmha_op T = VKMHA_OP_T, N = VKMHA_OP_N;
    const uint32_t F32 = VKMHA_DTYPE_F32, F16 = VKMHA_DTYPE_F16, BF16 = VKMHA_DTYPE_BF16;
    static const uint32_t groups[3] = {32, 64, 128};
    for (size_t x = 0; x < sizeof contexts / sizeof contexts[0]; x++) {
        vkmha_context_desc desc = {0};
        desc.enable_validation = t_validation();
        desc.log = t_log;
        desc.matmul_tile = contexts[x].tile;
        vkmha_context *gpu = NULL;
        const vkmha_status st = vkmha_context_create(&desc, &gpu);
        if (!t_report(st == VKMHA_SUCCESS, "context %s: %s %s", contexts[x].name,
                      vkmha_status_string(st), vkmha_context_last_error(NULL)))
            continue;
        t_pin_libraries(); /* sanitizer reports name the driver's and layer's frames */
        if (!x) {
            bad_cases(gpu, "vulkan");
            layer_bad_cases(gpu, &rng, "vulkan");
        }
        /* The layer: every type, the attention paths, a head shard, a
         * decode over a KV cache. */
        for (uint32_t type = VKMHA_QUANT_Q8; type <= VKMHA_QUANT_Q4Z; type++) {
            const uint32_t g = groups[(type + x) % 3];
            layer_case(ref, gpu, &rng, type, g, VKMHA_ATTENTION_PATH_FUSED, 0,
                       contexts[x].name);
            layer_case(ref, gpu, &rng, type, g, VKMHA_ATTENTION_PATH_UNFUSED, 0,
                       contexts[x].name);
            layer_case(ref, gpu, &rng, type, 32, 0, 1, contexts[x].name);
            layer_cache_case(ref, gpu, &rng, type, g, contexts[x].name);
            prequantized_case(ref, gpu, &rng, type, g, false, contexts[x].name);
            prequantized_case(ref, gpu, &rng, type, 32, true, contexts[x].name);
        }
        for (uint32_t type = VKMHA_QUANT_Q8; type <= VKMHA_QUANT_Q4Z; type++)
            for (int gi = 0; gi < 3; gi++) {
                const uint32_t g = groups[gi], dt = gi == 0 ? F32 : gi == 1 ? F16 : BF16;
                const qcase cases[] = {
                    /* a decode step's row, and a few rows (the GEMVs) */
                    {type, g, T, 1, 1, 45, 3 * g, dt, true, false, 0, 0, 0},
                    {type, g, T, 1, 3, 37, 2 * g, F32, false, false, 0.5f, 0, 0},
                    /* many rows, vec4 and padded (scalar) A */
                    {type, g, T, 1, 37, 70, 2 * g, dt, true, false, 0, 0, 3},
                    {type, g, T, 1, 19, 9, g, F16, true, false, 0, 5, 0},
                    /* op N: groups along n; k of any size */
                    {type, g, N, 1, 13, 2 * g, 77, dt, true, false, 0, 0, 0},
                    {type, g, N, 1, 2, g, 5, BF16, false, false, 2.0f, 1, 0},
                    /* one B for a batch of products */
                    {type, g, T, 3, 7, 11, g, F32, true, true, 0, 0, 0},
                };
                for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                    run_case(ref, gpu, &rng, &cases[i], contexts[x].name, NULL, NULL);
            }
        /* Bytes no quantizer writes, read alike. */
        const qcase inf = {VKMHA_QUANT_Q4, 32, T, 1, 6, 9, 96, F32, true, false, 0, 0, 0},
                    inf_n = {VKMHA_QUANT_Q8, 32, N, 1, 6, 64, 5, F16, false, false, 0, 0, 0},
                    inf_t16 = {VKMHA_QUANT_Q4Z, 32, T, 1, 20, 9, 96, F16, true, false, 0, 0, 0},
                    zero = {VKMHA_QUANT_Q4Z, 64, T, 1, 4, 10, 128, F32, true, false, 0, 0, 0},
                    zero_n = {VKMHA_QUANT_Q4Z, 32, N, 1, 3, 96, 7, F32, false, false, 0, 0, 0},
                    code = {VKMHA_QUANT_Q8, 128, T, 1, 5, 13, 256, F32, false, false, 0, 0, 0};
        run_case(ref, gpu, &rng, &inf, contexts[x].name, edit_inf_scale, "an Inf scale");
        run_case(ref, gpu, &rng, &inf_n, contexts[x].name, edit_inf_scale, "an Inf scale");
        run_case(ref, gpu, &rng, &inf_t16, contexts[x].name, edit_inf_scale, "an Inf scale");
        run_case(ref, gpu, &rng, &zero, contexts[x].name, edit_zero_high,
                 "zero points above 15");
        run_case(ref, gpu, &rng, &zero_n, contexts[x].name, edit_zero_high,
                 "zero points above 15");
        run_case(ref, gpu, &rng, &code, contexts[x].name, edit_code_min, "codes -128");
        for (int mode = 0; mode < 3; mode++)
            exact_n_case(ref, gpu, &rng, groups[mode], mode, contexts[x].name, false);
        tensor_case(ref, gpu, &rng, contexts[x].name);
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
    }
    /* Op N's exact values again on a profiled context of the device's own
     * kernels: which kernel ran them. */
    vkmha_context_desc desc = {.enable_validation = t_validation(), .log = t_log,
                               .flags = VKMHA_CONTEXT_PROFILE};
    vkmha_context *gpu = NULL;
    if (t_report(!vkmha_context_create(&desc, &gpu), "profiled context: %s",
                 vkmha_context_last_error(NULL))) {
        for (int mode = 0; mode < 3; mode++)
            exact_n_case(ref, gpu, &rng, 32 << mode, mode, "profiled", true);
        t_report_validation(gpu);
        /* The cooperative kernel (where the device lists it) with tiles
         * twice as wide as its own, 2 x 32 columns or more: an op N step
         * over more than one group of 32, one of them holding an Inf scale
         * (the others' power of two is their largest finite value's), and
         * case 2 of exact_n_case with its two groups in one tile. */
        vkmha_kernel_info k;
        if (kernel_find(gpu, "matmul_coop", &k) && k.available) {
            vkmha_tile_config wide = {kernel_param(&k, "BM"), 2 * kernel_param(&k, "BN"),
                                      kernel_param(&k, "BK"), kernel_param(&k, "TM"),
                                      2 * kernel_param(&k, "TN"), 0,
                                      VKMHA_MATMUL_VARIANT_COOPERATIVE};
            vkmha_context *w = NULL;
            desc.flags = 0, desc.matmul_tile = &wide;
            char name[64];
            snprintf(name, sizeof name, "cooperative %ux%ux%u", wide.bm, wide.bn, wide.bk);
            if (t_report(!vkmha_context_create(&desc, &w), "context %s: %s", name,
                         vkmha_context_last_error(NULL))) {
                const qcase inf_n = {VKMHA_QUANT_Q8, 32, VKMHA_OP_N, 1, 6, 4 * wide.bn, 5,
                                     VKMHA_DTYPE_F16, false, false, 0, 0, 0};
                run_case(ref, w, &rng, &inf_n, name, edit_inf_scale, "an Inf scale");
                exact_n_case(ref, w, &rng, 32, 2, name, false);
                t_report_validation(w);
                vkmha_context_destroy(w);
            }
        } else {
            t_report(true, "no matmul_coop on this device: its wide tiles are tried in the "
                           "mesa26 setup");
        }
        vkmha_context_destroy(gpu);
    }
    vkmha_context_destroy(ref);
    return t_finish();
}
