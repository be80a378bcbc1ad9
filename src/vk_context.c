/* The Vulkan context: creation in order (instance and device from
 * src/vk_instance.c and src/vk_device.c, debug limits, memory types,
 * pipelines, the self-check) and destruction; the Vulkan backend's table
 * (vk_backend_ops), whose other entries are in src/vk_tensor.c,
 * src/vk_mha.c and src/vk_submission.c. */
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Checks desc->vulkan: the borrowed handles all set or all null, the lock
 * callbacks both or neither. */
static vkmha_status check_external(vkmha_context *ctx, const vkmha_context_desc *desc)
{
    const vkmha_vulkan_desc *e = desc->vulkan;
    if (!e)
        return VKMHA_SUCCESS;
    const bool set[4] = {e->instance != VK_NULL_HANDLE, e->physical_device != VK_NULL_HANDLE,
                         e->device != VK_NULL_HANDLE, e->queue != VK_NULL_HANDLE};
    static const char *const names[4] = {"instance", "physical_device", "device", "queue"};
    for (int i = 1; i < 4; i++)
        if (set[i] != set[0])
            return vkmha__fail(ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                               "vkmha_context_create: desc->vulkan->%s is %s but "
                               "desc->vulkan->%s is %s (borrow all four or none)",
                               names[i], set[i] ? "set" : "null", names[0],
                               set[0] ? "set" : "null");
    if (!e->queue_lock != !e->queue_unlock)
        return vkmha__fail(ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           "vkmha_context_create: desc->vulkan->%s is NULL (queue_lock and "
                           "queue_unlock are both set or both NULL)",
                           e->queue_lock ? "queue_unlock" : "queue_lock");
    if (e->enabled_device_extension_count && !e->enabled_device_extensions)
        return vkmha__fail(ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           "vkmha_context_create: desc->vulkan->enabled_device_extensions is "
                           "NULL with a count of %u",
                           e->enabled_device_extension_count);
    if (set[0] && desc->enable_validation)
        return vkmha__fail(ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           "vkmha_context_create: desc->enable_validation is set with a "
                           "borrowed desc->vulkan->instance (its layers are the "
                           "application's choice)");
    return VKMHA_SUCCESS;
}

/* Lowers the limit *have (named desc->debug->`name`) to `want` (0: keep). */
static vkmha_status lower_limit(vk_state *vk, const char *name, uint64_t want, uint64_t *have)
{
    if (want > *have)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           "vkmha_context_create: desc->debug->%s (%llu) is above the "
                           "device's (%llu)",
                           name, (unsigned long long)want, (unsigned long long)*have);
    if (want)
        *have = want;
    return VKMHA_SUCCESS;
}

/* The lowered limits of a vkmha_debug_profile, each applied where the
 * device's own is higher; false for an unknown profile. */
static bool apply_profile(vk_state *vk, uint32_t profile, uint32_t *flags)
{
    vkmha_device_info *info = &vk->info;
    if (profile == VKMHA_DEBUG_PROFILE_NONE)
        return true;
    if (profile != VKMHA_DEBUG_PROFILE_MOBILE)
        return false;
#define LOWER(field, v) (field) = (field) < (v) ? (field) : (v)
    LOWER(info->max_shared_memory, 16384u);
    LOWER(info->max_workgroup_invocations, 128u);
    for (int i = 0; i < 3; i++)
        LOWER(info->max_workgroup_size[i], 128u);
    LOWER(info->max_storage_buffer_range, 128ull << 20);
    LOWER(info->max_allocation_size, 256ull << 20);
#undef LOWER
    *flags |= VKMHA_CONTEXT_NO_SUBGROUP_OPS;
    vk->no_native16 = true;
    vk->debug_no_push = true;
    vk->no_coopmat = true;
    return true;
}

/* desc->debug and VKMHA_PROFILE: lowers the limits in vk->info (which
 * every size and dispatch check reads) and arms the device-allocation
 * failures; *flags gains the profile's context flags. */
