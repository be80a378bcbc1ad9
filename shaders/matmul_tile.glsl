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

// Rows first .. first + R - 1 (of `extent`) of A (is_a), or of B with op T,
// BK elements from k0 along each: A's tile, or op(B)'s tile transposed.
void load_k_rows(bool is_a, uint tid, uint k0, uint first, uint extent, uint R, uint off,
                 uint ld)
{
    if (VEC) {
        for (uint l = tid; l < R * BK / 4u; l += WG) {
            const uint r = l / (BK / 4u), kk = (l % (BK / 4u)) * 4u;
            const uint g = first + r, gk = k0 + kk;
            vec4 v = vec4(0.0);
            if (g < extent && gk < p.K)
                v = is_a ? ld4_a((off + g * ld + gk) / 4u) : ld4_b((off + g * ld + gk) / 4u);
            if (is_a)
                put_a4(r, kk, v);
            else
                put_b4_k(kk, r, v);
        }
    } else {
        for (uint l = tid; l < R * BK; l += WG) {
            const uint r = l / BK, kk = l % BK;
            const uint g = first + r, gk = k0 + kk;
            float x = 0.0;
            if (g < extent && gk < p.K)
                x = is_a ? ld_a(off + g * ld + gk) : ld_b(off + g * ld + gk);
            if (is_a)
                put_a(r, kk, x);
            else
                put_b(kk, r, x);
        }
    }
}

void load_tiles(uint tid, uint k0, uint row0, uint col0, uint offa, uint offb, bool trans_b)
{
    // A tile: BM rows x BK columns, read along rows of A.
    load_k_rows(true, tid, k0, row0, p.M, BM, offa, p.lda);
    // op(B) tile: BK rows x BN columns, read along B's contiguous axis.
    if (trans_b) {
        load_k_rows(false, tid, k0, col0, p.N, BN, offb, p.ldb);
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
