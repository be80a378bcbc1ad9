/* The executor: every call on the device is planned first (uploads,
 * passes, downloads; src/vk_internal.h's vk_plan), then recorded into one
 * command buffer of its mode and, unless the application records it,
 * submitted once.
 *
 * Synchronization: the work of a call is ordered by global memory barriers
 * between dependent steps, covering exactly the stages that wrote since the
 * last barrier (transfer and/or compute). Every call starts with a barrier
 * against the previous calls' writes; a call that the host waits for ends
 * with one that makes its writes visible to the host. */
#include "vk_exec.h"

#include <stdio.h>
#include <string.h>

static void barrier(vk_state *vk, VkPipelineStageFlags src, VkAccessFlags src_access,
                    VkPipelineStageFlags dst, VkAccessFlags dst_access)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = src_access;
    mb.dstAccessMask = dst_access;
    vk->vkd.vkCmdPipelineBarrier(vk->cmd, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

static const VkPipelineStageFlags DEVICE_STAGES =
    VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
static const VkAccessFlags DEVICE_ACCESS =
    VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT |
    VK_ACCESS_SHADER_WRITE_BIT;

/* Bytes from the first to the last byte of a download's n2 groups of n1
 * blocks of len bytes (vk_download). */
static size_t download_span(size_t len, size_t n1, size_t stride1, size_t n2, size_t stride2)
{
    return (n2 - 1) * stride2 + (n1 - 1) * stride1 + len;
}

/* Staging offsets stay 16-byte aligned (vkCmdCopyBuffer needs none; this
 * keeps copies on whole vectors). */
static VkDeviceSize staging_step(VkDeviceSize bytes)
{
    return (bytes + 15) & ~(VkDeviceSize)15;
}


vkmha_status vk_exec_begin(vk_state *vk, vk_mode mode, VkCommandBuffer cmd,
                           struct vkmha_submission **sub)
{
    vkmha_status st;
    if ((st = vk_check_lost(vk)))
        return st;
    if (mode == MODE_RECORD) {
        vk->cmd = cmd;
        vk_scratch_referenced(vk); /* the scratch buffers are referenced from now on */
    } else if (mode == MODE_SUBMIT) {
        if ((st = vk_submit_begin(vk, sub)))
            return st;
    } else {
        /* Without push descriptors planning rewrites descriptor sets that a
         * pending submission may use. */
        if (!vk->push_descriptors && (st = vk_wait_submissions(vk)))
            return st;
        vk->cmd = vk->own_cmd;
    }
    vk->exec.mode = mode;
    vk->exec.planning = true;
    vk_window_sites_begin(vk);
    vk->exec.plan.n_up = vk->exec.plan.n_passes = vk->exec.plan.n_down = 0;
    vk->exec.plan.barrier_next = false;
    return VKMHA_SUCCESS;
}

/* Forgets the plan; MODE_SUBMIT also frees its submission. */
static void plan_abandon(vk_state *vk)
{
    if (vk->exec.mode == MODE_SUBMIT && vk->sub.n_subs)
        vk_submission_free(vk, vk->sub.subs[vk->sub.n_subs - 1]);
    vk->exec.planning = false;
    vk->exec.mode = MODE_SYNC;
    vk->cmd = vk->own_cmd;
}

vkmha_status vk_plan_grow(vk_state *vk, void **arr, uint32_t n, uint32_t *cap, size_t size)
{
    if (n < *cap)
        return VKMHA_SUCCESS;
    const uint32_t c = *cap ? 2 * *cap : 16;
    void *p = vkmha__realloc(vk->ctx, *arr, (size_t)*cap * size, (size_t)c * size);
    if (!p)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk->ctx->call);
    *arr = p;
    *cap = c;
    return VKMHA_SUCCESS;
}

static void flush(vk_state *vk, const vk_buffer *b)
{
    if (b->coherent)
        return;
    VkMappedMemoryRange range = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
    range.memory = b->mem;
    range.size = VK_WHOLE_SIZE;
    vk->vkd.vkFlushMappedMemoryRanges(vk->device, 1, &range);
}

