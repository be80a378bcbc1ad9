#version 450
// Tiled, batched matmul:  C[z] = alpha * A[z] * op(B[z]) + bias (+ C[z]: ACCUMULATE)
//   A[z] (i, p) at a[offa + i * lda + p]                    M x K
//   op(B)(p, j) at b[offb + p * ldb + j]        (TRANS_B off: B is K x N)
//             or b[offb + j * ldb + p]          (TRANS_B on:  B is N x K)
//   C[z] (i, j) at c[offc + i * ldc + j]                    M x N
// The batch index z splits into (z / batch_inner, z % batch_inner); B's inner
// index is divided by b_div so that several query heads can share one
// key/value head (grouped-query attention).
//
// A workgroup computes a BM x BN tile of C, stepping K by BK through shared
// memory; each invocation keeps TM x TN accumulators, for rows ty + i * WM and
// columns tx + j * WN (strided, so that neighbouring invocations touch
// neighbouring columns: conflict-free shared reads and coalesced stores).
// Edges of any size are zero-padded on load and masked on store. With VEC the
// host guarantees 16-byte alignment of every row and K % 4 == 0 (and N % 4 ==
// 0 when B is not transposed), so tiles load as vec4.

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256; // must equal (BM / TM) * (BN / TN)
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;  // multiple of 4
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
layout(constant_id = 6) const bool VEC = false;

#include "matmul_push.glsl"

// Ranges of k of a product past maxStorageBufferRange, as variants (bits 1
// and 2 of VARIANT: src/vk_base.h): C += ..., or (16-bit C) the bias
// binding is the fp32 sum of the ranges before, [M][N] at ld_add.
const bool ACCUMULATE = ((VARIANT >> 1) & 1u) != 0u;
const bool ADDEND = ((VARIANT >> 2) & 1u) != 0u;

// Each of any float dtype (shaders/typed.glsl); vec4 reads with VEC.
TYPED_IN(0, 0, a)
TYPED_IN(1, 1, b)
TYPED_IN(2, 2, bias) // [N], or [M][ld_add] (ADDEND)
TYPED_IO(3, 3, c)

// What is added to output (r, col) of this dispatch besides the product.
float bias_at(uint r, uint col)
{
    return ADDEND ? ld_bias(r * p.ld_add + col) : ld_bias(col);
}

const uint WM = BM / TM; // invocations along M
const uint WN = BN / TN; // invocations along N

shared float As[BK * BM]; // As[k * BM + m]: A tile, transposed
shared float Bs[BK * BN]; // Bs[k * BN + n]: op(B) tile

void store4(bool a_tile, uint first, uint step, vec4 v)
{
    if (a_tile) {
        As[first] = v.x; As[first + step] = v.y; As[first + 2u * step] = v.z; As[first + 3u * step] = v.w;
    } else {
        Bs[first] = v.x; Bs[first + step] = v.y; Bs[first + 2u * step] = v.z; Bs[first + 3u * step] = v.w;
    }
}

