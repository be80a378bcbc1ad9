#version 450
// The matmul of a few rows on GPUs (a decode step's projections):
// C = alpha * A op(B) + bias with op T (B is [N][K], torch.nn.Linear's
// weights) and M of at most RM rows per dispatch row (the host's
// VK_GPU_GEMV_ROWS). Reading B once at memory speed is the whole cost, so a
// workgroup takes CW output columns and its subgroups take them in turn: the
// lanes of a subgroup stride along K (coalesced, with VEC four vec4 loads in
// flight per lane), each summing its share of every row's dot product, and
// a subgroup reduction adds the lanes' sums. No shared memory, no barrier;
// any subgroup size (the loops follow gl_SubgroupID and gl_NumSubgroups).
// The same bindings, push block, batching, bias and ranges of k as
// shaders/matmul.comp; edges of any size. A quantized B (shaders/quant.glsl)
// is dequantized as it is read.
//
// TEXEL_LAYOUT (CPU devices, whose matmul layout puts the register
// variant's texel views at bindings 0 and 1): A and B at bindings 4 and 5.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint CW = 8;     // output columns per workgroup
layout(constant_id = 2) const bool VEC = false; // vec4 loads along K (host-aligned)
const uint RM = 8u; // rows per workgroup at most: VK_GPU_GEMV_ROWS
const uint UNROLL = 4u; // vec4 loads of B per lane in flight (VEC)

#include "matmul_push.glsl"

#if defined(TEXEL_LAYOUT) && TEXEL_LAYOUT
TYPED_IN(4, 0, a)
TYPED_IN(5, 1, b)
#else
TYPED_IN(0, 0, a)
TYPED_IN(1, 1, b)
#endif
TYPED_IN(2, 2, bias) // [N], or [M][ld_add] (ADDEND)
TYPED_IO(3, 3, c)

#include "matmul_out.glsl"
#include "quant.glsl"

void main()
{
    const uint z = gl_WorkGroupID.z + p.z_base;
    const uint zo = z / p.batch_inner;
    const uint zi = z % p.batch_inner;
    const uint offa = zo * p.sa_outer + zi * p.sa_inner;
    const uint offb = zo * p.sb_outer + (zi / p.b_div) * p.sb_inner;
    const uint offc = zo * p.sc_outer + zi * p.sc_inner;
    const uint row0 = (gl_WorkGroupID.y + p.y_base) * RM;
    const uint rows = min(RM, p.M - row0);
    const uint col0 = (gl_WorkGroupID.x + p.x_base) * CW;
    const uint lane = gl_SubgroupInvocationID;
    for (uint cc = gl_SubgroupID; cc < CW; cc += gl_NumSubgroups) {
        const uint col = col0 + cc;
        if (col >= p.N)
            break; // uniform in the subgroup
        const uint b_row = offb + col * p.ldb;
        float acc[RM];
        for (uint r = 0u; r < RM; r++)
            acc[r] = 0.0;
        if (VEC) {
            // UNROLL vec4s of B in flight per lane before their sums: a
            // decode step is bound by how many bytes of B are in flight.
            const uint k4s = p.K / 4u, step = gl_SubgroupSize;
            uint k4 = lane;
            for (; k4 + (UNROLL - 1u) * step < k4s; k4 += UNROLL * step) {
                vec4 bv[UNROLL];
                for (uint u = 0u; u < UNROLL; u++)
                    bv[u] = quant_b() ? qb_at4(col, 4u * (k4 + u * step))
                                      : ld4_b(b_row / 4u + k4 + u * step);
                for (uint r = 0u; r < RM; r++)
                    if (r < rows) {
                        const uint a4 = (offa + (row0 + r) * p.lda) / 4u + k4;
                        for (uint u = 0u; u < UNROLL; u++)
                            acc[r] += dot(ld4_a(a4 + u * step), bv[u]);
                    }
            }
            for (; k4 < k4s; k4 += step) {
                const vec4 bv = quant_b() ? qb_at4(col, 4u * k4) : ld4_b(b_row / 4u + k4);
                for (uint r = 0u; r < RM; r++)
                    if (r < rows)
                        acc[r] += dot(ld4_a((offa + (row0 + r) * p.lda) / 4u + k4), bv);
            }
        } else {
            for (uint k = lane; k < p.K; k += gl_SubgroupSize) {
                const float bv = quant_b() ? qb_at(col, k) : ld_b(b_row + k);
                for (uint r = 0u; r < RM; r++)
                    if (r < rows)
                        acc[r] = fma(ld_a(offa + (row0 + r) * p.lda + k), bv, acc[r]);
            }
        }
        for (uint r = 0u; r < RM; r++) {
            const float sum = subgroupAdd(acc[r]);
            if (lane == 0u && r < rows)
                store_out(offc, row0 + r, col, sum);
        }
    }
}
