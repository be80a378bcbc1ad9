#version 450
// The masked, scaled softmax of softmax.comp shaped for CPU devices
// (lavapipe): the same math, push constants, bindings and non-finite rules,
// but one row per invocation (WG rows per workgroup), so there is no
// reduction across invocations, no shared memory and no barrier. On a CPU
// driver the invocations of a workgroup are the lanes of SIMD registers, and
// softmax.comp's one-workgroup-per-row shape pays a suspend and resume of the
// workgroup at every barrier and a partial reduction per row; here a lane
// walks its row alone, and WG rows run side by side.
//
// When len_k % 4 == 0 (then every row, bias row and mask row starts on a
// multiple of 4 elements) the row is read and written as vec4s and each mask
// word gives 4 keys at once; otherwise element by element. With vec4 texel
// views of the input and the bias (p.texel; lavapipe fetches a texel for all
// lanes at once, where a storage-buffer access is a loop over the lanes) the
// three passes (max, sum, write) each recompute the masked scores from the
// input instead of storing and reloading them: one storage write per element
// instead of three accesses. The host uses this variant only for rows of at
// most 16384 keys: llvmpipe ends any loop after 65535 iterations, and longer
// rows have work enough for softmax.comp.
//
// The input and the output are typed (shaders/typed.glsl); scores and
// statistics are fp32. An fp32 output takes softmax_f32: with storage-buffer
// reads its max pass stores the scores and its sum pass the exponentials,
// which the next pass reloads. A 16-bit output takes softmax_16, which
// recomputes the scores in every pass also from storage buffers, so that no
// intermediate is rounded to the output's dtype (nor saturated at 65504),
// and writes each element once (in place, after reading it). The dtype is a
// specialization constant, so each pipeline holds one of the two: measured
// on lavapipe, fp32 code that recomputes, or that merely shares its loops
// with the recomputing code, ran the texel path 5-12% slower.
//
// Rows beyond `rows` (the last workgroup's) do nothing: no barrier follows.

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 16;

#include "softmax_push.glsl"

layout(binding = 0) readonly buffer KeyPadding { uint kp[]; };
layout(binding = 1) readonly buffer FullMask { uint fm[]; };
layout(binding = 2) readonly buffer Bias { float bias[]; };
layout(binding = 2) readonly buffer Bias4 { vec4 bias4[]; };
TYPED_IO(3, 3, s)   // the output (and the input in place)
TYPED_IN(4, 4, xin) // the input
layout(binding = 5) readonly buffer Lengths { uint lens[]; }; // with MASK_LENGTHS
layout(binding = 7) uniform textureBuffer xin_t; // the input's fp32 or fp16 vec4 view
layout(binding = 8) uniform textureBuffer bias_t;

#define MASK_SLOT 0u
#define HEAD_RULES_BINDING 6
#include "mask.glsl"

// The row's batch entry's key length, causal_last, ALiBi slope and sink
// logit, set by main.
uint len_b;
int last_seen;
float slope, sink;

// Bias elements 4 q4 .. 4 q4 + 3.
vec4 bias4_at(uint q4)
{
    const uint m = MISALIGN_BYTES(MASK_SLOT + 2u);
    if ((m & 15u) != 0u)
        return vec4(bias_at(4u * q4), bias_at(4u * q4 + 1u), bias_at(4u * q4 + 2u),
                    bias_at(4u * q4 + 3u));
    return bias4[q4 + (m >> 4)];
}

// The 4 mask bytes of a word, as "hidden" flags.
bvec4 word_hides(uint word)
{
    return equal((uvec4(word) >> uvec4(0u, 8u, 16u, 24u)) & 0xffu, uvec4(0u));
}

