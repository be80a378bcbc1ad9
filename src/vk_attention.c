/* Scaled dot-product attention on the Vulkan backend, on heads addressed
 * through strides (split heads for vkmha_attention, the projections and their
 * concat in place for the layer). Two paths:
 *
 * fused (default): shaders/flash.comp, one workgroup per (batch, head, block
 *   of queries[, key range]) with an online softmax; extra memory is the
 *   (max, sum) of each query row, plus the partial outputs of split-K,
 *   which shaders/flash_combine.comp merges. Weights, when asked for, come
 *   from a second dispatch of the same pipeline (MODE_WEIGHTS) once the
 *   (max, sum) of every row is final: it recomputes each score with the same
 *   instructions and writes exp(score - max) / sum, the very softmax the
 *   output was made with. It reads q, so out must not overwrite q then.
 *   Keys and values past maxStorageBufferRange (one head's, a KV cache's
 *   entries, the layer's key projections) are bound in windows of keys of
 *   one batch entry and key/value head at a time, chunk after chunk
 *   through the partial state (dispatch_keys).
 * unfused: scores = scale * Q K^T (a batched matmul; grouped-query heads
 *   through the matmul's b_div), the masked softmax in place, then
 *   out = P V, all in fp32: in the caller's fp32 weights (which the scores
 *   then double as), else in SLOT_SCORES, copied into 16-bit weights at the
 *   end (each output rounded once, as on the fused path). */
#include "vk_ops.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

_Static_assert(VK_FLASH_DIM_MAX <= 0xffff, "flash_push.dims packs 16-bit head dims");


/* shaders/flash*.comp's modes (MODE_*): src/vk_push.h. */

/* One of the unfused path's matmuls: batched, or with plan->products one
 * product after another (each after a barrier: they write disjoint parts
 * of one buffer), the first through `site`, the others more[0 ..]. */
static vkmha_status record_products(vk_state *vk, vk_site *site, vk_site *more,
                                    const vk_attn_plan *plan, const vk_matmul_args *m)
{
    if (!plan->products)
        return vk_record_matmul(vk, site, m);
    vkmha_status st = VKMHA_SUCCESS;
    const uint64_t heads = plan->s.heads, n = (uint64_t)plan->s.batch * heads;
    for (uint64_t i = 0; i < n && !st; i++) {
        if (i)
            vk_barrier(vk);
        const vk_matmul_args p = vk_attention_product(m, i / heads, i % heads);
        st = vk_record_matmul(vk, i ? &more[i - 1] : site, &p);
    }
    return st;
}

static vkmha_status record_unfused(vk_state *vk, vk_site sites[], const vk_attn_plan *plan,
                                   const mask_r *mask, const vk_view *q, const vk_view *k_all,
                                   const vk_view *v_all, const vk_view *out)
{
    vkmha_status st;
    const attn_shape *s = &plan->s;
    const uint64_t Lq = s->len_q;
    /* fp32 scores and weights: in the caller's weights when they are fp32
     * (or there are none: SLOT_SCORES), else in SLOT_SCORES, copied into
     * the 16-bit weights at the end, so that the output and the weights are
     * each rounded once, as on the fused path. */
    const uint32_t dt_w = plan->scores.dtype;
    const vk_view scores = vk_attention_unfused_scores(vk, plan);
    vk_matmul_args mm[2];
    vk_attention_unfused_matmuls(plan, q, k_all, v_all, out, &scores, mm);
    vk_site *more = NULL; /* plan->products: the sites after each matmul's first */
    const uint64_t n = (uint64_t)s->batch * s->heads;
    if (plan->products && n > 1 &&
        !(more = vk_window_sites_take(vk, KIND_MATMUL, 2 * n - 2)))
        return VKMHA_ERROR_VULKAN;
    if ((st = record_products(vk, &sites[ASITE_SCORES], more, plan, &mm[0])))
        return st;
    vk_barrier(vk);

    /* The scale is already applied: the softmax adds the bias and masks. */
    vk_softmax_args sm = {.scores = scores, .lengths = plan->lengths, .batch = s->batch,
                          .heads = s->heads, .len_q = s->len_q, .len_k = s->len_k,
                          .scale = 1.0f};
    vk_mask_args(plan->masks, mask, &sm);
    if ((st = vk_record_softmax(vk, &sites[ASITE_SOFTMAX], &sm)))
        return st;
    vk_barrier(vk);

    /* out[b][h] (Lq x d_v) = p[b][h] (Lq x Lk) * v[b][h / g] (Lk x d_v) */
    if ((st = record_products(vk, &sites[ASITE_PV], more ? more + n - 1 : NULL, plan, &mm[1])) ||
        dt_w == VKMHA_DTYPE_F32)
        return st;
    /* The weights, rounded: a copy of [rows][len_k] (one head). Reads what
     * the P V matmul reads: no barrier between them. */
    const heads_shape copy = {.batch = 1, .len = (uint32_t)(s->batch * s->heads * Lq),
                              .heads = 1, .head_dim = s->len_k};
    return vk_record_heads(vk, &sites[ASITE_WEIGHTS_COPY], &copy, true, scores, plan->scores);
}

