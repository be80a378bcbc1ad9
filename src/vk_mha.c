/* The Vulkan backend's layer (entries of vkmha_backend_ops): the weights on
 * the device, and the forward recorded as projections, attention and
 * output projection (+ LayerNorm), in every form: on host arrays through
 * the context's slots (vk_run_host), on tensors into the context's command
 * buffer, the application's (vkmha_mha_record, the public function here
 * because it takes a VkCommandBuffer) or a submission's. Heads never move:
 * attention reads head h of the projections in place through strides and
 * writes the concat directly (src/vk_attention.c). The checks are
 * src/mha.c's. */
#include "vk_internal.h"

#include <stdio.h>
#include <string.h>

/* The forward's descriptor sites, in recording order. */
enum mha_site {
    SITE_PROJ_Q, SITE_PROJ_K, SITE_PROJ_V,
    SITE_ATTENTION, /* VK_ATTENTION_SITES sites */
    SITE_PROJ_O = SITE_ATTENTION + VK_ATTENTION_SITES,
    SITE_NORM,
    SITE_DEQUANT_K, SITE_DEQUANT_V, /* a Q8 cache's fp32 copies (unfused path) */
    SITE_ROPE_Q, SITE_ROPE_K,
    SITE_COUNT
};

/* The sites of the part being planned (vk_mha.part). */
static vk_site *mha_sites(const vkmha_mha *mha)
{
    const vk_mha *vm = (const vk_mha *)mha;
    return vm->sites.sites + (size_t)vm->part * SITE_COUNT;
}

/* The layer's sites for n parts (SITE_COUNT each, in the order of enum
 * mha_site), made anew when it has fewer: without push descriptors after
 * the pending submissions that may use the old sets. */
static vkmha_status sites_ensure(vkmha_mha *mha, uint32_t n)
{
    vk_state *vk = mha->ctx->vk;
    vk_mha *vm = (vk_mha *)mha;
    if (n <= vm->n_part_sites)
        return VKMHA_SUCCESS;
    vk_kind *kinds = vkmha__alloc(mha->ctx, (size_t)n * SITE_COUNT * sizeof *kinds);
    if (!kinds)
        return vkmha__fail(mha->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           mha->ctx->call);
    for (uint32_t p = 0; p < n; p++) {
        vk_kind *k = kinds + (size_t)p * SITE_COUNT;
        for (int i = SITE_PROJ_Q; i <= SITE_PROJ_V; i++)
            k[i] = KIND_MATMUL;
        memcpy(&k[SITE_ATTENTION], vk_attention_site_kinds, sizeof vk_attention_site_kinds);
        k[SITE_PROJ_O] = KIND_MATMUL;
        k[SITE_NORM] = KIND_LAYERNORM;
        for (int i = SITE_DEQUANT_K; i <= SITE_ROPE_K; i++)
            k[i] = KIND_HEADS;
    }
    vk_site_pool grown;
    vkmha_status st = vk_site_pool_create(vk, kinds, n * SITE_COUNT, &grown);
    vkmha__free(mha->ctx, kinds);
    if (!st && vm->n_part_sites && !vk->push_descriptors && (st = vk_wait_submissions(vk)))
        vk_site_pool_destroy(vk, &grown);
    if (st)
        return st;
    vk_site_pool_destroy(vk, &vm->sites);
    vm->sites = grown;
    vm->n_part_sites = n;
    return VKMHA_SUCCESS;
}

/* Rows of block j of projection i's weight: block_rows, fewer for the last. */
static uint32_t block_len(const vk_mha *vm, const vkmha_mha_desc *d, int i, uint32_t j)
{
    const uint32_t out = vkmha__weight_out(d, i), r0 = j * vm->block_rows[i];
    return out - r0 < vm->block_rows[i] ? out - r0 : vm->block_rows[i];
}

/* Block j of projection i's weight. */
static const vk_buffer *weight_block(const vk_mha *vm, int i, uint32_t j)
{
    return j ? &vm->more[i][j - 1] : &vm->dev[W_Q + i];
}

/* Copies the weights to the device in the storage dtype (converted on the
 * host as they are written into mapped memory or staging); a projection
 * weight past maxMemoryAllocationSize in blocks of rows. */
