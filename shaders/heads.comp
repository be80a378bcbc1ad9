#version 450
// Head reshaping, one invocation per output element:
//   split: x [batch][len][heads * head_dim] -> y [batch][heads][len][head_dim]
//   merge: x [batch][heads][len][head_dim]  -> y [batch][len][heads * head_dim]
// Each side has element strides per batch entry, head and row (head_dim
// elements stay contiguous), set by the host: a KV cache entry's
// [heads][capacity][head_dim], or a block of rows and heads of a larger
// array (src/split.c). Built with -DROPE=1, it rotates x's rows as it
// copies them (shaders/rope.glsl: the KV cache append's keys).

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

#include "heads_push.glsl"

TYPED_IN(0, 0, x)
TYPED_OUT(1, 1, y)
#include "rope.glsl"

void main()
{
    const uint idx = linear_group(p.group_base) * WG + gl_LocalInvocationIndex;
    if (idx >= p.total)
        return;
    const uint d = idx % p.head_dim;
    uint t = idx / p.head_dim;
    uint l, h;
    if (p.split != 0u) { // idx walks y = [b][h][l][d]
        l = t % p.len;
        t /= p.len;
        h = t % p.heads;
    } else {             // idx walks y = [b][l][h][d]
        h = t % p.heads;
        t /= p.heads;
        l = t % p.len;
    }
    const uint b = t / (p.split != 0u ? p.heads : p.len);
    const uint src = b * p.x_sb + h * p.x_sh + l * p.x_sl;
#ifdef ROPE
    const float x = rope_ld_x(src, b, l, d);
#else
    const float x = ld_x(src + d);
#endif
    st_y(b * p.y_sb + h * p.y_sh + l * p.y_sl + d, x);
}
