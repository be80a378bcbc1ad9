/* Split and merge heads: push-constant mirror, dispatch math (one invocation
 * per element; on CPU devices one per row of head_dim elements) and the
 * public ops on host arrays. */
#include "vk_ops.h"

#include <stddef.h>


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

/* x or y may be a Q8 KV cache's rows (vk_view.q8_rows, U8):
 * shaders/kv_q8.comp quantizes into them (the append) or reads them (the
 * unfused attention's fp32 copy). */

/* x's and y's element strides (batch entry, head, row): the layouts', a
 * split into a strided y (a KV cache's) with y's batch and head strides,
 * Q8 rows at their view's strides (rows of 4 + head_dim bytes or more). */
static void io_strides(const heads_shape *s, bool split, const vk_view *x, const vk_view *y,
                       uint64_t xs[3], uint64_t ys[3])
{
    uint64_t rows[3], heads[3];
    layout_strides(s, rows, heads);
    for (int i = 0; i < 3; i++) {
        xs[i] = x->q8_rows ? x->stride[i] : split ? rows[i] : heads[i];
        ys[i] = y->q8_rows ? y->stride[i]
                : split     ? (i < 2 && y->stride[i] ? y->stride[i] : heads[i])
                            : rows[i];
    }
}

vkmha_status vk_record_heads(vk_state *vk, vk_site *site, const heads_shape *s, bool split,
                             vk_view x, vk_view y)
{
    uint64_t total = (uint64_t)s->batch * s->len * s->heads * s->head_dim;
    const bool rope = s->rope_pairs != 0;
    struct heads_push p = {.total = (uint32_t)total, .len = s->len, .heads = s->heads,
                           .head_dim = s->head_dim, .split = split ? 1u : 0u,
                           .texel = vk->tuning.row_texel &&
                                    vk_texel_ok((const vk_view *const[]){&x}, 1, true),
                           .rope_pairs = s->rope_pairs,
                           .rope_interleaved = s->rope_interleaved,
                           .rope_t0 = s->rope_row0,
                           .rope_tb = s->full_len ? s->full_len : s->len};
    uint64_t xs[3], ys[3];
    io_strides(s, split, &x, &y, xs, ys);
    for (int i = 0; i < 3; i++) {
        if (xs[i] > UINT32_MAX || ys[i] > UINT32_MAX)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                               "%s: a head stride of more than 2^32 - 1 elements",
                               vk->ctx->call);
    }
    p.x_sb = (uint32_t)xs[0], p.x_sh = (uint32_t)xs[1], p.x_sl = (uint32_t)xs[2];
    p.y_sb = (uint32_t)ys[0], p.y_sh = (uint32_t)ys[1], p.y_sl = (uint32_t)ys[2];
    const vk_view bufs[3] = {x, y, vk_view_of(&vk->mem.slots[SLOT_ROPE], VKMHA_DTYPE_F32)};
    const uint32_t n_bufs = rope ? 3 : 2;
    if (x.q8_rows || y.q8_rows) /* a row per invocation, VK_KV_Q8_WG a workgroup */
        return vk_dispatch_groups(vk, site, VK_PIPE(rope ? KERNEL_KV_Q8_ROPE : KERNEL_KV_Q8),
                                  bufs, n_bufs, &p, sizeof p,
                                  offsetof(struct heads_push, group_base),
                                  vk_div_up(total / s->head_dim, VK_KV_Q8_WG));
    if (vk->tuning.cpu_rows_wg && s->head_dim <= VK_CPU_ROW_MAX) { /* a row per invocation */
        uint64_t rows = total / s->head_dim;
        return vk_dispatch_groups(vk, site,
                                  VK_PIPE(rope ? KERNEL_HEADS_CPU_ROPE : KERNEL_HEADS_CPU), bufs,
                                  n_bufs, &p, sizeof p, offsetof(struct heads_push, group_base),
                                  (rows + vk->tuning.cpu_rows_wg - 1) / vk->tuning.cpu_rows_wg);
    }
    return vk_dispatch_groups(vk, site, VK_PIPE(rope ? KERNEL_HEADS_ROPE : KERNEL_HEADS), bufs,
                              n_bufs, &p, sizeof p, offsetof(struct heads_push, group_base),
                              (total + vk->tuning.elementwise_wg - 1) / vk->tuning.elementwise_wg);
}

/* ---- blocks past maxStorageBufferRange ------------------------------------ */

/* Blocks of nb entries x nh heads x nl rows of s whose spans of x and y
 * (io_strides) each fit one binding from any start: whole entries, else
 * heads of one entry with all their rows, else rows of one head; count
 * blocks in all, 0 when not one row fits. */
typedef struct heads_blocks {
    uint64_t nb, nh, nl, count;
} heads_blocks;

