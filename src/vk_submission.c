/* vkmha_mha_submit's submissions on the Vulkan backend: each its own
 * command buffer and fence, recorded by the executor (src/vk_command.c) in
 * MODE_SUBMIT, waited for, polled and freed here (the public functions, and
 * the reference backend's submissions, are in src/mha.c). A finished
 * submission goes back to a pool with its command buffer and fence (up to
 * VK_SUBMISSION_POOL), which the next one takes: the H100 measured submit +
 * wait at 4.6x the host path's time when each call created and destroyed
 * them (issue 27). A scratch buffer
 * replaced while they are pending is freed once none is (src/vk_memory.c's
 * deferred list, vk_submissions_idle); without push descriptors the context
 * waits for them before it rewrites a descriptor set they use. */
#include "vk_resources.h"

typedef struct vk_submission {
    vkmha_submission s; /* ctx, done, status */
    VkCommandBuffer cmd;
    VkFence fence;
    bool submitted; /* its fence may be signaled, or pending until done */
} vk_submission;

/* Finished submissions kept for reuse, at most. */
#define VK_SUBMISSION_POOL 8

static vk_submission *vk_sub(vkmha_submission *s)
{
    return (vk_submission *)s;
}

/* Begins a submission's command buffer, submitted once. */
static vkmha_status begin_commands(vk_state *vk, VkCommandBuffer cmd)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkResult r = vk->vkd.vkBeginCommandBuffer(cmd, &bi);
    return r == VK_SUCCESS ? VKMHA_SUCCESS : vk_fail(vk, r, "vkBeginCommandBuffer");
}

/* The pool's array (false: out of host memory; the submission is then
 * destroyed instead of kept). */
static bool vk_pool_alloc(vk_state *vk)
{
    vk->sub.pool = vkmha__alloc(vk->ctx, VK_SUBMISSION_POOL * sizeof *vk->sub.pool);
    return vk->sub.pool != NULL;
}

/* Destroys a submission's command buffer and fence, and it. */
static void submission_destroy(vk_state *vk, vk_submission *s)
{
    if (s->fence)
        vk->vkd.vkDestroyFence(vk->device, s->fence, vk->vkalloc);
    if (s->cmd)
        vk->vkd.vkFreeCommandBuffers(vk->device, vk->cmd_pool, 1, &s->cmd);
    vkmha__free(vk->ctx, s);
}

/* A submission's command buffer and fence, not pending yet: a pooled one
 * (its signaled fence reset; its executed command buffer is reset when
 * begun, by the pool's VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT),
 * else new ones. */
static vkmha_status submission_new(vk_state *vk, vk_submission **out)
{
    VkResult r;
    *out = NULL;
    if (vk->sub.n_pool) {
        vk_submission *s = vk_sub(vk->sub.pool[--vk->sub.n_pool]);
        if ((r = vk->vkd.vkResetFences(vk->device, 1, &s->fence)) != VK_SUCCESS) {
            submission_destroy(vk, s);
            return vk_fail(vk, r, "vkResetFences");
        }
        *s = (vk_submission){.s.ctx = vk->ctx, .cmd = s->cmd, .fence = s->fence};
        *out = s;
        return VKMHA_SUCCESS;
    }
    vk_submission *s = vkmha__calloc(vk->ctx, 1, sizeof *s);
    if (!s)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk->ctx->call);
    s->s.ctx = vk->ctx;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = vk->cmd_pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((r = vk->vkd.vkAllocateCommandBuffers(vk->device, &ai, &s->cmd)) != VK_SUCCESS ||
        (r = vk->vkd.vkCreateFence(vk->device, &fi, vk->vkalloc, &s->fence)) != VK_SUCCESS) {
        vk_submission_free(vk, &s->s);
        return vk_fail(vk, r, "vkAllocateCommandBuffers / vkCreateFence");
    }
    vk->sub.created++;
    *out = s;
    return VKMHA_SUCCESS;
}

/* Makes s the newest of vk->sub.subs (the pending ones). */
static vkmha_status submission_track(vk_state *vk, vk_submission *s)
{
    if (vk->sub.n_subs == vk->sub.cap_subs) {
        uint32_t cap = vk->sub.cap_subs ? 2 * vk->sub.cap_subs : 4;
        vkmha_submission **subs = vkmha__realloc(vk->ctx, vk->sub.subs,
                                                 vk->sub.n_subs * sizeof *subs, cap * sizeof *subs);
        if (!subs)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               "%s: out of host memory", vk->ctx->call);
        vk->sub.subs = subs;
        vk->sub.cap_subs = cap;
    }
    vk->sub.subs[vk->sub.n_subs++] = &s->s;
    return VKMHA_SUCCESS;
}

vkmha_status vk_submit_begin(vk_state *vk, vkmha_submission **out)
{
    vkmha_status st;
    vk_submission *s;
    *out = NULL;
    if (!vk->push_descriptors && (st = vk_wait_submissions(vk)))
        return st;
    if ((st = submission_new(vk, &s)))
        return st;
    if ((st = submission_track(vk, s))) {
        vk_submission_free(vk, &s->s);
        return st;
    }
    vk->cmd = s->cmd;
    *out = &s->s;
    return VKMHA_SUCCESS;
}