static vkmha_status apply_debug(vk_state *vk, const vkmha_debug_options *d, uint32_t *flags)
{
    static const char *const counts[3] = {"max_workgroup_count[0]", "max_workgroup_count[1]",
                                          "max_workgroup_count[2]"};
    static const char *const sizes[3] = {"max_workgroup_size[0]", "max_workgroup_size[1]",
                                         "max_workgroup_size[2]"};
    vkmha_device_info *info = &vk->info;
    vkmha_status st;
    const char *env = getenv("VKMHA_PROFILE");
    if (env && *env && strcmp(env, "none") != 0) {
        if (strcmp(env, "mobile") != 0)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                               "vkmha_context_create: the environment variable VKMHA_PROFILE "
                               "is \"%s\": mobile or none",
                               env);
        apply_profile(vk, VKMHA_DEBUG_PROFILE_MOBILE, flags);
    }
    if (!d)
        return VKMHA_SUCCESS;
    if (!apply_profile(vk, d->profile, flags))
        return vkmha__fail(vk->ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           "vkmha_context_create: desc->debug->profile (%u) is not a "
                           "vkmha_debug_profile",
                           d->profile);
    vk->debug_no_push |= d->no_push_descriptors;
    uint64_t inv = info->max_workgroup_invocations;
    if ((st = lower_limit(vk, "max_workgroup_invocations", d->max_workgroup_invocations, &inv)))
        return st;
    info->max_workgroup_invocations = (uint32_t)inv;
    for (int i = 0; i < 3; i++) {
        uint64_t size = info->max_workgroup_size[i];
        if ((st = lower_limit(vk, sizes[i], d->max_workgroup_size[i], &size)))
            return st;
        info->max_workgroup_size[i] = (uint32_t)size;
    }
    for (int i = 0; i < 3; i++) {
        uint64_t count = info->max_workgroup_count[i];
        if ((st = lower_limit(vk, counts[i], d->max_workgroup_count[i], &count)))
            return st;
        info->max_workgroup_count[i] = (uint32_t)count;
    }
    if ((st = lower_limit(vk, "max_storage_buffer_range", d->max_storage_buffer_range,
                          &info->max_storage_buffer_range)) ||
        (st = lower_limit(vk, "max_allocation_size", d->max_allocation_size,
                          &info->max_allocation_size)))
        return st;
    if ((st = lower_limit(vk, "max_device_local_memory", d->max_device_local_memory,
                          &info->device_local_memory)))
        return st;
    for (uint32_t i = 0; i < vk->mem_props.memoryHeapCount; i++) {
        VkMemoryHeap *h = &vk->mem_props.memoryHeaps[i];
        if ((h->flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && h->size > info->device_local_memory)
            h->size = info->device_local_memory;
    }
    uint64_t shared = info->max_shared_memory, storage = info->max_storage_buffers_per_stage;
    if ((st = lower_limit(vk, "max_shared_memory", d->max_shared_memory, &shared)) ||
        (st = lower_limit(vk, "max_storage_buffers_per_stage", d->max_storage_buffers_per_stage,
                          &storage)))
        return st;
    info->max_shared_memory = (uint32_t)shared;
    info->max_storage_buffers_per_stage = (uint32_t)storage;
    if ((unsigned)d->fused_kernel > VKMHA_FUSED_KERNEL_COOPERATIVE)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           "vkmha_context_create: desc->debug->fused_kernel (%d) is not a "
                           "vkmha_fused_kernel",
                           (int)d->fused_kernel);
    vk->no_native16 |= d->no_native_16bit;
    vk->no_sparse |= d->no_sparse_binding;
    if (d->fail_device_allocation_at) {
        uint64_t count = d->fail_device_allocation_count ? d->fail_device_allocation_count : 1;
        vk->mem.fail_alloc_first = d->fail_device_allocation_at;
        vk->mem.fail_alloc_last = count - 1 > UINT64_MAX - vk->mem.fail_alloc_first
                                  ? UINT64_MAX
                                  : vk->mem.fail_alloc_first + (count - 1);
    }
    return VKMHA_SUCCESS;
}

