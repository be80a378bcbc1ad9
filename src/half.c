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
