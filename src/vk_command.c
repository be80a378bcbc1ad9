/* Recording one call into the context's command buffer: uploads, barriers,
 * dispatches and downloads, then one submit and one wait.
 *
 * Synchronization: the work of a call is ordered by global memory barriers
 * (vk_barrier) between dependent stages, covering exactly the stages that
 * wrote since the last barrier (transfer and/or compute). Every call starts
 * with a barrier against the previous call's writes and ends with one that
 * makes its writes visible to the host. */
#include "vk_internal.h"

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

/* The first command of every call: the previous calls' device writes (the
 * host waited for them, which orders nothing on the device; or they are in
 * an earlier command buffer on the queue) before this call's reads and
 * writes. */
void vk_begin_commands(vk_state *vk)
{
    vk->recording = true;
    vk->upload_used = vk->download_used = 0;
    vk->n_pending = 0;
    barrier(vk, DEVICE_STAGES, VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
            DEVICE_STAGES, DEVICE_ACCESS);
    vk->dirty_transfer = vk->dirty_compute = false;
}

vkmha_status vk_check_lost(vk_state *vk)
{
    if (vk->lost)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_DEVICE_LOST,
                           "%s: the Vulkan device was lost earlier; destroy the context",
                           vk->ctx->call ? vk->ctx->call : "vkmha");
    return VKMHA_SUCCESS;
}

vkmha_status vk_call_begin(vk_state *vk, VkDeviceSize upload_bytes,
                           VkDeviceSize download_bytes)
{
    vkmha_status st;
    VkResult r;
    if ((st = vk_check_lost(vk)))
        return st;
    /* Without push descriptors this call rewrites descriptor sets that a
     * pending submission may use. */
    if (!vk->push_descriptors && (st = vk_wait_submissions(vk)))
        return st;
    if ((st = vk_staging_ensure(vk, upload_bytes, download_bytes)))
        return st;
    vk->mode = MODE_SYNC;
    vk->cmd = vk->own_cmd;
    if ((r = vk->vkd.vkResetCommandBuffer(vk->cmd, 0)) != VK_SUCCESS)
        return vk_fail(vk, r, "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    if ((r = vk->vkd.vkBeginCommandBuffer(vk->cmd, &bi)) != VK_SUCCESS)
        return vk_fail(vk, r, "vkBeginCommandBuffer");
    if (vk->timestamps) {
        vk->vkd.vkCmdResetQueryPool(vk->cmd, vk->timestamps, 0, 2);
        vk->vkd.vkCmdWriteTimestamp(vk->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, vk->timestamps,
                                    0);
    }
    vk_begin_commands(vk);
    return VKMHA_SUCCESS;
}

vkmha_status vk_record_begin(vk_state *vk, VkCommandBuffer cmd)
{
    vkmha_status st;
    if ((st = vk_check_lost(vk)))
        return st;
    if (!vk->push_descriptors)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: recording into the application's command buffer needs "
                           "VK_KHR_push_descriptor, which this context does not use (not "
                           "supported, not listed in desc->vulkan->enabled_device_extensions, "
                           "or VKMHA_NO_PUSH_DESCRIPTORS is set)",
                           vk->ctx->call);
    vk->mode = MODE_RECORD;
    vk->cmd = cmd;
    vk->recorded = true; /* the scratch buffers are referenced from now on */
    vk_begin_commands(vk);
    return VKMHA_SUCCESS;
}

VkResult vk_queue_submit(vk_state *vk, const VkSubmitInfo *si, VkFence fence)
{
    if (vk->queue_lock)
        vk->queue_lock(vk->queue_lock_user);
    VkResult r = vk->vkd.vkQueueSubmit(vk->queue, 1, si, fence);
    if (vk->queue_unlock)
        vk->queue_unlock(vk->queue_lock_user);
    return r;
}

vkmha_status vk_call_end(vk_state *vk)
{
    if (vk->mode == MODE_SYNC)
        return vk_call_submit(vk);
    vk->recording = false;
    const vk_mode mode = vk->mode;
    vk->mode = MODE_SYNC;
    vk->cmd = vk->own_cmd;
    return mode == MODE_RECORD ? VKMHA_SUCCESS : vk_submission_submit(vk);
}

/* Bytes from the first to the last byte of a download's n2 groups of n1
 * blocks of len bytes (vk_download). */
static size_t download_span(size_t len, size_t n1, size_t stride1, size_t n2, size_t stride2)
{
    return (n2 - 1) * stride2 + (n1 - 1) * stride1 + len;
}

vkmha_status vk_exec_begin(vk_state *vk, vk_mode mode, VkCommandBuffer cmd,
                           struct vkmha_submission **sub)
{
    return mode == MODE_SYNC     ? vk_call_begin(vk, 0, 0)
           : mode == MODE_RECORD ? vk_record_begin(vk, cmd)
                                 : vk_submit_begin(vk, sub);
}

