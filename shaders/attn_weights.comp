#version 450
// Attention weights for the fused path, from the row statistics it saved:
// w holds scale * q k^T (a matmul wrote it); each element becomes
//   x = w + bias, set to -1e9 where masked       (as in the fused shader)
//   w = exp(x - m[row]) / l[row]
// so the weights are the fused path's own softmax, without a reduction.

#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

// Mirrors struct weights_push in src/vk_attention.c.
layout(push_constant) uniform Push {
    uint total; // batch * heads * len_q * len_k
    uint len_q;
    uint len_k;
    uint heads;
    uint flags; // MASK_* of mask.glsl
    uint bias_sb;
    uint bias_sh;
    uint group_base; // first workgroup of this dispatch
} p;

layout(binding = 0) readonly buffer KeyPadding { uint kp[]; };
layout(binding = 1) readonly buffer FullMask { uint fm[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 3) readonly buffer Stats { float ml[]; }; // [row][2]: m, l
layout(binding = 4) buffer Weights { float w[]; };         // [row][len_k]

#include "mask.glsl"

void main()
{
    const uint e = linear_group(p.group_base) * WG + gl_LocalInvocationIndex;
    if (e >= p.total)
        return;
    const uint row = e / p.len_k, j = e % p.len_k;
    const uint i = row % p.len_q, h = (row / p.len_q) % p.heads, b = row / (p.len_q * p.heads);
    float x = w[e];
    if ((p.flags & MASK_BIAS) != 0u)
        x += bias[b * p.bias_sb + h * p.bias_sh + i * p.len_k + j];
    if (mask_hides(p.flags, b, i, j, p.len_q, p.len_k))
        x = MASKED_SCORE;
    w[e] = exp(x - ml[2u * row]) / ml[2u * row + 1u];
}
