/* The tiled matmul: push-constant mirror, tile and variant choice, dispatch
 * math (tile grids beyond maxComputeWorkGroupCount in x, y or z are split
 * into several dispatches), and the public op on host arrays. */
#include "vk_ops.h"


/* Below this many large tiles the device is poorly filled: use small tiles. */
#define SMALL_TILE_THRESHOLD 64

static bool all_aligned4(const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] % 4)
            return false;
    return true;
}

/* One product whose operands each fit a descriptor. */
static vkmha_status record_block(vk_state *vk, vk_site *site, const vk_matmul_args *a)
{
    vkmha_status st =
        vk_check_strides(vk, (const vk_view *const[]){&a->a, &a->b, &a->c}, 3, "a matmul");
    if (st)
        return st;
    const uint64_t batch = (uint64_t)a->batch_outer * a->batch_inner;

    const vkmha_tile_config *large = &vk->tuning.tile_large, *small = &vk->tuning.tile_small;
    /* A few rows of op T on GPUs: the GEMV (vk_state.tile_gemv_gpu), unless
     * the matrix units are forced; else fp16 products on the matrix units,
     * through VK_NV_cooperative_matrix2 (vk_state.tile_cm2) or
     * VK_KHR_cooperative_matrix (vk_state.tile_coop). */
    const bool gemv_gpu = a->m <= VK_GPU_GEMV_ROWS && a->trans_b && !vk->tuning.coop_forced &&
                          vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_MATMUL_GEMV_GPU});
    const bool f16 = a->a.dtype == VKMHA_DTYPE_F16 && a->b.dtype == VKMHA_DTYPE_F16;
    /* fp16 A by a quantized B (shaders/matmul_coop.comp): with op T the KHR
     * kernel stages B's codes and scales each step of k by its group, so a
     * step must lie within one group; with op N it stages B dequantized in
     * two fp16 halves, in shared memory of its own. */
    const vkmha_tile_config *tc = &vk->tuning.tile_coop;
    const bool f16_quant =
        a->a.dtype == VKMHA_DTYPE_F16 && a->quant.type && tc->bk &&
        (a->trans_b ? a->quant.group_size % tc->bk == 0
                    : vk_matmul_coop_shared_bytes(tc, true) <= vk->info.max_shared_memory);
    /* Not for the ranges of k past maxStorageBufferRange (C += ..., or the
     * addend of a 16-bit C), which read C or the addend back while storing:
     * shaders/matmul_cm2.comp's output is stores only. */
    const bool cm2 = !gemv_gpu && f16 && !a->accumulate && !a->addend &&
                     vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_MATMUL_CM2});
    const bool coop = !gemv_gpu && !cm2 && vk->tuning.coop_matmul && (f16 || f16_quant) &&
                      vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_MATMUL_COOP});
    uint64_t large_tiles = (((uint64_t)a->m + large->bm - 1) / large->bm) *
                           (((uint64_t)a->n + large->bn - 1) / large->bn) * batch;
    bool use_small = large_tiles < SMALL_TILE_THRESHOLD;
    /* A few rows on a CPU device: lanes over columns (vk_state.tile_gemv). */
    const bool gemv = !coop && !cm2 && !gemv_gpu && a->m <= VK_GEMV_ROWS &&
                      vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_MATMUL, .tile = TILE_GEMV});
    const vkmha_tile_config *t = gemv_gpu ? &vk->tuning.tile_gemv_gpu
                                 : cm2  ? &vk->tuning.tile_cm2
                                 : coop ? &vk->tuning.tile_coop
                                 : gemv ? &vk->tuning.tile_gemv
                                 : use_small ? small : large;

    /* vec4 loads need every row start 16-byte aligned and whole vec4s along
     * the contiguous axis of A and of B. */
    const uint64_t align[] = {a->k,           a->a.stride[2], a->b.stride[2],
                              a->trans_b ? 0 : a->n, a->a.stride[0], a->a.stride[1],
                              a->b.stride[0], a->b.stride[1]};
    bool vec = all_aligned4(align, VKMHA_ARRAY_LEN(align)) && t->bk % 4 == 0 &&
               t->bn % 4 == 0;
    /* Texel reads need a vec4 view of the buffer in its dtype (wrapped
     * tensors and bf16 have none); a quantized B is read through its
     * storage binding. */
    if (vk->tuning.matmul_texel && !coop && !cm2 && !gemv_gpu &&
        !vk_texel_ok((const vk_view *const[]){&a->a, &a->b}, a->quant.type ? 1 : 2, true))
        vec = false;
    const vk_pipe pipe = gemv_gpu ? (vk_pipe){.kernel = KERNEL_MATMUL_GEMV_GPU, .vec = vec}
                         : cm2    ? (vk_pipe){.kernel = KERNEL_MATMUL_CM2}
                         : coop   ? (vk_pipe){.kernel = KERNEL_MATMUL_COOP, .vec = vec}
                                  : (vk_pipe){.kernel = KERNEL_MATMUL,
                                          .tile = gemv        ? TILE_GEMV
                                                  : use_small ? TILE_SMALL
                                                              : TILE_LARGE,
                                          .vec = vec};

    struct matmul_push p = {
        .M = a->m, .N = a->n, .K = a->k,
        .lda = (uint32_t)a->a.stride[2], .ldb = (uint32_t)a->b.stride[2],
        .ldc = (uint32_t)a->c.stride[2],
        .batch_inner = a->batch_inner, .b_div = a->b_div,
        .sa_outer = (uint32_t)a->a.stride[0], .sa_inner = (uint32_t)a->a.stride[1],
        .sb_outer = (uint32_t)a->b.stride[0], .sb_inner = (uint32_t)a->b.stride[1],
        .sc_outer = (uint32_t)a->c.stride[0], .sc_inner = (uint32_t)a->c.stride[1],
        .alpha = a->alpha,
        .flags = (a->trans_b ? FLAG_TRANS_B : 0u) | (a->bias.buf ? FLAG_BIAS : 0u),
        .ld_add = a->addend ? (uint32_t)a->bias.stride[2] : 0u,
        .q_scales = (uint32_t)a->qlayout.scales_offset,
        .q_zeros = (uint32_t)a->qlayout.zeros_offset,
        .q_shift = a->quant.group_size == 128 ? 7u : a->quant.group_size == 64 ? 6u : 5u};
    const uint32_t variant = (a->accumulate ? VK_VARIANT_ACCUMULATE : 0u) |
                             (a->addend ? VK_VARIANT_ADDEND : 0u) |
                             (coop && a->quant.type && !a->trans_b ? VK_VARIANT_QUANT_N : 0u);
    const vk_view bufs[4] = {a->a, a->b, a->bias, a->c};
    /* Tiles: x over columns, y over rows, z over the batch; one dispatch per
     * block of at most maxComputeWorkGroupCount tiles in each, a barrier
     * between dispatches (they write the same buffer). */
    const uint64_t n[3] = {((uint64_t)a->n + t->bn - 1) / t->bn,
                           ((uint64_t)a->m + t->bm - 1) / t->bm, batch};
    const uint64_t most[3] = {vk->info.max_workgroup_count[0], vk->info.max_workgroup_count[1],
                              vk->info.max_workgroup_count[2]};
    uint64_t parts = 1;
    for (int d = 0; d < 3; d++)
        parts *= (n[d] + most[d] - 1) / most[d];
    if (parts > 1)
        vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                   "%s: matmul of %llu x %llu x %llu tiles split into %llu dispatches "
                   "(maxComputeWorkGroupCount %llu x %llu x %llu)",
                   vk->ctx->call, (unsigned long long)n[0], (unsigned long long)n[1],
                   (unsigned long long)n[2], (unsigned long long)parts,
                   (unsigned long long)most[0], (unsigned long long)most[1],
                   (unsigned long long)most[2]);
    bool first = true;
    for (uint64_t z = 0; z < n[2]; z += most[2])
        for (uint64_t y = 0; y < n[1]; y += most[1])
            for (uint64_t x = 0; x < n[0]; x += most[0]) {
                const uint64_t base[3] = {x, y, z};
                uint32_t g[3];
                for (int d = 0; d < 3; d++)
                    g[d] = (uint32_t)(n[d] - base[d] < most[d] ? n[d] - base[d] : most[d]);
                p.x_base = (uint32_t)x;
                p.y_base = (uint32_t)y;
                p.z_base = (uint32_t)z;
                if (!first)
                    vk_barrier(vk);
                first = false;
                st = vk_dispatch(vk, site, pipe, bufs, 4, variant, &p, sizeof p, g[0], g[1],
                                 g[2]);
                if (st)
                    return st;
            }
    return VKMHA_SUCCESS;
}

