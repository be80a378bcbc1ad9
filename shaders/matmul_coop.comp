#version 450
// The matmul of shaders/matmul.comp (same bindings, push block, batching,
// op T, bias and ranges of k) on the device's matrix units, through
// VK_KHR_cooperative_matrix: fp16 operands, fp32 accumulation.
//
// A workgroup computes a BM x BN tile of C, stepping K by BK: A's BM x BK
// tile and op(B)'s BK x BN tile are staged in shared memory as fp16 (any
// edge zero-filled: M, N and K need not be multiples of anything; with VEC
// the next tiles' loads are in flight during the products), then each
// of the workgroup's SGM x SGN subgroups multiplies TM x TN cooperative
// matrices of CM x CN (the device's shape, from
// vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR), CK deep per step. At
// the end each accumulator passes through a CM x CN staging area of its
// subgroup, from which the subgroup's invocations write the elements inside
// M x N with the common output (alpha, bias, ACCUMULATE, any output dtype:
// shaders/matmul_tile.glsl). The host makes WG the subgroups times the
// device's subgroup size; invocations of subgroups past SGM x SGN (a smaller
// subgroup than the host's) only stage tiles.
//
// The fp16 operands are exact: this kernel takes fp16 A and B only (the
// host checks), read through shaders/typed.glsl like every kernel, or fp16
// A and a quantized B with op T (shaders/quant.glsl): B's tile is staged
// as its codes minus their zero points (small integers, exact in fp16),
// and since a step of BK (32) lies within one group of k, each step's
// products go to accumulators of their own that are then multiplied,
// column by column, by the group's scales (a CM x CN matrix of them per
// column block, rows alike, written in the subgroup's staging area) and
// added: sum_k a_k s (q_k - z) = s sum_k a_k (q_k - z), exactly the
// dequantized values' products up to the fp32 sums' order.
//
// A quantized B with op N ([K][N], groups along n) shares no scale along a
// step of k, so its tile is staged dequantized, each value w = s (q - z)
// (exact in fp32) as two fp16 halves, hi = fp16(w) in Bs and lo = w - hi in
// Bl, whose products are both added: a w = a hi + a lo, each product exact
// in fp32. The split is exact: w is a multiple of the scale's last bit (at
// least 2^-24) with at most 19 significant bits (11 of the scale, 8 of
// q - z), hi's last bit is no smaller, so lo is a multiple of it with at
// most 9 bits, an fp16 value (subnormal or not). A step whose largest
// finite value reaches 2^15 (Q8 scales of 256 and more; fp16's range ends
// at 65504) is staged times 2^-P, the smallest power that brings it below
// 2^15, and its products times 2^P (both exact, unless that step also
// holds values whose bits fall below 2^-24 once scaled). Op N is a
// pipeline variant of its own (VARIANT's bit 4, VK_VARIANT_QUANT_N, set by
// the host), so that op T's pipelines fold this path away.
// TEXEL_LAYOUT (CPU devices, whose matmul layout puts the register
// variant's texel views at bindings 0 and 1): A and B at bindings 4 and 5.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128; // subgroups x the subgroup size
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 32;  // a multiple of CK and of 8
layout(constant_id = 4) const uint TM = 2;   // matrices per subgroup along M
layout(constant_id = 5) const uint TN = 2;   // ... along N
layout(constant_id = 6) const bool VEC = false;
layout(constant_id = 7) const uint CM = 16;  // the device's matrix shape
layout(constant_id = 8) const uint CN = 16;
layout(constant_id = 9) const uint CK = 16;

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

TYPED_LD4H(0, a)
TYPED_LD4H(1, b)

