/* vkmha_mha_submit's submissions: each its own command buffer and fence,
 * recorded by the executor (src/vk_command.c) in MODE_SUBMIT, waited for, polled and freed
 * here; the context waits for the pending ones before it replaces a scratch
 * buffer or rewrites a descriptor set they use. */
#include "vk_internal.h"

struct vkmha_submission {
    vkmha_context *ctx;
    VkCommandBuffer cmd;
    VkFence fence;
    bool done;           /* the fence signaled (or the work failed) */
    vkmha_status status; /* when done */
};

vkmha_status vk_submit_begin(vk_state *vk, vkmha_submission **out)
{
    vkmha_status st;
    VkResult r;
    *out = NULL;
    if (!vk->push_descriptors && (st = vk_wait_submissions(vk)))
        return st;
    if (vk->n_subs == vk->cap_subs) {
        uint32_t cap = vk->cap_subs ? 2 * vk->cap_subs : 4;
        vkmha_submission **subs = vkmha__realloc(vk->ctx, vk->subs,
                                                 vk->n_subs * sizeof *subs, cap * sizeof *subs);
        if (!subs)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               "%s: out of host memory", vk->ctx->call);
        vk->subs = subs;
        vk->cap_subs = cap;
    }
    vkmha_submission *s = vkmha__calloc(vk->ctx, 1, sizeof *s);
    if (!s)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk->ctx->call);
    s->ctx = vk->ctx;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = vk->cmd_pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((r = vk->vkd.vkAllocateCommandBuffers(vk->device, &ai, &s->cmd)) != VK_SUCCESS ||
        (r = vk->vkd.vkCreateFence(vk->device, &fi, vk->vkalloc, &s->fence)) != VK_SUCCESS) {
        vk_submission_free(vk, s);
        return vk_fail(vk, r, "vkAllocateCommandBuffers / vkCreateFence");
    }
    vk->subs[vk->n_subs++] = s;
    vk->cmd = s->cmd;
    *out = s;
    return VKMHA_SUCCESS;
}

vkmha_status vk_submission_begin_commands(vk_state *vk)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkResult r = vk->vkd.vkBeginCommandBuffer(vk->subs[vk->n_subs - 1]->cmd, &bi);
    return r == VK_SUCCESS ? VKMHA_SUCCESS : vk_fail(vk, r, "vkBeginCommandBuffer");
}

void vk_submission_free(vk_state *vk, vkmha_submission *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < vk->n_subs; i++)
        if (vk->subs[i] == s) {
            vk->subs[i] = vk->subs[--vk->n_subs];
            break;
        }
    if (s->fence)
        vk->vkd.vkDestroyFence(vk->device, s->fence, vk->vkalloc);
    if (s->cmd)
        vk->vkd.vkFreeCommandBuffers(vk->device, vk->cmd_pool, 1, &s->cmd);
    vkmha__free(vk->ctx, s);
}

/* Waits for one submission (timeout in ns) and records how it ended. */
static vkmha_status submission_wait(vk_state *vk, vkmha_submission *s, uint64_t timeout)
{
    if (s->done)
        return s->status;
    VkResult r = vk->vkd.vkWaitForFences(vk->device, 1, &s->fence, VK_TRUE, timeout);
    if (r == VK_TIMEOUT)
        return VKMHA_NOT_READY;
    s->done = true;
    s->status = r == VK_SUCCESS ? VKMHA_SUCCESS
                                : vk_fail(vk, r, "vkWaitForFences (a vkmha submission)");
    return s->status;
}

vkmha_status vk_wait_submissions(vk_state *vk)
{
    for (uint32_t i = 0; i < vk->n_subs; i++)
        if (submission_wait(vk, vk->subs[i], UINT64_MAX) == VKMHA_ERROR_DEVICE_LOST)
            return VKMHA_ERROR_DEVICE_LOST;
    return VKMHA_SUCCESS;
}

VKMHA_API vkmha_status vkmha_submission_wait(vkmha_submission *s, uint64_t timeout_ns)
{
    if (!s)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    if (!s->ctx->vk) /* the reference backend computed it in vkmha_mha_submit */
        return VKMHA_SUCCESS;
    return submission_wait(s->ctx->vk, s, timeout_ns);
}

VKMHA_API vkmha_status vkmha_submission_poll(vkmha_submission *s)
{
    if (!s)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    if (!s->ctx->vk)
        return VKMHA_SUCCESS;
    if (s->done)
        return s->status;
    VkResult r = s->ctx->vk->vkd.vkGetFenceStatus(s->ctx->vk->device, s->fence);
    if (r == VK_NOT_READY)
        return VKMHA_NOT_READY;
    return submission_wait(s->ctx->vk, s, UINT64_MAX);
}

VKMHA_API void vkmha_submission_destroy(vkmha_submission *s)
{
    if (!s)
        return;
    if (!s->ctx->vk) {
        vkmha__free(s->ctx, s);
        return;
    }
    submission_wait(s->ctx->vk, s, UINT64_MAX);
    vk_submission_free(s->ctx->vk, s);
}

vkmha_submission *vk_submission_done(vkmha_context *ctx)
{
    vkmha_submission *s = vkmha__calloc(ctx, 1, sizeof *s);
    if (s) {
        s->ctx = ctx;
        s->done = true;
    }
    return s;
}

vkmha_status vk_submission_submit(vk_state *vk)
{
    VkResult r;
    vkmha_submission *s = vk->subs[vk->n_subs - 1];
    if ((r = vk->vkd.vkEndCommandBuffer(s->cmd)) != VK_SUCCESS) {
        vk_submission_free(vk, s);
        return vk_fail(vk, r, "vkEndCommandBuffer");
    }
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &s->cmd;
    if ((r = vk_queue_submit(vk, &si, s->fence)) != VK_SUCCESS) {
        vk_submission_free(vk, s);
        return vk_fail(vk, r, "vkQueueSubmit");
    }
    return VKMHA_SUCCESS;
}