vkmha_status vk_mha_weights(vkmha_mha *mha, const void *const src[WEIGHT_COUNT],
                            const uint32_t dt[WEIGHT_COUNT], const uint64_t n[WEIGHT_COUNT])
{
    static const char *const what[WEIGHT_COUNT] = {"w_q", "w_k", "w_v", "w_o", "b_q",
                                                   "b_k", "b_v", "b_o", "norm_gamma",
                                                   "norm_beta"};
    vk_state *vk = mha->ctx->vk;
    vk_mha *vm = (vk_mha *)mha;
    const uint32_t sd = mha->d.storage_dtype;
    const uint64_t es = vkmha__dtype_size(sd), most = vk->info.max_allocation_size;
    vkmha_status st;
    for (int i = 0; i < WEIGHT_COUNT; i++) {
        if (!src[i])
            continue;
        char name[64];
        snprintf(name, sizeof name, "desc->%s", what[i]);
        /* The projection weights may exceed maxStorageBufferRange (their
         * matmuls bind them in windows: vk_record_matmul) and
         * maxMemoryAllocationSize (blocks of rows: whole rows must fit). */
        const bool matrix = i <= W_O;
        const uint64_t in = matrix ? vkmha__weight_in(&mha->d, i) : n[i], out = n[i] / in;
        uint64_t rows = out;
        if (matrix && mha->d.weight_quant) {
            /* One buffer; past maxStorageBufferRange its matmuls copy
             * windows of its rows (vk_record_matmul). */
            const vkmha_quant_desc q = vkmha__weight_quant(&mha->d, i);
            const uint64_t bytes = vkmha__quant_layout(&q).bytes;
            if ((st = vk_check_alloc(vk, bytes, name)) ||
                (st = vk_buffer_create(vk, bytes, false, false, name, &vm->dev[i])))
                return st;
            vm->block_rows[i] = (uint32_t)out;
            vm->n_blocks[i] = 1;
            continue;
        }
        if (matrix && n[i] * es > most)
            rows = most / (in * es);
        if ((st = matrix ? vk_check_alloc(vk, rows ? rows * in * es : in * es, name)
                         : vk_check_size(vk, n[i] * es, name)))
            return st;
        if (matrix) {
            vm->block_rows[i] = (uint32_t)rows;
            vm->n_blocks[i] = (uint32_t)((out + rows - 1) / rows);
            if (vm->n_blocks[i] > 1 &&
                !(vm->more[i] = vkmha__calloc(mha->ctx, vm->n_blocks[i] - 1, sizeof(vk_buffer))))
                return vkmha__fail(mha->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                                   "%s: out of host memory", mha->ctx->call);
            if (vm->n_blocks[i] > 1)
                vkmha__log(mha->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                           "%s: %s (%llu bytes) beyond maxMemoryAllocationSize (%llu bytes): "
                           "split into %u blocks of %u rows",
                           mha->ctx->call, name, (unsigned long long)(n[i] * es),
                           (unsigned long long)most, vm->n_blocks[i], vm->block_rows[i]);
        }
        for (uint32_t j = 0; j < (matrix ? vm->n_blocks[i] : 1); j++) {
            const uint64_t bytes = matrix ? (uint64_t)block_len(vm, &mha->d, i, j) * in * es
                                          : n[i] * es;
            vk_buffer *dst = j ? &vm->more[i][j - 1] : &vm->dev[i];
            if ((st = vk_buffer_create(vk, bytes, false, false, name, dst)))
                return st;
        }
    }
    if ((st = sites_ensure(mha, 1)) || (st = vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL)))
        return st;
    for (int i = 0; i < WEIGHT_COUNT && !st; i++) {
        if (!src[i])
            continue;
        if (i > W_O) {
            st = vk_upload_converted(vk, &vm->dev[i], src[i], dt[i], sd, n[i]);
            continue;
        }
        if (mha->d.weight_quant) {
            const vkmha_quant_desc q = vkmha__weight_quant(&mha->d, i);
            st = vk_upload(vk, &vm->dev[i], 0, src[i], vkmha__quant_layout(&q).bytes);
            continue;
        }
        const uint64_t in = vkmha__weight_in(&mha->d, i), rows = vm->block_rows[i];
        for (uint32_t j = 0; j < vm->n_blocks[i] && !st; j++)
            st = vk_upload_converted(vk, weight_block(vm, i, j),
                                     (const char *)src[i] +
                                         j * rows * in * vkmha__dtype_size(dt[i]),
                                     dt[i], sd, block_len(vm, &mha->d, i, j) * in);
    }
    return vk_exec_end(vk, st, NULL);
}

/* Which slot holds input `p`: an earlier slot when the same pointer with the
 * same size was already uploaded (self-attention uploads once). */
static vk_slot input_slot(const void *p, uint64_t n, const void *const prev[],
                          const uint64_t prev_n[], const vk_slot prev_slot[], int count,
                          vk_slot own)
{
    for (int i = 0; i < count; i++)
        if (p == prev[i] && n == prev_n[i])
            return prev_slot[i];
    return own;
}

/* Block j of projection i (0: q, 1: k, 2: v, 3: out): y[:, j * block
 * rows ..] = x w_j^T + b[j * block rows ..] for `rows` rows of x; w and b in
 * the storage dtype (b absent: buf null). */
static vk_matmul_args projection_block(const vkmha_mha *mha, int i, uint32_t j, vk_view x,
                                       vk_view y, uint32_t rows)
{
    const vk_mha *vm = (const vk_mha *)mha;
    const uint32_t sd = mha->d.storage_dtype, in = vkmha__weight_in(&mha->d, i),
                   out = vkmha__weight_out(&mha->d, i), r0 = j * vm->block_rows[i];
    mm_shape s = vkmha__projection(rows, out, in);
    s.n = block_len(vm, &mha->d, i, j);
    if (mha->d.weight_quant) { /* one block */
        s.quant_b = vkmha__weight_quant(&mha->d, i);
        s.layout_b = vkmha__quant_layout(&s.quant_b);
        s.extent_b = s.layout_b.bytes;
    }
    const vk_buffer *b = &vm->dev[B_Q + i];
    vk_view bias = vk_view_of(b->buf ? b : NULL, sd);
    if (b->buf)
        bias.offset += (VkDeviceSize)r0 * vkmha__dtype_size(sd);
    y.offset += (VkDeviceSize)r0 * vkmha__dtype_size(y.dtype);
    return vk_matmul_args_of(&s, x, vk_view_of(weight_block(vm, i, j), sd), bias, y);
}

/* Projection i of `rows` rows (projection_block), block after block; the
 * blocks after the first take window sites (reserved by prepare_vulkan). */
static vkmha_status record_projection(vk_state *vk, const vkmha_mha *mha, int i, vk_site *site,
                                      vk_view x, vk_view y, uint32_t rows)
{
    const vk_mha *vm = (const vk_mha *)mha;
    vk_site *more = NULL;
    if (vm->n_blocks[i] > 1 &&
        !(more = vk_window_sites_take(vk, KIND_MATMUL, vm->n_blocks[i] - 1)))
        return VKMHA_ERROR_VULKAN;
    vkmha_status st = VKMHA_SUCCESS;
    for (uint32_t j = 0; j < vm->n_blocks[i] && !st; j++) {
        if (j) /* disjoint columns of y, overlapping bindings */
            vk_barrier(vk);
        const vk_matmul_args a = projection_block(mha, i, j, x, y, rows);
        st = vk_record_matmul(vk, j ? &more[j - 1] : site, &a);
    }
    return st;
}

