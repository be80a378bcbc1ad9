/* Layers 8-10 of the Vulkan backend (see src/vk_base.h): the ops, one file
 * each, and the attention. */
#ifndef VKMHA_VK_OPS_H
#define VKMHA_VK_OPS_H

#include "vk_exec.h"
/* ---- recording of each op (no uploads, no submit), one file per op ------- */
/* C[z] = alpha A[z] op(B[z]) + bias for z in [0, batch_outer * batch_inner),
 * z = zo * batch_inner + zi: A[z] is view a at (zo, zi) (stride[0] and
 * stride[1]) with rows stride[2] apart; B[z] is b at (zo, zi / b_div); C
 * likewise. bias: [n], absent (buf NULL) or not. */
typedef struct vk_matmul_args {
    vk_view a, b, bias, c;
    uint32_t m, n, k;
    bool trans_b;
    float alpha;
    uint32_t batch_outer, batch_inner, b_div;
    bool accumulate; /* C += alpha A op(B) (+ bias) */
    bool addend;     /* bias is an fp32 [m][n] at its stride[2] (vk_record_matmul) */
    /* A quantized B (quant.type 0: none): b's view (dtype VK_DTYPE_I8 for
     * Q8, VK_DTYPE_U4 for Q4 and Q4Z) holds one matrix [quant.rows]
     * [quant.cols] in the layout qlayout (shaders/quant.glsl), bound
     * whole: its windows are copied (vk_record_matmul). */
    vkmha_quant_desc quant;
    vkmha_quant_layout qlayout;
} vk_matmul_args;
/* Records C = alpha A op(B) + bias. Operands past maxStorageBufferRange
 * (one product only) are bound in windows: B over its rows with op T (the
 * output's columns), over its rows with op N (ranges of k, accumulated into
 * C, or for a 16-bit C into fp32 sums in SLOT_MM_ACC that the last range
 * adds: one rounding), A and C over rows; a quantized B's window of rows
 * is first copied into SLOT_MM_QB as a matrix of its own (its planes'
 * ranges, between two barriers). Each window after the first takes the
 * next site of vk->desc.window_sites[KIND_MATMUL] (vk_matmul_prepare before
 * the plan, for all of its matmuls, sizes SLOT_MM_ACC and SLOT_MM_QB). A
 * batched operand past it: UNSUPPORTED. */
vkmha_status vk_record_matmul(vk_state *vk, vk_site *site, const vk_matmul_args *a);
/* Before a plan that records the n matmuls a[0 .. n - 1]: the window sites
 * their windows take (vk_window_sites_reserve); UNSUPPORTED naming the
 * operand of one that cannot be windowed. */
vkmha_status vk_matmul_prepare(vk_state *vk, const vk_matmul_args *a, uint32_t n);
/* The args of a public matmul (s) on dense views a, b, bias (absent or not)
 * and c: s's strides go into them. */
vk_matmul_args vk_matmul_args_of(const mm_shape *s, vk_view a, vk_view b, vk_view bias,
                                 vk_view c);

vkmha_status vk_record_softmax(vk_state *vk, vk_site *site, const vk_softmax_args *a);

/* x [batch][len][heads * head_dim] -> y [batch][heads][len][head_dim]
 * (split), or back; dense views, except that a split's y may have strides
 * per batch entry and head (stride[0], stride[1]; 0: dense) with each
 * head's rows contiguous (a KV cache's entries). */
vkmha_status vk_record_heads(vk_state *vk, vk_site *site, const heads_shape *s, bool split,
                             vk_view x, vk_view y);
/* vk_record_heads in blocks (whole entries, heads of one entry, rows of one
 * head) whose spans of x and y each fit one binding, when they do not as a
 * whole; the blocks after the first take sites of vk->desc.window_sites[KIND_HEADS]
 * (vk_heads_blocks - 1 of them, ensured before the plan). */
vkmha_status vk_record_heads_blocks(vk_state *vk, vk_site *site, const heads_shape *s,
                                    bool split, vk_view x, vk_view y);
