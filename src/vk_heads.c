/* Split and merge heads: push-constant mirror, dispatch math (one invocation
 * per element; on CPU devices one per row of head_dim elements) and the
 * public ops on host arrays. */
#include "vk_internal.h"

#include <stddef.h>

/* Mirrors the push-constant block of shaders/heads.comp. */
struct heads_push {
    uint32_t misalign[2]; /* vk_dispatch's */
    uint32_t total, len, heads, head_dim, split;
    uint32_t group_base;
    uint32_t texel; /* shaders/heads_cpu.comp only */
    uint32_t y_sb, y_sh; /* split: y's strides per batch entry and head */
};
VK_PUSH_BLOCK(heads_push);

vkmha_status vk_record_heads(vk_state *vk, vk_site *site, const heads_shape *s, bool split,
                             vk_view x, vk_view y)
{
    uint64_t total = (uint64_t)s->batch * s->len * s->heads * s->head_dim;
    struct heads_push p = {.total = (uint32_t)total, .len = s->len, .heads = s->heads,
                           .head_dim = s->head_dim, .split = split ? 1u : 0u,
                           .texel = vk->row_texel &&
                                    vk_texel_ok((const vk_view *const[]){&x}, 1, true)};
    /* A split into a strided y (rows of a head contiguous), else dense. */
    const uint64_t plane = (uint64_t)s->len * s->head_dim;
    const uint64_t sh = y.stride[1] ? y.stride[1] : plane,
                   sb = y.stride[0] ? y.stride[0] : s->heads * plane;
    if (sb > UINT32_MAX || sh > UINT32_MAX)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: a head stride of more than 2^32 - 1 elements", vk->ctx->call);
    p.y_sb = (uint32_t)sb;
    p.y_sh = (uint32_t)sh;
    const vk_view bufs[2] = {x, y};
    if (vk->cpu_rows_wg && s->head_dim <= VK_CPU_ROW_MAX) { /* a row per invocation */
        uint64_t rows = total / s->head_dim;
        return vk_dispatch_groups(vk, site, PIPE_HEADS_CPU, bufs, 2, &p, sizeof p,
                                  offsetof(struct heads_push, group_base),
                                  (rows + vk->cpu_rows_wg - 1) / vk->cpu_rows_wg);
    }
    return vk_dispatch_groups(vk, site, PIPE_HEADS, bufs, 2, &p, sizeof p,
                              offsetof(struct heads_push, group_base),
                              (total + vk->elementwise_wg - 1) / vk->elementwise_wg);
}

typedef struct heads_op {
    const heads_shape *s;
    bool split;
} heads_op;

static vkmha_status record_op(vk_state *vk, const void *arg)
{
    const heads_op *o = arg;
    return vk_record_heads(vk, &vk->op_sites.sites[OPSITE_HEADS], o->s, o->split,
                           vk_view_of(&vk->slots[SLOT_Q_IN], o->s->dtype),
                           vk_view_of(&vk->slots[SLOT_OUT], o->s->dtype));
}

vkmha_status vk_heads(vk_state *vk, const heads_shape *s, bool split, const void *x,
                      void *y)
{
    vkmha_status st;
    const size_t bytes = (size_t)s->batch * s->len * s->heads * s->head_dim *
                         vkmha__dtype_size(s->dtype);
    if ((st = vk_check_size(vk, bytes, "x")) || (st = vk_slot_ensure(vk, SLOT_Q_IN, bytes)) ||
        (st = vk_slot_ensure(vk, SLOT_OUT, bytes)))
        return st;
    const heads_op op = {s, split};
    const vk_host_call call = {.up = {{&vk->slots[SLOT_Q_IN], x, bytes}},
                               .down = {{&vk->slots[SLOT_OUT], y, bytes, 1, bytes, 1, bytes}},
                               .record = record_op, .arg = &op};
    return vk_run_host(vk, &call);
}
