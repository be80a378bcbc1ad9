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
//   split: x [batch][len][heads][head_dim] -> y [batch][heads][len][head_dim]
//   merge: x [batch][heads][len][head_dim] -> y [batch][len][heads][head_dim]

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 16;

// Mirrors struct heads_push in src/vk_heads.c.
layout(push_constant) uniform Push {
    PUSH_MISALIGN   // shaders/typed.glsl
    uint total; // batch * len * heads * head_dim
    uint len;
    uint heads;
    uint head_dim;
    uint split; // 1: split, 0: merge
    uint group_base; // first workgroup of this dispatch
    uint texel;      // 1: binding 2 is x's vec4 view (this variant only)
    uint y_sb, y_sh; // split: y's element strides per batch entry and head
} p;

TYPED_IN(0, 0, x)
TYPED_OUT(1, 1, y)
layout(binding = 2) uniform TEXEL_BUFFER x_t; // x's vec4 view (shaders/typed.glsl)

void main()
{
    const uint r = linear_group(p.group_base) * WG + gl_LocalInvocationIndex; // row of y
    if (r >= p.total / p.head_dim)
        return;
    uint src; // row of x
    uint dst = r * p.head_dim; // first element of y's row
    if (p.split != 0u) { // r = (b * heads + h) * len + l
        const uint l = r % p.len, bh = r / p.len;
        src = ((bh / p.heads) * p.len + l) * p.heads + bh % p.heads;
        dst = (bh / p.heads) * p.y_sb + (bh % p.heads) * p.y_sh + l * p.head_dim;
    } else {             // r = (b * len + l) * heads + h
        const uint h = r % p.heads, bl = r / p.heads;
        src = ((bl / p.len) * p.heads + h) * p.len + bl % p.len;
    }
    if ((p.head_dim & 3u) == 0u) {
        const uint n4 = p.head_dim >> 2;
        if (p.texel != 0u) {
            for (uint c = 0; c < n4; c++)
                st4_y((dst >> 2) + c, TEXEL_FETCH(x_t, src * n4 + c, 0u));
        } else {
            for (uint c = 0; c < n4; c++)
                st4_y((dst >> 2) + c, ld4_x(src * n4 + c));
        }
    } else {
        for (uint c = 0; c < p.head_dim; c++)
            st_y(dst + c, ld_x(src * p.head_dim + c));
    }
}
