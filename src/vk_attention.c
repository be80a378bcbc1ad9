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
#include "vk_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

_Static_assert((32u << (VK_FLASH_CLASSES - 1)) <= 0xffff, "flash_push.dims packs 16-bit head dims");


/* Each split-K range has at least this many key blocks. */
#define MIN_SPLIT_BLOCKS 4

/* shaders/flash*.comp modes. */
enum { MODE_RESUME = 0x100, MODE_PARTIAL = 0x200, MODE_WEIGHTS = 0x400, MODE_LANE_KEYS = 0x800 };

/* Keys one fused dispatch visits per range on CPU devices: lavapipe ends
 * any loop nest after 65535 iterations (silently: the rest of the keys would
 * be dropped), and a key block costs the shaders' loops up to ~400 of them.
 * Longer ranges take several dispatches that carry the partial state. */
#define CPU_MAX_KEYS_PER_DISPATCH 1024

vk_view vk_view_split(const vk_buffer *buf, uint32_t heads, uint32_t len, uint32_t dim,
                      uint32_t dtype)
{
    return (vk_view){.buf = buf, .dtype = dtype,
                     .stride = {(uint64_t)heads * len * dim, (uint64_t)len * dim, dim}};
}

vk_view vk_view_merged(const vk_buffer *buf, uint32_t heads, uint32_t len, uint32_t dim,
                       uint32_t dtype)
{
    return (vk_view){.buf = buf, .dtype = dtype,
                     .stride = {(uint64_t)len * heads * dim, dim, (uint64_t)heads * dim}};
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

/* Keys one dispatch of shaders/flash_cpu.comp visits. lavapipe ends an
 * invocation's loops after 65535 iterations in all (silently: later keys
 * and even the final writes are dropped). The kernel's loops over head dims
 * and rows are unrolled, so its runtime loop is the one over key steps:
 * measured on lavapipe (Mesa 22.3) with one query, 250000 keys come out
 * right in one dispatch for d <= 128 and 130000 for d 256 (160000 do not).
 * 16384 keys per dispatch keeps a margin of 8x; tests/test_attention.c has a
 * row of 20000 keys. */
#define CPU_KERNEL_KEYS_PER_DISPATCH 16384

/* shaders/flash_cpu.comp reads q, k and v as vec4 texels and writes out as
 * vec4s: every row must start on a multiple of 4 elements (the head dims
 * then make every stride one: split heads and projections alike), q, k, v
 * need texel views of their dtype over their whole buffer (all bf16 or none:
 * vk_texel_ok), out a 16-byte aligned start. */
static bool texel_io(const attn_shape *s, const vk_view qkvo[4])
{
    if (s->d_k % 4 || s->d_v % 4)
        return false;
    if (!vk_texel_ok((const vk_view *const[]){&qkvo[0], &qkvo[1], &qkvo[2]}, 3, true))
        return false;
    return !qkvo[3].buf || (qkvo[3].buf->offset + qkvo[3].offset) % 16 == 0;
}

/* The fp32 scores [batch][heads][len_q][len_k] as a view of matrices. */
static vk_view scores_view(const attn_shape *s, const vk_view *scores)
{
    const uint64_t Lq = s->len_q, Lk = s->len_k;
    vk_view v = *scores;
    v.stride[0] = s->heads * Lq * Lk, v.stride[1] = Lq * Lk, v.stride[2] = Lk;
    return v;
}

/* k or v from the plan's first cache entry (kv_b0), for the unfused path's
 * matmuls (the fused shaders take kv_b0 itself). */
static vk_view entry_view(const vk_attn_plan *plan, const vk_view *all)
{
    vk_view e = *all;
    e.offset += (VkDeviceSize)plan->kv_b0 * all->stride[0] * vkmha__dtype_size(all->dtype);
    return e;
}

/* The unfused path's matmuls: scores = scale q k^T (mm[0]) and out = p v
 * (mm[1]), from the plan's first cache entry, in fp32 scores. */
static void unfused_matmuls(const vk_attn_plan *plan, const vk_view *q, const vk_view *k_all,
                            const vk_view *v_all, const vk_view *out, const vk_view *scores,
                            vk_matmul_args mm[2])
{
    const attn_shape *s = &plan->s;
    const vk_view sv = scores_view(s, scores);
    mm[0] = (vk_matmul_args){.a = *q, .b = entry_view(plan, k_all), .c = sv, .m = s->len_q,
                             .n = s->len_k, .k = s->d_k, .trans_b = true, .alpha = s->scale,
                             .batch_outer = s->batch, .batch_inner = s->heads,
                             .b_div = s->heads / s->kv_heads};
    mm[1] = (vk_matmul_args){.a = sv, .b = entry_view(plan, v_all), .c = *out, .m = s->len_q,
                             .n = s->d_v, .k = s->len_k, .trans_b = false, .alpha = 1.0f,
                             .batch_outer = s->batch, .batch_inner = s->heads,
                             .b_div = s->heads / s->kv_heads};
}

/* Product (entry b, query head h) of one of the unfused path's batched
 * matmuls, alone. */
static vk_matmul_args product_of(const vk_matmul_args *m, uint64_t b, uint64_t h)
{
    vk_matmul_args p = *m;
    p.a.offset += (b * m->a.stride[0] + h * m->a.stride[1]) * vkmha__dtype_size(m->a.dtype);
    p.b.offset += (b * m->b.stride[0] + h / m->b_div * m->b.stride[1]) *
                  vkmha__dtype_size(m->b.dtype);
    p.c.offset += (b * m->c.stride[0] + h * m->c.stride[1]) * vkmha__dtype_size(m->c.dtype);
    p.batch_outer = p.batch_inner = p.b_div = 1;
    return p;
}

/* Where the unfused path keeps its fp32 scores: the caller's fp32 weights,
 * else SLOT_SCORES. */
static vk_view unfused_scores(vk_state *vk, const vk_attn_plan *plan)
{
    return plan->scores.dtype == VKMHA_DTYPE_F32
               ? plan->scores
               : vk_view_of(&vk->slots[SLOT_SCORES], VKMHA_DTYPE_F32);
}

/* Bytes from view t's first element (k or v, dim elements a key) to past
 * the last key of the call's entries (from kv_b0) and key/value heads. */
static uint64_t kv_span(const attn_shape *s, const vk_view *t, uint32_t kv_b0, uint32_t dim)
{
    const uint64_t last = ((uint64_t)kv_b0 + s->batch - 1) * t->stride[0] +
                          (uint64_t)(s->kv_heads - 1) * t->stride[1] +
                          (uint64_t)(s->len_k - 1) * t->stride[2] + dim;
    return last * vkmha__dtype_size(t->dtype);
}

/* Keys of one head that one binding holds from any key (vk_window_bytes),
 * for k and v alike. */
static uint64_t window_keys(const vk_state *vk, const attn_shape *s, const vk_view *k,
                            const vk_view *v)
{
    const uint64_t most = vk_window_bytes(vk);
    const uint64_t nk = vkmha__rows_within(most / vkmha__dtype_size(k->dtype), s->d_k,
                                           k->stride[2]),
                   nv = vkmha__rows_within(most / vkmha__dtype_size(v->dtype), s->d_v,
                                           v->stride[2]);
    return nk < nv ? nk : nv;
}

vkmha_status vk_attention_prepare(vk_state *vk, const attn_shape *s, bool weights,
                                  const vk_view *weights_view, const vk_view qkvo[4],
                                  uint32_t kv_b0, vk_attn_plan *plan)
{
    vkmha_status st;
    /* k and v past maxStorageBufferRange: the CPU-shaped fused kernel reads
     * them through texel views of their whole buffers (which
     * maxTexelBufferElements bounds, not the storage range), the
     * shared-memory one binds them in windows of keys, and the unfused path
     * runs its matmuls one product (batch entry, query head) at a time,
     * which vk_record_matmul binds in windows (batched, they cannot be). */
    const bool windowed = !vk_view_fits(vk, &qkvo[1], kv_span(s, &qkvo[1], kv_b0, s->d_k)) ||
                          !vk_view_fits(vk, &qkvo[2], kv_span(s, &qkvo[2], kv_b0, s->d_v));
    const uint64_t win_keys = windowed ? window_keys(vk, s, &qkvo[1], &qkvo[2]) : 0;
    if (windowed && !win_keys)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: k: one key row is more than maxStorageBufferRange (%llu bytes) "
                           "lets one binding hold",
                           vk->ctx->call, (unsigned long long)vk->info.max_storage_buffer_range);
    const uint32_t dim = s->d_k > s->d_v ? s->d_k : s->d_v;
    uint32_t cls = 0;
    while (cls < VK_FLASH_CLASSES && (32u << cls) < dim)
        cls++;
    /* The candidates: each fused kernel where it can run (a forced kernel
     * wherever it can, the other only where it cannot), and unfused where
     * its scores fit a buffer. */
    const vk_pipe cpu_pipe = {.kernel = KERNEL_FLASH_CPU, .cls = (uint8_t)cls},
                  shared_pipe = {.kernel = KERNEL_FLASH, .cls = (uint8_t)cls};
    const bool have_cpu =
        cls < VK_FLASH_CLASSES && vk_pipe_available(vk, cpu_pipe) && texel_io(s, qkvo);
    const bool have_shared = cls < VK_FLASH_CLASSES && vk_pipe_available(vk, shared_pipe);
    const bool cpu_ok = have_cpu && vk->fused_kernel != VKMHA_FUSED_KERNEL_SHARED;
    const bool shared_ok =
        have_shared && !(vk->fused_kernel == VKMHA_FUSED_KERNEL_REGISTER && cpu_ok);
    const bool fusable = cpu_ok || shared_ok;
    if (windowed && !fusable && s->path == VKMHA_ATTENTION_PATH_FUSED)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: k and v are more than this device's maxStorageBufferRange "
                           "(%llu bytes) lets one binding hold: the fused path reads them in "
                           "windows with its shared-memory kernel, which has no blocks for "
                           "these head dims on this device; use the unfused path",
                           vk->ctx->call, (unsigned long long)vk->info.max_storage_buffer_range);
    if (s->path == VKMHA_ATTENTION_PATH_FUSED && !fusable) {
        /* The largest head-dim class whose blocks fit the device's limits. */
        uint32_t most = 0;
        for (uint32_t c = 0; c < VK_FLASH_CLASSES; c++)
            if (vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_FLASH, .cls = (uint8_t)c}) ||
                (vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_FLASH_CPU, .cls = (uint8_t)c}) &&
                 vk->fused_kernel != VKMHA_FUSED_KERNEL_SHARED))
                most = 32u << c;
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: the fused attention path takes head dims up to %u on this "
                           "device (d_k %u, d_v %u); use the unfused path",
                           vk->ctx->call, most, s->d_k, s->d_v);
    }
    const uint64_t rows = (uint64_t)s->batch * s->heads * s->len_q;
    const uint64_t score_bytes = rows * s->len_k * 4;
    const bool unfused_fits = score_bytes <= vk->info.max_storage_buffer_range &&
                              score_bytes <= vk->info.max_allocation_size;
    const double t_cpu = cpu_ok ? vk_cost_fused(vk, s, true, weights, vk->flash_cpu[cls].block_q)
                                : INFINITY;
    const double t_shared =
        shared_ok ? vk_cost_fused(vk, s, false, weights, vk->flash[cls].block_q) : INFINITY;
    /* Keys past the range: the fused path where it can (the cost model
     * knows neither path's windows). */
    const double t_unfused =
        unfused_fits && !(windowed && fusable) ? vk_cost_unfused(vk, s) : INFINITY;
    const bool cpu_kernel = cpu_ok && t_cpu <= t_shared;
    const double t_fused = cpu_kernel ? t_cpu : t_shared;
    const bool fused = fusable && (s->path == VKMHA_ATTENTION_PATH_FUSED ||
                                   (s->path == VKMHA_ATTENTION_PATH_AUTO &&
                                    !(t_unfused < t_fused)));
    *plan = (vk_attn_plan){.s = *s, .fused = fused, .cpu_kernel = cpu_kernel,
                           .weights = weights, .cls = cls, .splits = 1, .split_len = s->len_k,
                           .chunk = s->len_k, .chunks = 1, .kv_b0 = kv_b0};
    char model[160] = "";
    if (s->path == VKMHA_ATTENTION_PATH_AUTO && vkmha__log_enabled(vk->ctx, VKMHA_LOG_DEBUG))
        snprintf(model, sizeof model,
                 " (cost model: CPU-shaped kernel %.0f us, shared-memory kernel %.0f us, "
                 "unfused %.0f us)",
                 t_cpu, t_shared, t_unfused);

    vk_mask_slots(vk, plan->masks);
    /* SLOT_SCORES holds fp32, whatever the caller's dtype */
    plan->scores = weights_view ? *weights_view
                                : vk_view_of(&vk->slots[SLOT_SCORES], VKMHA_DTYPE_F32);
    /* fp32 scores: in the weights when they are fp32, else in SLOT_SCORES
     * (the unfused path's softmax then writes the weights from there). */
    const bool typed_weights = weights_view && weights_view->dtype != VKMHA_DTYPE_F32;
    if (((plan->weights || !plan->fused) && !weights_view) || (!plan->fused && typed_weights))
        if ((st = vk_slot_ensure(vk, SLOT_SCORES, score_bytes)))
            return st;
    if (!plan->fused && windowed) {
        /* One product at a time: each takes a site after the first (and
         * its windows theirs: vk_matmul_prepare). */
        plan->products = true;
        vk_matmul_args mm[2];
        const vk_view scores = unfused_scores(vk, plan);
        unfused_matmuls(plan, &qkvo[0], &qkvo[1], &qkvo[2], &qkvo[3], &scores, mm);
        const uint64_t n = (uint64_t)s->batch * s->heads;
        for (uint64_t i = 0; i < 2 * n && !st; i++) {
            const vk_matmul_args p = product_of(&mm[i / n], i % n / s->heads, i % s->heads);
            st = vk_matmul_prepare(vk, &p, 1);
        }
        if (st || (st = vk_window_sites_reserve(vk, KIND_MATMUL, 2 * n - 2)))
            return st;
        vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                   "%s: k and v beyond maxStorageBufferRange (%llu bytes): bound in windows "
                   "by the unfused path's matmuls, one product at a time",
                   vk->ctx->call, (unsigned long long)vk->info.max_storage_buffer_range);
    }
    if (!plan->fused) {
        vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                   "%s: unfused attention, %llu bytes of scores%s", vk->ctx->call,
                   (unsigned long long)score_bytes, model);
        return VKMHA_SUCCESS;
    }

    const vk_flash_config *f = cpu_kernel ? &vk->flash_cpu[cls] : &vk->flash[cls];
    /* A block of queries that one lane holds (a decode step's): the lanes
     * take parts of the keys instead (shaders/flash_cpu.comp). */
    plan->lane_keys = cpu_kernel && s->len_q <= f->tm;
    const uint32_t lanes = plan->lane_keys ? f->workgroup_size : 1;
    plan->q_blocks = (uint32_t)div_up(s->len_q, plan->lane_keys ? f->tm : f->block_q);
    const uint64_t groups = rows / s->len_q * plan->q_blocks;
    /* Windows of keys: the shared-memory kernel's, one key range. */
    const bool key_windows = windowed && !cpu_kernel;
    uint64_t splits = key_windows ? 1 : s->kv_splits;
    if (splits == 0) {
        /* Too few workgroups to fill the device (decode-like shapes): split
         * the keys, keeping a few key blocks per range. */
        splits = groups < vk->flash_fill_groups ? div_up(vk->flash_fill_groups, groups) : 1;
        uint64_t most = div_up(s->len_k, (uint64_t)MIN_SPLIT_BLOCKS * f->block_k * lanes);
        splits = splits < most ? splits : most;
        /* Fewer splits where the partial outputs (splits x the output)
         * would exceed the buffer limits: the split is only for speed. */
        const uint64_t cap = vk_binding_bytes(vk);
        const uint64_t per_split =
            rows * (s->d_v > 2 ? s->d_v : 2) * 4 * lanes; /* O, or (m, l) */
        if (splits > 1 && splits * per_split > cap)
            splits = cap / per_split > 1 ? cap / per_split : 1;
        plan->split_len = (uint32_t)(div_up(div_up(s->len_k, splits), f->block_k) * f->block_k);
    } else {
        plan->split_len = (uint32_t)div_up(s->len_k, splits);
    }
    plan->splits = (uint32_t)div_up(s->len_k, plan->split_len);
    plan->partial_splits = plan->splits * lanes;
    plan->chunk = cpu_kernel ? CPU_KERNEL_KEYS_PER_DISPATCH
                  : vk->info.type == VKMHA_DEVICE_TYPE_CPU ? CPU_MAX_KEYS_PER_DISPATCH
                                                           : plan->split_len;
    if (key_windows) {
        /* Whole chunks a window, or one chunk of a window's keys. */
        if (win_keys >= plan->chunk) {
            plan->window = (uint32_t)(win_keys < s->len_k ? win_keys / plan->chunk * plan->chunk
                                                          : s->len_k);
        } else {
            plan->window = (uint32_t)(win_keys >= f->block_k ? win_keys / f->block_k * f->block_k
                                                             : win_keys);
            plan->chunk = plan->window;
        }
    }
    plan->chunks = (uint32_t)div_up(plan->split_len, plan->chunk);
    if (windowed && cpu_kernel)
        vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                   "%s: k and v beyond maxStorageBufferRange (%llu bytes): read through "
                   "texel views of their whole buffers",
                   vk->ctx->call, (unsigned long long)vk->info.max_storage_buffer_range);
    if (key_windows)
        vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                   "%s: k and v beyond maxStorageBufferRange (%llu bytes): bound in windows "
                   "of %u keys of one head",
                   vk->ctx->call, (unsigned long long)vk->info.max_storage_buffer_range,
                   plan->window);
    vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: fused attention (%s kernel%s), blocks of %u queries x %u keys, "
               "%llu workgroups, %u key ranges of %u, %u dispatches each%s",
               vk->ctx->call, cpu_kernel ? "CPU-shaped" : "shared-memory",
               plan->lane_keys ? ", lanes over keys" : "",
               plan->lane_keys ? f->tm : f->block_q, f->block_k,
               (unsigned long long)(groups * plan->splits), plan->splits, plan->split_len,
               plan->chunks, model);

    if ((st = vk_slot_ensure(vk, SLOT_STATS, rows * 2 * 4)))
        return st;
    if (key_windows) {
        /* A site per window and (entry, key/value head), each pass (the
         * output's, the weights'), after its first. */
        const uint64_t pairs = (uint64_t)s->batch * s->kv_heads,
                       passes = plan->weights ? 2 : 1;
        if ((st = vk_window_sites_reserve(vk, KIND_FLASH,
                                         passes * (div_up(s->len_k, plan->window) * pairs - 1))))
            return st;
    }
    if ((plan->partial_splits > 1 || plan->chunks > 1) &&
        ((st = vk_slot_ensure(vk, SLOT_PARTIAL_O,
                              (uint64_t)plan->partial_splits * rows * s->d_v * 4)) ||
         (st = vk_slot_ensure(vk, SLOT_PARTIAL_ML,
                              (uint64_t)plan->partial_splits * rows * 2 * 4))))
        return st;
    return VKMHA_SUCCESS;
}

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
        const vk_matmul_args p = product_of(m, i / heads, i % heads);
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
    const vk_view scores = unfused_scores(vk, plan);
    vk_matmul_args mm[2];
    unfused_matmuls(plan, q, k_all, v_all, out, &scores, mm);
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
 * vk->window_sites[KIND_FLASH], one per window and pair). */
