/*
 * The fp16 / bf16 conversions of src/half.c (linked in), which the reference
 * backend uses for F16 / BF16 host arrays and shaders/dtype.glsl mirrors.
 * Every check is exact (bit for bit):
 *   - widening: every one of the 65536 fp16 and 65536 bf16 patterns against
 *     its value computed in double from the fields (ldexp), NaN payloads kept;
 *   - round trip: 16 bits -> fp32 -> 16 bits gives the same bits, and a NaN
 *     comes back with its sign and payload and the quiet bit set;
 *   - narrowing against an oracle: the nearest 16-bit value found by binary
 *     search in a table of every finite value (as doubles, plus the next
 *     power of two as if the exponent went on), distances compared in double,
 *     ties to the even pattern, a result beyond the largest finite value
 *     saturated; over every fp32 exponent from below fp16's smallest
 *     subnormal to above its range (bf16: every exponent), every pattern of
 *     the mantissa bits the narrowest format keeps, and low bits that are
 *     exactly half an ulp, one fp32 ulp either side of it, zero, one, all
 *     ones and one random value; both signs; then random fp32 patterns from
 *     the whole range, NaN and Inf included;
 *   - the hand-picked values of issue 12 (65504, 65520, 2^-24, 2^-25, ...);
 *   - vkmha__dtype_size and the array forms vkmha__to_f32 / vkmha__from_f32
 *     on unaligned 16-bit arrays.
 * About 2 million conversions: well under a second, also under ASan.
 */
#include "../src/half.h"

#include <float.h>

#include "util.h"

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- the formats, described by their fields --------------------------------- */

typedef struct format {
    const char *name;
    int mant_bits;     /* stored mantissa bits: fp16 10, bf16 7 */
    int bias;          /* fp16 15, bf16 127 */
    uint32_t exp_mask; /* all-ones exponent field: fp16 0x7c00, bf16 0x7f80 */
    uint16_t (*narrow)(float);
    float (*widen)(uint16_t);
    double table[0x7f81]; /* value of each pattern 0 .. exp_mask (see oracle) */
} format;

static format fp16 = {"fp16", 10, 15, 0x7c00, vkmha__float_to_half, vkmha__half_to_float, {0}};
static format bf16 = {"bf16", 7, 127, 0x7f80, vkmha__float_to_bf16, vkmha__bf16_to_float, {0}};

/* The value of a finite nonnegative pattern from its fields, in double
 * (exact): subnormal m * 2^(1 - bias - mant), normal (2^mant + m) *
 * 2^(e - bias - mant). The all-ones exponent with m = 0 gives the next power
 * of two, the value the format would have next if its exponent went on. */
static double field_value(const format *fmt, uint32_t h)
{
    const uint32_t e = h >> fmt->mant_bits, m = h & ((1u << fmt->mant_bits) - 1);
    if (e == 0)
        return ldexp((double)m, 1 - fmt->bias - fmt->mant_bits);
    return ldexp((double)((1u << fmt->mant_bits) + m), (int)e - fmt->bias - fmt->mant_bits);
}

static void format_init(format *fmt)
{
    for (uint32_t h = 0; h <= fmt->exp_mask; h++)
        fmt->table[h] = field_value(fmt, h);
}

/* The expected narrowing of x: for NaN the quiet NaN with x's sign and the
 * payload's high bits; for Inf Inf; else the nearest value in the table. */