static void barrier_if_dirty(vk_state *vk)
{
    VkPipelineStageFlags src = 0;
    VkAccessFlags src_access = 0;
    if (vk->exec.dirty_transfer) {
        src |= VK_PIPELINE_STAGE_TRANSFER_BIT;
        src_access |= VK_ACCESS_TRANSFER_WRITE_BIT;
    }
    if (vk->exec.dirty_compute) {
        src |= VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
        src_access |= VK_ACCESS_SHADER_WRITE_BIT;
    }
    if (!src)
        return;
    barrier(vk, src, src_access, DEVICE_STAGES, DEVICE_ACCESS);
    vk->exec.dirty_transfer = vk->exec.dirty_compute = false;
}

/* Writes an upload's data at dst (mapped memory or staging). */
static void upload_write(const vk_plan_upload *u, uint8_t *dst)
{
    if (u->from == u->to)
        memcpy(dst, u->src, (size_t)u->bytes);
    else
        vkmha__convert(u->from, u->src, u->to, dst, (size_t)u->n);
}

static void record_pass(vk_state *vk, const vk_pass *p)
{
    const VkPipelineLayout layout = vk->desc.pipe_layouts[p->kind];
    if (p->barrier)
        barrier_if_dirty(vk);
    if (p->op != PASS_DISPATCH) {
        const struct vk_pass_xfer *x = &p->xfer;
        if (p->op == PASS_COPY) {
            const VkBufferCopy region = {x->src_off, x->dst_off, x->size};
            vk->vkd.vkCmdCopyBuffer(vk->cmd, x->src, x->dst, 1, &region);
        } else if (p->op == PASS_ZERO) {
            vk->vkd.vkCmdFillBuffer(vk->cmd, x->dst, x->dst_off, x->size, 0);
        } else {
            vk->vkd.vkCmdUpdateBuffer(vk->cmd, x->dst, x->dst_off, x->size, x->data);
        }
        vk->exec.dirty_transfer = true;
        return;
    }
    if (vk->push_descriptors) {
        VkWriteDescriptorSet writes[VK_MAX_BINDINGS];
        for (uint32_t i = 0; i < p->n_writes; i++) {
            const struct vk_pass_binding *b = &p->writes[i];
            writes[i] = (VkWriteDescriptorSet){
                .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                .dstBinding = b->binding,
                .descriptorCount = 1,
                .descriptorType = b->type,
                .pBufferInfo = &b->info,
                .pTexelBufferView = &b->view};
        }
        vk->vkd.vkCmdPushDescriptorSetKHR(vk->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0,
                                          p->n_writes, writes);
    }
    vk->vkd.vkCmdBindPipeline(vk->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    if (!vk->push_descriptors)
        vk->vkd.vkCmdBindDescriptorSets(vk->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1,
                                        &p->set, 0, NULL);
    vk->vkd.vkCmdPushConstants(vk->cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_size,
                               p->push);
    vk->vkd.vkCmdDispatch(vk->cmd, p->groups[0], p->groups[1], p->groups[2]);
    vk->exec.dirty_compute = true;
}

/* Sizes staging for the plan's copies that need it, and begins the command
 * buffer of its mode. */
static vkmha_status plan_start(vk_state *vk)
{
    vk_plan *pl = &vk->exec.plan;
    VkDeviceSize up = 0, down = 0;
    VkResult r;
    vkmha_status st;
    for (uint32_t i = 0; i < pl->n_up; i++)
        up += pl->up[i].dst.map ? 0 : staging_step(pl->up[i].bytes);
    for (uint32_t i = 0; i < pl->n_down; i++)
        down += pl->down[i].src.map ? 0 : staging_step(pl->down[i].span);
    vk->exec.timed_passes = 0; /* set below for MODE_SYNC only */
    if ((up || down) && (st = vk_staging_ensure_unmapped(vk, up, down)))
        return st;
    if (vk->exec.mode == MODE_SUBMIT)
        return vk_submission_begin_commands(vk);
    if (vk->exec.mode == MODE_RECORD)
        return VKMHA_SUCCESS;
    if ((r = vk->vkd.vkResetCommandBuffer(vk->cmd, 0)) != VK_SUCCESS)
        return vk_fail(vk, r, "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    if ((r = vk->vkd.vkBeginCommandBuffer(vk->cmd, &bi)) != VK_SUCCESS)
        return vk_fail(vk, r, "vkBeginCommandBuffer");
    /* Each step timed (profile_record). */
    vk->exec.timed_passes = !vk->timestamps                   ? 0
                            : pl->n_passes < VK_PROFILE_PASSES ? pl->n_passes
                                                               : VK_PROFILE_PASSES;
    if (vk->timestamps) {
        vk->vkd.vkCmdResetQueryPool(vk->cmd, vk->timestamps, 0,
                                    vk->exec.timed_passes ? 3 + vk->exec.timed_passes : 2);
        vk->vkd.vkCmdWriteTimestamp(vk->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, vk->timestamps,
                                    0);
    }
    return VKMHA_SUCCESS;
}

/* Nanoseconds from timestamp a to b: their valid bits (the counter may wrap
 * once) in ticks of timestampPeriod. */
static uint64_t ticks_ns(const vk_state *vk, uint64_t a, uint64_t b)
{
    const uint64_t mask = vk->timestamp_mask, ticks = ((b & mask) - (a & mask)) & mask;
    return (uint64_t)((double)ticks * vk->info.timestamp_period + 0.5);
}

/* Timestamp 2 + i (i = 0: the uploads done; i > 0: step i - 1 done), where
 * the call times its steps. */
static void step_timestamp(vk_state *vk, uint32_t i)
{
    if (i < 1 + vk->exec.timed_passes && vk->exec.timed_passes)
        vk->vkd.vkCmdWriteTimestamp(vk->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                                    vk->timestamps, 2 + i);
}

/* The device time of each timed step of the call just waited for, kept for
 * vkmha_context_get_profile and, with a logger at VKMHA_LOG_DEBUG, a line
 * each ("profile: step 3 matmul_coop_vec (16 x 8 x 1 workgroups): 41.2 us"),
 * then the uploads, the steps and the downloads in all. A step's time runs
 * from the end of the step before it, so it includes the barrier it waits
 * at. */
static void profile_record(vk_state *vk, const uint64_t t[2])
{
    const uint32_t n = vk->exec.timed_passes;
    uint64_t s[1 + VK_PROFILE_PASSES];
    vk->profile_steps = 0;
    if (!n || vk->vkd.vkGetQueryPoolResults(vk->device, vk->timestamps, 2, 1 + n, sizeof s, s,
                                            sizeof s[0], VK_QUERY_RESULT_64_BIT) != VK_SUCCESS)
        return;
    const bool log = vkmha__log_enabled(vk->ctx, VKMHA_LOG_DEBUG);
    for (uint32_t i = 0; i < n; i++) {
        const vk_pass *p = &vk->exec.plan.passes[i];
        vkmha_profile_step *o = &vk->profile[i];
        *o = (vkmha_profile_step){.time_ns = ticks_ns(vk, s[i], s[i + 1])};
        char what[64];
        if (p->op == PASS_DISPATCH) {
            vk_pipe_name(p->key.pipe, o->name, sizeof o->name);
            memcpy(o->workgroups, p->groups, sizeof o->workgroups);
            snprintf(what, sizeof what, "%u x %u x %u workgroups", p->groups[0], p->groups[1],
                     p->groups[2]);
        } else {
            snprintf(o->name, sizeof o->name, "%s",
                     p->op == PASS_ZERO ? "fill" : p->op == PASS_UPDATE ? "update" : "copy");
            o->bytes = p->xfer.size;
            snprintf(what, sizeof what, "%llu bytes", (unsigned long long)o->bytes);
        }
        if (log)
            vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                       "%s: profile: step %u %s (%s): %.1f us", vk_call_name(vk), i, o->name,
                       what, o->time_ns / 1000.0);
    }
    vk->profile_steps = n;
    if (log)
        vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                   "%s: profile: uploads %.1f us, %u steps %.1f us, the rest (downloads) %.1f us",
                   vk_call_name(vk), ticks_ns(vk, t[0], s[0]) / 1000.0, n,
                   ticks_ns(vk, s[0], s[n]) / 1000.0, ticks_ns(vk, s[n], t[1]) / 1000.0);
}