static vkmha_status dispatch_keys(vk_state *vk, vk_site *site, const vk_attn_plan *plan,
                                  vk_pipe pipe, const vk_view bufs[9], struct flash_push *p,
                                  uint64_t groups, bool weights)
{
    const attn_shape *s = &plan->s;
    const uint32_t flags = p->flags;
    const uint64_t pairs = plan->window ? (uint64_t)s->batch * s->kv_heads : 1;
    /* Workgroups of one pair: its query heads' blocks (one key range). */
    const uint64_t per_pair = plan->window ? groups / pairs : groups;
    vk_site *more = NULL;
    if (plan->window) {
        const uint64_t extra = div_up(s->len_k, plan->window) * pairs - 1;
        if (extra && !(more = vk_window_sites_take(vk, KIND_FLASH, extra)))
            return VKMHA_ERROR_VULKAN;
        /* The window's binding starts at the pair's key kv_key0. */
        p->k_sb = p->k_sh = p->v_sb = p->v_sh = 0;
    }
    vk_view b[9];
    memcpy(b, bufs, sizeof b);
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
            if ((st = vk_dispatch_range(vk, at, pipe, b, 9, p, sizeof *p,
                                        offsetof(struct flash_push, group_base), first,
                                        first + per_pair)))
                return st;
        }
    }
    return VKMHA_SUCCESS;
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
    struct flash_push p = {
        .groups = (uint32_t)groups, .len_q = s->len_q, .len_k = s->len_k, .heads = s->heads,
        .group = s->heads / s->kv_heads, .dims = s->d_k | s->d_v << 16,
        .q_blocks = plan->q_blocks, .split_len = plan->split_len,
        .q_sb = (uint32_t)q->stride[0], .q_sh = (uint32_t)q->stride[1],
        .q_ld = (uint32_t)q->stride[2], .k_sb = (uint32_t)k->stride[0],
        .k_sh = (uint32_t)k->stride[1], .k_ld = (uint32_t)k->stride[2],
        .v_sb = (uint32_t)v->stride[0], .v_sh = (uint32_t)v->stride[1],
        .v_ld = (uint32_t)v->stride[2], .o_sb = (uint32_t)out->stride[0],
        .o_sh = (uint32_t)out->stride[1], .o_ld = (uint32_t)out->stride[2],
        .flags = mask->kinds, .scale = s->scale, .kv_count = plan->chunk,
        .causal_offset = mask->causal_offset, .kv_b0 = plan->kv_b0};
    const uint32_t kinds = mask->kinds | (plan->lengths.buf ? VK_MASK_LENGTHS : 0) |
                           (plan->lane_keys ? MODE_LANE_KEYS : 0);
    vk_bias_strides(mask, s->len_q, s->len_k, &p.bias_sb, &p.bias_sh);
    vk_softmax_args m = {0};
    vk_mask_args(plan->masks, mask, &m);
    const vk_view partial_o = vk_view_of(&vk->slots[SLOT_PARTIAL_O], VKMHA_DTYPE_F32),
                  partial_ml = vk_view_of(&vk->slots[SLOT_PARTIAL_ML], VKMHA_DTYPE_F32),
                  stats = vk_view_of(&vk->slots[SLOT_STATS], VKMHA_DTYPE_F32);
    const vk_view bufs[9] = {*q, *k, *v, m.masks[0], m.masks[1], m.masks[2],
                             split ? partial_o : *out, split ? partial_ml : stats,
                             plan->lengths};
    const vk_pipe pipe = {.kernel = plan->cpu_kernel ? KERNEL_FLASH_CPU : KERNEL_FLASH,
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
                                     div_up(rows * s->d_v, vk->elementwise_wg))))
            return st;
    }

    if (!plan->weights)
        return VKMHA_SUCCESS;
    /* Over the same ranges and chunks, from the final statistics. */
    const vk_view wb[9] = {*q, *k, *v, m.masks[0], m.masks[1], m.masks[2], plan->scores, stats,
                           plan->lengths};
    p.flags = kinds | MODE_WEIGHTS;
    vk_barrier(vk);
    return dispatch_keys(vk, weights_site, plan, pipe, wb, &p, groups, true);
}