static uint16_t oracle(const format *fmt, float x)
{
    const uint32_t bits = f2u(x), sign = (bits >> 16) & 0x8000;
    const int drop = 23 - fmt->mant_bits;
    if (isnan(x)) {
        const uint32_t quiet = 1u << (fmt->mant_bits - 1);
        return (uint16_t)(sign | fmt->exp_mask | quiet |
                          ((bits & 0x7fffff) >> drop));
    }
    if (isinf(x))
        return (uint16_t)(sign | fmt->exp_mask);
    const double a = fabs((double)x);
    /* Largest lo with table[lo] <= a (table[0] = 0 <= a). */
    uint32_t lo = 0, hi = fmt->exp_mask + 1;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (fmt->table[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    uint32_t h = lo;
    if (lo < fmt->exp_mask && fmt->table[lo] != a) {
        const double below = a - fmt->table[lo], above = fmt->table[lo + 1] - a;
        if (above < below || (above == below && (lo & 1)))
            h = lo + 1;
    }
    if (h >= fmt->exp_mask)
        h = fmt->exp_mask - 1; /* beyond the largest finite value: saturate */
    return (uint16_t)(sign | h);
}

/* ---- widening and round trips --------------------------------------------------- */

static void case_all_patterns(const format *fmt)
{
    int bad_widen = 0, bad_trip = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        const uint32_t sign = h & 0x8000, a = h & 0x7fff;
        const uint32_t m = a & ((1u << fmt->mant_bits) - 1);
        const float f = fmt->widen((uint16_t)h);
        bool ok;
        if (a < fmt->exp_mask) {
            double want = sign ? -field_value(fmt, a) : field_value(fmt, a);
            ok = (double)f == want && !signbit(f) == !sign;
        } else {
            /* Inf, NaN: fp32's all-ones exponent, the payload on top. */
            ok = f2u(f) == ((sign << 16) | 0x7f800000u | (m << (23 - fmt->mant_bits)));
        }
        if (!ok && bad_widen++ < 5)
            t_diag("%s 0x%04x widened to %a (0x%08x)", fmt->name, h, (double)f, f2u(f));

        const uint32_t quiet = 1u << (fmt->mant_bits - 1);
        const bool nan = a > fmt->exp_mask;
        const uint32_t want = nan ? h | quiet : h, got = fmt->narrow(f);
        if (got != want && bad_trip++ < 5)
            t_diag("%s 0x%04x -> %a -> 0x%04x, expected 0x%04x", fmt->name, h, (double)f, got,
                   want);
    }
    t_report(bad_widen == 0, "%s: all 65536 patterns widen exactly (%d wrong)", fmt->name,
             bad_widen);
    t_report(bad_trip == 0, "%s: all 65536 patterns round-trip through fp32 (%d wrong)",
             fmt->name, bad_trip);
}

/* ---- narrowing against the oracle ----------------------------------------------- */

typedef struct sweep {
    const format *fmt;
    long n, bad;
} sweep;

static void sweep_one(sweep *s, float x)
{
    const uint16_t got = s->fmt->narrow(x), want = oracle(s->fmt, x);
    s->n++;
    if (got != want && s->bad++ < 8)
        t_diag("%s(%a = 0x%08x) = 0x%04x, expected 0x%04x", s->fmt->name, (double)x, f2u(x),
               got, want);
}

/* Every fp32 exponent in [e_lo, e_hi] (biased), every `step`th pattern of
 * the mantissa bits the format's normals keep, and low bits at every
 * rounding point that matters: at step 1, the ties of the subnormals (which
 * keep fewer bits) and their neighbours are in the set too, since every top
 * pattern is taken with low bits 0, 1 and all ones. */
static void case_sweep(const format *fmt, uint32_t e_lo, uint32_t e_hi, uint32_t step,
                       t_rng *r)
{
    sweep s = {fmt, 0, 0};
    const int drop = 23 - fmt->mant_bits;
    const uint32_t half = 1u << (drop - 1), low_mask = (1u << drop) - 1;
    for (uint32_t sign = 0; sign <= 1; sign++) {
        for (uint32_t e = e_lo; e <= e_hi; e++) {
            for (uint32_t top = 0; top < (1u << fmt->mant_bits); top += step) {
                const uint32_t lows[] = {0,        1,        half - 1,
                                         half,     half + 1, low_mask - 1,
                                         low_mask, (uint32_t)t_next(r) & low_mask};
                for (size_t i = 0; i < sizeof lows / sizeof lows[0]; i++)
                    sweep_one(&s, u2f(sign << 31 | e << 23 | top << drop | lows[i]));
            }
        }
    }
    t_report(s.bad == 0, "%s: fp32 exponents %u..%u, kept mantissas in steps of %u, ties and "
             "neighbours, both signs, match the oracle (%ld values, %ld wrong)",
             fmt->name, e_lo, e_hi, step, s.n, s.bad);
}

static void case_random(const format *fmt, t_rng *r)
{
    sweep s = {fmt, 0, 0};
    for (int i = 0; i < 300000; i++)
        sweep_one(&s, u2f((uint32_t)t_next(r)));
    /* NaNs with random payloads (few among random patterns). */
    for (int i = 0; i < 1000; i++)
        sweep_one(&s, u2f(0x7f800001u | ((uint32_t)t_next(r) & 0x807fffffu)));
    t_report(s.bad == 0, "%s: random fp32 patterns match the oracle (%ld values, %ld wrong)",
             fmt->name, s.n, s.bad);
}

/* ---- hand-picked values ------------------------------------------------------------ */

static bool expect(const char *fmt_name, uint16_t (*narrow)(float), float x, uint16_t want,
                   const char *what)
{
    const uint16_t got = narrow(x);
    return t_report(got == want, "%s(%s = %a) = 0x%04x, expected 0x%04x", fmt_name, what,
                    (double)x, got, want);
}

static void case_explicit(void)
{
    uint16_t (*h)(float) = vkmha__float_to_half;
    uint16_t (*b)(float) = vkmha__float_to_bf16;
    expect("fp16", h, 65504.0f, 0x7bff, "65504, the largest");
    expect("fp16", h, 65519.99f, 0x7bff, "65519.99");
    expect("fp16", h, 65520.0f, 0x7bff, "65520, the tie above 65504: saturates");
    expect("fp16", h, 65536.0f, 0x7bff, "65536");
    expect("fp16", h, 1e30f, 0x7bff, "1e30");
    expect("fp16", h, -1e30f, 0xfbff, "-1e30");
    expect("fp16", h, FLT_MAX, 0x7bff, "FLT_MAX");
    expect("fp16", h, INFINITY, 0x7c00, "Inf");
    expect("fp16", h, -INFINITY, 0xfc00, "-Inf");
    expect("fp16", h, NAN, 0x7e00, "NaN");
    expect("fp16", h, -NAN, 0xfe00, "-NaN");
    expect("fp16", h, u2f(0x7f800001u), 0x7e00, "signalling NaN, low payload");
    expect("fp16", h, u2f(0xff802000u), 0xfe01, "signalling -NaN, high payload");
    expect("fp16", h, 0x1p-24f, 0x0001, "2^-24, the smallest subnormal");
    expect("fp16", h, 0x1p-25f, 0x0000, "2^-25, tie to 0");
    expect("fp16", h, -0x1p-25f, 0x8000, "-2^-25, tie to -0");
    expect("fp16", h, 0x1.000002p-25f, 0x0001, "just above 2^-25");
    expect("fp16", h, 3 * 0x1p-26f, 0x0001, "3*2^-26");
    expect("fp16", h, 3 * 0x1p-25f, 0x0002, "3*2^-25, tie to 2*2^-24");
    expect("fp16", h, 1023 * 0x1p-24f, 0x03ff, "the largest subnormal");
    expect("fp16", h, 1023.5f * 0x1p-24f, 0x0400, "the tie above the largest subnormal");
    expect("fp16", h, 0x1p-14f, 0x0400, "2^-14, the smallest normal");
    expect("fp16", h, 1.0f + 0x1p-11f, 0x3c00, "1 + 2^-11, tie to 1");
    expect("fp16", h, 1.0f + 3 * 0x1p-11f, 0x3c02, "1 + 3*2^-11, tie to even");
    expect("fp16", h, 1e-30f, 0x0000, "1e-30");
    expect("fp16", h, -1e-30f, 0x8000, "-1e-30");
    expect("fp16", h, 0x1p-149f, 0x0000, "the smallest fp32 subnormal");
    expect("fp16", h, -0.0f, 0x8000, "-0");
    expect("fp16", h, 0.0f, 0x0000, "0");

    expect("bf16", b, 0x1.fep127f, 0x7f7f, "3.3895314e38, the largest");
    expect("bf16", b, 0x1.ffp127f, 0x7f7f, "the tie above the largest: saturates");
    expect("bf16", b, FLT_MAX, 0x7f7f, "FLT_MAX");
    expect("bf16", b, -FLT_MAX, 0xff7f, "-FLT_MAX");
    expect("bf16", b, INFINITY, 0x7f80, "Inf");
    expect("bf16", b, -INFINITY, 0xff80, "-Inf");
    expect("bf16", b, NAN, 0x7fc0, "NaN");
    expect("bf16", b, u2f(0xff800001u), 0xffc0, "signalling -NaN, low payload");
    expect("bf16", b, 1.0f + 0x1p-8f, 0x3f80, "1 + 2^-8, tie to 1");
    expect("bf16", b, 1.0f + 3 * 0x1p-8f, 0x3f82, "1 + 3*2^-8, tie to even");
    expect("bf16", b, 0x1p-133f, 0x0001, "2^-133, the smallest bf16 subnormal");
    expect("bf16", b, 0x1p-134f, 0x0000, "2^-134, tie to 0");
    expect("bf16", b, 0x1.fep-127f, 0x0080, "fp32 subnormal rounding up to the smallest normal");
    expect("bf16", b, -0.0f, 0x8000, "-0");
}

/* ---- sizes and arrays ----------------------------------------------------------------- */

static void case_dtype_size(void)
{
    const size_t f32 = vkmha__dtype_size(VKMHA_DTYPE_F32), u8 = vkmha__dtype_size(VKMHA_DTYPE_U8);
    const size_t f16 = vkmha__dtype_size(VKMHA_DTYPE_F16);
    const size_t b16 = vkmha__dtype_size(VKMHA_DTYPE_BF16);
    const size_t bad = vkmha__dtype_size(4), huge = vkmha__dtype_size(0xffffffffu);
    t_report(f32 == 4 && u8 == 1 && f16 == 2 && b16 == 2 && bad == 0 && huge == 0,
             "dtype sizes: F32 %zu, U8 %zu, F16 %zu, BF16 %zu, 4: %zu, 0xffffffff: %zu", f32,
             u8, f16, b16, bad, huge);
}

/* Every pattern through the array forms, from and into an unaligned 16-bit
 * array (one byte into the buffer); element i must equal the scalar call. */
static void case_arrays(uint32_t dtype, const format *fmt, t_rng *r)
{
    enum { N = 0x10000 };
    unsigned char *buf = malloc(2 * N + 1), *out = malloc(2 * N + 1);
    float *f = malloc(N * sizeof *f), *g = malloc(N * sizeof *g);
    if (!buf || !out || !f || !g)
        exit(2);
    for (uint32_t i = 0; i < N; i++) {
        uint16_t h = (uint16_t)i;
        memcpy(buf + 1 + 2 * i, &h, 2);
    }
    vkmha__to_f32(dtype, buf + 1, N, f);
    int bad = 0;
    for (uint32_t i = 0; i < N; i++)
        bad += f2u(f[i]) != f2u(fmt->widen((uint16_t)i));
    t_report(bad == 0, "%s: vkmha__to_f32 on an unaligned array equals the scalar widening "
             "(%d wrong)", fmt->name, bad);

    /* Random fp32 values of every magnitude, NaN and Inf included. */
    for (uint32_t i = 0; i < N; i++)
        g[i] = u2f((uint32_t)t_next(r));
    vkmha__from_f32(dtype, g, N, out + 1);
    bad = 0;
    for (uint32_t i = 0; i < N; i++) {
        uint16_t h;
        memcpy(&h, out + 1 + 2 * i, 2);
        bad += h != fmt->narrow(g[i]);
    }
    t_report(bad == 0, "%s: vkmha__from_f32 into an unaligned array equals the scalar "
             "narrowing (%d wrong)", fmt->name, bad);
    free(buf), free(out), free(f), free(g);
}

static void case_arrays_f32(t_rng *r)
{
    enum { N = 1000 };
    float a[N], b[N], c[N];
    for (int i = 0; i < N; i++)
        a[i] = u2f((uint32_t)t_next(r)); /* NaN payloads too: copied as bits */
    vkmha__to_f32(VKMHA_DTYPE_F32, a, N, b);
    vkmha__from_f32(VKMHA_DTYPE_F32, b, N, c);
    t_report(memcmp(a, b, sizeof a) == 0 && memcmp(a, c, sizeof a) == 0,
             "F32: vkmha__to_f32 and vkmha__from_f32 copy the bits");
}

int main(void)
{
    t_rng r = {12};
    format_init(&fp16);
    format_init(&bf16);
    case_all_patterns(&fp16);
    case_all_patterns(&bf16);
    /* fp16: from 2^-28 (below half the smallest subnormal, 2^-25) to 2^17
     * (above 65504 and the tie at 65520); fp32 exponent 127 + k is 2^k. */
    case_sweep(&fp16, 127 - 28, 127 + 17, 1, &r);
    /* And the rest of fp32's exponents, where everything is 0 or saturates. */
    case_sweep(&fp16, 0, 127 - 29, 31, &r);
    case_sweep(&fp16, 127 + 18, 254, 31, &r);
    /* bf16 shares fp32's exponent: every one, subnormals and FLT_MAX included. */
    case_sweep(&bf16, 0, 254, 1, &r);
    case_random(&fp16, &r);
    case_random(&bf16, &r);
    case_explicit();
    case_dtype_size();
    case_arrays(VKMHA_DTYPE_F16, &fp16, &r);
    case_arrays(VKMHA_DTYPE_BF16, &bf16, &r);
    case_arrays_f32(&r);
    return t_finish();
}
