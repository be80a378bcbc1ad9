/* Quantized weights on the host (include/vkmha.h, "Quantized weights"), on
 * both backends' contexts: the layout's offsets against its definition; a
 * round trip within half a step of each group's scale (|x - value| <=
 * (1/2 + 2^-7) d: the scale's fp16 rounding can push the largest |x| a
 * 2^-11 past the codes' range, and Q4Z's rounded zero point adds as much
 * at its clamp); the documented edge groups (all zeros, a scale that
 * underflows fp16, a value far above the rest); dequantize exact against
 * scale * q in F32 and rounded to nearest even in F16 and BF16; bad
 * arguments (NULL, type, group size, sizes, cols not a multiple of the
 * group, more elements than any host array holds, buffers too small, src
 * dtype) and unquantizable groups (NaN, +-Inf,
 * a scale past fp16's largest) refused with VKMHA_ERROR_INVALID_ARGUMENT
 * and a message naming the argument, or the row and group; the context
 * works after each. Bit-exactness against an independent transcription of
 * the formulas is tests/python/test_quant.py's. */
#include "util.h"

#include "half.h"

#define ROWS 5
#define COLS 256 /* 8, 4 or 2 groups: a multiple of every group size */

static const char *const type_names[] = {"", "Q8", "Q4", "Q4Z"};

/* The layout the header defines, computed here from its words. */
static vkmha_quant_layout expected_layout(const vkmha_quant_desc *d)
{
    const uint64_t groups = (uint64_t)d->rows * (d->cols / d->group_size),
                   values = (uint64_t)d->rows * d->cols / (d->type == VKMHA_QUANT_Q8 ? 1 : 2);
    vkmha_quant_layout l = {.scales_offset = values};
    uint64_t end = values + 2 * groups;
    if (d->type == VKMHA_QUANT_Q4Z) {
        l.zeros_offset = (end + 15) / 16 * 16;
        end = l.zeros_offset + groups;
    }
    l.bytes = (end + 15) / 16 * 16;
    return l;
}

/* Row r's group g scale from the bytes. */
static float scale_at(const uint8_t *q, const vkmha_quant_layout *l, const vkmha_quant_desc *d,
                      uint32_t r, uint32_t g)
{
    uint16_t bits;
    memcpy(&bits, q + l->scales_offset + 2 * ((size_t)r * (d->cols / d->group_size) + g), 2);
    return vkmha__half_to_float(bits);
}

/* Quantizes x (F32) and dequantizes it back on ctx: each value within half
 * a step of its group's scale; the bytes past the data zero. */
static bool round_trip(vkmha_context *ctx, const vkmha_quant_desc *d, const float *x,
                       const char *what)
{
    vkmha_quant_layout l;
    bool ok = !vkmha_quant_layout_of(ctx, d, &l);
    const vkmha_quant_layout want = expected_layout(d);
    ok = ok && l.scales_offset == want.scales_offset && l.zeros_offset == want.zeros_offset &&
         l.bytes == want.bytes && l.bytes % 16 == 0;
    uint8_t *q = malloc(l.bytes + 16);
    float *y = t_alloc((size_t)d->rows * d->cols);
    memset(q, 0xab, l.bytes + 16);
    ok = ok && !vkmha_quantize(ctx, d, VKMHA_DTYPE_F32, x, q, l.bytes) &&
         !vkmha_dequantize(ctx, d, q, l.bytes, VKMHA_DTYPE_F32, y) && q[l.bytes] == 0xab;
    for (uint32_t r = 0; r < d->rows && ok; r++)
        for (uint32_t c = 0; c < d->cols && ok; c++) {
            const size_t i = (size_t)r * d->cols + c;
            const float s = scale_at(q, &l, d, r, c / d->group_size);
            ok = fabsf(x[i] - y[i]) <= (0.5f + 1.0f / 128) * s;
            if (!ok)
                t_diag("%s: element %u,%u: %g back as %g, scale %g", what, r, c, (double)x[i],
                       (double)y[i], (double)s);
        }
    free(q), free(y);
    return ok;
}

/* A refused call: status, message naming `arg` (and holding `extra` and
 * `also` where not NULL), the context working after. */
static bool refused_with(vkmha_status st, vkmha_context *ctx, const char *fn, const char *arg,
                         const char *extra, const char *also, const char *what)
{
    const bool named = st == VKMHA_ERROR_INVALID_ARGUMENT &&
                       t_message_names(what, vkmha_context_last_error(ctx), fn, arg, extra);
    if (named && also && !strstr(vkmha_context_last_error(ctx), also)) {
        t_diag("%s: \"%s\" does not say \"%s\"", what, vkmha_context_last_error(ctx), also);
        return false;
    }
    return named && t_context_works(ctx, what);
}

