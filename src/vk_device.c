/* The physical device and the device: choice (or the application's, borrowed),
 * its information and limits (vkmha_device_info, vkmha_enumerate_devices),
 * memory types, sparse binding, the queue, the timestamps. */
#include "vk_resources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int device_has_extension(const vkmha_context *ctx, const vk_instance_table *vki,
                                VkPhysicalDevice phys, const char *name)
{
    uint32_t n = 0;
    int found = 0;
    if (vki->EnumerateDeviceExtensionProperties(phys, NULL, &n, NULL) != VK_SUCCESS || !n)
        return false;
    VkExtensionProperties *props = vkmha__alloc(ctx, n * sizeof *props);
    if (!props)
        return -1;
    if (vki->EnumerateDeviceExtensionProperties(phys, NULL, &n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(props[i].extensionName, name) == 0;
    vkmha__free(ctx, props);
    return found;
}

/* A queue family with compute: a compute-only one if there is one (it runs
 * beside an engine's graphics work), else the first. UINT32_MAX if none. */
static uint32_t pick_queue_family(const vk_instance_table *vki, VkPhysicalDevice phys)
{
    VkQueueFamilyProperties props[32];
    uint32_t n = VKMHA_ARRAY_LEN(props), best = UINT32_MAX;
    vki->GetPhysicalDeviceQueueFamilyProperties(phys, &n, props);
    for (uint32_t i = 0; i < n; i++) {
        if (!(props[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || props[i].queueCount == 0)
            continue;
        if (!(props[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
            return i;
        if (best == UINT32_MAX)
            best = i;
    }
    return best;
}

static void copy_string(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

/* Fills the device's vkmha_device_info (memory properties into mp). */
static void fill_info(const vkmha_context *ctx, const vk_instance_table *vki,
                      VkPhysicalDevice phys, vkmha_device_info *info,
                      VkPhysicalDeviceMemoryProperties *mp)
{
    VkPhysicalDeviceProperties base;
    memset(info, 0, sizeof *info);
    vki->GetPhysicalDeviceProperties(phys, &base);

    VkPhysicalDeviceSubgroupProperties sub = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    bool has_driver = base.apiVersion >= VK_API_VERSION_1_2 ||
                      device_has_extension(ctx, vki, phys, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME) > 0;
    bool v11 = base.apiVersion >= VK_API_VERSION_1_1 && vki->GetPhysicalDeviceProperties2;
    p2.pNext = &sub;
    sub.pNext = &m3;
    m3.pNext = &id;
    id.pNext = has_driver ? &drv : NULL;
    if (v11)
        vki->GetPhysicalDeviceProperties2(phys, &p2);
    else
        p2.properties = base;
    const VkPhysicalDeviceLimits *lim = &p2.properties.limits;

    copy_string(info->name, sizeof info->name, p2.properties.deviceName);
    switch (p2.properties.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        info->type = VKMHA_DEVICE_TYPE_INTEGRATED_GPU;
        break;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        info->type = VKMHA_DEVICE_TYPE_DISCRETE_GPU;
        break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        info->type = VKMHA_DEVICE_TYPE_VIRTUAL_GPU;
        break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        info->type = VKMHA_DEVICE_TYPE_CPU;
        break;
    default:
        info->type = VKMHA_DEVICE_TYPE_OTHER;
        break;
    }
    info->vendor_id = p2.properties.vendorID;
    info->device_id = p2.properties.deviceID;
    info->api_version = p2.properties.apiVersion;
    info->driver_version = p2.properties.driverVersion;
    if (v11 && has_driver) {
        copy_string(info->driver_name, sizeof info->driver_name, drv.driverName);
        copy_string(info->driver_info, sizeof info->driver_info, drv.driverInfo);
    }
    if (v11)
        memcpy(info->device_uuid, id.deviceUUID, sizeof info->device_uuid);
    info->has_compute_queue = pick_queue_family(vki, phys) != UINT32_MAX;
    info->subgroup_size = v11 ? sub.subgroupSize : 1;
    info->subgroup_arithmetic =
        v11 && (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
        (sub.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) &&
        (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    for (int i = 0; i < 3; i++) {
        info->max_workgroup_count[i] = lim->maxComputeWorkGroupCount[i];
        info->max_workgroup_size[i] = lim->maxComputeWorkGroupSize[i];
    }
    info->max_workgroup_invocations = lim->maxComputeWorkGroupInvocations;
    info->max_shared_memory = lim->maxComputeSharedMemorySize;
    info->max_storage_buffer_range = lim->maxStorageBufferRange;
    /* Vulkan 1.1 guarantees at least 1 GiB when the property is absent. */
    info->max_allocation_size = v11 ? m3.maxMemoryAllocationSize : (1ull << 30);
    info->timestamp_period = lim->timestampPeriod;
    info->max_storage_buffers_per_stage = lim->maxPerStageDescriptorStorageBuffers;

    vki->GetPhysicalDeviceMemoryProperties(phys, mp);
    for (uint32_t i = 0; i < mp->memoryHeapCount; i++)
        if ((mp->memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
            mp->memoryHeaps[i].size > info->device_local_memory)
            info->device_local_memory = mp->memoryHeaps[i].size;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        const VkMemoryPropertyFlags uma = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                          VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                          VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
        if ((f & uma) == uma)
            info->unified_memory = true;
    }
}

static int type_rank(vkmha_device_type t)
{
    switch (t) {
    case VKMHA_DEVICE_TYPE_DISCRETE_GPU:
        return 0;
    case VKMHA_DEVICE_TYPE_INTEGRATED_GPU:
        return 1;
    case VKMHA_DEVICE_TYPE_VIRTUAL_GPU:
        return 2;
    case VKMHA_DEVICE_TYPE_CPU:
        return 3;
    default:
        return 4;
    }
}

/* Reads the chosen physical device's properties and limits. */
static void adopt_physical_device(vk_state *vk)
{
    fill_info(vk->ctx, &vk->vki, vk->phys, &vk->info, &vk->mem_props);
    VkPhysicalDeviceProperties props;
    vk->vki.GetPhysicalDeviceProperties(vk->phys, &props);
    vk->non_coherent_atom = props.limits.nonCoherentAtomSize;
    vk->max_texel_elements = props.limits.maxTexelBufferElements;
    vk->min_storage_offset_align = props.limits.minStorageBufferOffsetAlignment;
}

vkmha_status vk_pick_device(vk_state *vk, const vkmha_context_desc *desc)
{
    vkmha_context *ctx = vk->ctx;
    VkPhysicalDevice devs[16];
    uint32_t n = VKMHA_ARRAY_LEN(devs);
    VkResult r = vk->vki.EnumeratePhysicalDevices(vk->instance, &n, devs);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return vk_fail(vk, r, "vkmha_context_create: vkEnumeratePhysicalDevices");
    if (n == 0) {
        char hint[512];
        vk_no_driver_hint(hint, sizeof hint);
        return vkmha__fail(ctx, VKMHA_ERROR_NO_DEVICE, "vkmha_context_create: no Vulkan device: %s",
                           hint);
    }
    int best = -1, best_rank = 99;
    for (uint32_t i = 0; i < n; i++) {
        vkmha_device_info info;
        VkPhysicalDeviceMemoryProperties mp;
        fill_info(ctx, &vk->vki, devs[i], &info, &mp);
        bool usable = info.has_compute_queue && info.api_version >= VK_API_VERSION_1_1;
        if (desc->use_device_index) {
            if (i != desc->device_index)
                continue;
            if (!usable)
                return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                                   "vkmha_context_create: device %u (%s) has %s", i, info.name,
                                   info.has_compute_queue ? "only Vulkan 1.0 (1.1 is needed)"
                                                          : "no compute queue");
            best = (int)i;
            break;
        }
        if (usable && type_rank(info.type) < best_rank) {
            best = (int)i;
            best_rank = type_rank(info.type);
        }
    }
    if (best < 0)
        return desc->use_device_index
                   ? vkmha__fail(ctx, VKMHA_ERROR_NO_DEVICE,
                                 "vkmha_context_create: desc->device_index (%u) is not below "
                                 "the device count (%u)",
                                 desc->device_index, n)
                   : vkmha__fail(ctx, VKMHA_ERROR_NO_DEVICE,
                                 "vkmha_context_create: no Vulkan 1.1 device with a compute "
                                 "queue among %u devices",
                                 n);
    vk->phys = devs[best];
    vk->device_index = (uint32_t)best;
    adopt_physical_device(vk);
    vk->queue_family = pick_queue_family(&vk->vki, vk->phys);
    return VKMHA_SUCCESS;
}

/* The application's instance, physical device, device and queue
 * (vkmha_vulkan_desc): checked, never owned. */
vkmha_status vk_borrow_device(vk_state *vk, const vkmha_vulkan_desc *ext)
{
    vkmha_context *ctx = vk->ctx;
    const uint32_t api = ext->instance_api_version ? ext->instance_api_version
                                                   : VK_API_VERSION_1_1;
    if (api < VK_API_VERSION_1_1)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_context_create: desc->vulkan->instance_api_version is "
                           "%u.%u; vkmha needs an instance of Vulkan 1.1 or later",
                           VK_API_VERSION_MAJOR(api), VK_API_VERSION_MINOR(api));
    vk->external = true;
    vk->instance = ext->instance;
    vk_load_instance_table(vk->vkg.GetInstanceProcAddr, vk->instance, &vk->vki);
    if (!vk->vki.GetPhysicalDeviceProperties || !vk->vki.GetDeviceProcAddr ||
        !vk->vki.GetPhysicalDeviceProperties2)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_context_create: desc->vulkan->instance has no %s",
                           !vk->vki.GetPhysicalDeviceProperties2
                               ? "vkGetPhysicalDeviceProperties2 (Vulkan 1.1)"
                               : "vkGetPhysicalDeviceProperties / vkGetDeviceProcAddr");
    vk->phys = ext->physical_device;
    vk->device_index = UINT32_MAX; /* not chosen by index */
    VkPhysicalDevice devs[16];
    uint32_t n = VKMHA_ARRAY_LEN(devs);
    VkResult r = vk->vki.EnumeratePhysicalDevices(vk->instance, &n, devs);
    if (r == VK_SUCCESS || r == VK_INCOMPLETE)
        for (uint32_t i = 0; i < n; i++)
            if (devs[i] == vk->phys)
                vk->device_index = i;
    adopt_physical_device(vk);
    if (vk->info.api_version < VK_API_VERSION_1_1)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_context_create: desc->vulkan->physical_device (%s) supports "
                           "only Vulkan 1.0; vkmha needs 1.1",
                           vk->info.name);
    VkQueueFamilyProperties props[32];
    uint32_t nq = VKMHA_ARRAY_LEN(props);
    vk->vki.GetPhysicalDeviceQueueFamilyProperties(vk->phys, &nq, props);
    if (ext->queue_family_index >= nq)
        return vkmha__fail(ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           "vkmha_context_create: desc->vulkan->queue_family_index (%u) is "
                           "not below the device's %u queue families",
                           ext->queue_family_index, nq);
    if (!(props[ext->queue_family_index].queueFlags & VK_QUEUE_COMPUTE_BIT))
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_context_create: desc->vulkan->queue_family_index (%u) has "
                           "no compute (VK_QUEUE_COMPUTE_BIT)",
                           ext->queue_family_index);
    vk->queue_family = ext->queue_family_index;
    return VKMHA_SUCCESS;
}

vkmha_status vk_choose_memory_types(vk_state *vk)
{
    /* A probe buffer tells which memory types storage buffers may use. */
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = 256;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    VkBuffer probe;
    VkResult r = vk->vkd.vkCreateBuffer(vk->device, &bi, vk->vkalloc, &probe);
    if (r != VK_SUCCESS)
        return vk_fail(vk, r, "vkmha_context_create: vkCreateBuffer");
    VkMemoryRequirements req;
    vk->vkd.vkGetBufferMemoryRequirements(vk->device, probe, &req);
    vk->vkd.vkDestroyBuffer(vk->device, probe, vk->vkalloc);

    const VkMemoryPropertyFlags dl = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                                hc = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                cached = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    /* Unified memory (CPU devices, integrated and mobile GPUs): device-local,
     * host-visible and cached memory is read and written in place, with no
     * staging copies. Uncached device-local host-visible memory (a discrete
     * GPU's BAR) is not used this way: reading it back is very slow. */
    int t = vk_find_memory_type(&vk->mem_props, req.memoryTypeBits, dl | hv | cached, hc);
    vk->work_mapped = t >= 0;
    if (t < 0)
        t = vk_find_memory_type(&vk->mem_props, req.memoryTypeBits, dl, 0);
    if (t < 0)
        t = vk_find_memory_type(&vk->mem_props, req.memoryTypeBits, 0, 0);
    int up = vk_find_memory_type(&vk->mem_props, req.memoryTypeBits, hv, hc);
    int down = vk_find_memory_type(&vk->mem_props, req.memoryTypeBits, hv, cached | hc);
    if (t < 0 || up < 0 || down < 0)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_context_create: no usable memory type for storage buffers");
    vk->mt_work = (uint32_t)t;
    vk->mt_upload = (uint32_t)up;
    vk->mt_download = (uint32_t)down;
    vk->info.unified_memory = vk->work_mapped;
    return VKMHA_SUCCESS;
}

static bool listed(const char *const *names, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (names && names[i] && strcmp(names[i], name) == 0)
            return true;
    return false;
}

/* The properties of the queue family `family` of vk->phys; zero where it
 * has none such. */
static VkQueueFamilyProperties family_props(const vk_state *vk, uint32_t family)
{
    VkQueueFamilyProperties props[32];
    uint32_t n = VKMHA_ARRAY_LEN(props);
    vk->vki.GetPhysicalDeviceQueueFamilyProperties(vk->phys, &n, props);
    return family < n ? props[family] : (VkQueueFamilyProperties){0};
}

/* The context's queue family binds sparse memory. */
static bool queue_sparse(const vk_state *vk)
{
    return (family_props(vk, vk->queue_family).queueFlags & VK_QUEUE_SPARSE_BINDING_BIT) != 0;
}

/* Whether the context binds sparse buffers (vk->sparse; tensors past
 * maxMemoryAllocationSize), and if not why (vk->sparse_why), given that the
 * device has the feature enabled (`enabled`; else why_not says why): the
 * queue's family binds sparse memory, and a probe's sparse blocks fit one
 * allocation (the lowered ones of vkmha_debug_options too) in device-local
 * memory. Then the limits of the largest tensor (vk_max_tensor_bytes):
 * sparseAddressSpaceSize, and maxBufferSize where the device states one
 * (Vulkan 1.3). */
static void sparse_setup(vk_state *vk, bool enabled, const char *why_not)
{
    vk->sparse = false;
    if (vk->no_sparse)
        why_not = "desc->debug->no_sparse_binding";
    else if (enabled && !queue_sparse(vk))
        why_not = "its queue family has no VK_QUEUE_SPARSE_BINDING_BIT";
    else if (enabled) {
        why_not = "vkCreateBuffer of a sparse buffer failed";
        VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                 .flags = VK_BUFFER_CREATE_SPARSE_BINDING_BIT,
                                 .size = 4,
                                 .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                                 .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
        VkBuffer probe;
        if (vk->vkd.vkCreateBuffer(vk->device, &bi, vk->vkalloc, &probe) == VK_SUCCESS) {
            VkMemoryRequirements req;
            vk->vkd.vkGetBufferMemoryRequirements(vk->device, probe, &req);
            vk->vkd.vkDestroyBuffer(vk->device, probe, vk->vkalloc);
            why_not = vk_find_memory_type(&vk->mem_props, req.memoryTypeBits,
                                          VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0) < 0
                          ? "no device-local memory type takes sparse buffers"
                          : NULL;
            if (!why_not && req.alignment > vk->info.max_allocation_size)
                why_not = "its sparse blocks are larger than maxMemoryAllocationSize";
            vk->sparse = !why_not;
            vk->sparse_block = req.alignment;
        }
    }
    snprintf(vk->sparse_why, sizeof vk->sparse_why, "%s", why_not ? why_not : "");
    VkPhysicalDeviceMaintenance4Properties m4 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES,
        .maxBufferSize = UINT64_MAX};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = vk->info.api_version >= VK_API_VERSION_1_3
                                                   ? &m4
                                                   : NULL};
    vk->vki.GetPhysicalDeviceProperties2(vk->phys, &p2);
    vk->sparse_space = p2.properties.limits.sparseAddressSpaceSize;
    vk->max_buffer_size = m4.maxBufferSize;
}

/* Creates the device (unless borrowed), then what vkmha owns on it: the
 * command pool, the synchronous calls' command buffer and fence. */
/* *out: vk->phys has device extension `name`; out of host memory to say. */
static vkmha_status has_extension(vk_state *vk, const char *name, bool *out)
{
    const int has = device_has_extension(vk->ctx, &vk->vki, vk->phys, name);
    if (has < 0)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                           "vkmha_context_create: out of host memory");
    *out = has > 0;
    return VKMHA_SUCCESS;
}

/* n zeroed structures of `size` bytes, each with sType `type` (their first
 * member), for a vkGetPhysicalDevice*PropertiesKHR/NV enumeration; NULL
 * after failing the call (out of host memory). */
static void *alloc_out_structs(vk_state *vk, uint32_t n, size_t size, VkStructureType type)
{
    unsigned char *p = vkmha__alloc(vk->ctx, (size_t)n * size);
    if (!p) {
        vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                    "vkmha_context_create: out of host memory");
        return NULL;
    }
    memset(p, 0, (size_t)n * size);
    for (uint32_t i = 0; i < n; i++)
        memcpy(p + (size_t)i * size, &type, sizeof type);
    return p;
}

/* The device's cooperative-matrix shapes of subgroup scope into
 * vk->matrix_shapes (what vkmha_context_info lists), and the one the
 * cooperative kernels multiply into vk->coop_shape (vk_state). */
static vkmha_status query_matrix_shapes(vk_state *vk)
{
    vk->n_matrix_shapes = 0;
    vk->coop_shape = (vkmha_matrix_shape){0};
    VkPhysicalDeviceSubgroupSizeControlPropertiesEXT ssc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &ssc};
    vk->vki.GetPhysicalDeviceProperties2(vk->phys, &p2);
    vk->max_subgroup_size = ssc.maxSubgroupSize;
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get =
        vk->vki.GetPhysicalDeviceCooperativeMatrixPropertiesKHR;
    uint32_t n = 0;
    if (!get || get(vk->phys, &n, NULL) != VK_SUCCESS || n == 0)
        return VKMHA_SUCCESS;
    VkCooperativeMatrixPropertiesKHR *props = alloc_out_structs(
        vk, n, sizeof *props, VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR);
    if (!props)
        return VKMHA_ERROR_OUT_OF_HOST_MEMORY;
    VkResult r = get(vk->phys, &n, props);
    for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < n; i++) {
        const VkCooperativeMatrixPropertiesKHR *p = &props[i];
        if (p->scope != VK_SCOPE_SUBGROUP_KHR)
            continue;
        const vkmha_matrix_shape s = {
            .m = p->MSize, .n = p->NSize, .k = p->KSize, .a_type = (uint32_t)p->AType,
            .b_type = (uint32_t)p->BType, .c_type = (uint32_t)p->CType,
            .result_type = (uint32_t)p->ResultType,
            .saturating = p->saturatingAccumulation != VK_FALSE};
        if (vk->n_matrix_shapes < VKMHA_MAX_MATRIX_SHAPES)
            vk->matrix_shapes[vk->n_matrix_shapes] = s;
        vk->n_matrix_shapes++;
        const vkmha_matrix_shape *best = &vk->coop_shape;
        const uint64_t area = (uint64_t)s.m * s.n, best_area = (uint64_t)best->m * best->n;
        if (s.a_type == VK_COMPONENT_TYPE_FLOAT16_KHR &&
            s.b_type == VK_COMPONENT_TYPE_FLOAT16_KHR && s.c_type == VK_COMPONENT_TYPE_FLOAT32_KHR &&
            s.result_type == VK_COMPONENT_TYPE_FLOAT32_KHR && !s.saturating &&
            (area > best_area || (area == best_area && s.k > best->k)))
            vk->coop_shape = s;
    }
    vkmha__free(vk->ctx, props);
    return VKMHA_SUCCESS;
}

