// What shaders/matmul.comp and matmul_coop.comp share: the output of an
// element (shaders/matmul_out.glsl), and the staging of the tiles, which they
// lay out in shared memory differently: the includer defines where an
// element goes,
//   put_a(m, kk, x)      A (row0 + m, k0 + kk)
//   put_a4(m, kk, v)     A (row0 + m, k0 + kk .. + 3)
//   put_b(kk, n, x)      op(B) (k0 + kk, col0 + n)
//   put_b4_k(kk, n, v)   op(B) (k0 + kk .. + 3, col0 + n)   (op T: a row of B)
//   put_b4_n(kk, n, v)   op(B) (k0 + kk, col0 + n .. + 3)   (op N)
// after WG, BM, BN, BK, VEC, the push block `p` and the typed bindings a and
// b. Elements past M, N or K are zeros; with VEC (the host guarantees the
// alignment: shaders/matmul.comp) the loads are vec4s along the contiguous
// axis.

#include "matmul_out.glsl"

void load_tiles(uint tid, uint k0, uint row0, uint col0, uint offa, uint offb, bool trans_b)
{
    // A tile: BM rows x BK columns, read along rows of A.
    if (VEC) {
        for (uint l = tid; l < BM * BK / 4u; l += WG) {
            const uint m = l / (BK / 4u), kk = (l % (BK / 4u)) * 4u;
            const uint gr = row0 + m, gk = k0 + kk;
            vec4 v = vec4(0.0);
            if (gr < p.M && gk < p.K)
                v = ld4_a((offa + gr * p.lda + gk) / 4u);
            put_a4(m, kk, v);
        }
    } else {
        for (uint l = tid; l < BM * BK; l += WG) {
            const uint m = l / BK, kk = l % BK;
            const uint gr = row0 + m, gk = k0 + kk;
            put_a(m, kk, (gr < p.M && gk < p.K) ? ld_a(offa + gr * p.lda + gk) : 0.0);
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
                put_b4_k(kk, n, v);
            }
        } else {
            for (uint l = tid; l < BN * BK; l += WG) {
                const uint n = l / BK, kk = l % BK;
                const uint gn = col0 + n, gk = k0 + kk;
                put_b(kk, n, (gn < p.N && gk < p.K) ? ld_b(offb + gn * p.ldb + gk) : 0.0);
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
                put_b4_n(kk, n, v);
            }
        } else {
            for (uint l = tid; l < BK * BN; l += WG) {
                const uint kk = l / BN, n = l % BN;
                const uint gk = k0 + kk, gn = col0 + n;
                put_b(kk, n, (gk < p.K && gn < p.N) ? ld_b(offb + gk * p.ldb + gn) : 0.0);
            }
        }
    }
}
