/* The masked, scaled softmax: push-constant mirror, dispatch
 * math (one workgroup per row; on CPU devices one invocation per row up to
 * VK_CPU_ROW_MAX keys), and the public op on host arrays. */
#include "vk_ops.h"

#include <stddef.h>


/* The shader's MASK_* bits are vkmha_mask_kind's. */
_Static_assert(VKMHA_MASK_KEY_PADDING == 1 && VKMHA_MASK_FULL == 2 && VKMHA_MASK_CAUSAL == 4 &&
                   VKMHA_MASK_BIAS == 8 && VKMHA_MASK_WINDOW == 16 && VKMHA_MASK_ALIBI == 32 &&
                   VKMHA_MASK_SOFTCAP == 64 && VKMHA_MASK_SINKS == 128,
               "shaders/mask.glsl's MASK_* values");

vkmha_status vk_record_softmax(vk_state *vk, vk_site *site, const vk_softmax_args *a)
{
    const mask_r *m = a->mask;
    uint64_t rows = (uint64_t)a->batch * a->heads * a->len_q;
    vk_view rules;
    vkmha_status st = vk_head_rules(vk, m, a->heads, &rules);
    if (st)
        return st;
    const vk_view bufs[7] = {a->masks[0], a->masks[1], a->masks[2], a->scores,
                             a->input.buf ? a->input : a->scores, a->lengths, rules};
    /* Texel reads need vec4 views of the input and of the bias, if any
     * (wrapped tensors have none). */
    bool texel = vk->tuning.row_texel && vk_texel_ok((const vk_view *const[]){&bufs[4]}, 1, false) &&
                 (!bufs[2].buf || vk_texel_view(&bufs[2], false));
    struct softmax_push p = {.rows = (uint32_t)rows, .len_q = a->len_q, .len_k = a->len_k,
                             .heads = a->heads,
                             .flags = m->kinds | (a->lengths.buf ? VK_MASK_LENGTHS : 0),
                             .scale = a->scale, .texel = texel,
                             .causal_offset = m->causal_offset};
    vk_bias_strides(m, a->len_q, a->len_k, &p.bias_sb, &p.bias_sh);
    vk_rules_push(m, &p.window, &p.softcap);
    if (vk->tuning.cpu_rows_wg && a->len_k <= VK_CPU_ROW_MAX) /* a row per invocation */
        return vk_dispatch_groups(vk, site, VK_PIPE(KERNEL_SOFTMAX_CPU), bufs, 7, &p, sizeof p,
                                  offsetof(struct softmax_push, group_base),
                                  (rows + vk->tuning.cpu_rows_wg - 1) / vk->tuning.cpu_rows_wg);
    return vk_dispatch_groups(vk, site, VK_PIPE(KERNEL_SOFTMAX), bufs, 7, &p, sizeof p,
                              offsetof(struct softmax_push, group_base), rows);
}

static vkmha_status record_op(vk_state *vk, const void *args)
{
    return vk_record_softmax(vk, &vk->desc.op_sites.sites[OPSITE_SOFTMAX], args);
}

vkmha_status vk_softmax(vk_state *vk, const sm_shape *s, const void *x, const mask_r *mask,
                        void *y)
{
    vkmha_status st;
    const size_t bytes = (size_t)s->batch * s->heads * s->len_q * s->len_k *
                         vkmha__dtype_size(s->dtype);
    if ((st = vk_check_size(vk, bytes, "x")) || (st = vk_slot_ensure(vk, SLOT_SCORES, bytes)) ||
        (st = vk_head_rules_ensure(vk, s->heads, 0)))
        return st;
    /* In place in SLOT_SCORES. */
    vk_softmax_args a = {.scores = vk_view_of(&vk->mem.slots[SLOT_SCORES], s->dtype),
                         .batch = s->batch, .heads = s->heads, .len_q = s->len_q,
                         .len_k = s->len_k, .scale = s->scale};
    vk_view masks[3];
    vk_mask_slots(vk, masks);
    vk_mask_args(masks, mask, &a);
    const vk_host_call call = {
        .up = {{&vk->mem.slots[SLOT_SCORES], x, bytes}},
        .mask = mask, .batch = s->batch, .len_q = s->len_q, .len_k = s->len_k,
        .down = {{&vk->mem.slots[SLOT_SCORES], y, bytes, 1, bytes, 1, bytes}},
        .record = record_op, .arg = &a};
    return vk_run_host(vk, &call);
}