/* Driver bugs that abort the process (nothing the self-check can catch,
 * since it runs in the process): each avoided on exactly the drivers that
 * have it, with an INFO message naming it (docs/RELIABILITY.md). */
static void driver_workarounds(vk_state *vk)
{
#if defined(__aarch64__)
    /* lavapipe on 64-bit ARM with LLVM 15 (Debian 12's arm64 Mesa 22.3):
     * AArch64 instruction selection aborts compiling (1) any kernel that
     * widens 16-bit storage to fp32 ("LLVM ERROR: Cannot select: v4f32 =
     * fp_extend v4i16"; a 1 x 1 x 1 fp16 matmul is enough, on every matmul
     * tile), and (2) unpackHalf2x16 on the CPU kernels' packed texels
     * ("v4f32 = AArch64ISD::VLSHR ..."; an fp16 matmul with op T and k a
     * multiple of 4). It compiles the packed 16-bit path (two values per
     * 32-bit word, as on devices without 16-bit storage) with the texels
     * widened by integer operations (VK_VARIANT_EXACT_F16: 1.4-2x slower
     * fp16 products on x86 lavapipe, so there only). LLVM 15 is the one
     * seen; older ones are taken as no better. */
    unsigned llvm = 0;
    const char *at = strstr(vk->info.name, "(LLVM ");
    if (!vk->no_native16 && strncmp(vk->info.name, "llvmpipe", 8) == 0 && at &&
        sscanf(at, "(LLVM %u", &llvm) == 1 && llvm <= 15) {
        vk->no_native16 = vk->exact_f16_texels = true;
        vkmha__log(vk->ctx, VKMHA_LOG_INFO, VKMHA_SUCCESS,
                   "vkmha_context_create: %s on 64-bit ARM: 16-bit data is packed two per "
                   "word and fp16 widened with integer operations (this LLVM aborts compiling "
                   "fp16 -> fp32 conversions; docs/RELIABILITY.md)",
                   vk->info.name);
    }
#else
    (void)vk;
#endif
}