/* The operands of one Vulkan forward: inputs, masks, output (the caller's
 * tensors, or the context's slots). The attention weights are the plan's. */
typedef struct fwd_bufs {
    vk_view query, key, value;
    vk_view masks[3];
    vk_view out;
} fwd_bufs;

/* The concat of the heads [B*Lq][H*d_v] overwrites the query projection
 * when the two have the same layout (d_k == d_v): attention reads each block
 * of queries before writing the same block of outputs. Not when the fused
 * path returns weights: its weights pass reads the queries again after the
 * outputs are written. */
static bool concat_in_place(const vkmha_mha_desc *d, const vk_attn_plan *plan)
{
    return d->d_k == d->d_v && !(plan->fused && plan->weights);
}

/* The entry of f's cache its views start from: 0 when the cache fits one
 * binding (bound whole, the call's entries from vk_attn_plan.kv_b0, which
 * keeps texel views), else the call's first (a cache past
 * maxStorageBufferRange: src/split.c runs calls of entries that fit). */
static uint32_t cache_first(const vk_state *vk, const mha_fwd *f)
{
    const vkmha_tensor *t[2] = {f->cache->d.keys, f->cache->d.values};
    for (int i = 0; i < 2; i++)
        if (!vk_tensor_fits(vk, t[i]))
            return f->entry;
    return 0;
}

/* A cache tensor (keys, or values with v) from entry `first` on. */
static vk_view cache_view(const mha_fwd *f, bool v, uint32_t first)
{
    vk_view t = vk_kv_view(f->cache, v);
    t.offset += (VkDeviceSize)first * t.stride[0] * vkmha__dtype_size(t.dtype);
    return t;
}

/* The append of entries b0 .. b1 - 1 (one run of equal old lengths) of
 * the keys (i 0) or values (1): the projections [B][Lk][Hkv][dim] from
 * entry b0 into split heads of the cache (bound from entry `first`:
 * cache_first) after the old length; with RoPE the keys rotated on the
 * way, from their rows of the table (record_rope_table). */
static void append_copy(vk_state *vk, const vkmha_mha_desc *d, const mha_fwd *f,
                        uint32_t first, uint32_t b0, uint32_t b1, int i, heads_shape *s,
                        vk_view *x, vk_view *y)
{
    const vkmha_kv_cache *c = f->cache;
    const uint32_t dim = i ? c->d_v : c->d_k;
    *s = (heads_shape){.batch = b1 - b0, .len = f->Lk, .heads = c->n_kv_head, .head_dim = dim};
    if (!i && d->rope_dims) {
        s->rope_pairs = d->rope_dims / 2;
        s->rope_interleaved = d->rope_layout == VKMHA_ROPE_INTERLEAVED;
        s->rope_row0 = f->B * f->Lq + b0 * f->Lk;
    }
    *x = vk_view_of(&vk->mem.slots[i ? SLOT_V_PROJ : SLOT_K_PROJ], f->ad);
    x->offset = (VkDeviceSize)b0 * f->Lk * c->n_kv_head * dim * f->es;
    *y = cache_view(f, i == 1, first);
    y->offset += ((f->entry - first + b0) * y->stride[0] + (uint64_t)f->old[b0] * y->stride[2]) *
                 vkmha__dtype_size(c->elem_dtype);
}

/* The first entry after b0's run of equal old lengths. */
static uint32_t run_end(const mha_fwd *f, uint32_t b0)
{
    uint32_t b1 = b0 + 1;
    while (b1 < f->B && f->old[b1] == f->old[b0])
        b1++;
    return b1;
}

/* The keys and values the attention reads: the cache's from entry `first`
 * on, or the projections [B][Lk][Hkv * d] in place. */
static void attention_kv(vk_state *vk, const vkmha_mha *mha, const mha_fwd *f, uint32_t first,
                         vk_view kv[2])
{
    const vkmha_mha_desc *d = &mha->d;
    kv[0] = f->cache ? cache_view(f, false, first)
                     : vk_view_merged(&vk->mem.slots[SLOT_K_PROJ], d->n_kv_head, f->Lk, d->d_k, f->ad);
    kv[1] = f->cache ? cache_view(f, true, first)
                     : vk_view_merged(&vk->mem.slots[SLOT_V_PROJ], d->n_kv_head, f->Lk, d->d_v, f->ad);
}

/* The fp32 copies of a Q8 cache's rows that the unfused path reads: the
 * call's entries' first len_k positions, split heads [B][Hkv][len_k][d] in
 * SLOT_K_HEADS and SLOT_V_HEADS (positions past an entry's length are zeros
 * in the cache, and so in the copies). */
static vk_view dequant_view(vk_state *vk, const vkmha_mha *mha, const mha_fwd *f, bool v)
{
    return vk_view_split(&vk->mem.slots[v ? SLOT_V_HEADS : SLOT_K_HEADS], mha->d.n_kv_head,
                         f->as.len_k, v ? mha->d.d_v : mha->d.d_k, VKMHA_DTYPE_F32);
}

/* The attention's plan on the keys and values kv (attention_kv, from cache
 * entry `first`). A Q8 cache's rows on the unfused path (plan->dequant) are
 * planned again on their fp32 copies (dequant_view), which record_dequant
 * makes; the plan keeps the flag. */
