#version 450
// Residual add + LayerNorm of layernorm.comp shaped for CPU devices
// (lavapipe): the same math (two passes for the statistics, the biased
// variance), push constants and bindings, but one row per invocation (WG
// rows per workgroup): no reduction across invocations, no shared memory, no
// barrier. Rows are walked as vec4s when cols % 4 == 0 (every row then
// starts on a multiple of 4 elements), else element by element. With vec4
// texel views of y, the residual, gamma and beta (p.texel; lavapipe fetches a
// texel for all lanes at once, where a storage-buffer access is a loop over
// the lanes) each pass reads y + residual again instead of storing the sum
// and reloading it: one storage write per element. The host uses it for rows
// of at most 16384 columns (llvmpipe ends any loop after 65535 iterations).

#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 16;

// Mirrors struct layernorm_push in src/vk_layernorm.c.
layout(push_constant) uniform Push {
    uint rows;
    uint cols;
    float eps;
    uint has_residual;
    uint group_base; // first workgroup of this dispatch
    uint texel;      // 1: bindings 4-7 are y's, the residual's, gamma's, beta's vec4 views
} p;

layout(binding = 0) readonly buffer Residual { float res[]; }; // [rows][cols]
layout(binding = 0) readonly buffer Residual4 { vec4 res4[]; };
layout(binding = 1) readonly buffer Gamma { float gamma[]; };  // [cols]
layout(binding = 1) readonly buffer Gamma4 { vec4 gamma4[]; };
layout(binding = 2) readonly buffer Beta { float beta[]; };    // [cols]
layout(binding = 2) readonly buffer Beta4 { vec4 beta4[]; };
layout(binding = 3) buffer Y { float y[]; };                   // [rows][cols]
layout(binding = 3) buffer Y4 { vec4 y4[]; };
layout(binding = 4) uniform samplerBuffer y_t;
layout(binding = 5) uniform samplerBuffer res_t;
layout(binding = 6) uniform samplerBuffer gamma_t;
layout(binding = 7) uniform samplerBuffer beta_t;

// y + residual at vec4 i, through the texel views.
vec4 sum4_at(int i)
{
    vec4 t = texelFetch(y_t, i);
    if (p.has_residual != 0u)
        t += texelFetch(res_t, i);
    return t;
}

void main()
{
    const uint row = linear_group(p.group_base) * WG + gl_LocalInvocationIndex;
    if (row >= p.rows)
        return;
    const float n = float(p.cols);
    if ((p.cols & 3u) == 0u && p.texel != 0u) {
        const int n4 = int(p.cols >> 2), base4 = int(row) * n4;
        vec4 sum4 = vec4(0.0);
        for (int c = 0; c < n4; c++)
            sum4 += sum4_at(base4 + c);
        const float mean = ((sum4.x + sum4.y) + (sum4.z + sum4.w)) / n;
        vec4 sq4 = vec4(0.0);
        for (int c = 0; c < n4; c++) {
            vec4 d = sum4_at(base4 + c) - mean;
            sq4 += d * d;
        }
        const float rstd = 1.0 / sqrt(((sq4.x + sq4.y) + (sq4.z + sq4.w)) / n + p.eps);
        for (int c = 0; c < n4; c++)
            y4[base4 + c] = texelFetch(gamma_t, c) * ((sum4_at(base4 + c) - mean) * rstd) +
                            texelFetch(beta_t, c);
        return;
    }
    if ((p.cols & 3u) == 0u) {
        const uint n4 = p.cols >> 2, base4 = row * n4;
        vec4 sum4 = vec4(0.0);
        for (uint c = 0; c < n4; c++) {
            vec4 t = y4[base4 + c];
            if (p.has_residual != 0u)
                t += res4[base4 + c];
            y4[base4 + c] = t;
            sum4 += t;
        }
        const float mean = ((sum4.x + sum4.y) + (sum4.z + sum4.w)) / n;
        vec4 sq4 = vec4(0.0);
        for (uint c = 0; c < n4; c++) {
            vec4 d = y4[base4 + c] - mean;
            sq4 += d * d;
        }
        const float rstd = 1.0 / sqrt(((sq4.x + sq4.y) + (sq4.z + sq4.w)) / n + p.eps);
        for (uint c = 0; c < n4; c++)
            y4[base4 + c] = gamma4[c] * ((y4[base4 + c] - mean) * rstd) + beta4[c];
        return;
    }
    const uint base = row * p.cols;
    float sum = 0.0;
    for (uint c = 0; c < p.cols; c++) {
        float t = y[base + c];
        if (p.has_residual != 0u)
            t += res[base + c];
        y[base + c] = t;
        sum += t;
    }
    const float mean = sum / n;
    float sq = 0.0;
    for (uint c = 0; c < p.cols; c++) {
        float d = y[base + c] - mean;
        sq += d * d;
    }
    const float rstd = 1.0 / sqrt(sq / n + p.eps);
    for (uint c = 0; c < p.cols; c++)
        y[base + c] = gamma[c] * ((y[base + c] - mean) * rstd) + beta[c];
}
