/* Layers 11-14 of the Vulkan backend (see src/vk_base.h): device tensors and
 * the ops' forms, the self-check, KV caches, the layer, the context. Tools
 * and tests include this one, which includes every other. */
#ifndef VKMHA_VK_INTERNAL_H
#define VKMHA_VK_INTERNAL_H

#include "vk_ops.h"
/* ---- compile-only contexts (src/context.c), for tools/vkmha-occupancy ---- */
/* vkmha__context_create_compile_only (src/internal.h): like
 * vkmha_context_create (desc->vulkan must be NULL), for a device that
 * compiles pipelines but cannot run them: Mesa's RADV with RADV_FORCE_FAMILY
 * and no GPU, a null device without memory types or fences whose queue must
 * never be used. The device, tiles and specialization constants are chosen
 * exactly as vkmha_context_create chooses them on that device; the device
 * also enables VK_KHR_pipeline_executable_properties (UNSUPPORTED without it)
 * and every pipeline is created with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR
 * (vk_pipeline_statistics). The context has no memory, command buffer,
 * fence or pipeline cache and never waits on the device: only
 * vk_pipe_info_get, vk_pipeline_get, vk_pipeline_statistics,
 * vkmha_context_get_info and vkmha_context_destroy may be used on it. */

/* ---- src/vk_context.c ---------------------------------------------------- */
/* The Vulkan backend's table is vk_backend_ops (src/internal.h).
 * compile_only: see vkmha__context_create_compile_only. */
vkmha_status vk_create(vkmha_context *ctx, const vkmha_context_desc *desc, bool compile_only);
void vk_destroy(vk_state *vk);

/* src/vk_selfcheck.c: the self-check (vkmha_path). vk_self_check applies
 * VKMHA_DISABLE_PATHS, then (run) marks every path to be checked and (now)
 * checks them all at once; breaks: desc->debug->self_check_break. Each op
 * then calls vk_self_check_need with the paths it may take, before it plans
 * or records anything: the canaries of those not checked yet run first,
 * with those of VK_CHECK_BASE (the paths that change every pipeline's code
 * or the tensors' memory: checked before any pipeline is used). The bits
 * are VKMHA_PATH_* and VK_CHECK_UNFUSED (the unfused attention, which has
 * no fallback: found wrong, every attention fails). */
#define VK_CHECK_UNFUSED (1u << 31)
#define VK_CHECK_BASE (VKMHA_PATH_NATIVE_16BIT | VKMHA_PATH_SUBGROUP | VKMHA_PATH_SPARSE)
#define VK_CHECK_MATMUL \
    (VKMHA_PATH_COOPMAT_MATMUL | VKMHA_PATH_COOPMAT2_MATMUL | VKMHA_PATH_MATMUL_GEMV)
vkmha_status vk_self_check(vk_state *vk, bool run, bool now, uint32_t breaks);
vkmha_status vk_self_check_need(vk_state *vk, uint32_t paths);
/* The paths an attention of head dims d_k, d_v may take: its matmuls, the
 * unfused path and each fused kernel of its head-dim class. */
uint32_t vk_check_attention(uint32_t d_k, uint32_t d_v);

/* ---- the backend table's entries (vk_backend_ops, src/vk_context.c) ------ */

/* src/vk_tensor.c: a tensor is a device buffer. */
typedef struct vk_tensor {
    vkmha_tensor t;
    bool wrapped;  /* buf.buf is the application's */
    vk_buffer buf;
} vk_tensor;
/* The buffer of a tensor of the Vulkan backend (NULL: NULL). */
vk_buffer *vk_tensor_buf(const vkmha_tensor *t);
/* Whether the whole tensor fits one binding from where it starts
 * (vk_view_fits). */
bool vk_tensor_fits(const vk_state *vk, const vkmha_tensor *t);
/* The dense view of a tensor argument (absent: no tensor). */
vk_view vk_tensor_view(const vkmha_arg *a);
/* Views of a mask's tensors (absent where a kind has none). */
void vk_tensor_masks(const vkmha_mask_arg *m, vk_view views[3]);
/* vk_exec_begin / vk_exec_end in a tensor form (FORM_TENSOR: MODE_SYNC,
 * FORM_RECORD: into run->cmd, FORM_SUBMIT: *run->sub). */