/* Records the plan into vk->cmd (begun). */
static void plan_record(vk_state *vk)
{
    vk_plan *pl = &vk->exec.plan;
    /* The previous calls' device writes (the host waited for them, which
     * orders nothing on the device; or they are in an earlier command
     * buffer on the queue) before this call's reads and writes. */
    barrier(vk, DEVICE_STAGES, VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
            DEVICE_STAGES, DEVICE_ACCESS);
    vk->exec.dirty_transfer = vk->exec.dirty_compute = false;
    VkDeviceSize used = 0;
    for (uint32_t i = 0; i < pl->n_up; i++) {
        const vk_plan_upload *u = &pl->up[i];
        if (u->dst.map) {
            upload_write(u, (uint8_t *)u->dst.map + u->dst.offset + u->offset);
            flush(vk, &u->dst);
            continue;
        }
        upload_write(u, (uint8_t *)vk->mem.upload.map + used);
        VkBufferCopy region = {used, u->dst.offset + u->offset, u->bytes};
        vk->vkd.vkCmdCopyBuffer(vk->cmd, vk->mem.upload.buf, u->dst.buf, 1, &region);
        vk->exec.dirty_transfer = true;
        used += staging_step(u->bytes);
    }
    if (used) /* the staged uploads, written above: one flush */
        flush(vk, &vk->mem.upload);
    barrier_if_dirty(vk); /* every pass reads what was uploaded */
    step_timestamp(vk, 0);
    for (uint32_t i = 0; i < pl->n_passes; i++) {
        record_pass(vk, &pl->passes[i]);
        step_timestamp(vk, i + 1);
    }
    used = 0;
    for (uint32_t i = 0; i < pl->n_down; i++) {
        vk_plan_download *d = &pl->down[i];
        if (d->src.map) {
            d->from = &d->src;
            d->from_off = d->src.offset;
            continue;
        }
        barrier_if_dirty(vk);
        VkBufferCopy region = {d->src.offset, used, d->span};
        vk->vkd.vkCmdCopyBuffer(vk->cmd, d->src.buf, vk->mem.download.buf, 1, &region);
        vk->exec.dirty_transfer = true;
        d->from = &vk->mem.download;
        d->from_off = used;
        used += staging_step(d->span);
    }
}

