/* The tiled matmul: push-constant mirror, tile and variant choice, dispatch
 * math (tile grids beyond maxComputeWorkGroupCount in x, y or z are split
 * into several dispatches), and the public op on host arrays. */
#include "vk_internal.h"

/* Mirrors the push-constant block of shaders/matmul.comp. */
struct matmul_push {
    uint32_t misalign[2]; /* vk_dispatch's */
    uint32_t m, n, k;
    uint32_t lda, ldb, ldc;
    uint32_t batch_inner, b_div;
    uint32_t sa_outer, sa_inner;
    uint32_t sb_outer, sb_inner;
    uint32_t sc_outer, sc_inner;
    uint32_t z_base;
    float alpha;
    uint32_t flags;
    uint32_t x_base, y_base;
};
VK_PUSH_BLOCK(matmul_push);

enum { FLAG_TRANS_B = 1, FLAG_BIAS = 2 };

/* Below this many large tiles the device is poorly filled: use small tiles. */
#define SMALL_TILE_THRESHOLD 64

static bool all_aligned4(const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] % 4)
            return false;
    return true;
}

vkmha_status vk_record_matmul(vk_state *vk, vk_site *site, const vk_matmul_args *a)
{
    vkmha_status st =
        vk_check_strides(vk, (const vk_view *const[]){&a->a, &a->b, &a->c}, 3, "a matmul");
    if (st)
        return st;
    const uint64_t batch = (uint64_t)a->batch_outer * a->batch_inner;

    const vkmha_tile_config *large = &vk->tile_large, *small = &vk->tile_small;
    uint64_t large_tiles = (((uint64_t)a->m + large->bm - 1) / large->bm) *
                           (((uint64_t)a->n + large->bn - 1) / large->bn) * batch;
    bool use_small = large_tiles < SMALL_TILE_THRESHOLD;
    /* A few rows on a CPU device: lanes over columns (vk_state.tile_gemv). */
    const bool gemv = vk->tile_gemv.workgroup_size && a->m <= VK_GEMV_ROWS;
    const vkmha_tile_config *t = gemv ? &vk->tile_gemv : use_small ? small : large;

    /* vec4 loads need every row start 16-byte aligned and whole vec4s along
     * the contiguous axis of A and of B. */
    const uint64_t align[] = {a->k,           a->a.stride[2], a->b.stride[2],
                              a->trans_b ? 0 : a->n, a->a.stride[0], a->a.stride[1],
                              a->b.stride[0], a->b.stride[1]};
    bool vec = all_aligned4(align, VKMHA_ARRAY_LEN(align)) && t->bk % 4 == 0 &&
               t->bn % 4 == 0;
    /* Texel reads need a vec4 view of the buffer in its dtype (wrapped
     * tensors and bf16 have none). */
    if (vk->matmul_texel && !vk_texel_ok((const vk_view *const[]){&a->a, &a->b}, 2, true))
        vec = false;
    vk_pipe pipe = gemv        ? (vec ? PIPE_MATMUL_GEMV_VEC : PIPE_MATMUL_GEMV)
                   : use_small ? (vec ? PIPE_MATMUL_SMALL_VEC : PIPE_MATMUL_SMALL)
                               : (vec ? PIPE_MATMUL_LARGE_VEC : PIPE_MATMUL_LARGE);

    struct matmul_push p = {
        .m = a->m, .n = a->n, .k = a->k,
        .lda = (uint32_t)a->a.stride[2], .ldb = (uint32_t)a->b.stride[2],
        .ldc = (uint32_t)a->c.stride[2],
        .batch_inner = a->batch_inner, .b_div = a->b_div,
        .sa_outer = (uint32_t)a->a.stride[0], .sa_inner = (uint32_t)a->a.stride[1],
        .sb_outer = (uint32_t)a->b.stride[0], .sb_inner = (uint32_t)a->b.stride[1],
        .sc_outer = (uint32_t)a->c.stride[0], .sc_inner = (uint32_t)a->c.stride[1],
        .alpha = a->alpha,
        .flags = (a->trans_b ? FLAG_TRANS_B : 0u) | (a->bias.buf ? FLAG_BIAS : 0u)};
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
                st = vk_dispatch(vk, site, pipe, bufs, 4, &p, sizeof p, g[0], g[1], g[2]);
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
    return (vk_matmul_args){.a = a, .b = b, .bias = bias, .c = c, .m = s->m, .n = s->n,
                            .k = s->k, .trans_b = s->trans_b, .alpha = s->alpha,
                            .batch_outer = s->batch, .batch_inner = 1, .b_div = 1};
}

static vkmha_status record_op(vk_state *vk, const void *args)
{
    return vk_record_matmul(vk, &vk->op_sites.sites[OPSITE_MATMUL], args);
}

vkmha_status vk_matmul(vk_state *vk, const mm_shape *s, const void *a, const void *b,
                       const void *bias, void *c)
{
    vkmha_status st;
    const uint64_t es = vkmha__dtype_size(s->dtype);
    const uint64_t ba = s->extent_a * es, bb = s->extent_b * es, bc = s->extent_c * es,
                   bbias = bias ? (uint64_t)s->n * es : 0;
    /* Sizes first, so that a message names the caller's tensor. */
    if ((st = vk_check_size(vk, ba, "a")) || (st = vk_check_size(vk, bb, "b")) ||
        (st = vk_check_size(vk, bc, "c")) ||
        (st = vk_slot_ensure(vk, SLOT_Q_IN, ba)) || (st = vk_slot_ensure(vk, SLOT_K_IN, bb)) ||
        (bias && (st = vk_slot_ensure(vk, SLOT_AUX, bbias))) ||
        (st = vk_slot_ensure(vk, SLOT_OUT, bc)))
        return st;
    const uint32_t dt = s->dtype;
    const vk_matmul_args args = vk_matmul_args_of(
        s, vk_view_of(&vk->slots[SLOT_Q_IN], dt), vk_view_of(&vk->slots[SLOT_K_IN], dt),
        vk_view_of(bias ? &vk->slots[SLOT_AUX] : NULL, dt), vk_view_of(&vk->slots[SLOT_OUT], dt));
    const vk_host_call call = {
        .up = {{&vk->slots[SLOT_Q_IN], a, ba}, {&vk->slots[SLOT_K_IN], b, bb},
               {&vk->slots[SLOT_AUX], bias, bbias}},
        .down = {{&vk->slots[SLOT_OUT], c, (size_t)(s->n * es), s->m, (size_t)(s->ldc * es),
                  s->batch, (size_t)(s->sc * es)}},
        .record = record_op, .arg = &args};
    return vk_run_host(vk, &call);
}