/* One pass of the fused kernel (p->flags: its mode; bufs: its bindings)
 * over the plan's chunks of keys: dispatches of every workgroup, a chunk
 * after another (each after a barrier; after the first, the main pass
 * resumes from the partial state, `weights`: the weights pass does not).
 * With windows (plan->window), each chunk's dispatches are one per batch
 * entry and key/value head (the workgroups of its query heads), binding k
 * and v from the chunk's window on (sites after the first from
 * vk->desc.window_sites[KIND_FLASH], one per window and pair). */
static vkmha_status dispatch_keys(vk_state *vk, vk_site *site, const vk_attn_plan *plan,
                                  vk_pipe pipe, const vk_view bufs[11], struct flash_push *p,
                                  uint64_t groups, bool weights)
{
    const attn_shape *s = &plan->s;
    const uint32_t flags = p->flags;
    const uint64_t pairs = plan->window ? (uint64_t)s->batch * s->kv_heads : 1;
    /* Workgroups of one pair: its query heads' blocks (one key range). */
    const uint64_t per_pair = plan->window ? groups / pairs : groups;
    vk_site *more = NULL;
    if (plan->window) {
        const uint64_t extra = vk_div_up(s->len_k, plan->window) * pairs - 1;
        if (extra && !(more = vk_window_sites_take(vk, KIND_FLASH, extra)))
            return VKMHA_ERROR_VULKAN;
        /* The window's binding starts at the pair's key kv_key0. */
        p->k_sb = p->k_sh = p->v_sb = p->v_sh = 0;
    }
    vk_view b[11];
    memcpy(b, bufs, sizeof b);
    const uint32_t n_bufs = plan->cpu_kernel ? 10 : 11; /* flash.comp: RoPE's table */
    vkmha_status st;
    for (uint32_t c = 0; c < plan->chunks; c++) {
        p->kv_first = c * plan->chunk;
        p->flags = flags | (c && !weights ? MODE_RESUME : 0);
        const uint64_t w = plan->window ? (uint64_t)p->kv_first / plan->window : 0;
        for (uint64_t pair = 0; pair < pairs; pair++) {
            const uint64_t first = pair * per_pair;
            vk_site *at = site;
            /* The pairs' dispatches write disjoint rows of the same
             * bindings, which synchronization validation cannot tell from a
             * hazard: a barrier before each (they are only made past the
             * range, and a window's keys are many). */
            if (c || pair)
                vk_barrier(vk);
            if (plan->window) {
                const uint64_t bb = pair / s->kv_heads + plan->kv_b0, hk = pair % s->kv_heads,
                               key0 = w * plan->window;
                for (int i = 1; i < 3; i++)
                    b[i].offset = bufs[i].offset +
                                  (bb * bufs[i].stride[0] + hk * bufs[i].stride[1] +
                                   key0 * bufs[i].stride[2]) *
                                      vkmha__dtype_size(bufs[i].dtype);
                p->kv_key0 = (uint32_t)key0;
                p->groups = (uint32_t)(first + per_pair);
                if (w || pair)
                    at = &more[w * pairs + pair - 1];
            }
            if ((st = vk_dispatch_range(vk, at, pipe, b, n_bufs, p, sizeof *p,
                                        offsetof(struct flash_push, group_base), first,
                                        first + per_pair)))
                return st;
        }
    }
    return VKMHA_SUCCESS;
}