/* ---- windows past maxStorageBufferRange ---------------------------------- */

/* Bytes from a matrix's first element to past its last. */
static uint64_t span(uint64_t rows, uint64_t cols, uint64_t ld, uint32_t dtype)
{
    return rows ? ((rows - 1) * ld + cols) * vkmha__dtype_size(dtype) : 0;
}

/* The most rows of `cols` elements of dtype at stride ld within `bytes`. */
static uint64_t rows_within(uint64_t bytes, uint64_t cols, uint64_t ld, uint32_t dtype)
{
    return vkmha__rows_within(bytes / vkmha__dtype_size(dtype), cols, ld);
}

/* Window sizes: mc rows of A and C by nc columns of C (rows of B with op
 * T) by kc of k (rows of B with op N, accumulated into C), multiples of 16
 * where they split, so that window starts keep the vec4 alignment of the
 * whole; *count windows. */
static vkmha_status plan_windows(vk_state *vk, const vk_matmul_args *a, uint64_t *mc,
                                 uint64_t *nc, uint64_t *kc, uint64_t *count)
{
    const uint64_t lda = a->a.stride[2], ldb = a->b.stride[2], ldc = a->c.stride[2];
    const uint64_t m = a->m, n = a->n, k = a->k, batch = (uint64_t)a->batch_outer * a->batch_inner;
    const uint64_t range = vk->info.max_storage_buffer_range, most = vk_window_bytes(vk);
    const uint64_t ba = span(m, k, lda, a->a.dtype),
                   bb = a->quant.type ? a->qlayout.bytes
                        : a->trans_b  ? span(n, k, ldb, a->b.dtype)
                                      : span(k, n, ldb, a->b.dtype),
                   bc = span(m, n, ldc, a->c.dtype),
                   bbias = a->bias.buf ? n * vkmha__dtype_size(a->bias.dtype) : 0;
    *mc = m, *nc = n, *kc = k, *count = 1;
    /* The kernels index a quantized B's elements in 32 bits. */
    if (a->quant.type && (uint64_t)a->quant.rows * a->quant.cols > UINT32_MAX)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: b: a quantized matrix of %llu elements (2^32 or more) is not "
                           "supported", vk->ctx->call,
                           (unsigned long long)a->quant.rows * a->quant.cols);
    const bool fit_a = vk_view_fits(vk, &a->a, ba), fit_b = vk_view_fits(vk, &a->b, bb),
               fit_c = vk_view_fits(vk, &a->c, bc);
    if (fit_a && fit_b && fit_c && vk_view_fits(vk, &a->bias, bbias))
        return VKMHA_SUCCESS;
    const char *what = !fit_a ? "a" : !fit_b ? "b" : !fit_c ? "c" : "bias";
    if (batch > 1)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: %s of a batched matmul is beyond maxStorageBufferRange (%llu "
                           "bytes); only single products are split",
                           vk->ctx->call, what, (unsigned long long)range);
    /* A quantized B's windows are ranges of its rows, each copied into
     * SLOT_MM_QB as a matrix of its own (its codes, scales and zero points
     * are planes of one binding: a window of them would be three): as many
     * rows as that slot can hold. */
    const uint64_t qmost = most < vk->info.max_allocation_size ? most
                                                               : vk->info.max_allocation_size;
    uint64_t cols = n;
    if (a->trans_b && !fit_b)
        cols = a->quant.type ? vkmha__quant_rows_within(&a->quant, qmost)
                             : rows_within(most, k, ldb, a->b.dtype);
    const uint64_t c_cols = most / vkmha__dtype_size(a->c.dtype);
    cols = vkmha__part16(cols < c_cols ? cols : c_cols, n);
    /* Op N with a few rows of B, C's rows longer than the range: a window
     * of a quantized B's columns would be a range of every row's planes. */
    if (a->quant.type && !a->trans_b && cols < n)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: c: one row of c (%llu bytes) is beyond maxStorageBufferRange "
                           "(%llu bytes): with a quantized b and op N, products run in windows "
                           "of rows of c only", vk->ctx->call,
                           (unsigned long long)(n * vkmha__dtype_size(a->c.dtype)),
                           (unsigned long long)range);
    /* With op N, B's windows are ranges of its rows (of k): any part of it
     * fits if it does. */
    uint64_t depth = k;
    if (!a->trans_b && !fit_b && cols)
        depth = vkmha__part16(a->quant.type ? vkmha__quant_rows_within(&a->quant, qmost)
                                            : rows_within(most, cols < n ? cols : n, ldb,
                                                          a->b.dtype),
                              k);
    uint64_t rows = rows_within(most, depth, lda, a->a.dtype);
    uint64_t c_rows = rows_within(most, cols, ldc, a->c.dtype);
    if (depth < k && a->c.dtype != VKMHA_DTYPE_F32) { /* the fp32 sums, dense */
        const uint64_t acc_rows = rows_within(most, cols, cols, VKMHA_DTYPE_F32);
        c_rows = acc_rows < c_rows ? acc_rows : c_rows;
    }
    rows = vkmha__part16(rows < c_rows ? rows : c_rows, m);
    if (!rows || !cols || !depth)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: one row of %s is beyond maxStorageBufferRange (%llu bytes)",
                           vk->ctx->call,
                           (!cols && a->trans_b) || !depth ? "b" : rows ? "c" : "a",
                           (unsigned long long)range);
    *mc = rows < m ? rows : m, *nc = cols < n ? cols : n, *kc = depth < k ? depth : k;
    *count = ((m + *mc - 1) / *mc) * ((n + *nc - 1) / *nc) * ((k + *kc - 1) / *kc);
    return VKMHA_SUCCESS;
}

