/* Views of buffers (vk_view: a buffer, an offset, a dtype): whether one
 * binding reaches them, the bytes a binding or a window may span, their
 * texel views and the dtypes of a dispatch's bindings. At the bottom of the
 * Vulkan backend with src/vk_queue.c: it calls nothing of the backend's
 * (tests/check_layers.py). */
#include "vk_base.h"

bool vk_view_fits(const vk_state *vk, const vk_view *v, uint64_t bytes)
{
    const uint64_t mis = v->buf ? (v->buf->offset + v->offset) % vk->min_storage_offset_align : 0;
    return mis + bytes <= vk->info.max_storage_buffer_range;
}

uint64_t vk_binding_bytes(const vk_state *vk)
{
    return vk->info.max_storage_buffer_range < vk->info.max_allocation_size
               ? vk->info.max_storage_buffer_range
               : vk->info.max_allocation_size;
}

uint64_t vk_window_bytes(const vk_state *vk)
{
    const uint64_t range = vk->info.max_storage_buffer_range;
    return range - (range > vk->min_storage_offset_align ? vk->min_storage_offset_align : 0);
}

VkBufferView vk_texel_view(const vk_view *v, bool u16)
{
    const vk_buffer *b = v->buf;
    if (!b || v->offset) /* the views start at the buffer's start */
        return VK_NULL_HANDLE;
    if (v->q8_rows) /* words (shaders/flash_cpu.comp's KV_Q8 variant) */
        return b->view1u;
    if (u16)
        return v->dtype == VKMHA_DTYPE_F16 || v->dtype == VKMHA_DTYPE_BF16 ? b->view4u
                                                                           : VK_NULL_HANDLE;
    return v->dtype == VKMHA_DTYPE_F32   ? b->view4
           : v->dtype == VKMHA_DTYPE_F16 ? b->view4h
                                         : VK_NULL_HANDLE;
}

uint32_t vk_view_dtypes(const vk_view bufs[], uint32_t n)
{
    uint32_t dtypes = 0;
    for (uint32_t i = 0; i < n && i < VK_DT_SLOTS; i++)
        if (bufs[i].buf && (bufs[i].dtype != VKMHA_DTYPE_U8 || bufs[i].q8_rows))
            dtypes |= VK_DT(i, bufs[i].dtype);
    return dtypes;
}

bool vk_texel_ok(const vk_view *const v[], uint32_t n, bool u16_variant)
{
    uint32_t n16 = 0, bf16 = 0;
    for (uint32_t i = 0; i < n; i++) {
        n16 += v[i]->dtype == VKMHA_DTYPE_F16 || v[i]->dtype == VKMHA_DTYPE_BF16;
        bf16 += v[i]->dtype == VKMHA_DTYPE_BF16;
    }
    /* A shader with the TEXEL_U16 variant reads all-fp32 or all-16-bit
     * sources; one without, fp32 and fp16 (R16G16B16A16_SFLOAT). */
    const bool u16 = u16_variant && n16 == n && n16 > 0;
    if (u16_variant ? n16 != 0 && n16 != n : bf16 != 0)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!vk_texel_view(v[i], u16))
            return false;
    return true;
}

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