// Keys j .. j+3 of query i, batch b (j and len_k multiples of 4), their
// biases added: ALiBi's too, then the masks.
vec4 masked4(vec4 x, uint b, uint i, uint j)
{
    const vec4 hidden = vec4(MASKED_SCORE);
    const uvec4 jj = uvec4(j) + uvec4(0u, 1u, 2u, 3u);
    if ((p.flags & MASK_ALIBI) != 0u)
        x -= slope * vec4(ivec4(last_seen) - ivec4(jj));
    if ((p.flags & MASK_CAUSAL) != 0u)
        x = mix(x, hidden, greaterThan(ivec4(jj), ivec4(last_seen)));
    if ((p.flags & MASK_WINDOW) != 0u)
        x = mix(x, hidden, window_hides4(jj, last_seen));
    if ((p.flags & MASK_KEY_PADDING) != 0u)
        x = mix(x, hidden, word_hides(kp_word(b * p.len_k + j)));
    if ((p.flags & MASK_FULL) != 0u)
        x = mix(x, hidden, word_hides(fm_word((b * p.len_q + i) * p.len_k + j)));
    if ((p.flags & MASK_LENGTHS) != 0u) // past the entry's keys: weight 0
        x = mix(x, vec4(neg_inf()), greaterThanEqual(jj, uvec4(len_b)));
    return x;
}

// Masked scores of keys 4 q .. 4 q + 3 of the row starting at vec4 base4,
// through the texel views.
vec4 scores4(int base4, int bias4_base, int q, uint b, uint i)
{
    vec4 x = texelFetch(xin_t, base4 + q) * p.scale;
    if ((p.flags & MASK_SOFTCAP) != 0u)
        x = soft_cap4(x);
    if ((p.flags & MASK_BIAS) != 0u)
        x += texelFetch(bias_t, bias4_base + q);
    return masked4(x, b, i, 4u * uint(q));
}

// The masked score of key j, element by element (-inf past the entry's
// keys: weight 0).
float score(uint base, uint bias_base, uint b, uint i, uint j)
{
    if (j >= len_b)
        return neg_inf();
    return rule_score(ld_xin(base + j) * p.scale, b, i, j, last_seen, bias_base + j, slope);
}

// Row `base` (query i, batch b) with an fp32 output.
void softmax_f32(uint base, uint bias_base, uint b, uint i)
{
    const bool has_bias = (p.flags & MASK_BIAS) != 0u;

    float m = neg_inf(), sum = 0.0;
    if ((p.len_k & 3u) == 0u && p.texel != 0u) {
        const int n4 = int(p.len_k >> 2), base4 = int(base >> 2), bias4_base = int(bias_base >> 2);
        vec4 m4 = vec4(neg_inf());
        for (int q = 0; q < n4; q++)
            m4 = max(m4, scores4(base4, bias4_base, q, b, i));
        m = max(max(max(m4.x, m4.y), max(m4.z, m4.w)), sink);
        const float m_sub = m == neg_inf() ? 0.0 : m; // never -inf - -inf
        vec4 sum4 = vec4(0.0);
        for (int q = 0; q < n4; q++)
            sum4 += exp(scores4(base4, bias4_base, q, b, i) - m_sub);
        sum = (sum4.x + sum4.y) + (sum4.z + sum4.w) + exp(sink - m_sub);
        const float inv = sum == 0.0 ? 0.0 : 1.0 / sum; // 0: every score was -inf
        for (int q = 0; q < n4; q++)
            st4_s(uint(base4 + q), exp(scores4(base4, bias4_base, q, b, i) - m_sub) * inv);
        return;
    }
    if ((p.len_k & 3u) == 0u) {
        const uint n4 = p.len_k >> 2, base4 = base >> 2, bias4_base = bias_base >> 2;
        vec4 m4 = vec4(neg_inf());
        for (uint q = 0; q < n4; q++) {
            vec4 x = ld4_xin(base4 + q) * p.scale;
            if ((p.flags & MASK_SOFTCAP) != 0u)
                x = soft_cap4(x);
            if (has_bias)
                x += bias4_at(bias4_base + q);
            x = masked4(x, b, i, 4u * q);
            st4_s(base4 + q, x);
            m4 = max(m4, x);
        }
        m = max(max(max(m4.x, m4.y), max(m4.z, m4.w)), sink);
        const float m_sub = m == neg_inf() ? 0.0 : m; // never -inf - -inf
        vec4 sum4 = vec4(0.0);
        for (uint q = 0; q < n4; q++) {
            vec4 e = exp(ld4_s(base4 + q) - m_sub);
            st4_s(base4 + q, e);
            sum4 += e;
        }
        sum = (sum4.x + sum4.y) + (sum4.z + sum4.w) + exp(sink - m_sub);
        const float inv = sum == 0.0 ? 0.0 : 1.0 / sum; // 0: every score was -inf
        for (uint q = 0; q < n4; q++)
            st4_s(base4 + q, ld4_s(base4 + q) * inv);
        return;
    }

    for (uint j = 0; j < p.len_k; j++) {
        const float x = score(base, bias_base, b, i, j);
        st_s(base + j, x);
        m = max(m, x);
    }
    m = max(m, sink);
    const float m_sub = m == neg_inf() ? 0.0 : m;
    sum = exp(sink - m_sub);
    for (uint j = 0; j < p.len_k; j++) {
        float e = exp(ld_s(base + j) - m_sub);
        st_s(base + j, e);
        sum += e;
    }
    const float inv = sum == 0.0 ? 0.0 : 1.0 / sum;
    for (uint j = 0; j < p.len_k; j++)
        st_s(base + j, ld_s(base + j) * inv);
}