/* Whether a window plan sums ranges of k in SLOT_MM_ACC (a 16-bit C). */
static bool sums_in_acc(const vk_matmul_args *a, uint64_t kc)
{
    return kc < a->k && a->c.dtype != VKMHA_DTYPE_F32;
}

/* Whether a window plan copies windows of a quantized B's rows into
 * SLOT_MM_QB; *window: the quantized matrix of the largest. */
static bool copies_b(const vk_matmul_args *a, uint64_t nc, uint64_t kc, vkmha_quant_desc *window)
{
    *window = a->quant;
    window->rows = (uint32_t)(a->trans_b ? nc : kc);
    return a->quant.type && (nc < a->n || kc < a->k);
}

vkmha_status vk_matmul_prepare(vk_state *vk, const vk_matmul_args *a, uint32_t n)
{
    uint64_t extra = 0, acc = 0, qb = 0;
    vkmha_status st;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t mc, nc, kc, windows;
        vkmha_quant_desc window;
        if ((st = plan_windows(vk, &a[i], &mc, &nc, &kc, &windows)))
            return st;
        extra += windows - 1;
        if (sums_in_acc(&a[i], kc) && mc * nc * 4 > acc)
            acc = mc * nc * 4;
        const uint64_t window_bytes =
            copies_b(&a[i], nc, kc, &window) ? vkmha__quant_layout(&window).bytes : 0;
        qb = window_bytes > qb ? window_bytes : qb;
    }
    if ((acc && (st = vk_slot_ensure(vk, SLOT_MM_ACC, acc))) ||
        (qb && (st = vk_slot_ensure(vk, SLOT_MM_QB, qb))))
        return st;
    return vk_window_sites_reserve(vk, KIND_MATMUL, extra);
}

