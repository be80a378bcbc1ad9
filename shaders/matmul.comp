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

// Each of any float dtype (shaders/typed.glsl); vec4 reads with VEC.
TYPED_IN(0, 0, a)
TYPED_IN(1, 1, b)
TYPED_IN(2, 2, bias) // [N], or [M][ld_add] (ADDEND)
TYPED_IO(3, 3, c)

const uint WM = BM / TM; // invocations along M
const uint WN = BN / TN; // invocations along N

shared float As[BK * BM]; // As[k * BM + m]: A tile, transposed
shared float Bs[BK * BN]; // Bs[k * BN + n]: op(B) tile

void put_a(uint m, uint kk, float x) { As[kk * BM + m] = x; }
void put_b(uint kk, uint n, float x) { Bs[kk * BN + n] = x; }
void put_a4(uint m, uint kk, vec4 v)
{
    As[kk * BM + m] = v.x; As[(kk + 1u) * BM + m] = v.y;
    As[(kk + 2u) * BM + m] = v.z; As[(kk + 3u) * BM + m] = v.w;
}
void put_b4_k(uint kk, uint n, vec4 v)
{
    Bs[kk * BN + n] = v.x; Bs[(kk + 1u) * BN + n] = v.y;
    Bs[(kk + 2u) * BN + n] = v.z; Bs[(kk + 3u) * BN + n] = v.w;
}
void put_b4_n(uint kk, uint n, vec4 v)
{
    const uint at = kk * BN + n;
    Bs[at] = v.x; Bs[at + 1u] = v.y; Bs[at + 2u] = v.z; Bs[at + 3u] = v.w;
}
#include "matmul_tile.glsl"

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
        load_tiles(tid, k0, row0, col0, offa, offb, trans_b);
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

    for (uint i = 0u; i < TM; i++) {
        const uint r = row0 + i * WM + ty;
        if (r >= p.M)
            continue;
        for (uint j = 0u; j < TN; j++) {
            const uint col = col0 + j * WN + tx;
            if (col < p.N)
                store_out(offc, r, col, acc[i * TN + j]);
        }
    }
}
