/* Descriptor-set and pipeline layouts (one per kind: src/vk_kernels.c), the
 * descriptor sites calls bind their dispatches' buffers at (the context's
 * own, each layer's, the windows' past maxStorageBufferRange), and the sets
 * of dispatches recorded into the application's command buffers. */
#include "vk_resources.h"

#include <string.h>

vkmha_status vk_descriptors_init(vk_state *vk)
{
    VkResult r;
    vkmha_status st;
    for (int k = 0; k < KIND_COUNT; k++) {
        if (vk->tuning.unfit_kinds >> k & 1)
            continue; /* past maxPerStageDescriptorStorageBuffers: its kernels are not used */
        VkDescriptorSetLayoutBinding b[VK_MAX_BINDINGS];
        const uint32_t nb = vk_kind_bindings(vk, (vk_kind)k);
        for (uint32_t i = 0; i < nb; i++)
            b[i] = (VkDescriptorSetLayoutBinding){i, vk_binding_type(vk, (vk_kind)k, i), 1,
                                                  VK_SHADER_STAGE_COMPUTE_BIT, NULL};
        VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
        li.flags = vk->push_descriptors ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0;
        li.bindingCount = nb;
        li.pBindings = b;
        if ((r = vk->vkd.vkCreateDescriptorSetLayout(vk->device, &li, vk->vkalloc,
                                                     &vk->desc.set_layouts[k])) != VK_SUCCESS)
            return vk_fail(vk, r, "vkCreateDescriptorSetLayout");
        VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_BYTES};
        VkPipelineLayoutCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
        pi.setLayoutCount = 1;
        pi.pSetLayouts = &vk->desc.set_layouts[k];
        pi.pushConstantRangeCount = 1;
        pi.pPushConstantRanges = &range;
        if ((r = vk->vkd.vkCreatePipelineLayout(vk->device, &pi, vk->vkalloc, &vk->desc.pipe_layouts[k])) !=
            VK_SUCCESS)
            return vk_fail(vk, r, "vkCreatePipelineLayout");
    }
    vk_kind op_kinds[OPSITE_COUNT] = {[OPSITE_MATMUL] = KIND_MATMUL,
                                      [OPSITE_SOFTMAX] = KIND_SOFTMAX,
                                      [OPSITE_HEADS] = KIND_HEADS,
                                      [OPSITE_LAYERNORM] = KIND_LAYERNORM};
    memcpy(&op_kinds[OPSITE_ATTENTION], vk_attention_site_kinds, sizeof vk_attention_site_kinds);
    if ((st = vk_site_pool_create(vk, op_kinds, OPSITE_COUNT, &vk->desc.op_sites)))
        return st;
    return VKMHA_SUCCESS;
}

vkmha_status vk_window_sites_reserve(vk_state *vk, vk_kind kind, uint64_t n)
{
    vk_site_pool *pool = &vk->desc.window_sites[kind];
    const uint64_t extra = vk->desc.window_reserved[kind] += n;
    if (extra <= pool->count)
        return VKMHA_SUCCESS;
    if (extra > 4096)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: %llu windows of maxStorageBufferRange in one call (at most 4097)",
                           vk->ctx->call, (unsigned long long)extra + 1);
    vk_kind *kinds = vkmha__alloc(vk->ctx, (size_t)extra * sizeof *kinds);
    if (!kinds)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk->ctx->call);
    for (uint64_t i = 0; i < extra; i++)
        kinds[i] = kind;
    vk_site_pool grown;
    vkmha_status st = vk_site_pool_create(vk, kinds, (uint32_t)extra, &grown);
    vkmha__free(vk->ctx, kinds);
    /* No plan refers to the old sets (outside plans); a pending submission
     * may, without push descriptors (as vk_exec_begin waits for). */
    if (!st && !vk->push_descriptors && pool->count && (st = vk_wait_submissions(vk)))
        vk_site_pool_destroy(vk, &grown);
    if (st)
        return st;
    vk_site_pool_destroy(vk, pool);
    *pool = grown;
    return VKMHA_SUCCESS;
}

void vk_window_sites_begin(vk_state *vk)
{
    memset(vk->desc.window_next, 0, sizeof vk->desc.window_next);
}

void vk_window_sites_end(vk_state *vk)
{
    memset(vk->desc.window_reserved, 0, sizeof vk->desc.window_reserved);
}

vk_site *vk_window_sites_take(vk_state *vk, vk_kind kind, uint64_t n)
{
    /* n >= 1: the caller has sites after a first one to take. */
    const uint64_t first = vk->desc.window_next[kind];
    if (first + n > vk->desc.window_sites[kind].count) {
        vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                    "%s: internal error: %llu window sites wanted from %llu, %u ensured",
                    vk->ctx->call, (unsigned long long)n, (unsigned long long)first,
                    vk->desc.window_sites[kind].count);
        return NULL;
    }
    vk->desc.window_next[kind] += (uint32_t)n;
    return vk->desc.window_sites[kind].sites + first;
}