vkmha_status vk_exec_end(vk_state *vk, vkmha_status st, struct vkmha_submission **sub)
{
    if (st)
        vk_call_abort(vk);
    else
        st = vk_call_end(vk);
    if (st && sub)
        *sub = NULL;
    return st;
}

vkmha_status vk_run_host(vk_state *vk, const vk_host_call *c)
{
    vkmha_status st;
    uint64_t up = 0, down = 0;
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(c->up); i++)
        up += c->up[i].bytes ? c->up[i].bytes + 16 : 0;
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(c->down); i++) {
        const vk_host_download *d = &c->down[i];
        if (d->dst)
            down += download_span(d->len, d->n1, d->stride1, d->n2, d->stride2) + 16;
    }
    if ((c->mask && (st = vk_mask_ensure(vk, c->mask, c->batch, c->len_q, c->len_k, &up))) ||
        (st = vk_call_begin(vk, up, down)))
        return st;
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(c->up); i++)
        if (c->up[i].bytes)
            vk_upload(vk, c->up[i].buf, 0, c->up[i].src, c->up[i].bytes);
    if (c->mask)
        vk_mask_upload(vk, c->mask, c->batch, c->len_q, c->len_k);
    vk_barrier(vk);
    if ((st = c->record(vk, c->arg))) {
        vk_call_abort(vk);
        return st;
    }
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(c->down); i++) {
        const vk_host_download *d = &c->down[i];
        if (d->dst)
            vk_download(vk, d->buf, d->dst, d->len, d->n1, d->stride1, d->n2, d->stride2);
    }
    return vk_call_submit(vk);
}

