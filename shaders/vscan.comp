#version 450
// Which (batch entry, key/value head) has a large or non-finite element
// (NaN, Inf, or a magnitude of 2^64 or more) anywhere in its values or its
// keys, for the CPU-shaped fused kernel's skipping (shaders/flash_cpu.comp):
// with none among the values, the value rows it skips need no scan (their
// weights are exactly 0 and 0 * v adds nothing); with none among the keys,
// no score q . k of small enough queries can be NaN or Inf, so a -inf bias
// makes it -inf without the product. Over the head copy's push constants
// (shaders/heads_push.glsl, split layout: x_sb, x_sh, x_sl the rows'
// element strides, len the keys, heads the key/value heads, head_dim d_v or
// d_k); a (batch entry, head) with such an element sets word
// y_sb + y_sh * (b * heads + h) of y (zeroed by the host first) to 1.
// `texel` 1 (by runs): each (b, h)'s rows are one run of len * head_dim
// elements (x_sl = head_dim) from a multiple of 4 (the strides and head_dim
// multiples of 4, as the CPU-shaped kernel's always are), read as vec4s
// through x's texel view, VSCAN_VEC4S an invocation, consecutive lanes at
// consecutive vec4s (workgroups per (b, h): its vec4s over
// WG * VSCAN_VEC4S); 0: a row an invocation, element by element through the
// storage binding (on lavapipe a storage-buffer read is a loop over the
// lanes: 5-10 times slower); 2: a Q8 KV cache's rows (x_s* in bytes), a
// row an invocation: its elements s * q (int8 codes q) are NaN or Inf
// exactly where its fp16 scale s is (|s q| <= 65504 * 128 otherwise), so
// only the scale, the low half of the row's first word, is read.
// Every key of the binding is read, also past a KV cache entry's length: a
// flag set there only costs the skipping it would have allowed.

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

#include "heads_push.glsl"

TYPED_IN(0, 0, x)
layout(binding = 3) uniform TEXEL_BUFFER x_t; // x's vec4 view (shaders/typed.glsl)
layout(binding = 1) buffer Flags { uint bad[]; };

void main()
{
    const uint g = linear_group(p.group_base), lane = gl_LocalInvocationIndex;
    const uint pairs = p.total / (p.len * p.head_dim); // (b, h)
    // The largest magnitude read, as bits (NaN's above Inf's above any
    // finite one's).
    uint top = 0u, bh;
    if (p.texel == 1u) {
        const uint n4 = p.len * p.head_dim / 4u;
        const uint per = (n4 + WG * VSCAN_VEC4S - 1u) / (WG * VSCAN_VEC4S);
        bh = g / per;
        if (bh >= pairs)
            return;
        const uint base4 = ((bh / p.heads) * p.x_sb + (bh % p.heads) * p.x_sh) / 4u;
        const uint first = (g % per) * WG * VSCAN_VEC4S + lane;
        for (uint i = 0u; i < VSCAN_VEC4S; i++) {
            const uvec4 bits =
                floatBitsToUint(TEXEL_FETCH(x_t, base4 + min(first + i * WG, n4 - 1u), 0u));
            const uvec4 mag = bits & 0x7fffffffu;
            top = max(top, max(max(mag.x, mag.y), max(mag.z, mag.w)));
        }
    } else {
        const uint r = g * WG + lane;
        if (r >= pairs * p.len)
            return;
        bh = r / p.len;
        const uint base = (bh / p.heads) * p.x_sb + (bh % p.heads) * p.x_sh + (r % p.len) * p.x_sl;
        if (p.texel == 2u) {
            const uint s = x_w[(base + MISALIGN_BYTES(0u)) >> 2u] & 0x7c00u;
            top = s == 0x7c00u ? 0x7f800000u : 0u;
        } else {
            for (uint c = 0u; c < p.head_dim; c++)
                top = max(top, floatBitsToUint(ld_x(base + c)) & 0x7fffffffu);
        }
    }
    if (top >= 0x5f800000u)
        atomicOr(bad[p.y_sb + p.y_sh * bh], 1u);
}
