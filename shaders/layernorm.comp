#version 450
// Residual add + LayerNorm over the last axis, in place, one workgroup per row:
//   t = y[row] + res[row]                       (res if HAS_RESIDUAL)
//   y[row] = gamma * (t - mean(t)) / sqrt(var(t) + eps) + beta
// with the biased variance (torch.nn.LayerNorm), computed in two passes.

#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;

#include "reduce.glsl"

// Mirrors struct layernorm_push in src/vk_layernorm.c.
layout(push_constant) uniform Push {
    uint rows;
    uint cols;
    float eps;
    uint has_residual;
    uint group_base; // first row of this dispatch
} p;

layout(binding = 0) readonly buffer Residual { float res[]; }; // [rows][cols]
layout(binding = 1) readonly buffer Gamma { float gamma[]; };  // [cols]
layout(binding = 2) readonly buffer Beta { float beta[]; };    // [cols]
layout(binding = 3) buffer Y { float y[]; };                   // [rows][cols]

void main()
{
    const uint row = linear_group(p.group_base);
    if (row >= p.rows)
        return;
    const uint tid = gl_LocalInvocationIndex;
    const uint base = row * p.cols;

    float sum = 0.0;
    for (uint c = tid; c < p.cols; c += WG) {
        float t = y[base + c];
        if (p.has_residual != 0u)
            t += res[base + c];
        y[base + c] = t;
        sum += t;
    }
    const float mean = wg_sum(sum) / float(p.cols);

    float sq = 0.0;
    for (uint c = tid; c < p.cols; c += WG) {
        float d = y[base + c] - mean;
        sq += d * d;
    }
    const float rstd = 1.0 / sqrt(wg_sum(sq) / float(p.cols) + p.eps);

    for (uint c = tid; c < p.cols; c += WG)
        y[base + c] = gamma[c] * ((y[base + c] - mean) * rstd) + beta[c];
}
