/* Residual add + LayerNorm: push-constant mirror and dispatch math (one
 * workgroup per row). Used by the layer's post-norm. */
#include "vk_internal.h"

/* Mirrors the push-constant block of shaders/layernorm.comp. */
struct layernorm_push {
    uint32_t rows, cols;
    float eps;
    uint32_t has_residual;
};
_Static_assert(sizeof(struct layernorm_push) <= 128, "push constants must fit 128 bytes");

vkmha_status vk_record_layernorm(vk_state *vk, vk_site *site, uint32_t rows, uint32_t cols,
                                 float eps, const vk_buffer *residual,
                                 const vk_buffer *gamma, const vk_buffer *beta,
                                 vk_buffer *y)
{
    uint32_t gx, gy;
    vkmha_status st = vk_grid(vk, rows, "layernorm rows", &gx, &gy);
    if (st)
        return st;
    struct layernorm_push p = {rows, cols, eps, residual ? 1u : 0u};
    const vk_buffer *bufs[4] = {residual, gamma, beta, y};
    return vk_dispatch(vk, site, PIPE_LAYERNORM, bufs, 4, &p, sizeof p, gx, gy, 1);
}
