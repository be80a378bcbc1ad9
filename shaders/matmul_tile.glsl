// What shaders/matmul.comp and matmul_coop.comp share: the output of an
// element (shaders/matmul_out.glsl), and the staging of the tiles, which they
// lay out in shared memory differently: the includer defines where an
// element goes,
//   put_a(m, kk, x)      A (row0 + m, k0 + kk)
//   put_a4(m, kk, v)     A (row0 + m, k0 + kk .. + 3)   (v a TILE_VEC4, below)
//   put_b(kk, n, x)      op(B) (k0 + kk, col0 + n)
//   put_b4_k(kk, n, v)   op(B) (k0 + kk .. + 3, col0 + n)   (op T: a row of B)
//   put_b4_n(kk, n, v)   op(B) (k0 + kk, col0 + n .. + 3)   (op N)
// after WG, BM, BN, BK, VEC, the push block `p` and the typed bindings a and
// b. Elements past M, N or K are zeros; with VEC (the host guarantees the
// alignment: shaders/matmul.comp) the loads are vec4s along the contiguous
// axis: TILE_VEC4 values read by TILE_LD4_A / TILE_LD4_B (default vec4,
// ld4_a and ld4_b; matmul_coop.comp takes fp16 bits unconverted). A
// quantized B (shaders/quant.glsl; offb 0) is dequantized as it is read,
// or with TILE_QUANT_CODES (matmul_coop.comp, which applies the groups'
// scales itself) read as its codes minus their zero points.
#ifndef TILE_VEC4
#define TILE_VEC4 vec4
#define TILE_LD4_A ld4_a
#define TILE_LD4_B ld4_b
#endif

#include "matmul_out.glsl"
#include "quant.glsl"
#if defined(TILE_QUANT_CODES) && TILE_QUANT_CODES
#define TILE_QB(r, c) qb_codez(r, c)
#define TILE_QB4(r, c) qb_codes4z(r, c)
#else
#define TILE_QB(r, c) qb_at(r, c)
#define TILE_QB4(r, c) qb_at4(r, c)
#endif

// The vec4 staging (VEC) in two halves, so that a kernel may hold the next
// tile's loads in registers while it computes on the staged one: slot l of
// A's tile (BM * BK / 4 slots) or of op(B)'s (BK * BN / 4), fetched from
// memory for the tile at k0, then put in shared memory.
TILE_VEC4 fetch_a4(uint l, uint k0, uint row0, uint offa)
{
    const uint g = row0 + l / (BK / 4u), gk = k0 + (l % (BK / 4u)) * 4u;
    return g < p.M && gk < p.K ? TILE_LD4_A((offa + g * p.lda + gk) / 4u) : TILE_VEC4(0.0);
}

void put_a4_slot(uint l, TILE_VEC4 v) { put_a4(l / (BK / 4u), (l % (BK / 4u)) * 4u, v); }

TILE_VEC4 fetch_b4(uint l, uint k0, uint col0, uint offb, bool trans_b)
{
    if (trans_b) { // a row of B along K
        const uint g = col0 + l / (BK / 4u), gk = k0 + (l % (BK / 4u)) * 4u;
        if (!(g < p.N && gk < p.K))
            return TILE_VEC4(0.0);
        return quant_b() ? TILE_VEC4(TILE_QB4(g, gk)) : TILE_LD4_B((offb + g * p.ldb + gk) / 4u);
    }
    const uint gk = k0 + l / (BN / 4u), gn = col0 + (l % (BN / 4u)) * 4u;
    if (!(gk < p.K && gn < p.N))
        return TILE_VEC4(0.0);
    return quant_b() ? TILE_VEC4(TILE_QB4(gk, gn)) : TILE_LD4_B((offb + gk * p.ldb + gn) / 4u);
}

void put_b4_slot(uint l, TILE_VEC4 v, bool trans_b)
{
    if (trans_b)
        put_b4_k((l % (BK / 4u)) * 4u, l / (BK / 4u), v);
    else
        put_b4_n(l / (BN / 4u), (l % (BN / 4u)) * 4u, v);
}

// Rows first .. first + R - 1 (of `extent`) of A (is_a), or of B with op T,
// BK elements from k0 along each, one at a time: A's tile, or op(B)'s tile
// transposed.
void load_k_rows(bool is_a, uint tid, uint k0, uint first, uint extent, uint R, uint off,
                 uint ld)
{
    for (uint l = tid; l < R * BK; l += WG) {
        const uint r = l / BK, kk = l % BK;
        const uint g = first + r, gk = k0 + kk;
        float x = 0.0;
        if (g < extent && gk < p.K)
            x = is_a       ? ld_a(off + g * ld + gk)
                : quant_b() ? TILE_QB(g, gk)
                            : ld_b(off + g * ld + gk);
        if (is_a)
            put_a(r, kk, x);
        else
            put_b(kk, r, x);
    }
}

void load_tiles(uint tid, uint k0, uint row0, uint col0, uint offa, uint offb, bool trans_b)
{
    if (VEC) {
        for (uint l = tid; l < BM * BK / 4u; l += WG)
            put_a4_slot(l, fetch_a4(l, k0, row0, offa));
        for (uint l = tid; l < BK * BN / 4u; l += WG)
            put_b4_slot(l, fetch_b4(l, k0, col0, offb, trans_b), trans_b);
        return;
    }
    // A tile: BM rows x BK columns, read along rows of A.
    load_k_rows(true, tid, k0, row0, p.M, BM, offa, p.lda);
    // op(B) tile: BK rows x BN columns, read along B's contiguous axis.
    if (trans_b) {
        load_k_rows(false, tid, k0, col0, p.N, BN, offb, p.ldb);
    } else {
        for (uint l = tid; l < BK * BN; l += WG) {
            const uint kk = l / BN, n = l % BN;
            const uint gk = k0 + kk, gn = col0 + n;
            put_b(kk, n, !(gk < p.K && gn < p.N) ? 0.0
                         : quant_b()                ? TILE_QB(gk, gn)
                                                    : ld_b(offb + gk * p.ldb + gn));
        }
    }
}
