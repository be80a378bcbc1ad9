/* Residual add + LayerNorm: push-constant mirror and dispatch math (one
 * workgroup per row; on CPU devices one invocation per row up to
 * VK_CPU_ROW_MAX columns). Used by the layer's post-norm. */
#include "vk_ops.h"

#include <stddef.h>


vkmha_status vk_record_layernorm(vk_state *vk, vk_site *site, uint32_t rows, uint32_t cols,
                                 float eps, vk_view residual, vk_view gamma, vk_view beta,
                                 vk_view y)
{
    /* Texel reads need vec4 views of every input in its dtype (wrapped
     * tensors and bf16 have none). */
    const bool has_res = residual.buf != NULL;
    const vk_view *const in[4] = {&y, &gamma, &beta, &residual};
    bool texel = vk->tuning.row_texel && vk_texel_ok(in, has_res ? 4 : 3, false);
    struct layernorm_push p = {.rows = rows, .cols = cols, .eps = eps,
                               .has_residual = has_res ? 1u : 0u, .texel = texel};
    const vk_view bufs[4] = {residual, gamma, beta, y};
    if (vk->tuning.cpu_rows_wg && cols <= VK_CPU_ROW_MAX) /* a row per invocation */
        return vk_dispatch_groups(vk, site, VK_PIPE(KERNEL_LAYERNORM_CPU), bufs, 4, &p, sizeof p,
                                  offsetof(struct layernorm_push, group_base),
                                  (rows + vk->tuning.cpu_rows_wg - 1) / vk->tuning.cpu_rows_wg);
    return vk_dispatch_groups(vk, site, VK_PIPE(KERNEL_LAYERNORM), bufs, 4, &p, sizeof p,
                              offsetof(struct layernorm_push, group_base), rows);
}

typedef struct layernorm_op {
    uint32_t rows, cols;
    float eps;
    bool residual;
} layernorm_op;

static vkmha_status record_op(vk_state *vk, const void *arg)
{
    const layernorm_op *o = arg;
    return vk_record_layernorm(vk, &vk->desc.op_sites.sites[OPSITE_LAYERNORM], o->rows, o->cols,
                               o->eps, vk_view_of(o->residual ? &vk->mem.slots[SLOT_K_IN] : NULL, 0),
                               vk_view_of(&vk->mem.slots[SLOT_V_IN], 0),
                               vk_view_of(&vk->mem.slots[SLOT_AUX], 0),
                               vk_view_of(&vk->mem.slots[SLOT_OUT], 0));
}

vkmha_status vk_layernorm(vk_state *vk, uint32_t rows, uint32_t cols, float eps,
                          const float *x, const float *res, const float *gamma,
                          const float *beta, float *y)
{
    vkmha_status st;
    const size_t bytes = (size_t)rows * cols * 4, vec = (size_t)cols * 4;
    if ((st = vk_check_size(vk, bytes, "x")) || (st = vk_slot_ensure(vk, SLOT_OUT, bytes)) ||
        (res && (st = vk_slot_ensure(vk, SLOT_K_IN, bytes))) ||
        (st = vk_slot_ensure(vk, SLOT_V_IN, vec)) || (st = vk_slot_ensure(vk, SLOT_AUX, vec)))
        return st;
    /* x is uploaded into y's slot: the LayerNorm runs in place. */
    const layernorm_op op = {rows, cols, eps, res != NULL};
    const vk_host_call call = {.up = {{&vk->mem.slots[SLOT_OUT], x, bytes},
                                      {&vk->mem.slots[SLOT_K_IN], res, res ? bytes : 0},
                                      {&vk->mem.slots[SLOT_V_IN], gamma, vec},
                                      {&vk->mem.slots[SLOT_AUX], beta, vec}},
                               .down = {{&vk->mem.slots[SLOT_OUT], y, bytes, 1, bytes, 1, bytes}},
                               .record = record_op, .arg = &op};
    return vk_run_host(vk, &call);
}