/* The device's fp16 x fp16 -> fp32 matrices of workgroup scope
 * (VK_NV_cooperative_matrix2's flexible dimensions) into vk->cm2_shapes. */
static vkmha_status query_cm2_shapes(vk_state *vk)
{
    vk->n_cm2_shapes = 0;
    PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV get =
        vk->vki.GetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV;
    uint32_t n = 0;
    if (!get || get(vk->phys, &n, NULL) != VK_SUCCESS || n == 0)
        return VKMHA_SUCCESS;
    const VkStructureType type =
        VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV;
    VkCooperativeMatrixFlexibleDimensionsPropertiesNV *props =
        alloc_out_structs(vk, n, sizeof *props, type);
    if (!props)
        return VKMHA_ERROR_OUT_OF_HOST_MEMORY;
    VkResult r = get(vk->phys, &n, props);
    for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < n; i++) {
        const VkCooperativeMatrixFlexibleDimensionsPropertiesNV *p = &props[i];
        if ((uint32_t)p->scope == 2u /* VK_SCOPE_WORKGROUP_KHR */ &&
            p->AType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
            p->BType == VK_COMPONENT_TYPE_FLOAT16_KHR &&
            p->CType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
            p->ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR && !p->saturatingAccumulation &&
            p->workgroupInvocations && p->MGranularity && p->NGranularity &&
            p->KGranularity && vk->n_cm2_shapes < VK_CM2_SHAPES)
            vk->cm2_shapes[vk->n_cm2_shapes++] = (struct vk_cm2_shape){
                p->workgroupInvocations, p->MGranularity, p->NGranularity, p->KGranularity};
    }
    vkmha__free(vk->ctx, props);
    return VKMHA_SUCCESS;
}