static vkmha_status plan_attention(vk_state *vk, const vkmha_mha *mha, const mha_fwd *f,
                                   bool weights, const vk_view *weights_view, uint32_t first,
                                   const vk_view kv[2], vk_attn_plan *plan)
{
    const vk_view q = vk_view_of(&vk->mem.slots[SLOT_Q_PROJ], f->ad),
                  concat = {.dtype = f->ad}; /* a slot of the plan's */
    const uint32_t kv_b0 = f->cache ? f->entry - first : 0;
    vkmha_status st = vk_attention_prepare(vk, &f->as, &f->mask.m, weights, weights_view,
                                           (const vk_view[4]){q, kv[0], kv[1], concat}, kv_b0,
                                           plan);
    /* flash.comp rotates the queries as it loads them: no pass over them
     * (record_rope). */
    const vkmha_mha_desc *d = &mha->d;
    if (!st && d->rope_dims && plan->fused && !plan->cpu_kernel)
        plan->rope = d->rope_dims / 2 |
                     (d->rope_layout == VKMHA_ROPE_INTERLEAVED ? ROPE_INTERLEAVED : 0) |
                     (plan->fold ? ROPE_FOLDED : 0);
    if (st || !plan->dequant)
        return st;
    const uint64_t keys = (uint64_t)f->B * mha->d.n_kv_head * f->as.len_k * 4;
    if ((st = vk_slot_ensure(vk, SLOT_K_HEADS, keys * mha->d.d_k)) ||
        (st = vk_slot_ensure(vk, SLOT_V_HEADS, keys * mha->d.d_v)) ||
        (st = vk_attention_prepare(vk, &f->as, &f->mask.m, weights, weights_view,
                                   (const vk_view[4]){q, dequant_view(vk, mha, f, false),
                                                      dequant_view(vk, mha, f, true), concat},
                                   0, plan)))
        return st;
    plan->dequant = true;
    return VKMHA_SUCCESS;
}

/* A Q8 cache's rows into their fp32 copies (plan->dequant), kv becoming
 * the copies' views. */
static vkmha_status record_dequant(vk_state *vk, const vkmha_mha *mha, const mha_fwd *f,
                                   uint32_t first, vk_view kv[2])
{
    vk_site *site = mha_sites(mha);
    vkmha_status st = VKMHA_SUCCESS;
    for (int i = 0; i < 2 && !st; i++) {
        const heads_shape hs = {.batch = f->B, .len = f->as.len_k, .heads = mha->d.n_kv_head,
                                .head_dim = i ? mha->d.d_v : mha->d.d_k};
        vk_view x = kv[i];
        x.offset += (VkDeviceSize)(f->entry - first) * x.stride[0]; /* bytes: U8 */
        kv[i] = dequant_view(vk, mha, f, i == 1);
        st = vk_record_heads(vk, &site[i ? SITE_DEQUANT_V : SITE_DEQUANT_K], &hs, true, x,
                             kv[i]);
    }
    return st;
}

/* Everything a forward needs besides its inputs and output (b), before
 * recording: projection, concat and attention scratch, and the window sites
 * of the projections past maxStorageBufferRange. */
/* RoPE's table rows: the queries', then the new keys'. */
static uint64_t rope_rows(const mha_fwd *f)
{
    return (uint64_t)f->B * f->Lq + (f->append ? (uint64_t)f->B * f->Lk : 0);
}

static vkmha_status prepare_vulkan(vkmha_mha *mha, const mha_fwd *f, const fwd_bufs *b,
                                   bool weights, const vk_view *weights_view,
                                   vk_attn_plan *plan)
{
    vk_state *vk = mha->ctx->vk;
    const vkmha_mha_desc *d = &mha->d;
    const uint32_t H = d->n_head, Hkv = d->n_kv_head;
    const uint64_t rq = (uint64_t)f->B * f->Lq, rk = (uint64_t)f->B * f->Lk, es = f->es;
    const uint32_t ad = f->ad;
    vkmha_status st;
    /* The attention's keys and values: the projections, or a cache's. */
    const uint32_t first = f->cache ? cache_first(vk, f) : 0;
    vk_view kv[2];
    attention_kv(vk, mha, f, first, kv);
    /* The key and value projections may exceed maxStorageBufferRange: their
     * matmuls write them in windows, the fused attention reads them in
     * windows (the unfused path refuses them). */
    if ((d->rope_dims &&
         (st = vk_slot_ensure(vk, SLOT_ROPE, rope_rows(f) * d->rope_dims * 4))) ||
        (st = vk_slot_ensure(vk, SLOT_Q_PROJ, rq * H * d->d_k * es)) ||
        (st = vk_slot_ensure_windowed(vk, SLOT_K_PROJ, rk * Hkv * d->d_k * es)) ||
        (st = vk_slot_ensure_windowed(vk, SLOT_V_PROJ, rk * Hkv * d->d_v * es)) ||
        (st = plan_attention(vk, mha, f, weights, weights_view, first, kv, plan)) ||
        (!concat_in_place(d, plan) &&
         (st = vk_slot_ensure(vk, SLOT_O_HEADS, rq * H * d->d_v * es))))
        return st;
    /* Operands past maxStorageBufferRange (weights, the key and value
     * inputs, a tensor output): the projections' windows take sites of
     * their own (vk_record_matmul), planned on the views they will bind;
     * so do their blocks after the first (weights past
     * maxMemoryAllocationSize: record_projection). */
    const vk_mha *vm = (const vk_mha *)mha;
    const uint64_t rows[4] = {rq, rk, rk, rq};
    const vk_view x[4] = {b->query, b->key, b->value,
                          vk_view_of(&vk->mem.slots[concat_in_place(d, plan) ? SLOT_Q_PROJ
                                                                          : SLOT_O_HEADS],
                                     ad)},
                  y[4] = {vk_view_of(&vk->mem.slots[SLOT_Q_PROJ], ad),
                          vk_view_of(&vk->mem.slots[SLOT_K_PROJ], ad),
                          vk_view_of(&vk->mem.slots[SLOT_V_PROJ], ad), b->out};
    for (int i = 0; i < 4; i++)
        for (uint32_t j = 0; j < vm->n_blocks[i]; j++) {
            const vk_matmul_args a = projection_block(mha, i, j, x[i], y[i], (uint32_t)rows[i]);
            if ((st = vk_matmul_prepare(vk, &a, 1)) ||
                (j && (st = vk_window_sites_reserve(vk, KIND_MATMUL, 1))))
                return st;
        }
    /* The append's blocks past the range, after each copy's first. */
    uint64_t blocks = 0;
    for (uint32_t b0 = 0, b1; f->cache && f->append && b0 < f->B; b0 = b1) {
        b1 = run_end(f, b0);
        for (int i = 0; i < 2; i++) {
            heads_shape hs;
            vk_view x, y;
            append_copy(vk, d, f, first, b0, b1, i, &hs, &x, &y);
            const uint64_t n = vk_heads_blocks(vk, &hs, true, &x, &y);
            if (!n)
                return vkmha__fail(mha->ctx, VKMHA_ERROR_UNSUPPORTED,
                                   "%s: io->kv_cache: one row of its keys or values is more "
                                   "than maxStorageBufferRange (%llu bytes) lets one binding "
                                   "hold",
                                   mha->ctx->call,
                                   (unsigned long long)vk->info.max_storage_buffer_range);
            blocks += n - 1;
        }
    }
    if ((st = vk_window_sites_reserve(vk, KIND_HEADS, blocks)))
        return st;
    if (f->cache)
        plan->lengths = vk_view_of(&((vk_kv *)f->cache)->lens, VKMHA_DTYPE_F32);
    return VKMHA_SUCCESS;
}