/* Rows r0 .. of a's quantized B as the matrix part->quant (layout
 * part->qlayout) in SLOT_MM_QB, its planes' ranges copied: after a barrier
 * (the slot's readers before), before one (the window's reads). */
static vkmha_status copy_b_window(vk_state *vk, const vk_matmul_args *a, uint64_t r0,
                                  const vk_matmul_args *part)
{
    uint64_t from[3], to[3], bytes[3];
    const uint32_t n = vkmha__quant_row_planes(&a->quant, &a->qlayout, (uint32_t)r0,
                                               &part->quant, &part->qlayout, from, to, bytes);
    vkmha_status st = VKMHA_SUCCESS;
    vk_barrier(vk);
    for (uint32_t i = 0; i < n && !st; i++)
        st = vk_copy(vk, a->b.buf, a->b.offset + from[i], &vk->mem.slots[SLOT_MM_QB], to[i],
                     bytes[i]);
    vk_barrier(vk);
    return st;
}

vkmha_status vk_record_matmul(vk_state *vk, vk_site *site, const vk_matmul_args *a)
{
    uint64_t mc, nc, kc, windows;
    vkmha_status st = plan_windows(vk, a, &mc, &nc, &kc, &windows);
    if (st)
        return st;
    if (windows == 1)
        return record_block(vk, site, a);
    /* Each window binds other offsets: a descriptor set of its own unless
     * pushed (or recorded: vk_dispatch gives each one its own). */
    vk_site *more = vk_window_sites_take(vk, KIND_MATMUL, windows - 1);
    if (!more)
        return VKMHA_ERROR_VULKAN;
    vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: matmul of %u x %u x %u split into %llu windows of %llu x %llu x %llu "
               "(maxStorageBufferRange %llu bytes)",
               vk->ctx->call, a->m, a->n, a->k, (unsigned long long)windows,
               (unsigned long long)mc, (unsigned long long)nc, (unsigned long long)kc,
               (unsigned long long)vk->info.max_storage_buffer_range);
    const uint64_t ea = vkmha__dtype_size(a->a.dtype), eb = vkmha__dtype_size(a->b.dtype),
                   ec = vkmha__dtype_size(a->c.dtype), ebias = vkmha__dtype_size(a->bias.dtype);
    /* A 16-bit C's window summed in fp32 over the ranges of k: [mc][nc]. */
    const bool acc = sums_in_acc(a, kc);
    vkmha_quant_desc window;
    const bool copy_b = copies_b(a, nc, kc, &window);
    if (copy_b && vk->mem.slots[SLOT_MM_QB].size < vkmha__quant_layout(&window).bytes)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                           "%s: internal error: a quantized b's window of %u rows unprepared",
                           vk->ctx->call, window.rows);
    vk_view acc_view = vk_view_of(&vk->mem.slots[SLOT_MM_ACC], VKMHA_DTYPE_F32);
    acc_view.stride[2] = nc;
    if (acc && vk->mem.slots[SLOT_MM_ACC].size < mc * nc * 4)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                           "%s: internal error: matmul sums of %llu bytes unprepared",
                           vk->ctx->call, (unsigned long long)(mc * nc * 4));
    uint64_t w = 0;
    for (uint64_t m0 = 0; m0 < a->m; m0 += mc)
        for (uint64_t n0 = 0; n0 < a->n; n0 += nc)
            for (uint64_t k0 = 0; k0 < a->k; k0 += kc, w++) {
                vk_matmul_args part = *a;
                part.m = (uint32_t)(a->m - m0 < mc ? a->m - m0 : mc);
                part.n = (uint32_t)(a->n - n0 < nc ? a->n - n0 : nc);
                part.k = (uint32_t)(a->k - k0 < kc ? a->k - k0 : kc);
                part.a.offset += (m0 * a->a.stride[2] + k0) * ea;
                part.b.offset += (a->trans_b ? n0 * a->b.stride[2] + k0
                                             : k0 * a->b.stride[2] + n0) * eb;
                if (copy_b) { /* B's rows n0 .. (op T) or k0 .. (op N), copied */
                    part.quant.rows = a->trans_b ? part.n : part.k;
                    part.qlayout = vkmha__quant_layout(&part.quant);
                    if ((st = copy_b_window(vk, a, a->trans_b ? n0 : k0, &part)))
                        return st;
                    part.b.buf = &vk->mem.slots[SLOT_MM_QB], part.b.offset = 0;
                }
                part.c.offset += (m0 * a->c.stride[2] + n0) * ec;
                if (part.bias.buf)
                    part.bias.offset += n0 * ebias;
                /* Ranges of k after the first add to what the ones before
                 * summed (the first adds the bias): in C, or for a 16-bit
                 * C in fp32 sums that the last range reads as its addend. */
                const bool last = k0 + kc >= a->k;
                part.accumulate = a->accumulate || (k0 > 0 && !(acc && last));
                if (k0 > 0)
                    part.bias = (vk_view){0};
                if (acc && !last)
                    part.c = acc_view;
                if (acc && last) {
                    part.bias = acc_view;
                    part.addend = true;
                }
                /* The windows write disjoint elements of C, or add to what
                 * the one before wrote, and their bound ranges overlap
                 * (rows interleave). */
                if (w)
                    vk_barrier(vk);
                st = record_block(vk, w ? &more[w - 1] : site,
                                  &part);
                if (st)
                    return st;
            }
    return VKMHA_SUCCESS;
}