static heads_blocks plan_blocks(const vk_state *vk, const heads_shape *s, bool split,
                                const vk_view *x, const vk_view *y)
{
    const uint64_t bytes = vk_window_bytes(vk), most_x = bytes / vkmha__dtype_size(x->dtype),
                   most_y = bytes / vkmha__dtype_size(y->dtype);
    uint64_t xs[3], ys[3];
    io_strides(s, split, x, y, xs, ys);
    /* Units of each level (entries, heads, rows) with the levels below whole
     * or one, the largest n that fits: spans grow with n. */
    const uint64_t total[3] = {s->batch, s->heads, s->len};
    uint64_t n[3] = {s->batch, s->heads, s->len};
    for (int level = 0; level < 3; level++) {
        uint64_t lo = 0, hi = total[level];
        while (lo < hi) {
            const uint64_t mid = lo + (hi - lo + 1) / 2;
            n[level] = mid;
            const uint64_t sx = (n[0] - 1) * xs[0] + (n[1] - 1) * xs[1] + (n[2] - 1) * xs[2] +
                                s->head_dim,
                           sy = (n[0] - 1) * ys[0] + (n[1] - 1) * ys[1] + (n[2] - 1) * ys[2] +
                                s->head_dim;
            if (sx <= most_x && sy <= most_y)
                lo = mid;
            else
                hi = mid - 1;
        }
        n[level] = lo;
        if (lo || level == 2)
            break;
        n[level] = 1; /* one unit of this level, fewer of the next */
    }
    heads_blocks b = {n[0], n[1], n[2], 0};
    if (n[2])
        b.count = ((s->batch + n[0] - 1) / n[0]) * ((s->heads + n[1] - 1) / n[1]) *
                  ((s->len + n[2] - 1) / n[2]);
    return b;
}

uint64_t vk_heads_blocks(const vk_state *vk, const heads_shape *s, bool split, const vk_view *x,
                         const vk_view *y)
{
    return plan_blocks(vk, s, split, x, y).count;
}

vkmha_status vk_record_heads_blocks(vk_state *vk, vk_site *site, const heads_shape *s,
                                    bool split, vk_view x, vk_view y)
{
    const heads_blocks b = plan_blocks(vk, s, split, &x, &y);
    if (b.count == 1)
        return vk_record_heads(vk, site, s, split, x, y);
    if (!b.count)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: one row of %u elements is more than maxStorageBufferRange "
                           "(%llu bytes) lets one binding hold",
                           vk->ctx->call, s->head_dim,
                           (unsigned long long)vk->info.max_storage_buffer_range);
    vk_site *more = vk_window_sites_take(vk, KIND_HEADS, b.count - 1);
    if (!more)
        return VKMHA_ERROR_VULKAN;
    vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: heads of %u x %u x %u beyond maxStorageBufferRange (%llu bytes): %llu "
               "blocks of %llu x %llu x %llu bound in windows",
               vk->ctx->call, s->batch, s->heads, s->len,
               (unsigned long long)vk->info.max_storage_buffer_range,
               (unsigned long long)b.count, (unsigned long long)b.nb, (unsigned long long)b.nh,
               (unsigned long long)b.nl);
    uint64_t xs[3], ys[3];
    io_strides(s, split, &x, &y, xs, ys);
    const uint64_t ex = vkmha__dtype_size(x.dtype), ey = vkmha__dtype_size(y.dtype);
    uint64_t i = 0;
    vkmha_status st = VKMHA_SUCCESS;
    for (uint64_t b0 = 0; b0 < s->batch && !st; b0 += b.nb)
        for (uint64_t h0 = 0; h0 < s->heads && !st; h0 += b.nh)
            for (uint64_t l0 = 0; l0 < s->len && !st; l0 += b.nl, i++) {
                /* A block at the whole's strides (full_len, full_heads; y's
                 * own), bound from its first element. */
                heads_shape bs = *s;
                bs.batch = (uint32_t)(s->batch - b0 < b.nb ? s->batch - b0 : b.nb);
                bs.heads = (uint32_t)(s->heads - h0 < b.nh ? s->heads - h0 : b.nh);
                bs.len = (uint32_t)(s->len - l0 < b.nl ? s->len - l0 : b.nl);
                bs.full_len = s->full_len ? s->full_len : s->len;
                bs.full_heads = s->full_heads ? s->full_heads : s->heads;
                bs.rope_row0 = (uint32_t)(s->rope_row0 + b0 * bs.full_len + l0);
                vk_view bx = x, by = y;
                bx.offset += (b0 * xs[0] + h0 * xs[1] + l0 * xs[2]) * ex;
                by.offset += (b0 * ys[0] + h0 * ys[1] + l0 * ys[2]) * ey;
                /* They write the same buffer (disjoint elements, overlapping
                 * bindings). */
                if (i)
                    vk_barrier(vk);
                st = vk_record_heads(vk, i ? &more[i - 1] : site, &bs, split, bx, by);
            }
    return st;
}

typedef struct heads_op {
    const heads_shape *s;
    bool split;
} heads_op;

static vkmha_status record_op(vk_state *vk, const void *arg)
{
    const heads_op *o = arg;
    return vk_record_heads(vk, &vk->desc.op_sites.sites[OPSITE_HEADS], o->s, o->split,
                           vk_view_of(&vk->mem.slots[SLOT_Q_IN], o->s->dtype),
                           vk_view_of(&vk->mem.slots[SLOT_OUT], o->s->dtype));
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
        .up = {{&vk->mem.slots[SLOT_Q_IN], x, x_span}},
        .down = {split ? (vk_host_download){&vk->mem.slots[SLOT_OUT], y, s->len * d, s->heads,
                                            heads[1] * es, s->batch, heads[0] * es}
                       : (vk_host_download){&vk->mem.slots[SLOT_OUT], y, s->heads * d, s->len,
                                            rows[2] * es, s->batch, rows[0] * es}},
        .record = record_op, .arg = &op};
    return vk_run_host(vk, &call);
}