const uint SGM = BM / (TM * CM); // subgroups along M
const uint SGN = BN / (TN * CN); // subgroups along N
// The staged tiles hold fp16 in f16vec4s (one 8-byte store per 4 elements;
// the matrix loads count offsets and strides in them, so CN and CK are
// multiples of 4: the host checks). Row strides padded by 2 (16 bytes,
// which keeps every matrix load 16-byte aligned) against bank conflicts.
// A: [BM][AS4], row-major along K. op(B): with op N [BK][BS4] (rows of B
// along N), with op T [BN][AS4] (rows of B along K, read as a column-major
// op(B)): either way the loads copy contiguous runs of memory.
const uint AS4 = BK / 4u + 2u;
const uint BS4 = BN / 4u + 2u;
const uint BSZ = BK * BS4 > BN * AS4 ? BK * BS4 : BN * AS4;

shared f16vec4 As[BM * AS4];
shared f16vec4 Bs[BSZ];
shared float Cs[SGM * SGN * CM * CN]; // a CM x CN staging area per subgroup
// A quantized op N's lo halves (as Bs with op N), and the largest finite
// |w| of the step's tile (its bits). One element in other pipelines
// (DTYPE(1) >> 2: 1 for DT_I8 and DT_U4, 0 for the float dtypes; VARIANT's
// bit 4, VK_VARIANT_QUANT_N: op N; integer operations only, which every
// compiler folds as a specialization-constant expression), which never
// touch it. src/vk_kernels.c's vk_matmul_coop_shared_bytes counts them.
shared f16vec4 Bl[1u + ((DTYPE(1) >> 2u) & (VARIANT >> 4u) & 1u) * (BK * BS4 - 1u)];
shared uint q_max;

void put_a(uint m, uint kk, float x) { As[m * AS4 + kk / 4u][kk % 4u] = float16_t(x); }
void put_b(uint kk, uint n, float x)
{
    if ((p.flags & FLAG_TRANS_B) != 0u)
        Bs[n * AS4 + kk / 4u][kk % 4u] = float16_t(x);
    else
        Bs[kk * BS4 + n / 4u][n % 4u] = float16_t(x);
}
void put_a4(uint m, uint kk, f16vec4 v) { As[m * AS4 + kk / 4u] = v; }
void put_b4_k(uint kk, uint n, f16vec4 v) { Bs[n * AS4 + kk / 4u] = v; }
void put_b4_n(uint kk, uint n, f16vec4 v) { Bs[kk * BS4 + n / 4u] = v; }
#define TILE_VEC4 f16vec4
#define TILE_LD4_A ld4h_a
#define TILE_LD4_B ld4h_b
#define TILE_QUANT_CODES 1
#include "matmul_tile.glsl"

// Whether B is quantized with op N (Bl above; quant_b() is shaders/quant.glsl's).
bool quant_op_n()
{
    return quant_b() && ((VARIANT >> 4) & 1u) != 0u;
}

// vec4 slots of the A and op(B) tiles per invocation (VEC).
const uint NA = (BM * BK / 4u + WG - 1u) / WG;
const uint NB = (BK * BN / 4u + WG - 1u) / WG;

void fetch_tiles(out f16vec4 ra[NA], out f16vec4 rb[NB], uint tid, uint k0, uint row0,
                 uint col0, uint offa, uint offb, bool trans_b)
{
    for (uint i = 0u; i < NA; i++)
        ra[i] = tid + i * WG < BM * BK / 4u ? fetch_a4(tid + i * WG, k0, row0, offa)
                                            : f16vec4(0.0);
    for (uint i = 0u; i < NB; i++) // (a quantized op N's are staged apart)
        rb[i] = tid + i * WG < BK * BN / 4u && !quant_op_n()
                    ? fetch_b4(tid + i * WG, k0, col0, offb, trans_b)
                    : f16vec4(0.0);
}

// Four fp16 values from their bits.
f16vec4 halves4(uvec4 h)
{
    return f16vec4(unpackFloat2x16(h.x | (h.y << 16)), unpackFloat2x16(h.z | (h.w << 16)));
}

