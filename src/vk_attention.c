/* Unfused scaled dot-product attention on split heads: scores = scale * Q K^T
 * (one batched matmul; grouped-query heads through the matmul's b_div), the
 * masked softmax in place, then out = P V. The [B][H][Lq][Lk] scores live in
 * SLOT_SCORES and double as the returned attention weights. */
#include "vk_internal.h"

vkmha_status vk_record_attention(vk_state *vk, vk_site sites[3], const attn_shape *s,
                                 const mask_r *mask, vk_buffer *out)
{
    vkmha_status st;
    const uint64_t H = s->heads, Hkv = s->kv_heads, Lq = s->len_q, Lk = s->len_k;
    vk_buffer *scores = &vk->slots[SLOT_SCORES];

    /* scores[b][h] (Lq x Lk) = scale * q[b][h] (Lq x d_k) * k[b][h / g]^T */
    vk_matmul_args qk = {&vk->slots[SLOT_Q_HEADS], &vk->slots[SLOT_K_HEADS], NULL, scores,
                         s->len_q, s->len_k, s->d_k, s->d_k, s->d_k, s->len_k, true, s->scale,
                         s->batch, s->heads, s->heads / s->kv_heads,
                         H * Lq * s->d_k, Lq * s->d_k, Hkv * Lk * s->d_k, Lk * s->d_k,
                         H * Lq * Lk, Lq * Lk};
    if ((st = vk_record_matmul(vk, &sites[0], &qk)))
        return st;
    vk_barrier(vk);

    /* The scale is already applied: the softmax adds the bias and masks. */
    vk_softmax_args sm = {scores, NULL, NULL, NULL, s->batch, s->heads, s->len_q, s->len_k,
                          1.0f, NULL};
    vk_mask_args(vk, mask, &sm);
    if ((st = vk_record_softmax(vk, &sites[1], &sm)))
        return st;
    vk_barrier(vk);

    /* out[b][h] (Lq x d_v) = p[b][h] (Lq x Lk) * v[b][h / g] (Lk x d_v) */
    vk_matmul_args pv = {scores, &vk->slots[SLOT_V_HEADS], NULL, out,
                         s->len_q, s->d_v, s->len_k, s->len_k, s->d_v, s->d_v, false, 1.0f,
                         s->batch, s->heads, s->heads / s->kv_heads,
                         H * Lq * Lk, Lq * Lk, Hkv * Lk * s->d_v, Lk * s->d_v,
                         H * Lq * s->d_v, Lq * s->d_v};
    return vk_record_matmul(vk, &sites[2], &pv);
}

/* Ensures the slots attention needs beyond its inputs. */
vkmha_status vk_attention_ensure(vk_state *vk, const attn_shape *s, uint64_t out_bytes)
{
    vkmha_status st;
    uint64_t scores = (uint64_t)s->batch * s->heads * s->len_q * s->len_k * 4;
    if ((st = vk_slot_ensure(vk, SLOT_SCORES, scores)) ||
        (st = vk_slot_ensure(vk, SLOT_O_HEADS, out_bytes)))
        return st;
    return VKMHA_SUCCESS;
}

vkmha_status vk_attention(vk_state *vk, const attn_shape *s, const float *q, const float *k,
                          const float *v, const mask_r *mask, float *out, float *weights)
{
    vkmha_status st;
    const uint64_t bq = (uint64_t)s->batch * s->heads * s->len_q * s->d_k * 4,
                   bk = (uint64_t)s->batch * s->kv_heads * s->len_k * s->d_k * 4,
                   bv = (uint64_t)s->batch * s->kv_heads * s->len_k * s->d_v * 4,
                   bo = (uint64_t)s->batch * s->heads * s->len_q * s->d_v * 4,
                   bw = weights ? (uint64_t)s->batch * s->heads * s->len_q * s->len_k * 4 : 0;
    uint64_t up = bq + bk + bv + 48;
    if ((st = vk_slot_ensure(vk, SLOT_Q_HEADS, bq)) ||
        (st = vk_slot_ensure(vk, SLOT_K_HEADS, bk)) ||
        (st = vk_slot_ensure(vk, SLOT_V_HEADS, bv)) ||
        (st = vk_attention_ensure(vk, s, bo)) ||
        (st = vk_mask_ensure(vk, mask, s->batch, s->len_q, s->len_k, &up)) ||
        (st = vk_call_begin(vk, up, bo + bw + 32)))
        return st;
    vk_upload(vk, &vk->slots[SLOT_Q_HEADS], 0, q, bq);
    vk_upload(vk, &vk->slots[SLOT_K_HEADS], 0, k, bk);
    vk_upload(vk, &vk->slots[SLOT_V_HEADS], 0, v, bv);
    vk_mask_upload(vk, mask, s->batch, s->len_q, s->len_k);
    vk_barrier(vk);
    if ((st = vk_record_attention(vk, &vk->op_sites.sites[OPSITE_ATTENTION], s, mask,
                                  &vk->slots[SLOT_O_HEADS]))) {
        vk_call_abort(vk);
        return st;
    }
    vk_download(vk, &vk->slots[SLOT_O_HEADS], out, bo, 1, bo, 1, bo);
    if (weights)
        vk_download(vk, &vk->slots[SLOT_SCORES], weights, bw, 1, bw, 1, bw);
    return vk_call_submit(vk);
}