vkmha_status vk_create(vkmha_context *ctx, const vkmha_context_desc *desc, bool compile_only)
{
    vkmha_status st;
    const vkmha_vulkan_desc *ext = desc->vulkan;
    if ((st = check_external(ctx, desc)))
        return st;
    vk_state *vk = vkmha__calloc(ctx, 1, sizeof *vk);
    if (!vk)
        return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                           "vkmha_context_create: out of host memory");
    vk->ctx = ctx;
    ctx->vk = vk;
    vk->compile_only = compile_only;
    vk->mem.scratch_budget = desc->scratch_budget;
    if (ext) {
        vk->vkalloc = ext->allocation_callbacks;
        vk->queue_lock = ext->queue_lock;
        vk->queue_unlock = ext->queue_unlock;
        vk->queue_lock_user = ext->queue_lock_user;
    }
    if ((st = vk_load_globals(vk, ext ? ext->get_instance_proc_addr : NULL)))
        return st;
    if (ext && ext->device)
        st = vk_borrow_device(vk, ext);
    else if (!(st = vk_create_instance(vk, ctx, desc->enable_validation)))
        st = vk_pick_device(vk, desc);
    uint32_t flags = desc->flags;
    if (!st)
        driver_workarounds(vk);
    if (st || (st = apply_debug(vk, desc->debug, &flags)) || (st = vk_create_device(vk, ext)))
        return st; /* the caller destroys the partial state */
    const vk_tuning_desc tuning = {
        .tile = desc->matmul_tile,
        .no_subgroup_ops = (flags & VKMHA_CONTEXT_NO_SUBGROUP_OPS) != 0,
        .fused_kernel = desc->debug ? desc->debug->fused_kernel : VKMHA_FUSED_KERNEL_AUTO};
    if (compile_only) { /* the same choices, then pipelines only: no memory, no cache */
        if ((st = vk_pipelines_init(vk, &tuning)))
            return st;
        return desc->flags & VKMHA_CONTEXT_EAGER_PIPELINES ? vk_pipelines_create_all(vk)
                                                          : VKMHA_SUCCESS;
    }
    if ((st = vk_choose_memory_types(vk)))
        return st;
    if ((desc->flags & VKMHA_CONTEXT_PROFILE) && (st = vk_create_timestamps(vk)))
        return st;
    vk->single_thread = (desc->flags & VKMHA_CONTEXT_SINGLE_THREAD) != 0;
    if ((st = vk_pipeline_cache_init(vk, desc)) ||
        (st = vk_pipelines_init(vk, &tuning)))
        return st;
    if ((st = vk_buffer_create(vk, 16, false, false, "placeholder", &vk->mem.dummy)))
        return st;
    /* The self-check: each path before its first use, or (with
     * EAGER_PIPELINES: nothing left for later calls) all of them now. Its
     * canaries run through the ops' own entry points. */
    const char *call = ctx->call;
    ctx->call = "vkmha_context_create";
    st = vk_self_check(vk, !(desc->flags & VKMHA_CONTEXT_NO_SELF_CHECK),
                       (desc->flags & VKMHA_CONTEXT_EAGER_PIPELINES) != 0,
                       desc->debug ? desc->debug->self_check_break : 0);
    ctx->call = call;
    if (st)
        return st;
    if ((desc->flags & VKMHA_CONTEXT_EAGER_PIPELINES) && (st = vk_pipelines_create_all(vk)))
        return st;
    return VKMHA_SUCCESS;
}

void vk_destroy(vk_state *vk)
{
    if (!vk)
        return;
    if (vk->device) {
        /* A borrowed device may be busy with the application's work: wait
         * only for vkmha's own (the application finished the command
         * buffers it recorded vkmha's work into, as documented). */
        if (vk->external)
            vk_wait_submissions(vk);
        else if (!vk->compile_only) /* it never ran anything, and may not be able to wait */
            vk->vkd.vkDeviceWaitIdle(vk->device);
        vk_submissions_destroy(vk);
        vk_release_recorded_sets(vk);
        vk_memory_destroy(vk);
        vk_pipelines_destroy(vk);
        vk_pipeline_cache_destroy(vk);
        if (vk->fence)
            vk->vkd.vkDestroyFence(vk->device, vk->fence, vk->vkalloc);
        if (vk->timestamps)
            vk->vkd.vkDestroyQueryPool(vk->device, vk->timestamps, vk->vkalloc);
        if (vk->cmd_pool)
            vk->vkd.vkDestroyCommandPool(vk->device, vk->cmd_pool, vk->vkalloc);
        if (!vk->external)
            vk->vkd.vkDestroyDevice(vk->device, vk->vkalloc);
    }
    if (!vk->external) {
        if (vk->messenger)
            vk->vki.DestroyDebugUtilsMessengerEXT(vk->instance, vk->messenger, vk->vkalloc);
        if (vk->instance)
            vk->vki.DestroyInstance(vk->instance, vk->vkalloc);
    }
    vk_exec_destroy(vk);
    vkmha__free(vk->ctx, vk);
}