vkmha_status vk_parts_open(vkmha_context *ctx, vkmha_run *part, vkmha_submission **open)
{
    vk_state *vk = ctx->vk;
    vkmha_status st;
    vk_submission *s;
    *open = NULL;
    if ((st = vk_check_lost(vk)) || (st = submission_new(vk, &s)))
        return st;
    if ((st = begin_commands(vk, s->cmd))) {
        vk_submission_free(vk, &s->s);
        return st;
    }
    *part = (vkmha_run){.form = FORM_RECORD, .cmd = (void *)s->cmd};
    *open = &s->s;
    return VKMHA_SUCCESS;
}

vkmha_status vk_parts_close(vkmha_context *ctx, vkmha_submission *open, vkmha_status st,
                            vkmha_submission **out)
{
    vk_state *vk = ctx->vk;
    if (!st)
        st = submission_track(vk, (vk_submission *)open);
    if (st) {
        vk_submission_free(vk, open);
        return st;
    }
    if ((st = vk_submission_submit(vk))) /* frees it on failure */
        return st;
    *out = open;
    return VKMHA_SUCCESS;
}

vkmha_status vk_submission_begin_commands(vk_state *vk)
{
    return begin_commands(vk, vk_sub(vk->sub.subs[vk->sub.n_subs - 1])->cmd);
}

void vk_submission_free(vk_state *vk, vkmha_submission *sub)
{
    if (!sub)
        return;
    vk_submission *s = vk_sub(sub);
    for (uint32_t i = 0; i < vk->sub.n_subs; i++)
        if (vk->sub.subs[i] == sub) {
            vk->sub.subs[i] = vk->sub.subs[--vk->sub.n_subs];
            break;
        }
    /* Into the pool if it was submitted and finished without error: then
     * nothing of it is pending and its command buffer can be begun again
     * (one that failed while recording, or a lost device's, is destroyed). */
    const bool idle = s->submitted && sub->done && !sub->status;
    if (idle && vk->sub.n_pool < VK_SUBMISSION_POOL && (vk->sub.pool || vk_pool_alloc(vk))) {
        vk->sub.pool[vk->sub.n_pool++] = sub;
        return;
    }
    submission_destroy(vk, s);
}

/* Waits for one submission (timeout in ns) and records how it ended. */
static vkmha_status submission_wait(vk_state *vk, vkmha_submission *s, uint64_t timeout)
{
    if (s->done)
        return s->status;
    VkResult r = vk->vkd.vkWaitForFences(vk->device, 1, &vk_sub(s)->fence, VK_TRUE, timeout);
    if (r == VK_TIMEOUT)
        return VKMHA_NOT_READY;
    s->done = true;
    s->status = r == VK_SUCCESS ? VKMHA_SUCCESS
                                : vk_fail(vk, r, "vkWaitForFences (a vkmha submission)");
    return s->status;
}

vkmha_status vk_wait_submissions(vk_state *vk)
{
    for (uint32_t i = 0; i < vk->sub.n_subs; i++)
        if (submission_wait(vk, vk->sub.subs[i], UINT64_MAX) == VKMHA_ERROR_DEVICE_LOST)
            return VKMHA_ERROR_DEVICE_LOST;
    return VKMHA_SUCCESS;
}

bool vk_submissions_idle(vk_state *vk)
{
    for (uint32_t i = 0; i < vk->sub.n_subs; i++)
        if (submission_wait(vk, vk->sub.subs[i], 0) == VKMHA_NOT_READY)
            return false;
    return true;
}

/* The backend table's (vkmha_backend_ops) entries for the public functions
 * (src/mha.c), on submissions not yet done. */
vkmha_status vk_submission_wait_op(vkmha_submission *s, uint64_t timeout_ns)
{
    return submission_wait(s->ctx->vk, s, timeout_ns);
}

vkmha_status vk_submission_poll_op(vkmha_submission *s)
{
    vk_state *vk = s->ctx->vk;
    VkResult r = vk->vkd.vkGetFenceStatus(vk->device, vk_sub(s)->fence);
    if (r == VK_NOT_READY)
        return VKMHA_NOT_READY;
    return submission_wait(vk, s, UINT64_MAX);
}

void vk_submission_free_op(vkmha_submission *s)
{
    submission_wait(s->ctx->vk, s, UINT64_MAX);
    vk_submission_free(s->ctx->vk, s);
}

vkmha_status vk_submission_submit(vk_state *vk)
{
    VkResult r;
    vk_submission *s = vk_sub(vk->sub.subs[vk->sub.n_subs - 1]);
    if ((r = vk->vkd.vkEndCommandBuffer(s->cmd)) != VK_SUCCESS) {
        vk_submission_free(vk, &s->s);
        return vk_fail(vk, r, "vkEndCommandBuffer");
    }
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &s->cmd;
    if ((r = vk_queue_submit(vk, &si, s->fence)) != VK_SUCCESS) {
        vk_submission_free(vk, &s->s);
        return vk_fail(vk, r, "vkQueueSubmit");
    }
    s->submitted = true;
    return VKMHA_SUCCESS;
}

void vk_submissions_destroy(vk_state *vk)
{
    while (vk->sub.n_subs)
        vk_submission_free(vk, vk->sub.subs[vk->sub.n_subs - 1]);
    while (vk->sub.n_pool)
        submission_destroy(vk, vk_sub(vk->sub.pool[--vk->sub.n_pool]));
    vkmha__free(vk->ctx, vk->sub.subs);
    vkmha__free(vk->ctx, vk->sub.pool);
    vk->sub.subs = vk->sub.pool = NULL;
    vk->sub.cap_subs = 0;
}
