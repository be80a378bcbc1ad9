#version 450
// Masked, scaled softmax over the last axis, in place, one workgroup per row:
//   s[row][j] = scale * s[row][j] + bias[b][h][i][j]     (if MASK_BIAS)
//   s[row][j] = -1e9 where masked                        (set, not added)
//   s[row][:] = softmax(s[row][:])                       (max-subtracted)
// A row whose every score is -inf (a -inf bias on every key) becomes zeros;
// +Inf or NaN scores make the row NaN (as the reference does).
// row = (b * heads + h) * len_q + i; s is [batch][heads][len_q][len_k].
// The input and the output are typed (shaders/typed.glsl); scores and
// statistics are fp32. Each pass (max, sum, write) recomputes the masked,
// scaled score from the input, so that the output is written once per
// element and no intermediate is rounded to a 16-bit output's dtype. In
// place (the input is the output) each element is read and written by the
// same invocation, which reads it before it writes it.

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
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
TYPED_OUT(3, 3, s)  // output (and input in place)
TYPED_IN(4, 4, xin) // input: Scores itself in place

#include "mask.glsl"

// The masked, scaled score of key j of query i (batch b), element base + j.
float score(uint base, uint bias_base, uint b, uint i, uint j)
{
    float x = ld_xin(base + j) * p.scale;
    if ((p.flags & MASK_BIAS) != 0u)
        x += bias[bias_base + j];
    if (mask_hides(p.flags, b, i, j, p.len_q, p.len_k))
        x = MASKED_SCORE;
    return x;
}

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
    for (uint j = tid; j < p.len_k; j += WG)
        m = max(m, score(base, bias_base, b, i, j));
    m = wg_max(m);
    const float m_sub = m == neg_inf() ? 0.0 : m; // never -inf - -inf

    float sum = 0.0;
    for (uint j = tid; j < p.len_k; j += WG)
        sum += exp(score(base, bias_base, b, i, j) - m_sub);
    sum = wg_sum(sum); // its barriers: every invocation has read its inputs

    const float inv = sum == 0.0 ? 0.0 : 1.0 / sum; // 0: every score was -inf
    for (uint j = tid; j < p.len_k; j += WG)
        st_s(base + j, exp(score(base, bias_base, b, i, j) - m_sub) * inv);
}