vk_matmul_args vk_matmul_args_of(const mm_shape *s, vk_view a, vk_view b, vk_view bias,
                                 vk_view c)
{
    a.stride[0] = s->sa, a.stride[2] = s->lda;
    b.stride[0] = s->sb, b.stride[2] = s->ldb;
    c.stride[0] = s->sc, c.stride[2] = s->ldc;
    if (s->quant_b.type)
        b.dtype = s->quant_b.type == VKMHA_QUANT_Q8 ? VK_DTYPE_I8 : VK_DTYPE_U4;
    return (vk_matmul_args){.a = a, .b = b, .bias = bias, .c = c, .m = s->m, .n = s->n,
                            .k = s->k, .trans_b = s->trans_b, .alpha = s->alpha,
                            .batch_outer = s->batch, .batch_inner = 1, .b_div = 1,
                            .quant = s->quant_b, .qlayout = s->layout_b};
}

static vkmha_status record_op(vk_state *vk, const void *args)
{
    return vk_record_matmul(vk, &vk->desc.op_sites.sites[OPSITE_MATMUL], args);
}

/* One product on host arrays whose B [k][n] (op N) is past
 * maxMemoryAllocationSize: B in blocks of rows (ranges of k) that each fit
 * one binding, a submission each, summed into C on the device; for a 16-bit
 * C into fp32 sums (SLOT_MM_ACC) that the last block adds (one rounding).
 * A quantized B's blocks are matrices of their own (vkmha__quant_slice into
 * one host buffer). A, the bias and C stay on the device between the
 * blocks. */
