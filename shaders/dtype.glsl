// fp16 and bf16 <-> fp32 for the F16 / BF16 buffers (shaders/typed.glsl
// reads and writes them through these).
//
// Integer bit manipulation only, so that every driver gives the same bits:
// the narrowing functions give the bits of vkmha__float_to_half /
// vkmha__float_to_bf16 of src/half.c (the same steps, selected instead of
// branched; change both together: tests/test_half checks the C,
// tests/test_dtype the shaders against it). They round to nearest even, produce fp16 subnormals, saturate a
// finite value that would round beyond the largest finite value to +-65504
// (fp16 0x7bff) or +-3.3895314e38 (bf16 0x7f7f), keep +-Inf, and quiet NaN
// (top mantissa bit set, sign and high payload bits kept). The widening
// functions are exact, fp16 subnormals included (built from the bits, not
// with unpackHalf2x16, which some drivers flush to zero). A driver that
// flushes fp32 denormals in arithmetic (no shaderDenormPreserveFloat32)
// still flushes the bf16 values below 2^-126 wherever they are computed with.
//
// Self-contained: GLSL 450, no extension. Results are in the low 16 bits;
// the widening functions read only the low 16 bits of their argument.

#ifndef VKMHA_DTYPE_GLSL
#define VKMHA_DTYPE_GLSL

// The 16-bit Inf or NaN for fp32 magnitude bits a >= 0x7f800000, in a
// format whose Inf is `inf` and whose mantissa is fp32's top 23 - drop bits:
// a NaN gets the top mantissa bit (quiet) and keeps its payload's high bits.
uint dtype_nonfinite(uint a, uint drop, uint inf)
{
    uint mant = (1u << (23u - drop)) - 1u;
    return a == 0x7f800000u ? inf : inf | ((mant + 1u) >> 1) | ((a >> drop) & mant);
}

// The bits above `shift` (1 to 31) of a (a nonnegative magnitude's bits),
// rounded to nearest, ties to even, and at most max (saturation); a carry out
// of the mantissa goes into the exponent.
uint dtype_round_shift(uint a, uint shift, uint max_)
{
    uint kept = a >> shift, rest = a & ((1u << shift) - 1u), tie = 1u << (shift - 1u);
    uint r = kept + ((rest > tie || (rest == tie && (kept & 1u) != 0u)) ? 1u : 0u);
    return r < max_ ? r : max_;
}

// The narrowings and the fp16 widening compute every case and select one,
// without branches: in a shader's inner loops a per-element branch chain
// costs the most on SIMD drivers (on lavapipe an fp16 store through the
// if / else form took as long as the 512-term dot product before it).

uint f32_to_f16_bits(float f)
{
    uint bits = floatBitsToUint(f);
    uint sign = (bits >> 16) & 0x8000u, a = bits & 0x7fffffffu;
    // Normal in fp16 (|f| >= 2^-14): rebias the exponent (127 -> 15), round
    // off 13 mantissa bits; beyond 65504 saturates.
    uint normal = dtype_round_shift(max(a, 0x38800000u) - (112u << 23), 13u, 0x7bffu);
    // Subnormal in fp16 (|f| < 2^-14): the value in units of 2^-24 is the
    // full mantissa (implicit bit set) shifted right by 126 - exponent (14
    // to 24; more, capped at 31, rounds to zero, as |f| < 2^-25 must).
    // Rounding up from 0x3ff gives 0x400, the smallest normal.
    uint e = min(a >> 23, 112u);
    uint sub = dtype_round_shift((a & 0x7fffffu) | 0x800000u, min(126u - e, 31u), 0x7bffu);
    uint h = a >= 0x7f800000u ? dtype_nonfinite(a, 13u, 0x7c00u)
             : a >= 0x38800000u ? normal : sub;
    return sign | h;
}

uint f32_to_bf16_bits(float f)
{
    uint bits = floatBitsToUint(f);
    uint sign = (bits >> 16) & 0x8000u, a = bits & 0x7fffffffu;
    // Finite: fp32's exponent (subnormals included), the low 16 bits rounded
    // off; beyond 0x7f7f (3.3895314e38) saturates.
    uint h = a >= 0x7f800000u ? dtype_nonfinite(a, 16u, 0x7f80u)
                              : dtype_round_shift(a, 16u, 0x7f7fu);
    return sign | h;
}

float f16_bits_to_f32(uint h)
{
    uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint nonfinite = sign | 0x7f800000u | (m << 13); // Inf, NaN (payload kept)
    uint normal = sign | ((e + 112u) << 23) | (m << 13);
    // Subnormal: m * 2^-24 = 1.f * 2^(p - 24) with p the top bit of m (0 to
    // 9), a normal fp32 with biased exponent p + 103; m = 0 is +-0.
    uint p = uint(max(findMSB(m), 0));
    uint sub = m == 0u ? sign : sign | ((p + 103u) << 23) | ((m << (23u - p)) & 0x7fffffu);
    return uintBitsToFloat(e == 0x1fu ? nonfinite : e != 0u ? normal : sub);
}

float bf16_bits_to_f32(uint h)
{
    return uintBitsToFloat((h & 0xffffu) << 16);
}

// The four int8 values of a word (byte 0 first), sign-extended: the Q8
// codes of a quantized weight group or a Q8 KV cache row.
vec4 i8x4_to_vec4(uint w)
{
    return vec4(ivec4(int(w << 24), int(w << 16), int(w << 8), int(w)) >> 24);
}

#endif // VKMHA_DTYPE_GLSL