// Masked scores of keys 4 q .. 4 q + 3 of the row starting at vec4 base4,
// through the texel views or from the storage buffers.
vec4 scores4_any(bool texel, uint base4, uint bias4_base, uint q, uint b, uint i)
{
    if (texel)
        return scores4(int(base4), int(bias4_base), int(q), b, i);
    vec4 x = ld4_xin(base4 + q) * p.scale;
    if ((p.flags & MASK_SOFTCAP) != 0u)
        x = soft_cap4(x);
    if ((p.flags & MASK_BIAS) != 0u)
        x += bias4_at(bias4_base + q);
    return masked4(x, b, i, 4u * q);
}

// Row `base` (query i, batch b) with a 16-bit output: every pass recomputes
// the scores, and each element is written once.
void softmax_16(uint base, uint bias_base, uint b, uint i)
{
    if ((p.len_k & 3u) == 0u) {
        const bool texel = p.texel != 0u;
        const uint n4 = p.len_k >> 2, base4 = base >> 2, bias4_base = bias_base >> 2;
        vec4 m4 = vec4(neg_inf());
        for (uint q = 0; q < n4; q++)
            m4 = max(m4, scores4_any(texel, base4, bias4_base, q, b, i));
        const float m = max(max(max(m4.x, m4.y), max(m4.z, m4.w)), sink);
        const float m_sub = m == neg_inf() ? 0.0 : m; // never -inf - -inf
        vec4 sum4 = vec4(0.0);
        for (uint q = 0; q < n4; q++)
            sum4 += exp(scores4_any(texel, base4, bias4_base, q, b, i) - m_sub);
        const float sum = (sum4.x + sum4.y) + (sum4.z + sum4.w) + exp(sink - m_sub);
        const float inv = sum == 0.0 ? 0.0 : 1.0 / sum; // 0: every score was -inf
        for (uint q = 0; q < n4; q++)
            st4_s(base4 + q, exp(scores4_any(texel, base4, bias4_base, q, b, i) - m_sub) * inv);
        return;
    }
    float m = sink;
    for (uint j = 0; j < p.len_k; j++)
        m = max(m, score(base, bias_base, b, i, j));
    const float m_sub = m == neg_inf() ? 0.0 : m;
    float sum = exp(sink - m_sub);
    for (uint j = 0; j < p.len_k; j++)
        sum += exp(score(base, bias_base, b, i, j) - m_sub);
    const float inv = sum == 0.0 ? 0.0 : 1.0 / sum;
    for (uint j = 0; j < p.len_k; j++)
        st_s(base + j, exp(score(base, bias_base, b, i, j) - m_sub) * inv);
}

void main()
{
    const uint row = linear_group(p.group_base) * WG + gl_LocalInvocationIndex;
    if (row >= p.rows)
        return;
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
        softmax_f32(base, bias_base, b, i);
    else
        softmax_16(base, bias_base, b, i);
}
