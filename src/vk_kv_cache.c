/* KV caches on the Vulkan backend (entries of vkmha_backend_ops; the
 * appends happen in the forward, src/vk_mha.c): the lengths buffer, zeroing
 * by copies from a buffer of zeros, and reordering through a temporary
 * copy, each run as one command buffer. */
#include "vk_internal.h"

/* Bytes of the buffer of zeros that kv_clear copies from, at most: longer
 * runs take several copies. */
#define ZEROS_BYTES 65536u

/* Bytes of one (entry, head) run of the keys (v false) or values. */
static VkDeviceSize run_bytes(const vkmha_kv_cache *c, bool v)
{
    return (VkDeviceSize)c->d.capacity * c->row[v] * vkmha__dtype_size(c->elem_dtype);
}

vk_view vk_kv_view(const vkmha_kv_cache *c, bool v)
{
    vk_view t = vk_view_split(vk_tensor_buf(v ? c->d.values : c->d.keys), c->n_kv_head,
                              c->d.capacity, c->row[v], c->elem_dtype);
    t.q8_rows = c->d.quant != VKMHA_QUANT_NONE;
    return t;
}

vkmha_status vk_kv_create(vkmha_kv_cache *c)
{
    vk_state *vk = c->mha->ctx->vk;
    vk_kv *kv = (vk_kv *)c;
    /* A Q8 cache's rows are bound whole: its kernels take no windows; the
     * kv_q8 kernel walks a row in one invocation. */
    if (c->d.quant && (c->d_k > VK_CPU_ROW_MAX || c->d_v > VK_CPU_ROW_MAX))
        return vkmha__fail(c->mha->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: a Q8 cache takes head dims up to %u (the layer's d_k %u, "
                           "d_v %u)",
                           c->mha->ctx->call, VK_CPU_ROW_MAX, c->d_k, c->d_v);
    for (int i = 0; c->d.quant && i < 2; i++) {
        const vkmha_tensor *t = i ? c->d.values : c->d.keys;
        /* The CPU-shaped kernel reads the rows as words. */
        vkmha_status vs = vk_buffer_view_words(vk, vk_tensor_buf(t));
        if (vs)
            return vs;
        if (!vk_tensor_fits(vk, t))
            return vkmha__fail(c->mha->ctx, VKMHA_ERROR_UNSUPPORTED,
                               "%s: a Q8 cache's %s (%llu bytes) must fit one binding "
                               "(maxStorageBufferRange: %llu bytes): lower desc->batch or "
                               "desc->capacity",
                               c->mha->ctx->call, i ? "values" : "keys",
                               (unsigned long long)t->bytes,
                               (unsigned long long)vk->info.max_storage_buffer_range);
    }
    vk_kind *kinds = vkmha__calloc(c->mha->ctx, 2 * (size_t)c->d.batch, sizeof *kinds);
    vkmha_status st;
    if (!kinds)
        return vkmha__fail(c->mha->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                           "%s: out of host memory", c->mha->ctx->call);
    for (uint32_t i = 0; i < 2 * c->d.batch; i++)
        kinds[i] = KIND_HEADS;
    st = vk_buffer_create(vk, 4ull * c->d.batch, false, false, "a KV cache's lengths",
                          &kv->lens);
    const VkDeviceSize run_k = run_bytes(c, false), run_v = run_bytes(c, true),
                       run = run_k > run_v ? run_k : run_v; /* the longer */
    if (!st)
        st = vk_buffer_create(vk, run < ZEROS_BYTES ? run : ZEROS_BYTES, false, false,
                              "a KV cache's zeros", &kv->zeros);
    if (!st)
        st = vk_site_pool_create(vk, kinds, 2 * c->d.batch, &kv->sites);
    vkmha__free(c->mha->ctx, kinds);
    if (!st && !(st = vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL)))
        st = vk_exec_end(vk, vk_zero(vk, &kv->zeros), NULL);
    return st;
}

void vk_kv_free(vkmha_kv_cache *c)
{
    vk_state *vk = c->mha->ctx->vk;
    vk_kv *kv = (vk_kv *)c;
    vk_buffer_destroy(vk, &kv->lens);
    vk_buffer_destroy(vk, &kv->zeros);
    vk_site_pool_destroy(vk, &kv->sites);
}

vkmha_status vk_kv_clear(vkmha_kv_cache *c, uint32_t first, uint32_t count, uint32_t from)
{
    vk_state *vk = c->mha->ctx->vk;
    const vk_kv *kv = (const vk_kv *)c;
    vkmha_status st;
    if ((st = vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL)))
        return st;
    for (int i = 0; i < 2 && !st; i++) {
        const vk_view t = vk_kv_view(c, i == 1);
        const VkDeviceSize es = vkmha__dtype_size(c->elem_dtype);
        for (uint32_t e = first; e < first + count && !st; e++)
            for (uint32_t h = 0; h < c->n_kv_head && !st; h++) {
                VkDeviceSize at = (e * t.stride[0] + h * t.stride[1] +
                                   (VkDeviceSize)from * t.stride[2]) * es;
                const VkDeviceSize end = at + (VkDeviceSize)(c->d.capacity - from) * t.stride[2] * es;
                for (; at < end && !st; at += kv->zeros.size)
                    st = vk_copy(vk, &kv->zeros, 0, t.buf, at,
                                 end - at < kv->zeros.size ? end - at : kv->zeros.size);
            }
    }
    return vk_exec_end(vk, st, NULL);
}

vkmha_status vk_kv_reorder(vkmha_kv_cache *c, const uint32_t *src)
{
    vk_state *vk = c->mha->ctx->vk;
    vk_buffer tmp = {0};
    vkmha_status st = VKMHA_SUCCESS;
    for (int i = 0; i < 2 && !st; i++) {
        const vk_view t = vk_kv_view(c, i == 1);
        const VkDeviceSize entry = t.stride[0] * vkmha__dtype_size(c->elem_dtype);
        if ((st = vk_buffer_create(vk, entry * c->d.batch, false, false,
                                   "a KV cache reorder's copy", &tmp)))
            break;
        if (!(st = vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL))) {
            for (uint32_t e = 0; e < c->d.batch && !st; e++)
                st = vk_copy(vk, t.buf, src[e] * entry, &tmp, e * entry, entry);
            vk_barrier(vk);
            if (!st)
                st = vk_copy(vk, &tmp, 0, t.buf, 0, entry * c->d.batch);
            st = vk_exec_end(vk, st, NULL);
        }
        vk_buffer_destroy(vk, &tmp);
    }
    return st;
}