/* Appends the new keys and values to the cache after each entry's old
 * length: a copy into split heads per run of entries of one length (one for
 * a batch in step; append_copy), converting to the cache's dtype, in blocks
 * where the cache or the projections are past maxStorageBufferRange; then
 * the lengths the attention reads. */
static vkmha_status record_append(vk_state *vk, const vkmha_mha_desc *d, const mha_fwd *f,
                                  uint32_t first)
{
    vkmha_kv_cache *c = f->cache;
    vk_kv *kv = (vk_kv *)c;
    vkmha_status st;
    for (uint32_t b0 = 0, b1; b0 < f->B && f->append; b0 = b1) {
        b1 = run_end(f, b0);
        for (int i = 0; i < 2; i++) {
            heads_shape s;
            vk_view x, y;
            append_copy(vk, d, f, first, b0, b1, i, &s, &x, &y);
            if ((st = vk_record_heads_blocks(vk, &kv->sites.sites[2 * (f->entry + b0) + i], &s,
                                             true, x, y)))
                return st;
        }
        /* The next run writes the same buffers (packed 16-bit elements are
         * read-modify-written a word at a time). */
        vk_barrier(vk);
    }
    return vk_update(vk, &kv->lens, 0, f->lengths, 4ull * f->B);
}

/* Room for n floats of RoPE tables (vk_mha.rope). Tables already in it
 * are read when the plan runs: a mixed batch's parts (record_parts) take
 * theirs one after another in room size_parts made first. */
static vkmha_status rope_table_ensure(vkmha_mha *mha, uint64_t n)
{
    vk_mha *vm = (vk_mha *)mha;
    if (n <= vm->rope_cap)
        return VKMHA_SUCCESS;
    if (vm->rope_at)
        return vkmha__fail(mha->ctx, VKMHA_ERROR_VULKAN,
                           "%s: internal error: RoPE's tables grown while planned",
                           mha->ctx->call);
    float *t = vkmha__alloc(mha->ctx, n * sizeof *t);
    if (!t)
        return vkmha__fail(mha->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           mha->ctx->call);
    vkmha__free(mha->ctx, vm->rope);
    vm->rope = t;
    vm->rope_cap = n;
    return VKMHA_SUCCESS;
}

/* RoPE's (cos, sin) table of the forward's query rows and new keys,
 * computed here in double (vkmha__rope_angle, as the reference's) and
 * written into the commands before the projections, so that the barrier
 * after them orders it before record_rope's passes. */
static vkmha_status record_rope_table(vk_state *vk, vkmha_mha *mha, const mha_fwd *f)
{
    vk_mha *vm = (vk_mha *)mha;
    const vkmha_mha_desc *d = &mha->d;
    const uint32_t pairs = d->rope_dims / 2;
    const uint64_t rq = (uint64_t)f->B * f->Lq, n = rope_rows(f) * pairs * 2;
    vkmha_status st;
    if ((st = rope_table_ensure(mha, vm->rope_at + n)))
        return st;
    float *t = vm->rope + vm->rope_at;
    for (uint64_t r = 0; r < rope_rows(f); r++) {
        const bool key = r >= rq;
        const uint32_t len = key ? f->Lk : f->Lq;
        const uint64_t rr = key ? r - rq : r;
        const uint32_t pos = vkmha__rope_position(f, (uint32_t)(rr / len),
                                                  (uint32_t)(rr % len), key);
        for (uint32_t i = 0; i < pairs; i++) {
            double c, s;
            vkmha__rope_angle(d, pos, i, &c, &s);
            *t++ = (float)c;
            *t++ = (float)s;
        }
    }
    vk_barrier(vk); /* after an earlier part's passes read it */
    return vk_update(vk, &vk->mem.slots[SLOT_ROPE], 0, vm->rope + vm->rope_at, n * 4);
}

/* RoPE on the query projections in place where the attention does not
 * rotate them as it loads them (plan->rope: flash.comp), and on the new
 * keys' where no KV cache takes them (a cache's append rotates them as it
 * copies them: append_copy), a pass over each (no barrier between them:
 * different buffers), from the table. */