vkmha_status vk_run_begin(vk_state *vk, const vkmha_run *run);
vkmha_status vk_run_end(vk_state *vk, const vkmha_run *run, vkmha_status st);
vkmha_status vk_tensor_alloc(vkmha_tensor *t);
vkmha_status vk_tensor_wrap(vkmha_context *ctx, const vkmha_tensor_desc *desc, uint64_t handle,
                            uint64_t offset, uint64_t size, vkmha_tensor **out);
void vk_tensor_free(vkmha_tensor *t);
vkmha_status vk_tensor_copy(const vkmha_tensor *t, uint64_t offset, void *host, uint64_t bytes,
                            bool up);
vkmha_status vk_op_matmul(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                          const vkmha_arg *a, const vkmha_arg *b, const vkmha_arg *bias,
                          const vkmha_arg *c);
vkmha_status vk_op_softmax(vkmha_context *ctx, const vkmha_run *run, const sm_shape *s,
                           const vkmha_arg *x, const vkmha_mask_arg *mask, const vkmha_arg *y);
vkmha_status vk_op_heads(vkmha_context *ctx, const vkmha_run *run, const heads_shape *s,
                         bool split, const vkmha_arg *x, const vkmha_arg *y);
vkmha_status vk_op_attention(vkmha_context *ctx, const vkmha_run *run, const attn_shape *s,
                             const vkmha_arg *q, const vkmha_arg *k, const vkmha_arg *v,
                             const vkmha_mask_arg *mask, const vkmha_arg *out,
                             const vkmha_arg *weights);

/* src/vk_mha.c: the layer's weights on the device. */
typedef struct vk_mha {
    vkmha_mha m;
    vk_buffer dev[WEIGHT_COUNT]; /* in m.d.storage_dtype; buf null where absent */
    /* A projection weight (W_Q + i) [out][in] past maxMemoryAllocationSize
     * is kept in n_blocks[i] blocks of block_rows[i] rows, one allocation
     * each: dev[W_Q + i], then more[i][0 ..]; 1 block: whole. */
    uint32_t n_blocks[4], block_rows[4];
    vk_buffer *more[4];
    /* The forward's descriptor sites: SITE_COUNT (src/vk_mha.c) per part of
     * a mixed batch (a site is used at most once per command buffer), of
     * which `part` is the part being planned; n_part_sites parts' worth. */
    vk_site_pool sites;
    uint32_t part, n_part_sites;
    /* RoPE's (cos, sin) table of the forward being recorded (host memory
     * that vk_update reads when the plan runs), grown as needed; a mixed
     * batch's part's from float rope_at on. */
    float *rope;
    size_t rope_cap, rope_at; /* floats */
} vk_mha;
/* A KV cache on the Vulkan backend (src/vk_kv_cache.c): the key lengths a
 * forward's attention reads (written into the command buffer by each
 * forward: vk_update), a buffer of zeros as long as one (entry, head) run
 * of the longer head dim (what kv_clear copies from: copies take any
 * alignment), and two heads sites per entry for the appends (one dispatch
 * per run of entries of equal length). */
typedef struct vk_kv {
    vkmha_kv_cache c;
    vk_buffer lens, zeros;
    vk_site_pool sites;
} vk_kv;
vkmha_status vk_kv_create(vkmha_kv_cache *c);
void vk_kv_free(vkmha_kv_cache *c);
vkmha_status vk_kv_clear(vkmha_kv_cache *c, uint32_t first, uint32_t count, uint32_t from);
vkmha_status vk_kv_reorder(vkmha_kv_cache *c, const uint32_t *src);
/* A cache tensor (keys, or values with v) as split heads of every entry. */
vk_view vk_kv_view(const vkmha_kv_cache *c, bool v);

vkmha_status vk_mha_weights(vkmha_mha *mha, const void *const src[WEIGHT_COUNT],
                            const uint32_t dt[WEIGHT_COUNT], const uint64_t n[WEIGHT_COUNT]);
void vk_mha_free(vkmha_mha *mha);
vkmha_status vk_mha_forward(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                            const vkmha_arg io[5]);

#endif
