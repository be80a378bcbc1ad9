// fp16 and bf16 <-> fp32 conversions, in integer arithmetic so that every
// driver rounds the same way, bit for bit as src/half.c (the reference
// backend's): round to nearest even; a finite value that would round beyond
// the format's largest finite value saturates to it (fp16 +-65504, bf16
// +-3.3895e38) instead of becoming Inf; Inf stays Inf; NaN stays NaN
// (quieted, sign and high payload bits kept). The 16-bit value is in the low
// bits of a uint.

uint f32_to_f16_bits(float f)
{
    const uint x = floatBitsToUint(f);
    const uint sign = (x >> 16) & 0x8000u;
    const uint ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) // NaN
        return sign | 0x7e00u | ((ax >> 13) & 0x3ffu);
    if (ax == 0x7f800000u)
        return sign | 0x7c00u;
    if (ax >= 0x477ff000u) // rounds to 65536 or beyond: saturate
        return sign | 0x7bffu;
    if (ax >= 0x38800000u) { // normal in fp16 (>= 2^-14): rebias, round 13 bits away
        uint h = (ax - 0x38000000u) >> 13;
        const uint rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u))
            h++;
        return sign | h;
    }
    if (ax <= 0x33000000u) // at most 2^-25: rounds to zero (2^-25 is a tie, to even)
        return sign;
    // Subnormal in fp16: m * 2^(e - 150) in units of 2^-24 is m >> (126 - e).
    const uint e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint h = m >> shift;
    const uint rem = m & ((1u << shift) - 1u), half_ulp = 1u << (shift - 1u);
    if (rem > half_ulp || (rem == half_ulp && (h & 1u) != 0u))
        h++;
    return sign | h;
}

uint f32_to_bf16_bits(float f)
{
    const uint x = floatBitsToUint(f);
    const uint ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) // NaN
        return (x >> 16) | 0x40u;
    if (ax == 0x7f800000u)
        return x >> 16;
    if (ax >= 0x7f7f8000u) // rounds beyond 0x7f7f: saturate
        return ((x >> 16) & 0x8000u) | 0x7f7fu;
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

float f16_bits_to_f32(uint h)
{
    const uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu)
        return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
    if (e != 0u)
        return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
    const float v = float(m) * 5.9604644775390625e-8; // m * 2^-24, exact
    return sign != 0u ? -v : v;
}

float bf16_bits_to_f32(uint h)
{
    return uintBitsToFloat((h & 0xffffu) << 16);
}