static vkmha_status record_rope(vk_state *vk, vkmha_mha *mha, const mha_fwd *f,
                                const vk_attn_plan *plan)
{
    const vkmha_mha_desc *d = &mha->d;
    const uint32_t pairs = d->rope_dims / 2;
    const uint64_t rq = (uint64_t)f->B * f->Lq;
    const vk_buffer *slot = &vk->mem.slots[SLOT_ROPE];
    vkmha_status st = VKMHA_SUCCESS;
    vk_site *site = mha_sites(mha);
    for (int k = plan->rope ? 1 : 0; k < 1 + (f->append && !f->cache) && !st; k++) {
        const uint32_t heads = k ? d->n_kv_head : d->n_head;
        const uint64_t rows = k ? (uint64_t)f->B * f->Lk : rq,
                       total = rows * heads * pairs;
        const struct rope_push p = {.total = (uint32_t)total, .pairs = pairs, .heads = heads,
                                    .head_dim = d->d_k, .ld = heads * d->d_k,
                                    .interleaved = d->rope_layout == VKMHA_ROPE_INTERLEAVED,
                                    .table0 = (uint32_t)(k ? rq * pairs : 0)};
        const vk_view bufs[2] = {vk_view_of(slot, VKMHA_DTYPE_F32),
                                 vk_view_of(&vk->mem.slots[k ? SLOT_K_PROJ : SLOT_Q_PROJ], f->ad)};
        st = vk_dispatch_groups(vk, &site[k ? SITE_ROPE_K : SITE_ROPE_Q], VK_PIPE(KERNEL_ROPE),
                                bufs, 2, &p, sizeof p, offsetof(struct rope_push, group_base),
                                vk_div_up(total, VK_PASS_WG));
    }
    return st;
}

/* Records the forward (after the inputs are on the device). */
static vkmha_status record_forward(vkmha_mha *mha, const mha_fwd *f, vk_attn_plan *plan,
                                   const fwd_bufs *b)
{
    vk_state *vk = mha->ctx->vk;
    const vkmha_mha_desc *d = &mha->d;
    const vk_buffer *w = ((vk_mha *)mha)->dev;
    vk_site *site = mha_sites(mha);
    vkmha_status st;
    const uint32_t H = d->n_head;
    const uint32_t rq = f->B * f->Lq, rk = f->B * f->Lk;
    vk_buffer *concat = &vk->mem.slots[concat_in_place(d, plan) ? SLOT_Q_PROJ : SLOT_O_HEADS];
    for (int i = 0; i < 3; i++)
        plan->masks[i] = b->masks[i];

    /* RoPE's table first: the barrier after the projections orders it. */
    if (d->rope_dims && (st = record_rope_table(vk, mha, f)))
        return st;
    /* Projections (independent of each other: no barrier between them). */
    const uint32_t ad = f->ad, sd = d->storage_dtype;
    if ((st = record_projection(vk, mha, 0, &site[SITE_PROJ_Q], b->query,
                                vk_view_of(&vk->mem.slots[SLOT_Q_PROJ], ad), rq)) ||
        (f->append &&
         ((st = record_projection(vk, mha, 1, &site[SITE_PROJ_K], b->key,
                                  vk_view_of(&vk->mem.slots[SLOT_K_PROJ], ad), rk)) ||
          (st = record_projection(vk, mha, 2, &site[SITE_PROJ_V], b->value,
                                  vk_view_of(&vk->mem.slots[SLOT_V_PROJ], ad), rk)))))
        return st;
    vk_barrier(vk);
    /* RoPE's pass over the queries (and the keys without a cache) and the
     * append into a cache (rotating the keys) touch different buffers: one
     * barrier after both. */
    if (d->rope_dims && (st = record_rope(vk, mha, f, plan)))
        return st;
    /* The cache's views start at the entry prepare_vulkan chose. */
    const uint32_t first = f->cache ? f->entry - plan->kv_b0 : 0;
    if (f->cache && (st = record_append(vk, d, f, first))) /* the attention reads the cache */
        return st;
    if (d->rope_dims || f->cache)
        vk_barrier(vk);

    vk_view kv[2];
    attention_kv(vk, mha, f, first, kv);
    if (plan->dequant) {
        if ((st = record_dequant(vk, mha, f, first, kv)))
            return st;
        vk_barrier(vk);
    }
    const vk_view vq = vk_view_merged(&vk->mem.slots[SLOT_Q_PROJ], H, f->Lq, d->d_k, ad),
                  vo = vk_view_merged(concat, H, f->Lq, d->d_v, ad);
    if ((st = vk_record_attention(vk, &site[SITE_ATTENTION], plan, &f->mask.m, &vq, &kv[0],
                                  &kv[1], &vo)))
        return st;
    vk_barrier(vk);

    if ((st = record_projection(vk, mha, 3, &site[SITE_PROJ_O], vk_view_of(concat, ad), b->out,
                                rq)))
        return st;
    if (d->post_norm) {
        vk_barrier(vk);
        if ((st = vk_record_layernorm(vk, &site[SITE_NORM], rq, d->d_model, d->norm_eps,
                                      b->query, vk_view_of(&w[GAMMA], sd),
                                      vk_view_of(&w[BETA], sd), b->out)))
            return st;
    }
    return VKMHA_SUCCESS;
}

/* Part p's operands as its passes read them: the call's (b, packed rows)
 * from the part's first row; *rows: where its query rows are copied from
 * to the start of SLOT_AUX before its projections (buf NULL: not copied),
 * which is where they start past the buffer's start (a later part of a
 * packed array) and the buffer has texel views (vkmha's own, on CPU
 * devices), which only a view from the start can use: the projections'
 * vec4 texel matmul is several times the speed of the storage one there.
 * Self-attention's keys and values are the same rows, copied with them. */
