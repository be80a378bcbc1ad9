/* 16-bit floats <-> fp32: safetensors' F16 and BF16 tensors and the F16 /
 * BF16 host arrays of the ops. The narrowing functions are mirrored line for
 * line by shaders/dtype.glsl (f32_to_f16_bits, f32_to_bf16_bits): change
 * both together. */
#include "half.h"

#include <string.h>

#include "vkmha.h"

float vkmha__half_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    uint32_t bits;
    if (e == 0x1f) {
        bits = sign | 0x7f800000u | (m << 13); /* Inf, NaN (payload kept) */
    } else if (e != 0) {
        bits = sign | ((e + 112) << 23) | (m << 13);
    } else {
        /* Zero or subnormal: m * 2^-24, exact in float. */
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float vkmha__bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The 16-bit Inf or NaN for fp32 magnitude bits a >= 0x7f800000, in a
 * format whose Inf is `inf` and whose mantissa is fp32's top 23 - drop bits:
 * a NaN gets the top mantissa bit (quiet) and keeps its payload's high bits. */
static uint32_t nonfinite(uint32_t a, uint32_t drop, uint32_t inf)
{
    const uint32_t mant = (1u << (23 - drop)) - 1;
    return a == 0x7f800000 ? inf : inf | ((mant + 1) >> 1) | ((a >> drop) & mant);
}

/* The bits above `shift` of a (a nonnegative magnitude's bits), rounded to
 * nearest, ties to even, and at most max (saturation); a carry out of the
 * mantissa goes into the exponent. */
static uint32_t round_shift(uint32_t a, uint32_t shift, uint32_t max)
{
    const uint32_t kept = a >> shift, rest = a & ((1u << shift) - 1), tie = 1u << (shift - 1);
    const uint32_t r = kept + (rest > tie || (rest == tie && (kept & 1)));
    return r < max ? r : max;
}

uint16_t vkmha__float_to_half(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    const uint32_t sign = (bits >> 16) & 0x8000, a = bits & 0x7fffffff;
    uint32_t h;
    if (a >= 0x7f800000) {
        h = nonfinite(a, 13, 0x7c00);
    } else if (a >= 0x38800000) {
        /* Normal in fp16 (|f| >= 2^-14): rebias the exponent (127 -> 15),
         * round off 13 mantissa bits; beyond 65504 saturates. */
        h = round_shift(a - (112u << 23), 13, 0x7bff);
    } else if (a >= 0x33000000) {
        /* Subnormal in fp16 (2^-25 <= |f| < 2^-14): the value in units of
         * 2^-24 is the full mantissa (implicit bit set) shifted right by
         * 126 - exponent (14 to 24). Rounding up from 0x3ff gives 0x400,
         * the smallest normal. */
        h = round_shift((a & 0x7fffff) | 0x800000, 126 - (a >> 23), 0x7bff);
    } else {
        h = 0; /* |f| < 2^-25 rounds to zero */
    }
    return (uint16_t)(sign | h);
}

uint16_t vkmha__float_to_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    const uint32_t sign = (bits >> 16) & 0x8000, a = bits & 0x7fffffff;
    /* Finite: fp32's exponent (subnormals included), the low 16 bits rounded
     * off; beyond 0x7f7f (3.3895314e38) saturates. */
    const uint32_t h = a >= 0x7f800000 ? nonfinite(a, 16, 0x7f80) : round_shift(a, 16, 0x7f7f);
    return (uint16_t)(sign | h);
}

size_t vkmha__dtype_size(uint32_t dtype)
{
    switch (dtype) {
    case VKMHA_DTYPE_F32:
        return 4;
    case VKMHA_DTYPE_U8:
        return 1;
    case VKMHA_DTYPE_F16:
    case VKMHA_DTYPE_BF16:
        return 2;
    default:
        return 0;
    }
}

void vkmha__to_f32(uint32_t dtype, const void *src, size_t n, float *dst)
{
    const unsigned char *p = src;
    if (dtype == VKMHA_DTYPE_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, sizeof h);
        dst[i] =
            dtype == VKMHA_DTYPE_F16 ? vkmha__half_to_float(h) : vkmha__bf16_to_float(h);
    }
}

void vkmha__from_f32(uint32_t dtype, const float *src, size_t n, void *dst)
{
    unsigned char *p = dst;
    if (dtype == VKMHA_DTYPE_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h = dtype == VKMHA_DTYPE_F16 ? vkmha__float_to_half(src[i])
                                              : vkmha__float_to_bf16(src[i]);
        memcpy(p + 2 * i, &h, sizeof h);
    }
}

void vkmha__convert(uint32_t from, const void *src, uint32_t to, void *dst, size_t n)
{
    float chunk[256];
    const size_t fs = vkmha__dtype_size(from), ts = vkmha__dtype_size(to);
    for (size_t i = 0; i < n; i += 256) {
        const size_t c = n - i < 256 ? n - i : 256;
        vkmha__to_f32(from, (const uint8_t *)src + i * fs, c, chunk);
        vkmha__from_f32(to, chunk, c, (uint8_t *)dst + i * ts);
    }
}
