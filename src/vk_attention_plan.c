/* The attention's plan (vk_attention_prepare): path and kernel through the
 * cost model, split-K, windows of keys past maxStorageBufferRange, chunks
 * of keys per dispatch on CPU devices, the scratch the plan needs; and the
 * unfused path's matmuls, which the plan sizes and src/vk_attention.c
 * records. */
#include "vk_ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Keys one fused dispatch visits per range on CPU devices: lavapipe ends
 * any loop nest after 65535 iterations (silently: the rest of the keys would
 * be dropped), and a key block costs the shaders' loops up to ~400 of them.
 * Longer ranges take several dispatches that carry the partial state. */
#define CPU_MAX_KEYS_PER_DISPATCH 1024

/* Each split-K range has at least this many key blocks. */
#define MIN_SPLIT_BLOCKS 4

/* Keys one dispatch of shaders/flash_cpu.comp visits. lavapipe ends an
 * invocation's loops after 65535 iterations in all (silently: later keys
 * and even the final writes are dropped). The kernel's loops over head dims
 * and rows are unrolled, so its runtime loop is the one over key steps:
 * measured on lavapipe (Mesa 22.3) with one query, 250000 keys come out
 * right in one dispatch for d <= 128 and 130000 for d 256 (160000 do not).
 * 16384 keys per dispatch keeps a margin of 8x; tests/test_attention.c has a
 * row of 20000 keys. */
#define CPU_KERNEL_KEYS_PER_DISPATCH 16384

/* k and v are a Q8 KV cache's rows (vkmha_kv_cache_desc.quant): U8 views,
 * which flash.comp reads through their binding (shaders/kv_q8.glsl) and the
 * CPU-shaped kernel's KV_Q8 variant through their words' texels. */
static bool q8_rows(const vk_view qkvo[4])
{
    return qkvo[1].q8_rows;
}

/* shaders/flash_cpu.comp reads q, k and v as vec4 texels and writes out as
 * vec4s: every row must start on a multiple of 4 elements (the head dims
 * then make every stride one: split heads and projections alike), q, k, v
 * need texel views of their dtype over their whole buffer (all bf16 or none:
 * vk_texel_ok), out a 16-byte aligned start. */