vkmha_status vk_create_device(vk_state *vk, const vkmha_vulkan_desc *ext)
{
    VkResult r;
    vkmha_status st;
    bool sparse = ext && ext->device && ext->sparse_binding;
    /* VK_EXT_memory_budget is physical-device-level: queried (vk_memory.c),
     * never enabled, so a borrowed device has it too. */
    if (vk->info.api_version >= VK_API_VERSION_1_1 && vk->vki.GetPhysicalDeviceMemoryProperties2 &&
        (st = has_extension(vk, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME, &vk->memory_budget)))
        return st;
    if (ext && ext->device) {
        vk->device = ext->device;
        vk->queue = ext->queue;
        vk->push_descriptors = listed(ext->enabled_device_extensions,
                                      ext->enabled_device_extension_count,
                                      VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
        vk->storage16 = ext->storage_buffer_16bit_access && !vk->no_native16;
        vk_load_device_table(vk->device, vk->vki.GetDeviceProcAddr, &vk->vkd);
    } else {
        float priority = 1.0f;
        const char *exts[8];
        uint32_t n_exts = 0;
        if ((st = has_extension(vk, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME,
                                &vk->push_descriptors)))
            return st;
        if (vk->push_descriptors)
            exts[n_exts++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
        /* A compile-only context reads pipeline statistics back. */
        VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR stats = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
        if (vk->compile_only) {
            const char *name = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
            const int has = device_has_extension(vk->ctx, &vk->vki, vk->phys, name);
            if (has <= 0)
                return vkmha__fail(vk->ctx, has < 0 ? VKMHA_ERROR_OUT_OF_HOST_MEMORY
                                                    : VKMHA_ERROR_UNSUPPORTED,
                                   "vkmha_context_create: %s lacks %s", vk->info.name, name);
            exts[n_exts++] = name;
            stats.pipelineExecutableInfo = VK_TRUE;
        }
        VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
        qi.queueFamilyIndex = vk->queue_family;
        qi.queueCount = 1;
        qi.pQueuePriorities = &priority;
        /* 16-bit storage where the device has it (core in Vulkan 1.1, optional):
         * the shaders' NATIVE16 variants; else 16-bit data is packed in uints. */
        VkPhysicalDevice16BitStorageFeatures s16 = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
        VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                        .pNext = &s16};
        /* Matrix units (VK_KHR_cooperative_matrix): the shaders also need
         * the Vulkan memory model (with device scope), fp16 arithmetic and
         * full subgroups (which the extension requires of SPIR-V before
         * 1.6), each an extension at the Vulkan 1.1 that vkmha's instance
         * asks for. */
        static const char *const coop_exts[] = {VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME,
                                                VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME,
                                                VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME,
                                                VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME};
        bool coop = !vk->no_coopmat && vk_spirv[SPV_MATMUL_COOP].code != NULL;
        for (size_t i = 0; i < VKMHA_ARRAY_LEN(coop_exts) && coop; i++)
            if ((st = has_extension(vk, coop_exts[i], &coop)))
                return st;
        if (coop && (st = query_matrix_shapes(vk)))
            return st;
        /* VK_NV_cooperative_matrix2 on top (shaders/matmul_cm2.comp). */
        bool coop2 = coop && vk_spirv[SPV_MATMUL_CM2].code != NULL &&
                     vk->instance_api >= VK_API_VERSION_1_3 &&
                     vk->info.api_version >= VK_API_VERSION_1_3;
        if (coop2 && (st = has_extension(vk, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME, &coop2)))
            return st;
        if (coop2 && (st = query_cm2_shapes(vk)))
            return st;
        VkPhysicalDeviceSubgroupSizeControlFeaturesEXT ssc = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
        VkPhysicalDeviceShaderFloat16Int8Features f16 = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, .pNext = &ssc};
        VkPhysicalDeviceVulkanMemoryModelFeatures vmm = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES, .pNext = &f16};
        VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
            .pNext = &vmm};
        VkPhysicalDeviceMaintenance4Features m4 = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES, .pNext = &cm};
        VkPhysicalDeviceCooperativeMatrix2FeaturesNV cm2 = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV,
            .pNext = &m4};
        if (coop)
            s16.pNext = coop2 ? (void *)&cm2 : (void *)&cm;
        if (vk->vki.GetPhysicalDeviceFeatures2)
            vk->vki.GetPhysicalDeviceFeatures2(vk->phys, &f2);
        vk->storage16 = s16.storageBuffer16BitAccess && !vk->no_native16;
        /* Device scope: the atomics of shaders/typed.glsl's narrow stores. */
        vk->coopmat = coop && vk->coop_shape.m && cm.cooperativeMatrix && vmm.vulkanMemoryModel &&
                      vmm.vulkanMemoryModelDeviceScope && f16.shaderFloat16 &&
                      ssc.computeFullSubgroups;
        /* Its shaders declare workgroup scope, flexible dimensions, tensor
         * addressing, per-element operations, 16-bit storage and (SPIR-V
         * 1.6's LocalSizeId) maintenance4. */
        vk->coopmat2 = vk->coopmat && coop2 && vk->n_cm2_shapes && vk->storage16 &&
                       cm2.cooperativeMatrixWorkgroupScope &&
                       cm2.cooperativeMatrixFlexibleDimensions &&
                       cm2.cooperativeMatrixTensorAddressing &&
                       cm2.cooperativeMatrixPerElementOperations && m4.maintenance4;
        /* Sparse binding where the device and the queue have it: tensors
         * past maxMemoryAllocationSize (vk_buffer_create_sparse). */
        sparse = f2.features.sparseBinding && !vk->no_sparse &&
                 queue_sparse(vk);
        const VkPhysicalDeviceFeatures sparse_on = {.sparseBinding = sparse};
        VkPhysicalDevice16BitStorageFeatures s16_on = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
            .pNext = vk->compile_only ? &stats : NULL,
            .storageBuffer16BitAccess = VK_TRUE};
        VkPhysicalDeviceSubgroupSizeControlFeaturesEXT ssc_on = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT,
            .pNext = vk->storage16 ? (void *)&s16_on : vk->compile_only ? (void *)&stats : NULL,
            .computeFullSubgroups = VK_TRUE};
        VkPhysicalDeviceShaderFloat16Int8Features f16_on = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
            .pNext = &ssc_on, .shaderFloat16 = VK_TRUE};
        VkPhysicalDeviceVulkanMemoryModelFeatures vmm_on = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES,
            .pNext = &f16_on, .vulkanMemoryModel = VK_TRUE,
            .vulkanMemoryModelDeviceScope = VK_TRUE};
        VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm_on = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
            .pNext = &vmm_on, .cooperativeMatrix = VK_TRUE};
        VkPhysicalDeviceMaintenance4Features m4_on = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES, .pNext = &cm_on,
            .maintenance4 = VK_TRUE};
        VkPhysicalDeviceCooperativeMatrix2FeaturesNV cm2_on = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV,
            .pNext = &m4_on, .cooperativeMatrixWorkgroupScope = VK_TRUE,
            .cooperativeMatrixFlexibleDimensions = VK_TRUE,
            .cooperativeMatrixPerElementOperations = VK_TRUE,
            .cooperativeMatrixTensorAddressing = VK_TRUE};
        if (vk->coopmat)
            for (size_t i = 0; i < VKMHA_ARRAY_LEN(coop_exts); i++)
                exts[n_exts++] = coop_exts[i];
        if (vk->coopmat2)
            exts[n_exts++] = VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME;
        VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
        di.pNext = vk->coopmat2 ? (void *)&cm2_on : vk->coopmat ? (void *)&cm_on : ssc_on.pNext;
        di.pEnabledFeatures = &sparse_on;
        di.queueCreateInfoCount = 1;
        di.pQueueCreateInfos = &qi;
        di.enabledExtensionCount = n_exts;
        di.ppEnabledExtensionNames = exts;
        r = vk->vki.CreateDevice(vk->phys, &di, vk->vkalloc, &vk->device);
        if (r != VK_SUCCESS) {
            vk->device = VK_NULL_HANDLE;
            return vk_fail(vk, r, "vkmha_context_create: vkCreateDevice");
        }
        vk_load_device_table(vk->device, vk->vki.GetDeviceProcAddr, &vk->vkd);
        vk->vkd.vkGetDeviceQueue(vk->device, vk->queue_family, 0, &vk->queue);
    }
    sparse_setup(vk, sparse,
                 ext && ext->device ? "desc->vulkan->sparse_binding is false"
                                    : "the device has no sparseBinding");
    /* The environment can turn push descriptors off (a driver workaround,
     * and how the test suite covers the descriptor-set path). */
    const char *no_push = getenv("VKMHA_NO_PUSH_DESCRIPTORS");
    if ((no_push && *no_push && strcmp(no_push, "0") != 0) || vk->debug_no_push)
        vk->push_descriptors = false;
    if (vk->push_descriptors && !vk->vkd.vkCmdPushDescriptorSetKHR)
        vk->push_descriptors = false;
    if (vk->compile_only)
        return VKMHA_SUCCESS; /* nothing will be recorded or waited for */

    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pi.queueFamilyIndex = vk->queue_family;
    if ((r = vk->vkd.vkCreateCommandPool(vk->device, &pi, vk->vkalloc, &vk->cmd_pool)) !=
        VK_SUCCESS)
        return vk_fail(vk, r, "vkmha_context_create: vkCreateCommandPool");
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = vk->cmd_pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    if ((r = vk->vkd.vkAllocateCommandBuffers(vk->device, &ai, &vk->own_cmd)) != VK_SUCCESS)
        return vk_fail(vk, r, "vkmha_context_create: vkAllocateCommandBuffers");
    vk->cmd = vk->own_cmd;
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((r = vk->vkd.vkCreateFence(vk->device, &fi, vk->vkalloc, &vk->fence)) != VK_SUCCESS)
        return vk_fail(vk, r, "vkmha_context_create: vkCreateFence");
    return VKMHA_SUCCESS;
}