/* MODE_SYNC's end: submits, waits, and copies the downloads to the host. */
static vkmha_status sync_submit(vk_state *vk)
{
    VkResult r;
    /* Device writes -> host reads (mapped working buffers or staging). */
    barrier(vk, DEVICE_STAGES, VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    if (vk->timestamps)
        vk->vkd.vkCmdWriteTimestamp(vk->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                                    vk->timestamps, 1);
    if ((r = vk->vkd.vkEndCommandBuffer(vk->cmd)) != VK_SUCCESS)
        return vk_fail(vk, r, "vkEndCommandBuffer");
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &vk->cmd;
    if ((r = vk_fence_wait(vk, vk_queue_submit(vk, &si, vk->fence))) != VK_SUCCESS)
        return vk_fail(vk, r, "vkQueueSubmit / vkWaitForFences");
    if (vk->timestamps) {
        uint64_t t[2];
        r = vk->vkd.vkGetQueryPoolResults(vk->device, vk->timestamps, 0, 2, sizeof t, t,
                                          sizeof t[0], VK_QUERY_RESULT_64_BIT);
        if (r == VK_SUCCESS) {
            vk->last_gpu_time_ns = ticks_ns(vk, t[0], t[1]);
            profile_record(vk, t);
        }
    }
    for (uint32_t i = 0; i < vk->exec.plan.n_down; i++) {
        const vk_plan_download *p = &vk->exec.plan.down[i];
        if (!p->from->coherent) {
            VkMappedMemoryRange range = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
            range.memory = p->from->mem;
            range.size = VK_WHOLE_SIZE;
            vk->vkd.vkInvalidateMappedMemoryRanges(vk->device, 1, &range);
        }
        const uint8_t *src = (const uint8_t *)p->from->map + p->from_off;
        if (p->n1 * p->len == p->stride2 && p->len == p->stride1) {
            memcpy(p->dst, src, p->n2 * p->stride2); /* dense */
            continue;
        }
        for (size_t b = 0; b < p->n2; b++)
            for (size_t row = 0; row < p->n1; row++) {
                size_t off = b * p->stride2 + row * p->stride1;
                memcpy(p->dst + off, src + off, p->len);
            }
    }
    /* The queue is idle up to this call (its fence covers every earlier
     * submission), so scratch above the budget can go. */
    if (vk->mem.scratch_budget)
        vk_scratch_fit(vk, vk->mem.scratch_budget);
    return VKMHA_SUCCESS;
}

/* The plan's pipelines that did not exist when it was made: created
 * together (vk_pipelines_build), then set in its passes. */
static vkmha_status plan_pipelines(vk_state *vk)
{
    vk_plan *pl = &vk->exec.plan;
    vkmha_status st;
    if (vk->pipelines.n_want && (st = vk_pipelines_build(vk)))
        return st;
    for (uint32_t i = 0; i < pl->n_passes; i++) {
        vk_pass *p = &pl->passes[i];
        if (p->op == PASS_DISPATCH && !p->pipeline &&
            !(p->pipeline = vk_pipeline_find(vk, &p->key)))
            return vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                               "%s: internal error: pipeline %u.%u.%u.%u not created",
                               vk->ctx->call, p->key.pipe.kernel, p->key.pipe.tile,
                               p->key.pipe.vec, p->key.pipe.cls);
    }
    return VKMHA_SUCCESS;
}