static bool texel_io(const attn_shape *s, const vk_view qkvo[4])
{
    if (s->d_k % 4 || s->d_v % 4)
        return false;
    if (q8_rows(qkvo) ? !vk_texel_ok((const vk_view *const[]){&qkvo[0]}, 1, true) ||
                            !vk_texel_view(&qkvo[1], false) || !vk_texel_view(&qkvo[2], false)
                      : !vk_texel_ok((const vk_view *const[]){&qkvo[0], &qkvo[1], &qkvo[2]},
                                     3, true))
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
void vk_attention_unfused_matmuls(const vk_attn_plan *plan, const vk_view *q, const vk_view *k_all,
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
vk_matmul_args vk_attention_product(const vk_matmul_args *m, uint64_t b, uint64_t h)
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
vk_view vk_attention_unfused_scores(vk_state *vk, const vk_attn_plan *plan)
{
    return plan->scores.dtype == VKMHA_DTYPE_F32
               ? plan->scores
               : vk_view_of(&vk->mem.slots[SLOT_SCORES], VKMHA_DTYPE_F32);
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

/* The plan of a call of shape s; fold: its query heads per key / value
 * head where s is a group folded into the rows of one head (fold_group),
 * else 0; span: the most keys a query sees through the mask's window
 * (window_span). A fold the chosen kernel does not take leaves plan->fold
 * 0 and the plan otherwise empty: the caller then plans the call unfolded. */
static vkmha_status prepare(vk_state *vk, const attn_shape *s, uint32_t fold, uint64_t span,
                            bool weights, const vk_view *weights_view, const vk_view qkvo[4],
                            uint32_t kv_b0, vk_attn_plan *plan)
{
    vkmha_status st;
    /* The per-head rules, and the values' and keys' flags of the CPU-shaped
     * kernel's skipping (vk_attention.c). */
    if ((st = vk_head_rules_ensure(vk, s->heads, 2ull * s->batch * s->kv_heads)))
        return st;
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
    const uint32_t cls = vk_flash_class(s->d_k, s->d_v);
    /* The candidates: each fused kernel where it can run (a forced kernel
     * wherever it can, the other only where it cannot), and unfused where
     * its scores fit a buffer. */
    const vk_pipe cpu_pipe = {.kernel = q8_rows(qkvo) ? KERNEL_FLASH_CPU_Q8 : KERNEL_FLASH_CPU,
                              .cls = (uint8_t)cls},
                  shared_pipe = {.kernel = KERNEL_FLASH, .cls = (uint8_t)cls},
                  coop_pipe = {.kernel = KERNEL_FLASH_COOP, .cls = (uint8_t)cls};
    const vkmha_fused_kernel forced = vk->tuning.fused_kernel;
    /* The cooperative variant takes the shared-memory kernel's place for
     * fp16 q with fp16 k and v or a Q8 cache's rows, unless another kernel is
     * forced. */
    const bool coop = cls < VK_FLASH_CLASSES && vk_pipe_available(vk, coop_pipe) &&
                      qkvo[0].dtype == VKMHA_DTYPE_F16 &&
                      ((qkvo[1].dtype == VKMHA_DTYPE_F16 && qkvo[2].dtype == VKMHA_DTYPE_F16) ||
                       q8_rows(qkvo)) &&
                      forced != VKMHA_FUSED_KERNEL_SHARED &&
                      forced != VKMHA_FUSED_KERNEL_REGISTER;
    const bool have_cpu =
        cls < VK_FLASH_CLASSES && vk_pipe_available(vk, cpu_pipe) && texel_io(s, qkvo);
    const bool have_shared =
        cls < VK_FLASH_CLASSES && (coop || vk_pipe_available(vk, shared_pipe));
    const bool cpu_ok = have_cpu && forced != VKMHA_FUSED_KERNEL_SHARED &&
                        !(forced == VKMHA_FUSED_KERNEL_COOPERATIVE && coop);
    const bool shared_ok =
        have_shared && !(vk->tuning.fused_kernel == VKMHA_FUSED_KERNEL_REGISTER && cpu_ok);
    const bool fusable = cpu_ok || shared_ok;
    if (windowed && !fusable && s->path == VKMHA_ATTENTION_PATH_FUSED)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: k and v are more than this device's maxStorageBufferRange "
                           "(%llu bytes) lets one binding hold: the fused path reads them in "
                           "windows with its shared-memory kernel, which has no blocks for "
                           "these head dims on this device; use the unfused path",
                           vk->ctx->call, (unsigned long long)vk->info.max_storage_buffer_range);
    if (s->path == VKMHA_ATTENTION_PATH_FUSED && !fusable && cls < VK_FLASH_CLASSES &&
        (vk->tuning.unfit_kinds >> KIND_FLASH & 1))
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: the fused attention path's kernel binds %u storage buffers, "
                           "more than this device's maxPerStageDescriptorStorageBuffers (%u); "
                           "use the unfused path",
                           vk->ctx->call, vk_kind_storage_buffers(vk, KIND_FLASH),
                           vk->info.max_storage_buffers_per_stage);
    if (s->path == VKMHA_ATTENTION_PATH_FUSED && !fusable) {
        /* The largest head-dim class whose blocks fit the device's limits. */
        uint32_t most = 0;
        for (uint32_t c = 0; c < VK_FLASH_CLASSES; c++)
            if (vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_FLASH, .cls = (uint8_t)c}) ||
                (vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_FLASH_CPU, .cls = (uint8_t)c}) &&
                 vk->tuning.fused_kernel != VKMHA_FUSED_KERNEL_SHARED))
                most = vk_flash_dim(c);
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: the fused attention path takes head dims up to %u on this "
                           "device (d_k %u, d_v %u); use the unfused path",
                           vk->ctx->call, most, s->d_k, s->d_v);
    }
    const uint64_t rows = (uint64_t)s->batch * s->heads * s->len_q;
    const uint64_t score_bytes = rows * s->len_k * 4;
    const bool unfused_fits = score_bytes <= vk->info.max_storage_buffer_range &&
                              score_bytes <= vk->info.max_allocation_size;
    const double t_cpu = cpu_ok ? vk_cost_fused(vk, s, true, weights, vk->tuning.flash_cpu[cls].block_q)
                                : INFINITY;
    const vk_flash_config *shared_f = coop ? &vk->tuning.flash_coop[cls] : &vk->tuning.flash[cls];
    const double t_shared =
        shared_ok ? vk_cost_fused(vk, s, false, weights, shared_f->block_q) : INFINITY;
    /* Keys past the range: the fused path where it can (the cost model
     * knows neither path's windows). */
    const double t_unfused =
        unfused_fits && !(windowed && fusable) && !(q8_rows(qkvo) && fusable)
            ? vk_cost_unfused(vk, s)
            : INFINITY;
    const bool cpu_kernel = cpu_ok && t_cpu <= t_shared;
    const double t_fused = cpu_kernel ? t_cpu : t_shared;
    const bool fused = fusable && (s->path == VKMHA_ATTENTION_PATH_FUSED ||
                                   (s->path == VKMHA_ATTENTION_PATH_AUTO &&
                                    !(t_unfused < t_fused)));
    /* A folded group runs on a fused kernel only, and not where the
     * CPU-shaped kernel's block would take fewer rows than it holds: its
     * lanes over keys serve one query better. */
    if (fold && (!fused || (cpu_kernel && fold < vk->tuning.flash_cpu[cls].block_q))) {
        *plan = (vk_attn_plan){0};
        return VKMHA_SUCCESS;
    }
    if (!fused && q8_rows(qkvo)) {
        *plan = (vk_attn_plan){.s = *s, .dequant = true};
        return VKMHA_SUCCESS;
    }
    *plan = (vk_attn_plan){.s = *s, .fused = fused, .cpu_kernel = cpu_kernel,
                           .coop = coop && !cpu_kernel,
                           .weights = weights, .cls = cls, .splits = 1, .split_len = s->len_k,
                           .chunk = s->len_k, .chunks = 1, .kv_b0 = kv_b0,
                           .kv_whole = !windowed, .fold = fold};
    char model[160] = "";
    if (s->path == VKMHA_ATTENTION_PATH_AUTO && vkmha__log_enabled(vk->ctx, VKMHA_LOG_DEBUG))
        snprintf(model, sizeof model,
                 " (cost model: CPU-shaped kernel %.0f us, shared-memory kernel %.0f us, "
                 "unfused %.0f us)",
                 t_cpu, t_shared, t_unfused);

    vk_mask_slots(vk, plan->masks);
    /* SLOT_SCORES holds fp32, whatever the caller's dtype */
    plan->scores = weights_view ? *weights_view
                                : vk_view_of(&vk->mem.slots[SLOT_SCORES], VKMHA_DTYPE_F32);
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
        const vk_view scores = vk_attention_unfused_scores(vk, plan);
        vk_attention_unfused_matmuls(plan, &qkvo[0], &qkvo[1], &qkvo[2], &qkvo[3], &scores, mm);
        const uint64_t n = (uint64_t)s->batch * s->heads;
        for (uint64_t i = 0; i < 2 * n && !st; i++) {
            const vk_matmul_args p = vk_attention_product(&mm[i / n], i % n / s->heads, i % s->heads);
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

    const vk_flash_config *f = cpu_kernel ? &vk->tuning.flash_cpu[cls] : shared_f;
    /* A block of queries that one lane holds (a decode step's): the lanes
     * take parts of the keys instead (shaders/flash_cpu.comp). */
    plan->lane_keys = cpu_kernel && s->len_q <= f->tm;
    const uint32_t lanes = plan->lane_keys ? f->workgroup_size : 1;
    plan->q_blocks = (uint32_t)vk_div_up(s->len_q, plan->lane_keys ? f->tm : f->block_q);
    /* Lanes over keys skip what a window hides where it hides at least 3/4
     * of the keys: the values' scan (a pass over them, on lavapipe about a
     * third of the attention's time over all keys; a Q8 cache's: over their
     * scales) then pays. Values bound whole, as that scan reads them
     * (vk_attention.c). */
    plan->lane_skip = plan->lane_keys && span <= s->len_k / 4 && !windowed;
    const uint64_t groups = rows / s->len_q * plan->q_blocks;
    /* Windows of keys: the shared-memory kernel's, one key range. */
    const bool key_windows = windowed && !cpu_kernel;
    uint64_t splits = key_windows ? 1 : s->kv_splits;
    if (splits == 0) {
        /* Too few workgroups to fill the device (decode-like shapes): split
         * the keys, keeping a few key blocks per range. */
        splits = groups < vk->tuning.flash_fill_groups ? vk_div_up(vk->tuning.flash_fill_groups, groups) : 1;
        uint64_t most = vk_div_up(plan->lane_skip ? span : s->len_k,
                                  (uint64_t)MIN_SPLIT_BLOCKS * f->block_k * lanes);
        splits = splits < most ? splits : most;
        /* Fewer splits where the partial outputs (splits x the output)
         * would exceed the buffer limits: the split is only for speed. */
        const uint64_t cap = vk_binding_bytes(vk);
        const uint64_t per_split =
            rows * (s->d_v > 2 ? s->d_v : 2) * 4 * lanes; /* O, or (m, l) */
        if (splits > 1 && splits * per_split > cap)
            splits = cap / per_split > 1 ? cap / per_split : 1;
        plan->split_len = (uint32_t)(vk_div_up(vk_div_up(s->len_k, splits), f->block_k) * f->block_k);
    } else {
        plan->split_len = (uint32_t)vk_div_up(s->len_k, splits);
    }
    plan->splits = (uint32_t)vk_div_up(s->len_k, plan->split_len);
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
    plan->chunks = (uint32_t)vk_div_up(plan->split_len, plan->chunk);
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
               vk->ctx->call,
               cpu_kernel ? "CPU-shaped" : plan->coop ? "cooperative-matrix" : "shared-memory",
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
                                         passes * (vk_div_up(s->len_k, plan->window) * pairs - 1))))
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

