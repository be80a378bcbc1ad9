// The push-constant block of shaders/matmul.comp and matmul_cpu.comp, and its
// C mirror struct matmul_push: this file is both. The shaders include it after
// typed.glsl, whose PUSH_BEGIN, PUSH_END, PUSH_MISALIGN and PUSH_CONST make it
// a GLSL block `p` and constants; src/vk_push.h includes it with C definitions
// of the same macros (and `uint` as uint32_t), which make it a struct and an
// enum. One list of members, so the two cannot drift apart. Members: 32-bit
// scalars only (uint, float), which std430 and C lay out alike.
PUSH_BEGIN(matmul_push)
    PUSH_MISALIGN   // vk_dispatch's (shaders/typed.glsl)
    uint M, N, K;
    uint lda, ldb, ldc;
    uint batch_inner, b_div;
    uint sa_outer, sa_inner;
    uint sb_outer, sb_inner;
    uint sc_outer, sc_inner;
    uint z_base; // first batch index of this dispatch
    float alpha;
    uint flags;  // FLAG_* below
    uint x_base, y_base; // first column and row tile of this dispatch
    uint ld_add; // ADDEND: the bias binding's row stride
    // A quantized B (shaders/quant.glsl): the bytes of its scales and (Q4Z;
    // 0 otherwise) zero points from its start, and log2 of its group size.
    uint q_scales, q_zeros, q_shift;
PUSH_END(matmul_push)

PUSH_CONST(FLAG_TRANS_B, 1u) // op(B) = B^T
PUSH_CONST(FLAG_BIAS, 2u)   // the bias binding is added to every row