static vkmha_status matmul_k_blocks(vk_state *vk, const mm_shape *s, const void *a,
                                    const void *b, const void *bias, void *c)
{
    vkmha_status st;
    const uint32_t dt = s->dtype;
    const bool quant = s->quant_b.type != 0;
    const uint64_t es = vkmha__dtype_size(dt), ba = s->extent_a * es, bc = s->extent_c * es,
                   bbias = bias ? (uint64_t)s->n * es : 0, most = vk_binding_bytes(vk);
    const uint64_t kc = vkmha__part16(quant ? vkmha__quant_rows_within(&s->quant_b, most)
                                            : vkmha__rows_within(most / es, s->n, s->ldb),
                                      s->k);
    vkmha_quant_desc block = s->quant_b;
    block.rows = (uint32_t)kc;
    const uint64_t block_bytes = quant ? vkmha__quant_layout(&block).bytes
                                       : ((kc - 1) * s->ldb + s->n) * es;
    const bool acc = dt != VKMHA_DTYPE_F32;
    if (!kc) {
        block.rows = 1;
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: one row of b (%llu bytes) is more than this device's "
                           "maxStorageBufferRange (%llu bytes) lets one binding hold",
                           vk->ctx->call,
                           (unsigned long long)(quant ? vkmha__quant_layout(&block).bytes
                                                      : s->n * es),
                           (unsigned long long)vk->info.max_storage_buffer_range);
    }
    if ((st = vk_check_alloc(vk, ba, "a")) || (st = vk_check_alloc(vk, bc, "c")) ||
        (st = vk_slot_ensure_windowed(vk, SLOT_Q_IN, ba)) ||
        (st = vk_slot_ensure(vk, SLOT_K_IN, block_bytes)) ||
        (bias && (st = vk_slot_ensure(vk, SLOT_AUX, bbias))) ||
        (st = vk_slot_ensure_windowed(vk, SLOT_OUT, bc)) ||
        (acc && (st = vk_slot_ensure_windowed(vk, SLOT_MM_ACC, (uint64_t)s->m * s->n * 4))))
        return st;
    uint8_t *piece = quant ? vkmha__alloc(vk->ctx, (size_t)block_bytes) : NULL;
    if (quant && !piece)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk->ctx->call);
    vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: b of %llu bytes beyond maxMemoryAllocationSize (%llu bytes): split into "
               "%llu submissions of %llu rows",
               vk->ctx->call, (unsigned long long)(s->extent_b * (quant ? 1 : es)),
               (unsigned long long)vk->info.max_allocation_size,
               (unsigned long long)((s->k + kc - 1) / kc), (unsigned long long)kc);
    vk_view sums = vk_view_of(&vk->mem.slots[SLOT_MM_ACC], VKMHA_DTYPE_F32);
    sums.stride[2] = s->n;
    for (uint64_t k0 = 0; k0 < s->k && !st; k0 += kc) {
        const bool first = k0 == 0, last = k0 + kc >= s->k;
        mm_shape bs = *s;
        bs.k = (uint32_t)(s->k - k0 < kc ? s->k - k0 : kc);
        bs.sa = bs.sb = bs.sc = 0; /* one product: no batch strides */
        const void *b_block = (const char *)b + k0 * s->ldb * es;
        uint64_t b_bytes = ((bs.k - 1) * (uint64_t)s->ldb + s->n) * es;
        if (quant) { /* rows k0 .. of B's planes as a matrix of bs.k rows */
            bs.quant_b.rows = bs.k;
            bs.layout_b = vkmha__quant_layout(&bs.quant_b);
            vkmha__quant_slice(&s->quant_b, &s->layout_b, b, (uint32_t)k0, 0, &bs.quant_b,
                               &bs.layout_b, piece);
            b_block = piece, b_bytes = bs.layout_b.bytes;
        }
        vk_matmul_args args = vk_matmul_args_of(
            &bs, vk_view_of(&vk->mem.slots[SLOT_Q_IN], dt),
            vk_view_of(&vk->mem.slots[SLOT_K_IN], dt),
            vk_view_of(bias && first ? &vk->mem.slots[SLOT_AUX] : NULL, dt),
            vk_view_of(&vk->mem.slots[SLOT_OUT], dt));
        args.a.offset = k0 * es; /* A's columns k0 .. at its lda */
        /* fp32: C, then C += each block; 16-bit: the sums, then the last
         * block adds them to its product. */
        args.accumulate = !first && !(acc && last);
        if (acc && !last)
            args.c = sums;
        if (acc && last)
            args.bias = sums, args.addend = true;
        const vk_host_call call = {
            .up = {{&vk->mem.slots[SLOT_Q_IN], first ? a : NULL, first ? ba : 0},
                   {&vk->mem.slots[SLOT_K_IN], b_block, b_bytes},
                   {&vk->mem.slots[SLOT_AUX], first ? bias : NULL, first ? bbias : 0}},
            .down = {{&vk->mem.slots[SLOT_OUT], last ? c : NULL, (size_t)(s->n * es), s->m,
                      (size_t)(s->ldc * es), 1, 0}},
            .record = record_op, .arg = &args};
        if (!(st = vk_matmul_prepare(vk, &args, 1)))
            st = vk_run_host(vk, &call);
    }
    vkmha__free(vk->ctx, piece);
    return st;
}

