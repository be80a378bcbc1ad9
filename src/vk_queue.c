/* The queue: submissions and sparse binds between the application's queue
 * lock callbacks, the context's fence, and a lost device. At the bottom of
 * the Vulkan backend with src/vk_view.c: it calls nothing of the backend's
 * (tests/check_layers.py). */
#include "vk_base.h"

vkmha_status vk_check_lost(vk_state *vk)
{
    if (vk->lost)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_DEVICE_LOST,
                           "%s: the Vulkan device was lost earlier; destroy the context",
                           vk->ctx->call ? vk->ctx->call : "vkmha");
    return VKMHA_SUCCESS;
}

/* vkQueueSubmit of si, or vkQueueBindSparse of bind, between the
 * application's queue lock callbacks. */
static VkResult queue_locked(vk_state *vk, const VkSubmitInfo *si, const VkBindSparseInfo *bind,
                             VkFence fence)
{
    if (vk->queue_lock)
        vk->queue_lock(vk->queue_lock_user);
    VkResult r = si ? vk->vkd.vkQueueSubmit(vk->queue, 1, si, fence)
                    : vk->vkd.vkQueueBindSparse(vk->queue, 1, bind, fence);
    if (vk->queue_unlock)
        vk->queue_unlock(vk->queue_lock_user);
    return r;
}

VkResult vk_queue_submit(vk_state *vk, const VkSubmitInfo *si, VkFence fence)
{
    return queue_locked(vk, si, NULL, fence);
}

VkResult vk_queue_bind_sparse(vk_state *vk, const VkBindSparseInfo *bind, VkFence fence)
{
    return queue_locked(vk, NULL, bind, fence);
}

VkResult vk_fence_wait(vk_state *vk, VkResult r)
{
    if (r != VK_SUCCESS)
        return r;
    r = vk->vkd.vkWaitForFences(vk->device, 1, &vk->fence, VK_TRUE, UINT64_MAX);
    VkResult rr = vk->vkd.vkResetFences(vk->device, 1, &vk->fence);
    return r != VK_SUCCESS ? r : rr;
}