void vk_descriptors_destroy(vk_state *vk)
{
    vk_site_pool_destroy(vk, &vk->desc.op_sites);
    for (int k = 0; k < KIND_COUNT; k++)
        vk_site_pool_destroy(vk, &vk->desc.window_sites[k]);
    for (int k = 0; k < KIND_COUNT; k++) {
        if (vk->desc.pipe_layouts[k])
            vk->vkd.vkDestroyPipelineLayout(vk->device, vk->desc.pipe_layouts[k], vk->vkalloc);
        if (vk->desc.set_layouts[k])
            vk->vkd.vkDestroyDescriptorSetLayout(vk->device, vk->desc.set_layouts[k], vk->vkalloc);
    }
}

/* Sets per pool of recorded dispatches' descriptor sets. */
#define RECORDED_SETS_PER_POOL 64

/* A descriptor pool for `count` sets of any kind. */
static VkResult create_set_pool(vk_state *vk, uint32_t count, VkDescriptorPool *out)
{
    VkDescriptorPoolSize sizes[2] = {
        {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, count * VK_MAX_BINDINGS},
        {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, count * VK_MAX_TEXEL_BINDINGS}};
    VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pi.maxSets = count;
    pi.poolSizeCount = 2; /* texel buffers: the register matmul and flash_cpu.comp */
    pi.pPoolSizes = sizes;
    return vk->vkd.vkCreateDescriptorPool(vk->device, &pi, vk->vkalloc, out);
}

vkmha_status vk_recorded_site(vk_state *vk, vk_kind kind, vk_site *out)
{
    memset(out, 0xff, sizeof *out); /* no binding cached: every one is written */
    out->kind = kind;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &vk->desc.set_layouts[kind];
    VkResult r = VK_ERROR_OUT_OF_POOL_MEMORY;
    if (vk->desc.n_rec_pools) {
        ai.descriptorPool = vk->desc.rec_pools[vk->desc.n_rec_pools - 1];
        r = vk->vkd.vkAllocateDescriptorSets(vk->device, &ai, &out->set);
    }
    if (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL) {
        /* The last pool is full: a new one. */
        VkDescriptorPool *p = vkmha__realloc(vk->ctx, vk->desc.rec_pools,
                                             vk->desc.n_rec_pools * sizeof *p,
                                             (vk->desc.n_rec_pools + 1) * sizeof *p);
        if (!p)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               "%s: out of host memory", vk->ctx->call);
        vk->desc.rec_pools = p;
        if ((r = create_set_pool(vk, RECORDED_SETS_PER_POOL, &p[vk->desc.n_rec_pools])) !=
            VK_SUCCESS)
            return vk_fail(vk, r, "vkCreateDescriptorPool");
        ai.descriptorPool = p[vk->desc.n_rec_pools++];
        r = vk->vkd.vkAllocateDescriptorSets(vk->device, &ai, &out->set);
    }
    return r == VK_SUCCESS ? VKMHA_SUCCESS : vk_fail(vk, r, "vkAllocateDescriptorSets");
}

void vk_release_recorded_sets(vk_state *vk)
{
    for (uint32_t i = 0; i < vk->desc.n_rec_pools; i++)
        vk->vkd.vkDestroyDescriptorPool(vk->device, vk->desc.rec_pools[i], vk->vkalloc);
    vkmha__free(vk->ctx, vk->desc.rec_pools);
    vk->desc.rec_pools = NULL;
    vk->desc.n_rec_pools = 0;
}

vkmha_status vk_site_pool_create(vk_state *vk, const vk_kind *kinds, uint32_t count,
                                 vk_site_pool *out)
{
    VkResult r;
    vk_site_pool p = {0};
    p.sites = vkmha__calloc(vk->ctx, count, sizeof *p.sites);
    if (!p.sites)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk->ctx->call);
    p.count = count;
    for (uint32_t i = 0; i < count; i++)
        p.sites[i].kind = kinds[i];
    if (vk->push_descriptors) { /* no sets: descriptors go into the command buffer */
        *out = p;
        return VKMHA_SUCCESS;
    }
    if ((r = create_set_pool(vk, count, &p.pool)) != VK_SUCCESS) {
        vkmha__free(vk->ctx, p.sites);
        return vk_fail(vk, r, "vkCreateDescriptorPool");
    }
    for (uint32_t i = 0; i < count; i++) {
        if (!vk->desc.set_layouts[kinds[i]])
            continue; /* a kind not used on this device (vk_tuning.unfit_kinds) */
        VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
        ai.descriptorPool = p.pool;
        ai.descriptorSetCount = 1;
        ai.pSetLayouts = &vk->desc.set_layouts[kinds[i]];
        if ((r = vk->vkd.vkAllocateDescriptorSets(vk->device, &ai, &p.sites[i].set)) !=
            VK_SUCCESS) {
            vk_site_pool_destroy(vk, &p);
            return vk_fail(vk, r, "vkAllocateDescriptorSets");
        }
    }
    *out = p;
    return VKMHA_SUCCESS;
}

void vk_site_pool_destroy(vk_state *vk, vk_site_pool *p)
{
    if (p->pool)
        vk->vkd.vkDestroyDescriptorPool(vk->device, p->pool, vk->vkalloc); /* frees the sets */
    vkmha__free(vk->ctx, p->sites);
    memset(p, 0, sizeof *p);
}

