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
    uint32_t x_sb, x_sh, x_sl, y_sb, y_sh, y_sl; /* per batch entry, head, row */
};
VK_PUSH_BLOCK(heads_push);

/* Element strides (batch entry, head, row) of the [len][heads][d] ("rows")
 * and [heads][len][d] ("heads") layouts of s's full shape (a block of a
 * larger array: s->full_len, full_heads; src/split.c). */
static void layout_strides(const heads_shape *s, uint64_t rows[3], uint64_t heads[3])
{
    const uint64_t d = s->head_dim, fl = s->full_len ? s->full_len : s->len,
                   fh = s->full_heads ? s->full_heads : s->heads;
    rows[0] = fl * fh * d, rows[1] = d, rows[2] = fh * d;
    heads[0] = fh * fl * d, heads[1] = fl * d, heads[2] = d;
}

/* Elements from a block's first to past its last at `stride`. */
static uint64_t span_at(const heads_shape *s, const uint64_t stride[3])
{
    return (uint64_t)(s->batch - 1) * stride[0] + (uint64_t)(s->heads - 1) * stride[1] +
           (uint64_t)(s->len - 1) * stride[2] + s->head_dim;
}

vkmha_status vk_record_heads(vk_state *vk, vk_site *site, const heads_shape *s, bool split,
                             vk_view x, vk_view y)
{
    uint64_t total = (uint64_t)s->batch * s->len * s->heads * s->head_dim;
    struct heads_push p = {.total = (uint32_t)total, .len = s->len, .heads = s->heads,
                           .head_dim = s->head_dim, .split = split ? 1u : 0u,
                           .texel = vk->row_texel &&
                                    vk_texel_ok((const vk_view *const[]){&x}, 1, true)};
    /* The layouts' strides; a split into a strided y (a KV cache's) takes
     * y's batch and head strides. */
    uint64_t rows[3], heads[3], xs[3], ys[3];
    layout_strides(s, rows, heads);
    for (int i = 0; i < 3; i++) {
        xs[i] = split ? rows[i] : heads[i];
        ys[i] = split ? (i < 2 && y.stride[i] ? y.stride[i] : heads[i]) : rows[i];
        if (xs[i] > UINT32_MAX || ys[i] > UINT32_MAX)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                               "%s: a head stride of more than 2^32 - 1 elements",
                               vk->ctx->call);
    }
    p.x_sb = (uint32_t)xs[0], p.x_sh = (uint32_t)xs[1], p.x_sl = (uint32_t)xs[2];
    p.y_sb = (uint32_t)ys[0], p.y_sh = (uint32_t)ys[1], p.y_sl = (uint32_t)ys[2];
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
    /* x: its span, uploaded whole; y: runs of a head's rows (split) or of a
     * row's heads (merge), downloaded at their strides. In bytes. */
    const uint64_t es = vkmha__dtype_size(s->dtype);
    uint64_t rows[3], heads[3];
    layout_strides(s, rows, heads);
    const uint64_t *xs = split ? rows : heads, *ys = split ? heads : rows;
    const uint64_t x_span = span_at(s, xs) * es, y_span = span_at(s, ys) * es;
    if ((st = vk_check_size(vk, x_span, "x")) || (st = vk_check_size(vk, y_span, "y")) ||
        (st = vk_slot_ensure(vk, SLOT_Q_IN, x_span)) || (st = vk_slot_ensure(vk, SLOT_OUT, y_span)))
        return st;
    const heads_op op = {s, split};
    const size_t d = (size_t)(s->head_dim * es);
    const vk_host_call call = {
        .up = {{&vk->slots[SLOT_Q_IN], x, x_span}},
        .down = {split ? (vk_host_download){&vk->slots[SLOT_OUT], y, s->len * d, s->heads,
                                            heads[1] * es, s->batch, heads[0] * es}
                       : (vk_host_download){&vk->slots[SLOT_OUT], y, s->heads * d, s->len,
                                            rows[2] * es, s->batch, rows[0] * es}},
        .record = record_op, .arg = &op};
    return vk_run_host(vk, &call);
}