/* Whether the CPU-shaped kernel's skipping (shaders/flash_cpu.comp) gets
 * the values' and keys' flags: query blocks, or lanes over keys where a
 * window hides most keys (plan->lane_skip; else a decode step would read its
 * cache twice for little), under a mask that hides keys (the causal mask, a
 * window, key padding, a full mask, a bias), keys and values bound whole
 * (the plan's kv_whole; typed, or a Q8 cache's rows), their elements
 * countable in 32 bits (the strides are: vk_check_strides). */
static bool wants_vscan(const vk_attn_plan *plan, const mask_r *mask)
{
    const attn_shape *s = &plan->s;
    const uint32_t hiding = VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW | VK_MASK_DATA;
    const uint64_t elems =
        (uint64_t)s->batch * s->kv_heads * s->len_k * (s->d_v > s->d_k ? s->d_v : s->d_k);
    return plan->cpu_kernel && (!plan->lane_keys || plan->lane_skip) && plan->kv_whole &&
           (mask->kinds & hiding) && elems <= UINT32_MAX;
}

/* The flags after the per-head rules in SLOT_MASK_HEADS: two words per
 * (batch entry, key/value head), zeroed, then set by shaders/vscan.comp
 * where one of x's d elements (the values': word 0; the keys': word 1) is
 * NaN, Inf or 2^64 or more in magnitude. */
static vkmha_status record_vscan(vk_state *vk, vk_site *site, const vk_attn_plan *plan,
                                 const vk_view *x, uint32_t d, uint32_t word)
{
    const attn_shape *s = &plan->s;
    const uint64_t rows = (uint64_t)s->batch * s->kv_heads * s->len_k;
    vk_view xv = *x; /* from the plan's first entry (a KV cache's) */
    xv.offset += plan->kv_b0 * x->stride[0] * vkmha__dtype_size(x->dtype);
    /* A Q8 cache's rows as plain bytes: their scales are read as words of
     * the storage binding, and its texel binding (unread) then takes the
     * float dummy that the plain build declares. */
    xv.q8_rows = false;
    struct heads_push p = {.total = (uint32_t)(rows * d), .len = s->len_k,
                           .heads = s->kv_heads, .head_dim = d, .split = 1,
                           .x_sb = (uint32_t)x->stride[0], .x_sh = (uint32_t)x->stride[1],
                           .x_sl = (uint32_t)x->stride[2], .y_sb = 2 * s->heads + word,
                           .y_sh = 2};
    /* A Q8 cache's rows: their scales. Else by runs through x's texel view
     * where each head's rows are one run of vec4s (a KV cache's, split
     * heads'): VSCAN_VEC4S of them an invocation. */
    p.texel = x->q8_rows ? 2
              : p.x_sl == d && ((p.x_sb | p.x_sh | d) & 3) == 0 && vk->tuning.row_texel &&
                      vk_texel_ok((const vk_view *const[]){&xv}, 1, true)
                  ? 1
                  : 0;
    const uint64_t per_pair = vk_div_up((uint64_t)s->len_k * d / 4, VK_PASS_WG * VSCAN_VEC4S);
    const vk_view bufs[2] = {xv, vk_view_of(&vk->mem.slots[SLOT_MASK_HEADS], VKMHA_DTYPE_F32)};
    return vk_dispatch_groups(vk, site, VK_PIPE(KERNEL_VSCAN), bufs, 2, &p, sizeof p,
                              offsetof(struct heads_push, group_base),
                              p.texel == 1 ? rows / s->len_k * per_pair
                                           : vk_div_up(rows, VK_PASS_WG));
}

