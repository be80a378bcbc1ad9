/* Residual add + LayerNorm: push-constant mirror and dispatch math (one
 * workgroup per row). Used by the layer's post-norm. */
#include "vk_internal.h"

#include <stddef.h>

/* Mirrors the push-constant block of shaders/layernorm.comp. */
struct layernorm_push {
    uint32_t rows, cols;
    float eps;
    uint32_t has_residual;
    uint32_t group_base;
};
_Static_assert(sizeof(struct layernorm_push) <= 128, "push constants must fit 128 bytes");

vkmha_status vk_record_layernorm(vk_state *vk, vk_site *site, uint32_t rows, uint32_t cols,
                                 float eps, const vk_buffer *residual,
                                 const vk_buffer *gamma, const vk_buffer *beta,
                                 vk_buffer *y)
{
    struct layernorm_push p = {rows, cols, eps, residual ? 1u : 0u, 0};
    const vk_buffer *bufs[4] = {residual, gamma, beta, y};
    return vk_dispatch_groups(vk, site, PIPE_LAYERNORM, bufs, 4, &p, sizeof p,
                              offsetof(struct layernorm_push, group_base), rows);
}
