#version 450
// Which (batch entry, key/value head) has a large or non-finite element
// (NaN, Inf, or a magnitude of 2^64 or more) anywhere in its values or its
// keys, for the CPU-shaped fused kernel's skipping (shaders/flash_cpu.comp):
// with none among the values, the value rows it skips need no scan (their
// weights are exactly 0 and 0 * v adds nothing); with none among the keys,
// no score q . k of small enough queries can be NaN or Inf, so a -inf bias
// makes it -inf without the product. One invocation per row of the head
// copy's push constants (shaders/heads_push.glsl, split layout: x_sb, x_sh,
// x_sl the rows' element strides, len the keys, heads the key/value heads,
// head_dim d_v or d_k); a row with such an element sets word
// y_sb + y_sh * (b * heads + h) of y (zeroed by the host first) to 1.
// Every key of the binding is read, also past a KV cache entry's length: a
// flag set there only costs the skipping it would have allowed.

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

#include "heads_push.glsl"

TYPED_IN(0, 0, x)
layout(binding = 1) buffer Flags { uint bad[]; };

void main()
{
    const uint r = linear_group(p.group_base) * WG + gl_LocalInvocationIndex;
    if (r >= p.total / p.head_dim)
        return;
    const uint l = r % p.len, bh = r / p.len;
    const uint h = bh % p.heads, b = bh / p.heads;
    const uint base = b * p.x_sb + h * p.x_sh + l * p.x_sl;
    bool any_bad = false;
    for (uint c = 0; c < p.head_dim; c++)
        any_bad = any_bad || (floatBitsToUint(ld_x(base + c)) & 0x7fffffffu) >= 0x5f800000u;
    if (any_bad)
        atomicOr(bad[p.y_sb + p.y_sh * bh], 1u);
}