/* The most keys one query sees through mask's window (its width, twice it
 * less one without the causal mask), UINT64_MAX without one. */
static uint64_t window_span(const mask_r *mask)
{
    if (!(mask->kinds & VKMHA_MASK_WINDOW))
        return UINT64_MAX;
    return mask->kinds & VKMHA_MASK_CAUSAL ? mask->window : 2ull * mask->window - 1;
}

/* Whether a call of shape s and mask can fold a group's query heads into
 * the rows of one head (vk_attn_plan.fold), and its folded shape: one query
 * (a decode step), more query heads than key / value heads, no weights,
 * and a mask that treats every query head and row alike: key padding, the
 * soft cap, a KV cache's key lengths, and a causal mask only where it hides
 * nothing from the query (its offset reaches the last key: a decode step's
 * causal mask); no bias, full mask, window, ALiBi or sinks. */
static bool fold_group(const attn_shape *s, const mask_r *mask, bool weights, attn_shape *out)
{
    const uint32_t apart = VKMHA_MASK_FULL | VKMHA_MASK_BIAS | VKMHA_MASK_WINDOW |
                           VKMHA_MASK_ALIBI | VKMHA_MASK_SINKS;
    if (s->len_q != 1 || s->heads == s->kv_heads || weights ||
        s->path == VKMHA_ATTENTION_PATH_UNFUSED || (mask->kinds & apart) ||
        ((mask->kinds & VKMHA_MASK_CAUSAL) &&
         (int64_t)(int32_t)mask->causal_offset < (int64_t)s->len_k - 1))
        return false;
    *out = *s;
    out->heads = s->kv_heads;
    out->len_q = s->heads / s->kv_heads;
    return true;
}

vkmha_status vk_attention_prepare(vk_state *vk, const attn_shape *s, const mask_r *mask,
                                  bool weights, const vk_view *weights_view,
                                  const vk_view qkvo[4], uint32_t kv_b0, vk_attn_plan *plan)
{
    attn_shape folded;
    if (fold_group(s, mask, weights, &folded)) {
        const uint32_t g = folded.len_q;
        const vk_view fq[4] = {vk_fold_view(&qkvo[0], g), qkvo[1], qkvo[2],
                               vk_fold_view(&qkvo[3], g)};
        const vkmha_status st =
            prepare(vk, &folded, g, UINT64_MAX, weights, weights_view, fq, kv_b0, plan);
        if (st)
            return st;
        if (plan->fold) {
            vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                       "%s: a decode step's %u query heads per key / value head run as the "
                       "rows of one head (each key and value read once per group)",
                       vk->ctx->call, g);
            return VKMHA_SUCCESS;
        }
    }
    return prepare(vk, s, 0, window_span(mask), weights, weights_view, qkvo, kv_b0, plan);
}