static vkmha_status record_fused(vk_state *vk, vk_site sites[], const vk_attn_plan *plan,
                                 const mask_r *mask, const vk_view *q, const vk_view *k,
                                 const vk_view *v, const vk_view *out)
{
    vkmha_status st;
    const attn_shape *s = &plan->s;
    const uint64_t rows = (uint64_t)s->batch * s->heads * s->len_q;
    if ((st = vk_check_strides(vk, (const vk_view *const[]){q, k, v, out}, 4, "a tensor")))
        return st;

    /* through the partials */
    const bool split = plan->partial_splits > 1 || plan->chunks > 1;
    const uint64_t groups = rows / s->len_q * plan->q_blocks * plan->splits;
    vk_view rules;
    const bool vscan = wants_vscan(plan, mask);
    if (vscan) { /* the flags start from zero: the slot, before the rules */
        vk_barrier(vk);
        if ((st = vk_zero(vk, &vk->mem.slots[SLOT_MASK_HEADS])))
            return st;
        vk_barrier(vk);
    }
    /* The keys are scanned for a bias only, the one rule that reads their
     * flag (a -inf bias without the products). */
    if ((st = vk_head_rules_any(vk, mask, s->heads, vscan, &rules)) ||
        (vscan && (st = record_vscan(vk, &sites[ASITE_VSCAN], plan, v, s->d_v, 0))) ||
        (vscan && (mask->kinds & VKMHA_MASK_BIAS) &&
         (st = record_vscan(vk, &sites[ASITE_VSCAN_KEYS], plan, k, s->d_k, 1))))
        return st;
    if (vscan)
        vk_barrier(vk);
    struct flash_push p = {
        .groups = (uint32_t)groups, .len_q = s->len_q, .len_k = s->len_k, .heads = s->heads,
        .group = s->heads / s->kv_heads, .dims = s->d_k | s->d_v << 16,
        .split_len = plan->split_len,
        .q_sb = (uint32_t)q->stride[0], .q_sh = (uint32_t)q->stride[1],
        .q_ld = (uint32_t)q->stride[2], .k_sb = (uint32_t)k->stride[0],
        .k_sh = (uint32_t)k->stride[1], .k_ld = (uint32_t)k->stride[2],
        .v_sb = (uint32_t)v->stride[0], .v_sh = (uint32_t)v->stride[1],
        .v_ld = (uint32_t)v->stride[2], .o_sb = (uint32_t)out->stride[0],
        .o_sh = (uint32_t)out->stride[1], .o_ld = (uint32_t)out->stride[2],
        .flags = mask->kinds, .scale = s->scale, .kv_count = plan->chunk,
        .causal_offset = mask->causal_offset, .kv_b0 = plan->kv_b0, .rope = plan->rope};
    /* The bias's broadcast as flags: its strides, which the push block has
     * no room for, follow from them (shaders/flash_rules.glsl). */
    uint32_t bias_sb, bias_sh;
    vk_bias_strides(mask, s->len_q, s->len_k, &bias_sb, &bias_sh);
    const uint32_t kinds = mask->kinds | (plan->lengths.buf ? VK_MASK_LENGTHS : 0) |
                           (plan->lane_keys ? MODE_LANE_KEYS : 0) |
                           (bias_sb ? BIAS_PER_BATCH : 0) | (bias_sh ? BIAS_PER_HEAD : 0) |
                           (vscan ? MODE_VSCANNED : 0);
    vk_rules_push(mask, &p.window, &p.softcap);
    vk_softmax_args m = {0};
    vk_mask_args(plan->masks, mask, &m);
    const vk_view partial_o = vk_view_of(&vk->mem.slots[SLOT_PARTIAL_O], VKMHA_DTYPE_F32),
                  partial_ml = vk_view_of(&vk->mem.slots[SLOT_PARTIAL_ML], VKMHA_DTYPE_F32),
                  stats = vk_view_of(&vk->mem.slots[SLOT_STATS], VKMHA_DTYPE_F32);
    const vk_view table = plan->rope ? vk_view_of(&vk->mem.slots[SLOT_ROPE], VKMHA_DTYPE_F32)
                                     : (vk_view){0};
    const vk_view bufs[11] = {*q, *k, *v, m.masks[0], m.masks[1], m.masks[2],
                              split ? partial_o : *out, split ? partial_ml : stats,
                              plan->lengths, rules, table};
    /* The CPU-shaped kernel's variant that looks for idle steps where a
     * mask is data and the values were scanned. */
    const bool data_skip = vscan && (mask->kinds & VK_MASK_DATA);
    const vk_pipe pipe = {.kernel = plan->cpu_kernel ? (k->q8_rows   ? KERNEL_FLASH_CPU_Q8
                                                        : data_skip ? KERNEL_FLASH_CPU_SKIP
                                                                    : KERNEL_FLASH_CPU)
                                    : plan->coop     ? KERNEL_FLASH_COOP
                                                     : KERNEL_FLASH,
                          .cls = (uint8_t)plan->cls};
    vk_site *main_site = &sites[plan->cpu_kernel ? ASITE_FLASH_CPU : ASITE_FLASH];
    vk_site *weights_site = &sites[plan->cpu_kernel ? ASITE_FLASH_CPU_WEIGHTS : ASITE_FLASH_WEIGHTS];
    p.flags = kinds | (split ? MODE_PARTIAL : 0);
    if ((st = dispatch_keys(vk, main_site, plan, pipe, bufs, &p, groups, false)))
        return st;

    if (split) {
        vk_barrier(vk);
        struct combine_push c = {.rows = (uint32_t)rows, .len_q = s->len_q, .heads = s->heads,
                                 .d_v = s->d_v, .splits = plan->partial_splits,
                                 .o_sb = (uint32_t)out->stride[0],
                                 .o_sh = (uint32_t)out->stride[1],
                                 .o_ld = (uint32_t)out->stride[2]};
        const vk_view cb[4] = {partial_o, partial_ml, *out, stats};
        if ((st = vk_dispatch_groups(vk, &sites[ASITE_COMBINE], VK_PIPE(KERNEL_FLASH_COMBINE), cb, 4, &c, sizeof c,
                                     offsetof(struct combine_push, group_base),
                                     vk_div_up(rows * s->d_v, vk->tuning.elementwise_wg))))
            return st;
    }

    if (!plan->weights)
        return VKMHA_SUCCESS;
    /* Over the same ranges and chunks, from the final statistics. */
    const vk_view wb[11] = {*q, *k, *v, m.masks[0], m.masks[1], m.masks[2], plan->scores, stats,
                            plan->lengths, rules, table};
    p.flags = kinds | MODE_WEIGHTS;
    vk_barrier(vk);
    return dispatch_keys(vk, weights_site, plan, pipe, wb, &p, groups, true);
}

