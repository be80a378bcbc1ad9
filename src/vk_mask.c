/* Masks on the device: their slots, sizes and uploads for host arrays, the
 * additive bias's broadcast strides, and the buffers a shader binds for each
 * mask kind (the softmax's and the fused attention's). */
#include "vk_exec.h"

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
                            uint32_t len_q, uint32_t len_k)
{
    uint64_t bytes[3];
    mask_bytes(mask, batch, len_q, len_k, bytes);
    for (int i = 0; i < 3; i++) {
        if (!bytes[i])
            continue;
        vkmha_status st = vk_slot_ensure(vk, (vk_slot)(SLOT_MASK_KP + i), (bytes[i] + 3) & ~3ull);
        if (st)
            return st;
    }
    return VKMHA_SUCCESS;
}

vkmha_status vk_mask_upload(vk_state *vk, const mask_r *mask, uint32_t batch, uint32_t len_q,
                            uint32_t len_k)
{
    uint64_t bytes[3];
    const void *src[3] = {mask->key_padding, mask->full, mask->bias};
    mask_bytes(mask, batch, len_q, len_k, bytes);
    vkmha_status st = VKMHA_SUCCESS;
    for (int i = 0; i < 3 && !st; i++)
        if (bytes[i])
            st = vk_upload(vk, &vk->mem.slots[SLOT_MASK_KP + i], 0, src[i], bytes[i]);
    return st;
}

void vk_mask_slots(vk_state *vk, vk_view views[3])
{
    static const uint32_t dtypes[3] = {VKMHA_DTYPE_U8, VKMHA_DTYPE_U8, VKMHA_DTYPE_F32};
    for (int i = 0; i < 3; i++)
        views[i] = vk_view_of(&vk->mem.slots[SLOT_MASK_KP + i], dtypes[i]);
}

void vk_mask_args(const vk_view views[3], const mask_r *mask, vk_softmax_args *a)
{
    static const uint32_t kinds[3] = {VKMHA_MASK_KEY_PADDING, VKMHA_MASK_FULL, VKMHA_MASK_BIAS};
    a->mask = mask;
    for (int i = 0; i < 3; i++)
        a->masks[i] = mask->kinds & kinds[i] ? views[i] : (vk_view){0};
}

vkmha_status vk_head_rules_ensure(vk_state *vk, uint32_t heads, uint64_t flags)
{
    return vk_slot_ensure(vk, SLOT_MASK_HEADS, 8ull * heads + 4 * flags);
}

vkmha_status vk_head_rules(vk_state *vk, const mask_r *m, uint32_t heads, vk_view *out)
{
    return vk_head_rules_any(vk, m, heads, false, out);
}

vkmha_status vk_head_rules_any(vk_state *vk, const mask_r *m, uint32_t heads, bool always,
                               vk_view *out)
{
    *out = always ? vk_view_of(&vk->mem.slots[SLOT_MASK_HEADS], VKMHA_DTYPE_F32) : (vk_view){0};
    if (!(m->kinds & (VKMHA_MASK_ALIBI | VKMHA_MASK_SINKS)))
        return VKMHA_SUCCESS;
    const vk_buffer *slot = &vk->mem.slots[SLOT_MASK_HEADS];
    const float *src[2] = {m->kinds & VKMHA_MASK_ALIBI ? m->alibi : NULL,
                           m->kinds & VKMHA_MASK_SINKS ? m->sinks : NULL};
    vkmha_status st = VKMHA_SUCCESS;
    vk_barrier(vk); /* after an earlier pass's reads of the slot */
    for (int a = 0; a < 2 && !st; a++)
        if (src[a])
            st = vk_update(vk, slot, a * (uint64_t)heads * 4, src[a], (uint64_t)heads * 4);
    if (st)
        return st;
    vk_barrier(vk);
    *out = vk_view_of(slot, VKMHA_DTYPE_F32);
    return VKMHA_SUCCESS;
}

void vk_rules_push(const mask_r *m, uint32_t *window, float *softcap)
{
    *window = m->kinds & VKMHA_MASK_WINDOW ? m->window : 0;
    *softcap = m->kinds & VKMHA_MASK_SOFTCAP ? m->softcap : 0.0f;
}