/* VKMHA_CONTEXT_PROFILE: a pool of 2 timestamp queries, if the queue family
 * has timestamps at all (timestampValidBits > 0); otherwise profiling stays
 * off and vkmha_context_info says so. */
vkmha_status vk_create_timestamps(vk_state *vk)
{
    const uint32_t bits = family_props(vk, vk->queue_family).timestampValidBits;
    if (bits == 0 || vk->info.timestamp_period <= 0.0f)
        return VKMHA_SUCCESS;
    vk->timestamp_mask = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = 3 + VK_PROFILE_PASSES; /* begin, end, uploads, the steps */
    VkResult r = vk->vkd.vkCreateQueryPool(vk->device, &qi, vk->vkalloc, &vk->timestamps);
    if (r != VK_SUCCESS) {
        vk->timestamps = VK_NULL_HANDLE;
        return vk_fail(vk, r, "vkmha_context_create: vkCreateQueryPool");
    }
    return VKMHA_SUCCESS;
}

VKMHA_API vkmha_status vkmha_enumerate_devices(uint32_t *count, vkmha_device_info *out)
{
    static const char call[] = "vkmha_enumerate_devices", create[] = "vkmha_context_create";
    vkmha__set_creation_error("");
    if (!count)
        return vkmha__creation_fail(NULL, NULL, VKMHA_ERROR_INVALID_ARGUMENT,
                                    "%s: count is NULL", call);
    if (*count > 0 && !out)
        return vkmha__creation_fail(NULL, NULL, VKMHA_ERROR_INVALID_ARGUMENT,
                                    "%s: out is NULL with *count %u", call, *count);
    vkmha_context tmp = {0};
    vk_state vk = {0};
    vk.ctx = &tmp;
    vkmha_status st = vk_load_globals(&vk, NULL);
    if (st == VKMHA_SUCCESS)
        st = vk_create_instance(&vk, &tmp, false);
    if (st != VKMHA_SUCCESS) {
        if (vk.instance)
            vk.vki.DestroyInstance(vk.instance, NULL);
        /* The shared instance code names vkmha_context_create: name this call. */
        const char *msg = tmp.last_error;
        if (strncmp(msg, create, sizeof create - 1) == 0)
            msg += sizeof create - 1;
        st = st == VKMHA_ERROR_OUT_OF_HOST_MEMORY ? st : VKMHA_ERROR_NO_DEVICE;
        return vkmha__creation_fail(NULL, NULL, st, "%s%s", call, msg);
    }
    VkPhysicalDevice devs[16];
    uint32_t n = VKMHA_ARRAY_LEN(devs);
    VkResult r = vk.vki.EnumeratePhysicalDevices(vk.instance, &n, devs);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        n = 0;
    for (uint32_t i = 0; i < n && i < *count; i++) {
        VkPhysicalDeviceMemoryProperties mp;
        fill_info(NULL, &vk.vki, devs[i], &out[i], &mp);
    }
    *count = n;
    vk.vki.DestroyInstance(vk.instance, NULL);
    if (n == 0) {
        char hint[512];
        vk_no_driver_hint(hint, sizeof hint);
        return vkmha__creation_fail(NULL, NULL, VKMHA_ERROR_NO_DEVICE,
                                    "%s: no Vulkan device: %s", call, hint);
    }
    return VKMHA_SUCCESS;
}

VKMHA_API const char *vkmha_matrix_type_name(uint32_t type)
{
    /* VkComponentTypeKHR: 0 .. 10 in the order of the registry, then the
     * extensions' bfloat16 (VK_KHR_shader_bfloat16) and fp8 (NV). */
    static const char *const names[] = {"f16", "f32", "f64", "s8",  "s16", "s32",
                                        "s64", "u8",  "u16", "u32", "u64"};
    if (type < VKMHA_ARRAY_LEN(names))
        return names[type];
    return type == 1000141000u   ? "bf16"
           : type == 1000491002u ? "e4m3"
           : type == 1000491003u ? "e5m2"
                                 : "?";
}

VKMHA_API bool vkmha_cooperative_matrix_built(void)
{
    return vk_spirv[SPV_MATMUL_COOP].code != NULL;
}