static fwd_bufs part_operands(vk_state *vk, const vkmha_mha *mha, const mha_fwd *f,
                              const mha_part *p, const fwd_bufs *b, vk_view *rows)
{
    const vkmha_mha_desc *d = &mha->d;
    const uint64_t at = p->row0 * f->es;
    fwd_bufs pb = *b;
    pb.query.offset += at * d->d_model;
    pb.key.offset += at * d->kdim;
    pb.value.offset += at * d->vdim;
    pb.out.offset += at * d->d_model;
    vk_view whole = pb.query;
    whole.offset = 0;
    *rows = (vk_view){0};
    if (!pb.query.offset || !(vk_texel_view(&whole, false) || vk_texel_view(&whole, true)))
        return pb;
    *rows = pb.query;
    const vk_view copy = vk_view_of(&vk->mem.slots[SLOT_AUX], f->ad);
    pb.query = copy;
    vk_view *const kv[2] = {&pb.key, &pb.value};
    const uint64_t n_kv[2] = {p->f.n_key, p->f.n_value};
    for (int k = 0; k < 2; k++)
        if (kv[k]->buf == rows->buf && kv[k]->offset == rows->offset &&
            n_kv[k] == p->f.n_query)
            *kv[k] = copy;
    return pb;
}

/* A mixed batch's parts (f->parts), planned before anything is recorded:
 * the parts' sites made, scratch slots grown and window sites reserved to
 * what every part needs, so that planning each part again as it is
 * recorded (record_parts) replaces no buffer or set an earlier part's
 * passes hold. Quiet (warnings and errors only): record_parts logs the
 * plans. */
static vkmha_status size_parts(vkmha_mha *mha, const mha_fwd *f, const fwd_bufs *b)
{
    vkmha_context *ctx = mha->ctx;
    const vkmha_log_level level = ctx->log_level;
    /* RoPE's tables, every part's; the most query rows' bytes copied. */
    uint64_t tables = 0, copied = 0;
    for (uint32_t i = 0; i < f->n_parts; i++) {
        const mha_fwd *pf = &f->parts[i].f;
        vk_view rows;
        part_operands(ctx->vk, mha, f, &f->parts[i], b, &rows);
        const uint64_t n = pf->n_query * f->es;
        tables += rope_rows(pf) * mha->d.rope_dims;
        copied = rows.buf && n > copied ? n : copied;
    }
    vkmha_status st = sites_ensure(mha, f->n_parts);
    if (!st)
        st = rope_table_ensure(mha, tables);
    if (!st && copied)
        st = vk_slot_ensure(ctx->vk, SLOT_AUX, copied);
    ctx->log_level = level > VKMHA_LOG_WARN ? level : VKMHA_LOG_WARN;
    for (uint32_t i = 0; i < f->n_parts && !st; i++) {
        vk_view rows;
        const fwd_bufs pb = part_operands(ctx->vk, mha, f, &f->parts[i], b, &rows);
        vk_attn_plan plan;
        ((vk_mha *)mha)->part = i;
        st = prepare_vulkan(mha, &f->parts[i].f, &pb, false, NULL, &plan);
    }
    ((vk_mha *)mha)->part = 0;
    ctx->log_level = level;
    vk_window_sites_end(ctx->vk); /* reserved again as they are planned */
    return st;
}

/* Plans and records a mixed batch's parts in turn, after size_parts: each
 * with its own sites, a barrier between parts (they share the scratch). */
static vkmha_status record_parts(vkmha_mha *mha, const mha_fwd *f, const fwd_bufs *b)
{
    vk_mha *vm = (vk_mha *)mha;
    vkmha_status st = VKMHA_SUCCESS;
    vk_state *vk = mha->ctx->vk;
    for (uint32_t i = 0; i < f->n_parts && !st; i++) {
        const mha_fwd *pf = &f->parts[i].f;
        vk_view rows;
        const fwd_bufs pb = part_operands(vk, mha, f, &f->parts[i], b, &rows);
        vk_attn_plan plan;
        vm->part = i;
        if (i)
            vk_barrier(vk);
        if (rows.buf) {
            if ((st = vk_copy(vk, rows.buf, rows.offset, pb.query.buf, 0, pf->n_query * f->es)))
                break;
            vk_barrier(vk);
        }
        if (!(st = prepare_vulkan(mha, pf, &pb, false, NULL, &plan)))
            st = record_forward(mha, pf, &plan, &pb);
        vm->rope_at += rope_rows(pf) * mha->d.rope_dims;
    }
    vm->part = 0;
    vm->rope_at = 0;
    return st;
}

/* The forward on host arrays: vk_run_host's record step (plan NULL: a
 * mixed batch's parts). */
typedef struct forward_op {
    vkmha_mha *mha;
    const mha_fwd *f;
    vk_attn_plan *plan;
    const fwd_bufs *b;
} forward_op;

static vkmha_status record_op(vk_state *vk, const void *arg)
{
    const forward_op *o = arg;
    (void)vk;
    return o->plan ? record_forward(o->mha, o->f, o->plan, o->b)
                   : record_parts(o->mha, o->f, o->b);
}