vkmha_status vk_matmul(vk_state *vk, const mm_shape *s, const void *a, const void *b,
                       const void *bias, void *c)
{
    vkmha_status st;
    const uint64_t es = vkmha__dtype_size(s->dtype);
    if (s->batch <= 1 && !s->trans_b &&
        s->extent_b * (s->quant_b.type ? 1 : es) > vk->info.max_allocation_size)
        return matmul_k_blocks(vk, s, a, b, bias, c);
    const uint64_t ba = s->extent_a * es, bc = s->extent_c * es,
                   bb = s->extent_b * (s->quant_b.type ? 1 : es), /* quantized: bytes */
                   bbias = bias ? (uint64_t)s->n * es : 0;
    const uint32_t dt = s->dtype;
    const vk_matmul_args args = vk_matmul_args_of(
        s, vk_view_of(&vk->mem.slots[SLOT_Q_IN], dt), vk_view_of(&vk->mem.slots[SLOT_K_IN], dt),
        vk_view_of(bias ? &vk->mem.slots[SLOT_AUX] : NULL, dt), vk_view_of(&vk->mem.slots[SLOT_OUT], dt));
    /* One product: operands past maxStorageBufferRange are bound in windows
     * (vk_record_matmul); batched ones must fit. Sizes first, so that a
     * message names the caller's tensor. */
    const bool one = s->batch <= 1;
    vkmha_status (*check)(vk_state *, uint64_t, const char *) =
        one ? vk_check_alloc : vk_check_size;
    vkmha_status (*slot)(vk_state *, vk_slot, VkDeviceSize) =
        one ? vk_slot_ensure_windowed : vk_slot_ensure;
    if ((st = check(vk, ba, "a")) || (st = check(vk, bb, "b")) || (st = check(vk, bc, "c")) ||
        (st = vk_matmul_prepare(vk, &args, 1)) ||
        (st = slot(vk, SLOT_Q_IN, ba)) ||
        (st = slot(vk, SLOT_K_IN, bb)) || (bias && (st = slot(vk, SLOT_AUX, bbias))) ||
        (st = slot(vk, SLOT_OUT, bc)))
        return st;
    const vk_host_call call = {
        .up = {{&vk->mem.slots[SLOT_Q_IN], a, ba}, {&vk->mem.slots[SLOT_K_IN], b, bb},
               {&vk->mem.slots[SLOT_AUX], bias, bbias}},
        .down = {{&vk->mem.slots[SLOT_OUT], c, (size_t)(s->n * es), s->m, (size_t)(s->ldc * es),
                  s->batch, (size_t)(s->sc * es)}},
        .record = record_op, .arg = &args};
    return vk_run_host(vk, &call);
}
