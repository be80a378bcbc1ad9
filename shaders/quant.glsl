// A quantized B of the matmul kernels (vkmha_matmul_desc.b_quant;
// src/vk_matmul.c): binding b (dtype slot 1) holds one matrix [rows][cols]
// in the layout of include/vkmha.h, "Quantized weights": the values (Q8:
// int8, dtype DT_I8; Q4 and Q4Z: 4-bit codes, two per byte, the low nibble
// first, DT_U4), row after row with cols = p.ldb; fp16 scales
// [rows][cols >> p.q_shift] at byte p.q_scales; for Q4Z a zero point a byte
// each, [rows][cols >> p.q_shift] at byte p.q_zeros (0 for Q8 and Q4,
// whose zero is 0 and 8). An element is scale * (q - zero), exact in fp32
// (11 bits of scale times at most 8), as the reference dequantizes it; the
// bytes are read as they are (a zero point's low 4 bits). The matrix is
// read through the binding's words (b_w, declared by TYPED_IN for every
// dtype) from MISALIGN_BYTES(1).
// Include after the push block and TYPED_IN(.., 1, b).

// Whether B is quantized: its dtype, a specialization constant, so the
// other branch is folded away.
bool quant_b()
{
    return DTYPE(1) == DT_I8 || DTYPE(1) == DT_U4;
}

// Byte `at` of the matrix.
uint qb_byte(uint at)
{
    at += MISALIGN_BYTES(1);
    return (b_w[at >> 2] >> (8u * (at & 3u))) & 0xffu;
}

// The zero point of the group of element (row, col).
float qb_zero(uint row, uint col)
{
    const uint g = row * (p.ldb >> p.q_shift) + (col >> p.q_shift);
    return DTYPE(1) == DT_I8 ? 0.0 : p.q_zeros != 0u ? float(qb_byte(p.q_zeros + g) & 15u) : 8.0;
}

// The scale of the group of element (row, col).
float qb_scale(uint row, uint col)
{
    const uint g = row * (p.ldb >> p.q_shift) + (col >> p.q_shift);
    const uint at = p.q_scales + 2u * g + MISALIGN_BYTES(1); // even
    return f16_bits_to_f32((b_w[at >> 2] >> (8u * (at & 3u))) & 0xffffu);
}

// The scale and the zero point of the group of element (row, col).
vec2 qb_group(uint row, uint col)
{
    return vec2(qb_scale(row, col), qb_zero(row, col));
}

// The code of element i (row * cols + col) as a float: int8, or 0..15.
float qb_code(uint i)
{
    if (DTYPE(1) == DT_I8)
        return float(int(qb_byte(i) << 24) >> 24);
    return float((qb_byte(i >> 1) >> (4u * (i & 1u))) & 15u);
}

// Element (row, col) of the stored matrix.
float qb_at(uint row, uint col)
{
    const vec2 sz = qb_group(row, col);
    return sz.x * (qb_code(row * p.ldb + col) - sz.y);
}

// The codes of elements (row, col .. col + 3), col a multiple of 4 (one
// group: group sizes are multiples of 32), as floats (int8, or 0..15): one
// word of Q8 codes, or two bytes of Q4, where the binding's start keeps
// them in one word.
vec4 qb_codes4(uint row, uint col)
{
    const uint i = row * p.ldb + col; // a multiple of 4: cols is one
    if ((MISALIGN_BYTES(1) & 3u) != 0u)
        return vec4(qb_code(i), qb_code(i + 1u), qb_code(i + 2u), qb_code(i + 3u));
    if (DTYPE(1) == DT_I8) {
        const uint w = b_w[(i + MISALIGN_BYTES(1)) >> 2];
        return i8x4_to_vec4(w);
    }
    const uint at = (i >> 1) + MISALIGN_BYTES(1); // even
    const uint h = b_w[at >> 2] >> (8u * (at & 3u));
    return vec4(h & 15u, (h >> 4) & 15u, (h >> 8) & 15u, (h >> 12) & 15u);
}

// 4-bit codes of elements (row, col .. col + 7), col a multiple of 8, from
// one word: the first four returned, the next four in *hi. Only where the
// binding starts on a word (MISALIGN_BYTES(1) a multiple of 4).
vec4 qb_codes8(uint row, uint col, out vec4 hi)
{
    const uint w = b_w[(((row * p.ldb + col) >> 1) + MISALIGN_BYTES(1)) >> 2];
    hi = vec4((w >> 16) & 15u, (w >> 20) & 15u, (w >> 24) & 15u, w >> 28);
    return vec4(w & 15u, (w >> 4) & 15u, (w >> 8) & 15u, (w >> 12) & 15u);
}

// Elements (row, col .. col + 3) of the stored matrix, col as above.
vec4 qb_at4(uint row, uint col)
{
    const vec2 sz = qb_group(row, col);
    return sz.x * (qb_codes4(row, col) - sz.y);
}

// A kernel that scales by group itself (shaders/matmul_coop.comp) reads the
// codes minus their zero point, small integers (exact in fp16).
float qb_codez(uint row, uint col)
{
    return qb_code(row * p.ldb + col) - qb_zero(row, col);
}

vec4 qb_codes4z(uint row, uint col)
{
    return qb_codes4(row, col) - qb_zero(row, col);
}