/* The forward on host arrays (io: query, key, value, out, attn_weights). */
static vkmha_status forward_host(vkmha_mha *mha, const mha_fwd *f, const vkmha_arg io[5])
{
    vk_state *vk = mha->ctx->vk;
    vkmha_status st;
    const uint64_t es = f->es;
    void *const out = (void *)(uintptr_t)io[3].host,
                *const attn_weights = (void *)(uintptr_t)io[4].host;
    const void *ins[3] = {io[0].host, io[1].host, io[2].host};
    const uint64_t in_n[3] = {f->n_query, f->n_key, f->n_value};
    vk_slot in_slot[3] = {SLOT_Q_IN, SLOT_K_IN, SLOT_V_IN};
    for (int i = 1; i < 3; i++)
        in_slot[i] = input_slot(ins[i], in_n[i], ins, in_n, in_slot, i, in_slot[i]);

    /* Sizes first, so that a message names the caller's tensor. The key
     * and value inputs are read only by their projections, which bind them
     * in windows past maxStorageBufferRange (the query is also the
     * post-norm's residual). */
    const uint64_t io_n[5] = {f->n_query, f->n_key, f->n_value, f->n_out,
                              attn_weights ? f->n_weights : 0};
    for (int i = 0; i < 5; i++) {
        const bool windowed = (i == 1 || i == 2) && in_slot[i] != SLOT_Q_IN;
        if ((st = (windowed ? vk_check_alloc : vk_check_size)(vk, io_n[i] * es,
                                                              vkmha__mha_io_names[i])))
            return st;
    }
    for (int i = 0; i < 3; i++) {
        if (in_slot[i] != (vk_slot)(SLOT_Q_IN + i))
            continue;
        if ((st = (i ? vk_slot_ensure_windowed : vk_slot_ensure)(vk, in_slot[i],
                                                                 in_n[i] * es)))
            return st;
    }
    /* 16-bit weights are written in SLOT_WEIGHTS, as into a weights tensor. */
    const bool wbuf = attn_weights && f->ad != VKMHA_DTYPE_F32;
    const vk_view wview = vk_view_of(&vk->mem.slots[SLOT_WEIGHTS], f->ad);
    fwd_bufs b = {.query = vk_view_of(&vk->mem.slots[in_slot[0]], f->ad),
                  .key = vk_view_of(&vk->mem.slots[in_slot[1]], f->ad),
                  .value = vk_view_of(&vk->mem.slots[in_slot[2]], f->ad),
                  .out = vk_view_of(&vk->mem.slots[SLOT_OUT], f->ad)};
    vk_mask_slots(vk, b.masks);
    vk_attn_plan plan = {.fused = false}; /* unplanned for a mixed batch's parts */
    if ((wbuf && (st = vk_slot_ensure(vk, SLOT_WEIGHTS, f->n_weights * es))) ||
        (st = vk_slot_ensure(vk, SLOT_OUT, f->n_out * es)) ||
        (st = f->n_parts ? size_parts(mha, f, &b)
                         : prepare_vulkan(mha, f, &b, attn_weights != NULL,
                                          wbuf ? &wview : NULL, &plan)))
        return st;
    const forward_op op = {mha, f, f->n_parts ? NULL : &plan, &b};
    const size_t no = (size_t)(f->n_out * es), nw = (size_t)(f->n_weights * es);
    vk_host_call call = {.mask = &f->mask.m, .batch = f->B, .len_q = f->Lq,
                         .len_k = f->as.len_k,
                         .down = {{&vk->mem.slots[SLOT_OUT], out, no, 1, no, 1, no},
                                  {plan.scores.buf, attn_weights, nw, 1, nw, 1, nw}},
                         .record = record_op, .arg = &op};
    for (int i = 0; i < 3; i++)
        if (in_slot[i] == (vk_slot)(SLOT_Q_IN + i)) /* not an earlier input's */
            call.up[i] = (vk_host_upload){&vk->mem.slots[in_slot[i]], ins[i], in_n[i] * es};
    return vk_run_host(vk, &call);
}

void vk_mha_free(vkmha_mha *mha)
{
    vk_state *vk = mha->ctx->vk;
    vk_mha *vm = (vk_mha *)mha;
    for (int i = 0; i < WEIGHT_COUNT; i++)
        vk_buffer_destroy(vk, &vm->dev[i]);
    for (int i = 0; i < 4; i++) {
        for (uint32_t j = 1; vm->more[i] && j < vm->n_blocks[i]; j++)
            vk_buffer_destroy(vk, &vm->more[i][j - 1]);
        vkmha__free(mha->ctx, vm->more[i]);
    }
    vk_site_pool_destroy(vk, &vm->sites);
    vkmha__free(mha->ctx, vm->rope);
}

vkmha_status vk_mha_forward(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                            const vkmha_arg io[5])
{
    vk_state *vk = mha->ctx->vk;
    vkmha_status st;
    if ((st = vk_self_check_need(vk, vk_check_attention(mha->d.d_k, mha->d.d_v))))
        return st;
    if (run->form == FORM_HOST)
        return forward_host(mha, f, io);
    fwd_bufs b = {.query = vk_tensor_view(&io[0]), .key = vk_tensor_view(&io[1]),
                  .value = vk_tensor_view(&io[2]), .out = vk_tensor_view(&io[3])};
    const vk_view weights = vk_tensor_view(&io[4]);
    vk_tensor_masks(&f->mask, b.masks);
    if (f->n_parts) {
        if ((st = size_parts(mha, f, &b)) || (st = vk_run_begin(vk, run)))
            return st;
        return vk_run_end(vk, run, record_parts(mha, f, &b));
    }
    vk_attn_plan plan;
    if ((st = prepare_vulkan(mha, f, &b, weights.buf != NULL, weights.buf ? &weights : NULL,
                             &plan)) ||
        (st = vk_run_begin(vk, run)))
        return st;
    return vk_run_end(vk, run, record_forward(mha, f, &plan, &b));
}

VKMHA_API vkmha_status vkmha_mha_record(vkmha_mha *mha, VkCommandBuffer cmd,
                                        const vkmha_mha_tensors *io)
{
    const vkmha_run run = {.form = FORM_RECORD, .cmd = (void *)cmd};
    return mha ? vkmha__mha_forward_tensors(mha, &run, io) : VKMHA_ERROR_INVALID_ARGUMENT;
}
