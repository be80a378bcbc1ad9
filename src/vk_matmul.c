/* The tiled matmul: push-constant mirror, tile and variant choice, dispatch
 * math (batches beyond maxComputeWorkGroupCount[2] are split into several
 * dispatches), and the public op on host arrays. */
#include "vk_internal.h"

/* Mirrors the push-constant block of shaders/matmul.comp. */
struct matmul_push {
    uint32_t m, n, k;
    uint32_t lda, ldb, ldc;
    uint32_t batch_inner, b_div;
    uint32_t sa_outer, sa_inner;
    uint32_t sb_outer, sb_inner;
    uint32_t sc_outer, sc_inner;
    uint32_t z_base;
    float alpha;
    uint32_t flags;
};
_Static_assert(sizeof(struct matmul_push) <= 128, "push constants must fit 128 bytes");

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
    const uint64_t strides[] = {a->sa_outer, a->sa_inner, a->sb_outer, a->sb_inner,
                                a->sc_outer, a->sc_inner};
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(strides); i++)
        if (strides[i] > UINT32_MAX)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                               "matmul: a batch stride of %llu elements exceeds 32 bits",
                               (unsigned long long)strides[i]);
    const uint64_t batch = (uint64_t)a->batch_outer * a->batch_inner;

    const vkmha_tile_config *large = &vk->tile_large, *small = &vk->tile_small;
    uint64_t large_tiles = (uint64_t)((a->m + large->bm - 1) / large->bm) *
                           ((a->n + large->bn - 1) / large->bn) * batch;
    bool use_small = large_tiles < SMALL_TILE_THRESHOLD;
    const vkmha_tile_config *t = use_small ? small : large;

    /* vec4 loads need every row start 16-byte aligned and whole vec4s along
     * the contiguous axis of A and of B. */
    const uint64_t align[] = {a->k, a->lda, a->ldb, a->trans_b ? 0 : a->n,
                              a->sa_outer, a->sa_inner, a->sb_outer, a->sb_inner};
    bool vec = all_aligned4(align, VKMHA_ARRAY_LEN(align)) && t->bk % 4 == 0 &&
               t->bn % 4 == 0;
    /* Texel reads need a vec4 view of the buffer (wrapped tensors have none). */
    if (vk->matmul_texel && (!a->a->view4 || !a->b->view4))
        vec = false;
    vk_pipe pipe = use_small ? (vec ? PIPE_MATMUL_SMALL_VEC : PIPE_MATMUL_SMALL)
                             : (vec ? PIPE_MATMUL_LARGE_VEC : PIPE_MATMUL_LARGE);

    uint64_t gx = (a->n + t->bn - 1) / t->bn, gy = (a->m + t->bm - 1) / t->bm;
    if (gx > vk->info.max_workgroup_count[0] || gy > vk->info.max_workgroup_count[1])
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "matmul: %u x %u output needs %llu x %llu workgroups, more than "
                           "this device's maxComputeWorkGroupCount (%u x %u)",
                           a->m, a->n, (unsigned long long)gx, (unsigned long long)gy,
                           vk->info.max_workgroup_count[0], vk->info.max_workgroup_count[1]);

    struct matmul_push p = {
        a->m, a->n, a->k, a->lda, a->ldb, a->ldc, a->batch_inner, a->b_div,
        (uint32_t)a->sa_outer, (uint32_t)a->sa_inner, (uint32_t)a->sb_outer,
        (uint32_t)a->sb_inner, (uint32_t)a->sc_outer, (uint32_t)a->sc_inner, 0, a->alpha,
        (a->trans_b ? FLAG_TRANS_B : 0u) | (a->bias ? FLAG_BIAS : 0u)};
    const vk_buffer *bufs[4] = {a->a, a->b, a->bias, a->c};
    const uint64_t max_z = vk->info.max_workgroup_count[2];
    for (uint64_t z = 0; z < batch; z += max_z) {
        uint64_t gz = batch - z < max_z ? batch - z : max_z;
        p.z_base = (uint32_t)z;
        vkmha_status st = vk_dispatch(vk, site, pipe, bufs, 4, &p, sizeof p, (uint32_t)gx,
                                      (uint32_t)gy, (uint32_t)gz);
        if (st)
            return st;
    }
    return VKMHA_SUCCESS;
}

vkmha_status vk_matmul(vk_state *vk, const mm_shape *s, const float *a, const float *b,
                       const float *bias, float *c)
{
    vkmha_status st;
    const uint64_t ba = s->extent_a * 4, bb = s->extent_b * 4, bc = s->extent_c * 4,
                   bbias = bias ? (uint64_t)s->n * 4 : 0;
    if ((st = vk_slot_ensure(vk, SLOT_Q_IN, ba)) || (st = vk_slot_ensure(vk, SLOT_K_IN, bb)) ||
        (bias && (st = vk_slot_ensure(vk, SLOT_AUX, bbias))) ||
        (st = vk_slot_ensure(vk, SLOT_OUT, bc)) ||
        (st = vk_call_begin(vk, ba + bb + bbias + 48, bc)))
        return st;
    vk_upload(vk, &vk->slots[SLOT_Q_IN], 0, a, ba);
    vk_upload(vk, &vk->slots[SLOT_K_IN], 0, b, bb);
    if (bias)
        vk_upload(vk, &vk->slots[SLOT_AUX], 0, bias, bbias);
    vk_barrier(vk);
    vk_matmul_args args = {
        &vk->slots[SLOT_Q_IN], &vk->slots[SLOT_K_IN], bias ? &vk->slots[SLOT_AUX] : NULL,
        &vk->slots[SLOT_OUT], s->m, s->n, s->k, s->lda, s->ldb, s->ldc, s->trans_b, s->alpha,
        s->batch, 1, 1, s->sa, 0, s->sb, 0, s->sc, 0};
    if ((st = vk_record_matmul(vk, &vk->op_sites.sites[OPSITE_MATMUL], &args))) {
        vk_call_abort(vk);
        return st;
    }
    vk_download(vk, &vk->slots[SLOT_OUT], c, (size_t)s->n * 4, s->m, (size_t)s->ldc * 4,
                s->batch, (size_t)s->sc * 4);
    return vk_call_submit(vk);
}
