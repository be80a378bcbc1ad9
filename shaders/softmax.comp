#version 450
// Masked, scaled softmax over the last axis, in place, one workgroup per row:
//   s[row][j] = scale * s[row][j], soft-capped           (if MASK_SOFTCAP)
//             + bias[b][h][i][j]                         (if MASK_BIAS)
//             - slope[h] * (pos_i - j)                   (if MASK_ALIBI)
//   s[row][j] = -1e9 where masked                        (set, not added)
//   s[row][:] = softmax(s[row][:])                       (max-subtracted,
//               with sink[h] in the max and the sum      if MASK_SINKS)
// A row whose every score is -inf (a -inf bias on every key) becomes zeros;
// +Inf or NaN scores make the row NaN (as the reference does).
// row = (b * heads + h) * len_q + i; s is [batch][heads][len_q][len_k].
// Each element is read and written by the same invocation in every pass.
// The input and the output are typed (shaders/typed.glsl); scores and
// statistics are fp32. An fp32 output keeps the masked scores, then the
// exponentials, which the next pass reloads (softmax_f32). A 16-bit output
// recomputes the masked, scaled score from the input in each pass (max,
// sum, write; softmax_16), so that the output is written once per element
// and no intermediate is rounded to its dtype (nor saturated at 65504); in
// place each invocation reads an element before it writes it, and the
// reductions' barriers order every read of the sum pass before the writes.
// The dtype is a specialization constant: a pipeline holds one of the two.
// Recomputing made the fp32 kernel 1.5-2.4x slower on lavapipe, where a
// storage access is a loop over the lanes.

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;

#include "reduce.glsl"

#include "softmax_push.glsl"

layout(binding = 0) readonly buffer KeyPadding { uint kp[]; }; // [batch][len_k] bytes
layout(binding = 1) readonly buffer FullMask { uint fm[]; };   // [batch][len_q][len_k] bytes
layout(binding = 2) readonly buffer Bias { float bias[]; };    // see bias_sb / bias_sh
TYPED_IO(3, 3, s)   // output (and input in place)
TYPED_IN(4, 4, xin) // input: Scores itself in place
layout(binding = 5) readonly buffer Lengths { uint lens[]; }; // with MASK_LENGTHS

#define MASK_SLOT 0u
#define HEAD_RULES_BINDING 6
#include "mask.glsl"

// The row's batch entry's key length, causal_last, ALiBi slope and sink
// logit, set by main.
uint len_b;
int last_seen;
float slope, sink;

// The masked, scaled score of key j of query i (batch b), element base + j
// (-inf past the entry's keys: weight 0).
float score(uint base, uint bias_base, uint b, uint i, uint j)
{
    if (j >= len_b)
        return neg_inf();
    return rule_score(ld_xin(base + j) * p.scale, b, i, j, last_seen, bias_base + j, slope);
}

// The row at `base` (query i, batch b) into an fp32 output.
void softmax_f32(uint tid, uint base, uint bias_base, uint b, uint i)
{
    float m = neg_inf();
    for (uint j = tid; j < p.len_k; j += WG) {
        const float x = score(base, bias_base, b, i, j);
        st_s(base + j, x);
        m = max(m, x);
    }
    m = max(wg_max(m), sink);
    const float m_sub = m == neg_inf() ? 0.0 : m; // never -inf - -inf

    float sum = 0.0;
    for (uint j = tid; j < p.len_k; j += WG) {
        float e = exp(ld_s(base + j) - m_sub);
        st_s(base + j, e);
        sum += e;
    }
    sum = wg_sum(sum) + exp(sink - m_sub);

    const float inv = sum == 0.0 ? 0.0 : 1.0 / sum; // 0: every score was -inf
    for (uint j = tid; j < p.len_k; j += WG)
        st_s(base + j, ld_s(base + j) * inv);
}

// The row at `base` into a 16-bit output, recomputing the scores.
void softmax_16(uint tid, uint base, uint bias_base, uint b, uint i)
{
    float m = neg_inf();
    for (uint j = tid; j < p.len_k; j += WG)
        m = max(m, score(base, bias_base, b, i, j));
    m = max(wg_max(m), sink);
    const float m_sub = m == neg_inf() ? 0.0 : m; // never -inf - -inf

    float sum = 0.0;
    for (uint j = tid; j < p.len_k; j += WG)
        sum += exp(score(base, bias_base, b, i, j) - m_sub);
    sum = wg_sum(sum) + exp(sink - m_sub); // its barriers: every invocation has read its inputs

    const float inv = sum == 0.0 ? 0.0 : 1.0 / sum; // 0: every score was -inf
    for (uint j = tid; j < p.len_k; j += WG)
        st_s(base + j, exp(score(base, bias_base, b, i, j) - m_sub) * inv);
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
    len_b = (p.flags & MASK_LENGTHS) != 0u ? min(lens[b], p.len_k) : p.len_k;
    last_seen = causal_last(i, p.causal_offset, len_b, p.len_k);
    slope = alibi_slope(h);
    sink = sink_logit(h);

    if (DTYPE(3) == DT_F32)
        softmax_f32(tid, base, bias_base, b, i);
    else
        softmax_16(tid, base, bias_base, b, i);
}