vkmha_status vk_exec_end(vk_state *vk, vkmha_status st, struct vkmha_submission **sub)
{
    const vk_mode mode = vk->exec.mode;
    /* The next plan reserves its window sites anew. */
    vk_window_sites_end(vk);
    if (!st && vk->exec.gather) { /* the self-check's first pass: pipelines wanted only */
        plan_abandon(vk);
        return VKMHA_SUCCESS;
    }
    if (!st && !(st = plan_pipelines(vk)) && !(st = plan_start(vk))) {
        plan_record(vk);
        vk->exec.planning = false;
        vk->exec.mode = MODE_SYNC;
        if (mode == MODE_SYNC)
            st = sync_submit(vk);
        else if (mode == MODE_SUBMIT)
            st = vk_submission_submit(vk); /* frees it on failure */
        vk->cmd = vk->own_cmd;
    } else {
        plan_abandon(vk);
    }
    if (st && sub)
        *sub = NULL;
    /* Scratch replaced while submissions were pending, once none is. */
    vk_memory_collect(vk);
    return st;
}


static vkmha_status plan_upload(vk_state *vk, const vk_plan_upload *u)
{
    vk_plan *pl = &vk->exec.plan;
    vkmha_status st = vk_plan_grow(vk, (void **)&pl->up, pl->n_up, &pl->cap_up, sizeof *pl->up);
    if (!st && u->bytes)
        pl->up[pl->n_up++] = *u;
    return st;
}

vkmha_status vk_upload(vk_state *vk, const vk_buffer *dst, VkDeviceSize offset,
                       const void *src, uint64_t bytes)
{
    return plan_upload(vk, &(vk_plan_upload){
                               .dst = *dst, .offset = offset, .src = src, .bytes = bytes});
}