vkmha_status vk_record_attention(vk_state *vk, vk_site sites[], const vk_attn_plan *plan,
                                 const mask_r *mask, const vk_view *q, const vk_view *k,
                                 const vk_view *v, const vk_view *out)
{
    if (plan->fold) { /* the folded views; the causal mask hides nothing */
        const vk_view fq = vk_fold_view(q, plan->fold), fo = vk_fold_view(out, plan->fold);
        mask_r m = *mask;
        m.kinds &= ~(uint32_t)VKMHA_MASK_CAUSAL;
        m.causal_offset = 0;
        return record_fused(vk, sites, plan, &m, &fq, k, v, &fo);
    }
    return plan->fused ? record_fused(vk, sites, plan, mask, q, k, v, out)
                       : record_unfused(vk, sites, plan, mask, q, k, v, out);
}

/* The op on host arrays: split heads in the Q, K, V and O heads slots. */
typedef struct attention_op {
    const vk_attn_plan *plan;
    const mask_r *mask;
    vk_view q, k, v, o;
} attention_op;

static vkmha_status record_op(vk_state *vk, const void *arg)
{
    const attention_op *o = arg;
    return vk_record_attention(vk, &vk->desc.op_sites.sites[OPSITE_ATTENTION], o->plan, o->mask,
                               &o->q, &o->k, &o->v, &o->o);
}

