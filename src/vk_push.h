/* The C mirrors of the shaders' push-constant blocks, one per op, shared by
 * the op's kernels (GPU and CPU-shaped variants take the same block) and
 * read by the kernel table (src/vk_kernels.c: each row's push size, checked
 * at every dispatch) and the op's recording file. Each starts with
 * vk_dispatch's two misalign words (shaders/typed.glsl's PUSH_MISALIGN) and
 * fits VK_PUSH_BYTES in whole words (VK_PUSH_BLOCK). */
#ifndef VKMHA_VK_PUSH_H
#define VKMHA_VK_PUSH_H

#include <stdint.h>

/* shaders/matmul.comp and matmul_cpu.comp (src/vk_matmul.c). */
struct matmul_push {
    uint32_t misalign[2]; /* vk_dispatch's */
    uint32_t m, n, k;
    uint32_t lda, ldb, ldc;
    uint32_t batch_inner, b_div;
    uint32_t sa_outer, sa_inner;
    uint32_t sb_outer, sb_inner;
    uint32_t sc_outer, sc_inner;
    uint32_t z_base;
    float alpha;
    uint32_t flags;
    uint32_t x_base, y_base;
    uint32_t ld_add;
};
VK_PUSH_BLOCK(matmul_push);

/* shaders/softmax.comp and softmax_cpu.comp (src/vk_softmax.c). */
struct softmax_push {
    uint32_t misalign[2]; /* vk_dispatch's */
    uint32_t rows, len_q, len_k, heads, flags;
    float scale;
    uint32_t bias_sb, bias_sh;
    uint32_t group_base;
    uint32_t texel; /* shaders/softmax_cpu.comp only */
    uint32_t causal_offset;
};
VK_PUSH_BLOCK(softmax_push);

/* shaders/heads.comp and heads_cpu.comp (src/vk_heads.c). */
struct heads_push {
    uint32_t misalign[2]; /* vk_dispatch's */
    uint32_t total, len, heads, head_dim, split;
    uint32_t group_base;
    uint32_t texel; /* shaders/heads_cpu.comp only */
    uint32_t x_sb, x_sh, x_sl, y_sb, y_sh, y_sl; /* per batch entry, head, row */
};
VK_PUSH_BLOCK(heads_push);

/* shaders/layernorm.comp and layernorm_cpu.comp (src/vk_layernorm.c). */
struct layernorm_push {
    uint32_t misalign[2]; /* vk_dispatch's */
    uint32_t rows, cols;
    float eps;
    uint32_t has_residual;
    uint32_t group_base;
    uint32_t texel; /* shaders/layernorm_cpu.comp only */
};
VK_PUSH_BLOCK(layernorm_push);

/* shaders/flash.comp and flash_cpu.comp (src/vk_attention.c). */
struct flash_push {
    uint32_t misalign[2]; /* vk_dispatch's */
    uint32_t groups, len_q, len_k, heads, group;
    uint32_t dims; /* d_k | d_v << 16; the shader derives the split count */
    uint32_t q_blocks, split_len;
    uint32_t q_sb, q_sh, q_ld, k_sb, k_sh, k_ld, v_sb, v_sh, v_ld, o_sb, o_sh, o_ld;
    uint32_t flags; /* vkmha_mask_kind bits | MODE_* */
    float scale;
    uint32_t bias_sb, bias_sh;
    uint32_t kv_first, kv_count;
    uint32_t group_base;
    uint32_t causal_offset; /* mask_hides in shaders/mask.glsl */
    uint32_t kv_b0;         /* vk_attn_plan.kv_b0 */
    uint32_t kv_key0;       /* the first key of a window (vk_attn_plan.window) */
};
VK_PUSH_BLOCK(flash_push);

/* shaders/flash_combine.comp, both variants (src/vk_attention.c). */
struct combine_push {
    uint32_t misalign[2]; /* vk_dispatch's */
    uint32_t rows, len_q, heads, d_v, splits, o_sb, o_sh, o_ld;
    uint32_t group_base;
};
VK_PUSH_BLOCK(combine_push);

#endif
