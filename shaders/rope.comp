#version 450
// Rotary position embedding (include/vkmha.h, vkmha_mha_desc.rope_dims) on
// the layer's query or key projections in place, [rows][ld] with head h's
// d_k elements from h * head_dim: one invocation per (row, head, pair),
// which reads both elements of its pair and writes both,
//   x0' = x0 cos - x1 sin,  x1' = x1 cos + x0 sin,
// with the row's (cos, sin) of that pair from the table the host computed
// in double ([rows][pairs], from table0), so no angle is ever formed in
// fp32 (a position of 10^5 times a frequency near 1 would lose its third
// digit) and no device sin / cos (Vulkan asks 2^-11 of them) is used. The
// projections are typed (shaders/typed.glsl: fp32, fp16, bf16), each
// element rounded once. The keys take this pass only without a KV cache:
// a cache's append rotates them as it copies them (shaders/rope.glsl).

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

#include "rope_push.glsl"

layout(binding = 0) readonly buffer Table { vec2 cs[]; }; // (cos, sin)
TYPED_IO(1, 1, x)

void main()
{
    const uint g = linear_group(p.group_base) * WG + gl_LocalInvocationIndex;
    if (g >= p.total)
        return;
    const uint i = g % p.pairs, rh = g / p.pairs;
    const uint h = rh % p.heads, r = rh / p.heads;
    const vec2 c = cs[p.table0 + r * p.pairs + i];
    const uint base = r * p.ld + h * p.head_dim;
    const uint a = p.interleaved != 0u ? base + 2u * i : base + i;
    const uint e = p.interleaved != 0u ? a + 1u : a + p.pairs;
    const float x0 = ld_x(a), x1 = ld_x(e);
    st_x(a, x0 * c.x - x1 * c.y);
    st_x(e, x1 * c.x + x0 * c.y);
}
