#version 450
// Masked, scaled softmax over the last axis, in place, one workgroup per row:
//   s[row][j] = scale * s[row][j] + bias[b][h][i][j]     (if MASK_BIAS)
//   s[row][j] = -1e9 where masked                        (set, not added)
//   s[row][:] = softmax(s[row][:])                       (max-subtracted)
// A row whose every score is -inf (a -inf bias on every key) becomes zeros;
// +Inf or NaN scores make the row NaN (as the reference does).
// row = (b * heads + h) * len_q + i; s is [batch][heads][len_q][len_k].
// Each element is read and written by the same invocation in every pass.

#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;

#include "reduce.glsl"

// Mirrors struct softmax_push in src/vk_softmax.c.
layout(push_constant) uniform Push {
    uint rows;    // batch * heads * len_q
    uint len_q;
    uint len_k;
    uint heads;
    uint flags;   // MASK_* of mask.glsl
    float scale;
    uint bias_sb; // bias stride per batch entry, elements (0: broadcast)
    uint bias_sh; // bias stride per head, elements (0: broadcast)
    uint group_base; // first row of this dispatch
} p;

layout(binding = 0) readonly buffer KeyPadding { uint kp[]; }; // [batch][len_k] bytes
layout(binding = 1) readonly buffer FullMask { uint fm[]; };   // [batch][len_q][len_k] bytes
layout(binding = 2) readonly buffer Bias { float bias[]; };    // see bias_sb / bias_sh
layout(binding = 3) buffer Scores { float s[]; };              // output (and input in place)
layout(binding = 4) readonly buffer Input { float xin[]; };    // input: Scores itself in place

#include "mask.glsl"

void main()
{
    const uint row = linear_group(p.group_base);
    if (row >= p.rows)
        return; // the whole workgroup leaves together: barriers stay uniform
    const uint tid = gl_LocalInvocationIndex;
    const uint i = row % p.len_q;
    const uint h = (row / p.len_q) % p.heads;
    const uint b = row / (p.len_q * p.heads);
    const uint base = row * p.len_k;
    const uint bias_base = b * p.bias_sb + h * p.bias_sh + i * p.len_k;

    float m = neg_inf();
    for (uint j = tid; j < p.len_k; j += WG) {
        float x = xin[base + j] * p.scale;
        if ((p.flags & MASK_BIAS) != 0u)
            x += bias[bias_base + j];
        if (mask_hides(p.flags, b, i, j, p.len_q, p.len_k))
            x = MASKED_SCORE;
        s[base + j] = x;
        m = max(m, x);
    }
    m = wg_max(m);
    const float m_sub = m == neg_inf() ? 0.0 : m; // never -inf - -inf

    float sum = 0.0;
    for (uint j = tid; j < p.len_k; j += WG) {
        float e = exp(s[base + j] - m_sub);
        s[base + j] = e;
        sum += e;
    }
    sum = wg_sum(sum);

    const float inv = sum == 0.0 ? 0.0 : 1.0 / sum; // 0: every score was -inf
    for (uint j = tid; j < p.len_k; j += WG)
        s[base + j] *= inv;
}
