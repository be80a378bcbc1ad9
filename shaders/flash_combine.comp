#version 450
// Split-K combine for shaders/flash.comp: each of `splits` key ranges left an
// unnormalized output o_s and its row statistics (m_s, l_s); with
// M = max_s m_s and w_s = exp(m_s - M):
//   out = sum_s w_s o_s / sum_s w_s l_s
// which is exactly the softmax over all keys. One invocation per output
// element; the invocation of column 0 also writes the row's (M, L) for the
// attention-weights pass. Ranges whose scores are all -inf have m_s = -inf
// and w_s = 0; when every range has (M = -inf), exp(m_s - 0) = 0 keeps NaN
// out and the row's output is 0, as in shaders/flash.comp.

#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

// Mirrors struct combine_push in src/vk_attention.c.
layout(push_constant) uniform Push {
    uint rows; // batch * heads * len_q
    uint len_q;
    uint heads;
    uint d_v;
    uint splits;
    uint o_sb, o_sh, o_ld; // element strides of out: batch entry, head, row
    uint group_base; // first workgroup of this dispatch
} p;

layout(binding = 0) readonly buffer PartialO { float po[]; };   // [split][row][d_v]
layout(binding = 1) readonly buffer PartialML { float pml[]; }; // [split][row][2]
layout(binding = 2) writeonly buffer Out { float o[]; };
layout(binding = 3) writeonly buffer Stats { float ml[]; };     // [row][2]

void main()
{
    const uint e = linear_group(p.group_base) * WG + gl_LocalInvocationIndex;
    if (e >= p.rows * p.d_v)
        return;
    const uint row = e / p.d_v, c = e % p.d_v;
    float m = neg_inf();
    for (uint s = 0; s < p.splits; s++)
        m = max(m, pml[2u * (s * p.rows + row)]);
    const float m_sub = m == neg_inf() ? 0.0 : m;
    float l = 0.0, acc = 0.0;
    for (uint s = 0; s < p.splits; s++) {
        const uint r = s * p.rows + row;
        const float w = exp(pml[2u * r] - m_sub);
        l += pml[2u * r + 1u] * w;
        acc += po[r * p.d_v + c] * w;
    }
    const uint i = row % p.len_q, h = (row / p.len_q) % p.heads, b = row / (p.len_q * p.heads);
    o[b * p.o_sb + h * p.o_sh + i * p.o_ld + c] = l == 0.0 ? acc : acc / l;
    if (c == 0u) {
        ml[2u * row] = m;
        ml[2u * row + 1u] = l;
    }
}