void main()
{
    const uint tid = gl_LocalInvocationIndex;
    const uint tx = tid % WN;
    const uint ty = tid / WN;
    const uint z = gl_WorkGroupID.z + p.z_base;
    const uint zo = z / p.batch_inner;
    const uint zi = z % p.batch_inner;
    const uint offa = zo * p.sa_outer + zi * p.sa_inner;
    const uint offb = zo * p.sb_outer + (zi / p.b_div) * p.sb_inner;
    const uint offc = zo * p.sc_outer + zi * p.sc_inner;
    const uint row0 = (gl_WorkGroupID.y + p.y_base) * BM;
    const uint col0 = (gl_WorkGroupID.x + p.x_base) * BN;
    const bool trans_b = (p.flags & FLAG_TRANS_B) != 0u;

    float acc[TM * TN];
    for (uint i = 0u; i < TM * TN; i++)
        acc[i] = 0.0;

    for (uint k0 = 0u; k0 < p.K; k0 += BK) {
        // A tile: BM rows x BK columns, read along rows of A.
        if (VEC) {
            for (uint l = tid; l < BM * BK / 4u; l += WG) {
                const uint m = l / (BK / 4u), kk = (l % (BK / 4u)) * 4u;
                const uint gr = row0 + m, gk = k0 + kk;
                vec4 v = vec4(0.0);
                if (gr < p.M && gk < p.K)
                    v = ld4_a((offa + gr * p.lda + gk) / 4u);
                store4(true, kk * BM + m, BM, v);
            }
        } else {
            for (uint l = tid; l < BM * BK; l += WG) {
                const uint m = l / BK, kk = l % BK;
                const uint gr = row0 + m, gk = k0 + kk;
                As[kk * BM + m] = (gr < p.M && gk < p.K) ? ld_a(offa + gr * p.lda + gk) : 0.0;
            }
        }
        // op(B) tile: BK rows x BN columns, read along B's contiguous axis.
        if (trans_b) {
            if (VEC) {
                for (uint l = tid; l < BN * BK / 4u; l += WG) {
                    const uint n = l / (BK / 4u), kk = (l % (BK / 4u)) * 4u;
                    const uint gn = col0 + n, gk = k0 + kk;
                    vec4 v = vec4(0.0);
                    if (gn < p.N && gk < p.K)
                        v = ld4_b((offb + gn * p.ldb + gk) / 4u);
                    store4(false, kk * BN + n, BN, v);
                }
            } else {
                for (uint l = tid; l < BN * BK; l += WG) {
                    const uint n = l / BK, kk = l % BK;
                    const uint gn = col0 + n, gk = k0 + kk;
                    Bs[kk * BN + n] = (gn < p.N && gk < p.K) ? ld_b(offb + gn * p.ldb + gk) : 0.0;
                }
            }
        } else {
            if (VEC) {
                for (uint l = tid; l < BK * BN / 4u; l += WG) {
                    const uint kk = l / (BN / 4u), n = (l % (BN / 4u)) * 4u;
                    const uint gk = k0 + kk, gn = col0 + n;
                    vec4 v = vec4(0.0);
                    if (gk < p.K && gn < p.N)
                        v = ld4_b((offb + gk * p.ldb + gn) / 4u);
                    store4(false, kk * BN + n, 1u, v);
                }
            } else {
                for (uint l = tid; l < BK * BN; l += WG) {
                    const uint kk = l / BN, n = l % BN;
                    const uint gk = k0 + kk, gn = col0 + n;
                    Bs[kk * BN + n] = (gk < p.K && gn < p.N) ? ld_b(offb + gk * p.ldb + gn) : 0.0;
                }
            }
        }
        barrier();

        for (uint kk = 0u; kk < BK; kk++) {
            float ra[TM];
            float rb[TN];
            for (uint i = 0u; i < TM; i++)
                ra[i] = As[kk * BM + i * WM + ty];
            for (uint j = 0u; j < TN; j++)
                rb[j] = Bs[kk * BN + j * WN + tx];
            for (uint i = 0u; i < TM; i++)
                for (uint j = 0u; j < TN; j++)
                    acc[i * TN + j] = fma(ra[i], rb[j], acc[i * TN + j]);
        }
        barrier();
    }

    const bool has_bias = (p.flags & FLAG_BIAS) != 0u;
    for (uint i = 0u; i < TM; i++) {
        const uint r = row0 + i * WM + ty;
        if (r >= p.M)
            continue;
        for (uint j = 0u; j < TN; j++) {
            const uint col = col0 + j * WN + tx;
            const uint at = offc + r * p.ldc + col;
            if (col < p.N)
                st_c(at, p.alpha * acc[i * TN + j] + (has_bias ? bias_at(r, col) : 0.0) +
                             (ACCUMULATE ? ld_c(at) : 0.0));
        }
    }
}
