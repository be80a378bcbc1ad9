/* The masked, scaled softmax: push-constant mirror, mask uploads, dispatch
 * math (one workgroup per row; on CPU devices one invocation per row up to
 * VK_CPU_ROW_MAX keys), and the public op on host arrays. */
#include "vk_internal.h"

#include <stddef.h>

/* Mirrors the push-constant block of shaders/softmax.comp. */
struct softmax_push {
    uint32_t rows, len_q, len_k, heads, flags;
    float scale;
    uint32_t bias_sb, bias_sh;
    uint32_t group_base;
    uint32_t texel; /* shaders/softmax_cpu.comp only */
};
VK_PUSH_BLOCK(softmax_push);

/* The shader's MASK_* bits are vkmha_mask_kind's. */
_Static_assert(VKMHA_MASK_KEY_PADDING == 1 && VKMHA_MASK_FULL == 2 && VKMHA_MASK_CAUSAL == 4 &&
                   VKMHA_MASK_BIAS == 8,
               "shaders/softmax.comp's MASK_* values");

vkmha_status vk_record_softmax(vk_state *vk, vk_site *site, const vk_softmax_args *a)
{
    const mask_r *m = a->mask;
    uint64_t rows = (uint64_t)a->batch * a->heads * a->len_q;
    const vk_buffer *bufs[5] = {a->key_padding, a->full, a->bias, a->scores,
                                a->input ? a->input : a->scores};
    /* Texel reads need vec4 views of the input and of the bias, if any
     * (wrapped tensors have none). */
    bool texel = vk->row_texel &&
                 vk_texel_ok(&bufs[4], (const uint32_t[]){4}, 1, a->dtypes, false) &&
                 (!a->bias || a->bias->view4);
    struct softmax_push p = {.rows = (uint32_t)rows, .len_q = a->len_q, .len_k = a->len_k,
                             .heads = a->heads, .flags = m->kinds, .scale = a->scale,
                             .texel = texel};
    vk_bias_strides(m, a->len_q, a->len_k, &p.bias_sb, &p.bias_sh);
    if (vk->cpu_rows_wg && a->len_k <= VK_CPU_ROW_MAX) /* a row per invocation */
        return vk_dispatch_groups(vk, site, PIPE_SOFTMAX_CPU, a->dtypes, bufs, 5, &p, sizeof p,
                                  offsetof(struct softmax_push, group_base),
                                  (rows + vk->cpu_rows_wg - 1) / vk->cpu_rows_wg);
    return vk_dispatch_groups(vk, site, PIPE_SOFTMAX, a->dtypes, bufs, 5, &p, sizeof p,
                              offsetof(struct softmax_push, group_base), rows);
}

void vk_bias_strides(const mask_r *m, uint32_t len_q, uint32_t len_k, uint32_t *sb,
                     uint32_t *sh)
{
    uint64_t plane = (uint64_t)len_q * len_k;
    *sb = *sh = 0;
    if (m->kinds & VKMHA_MASK_BIAS) {
        *sb = m->bias_batch == 1 ? 0 : (uint32_t)(m->bias_heads * plane);
        *sh = m->bias_heads == 1 ? 0 : (uint32_t)plane;
    }
}

static void mask_bytes(const mask_r *m, uint32_t batch, uint32_t len_q, uint32_t len_k,
                       uint64_t out[3])
{
    out[0] = m->kinds & VKMHA_MASK_KEY_PADDING ? (uint64_t)batch * len_k : 0;
    out[1] = m->kinds & VKMHA_MASK_FULL ? (uint64_t)batch * len_q * len_k : 0;
    out[2] = m->kinds & VKMHA_MASK_BIAS
                 ? (uint64_t)m->bias_batch * m->bias_heads * len_q * len_k * 4
                 : 0;
}

vkmha_status vk_mask_ensure(vk_state *vk, const mask_r *mask, uint32_t batch,
                            uint32_t len_q, uint32_t len_k, uint64_t *upload_bytes)
{
    uint64_t bytes[3];
    mask_bytes(mask, batch, len_q, len_k, bytes);
    for (int i = 0; i < 3; i++) {
        if (!bytes[i])
            continue;
        vkmha_status st = vk_slot_ensure(vk, (vk_slot)(SLOT_MASK_KP + i), (bytes[i] + 3) & ~3ull);
        if (st)
            return st;
        *upload_bytes += bytes[i] + 16;
    }
    return VKMHA_SUCCESS;
}

void vk_mask_upload(vk_state *vk, const mask_r *mask, uint32_t batch, uint32_t len_q,
                    uint32_t len_k)
{
    uint64_t bytes[3];
    const void *src[3] = {mask->key_padding, mask->full, mask->bias};
    mask_bytes(mask, batch, len_q, len_k, bytes);
    for (int i = 0; i < 3; i++)
        if (bytes[i])
            vk_upload(vk, &vk->slots[SLOT_MASK_KP + i], 0, src[i], bytes[i]);
}

void vk_mask_slots(vk_state *vk, const vk_buffer *bufs[3])
{
    for (int i = 0; i < 3; i++)
        bufs[i] = &vk->slots[SLOT_MASK_KP + i];
}

void vk_mask_args(const vk_buffer *const bufs[3], const mask_r *mask, vk_softmax_args *a)
{
    a->mask = mask;
    a->key_padding = mask->kinds & VKMHA_MASK_KEY_PADDING ? bufs[0] : NULL;
    a->full = mask->kinds & VKMHA_MASK_FULL ? bufs[1] : NULL;
    a->bias = mask->kinds & VKMHA_MASK_BIAS ? bufs[2] : NULL;
}

vkmha_status vk_softmax(vk_state *vk, const sm_shape *s, const void *x, const mask_r *mask,
                        void *y)
{
    vkmha_status st;
    uint64_t bytes = (uint64_t)s->batch * s->heads * s->len_q * s->len_k *
                     vkmha__dtype_size(s->dtype),
             up = bytes + 16;
    if ((st = vk_check_size(vk, bytes, "x")) || (st = vk_slot_ensure(vk, SLOT_SCORES, bytes)) ||
        (st = vk_mask_ensure(vk, mask, s->batch, s->len_q, s->len_k, &up)) ||
        (st = vk_call_begin(vk, up, bytes)))
        return st;
    vk_upload(vk, &vk->slots[SLOT_SCORES], 0, x, bytes);
    vk_mask_upload(vk, mask, s->batch, s->len_q, s->len_k);
    vk_barrier(vk);
    vk_softmax_args a = {.scores = &vk->slots[SLOT_SCORES], .batch = s->batch,
                         .heads = s->heads, .len_q = s->len_q, .len_k = s->len_k,
                         .scale = s->scale, .dtypes = VK_DT(3, s->dtype) | VK_DT(4, s->dtype)};
    const vk_buffer *masks[3];
    vk_mask_slots(vk, masks);
    vk_mask_args(masks, mask, &a);
    if ((st = vk_record_softmax(vk, &vk->op_sites.sites[OPSITE_SOFTMAX], &a))) {
        vk_call_abort(vk);
        return st;
    }
    vk_download(vk, &vk->slots[SLOT_SCORES], y, bytes, 1, bytes, 1, bytes);
    return vk_call_submit(vk);
}
