#version 450
// Residual add + LayerNorm over the last axis, in place, one workgroup per row:
//   t = y[row] + res[row]                       (res if HAS_RESIDUAL)
//   y[row] = gamma * (t - mean(t)) / sqrt(var(t) + eps) + beta
// with the biased variance (torch.nn.LayerNorm), computed in two passes.
// y, res, gamma and beta are typed (shaders/typed.glsl); the statistics are
// fp32. Every pass recomputes t from y and res, so y is written once per
// element (no t rounded to a 16-bit dtype), by the invocation that reads it.

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;

#include "reduce.glsl"

#include "layernorm_push.glsl"

TYPED_IN(0, 0, res)   // [rows][cols]
TYPED_IN(1, 1, gamma) // [cols]
TYPED_IN(2, 2, beta)  // [cols]
TYPED_IO(3, 3, y)     // [rows][cols]

// y + res at element i.
float t_at(uint i)
{
    float t = ld_y(i);
    if (p.has_residual != 0u)
        t += ld_res(i);
    return t;
}

void main()
{
    const uint row = linear_group(p.group_base);
    if (row >= p.rows)
        return;
    const uint tid = gl_LocalInvocationIndex;
    const uint base = row * p.cols;

    float sum = 0.0;
    for (uint c = tid; c < p.cols; c += WG)
        sum += t_at(base + c);
    const float mean = wg_sum(sum) / float(p.cols);

    float sq = 0.0;
    for (uint c = tid; c < p.cols; c += WG) {
        float d = t_at(base + c) - mean;
        sq += d * d;
    }
    const float rstd = 1.0 / sqrt(wg_sum(sq) / float(p.cols) + p.eps);

    for (uint c = tid; c < p.cols; c += WG)
        st_y(base + c, ld_gamma(c) * ((t_at(base + c) - mean) * rstd) + ld_beta(c));
}