static void ctx_info(const vkmha_context *ctx, vkmha_context_info *out)
{
    const vk_state *vk = ctx->vk;
    out->device = vk->info;
    out->device_index = vk->device_index;
    out->validation_enabled = vk->validation;
    out->validation_messages = vk->validation_messages;
    out->subgroup_ops_used = vk->tuning.use_subgroup;
    out->device_memory_bytes = vk->mem.memory_bytes;
    out->device_memory_peak_bytes = vk->mem.memory_peak_bytes;
    out->gpu_timing = vk->timestamps != VK_NULL_HANDLE;
    out->last_gpu_time_ns = vk->last_gpu_time_ns;
    out->external_device = vk->external;
    out->push_descriptors = vk->push_descriptors;
    out->disabled_paths = vk->tuning.disabled_paths;
    out->self_check_us = vk->check.us;
    out->pipeline_cache_loaded = vk->cache.loaded;
    out->pipeline_cache_bytes = vk->cache.bytes;
    out->pipelines_created = vk->pipelines.created;
    out->scratch_bytes = vk_scratch_bytes(vk);
    out->scratch_budget = vk->mem.scratch_budget;
    out->native_16bit_storage = vk->tuning.native16;
    out->sparse_tensors = vk_sparse_tensors(vk);
    out->max_tensor_bytes = vk_max_tensor_bytes(vk);
    out->matrix_shape_count = vk->n_matrix_shapes;
    memcpy(out->matrix_shapes, vk->matrix_shapes, sizeof out->matrix_shapes);
    out->cooperative_matrix = vk->coopmat;
    out->cooperative_matrix2 = vk->coopmat2;
    for (uint32_t i = 0; vk->coopmat2 && i < vk->n_cm2_shapes &&
                         i < VKMHA_ARRAY_LEN(out->matrix2_workgroup_sizes);
         i++)
        out->matrix2_workgroup_sizes[i] = vk->cm2_shapes[i].workgroup_size;
    out->submissions_created = vk->sub.created;
}

/* ---- the Vulkan backend's table (vkmha_backend_ops) ------------------------- */

static void ctx_destroy(vkmha_context *ctx)
{
    vk_destroy(ctx->vk);
}

static vkmha_status ctx_trim(vkmha_context *ctx)
{
    vkmha_status st;
    vk_state *vk = ctx->vk;
    if ((st = vk_wait_submissions(vk)))
        return st;
    vk_release_recorded_sets(vk);
    vk_memory_trim(vk);
    return VKMHA_SUCCESS;
}

/* vkmha_context_get_profile: the last profiled call's steps
 * (src/vk_command.c's profile_record). */
static void vk_profile(const vkmha_context *ctx, uint32_t *count, vkmha_profile_step *out)
{
    const vk_state *vk = ctx->vk;
    for (uint32_t i = 0; i < *count && i < vk->profile_steps; i++)
        out[i] = vk->profile[i];
    *count = vk->profile_steps;
}

const vkmha_backend_ops vk_backend_ops = {
    .create = vk_create,
    .destroy = ctx_destroy,
    .trim = ctx_trim,
    .info = ctx_info,
    .kernels = vk_kernels,
    .profile = vk_profile,
    .pipeline_cache = vk_pipeline_cache_get,
    .pipeline_cache_path = vk_pipeline_cache_path,
    .no_commands = NULL, /* records with push descriptors or with sets of its own */
    .matmul = vk_op_matmul,
    .softmax = vk_op_softmax,
    .heads = vk_op_heads,
    .attention = vk_op_attention,
    .tensor_size = sizeof(vk_tensor),
    .tensor_alloc = vk_tensor_alloc,
    .tensor_wrap = vk_tensor_wrap,
    .tensor_free = vk_tensor_free,
    .tensor_copy = vk_tensor_copy,
    .mha_size = sizeof(vk_mha),
    .mha_weights = vk_mha_weights,
    .mha_free = vk_mha_free,
    .mha_forward = vk_mha_forward,
    .kv_size = sizeof(vk_kv),
    .kv_create = vk_kv_create,
    .kv_free = vk_kv_free,
    .kv_clear = vk_kv_clear,
    .kv_reorder = vk_kv_reorder,
    .parts_open = vk_parts_open,
    .parts_close = vk_parts_close,
    .submission_wait = vk_submission_wait_op,
    .submission_poll = vk_submission_poll_op,
    .submission_free = vk_submission_free_op,
};