vkmha_status vk_upload_converted(vk_state *vk, const vk_buffer *dst, const void *src,
                                 uint32_t from, uint32_t to, uint64_t n)
{
    return plan_upload(vk, &(vk_plan_upload){.dst = *dst, .src = src, .from = from, .to = to,
                                             .n = n, .bytes = n * vkmha__dtype_size(to)});
}

void vk_barrier(vk_state *vk)
{
    vk->exec.plan.barrier_next = true;
}

/* Adds a transfer pass. */
static vkmha_status plan_transfer(vk_state *vk, vk_pass_op op, const struct vk_pass_xfer *x)
{
    vk_plan *pl = &vk->exec.plan;
    vkmha_status st = vk_plan_grow(vk, (void **)&pl->passes, pl->n_passes, &pl->cap_passes,
                                sizeof *pl->passes);
    if (st || !x->size)
        return st;
    pl->passes[pl->n_passes++] = (vk_pass){.op = op, .xfer = *x, .barrier = pl->barrier_next};
    pl->barrier_next = false;
    return VKMHA_SUCCESS;
}

vkmha_status vk_copy(vk_state *vk, const vk_buffer *src, VkDeviceSize src_off,
                     const vk_buffer *dst, VkDeviceSize dst_off, VkDeviceSize bytes)
{
    return plan_transfer(vk, PASS_COPY,
                         &(struct vk_pass_xfer){.src = src->buf, .dst = dst->buf,
                                                .src_off = src->offset + src_off,
                                                .dst_off = dst->offset + dst_off,
                                                .size = bytes});
}

vkmha_status vk_zero(vk_state *vk, const vk_buffer *dst)
{
    /* Buffers are whole 32-bit words (vk_buffer_create). */
    return plan_transfer(vk, PASS_ZERO,
                         &(struct vk_pass_xfer){.dst = dst->buf, .dst_off = dst->offset,
                                                .size = dst->size});
}

vkmha_status vk_update(vk_state *vk, const vk_buffer *dst, VkDeviceSize offset,
                       const void *data, VkDeviceSize bytes)
{
    const VkDeviceSize at = dst->offset + offset;
    if (at % 4 || bytes % 4)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                           "%s: internal error: an update of %llu bytes at %llu",
                           vk->ctx->call, (unsigned long long)bytes, (unsigned long long)at);
    /* vkCmdUpdateBuffer writes at most 65536 bytes: passes of that many
     * (disjoint ranges: no barrier between them). */
    vkmha_status st = VKMHA_SUCCESS;
    for (VkDeviceSize done = 0; done < bytes && !st; done += 65536)
        st = plan_transfer(vk, PASS_UPDATE,
                           &(struct vk_pass_xfer){
                               .dst = dst->buf, .dst_off = at + done,
                               .size = bytes - done < 65536 ? bytes - done : 65536,
                               .data = (const uint8_t *)data + done});
    return st;
}

vkmha_status vk_download(vk_state *vk, const vk_buffer *src, void *dst, size_t len, size_t n1,
                         size_t stride1, size_t n2, size_t stride2)
{
    vk_plan *pl = &vk->exec.plan;
    if (pl->n_down == VKMHA_ARRAY_LEN(pl->down))
        return vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                           "%s: internal error: more than %zu downloads in one call",
                           vk->ctx->call, VKMHA_ARRAY_LEN(pl->down));
    pl->down[pl->n_down++] = (vk_plan_download){
        .src = *src, .dst = (uint8_t *)dst, .len = len, .n1 = n1, .stride1 = stride1,
        .n2 = n2, .stride2 = stride2, .span = download_span(len, n1, stride1, n2, stride2)};
    return VKMHA_SUCCESS;
}

void vk_exec_gather(vk_state *vk, bool gather)
{
    vk->exec.gather = gather;
}

void vk_exec_destroy(vk_state *vk)
{
    vkmha__free(vk->ctx, vk->exec.plan.up);
    vkmha__free(vk->ctx, vk->exec.plan.passes);
    vk->exec.plan.up = NULL;
    vk->exec.plan.passes = NULL;
}
