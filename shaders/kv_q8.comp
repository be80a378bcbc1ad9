#version 450
// A Q8 KV cache's rows (include/vkmha.h, vkmha_kv_cache_desc.quant): the
// head copy of shaders/heads.comp (the same push constants and bindings:
// split and merge, element strides per batch entry, head and row) where x
// or y is a U8 view of such rows, one invocation per row of head_dim
// elements (src/vk_heads.c):
//   y U8: the append, each row of x (fp32, fp16 or bf16) quantized;
//   x U8: the rows dequantized into y, the unfused attention's fp32 copy.
// A row is R = 4 + head_dim rounded up to 4 bytes: bytes 0-1 its fp16 scale
// s, bytes 2-3 zero, the int8 codes q from byte 4, zeros after; it stands
// for s * q. Quantizing is src/quant.c's vkmha__kv_q8_quantize, step for
// step in fp32: s = fp16(max|x| / 127) (rounded to nearest even,
// saturating at 65504), q = clamp(roundEven(x / s), -127, 127); s = 0
// stores q = 0; a row holding NaN or Inf stores the scale 0x7e00 (NaN) and
// q = 0. Rows start on words (the host requires 4-aligned tensors and row
// strides of R, a multiple of 4) and belong to one invocation each: whole
// words are written, no atomics. Built with -DROPE=1, the append rotates
// each row before quantizing it (shaders/rope.glsl: a Q8 cache's keys).

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

#include "heads_push.glsl"

TYPED_IN(0, 0, x)
TYPED_OUT(1, 1, y)

#include "kv_q8.glsl"
KV_Q8_READ(0, x)
#include "rope.glsl"

void main()
{
    const uint r = linear_group(p.group_base) * WG + gl_LocalInvocationIndex; // row of y
    if (r >= p.total / p.head_dim)
        return;
    uint b, h, l;
    if (p.split != 0u) { // r = (b * heads + h) * len + l
        l = r % p.len;
        const uint bh = r / p.len;
        h = bh % p.heads;
        b = bh / p.heads;
    } else {             // r = (b * len + l) * heads + h
        h = r % p.heads;
        const uint bl = r / p.heads;
        l = bl % p.len;
        b = bl / p.len;
    }
    const uint n = p.head_dim;
    const uint src = b * p.x_sb + h * p.x_sh + l * p.x_sl,
               dst = b * p.y_sb + h * p.y_sh + l * p.y_sl;
    if (DTYPE(0) == DT_U8) { // dequantize
        for (uint c = 0; c < n; c += 4u) {
            const vec4 v = kv_q8_x(src, c, n);
            for (uint k = 0; k < 4u && c + k < n; k++)
                st_y(dst + c + k, v[k]);
        }
        return;
    }
#ifdef ROPE
#define LD_ROW(c) rope_ld_x(src, b, l, c)
#else
#define LD_ROW(c) ld_x(src + (c))
#endif
    // Quantize: the row's largest magnitude, and whether it holds NaN or
    // Inf (an integer test: no compiler may assume them away).
    float amax = 0.0;
    bool finite = true;
    for (uint c = 0; c < n; c++) {
        const float v = LD_ROW(c);
        finite = finite && (floatBitsToUint(v) & 0x7f800000u) != 0x7f800000u;
        amax = max(amax, abs(v));
    }
    const uint sbits = finite ? f32_to_f16_bits(amax / 127.0) : 0x7e00u;
    const float s = finite ? f16_bits_to_f32(sbits) : 0.0;
    const uint w0 = (dst + MISALIGN_BYTES(1)) >> 2;
    y_w[w0] = sbits;
    for (uint c = 0; c < n; c += 4u) {
        uint word = 0u;
        for (uint k = 0; k < 4u; k++) {
            const float q =
                c + k < n && s != 0.0 ? clamp(roundEven(LD_ROW(c + k) / s), -127.0, 127.0)
                                      : 0.0;
            word |= (uint(int(q)) & 0xffu) << (8u * k);
        }
        y_w[w0 + 1u + c / 4u] = word;
    }
}