// A quantized B with op N: op(B)'s tile at k0 dequantized, split into hi
// (Bs) and lo (Bl) halves times 2^-P (above); returns 2^P. Between the
// barriers of the step (the largest value's reduction takes one of its
// own); q_max zero on entry, and again on return to invocation 0's reset
// once every invocation has read it (the step's later barrier orders it
// before the next step's maxima).
float stage_quant_n(uint tid, uint k0, uint col0)
{
    const uint NQ = (BK * BN / 4u + WG - 1u) / WG;
    vec4 w[NQ];
    float most = 0.0;
    for (uint i = 0u; i < NQ; i++) {
        const uint l = tid + i * WG, kk = l / (BN / 4u), n = (l % (BN / 4u)) * 4u;
        const uint gk = k0 + kk, gn = col0 + n;
        // N is a multiple of the group size, so of 4: the four are in range
        // together, in one group.
        w[i] = l < BK * BN / 4u && gk < p.K && gn < p.N ? qb_at4(gk, gn) : vec4(0.0);
        for (uint c = 0u; c < 4u; c++)
            if (!isinf(w[i][c]) && !isnan(w[i][c]))
                most = max(most, abs(w[i][c]));
    }
    atomicMax(q_max, floatBitsToUint(most));
    barrier();
    const float top = uintBitsToFloat(q_max);
    const int P = top < 32768.0 ? 0 : int(q_max >> 23) - 127 - 14;
    for (uint i = 0u; i < NQ; i++) {
        const uint l = tid + i * WG;
        if (l < BK * BN / 4u) {
            // Through the bits (shaders/dtype.glsl: round to nearest even):
            // a compiler may fold vec4(f16vec4(v)) into v (Mesa 26's
            // lavapipe did, precise or not), which would make lo zero.
            const vec4 v = ldexp(w[i], ivec4(-P));
            uvec4 hb, lb;
            for (uint c = 0u; c < 4u; c++) {
                hb[c] = f32_to_f16_bits(v[c]);
                lb[c] = f32_to_f16_bits(v[c] - f16_bits_to_f32(hb[c]));
            }
            put_b4_n(l / (BN / 4u), (l % (BN / 4u)) * 4u, halves4(hb));
            Bl[(l / (BN / 4u)) * BS4 + l % (BN / 4u)] = halves4(lb);
        }
    }
    return ldexp(1.0, P);
}

#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>

