#version 450
// Split-K combine for shaders/flash.comp: each of `splits` key ranges left an
// unnormalized output o_s and its row statistics (m_s, l_s); with
// M = max_s m_s and w_s = exp(m_s - M):
//   out = sum_s w_s o_s / sum_s w_s l_s
// which is exactly the softmax over all keys. EPI consecutive output
// elements per invocation (the host's grid is WG * EPI elements per
// workgroup): 1 on GPUs; 4 on CPU devices (the variant built with CPU=1),
// where a row's statistics and weights are then read and computed once for
// 4 columns, and, when d_v % 4 == 0, read with the partial outputs through
// vec4 texel views (lavapipe fetches a texel for all lanes at once, where a
// storage-buffer load is a loop over the lanes and components, so the
// per-element shape spent most of its time reloading the statistics). The
// partials are the context's own buffers, which always have texel views
// there (at least 16 bytes: 2 or more ranges of (m, l), and d_v >= 4). The
// invocation of column 0 also writes the row's (M, L) for the
// attention-weights pass.
// Ranges whose scores are all -inf have m_s = -inf and w_s = 0; when every
// range has (M = -inf), exp(m_s - 0) = 0 keeps NaN out and the row's output
// is 0, as in shaders/flash.comp.

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint EPI = 1; // output elements per invocation: 1 or 4

#include "combine_push.glsl"

layout(binding = 0) readonly buffer PartialO { float po[]; };   // [split][row][d_v]
layout(binding = 1) readonly buffer PartialML { float pml[]; }; // [split][row][2]
TYPED_OUT(2, 2, o) // of any float dtype (shaders/typed.glsl)
layout(binding = 3) writeonly buffer Stats { float ml[]; };     // [row][2]
#if CPU
layout(binding = 4) uniform textureBuffer po_t;  // PartialO as vec4s
layout(binding = 5) uniform textureBuffer pml_t; // PartialML as vec4s: 2 ranges each
#endif

// The max of the row's range maxima, and the value exp subtracts (never -inf).
float row_max(uint row, out float m_sub)
{
    float m = neg_inf();
    for (uint s = 0; s < p.splits; s++)
        m = max(m, pml[2u * (s * p.rows + row)]);
    m_sub = m == neg_inf() ? 0.0 : m;
    return m;
}

// Where column c of the row goes in out.
uint out_index(uint row, uint c)
{
    const uint i = row % p.len_q, h = (row / p.len_q) % p.heads, b = row / (p.len_q * p.heads);
    return b * p.o_sb + h * p.o_sh + i * p.o_ld + c;
}

void write_stats(uint row, float m, float l)
{
    ml[2u * row] = m;
    ml[2u * row + 1u] = l;
}

// Output element e (row e / d_v, column e % d_v).
void combine1(uint e)
{
    const uint row = e / p.d_v, c = e % p.d_v;
    float m_sub;
    const float m = row_max(row, m_sub);
    float l = 0.0, acc = 0.0;
    for (uint s = 0; s < p.splits; s++) {
        const uint r = s * p.rows + row;
        const float w = exp(pml[2u * r] - m_sub);
        l += pml[2u * r + 1u] * w;
        acc += po[r * p.d_v + c] * w;
    }
    st_o(out_index(row, c), l == 0.0 ? acc : acc / l);
    if (c == 0u)
        write_stats(row, m, l);
}

#if CPU
// (m, l) of range r, through the texel view, or through the storage buffer
// for a last pair that does not fill a texel, which the view cannot reach:
// an odd number of pairs in a buffer of exactly their size (slots are
// rounded up to 64 KiB or capped by a device limit, where the partial
// outputs, 2x larger or more, fail first; the check costs one compare).
vec2 ml_at(uint r)
{
    if (int(r >> 1) >= textureSize(pml_t))
        return vec2(pml[2u * r], pml[2u * r + 1u]);
    const vec4 t = texelFetch(pml_t, int(r >> 1));
    return (r & 1u) != 0u ? t.zw : t.xy;
}

// Output elements e .. e + 4 Q - 1 of one row (e a multiple of 4, d_v of 4 Q
// when Q > 1): the row's weights once for Q vec4s.
void combine_vec(uint e, const uint Q)
{
    const uint row = e / p.d_v, c = e % p.d_v, d4 = p.d_v >> 2;
    float m = neg_inf();
    for (uint s = 0; s < p.splits; s++)
        m = max(m, ml_at(s * p.rows + row).x);
    const float m_sub = m == neg_inf() ? 0.0 : m;
    float l = 0.0;
    vec4 acc[EPI / 4u];
    for (uint q = 0; q < Q; q++)
        acc[q] = vec4(0.0);
    for (uint s = 0; s < p.splits; s++) {
        const uint r = s * p.rows + row;
        const vec2 st = ml_at(r);
        const float w = exp(st.x - m_sub);
        l += st.y * w;
        for (uint q = 0; q < Q; q++)
            acc[q] += texelFetch(po_t, int(r * d4 + (c >> 2) + q)) * w;
    }
    const uint oi = out_index(row, c);
    for (uint q = 0; q < Q; q++) {
        const vec4 res = l == 0.0 ? acc[q] : acc[q] / l;
        for (uint k = 0; k < 4u; k++)
            st_o(oi + 4u * q + k, res[k]);
    }
    if (c == 0u)
        write_stats(row, m, l);
}
#endif

void main()
{
    const uint e0 = (linear_group(p.group_base) * WG + gl_LocalInvocationIndex) * EPI;
    const uint n = p.rows * p.d_v;
#if CPU
    if ((p.d_v & (EPI - 1u)) == 0u) { // EPI columns of one row
        if (e0 < n)
            combine_vec(e0, EPI / 4u);
        return;
    }
    if ((p.d_v & 3u) == 0u) {         // EPI / 4 vec4s, perhaps of different rows
        for (uint q = 0; q < EPI / 4u; q++)
            if (e0 + 4u * q < n)
                combine_vec(e0 + 4u * q, 1u);
        return;
    }
#endif
    for (uint k = 0; k < EPI; k++)
        if (e0 + k < n)
            combine1(e0 + k);
}
