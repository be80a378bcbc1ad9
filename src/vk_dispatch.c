/* Dispatches: a pass of a kernel table row's pipeline planned into the
 * executor's plan (vk_dispatch: checked against its row, its pipeline found
 * or wanted, its descriptors chosen and written, misaligned views' offsets
 * in the push block), and grids past maxComputeWorkGroupCount as several
 * dispatches (vk_dispatch_range). */
#include "vk_exec.h"

#include <string.h>

vkmha_status vk_check_strides(vk_state *vk, const vk_view *const v[], uint32_t n,
                              const char *what)
{
    for (uint32_t i = 0; i < n; i++)
        for (int d = 0; d < 3; d++)
            if (v[i]->stride[d] > UINT32_MAX)
                return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                                   "%s: %s stride of %llu elements exceeds 32 bits",
                                   vk->ctx->call, what, (unsigned long long)v[i]->stride[d]);
    return VKMHA_SUCCESS;
}


vkmha_status vk_dispatch(vk_state *vk, vk_site *site, vk_pipe pipe, const vk_view bufs[],
                         uint32_t n_bufs, uint32_t variant, const void *push,
                         uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz)
{
    vk_plan *pl = &vk->exec.plan;
    /* The dispatch against its kernel's row: a pipeline on the row's axes,
     * the views and push block the row declares. */
    const vk_kernel_def *def = pipe.kernel < KERNEL_COUNT ? &vk_kernel_defs[pipe.kernel] : NULL;
    if (!def || vk_pipe_index(pipe) == UINT32_MAX || n_bufs != def->bufs ||
        push_size != def->push_size) {
        char name[VK_PIPE_NAME_MAX] = "?";
        if (def)
            vk_pipe_name(pipe, name, sizeof name);
        return vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                           "%s: internal error: dispatch of %s (%u.%u.%u.%u) with %u views and "
                           "%u push bytes (its row: %u, %u)",
                           vk->ctx->call, name, pipe.kernel, pipe.tile, pipe.vec, pipe.cls, n_bufs,
                           push_size, def ? def->bufs : 0, def ? def->push_size : 0);
    }
    const vk_kind kind = def->kind;
    /* Descriptors start at multiples of minStorageBufferOffsetAlignment
     * (at most 256): a buffer that starts between two is bound from the
     * one below, and the bytes it is past it go to the shader as byte i % 4
     * of push word i / 4 (the `misalign` words that begin every push block),
     * which only the pipeline variant for misaligned dispatches reads
     * (VK_VARIANT_MISALIGNED; shaders/typed.glsl). */
    const VkDeviceSize align = vk->min_storage_offset_align;
    uint32_t misalign[2] = {0, 0};
    vk_pipe_key key = {.pipe = pipe, .dtypes = vk_view_dtypes(bufs, n_bufs), .variant = variant};
    for (uint32_t i = 0; i < n_bufs && i < VK_MAX_BINDINGS; i++) {
        if (!bufs[i].buf || !bufs[i].buf->buf)
            continue;
        const uint32_t mis = (uint32_t)((bufs[i].buf->offset + bufs[i].offset) % align);
        if (i < VK_MISALIGN_SLOTS)
            misalign[i / 4] |= mis << (8 * (i % 4));
        else if (mis)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                               "%s: internal error: dispatch buffer %u is misaligned",
                               vk->ctx->call, i);
    }
    if (misalign[0] | misalign[1])
        key.variant |= VK_VARIANT_MISALIGNED;
    if (vk->exact_f16_texels)
        key.variant |= VK_VARIANT_EXACT_F16;
    /* A pipeline that does not exist yet is created with the plan's others
     * (vk_exec_end), on several threads. */
    const VkPipeline pipeline = vk_pipeline_find(vk, &key);
    vkmha_status st;
    if ((!pipeline && (st = vk_pipeline_want(vk, &key))) ||
        (st = vk_plan_grow(vk, (void **)&pl->passes, pl->n_passes, &pl->cap_passes,
                        sizeof *pl->passes)))
        return st;
    /* Without push descriptors a recorded dispatch gets a set of its own,
     * kept until vkmha_context_trim: the site's set may be rewritten by a
     * later call while the application's command buffer is pending. */
    vk_site recorded;
    if (!vk->push_descriptors && vk->exec.mode == MODE_RECORD) {
        if ((st = vk_recorded_site(vk, kind, &recorded)))
            return st;
        site = &recorded;
    }
    /* Sites are allocated with their kind by vk_site_pool_create. */
    if (site->kind != kind)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                           "%s: internal error: descriptor site of kind %d used for kind %d",
                           vk->ctx->call, site->kind, kind);
    vk_pass *p = &pl->passes[pl->n_passes];
    *p = (vk_pass){.pipeline = pipeline, .key = key, .kind = kind,
                   .set = site->set,
                   .push_size = push_size, .groups = {gx, gy, gz},
                   .barrier = pl->barrier_next};
    memcpy(p->push, push, push_size);
    memcpy(p->push, misalign, sizeof misalign);
    /* With texel views, a matmul binds A and B twice: as vec4 texel views
     * (0, 1) and as storage buffers (4, 5); the CPU-shaped row kernels add
     * texel views of their inputs after their storage bindings
     * (vk_binding_source). With push descriptors every binding is pushed
     * when the pass is recorded; otherwise only the bindings whose buffer was
     * recreated since the site was last used are rewritten, now (buffer ids
     * are unique per creation, and a texel binding's id also says which
     * view). A texel binding gets the view of its buffer's dtype (key.dtypes)
     * when the pipeline reads views of that kind (float, or the TEXEL_U16
     * variant's uint: vk_texel_u16); otherwise (a buffer of another kind, a
     * wrapped tensor, one under 16 bytes) the record functions never read
     * it, and the dummy's view of the pipeline's kind is bound. */
    const bool u16 = vk_texel_u16(vk, pipe, key.dtypes);
    const uint32_t n_bind = vk_kind_bindings(vk, kind);
    VkWriteDescriptorSet writes[VK_MAX_BINDINGS];
    uint32_t n_writes = 0;
    for (uint32_t i = 0; i < n_bind; i++) {
        const uint32_t src = vk_binding_source(vk, kind, i);
        const bool present = src < n_bufs && bufs[src].buf && bufs[src].buf->buf;
        const vk_buffer *b = present ? bufs[src].buf : &vk->mem.dummy;
        VkDeviceSize at = present ? bufs[src].offset : 0; /* past b->offset */
        const VkDescriptorType type = vk_binding_type(vk, kind, i);
        const bool texel = type == VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
        VkBufferView view = VK_NULL_HANDLE;
        if (texel && !(present && (view = vk_texel_view(&bufs[src], u16)))) {
            b = &vk->mem.dummy;
            view = u16 ? b->view4u : b->view4;
        }
        const uint64_t id = 8 * b->id + (!texel                ? 0
                                         : view == b->view4  ? 1
                                         : view == b->view4h ? 2
                                         : view == b->view4u ? 3
                                                             : 4);
        if (!vk->push_descriptors) {
            if (site->ids[i] == id && site->offsets[i] == at)
                continue;
            site->ids[i] = id;
            site->offsets[i] = at;
        }
        struct vk_pass_binding *w = &p->writes[n_writes];
        *w = (struct vk_pass_binding){.binding = i, .type = type, .view = view};
        if (!texel) {
            /* To the buffer's end, at most maxStorageBufferRange: a buffer
             * past the range is bound in windows its users stay within
             * (vk_record_matmul). */
            const VkDeviceSize start = b->offset + at, mis = start % align,
                               range = mis + b->size - at,
                               most = vk->info.max_storage_buffer_range;
            w->info = (VkDescriptorBufferInfo){b->buf, start - mis, range < most ? range : most};
        }
        writes[n_writes] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = site->set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = type,
            .pBufferInfo = &w->info,
            .pTexelBufferView = &w->view};
        n_writes++;
    }
    if (vk->push_descriptors)
        p->n_writes = n_writes;
    else if (n_writes)
        vk->vkd.vkUpdateDescriptorSets(vk->device, n_writes, writes, 0, NULL);
    pl->n_passes++;
    pl->barrier_next = false;
    return VKMHA_SUCCESS;
}