vkmha_status vk_attention(vk_state *vk, const attn_shape *s, const void *q, const void *k,
                          const void *v, const mask_r *mask, void *out, void *weights)
{
    vkmha_status st;
    vk_attn_plan plan;
    const uint32_t dt = s->dtype;
    const uint64_t es = vkmha__dtype_size(dt);
    const size_t bq = (size_t)s->batch * s->heads * s->len_q * s->d_k * es,
                 bk = (size_t)s->batch * s->kv_heads * s->len_k * s->d_k * es,
                 bv = (size_t)s->batch * s->kv_heads * s->len_k * s->d_v * es,
                 bo = (size_t)s->batch * s->heads * s->len_q * s->d_v * es,
                 bw = weights ? (size_t)s->batch * s->heads * s->len_q * s->len_k * es : 0;
    /* 16-bit weights are written in SLOT_WEIGHTS, as into a weights tensor. */
    const vk_view wview = vk_view_of(&vk->mem.slots[SLOT_WEIGHTS], dt);
    const bool wbuf = weights && dt != VKMHA_DTYPE_F32;
    /* k and v may exceed maxStorageBufferRange: they are bound in windows
     * (vk_attention_prepare refuses what it cannot). The unfused path's
     * scores are checked first, before they are allocated. */
    const uint64_t scores = (uint64_t)s->batch * s->heads * s->len_q * s->len_k * 4;
    if ((s->path == VKMHA_ATTENTION_PATH_UNFUSED &&
         (st = vk_check_size(vk, scores, "attention scores [batch][heads][len_q][len_k]"))) ||
        (st = vk_check_size(vk, bq, "q")) || (st = vk_check_alloc(vk, bk, "k")) ||
        (st = vk_check_alloc(vk, bv, "v")) || (st = vk_check_size(vk, bo, "out")) ||
        (st = vk_check_size(vk, bw, "weights")) ||
        (st = vk_slot_ensure(vk, SLOT_Q_HEADS, bq)) ||
        (st = vk_slot_ensure_windowed(vk, SLOT_K_HEADS, bk)) ||
        (st = vk_slot_ensure_windowed(vk, SLOT_V_HEADS, bv)) ||
        (st = vk_slot_ensure(vk, SLOT_O_HEADS, bo)) ||
        (wbuf && (st = vk_slot_ensure(vk, SLOT_WEIGHTS, bw))))
        return st;
    const attention_op op = {
        &plan, mask,
        vk_view_split(&vk->mem.slots[SLOT_Q_HEADS], s->heads, s->len_q, s->d_k, dt),
        vk_view_split(&vk->mem.slots[SLOT_K_HEADS], s->kv_heads, s->len_k, s->d_k, dt),
        vk_view_split(&vk->mem.slots[SLOT_V_HEADS], s->kv_heads, s->len_k, s->d_v, dt),
        vk_view_split(&vk->mem.slots[SLOT_O_HEADS], s->heads, s->len_q, s->d_v, dt)};
    if ((st = vk_attention_prepare(vk, s, mask, weights != NULL, wbuf ? &wview : NULL,
                                   (const vk_view[4]){op.q, op.k, op.v, op.o}, 0, &plan)))
        return st;
    const vk_host_call call = {
        .up = {{&vk->mem.slots[SLOT_Q_HEADS], q, bq},
               {&vk->mem.slots[SLOT_K_HEADS], k, bk},
               {&vk->mem.slots[SLOT_V_HEADS], v, bv}},
        .mask = mask, .batch = s->batch, .len_q = s->len_q, .len_k = s->len_k,
        .down = {{&vk->mem.slots[SLOT_O_HEADS], out, bo, 1, bo, 1, bo},
                 {plan.scores.buf, weights, bw, 1, bw, 1, bw}},
        .record = record_op, .arg = &op};
    return vk_run_host(vk, &call);
}
