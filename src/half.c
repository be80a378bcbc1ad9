/* 16-bit floats to fp32 (safetensors' F16 and BF16 tensors). */
#include "half.h"

#include <string.h>

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

/* Provisional: replaced by the helper's version (branch half). */
uint16_t vkmha__float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax == 0x7f800000u)
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x477ff000u)
        return (uint16_t)(sign | 0x7bffu);
    if (ax >= 0x38800000u) {
        uint32_t h = (ax - 0x38000000u) >> 13, rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    if (ax <= 0x33000000u)
        return (uint16_t)sign;
    const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half_ulp = 1u << (shift - 1u);
    if (rem > half_ulp || (rem == half_ulp && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

uint16_t vkmha__float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    if (ax == 0x7f800000u)
        return (uint16_t)(x >> 16);
    if (ax >= 0x7f7f8000u)
        return (uint16_t)(((x >> 16) & 0x8000u) | 0x7f7fu);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

size_t vkmha__dtype_size(uint32_t dtype)
{
    return dtype == 0 ? 4 : dtype == 1 ? 1 : dtype == 2 || dtype == 3 ? 2 : 0;
}

void vkmha__to_f32(uint32_t dtype, const void *src, size_t n, float *dst)
{
    const uint16_t *h = src;
    if (dtype == 0) {
        memcpy(dst, src, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++)
        dst[i] = dtype == 2 ? vkmha__half_to_float(h[i]) : vkmha__bf16_to_float(h[i]);
}

void vkmha__from_f32(uint32_t dtype, const float *src, size_t n, void *dst)
{
    uint16_t *h = dst;
    if (dtype == 0) {
        memcpy(dst, src, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++)
        h[i] = dtype == 2 ? vkmha__float_to_half(src[i]) : vkmha__float_to_bf16(src[i]);
}