void main()
{
    const uint tid = gl_LocalInvocationIndex;
    const uint sg = gl_SubgroupID;
    const bool computes = sg < SGM * SGN;
    const uint sm = sg / SGN, sn = sg % SGN;
    const uint z = gl_WorkGroupID.z + p.z_base;
    const uint zo = z / p.batch_inner;
    const uint zi = z % p.batch_inner;
    const uint offa = zo * p.sa_outer + zi * p.sa_inner;
    const uint offb = zo * p.sb_outer + (zi / p.b_div) * p.sb_inner;
    const uint offc = zo * p.sc_outer + zi * p.sc_inner;
    const uint row0 = (gl_WorkGroupID.y + p.y_base) * BM;
    const uint col0 = (gl_WorkGroupID.x + p.x_base) * BN;
    const bool trans_b = (p.flags & FLAG_TRANS_B) != 0u;

    MAT_C acc[TM * TN];
    for (uint i = 0u; i < TM * TN; i++)
        acc[i] = MAT_C(0.0);

    // With VEC the next tile's loads are issued before the products of the
    // staged one and held in registers (NA + NB vec4s per invocation), so
    // that memory latency overlaps the matrix instructions.
    f16vec4 ra[NA], rb[NB];
    if (VEC)
        fetch_tiles(ra, rb, tid, 0u, row0, col0, offa, offb, trans_b);
    const bool quant_n = quant_op_n();
    if (quant_n) {
        if (tid == 0u)
            q_max = 0u;
        barrier();
    }
    for (uint k0 = 0u; k0 < p.K; k0 += BK) {
        if (VEC) {
            for (uint i = 0u; i < NA; i++)
                if (tid + i * WG < BM * BK / 4u)
                    put_a4_slot(tid + i * WG, ra[i]);
            for (uint i = 0u; !quant_n && i < NB; i++)
                if (tid + i * WG < BK * BN / 4u)
                    put_b4_slot(tid + i * WG, rb[i], trans_b);
        } else if (quant_n) {
            load_k_rows(true, tid, k0, row0, p.M, BM, offa, p.lda);
        } else {
            load_tiles(tid, k0, row0, col0, offa, offb, trans_b);
        }
        const float step_scale = quant_n ? stage_quant_n(tid, k0, col0) : 1.0;
        barrier();
        if (quant_n && tid == 0u)
            q_max = 0u;
        if (VEC && k0 + BK < p.K)
            fetch_tiles(ra, rb, tid, k0 + BK, row0, col0, offa, offb, trans_b);
        if (computes) {
            // A quantized B: this step's products apart (part), then scaled.
            MAT_C part[TM * TN];
            if (quant_b())
                for (uint i = 0u; i < TM * TN; i++)
                    part[i] = MAT_C(0.0);
            for (uint kk = 0u; kk < BK; kk += CK) {
                MAT_A ma[TM];
                for (uint i = 0u; i < TM; i++)
                    coopMatLoad(ma[i], As, (sm * TM + i) * CM * AS4 + kk / 4u, AS4,
                                gl_CooperativeMatrixLayoutRowMajor);
                for (uint j = 0u; j < TN; j++) {
                    MAT_B mb;
                    const uint n = (sn * TN + j) * CN;
                    if (trans_b)
                        coopMatLoad(mb, Bs, n * AS4 + kk / 4u, AS4,
                                    gl_CooperativeMatrixLayoutColumnMajor);
                    else
                        coopMatLoad(mb, Bs, kk * BS4 + n / 4u, BS4,
                                    gl_CooperativeMatrixLayoutRowMajor);
                    for (uint i = 0u; i < TM; i++)
                        if (quant_b())
                            part[i * TN + j] = coopMatMulAdd(ma[i], mb, part[i * TN + j]);
                        else
                            acc[i * TN + j] = coopMatMulAdd(ma[i], mb, acc[i * TN + j]);
                    if (quant_n) { // the lo halves' products
                        coopMatLoad(mb, Bl, kk * BS4 + n / 4u, BS4,
                                    gl_CooperativeMatrixLayoutRowMajor);
                        for (uint i = 0u; i < TM; i++)
                            part[i * TN + j] = coopMatMulAdd(ma[i], mb, part[i * TN + j]);
                    }
                }
            }
            if (quant_n)
                for (uint i = 0u; i < TM * TN; i++)
                    acc[i] += part[i] * step_scale;
            else if (quant_b())
                for (uint j = 0u; j < TN; j++) {
                    // The scales of columns c0 .. c0 + CN - 1 at this step's
                    // group, in every row (0 past N).
                    const uint stage = sg * CM * CN, c0 = col0 + (sn * TN + j) * CN;
                    for (uint e = gl_SubgroupInvocationID; e < CM * CN; e += gl_SubgroupSize)
                        Cs[stage + e] = c0 + e % CN < p.N ? qb_scale(c0 + e % CN, k0) : 0.0;
                    subgroupMemoryBarrierShared();
                    subgroupBarrier();
                    MAT_C scales;
                    coopMatLoad(scales, Cs, stage, CN, gl_CooperativeMatrixLayoutRowMajor);
                    for (uint i = 0u; i < TM; i++)
                        acc[i * TN + j] += part[i * TN + j] * scales;
                    subgroupBarrier(); // loaded before the next block's scales
                }
        }
        barrier();
    }

    if (!computes)
        return;
    const uint stage = sg * CM * CN;
    for (uint i = 0u; i < TM; i++)
        for (uint j = 0u; j < TN; j++) {
            coopMatStore(acc[i * TN + j], Cs, stage, CN, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            const uint r0 = row0 + (sm * TM + i) * CM, c0 = col0 + (sn * TN + j) * CN;
            for (uint e = gl_SubgroupInvocationID; e < CM * CN; e += gl_SubgroupSize) {
                const uint r = r0 + e / CN, col = c0 + e % CN;
                if (r < p.M && col < p.N)
                    store_out(offc, r, col, Cs[stage + e]);
            }
            subgroupBarrier(); // read before the next accumulator overwrites it
        }
}