vkmha_status vk_record_attention(vk_state *vk, vk_site sites[], const vk_attn_plan *plan,
                                 const mask_r *mask, const vk_view *q, const vk_view *k,
                                 const vk_view *v, const vk_view *out)
{
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
    return vk_record_attention(vk, &vk->op_sites.sites[OPSITE_ATTENTION], o->plan, o->mask,
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
    const vk_view wview = vk_view_of(&vk->slots[SLOT_WEIGHTS], dt);
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
        vk_view_split(&vk->slots[SLOT_Q_HEADS], s->heads, s->len_q, s->d_k, dt),
        vk_view_split(&vk->slots[SLOT_K_HEADS], s->kv_heads, s->len_k, s->d_k, dt),
        vk_view_split(&vk->slots[SLOT_V_HEADS], s->kv_heads, s->len_k, s->d_v, dt),
        vk_view_split(&vk->slots[SLOT_O_HEADS], s->heads, s->len_q, s->d_v, dt)};
    if ((st = vk_attention_prepare(vk, s, weights != NULL, wbuf ? &wview : NULL,
                                   (const vk_view[4]){op.q, op.k, op.v, op.o}, 0, &plan)))
        return st;
    const vk_host_call call = {
        .up = {{&vk->slots[SLOT_Q_HEADS], q, bq},
               {&vk->slots[SLOT_K_HEADS], k, bk},
               {&vk->slots[SLOT_V_HEADS], v, bv}},
        .mask = mask, .batch = s->batch, .len_q = s->len_q, .len_k = s->len_k,
        .down = {{&vk->slots[SLOT_O_HEADS], out, bo, 1, bo, 1, bo},
                 {plan.scores.buf, weights, bw, 1, bw, 1, bw}},
        .record = record_op, .arg = &op};
    return vk_run_host(vk, &call);
}