void vk_call_abort(vk_state *vk)
{
    const vk_mode mode = vk->mode;
    if (vk->recording && mode != MODE_RECORD)
        vk->vkd.vkEndCommandBuffer(vk->cmd);
    vk->recording = false;
    vk->n_pending = 0;
    vk->mode = MODE_SYNC;
    vk->cmd = vk->own_cmd;
    if (mode == MODE_SUBMIT && vk->n_subs)
        vk_submission_free(vk, vk->subs[vk->n_subs - 1]);
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

void vk_upload(vk_state *vk, vk_buffer *dst, VkDeviceSize offset, const void *src,
               size_t bytes)
{
    if (bytes == 0)
        return;
    if (dst->map) {
        memcpy((uint8_t *)dst->map + dst->offset + offset, src, bytes);
        flush(vk, dst);
        return;
    }
    /* Staging was sized by vk_call_begin; offsets stay 16-byte aligned. */
    VkBufferCopy region = {vk->upload_used, dst->offset + offset, bytes};
    memcpy((uint8_t *)vk->upload.map + vk->upload_used, src, bytes);
    vk->upload_used += (bytes + 15) & ~(VkDeviceSize)15;
    flush(vk, &vk->upload);
    vk->vkd.vkCmdCopyBuffer(vk->cmd, vk->upload.buf, dst->buf, 1, &region);
    vk->dirty_transfer = true;
}

void vk_barrier(vk_state *vk)
{
    VkPipelineStageFlags src = 0;
    VkAccessFlags src_access = 0;
    if (vk->dirty_transfer) {
        src |= VK_PIPELINE_STAGE_TRANSFER_BIT;
        src_access |= VK_ACCESS_TRANSFER_WRITE_BIT;
    }
    if (vk->dirty_compute) {
        src |= VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
        src_access |= VK_ACCESS_SHADER_WRITE_BIT;
    }
    if (!src)
        return;
    barrier(vk, src, src_access, DEVICE_STAGES, DEVICE_ACCESS);
    vk->dirty_transfer = vk->dirty_compute = false;
}

void vk_download(vk_state *vk, const vk_buffer *src, void *dst, size_t len, size_t n1,
                 size_t stride1, size_t n2, size_t stride2)
{
    vk_pending_copy *p = &vk->pending[vk->n_pending++];
    size_t span = download_span(len, n1, stride1, n2, stride2);
    p->dst = (uint8_t *)dst;
    p->len = len;
    p->n1 = n1;
    p->n2 = n2;
    p->stride1 = stride1;
    p->stride2 = stride2;
    if (src->map) {
        p->src_buf = src;
        p->src_off = src->offset;
        return;
    }
    vk_barrier(vk);
    VkBufferCopy region = {src->offset, vk->download_used, span};
    vk->vkd.vkCmdCopyBuffer(vk->cmd, src->buf, vk->download.buf, 1, &region);
    vk->dirty_transfer = true;
    p->src_buf = &vk->download;
    p->src_off = vk->download_used;
    vk->download_used += (span + 15) & ~(size_t)15;
}

VkBufferView vk_texel_view(const vk_buffer *b, uint32_t dtype, bool u16)
{
    if (u16)
        return dtype == VKMHA_DTYPE_F32 ? VK_NULL_HANDLE : b->view4u;
    return dtype == VKMHA_DTYPE_F32 ? b->view4 : dtype == VKMHA_DTYPE_F16 ? b->view4h : VK_NULL_HANDLE;
}

vkmha_status vk_dispatch(vk_state *vk, vk_site *site, vk_pipe pipe, uint32_t dtypes,
                         const vk_buffer *const bufs[], uint32_t n_bufs, const void *push,
                         uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz)
{
    vk_kind kind = vk_pipe_kind(pipe);
    VkPipeline pipeline;
    vkmha_status st = vk_pipeline_get(vk, pipe, dtypes, &pipeline);
    if (st)
        return st;

    /* Sites are allocated with their kind by vk_site_pool_create. */
    if (site->kind != kind)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                           "%s: internal error: descriptor site of kind %d used for kind %d",
                           vk->ctx->call, site->kind, kind);
    /* With texel views, a matmul binds A and B twice: as vec4 texel views
     * (0, 1) and as storage buffers (4, 5); the CPU-shaped row kernels add
     * texel views of their inputs after their storage bindings
     * (vk_binding_source). With push descriptors every binding goes
     * into the command buffer; otherwise only the bindings whose buffer was
     * recreated since the site was last used are rewritten (buffer ids are
     * unique per creation, and a texel binding's id also says which view).
     * A texel binding gets the view of its buffer's dtype (dtypes) when the
     * pipeline reads views of that kind (float, or the TEXEL_U16 variant's
     * uint: vk_texel_u16); otherwise (a buffer of another kind, a wrapped
     * tensor, one under 16 bytes) the record functions never read it, and
     * the dummy's view of the pipeline's kind is bound. */
    const bool u16 = vk_texel_u16(vk, pipe, dtypes);
    const uint32_t n_bind = vk_kind_bindings(vk, kind);
    VkDescriptorBufferInfo infos[VK_MAX_BINDINGS];
    VkWriteDescriptorSet writes[VK_MAX_BINDINGS];
    VkBufferView views[VK_MAX_BINDINGS];
    uint32_t n_writes = 0;
    for (uint32_t i = 0; i < n_bind; i++) {
        const uint32_t src = vk_binding_source(vk, kind, i);
        const vk_buffer *b = src < n_bufs && bufs[src] && bufs[src]->buf ? bufs[src] : &vk->dummy;
        const VkDescriptorType type = vk_binding_type(vk, kind, i);
        const bool texel = type == VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
        VkBufferView view = VK_NULL_HANDLE;
        const uint32_t dt = VK_DT_OF(dtypes, src);
        if (texel && !(view = vk_texel_view(b, dt, u16))) {
            b = &vk->dummy;
            view = u16 ? b->view4u : b->view4;
        }
        const uint64_t id =
            4 * b->id + (!texel ? 0 : view == b->view4 ? 1 : view == b->view4h ? 2 : 3);
        if (!vk->push_descriptors) {
            if (site->ids[i] == id)
                continue;
            site->ids[i] = id;
        }
        writes[n_writes] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        writes[n_writes].dstSet = site->set;
        writes[n_writes].dstBinding = i;
        writes[n_writes].descriptorCount = 1;
        writes[n_writes].descriptorType = type;
        if (texel) {
            views[n_writes] = view;
            writes[n_writes].pTexelBufferView = &views[n_writes];
        } else {
            infos[n_writes] = (VkDescriptorBufferInfo){b->buf, b->offset, b->size};
            writes[n_writes].pBufferInfo = &infos[n_writes];
        }
        n_writes++;
    }
    if (vk->push_descriptors)
        vk->vkd.vkCmdPushDescriptorSetKHR(vk->cmd, VK_PIPELINE_BIND_POINT_COMPUTE,
                                          vk->pipe_layouts[kind], 0, n_writes, writes);
    else if (n_writes)
        vk->vkd.vkUpdateDescriptorSets(vk->device, n_writes, writes, 0, NULL);

    vk->vkd.vkCmdBindPipeline(vk->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    if (!vk->push_descriptors)
        vk->vkd.vkCmdBindDescriptorSets(vk->cmd, VK_PIPELINE_BIND_POINT_COMPUTE,
                                        vk->pipe_layouts[kind], 0, 1, &site->set, 0, NULL);
    vk->vkd.vkCmdPushConstants(vk->cmd, vk->pipe_layouts[kind], VK_SHADER_STAGE_COMPUTE_BIT, 0,
                               push_size, push);
    vk->vkd.vkCmdDispatch(vk->cmd, gx, gy, gz);
    vk->dirty_compute = true;
    return VKMHA_SUCCESS;
}

vkmha_status vk_call_submit(vk_state *vk)
{
    VkResult r;
    /* Device writes -> host reads (mapped working buffers or staging). */
    barrier(vk, DEVICE_STAGES, VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    if (vk->timestamps)
        vk->vkd.vkCmdWriteTimestamp(vk->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                                    vk->timestamps, 1);
    vk->recording = false;
    if ((r = vk->vkd.vkEndCommandBuffer(vk->cmd)) != VK_SUCCESS) {
        vk->n_pending = 0;
        return vk_fail(vk, r, "vkEndCommandBuffer");
    }
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &vk->cmd;
    r = vk_queue_submit(vk, &si, vk->fence);
    if (r == VK_SUCCESS) {
        r = vk->vkd.vkWaitForFences(vk->device, 1, &vk->fence, VK_TRUE, UINT64_MAX);
        VkResult rr = vk->vkd.vkResetFences(vk->device, 1, &vk->fence);
        if (r == VK_SUCCESS)
            r = rr;
    }
    if (r != VK_SUCCESS) {
        vk->n_pending = 0;
        return vk_fail(vk, r, "vkQueueSubmit / vkWaitForFences");
    }
    if (vk->timestamps) {
        uint64_t t[2];
        r = vk->vkd.vkGetQueryPoolResults(vk->device, vk->timestamps, 0, 2, sizeof t, t,
                                          sizeof t[0], VK_QUERY_RESULT_64_BIT);
        if (r == VK_SUCCESS) {
            /* Only the valid bits count; the counter may wrap once. */
            uint64_t ticks = ((t[1] & vk->timestamp_mask) - (t[0] & vk->timestamp_mask)) &
                             vk->timestamp_mask;
            vk->last_gpu_time_ns = (uint64_t)((double)ticks * vk->info.timestamp_period + 0.5);
        }
    }
    for (uint32_t i = 0; i < vk->n_pending; i++) {
        const vk_pending_copy *p = &vk->pending[i];
        if (!p->src_buf->coherent) {
            VkMappedMemoryRange range = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
            range.memory = p->src_buf->mem;
            range.size = VK_WHOLE_SIZE;
            vk->vkd.vkInvalidateMappedMemoryRanges(vk->device, 1, &range);
        }
        const uint8_t *src = (const uint8_t *)p->src_buf->map + p->src_off;
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
    vk->n_pending = 0;
    /* The queue is idle up to this call (its fence covers every earlier
     * submission), so scratch above the budget can go. */
    if (vk->scratch_budget)
        vk_scratch_fit(vk, vk->scratch_budget);
    return VKMHA_SUCCESS;
}

vkmha_status vk_dispatch_groups(vk_state *vk, vk_site *site, vk_pipe pipe, uint32_t dtypes,
                                const vk_buffer *const bufs[], uint32_t n_bufs,
                                const void *push, uint32_t push_size, uint32_t base_offset,
                                uint64_t groups)
{
    const uint64_t mx = vk->info.max_workgroup_count[0], my = vk->info.max_workgroup_count[1],
                   mz = vk->info.max_workgroup_count[2];
    const uint64_t most = mx * my * mz; /* groups of one full grid */
    uint8_t copy[128];
    /* Group numbers are 32-bit in the shaders. */
    if (groups > UINT32_MAX)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: %llu workgroups in one pass, more than 2^32 - 1",
                           vk->ctx->call, (unsigned long long)groups);
    memcpy(copy, push, push_size);
    if (groups > most)
        vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                   "%s: %llu workgroups split into %llu dispatches (maxComputeWorkGroupCount "
                   "%llu x %llu x %llu)",
                   vk->ctx->call, (unsigned long long)groups,
                   (unsigned long long)((groups + most - 1) / most), (unsigned long long)mx,
                   (unsigned long long)my, (unsigned long long)mz);
    for (uint64_t done = 0; done < groups;) {
        uint64_t left = groups - done, gx = mx, gy = my, gz = mz;
        if (left < most) {
            /* The last grid: only it may overshoot (past `groups`, which every
             * shader checks), so no group runs twice. */
            gx = left < mx ? left : mx;
            gy = (left + gx - 1) / gx;
            gy = gy < my ? gy : my;
            gz = (left + gx * gy - 1) / (gx * gy);
        }
        uint32_t base = (uint32_t)done;
        memcpy(copy + base_offset, &base, sizeof base);
        if (done)
            vk_barrier(vk);
        vkmha_status st = vk_dispatch(vk, site, pipe, dtypes, bufs, n_bufs, copy, push_size,
                                      (uint32_t)gx, (uint32_t)gy, (uint32_t)gz);
        if (st)
            return st;
        done += gx * gy * gz;
    }
    return VKMHA_SUCCESS;
}
