#version 450
// Residual add + LayerNorm of layernorm.comp shaped for CPU devices
// (lavapipe): the same math (two passes for the statistics, the biased
// variance), push constants and bindings, but one row per invocation (WG
// rows per workgroup): no reduction across invocations, no shared memory, no
// barrier. Rows are walked as vec4s when cols % 4 == 0 (every row then
// starts on a multiple of 4 elements), else element by element. y, the
// residual, gamma and beta are typed (shaders/typed.glsl); the statistics
// are fp32. Each pass reads y + residual again instead of storing the sum
// and reloading it: one write per element, and no sum rounded to a 16-bit
// dtype. With vec4 texel views of y, the residual, gamma and beta (p.texel;
// lavapipe fetches a texel for all lanes at once, where a storage-buffer
// access is a loop over the lanes) they are read through them. The host
// uses it for rows of at most 16384 columns (llvmpipe ends any loop after
// 65535 iterations).

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 16;

#include "layernorm_push.glsl"

TYPED_IN(0, 0, res)   // [rows][cols]
TYPED_IN(1, 1, gamma) // [cols]
TYPED_IN(2, 2, beta)  // [cols]
TYPED_IO(3, 3, y)     // [rows][cols]
// Their fp32 or fp16 vec4 views:
layout(binding = 4) uniform textureBuffer y_t;
layout(binding = 5) uniform textureBuffer res_t;
layout(binding = 6) uniform textureBuffer gamma_t;
layout(binding = 7) uniform textureBuffer beta_t;

// y + residual at vec4 i, through the texel views or from the storage buffers.
vec4 sum4_at(bool texel, uint i)
{
    vec4 t = texel ? texelFetch(y_t, int(i)) : ld4_y(i);
    if (p.has_residual != 0u)
        t += texel ? texelFetch(res_t, int(i)) : ld4_res(i);
    return t;
}

// Row `row` of cols % 4 == 0 columns, as vec4s. main calls it with a
// constant `texel`, so that each call is compiled with one kind of read.
void layernorm_row4(bool texel, uint row)
{
    const float n = float(p.cols);
    const uint n4 = p.cols >> 2, base4 = row * n4;
    vec4 sum4 = vec4(0.0);
    for (uint c = 0; c < n4; c++)
        sum4 += sum4_at(texel, base4 + c);
    const float mean = ((sum4.x + sum4.y) + (sum4.z + sum4.w)) / n;
    vec4 sq4 = vec4(0.0);
    for (uint c = 0; c < n4; c++) {
        vec4 d = sum4_at(texel, base4 + c) - mean;
        sq4 += d * d;
    }
    const float rstd = 1.0 / sqrt(((sq4.x + sq4.y) + (sq4.z + sq4.w)) / n + p.eps);
    for (uint c = 0; c < n4; c++) {
        const vec4 g = texel ? texelFetch(gamma_t, int(c)) : ld4_gamma(c);
        const vec4 be = texel ? texelFetch(beta_t, int(c)) : ld4_beta(c);
        st4_y(base4 + c, g * ((sum4_at(texel, base4 + c) - mean) * rstd) + be);
    }
}

// y + residual at element i.
float sum_at(uint i)
{
    float t = ld_y(i);
    if (p.has_residual != 0u)
        t += ld_res(i);
    return t;
}

void main()
{
    const uint row = linear_group(p.group_base) * WG + gl_LocalInvocationIndex;
    if (row >= p.rows)
        return;
    if ((p.cols & 3u) == 0u) {
        if (p.texel != 0u)
            layernorm_row4(true, row);
        else
            layernorm_row4(false, row);
        return;
    }
    const float n = float(p.cols);
    const uint base = row * p.cols;
    float sum = 0.0;
    for (uint c = 0; c < p.cols; c++)
        sum += sum_at(base + c);
    const float mean = sum / n;
    float sq = 0.0;
    for (uint c = 0; c < p.cols; c++) {
        float d = sum_at(base + c) - mean;
        sq += d * d;
    }
    const float rstd = 1.0 / sqrt(sq / n + p.eps);
    for (uint c = 0; c < p.cols; c++)
        st_y(base + c, ld_gamma(c) * ((sum_at(base + c) - mean) * rstd) + ld_beta(c));
}