static bool refused(vkmha_status st, vkmha_context *ctx, const char *fn, const char *arg,
                    const char *extra, const char *what)
{
    return refused_with(st, ctx, fn, arg, extra, NULL, what);
}

static void backend_cases(vkmha_context *ctx, const char *be, t_rng *rng)
{
    float *x = t_random(rng, ROWS * COLS, -3, 3);
    static const uint32_t groups[3] = {32, 64, 128};
    for (uint32_t t = VKMHA_QUANT_Q8; t <= VKMHA_QUANT_Q4Z; t++)
        for (int g = 0; g < 3; g++) {
            char what[96];
            snprintf(what, sizeof what, "%s %s group %u", be, type_names[t], groups[g]);
            const vkmha_quant_desc d = {.type = t, .group_size = groups[g], .rows = ROWS,
                                        .cols = COLS};
            t_report(round_trip(ctx, &d, x, what),
                     "%s: layout as documented, each value back within half its scale", what);
        }

    /* Edge groups, in one Q8 and one Q4Z matrix of group 32: row 0 all
     * zeros, row 1 values whose scale underflows fp16, row 2 one value far
     * above the rest, row 3 ties at half a step (rounded to even), row 4
     * all equal and positive. */
    for (uint32_t t = VKMHA_QUANT_Q8; t <= VKMHA_QUANT_Q4Z; t += 2) {
        const vkmha_quant_desc d = {.type = t, .group_size = 32, .rows = 5, .cols = 32};
        float e[5 * 32], y[5 * 32];
        for (int i = 0; i < 32; i++) {
            e[i] = 0.0f;
            e[32 + i] = (i % 2 ? -1.0f : 1.0f) * 1e-40f; /* fp32 subnormals */
            e[64 + i] = i == 7 ? 1e5f : 0.01f * (float)(i - 16);
            e[96 + i] = 0.125f * ((float)(i % 8) + 0.5f) * (t == VKMHA_QUANT_Q8 ? 1.0f : 8.0f);
            e[128 + i] = 0.5f;
        }
        /* Row 3: a group whose largest |x| makes the step exactly 1/8 (Q8:
         * 127/8) or 1 (Q4Z: 15, with lo = 0): the others lie on half steps. */
        e[96] = t == VKMHA_QUANT_Q8 ? 127.0f / 8.0f : 15.0f;
        vkmha_quant_layout l;
        uint8_t q[1024];
        bool ok = !vkmha_quant_layout_of(ctx, &d, &l) && l.bytes <= sizeof q &&
                  !vkmha_quantize(ctx, &d, VKMHA_DTYPE_F32, e, q, sizeof q) &&
                  !vkmha_dequantize(ctx, &d, q, sizeof q, VKMHA_DTYPE_F32, y);
        bool zeros = ok, under = ok, far = ok, even = ok, equal = ok;
        for (int i = 0; i < 32 && ok; i++) {
            zeros = zeros && y[i] == 0.0f;
            under = under && y[32 + i] == 0.0f;
            far = far && (i == 7 ? fabsf(y[64 + i] - 1e5f) <= 0.5f * scale_at(q, &l, &d, 2, 0)
                                 : fabsf(y[64 + i]) <= 0.5f * scale_at(q, &l, &d, 2, 0));
            /* Half steps go to the even code: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, ... */
            const float step = t == VKMHA_QUANT_Q8 ? 0.125f : 1.0f, k = (float)(i % 8);
            const float even_value = step * (k + 0.5f - (fmodf(k, 2.0f) == 0 ? 0.5f : -0.5f));
            even = even && (i == 0 || y[96 + i] == even_value);
            equal = equal && fabsf(y[128 + i] - 0.5f) <= 0.5f * scale_at(q, &l, &d, 4, 0);
        }
        const float zeros_scale = t == VKMHA_QUANT_Q8
                                      ? 0.0f
                                      : vkmha__half_to_float(vkmha__float_to_half(2.0f / 15.0f));
        ok = ok && scale_at(q, &l, &d, 0, 0) == zeros_scale && scale_at(q, &l, &d, 1, 0) == 0.0f;
        t_report(ok && zeros && under && far && even && equal,
                 "%s %s edge groups: zeros stay zeros (scale %s), an underflowing scale is 0 "
                 "and decodes to zeros, a far value keeps the group within its step, half "
                 "steps round to even, an all-equal group decodes near its value",
                 be, type_names[t], t == VKMHA_QUANT_Q8 ? "0" : "2/15: lo -1, hi 1");
    }

    /* Dequantize into F16 and BF16: the F32 values rounded to nearest even. */
    {
        const vkmha_quant_desc d = {.type = VKMHA_QUANT_Q4Z, .group_size = 64, .rows = ROWS,
                                    .cols = COLS};
        vkmha_quant_layout l;
        vkmha_quant_layout_of(ctx, &d, &l);
        uint8_t *q = malloc(l.bytes);
        float *y = t_alloc(ROWS * COLS);
        uint16_t *h = malloc(ROWS * COLS * 2), *b = malloc(ROWS * COLS * 2);
        bool ok = !vkmha_quantize(ctx, &d, VKMHA_DTYPE_F32, x, q, l.bytes) &&
                  !vkmha_dequantize(ctx, &d, q, l.bytes, VKMHA_DTYPE_F32, y) &&
                  !vkmha_dequantize(ctx, &d, q, l.bytes, VKMHA_DTYPE_F16, h) &&
                  !vkmha_dequantize(ctx, &d, q, l.bytes, VKMHA_DTYPE_BF16, b);
        for (int i = 0; i < ROWS * COLS && ok; i++)
            ok = h[i] == vkmha__float_to_half(y[i]) && b[i] == vkmha__float_to_bf16(y[i]);
        t_report(ok, "%s: dequantize into F16 and BF16 rounds the F32 values", be);
        /* F16 and BF16 sources: their values, widened exactly. */
        float *xs = t_alloc(ROWS * COLS);
        uint8_t *q2 = malloc(l.bytes);
        ok = true;
        for (uint32_t dt = VKMHA_DTYPE_F16; dt <= VKMHA_DTYPE_BF16 && ok; dt++) {
            vkmha__from_f32(dt, x, ROWS * COLS, h);
            vkmha__to_f32(dt, h, ROWS * COLS, xs);
            ok = !vkmha_quantize(ctx, &d, dt, h, q, l.bytes) &&
                 !vkmha_quantize(ctx, &d, VKMHA_DTYPE_F32, xs, q2, l.bytes) &&
                 memcmp(q, q2, l.bytes) == 0;
        }
        t_report(ok, "%s: F16 and BF16 sources quantize as their values in F32", be);
        free(q), free(q2), free(y), free(h), free(b), free(xs);
    }

    /* Bad arguments: each refused, naming it; the context works after. */
    const vkmha_quant_desc good = {.type = VKMHA_QUANT_Q4, .group_size = 32, .rows = 2,
                                   .cols = 64};
    vkmha_quant_layout l;
    uint8_t q[256], small[8];
    float y[128];
    static const struct {
        const char *arg;
        vkmha_quant_desc d;
    } bad[] = {
        {"type", {.type = 0, .group_size = 32, .rows = 2, .cols = 64}},
        {"type", {.type = 4, .group_size = 32, .rows = 2, .cols = 64}},
        {"group_size", {.type = VKMHA_QUANT_Q8, .group_size = 16, .rows = 2, .cols = 64}},
        {"rows", {.type = VKMHA_QUANT_Q8, .group_size = 32, .rows = 0, .cols = 64}},
        {"cols", {.type = VKMHA_QUANT_Q8, .group_size = 32, .rows = 2, .cols = 0}},
        {"cols", {.type = VKMHA_QUANT_Q8, .group_size = 64, .rows = 2, .cols = 96}},
        /* rows * cols near 2^64: no host array holds it */
        {"rows", {.type = VKMHA_QUANT_Q8, .group_size = 32, .rows = 0xffffffffu,
                  .cols = 0xffffffe0u}},
    };
    bool ok = true;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ok = refused(vkmha_quant_layout_of(ctx, &bad[i].d, &l), ctx, "vkmha_quant_layout_of",
                     bad[i].arg, NULL, be) &&
             refused(vkmha_quantize(ctx, &bad[i].d, VKMHA_DTYPE_F32, x, q, sizeof q), ctx,
                     "vkmha_quantize", bad[i].arg, NULL, be) &&
             refused(vkmha_dequantize(ctx, &bad[i].d, q, sizeof q, VKMHA_DTYPE_F32, y), ctx,
                     "vkmha_dequantize", bad[i].arg, NULL, be) &&
             ok;
    ok = refused(vkmha_quant_layout_of(ctx, NULL, &l), ctx, "vkmha_quant_layout_of", "desc",
                 NULL, be) &&
         refused(vkmha_quant_layout_of(ctx, &good, NULL), ctx, "vkmha_quant_layout_of", "out",
                 NULL, be) &&
         refused(vkmha_quantize(ctx, &good, VKMHA_DTYPE_F32, NULL, q, sizeof q), ctx,
                 "vkmha_quantize", "src", NULL, be) &&
         refused(vkmha_quantize(ctx, &good, VKMHA_DTYPE_F32, x, NULL, sizeof q), ctx,
                 "vkmha_quantize", "dst", NULL, be) &&
         refused(vkmha_quantize(ctx, &good, VKMHA_DTYPE_U8, x, q, sizeof q), ctx,
                 "vkmha_quantize", "src_dtype", NULL, be) &&
         refused(vkmha_quantize(ctx, &good, VKMHA_DTYPE_F32, x, small, sizeof small), ctx,
                 "vkmha_quantize", "dst_bytes", NULL, be) &&
         refused(vkmha_dequantize(ctx, &good, small, sizeof small, VKMHA_DTYPE_F32, y), ctx,
                 "vkmha_dequantize", "src_bytes", NULL, be) &&
         refused(vkmha_dequantize(ctx, &good, q, sizeof q, 7, y), ctx, "vkmha_dequantize",
                 "dst_dtype", NULL, be) &&
         ok;
    t_report(ok && vkmha_quantize(NULL, &good, VKMHA_DTYPE_F32, x, q, sizeof q) ==
                       VKMHA_ERROR_INVALID_ARGUMENT,
             "%s: bad arguments refused naming the argument (NULL context: the status)", be);

    /* Unquantizable groups: NaN, +-Inf, a scale past fp16's largest. The
     * message names the row and the group. */
    static const struct {
        uint32_t type;
        float v;
        const char *why;
    } bad_groups[] = {
        {VKMHA_QUANT_Q8, NAN, "NaN"},
        {VKMHA_QUANT_Q4, INFINITY, "infinity"},
        {VKMHA_QUANT_Q4Z, -INFINITY, "infinity"},
        {VKMHA_QUANT_Q8, 1e7f, "65504"},  /* 1e7 / 127 > 65504 */
        {VKMHA_QUANT_Q4, 1e6f, "65504"},  /* 1e6 / 7 */
        {VKMHA_QUANT_Q4Z, 2e6f, "65504"}, /* (2e6 - 0) / 15 */
    };
    ok = true;
    for (size_t i = 0; i < sizeof bad_groups / sizeof bad_groups[0]; i++) {
        const vkmha_quant_desc d = {.type = bad_groups[i].type, .group_size = 32, .rows = 2,
                                    .cols = 64};
        float v[128];
        memcpy(v, x, sizeof v);
        v[64 + 32 + 5] = bad_groups[i].v; /* row 1, group 1 */
        ok = refused_with(vkmha_quantize(ctx, &d, VKMHA_DTYPE_F32, v, q, sizeof q), ctx,
                          "vkmha_quantize", "src", bad_groups[i].why, "row 1, group 1", be) &&
             ok;
    }
    /* Bytes written by hand: a zero point above 15, a scale that is Inf. */
    const vkmha_quant_desc dz = {.type = VKMHA_QUANT_Q4Z, .group_size = 32, .rows = 2,
                                 .cols = 64};
    vkmha_quant_layout_of(ctx, &dz, &l);
    ok = ok && !vkmha_quantize(ctx, &dz, VKMHA_DTYPE_F32, x, q, sizeof q);
    q[l.zeros_offset + 3] = 16; /* row 1, group 1 */
    ok = ok && refused(vkmha_dequantize(ctx, &dz, q, sizeof q, VKMHA_DTYPE_F32, y), ctx,
                       "vkmha_dequantize", "src", "row 1, group 1: the zero point", be);
    q[l.zeros_offset + 3] = 0;
    q[l.scales_offset + 2 * 2] = 0x00, q[l.scales_offset + 2 * 2 + 1] = 0x7c; /* +Inf */
    ok = ok && refused(vkmha_dequantize(ctx, &dz, q, sizeof q, VKMHA_DTYPE_F32, y), ctx,
                       "vkmha_dequantize", "src", "row 1, group 0: the scale", be);
    t_report(ok, "%s: NaN, +-Inf and scales past fp16 refused naming the row and group; so "
                 "are a zero point above 15 and an Inf scale written by hand", be);
    free(x);
}

int main(void)
{
    t_rng rng = {0x9a47};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    vkmha_context *gpu = t_context(VKMHA_BACKEND_VULKAN, 0);
    backend_cases(ref, "reference", &rng);
    backend_cases(gpu, "vulkan", &rng);
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
    vkmha_context_destroy(ref);
    return t_finish();
}