vkmha_status vk_dispatch_groups(vk_state *vk, vk_site *site, vk_pipe pipe, const vk_view bufs[],
                                uint32_t n_bufs, const void *push, uint32_t push_size,
                                uint32_t base_offset, uint64_t groups)
{
    return vk_dispatch_range(vk, site, pipe, bufs, n_bufs, push, push_size, base_offset, 0,
                             groups);
}

vkmha_status vk_dispatch_range(vk_state *vk, vk_site *site, vk_pipe pipe, const vk_view bufs[],
                               uint32_t n_bufs, const void *push, uint32_t push_size,
                               uint32_t base_offset, uint64_t first, uint64_t groups)
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
    if (groups - first > most)
        vkmha__log(vk->ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
                   "%s: %llu workgroups split into %llu dispatches (maxComputeWorkGroupCount "
                   "%llu x %llu x %llu)",
                   vk->ctx->call, (unsigned long long)(groups - first),
                   (unsigned long long)((groups - first + most - 1) / most), (unsigned long long)mx,
                   (unsigned long long)my, (unsigned long long)mz);
    for (uint64_t done = first; done < groups;) {
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
        if (done > first)
            vk_barrier(vk);
        vkmha_status st = vk_dispatch(vk, site, pipe, bufs, n_bufs, 0, copy, push_size,
                                      (uint32_t)gx, (uint32_t)gy, (uint32_t)gz);
        if (st)
            return st;
        done += gx * gy * gz;
    }
    return VKMHA_SUCCESS;
}
