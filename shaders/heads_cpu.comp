#version 450
// Head reshaping of heads.comp shaped for CPU devices (lavapipe): the same
// push constants and bindings, one invocation per row of head_dim elements
// (WG rows per workgroup) instead of one per element, so the index math
// (three divisions, which a CPU does lane by lane) is paid once per row; the
// row is copied as vec4s when head_dim % 4 == 0 (every row then starts on a
// multiple of 4 elements), read through x's vec4 texel view when it has one
// (lavapipe fetches a texel for all lanes at once; a storage-buffer read is a
// loop over the lanes), else element by element. The host uses it for
// head_dim <= 16384 (llvmpipe ends any loop after 65535 iterations).
// Built with -DROPE=1, it rotates x's rows as it copies them, element by
// element (shaders/rope.glsl: the KV cache append's keys).
//   split: x [batch][len][heads][head_dim] -> y [batch][heads][len][head_dim]
//   merge: x [batch][heads][len][head_dim] -> y [batch][len][heads][head_dim]

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 16;

#include "heads_push.glsl"

TYPED_IN(0, 0, x)
TYPED_OUT(1, 1, y)
layout(binding = 3) uniform TEXEL_BUFFER x_t; // x's vec4 view (shaders/typed.glsl)
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
    // The first elements of the rows (multiples of 4 when head_dim is: the
    // strides are multiples of head_dim).
    const uint src = b * p.x_sb + h * p.x_sh + l * p.x_sl,
               dst = b * p.y_sb + h * p.y_sh + l * p.y_sl;
#ifdef ROPE
    for (uint c = 0; c < p.head_dim; c++)
        st_y(dst + c, rope_ld_x(src, b, l, c));
#else
    if ((p.head_dim & 3u) == 0u) {
        const uint n4 = p.head_dim >> 2;
        if (p.texel != 0u) {
            for (uint c = 0; c < n4; c++)
                st4_y((dst >> 2) + c, TEXEL_FETCH(x_t, (src >> 2) + c, 0u));
        } else {
            for (uint c = 0; c < n4; c++)
                st4_y((dst >> 2) + c, ld4_x((src >> 2) + c));
        }
    } else {
        for (uint c = 0; c < p.head_dim; c++)
            st_y(dst + c, ld_x(src + c));
    }
#endif
}