/* The blocks it records (1: whole; 0: not one row fits). */
uint64_t vk_heads_blocks(const vk_state *vk, const heads_shape *s, bool split, const vk_view *x,
                         const vk_view *y);

/* y = LayerNorm(y + residual) over rows of cols, in place (residual absent
 * or not); dense views. */
vkmha_status vk_record_layernorm(vk_state *vk, vk_site *site, uint32_t rows, uint32_t cols,
                                 float eps, vk_view residual, vk_view gamma, vk_view beta,
                                 vk_view y);
/* Chooses the path, blocks and key splits for shape s (fn names the public
 * call in messages) and ensures the slots it needs besides q, k, v, out and
 * the masks: SLOT_SCORES when unfused or weights (unless weights_view, the
 * caller's weights tensor, takes its place), SLOT_STATS, and the split-K
 * partials. plan->masks are the mask slots: a caller with mask tensors
 * replaces them. UNSUPPORTED if the fused path was forced for head dims
 * above 256. qkvo: the views q, k, v and out will be read from and written
 * to (out's buf NULL: a slot, in out's dtype), which decide whether the CPU-shaped kernel can
 * read them as vec4 texels, and whether k and v (from entry kv_b0, the
 * plan's) fit one binding or are bound in windows (plan->window: the fused
 * path's, or one product's matmul windows on the unfused path; the window
 * sites are ensured here). */
vkmha_status vk_attention_prepare(vk_state *vk, const attn_shape *s, const mask_r *mask,
                                  bool weights, const vk_view *weights_view,
                                  const vk_view qkvo[4], uint32_t kv_b0, vk_attn_plan *plan);
/* The unfused path's matmuls of `plan`: scores = scale q k^T (mm[0]) and
 * out = p v (mm[1]), from the plan's first cache entry, in fp32 `scores`. */
void vk_attention_unfused_matmuls(const vk_attn_plan *plan, const vk_view *q,
                                  const vk_view *k_all, const vk_view *v_all, const vk_view *out,
                                  const vk_view *scores, vk_matmul_args mm[2]);
/* Product (entry b, query head h) of one of those batched matmuls, alone. */
vk_matmul_args vk_attention_product(const vk_matmul_args *m, uint64_t b, uint64_t h);
/* Where the unfused path keeps its fp32 scores: the caller's fp32 weights,
 * else SLOT_SCORES. */
vk_view vk_attention_unfused_scores(vk_state *vk, const vk_attn_plan *plan);
/* Records the attention of `plan` from q, k, v (+ masks in the mask slots)
 * into out, and the weights into SLOT_SCORES if planned. out may share q's
 * buffer when d_k == d_v and the views match (q is read before out is
 * written), as the layer's concat does. Uses VK_ATTENTION_SITES sites. */
vkmha_status vk_record_attention(vk_state *vk, vk_site sites[], const vk_attn_plan *plan,
                                 const mask_r *mask, const vk_view *q, const vk_view *k,
                                 const vk_view *v, const vk_view *out);

/* Public ops on the Vulkan backend, on host arrays. */
vkmha_status vk_matmul(vk_state *vk, const mm_shape *s, const void *a, const void *b,
                       const void *bias, void *c);
vkmha_status vk_softmax(vk_state *vk, const sm_shape *s, const void *x, const mask_r *mask,
                        void *y);
vkmha_status vk_heads(vk_state *vk, const heads_shape *s, bool split, const void *x,
                      void *y);
/* Residual add + LayerNorm on host arrays (ref_layernorm's arguments; res may
 * be NULL): no public op, for the kernel benchmark and the layernorm test,
 * which link the library's objects. */
vkmha_status vk_layernorm(vk_state *vk, uint32_t rows, uint32_t cols, float eps,
                          const float *x, const float *res, const float *gamma,
                          const float *beta, float *y);
vkmha_status vk_attention(vk_state *vk, const attn_shape *s, const void *q, const void *k,
                          const void *v, const mask_r *mask, void *out, void *weights);

#endif
