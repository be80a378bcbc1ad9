/* Vulkan instance, physical-device choice, device, queue and the per-context
 * command buffer; device information and limits; the Vulkan backend's table
 * (vk_backend_ops), whose other entries are in src/vk_tensor.c,
 * src/vk_mha.c and src/vk_submission.c. */
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

static VKAPI_ATTR VkBool32 VKAPI_CALL
debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
               VkDebugUtilsMessageTypeFlagsEXT types,
               const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    vk_state *vk = (vk_state *)user;
    (void)types;
    if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)
        return VK_FALSE;
    vk->validation_messages++;
    vkmha__log(vk->ctx,
               severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? VKMHA_LOG_ERROR
                                                                         : VKMHA_LOG_WARN,
               VKMHA_ERROR_VULKAN, "validation layer: %s",
               data && data->pMessage ? data->pMessage : "(no message)");
    return VK_FALSE;
}

/* 1: present, 0: absent, -1: out of host memory (for the three below). */
static int has_instance_extension(vk_state *vk, const char *layer, const char *name)
{
    uint32_t n = 0;
    int found = 0;
    PFN_vkEnumerateInstanceExtensionProperties f = vk->vkg.EnumerateInstanceExtensionProperties;
    if (!f || f(layer, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *props = vkmha__alloc(vk->ctx, n * sizeof *props);
    if (!props)
        return -1;
    if (f(layer, &n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(props[i].extensionName, name) == 0;
    vkmha__free(vk->ctx, props);
    return found;
}

static int has_layer(vk_state *vk, const char *name)
{
    uint32_t n = 0;
    int found = 0;
    PFN_vkEnumerateInstanceLayerProperties f = vk->vkg.EnumerateInstanceLayerProperties;
    if (!f || f(&n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkLayerProperties *props = vkmha__alloc(vk->ctx, n * sizeof *props);
    if (!props)
        return -1;
    if (f(&n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(props[i].layerName, name) == 0;
    vkmha__free(vk->ctx, props);
    return found;
}

/* What to do when the loader finds no driver or no device, for the
 * messages below (the most common first-run failure). */
static void no_driver_hint(char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "install a Vulkan driver (Debian and Ubuntu: mesa-vulkan-drivers, "
                               "which includes lavapipe on the CPU; or the GPU vendor's driver)");
    static const char *const vars[] = {"VK_ICD_FILENAMES", "VK_DRIVER_FILES"};
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(vars) && n > 0 && (size_t)n < cap; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            n += snprintf(buf + n, cap - (size_t)n,
                          "; %s is set to \"%s\": check that it names existing driver "
                          "manifests (.json files), or unset it",
                          vars[i], v);
    }
}

/* The loader's global functions: the application's (gipa) or the system's. */
static vkmha_status load_globals(vk_state *vk, PFN_vkGetInstanceProcAddr gipa)
{
    if (!gipa) {
        VkResult r = vk_loader_init();
        if (r != VK_SUCCESS) {
            char hint[512];
            no_driver_hint(hint, sizeof hint);
            return vkmha__fail(vk->ctx, VKMHA_ERROR_NO_DEVICE,
                               "vkmha_context_create: no Vulkan loader (libvulkan.so.1) found "
                               "(%s): install it (Debian and Ubuntu: libvulkan1), and %s",
                               vk_result_string(r), hint);
        }
    }
    vk_load_global_table(gipa, &vk->vkg);
    return VKMHA_SUCCESS;
}

/* Creates vk->instance (and the messenger when validating). */
static vkmha_status create_instance(vk_state *vk, vkmha_context *ctx, bool validation)
{
    VkResult r;
    uint32_t loader_version = VK_API_VERSION_1_0;
    if (!vk->vkg.CreateInstance)
        return vkmha__fail(ctx, VKMHA_ERROR_NO_DEVICE,
                           "vkmha_context_create: the Vulkan loader has no vkCreateInstance");
    if (vk->vkg.EnumerateInstanceVersion)
        vk->vkg.EnumerateInstanceVersion(&loader_version);
    if (loader_version < VK_API_VERSION_1_1)
        return vkmha__fail(ctx, VKMHA_ERROR_NO_DEVICE,
                           "vkmha_context_create: the Vulkan loader supports only Vulkan 1.0; "
                           "vkmha needs 1.1");

    const char *layers[1], *exts[2];
    uint32_t n_layers = 0, n_exts = 0;
    VkValidationFeatureEnableEXT enables[] = {
        VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT features = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
    VkDebugUtilsMessengerCreateInfoEXT messenger_info = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    messenger_info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                     VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                                 VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                 VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    messenger_info.pfnUserCallback = debug_callback;
    messenger_info.pUserData = vk;

    const void *next = NULL;
    if (validation) {
        const int layer = has_layer(vk, VALIDATION_LAYER),
                  utils = layer > 0 ? has_instance_extension(vk, NULL,
                                                             VK_EXT_DEBUG_UTILS_EXTENSION_NAME)
                                    : 0,
                  utils_layer = layer > 0 ? has_instance_extension(
                                                vk, VALIDATION_LAYER,
                                                VK_EXT_DEBUG_UTILS_EXTENSION_NAME)
                                          : 0,
                  features_ext = layer > 0 ? has_instance_extension(
                                                 vk, VALIDATION_LAYER,
                                                 VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME)
                                           : 0;
        if (layer < 0 || utils < 0 || utils_layer < 0 || features_ext < 0)
            return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               "vkmha_context_create: out of host memory");
        if (!layer)
            return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                               "vkmha_context_create: desc->enable_validation is set but "
                               "%s is not installed (Debian: vulkan-validationlayers)",
                               VALIDATION_LAYER);
        if (!utils && !utils_layer)
            return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                               "vkmha_context_create: validation needs %s, which is missing",
                               VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
        layers[n_layers++] = VALIDATION_LAYER;
        exts[n_exts++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
        messenger_info.pNext = NULL;
        next = &messenger_info;
        if (features_ext) {
            exts[n_exts++] = VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME;
            features.enabledValidationFeatureCount = VKMHA_ARRAY_LEN(enables);
            features.pEnabledValidationFeatures = enables;
            features.pNext = &messenger_info;
            next = &features;
        }
    }

    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pEngineName = "vkmha";
    app.engineVersion = VKMHA_VERSION_NUMBER;
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pNext = next;
    ci.pApplicationInfo = &app;
    ci.enabledLayerCount = n_layers;
    ci.ppEnabledLayerNames = layers;
    ci.enabledExtensionCount = n_exts;
    ci.ppEnabledExtensionNames = exts;
    r = vk->vkg.CreateInstance(&ci, vk->vkalloc, &vk->instance);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
        /* The loader's answer when it found no driver at all. */
        char hint[512];
        vk->instance = VK_NULL_HANDLE;
        no_driver_hint(hint, sizeof hint);
        return vkmha__fail(ctx, VKMHA_ERROR_NO_DEVICE,
                           "vkmha_context_create: vkCreateInstance failed: "
                           "VK_ERROR_INCOMPATIBLE_DRIVER, no Vulkan 1.1 driver found: %s",
                           hint);
    }
    if (r != VK_SUCCESS) {
        vk->instance = VK_NULL_HANDLE;
        return vk_fail(vk, r, "vkmha_context_create: vkCreateInstance");
    }
    vk_load_instance_table(vk->vkg.GetInstanceProcAddr, vk->instance, &vk->vki);
    if (validation) {
        vk->validation = true;
        if (!vk->vki.CreateDebugUtilsMessengerEXT)
            return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                               "vkmha_context_create: vkCreateDebugUtilsMessengerEXT missing");
        r = vk->vki.CreateDebugUtilsMessengerEXT(vk->instance, &messenger_info, vk->vkalloc,
                                                 &vk->messenger);
        if (r != VK_SUCCESS)
            return vk_fail(vk, r, "vkmha_context_create: vkCreateDebugUtilsMessengerEXT");
    }
    return VKMHA_SUCCESS;
}

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

static vkmha_status pick_device(vk_state *vk, const vkmha_context_desc *desc)
{
    vkmha_context *ctx = vk->ctx;
    VkPhysicalDevice devs[16];
    uint32_t n = VKMHA_ARRAY_LEN(devs);
    VkResult r = vk->vki.EnumeratePhysicalDevices(vk->instance, &n, devs);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return vk_fail(vk, r, "vkmha_context_create: vkEnumeratePhysicalDevices");
    if (n == 0) {
        char hint[512];
        no_driver_hint(hint, sizeof hint);
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
static vkmha_status borrow_device(vk_state *vk, const vkmha_vulkan_desc *ext)
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


static vkmha_status choose_memory_types(vk_state *vk)
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

static vkmha_status create_device(vk_state *vk, const vkmha_vulkan_desc *ext)
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
        vk->native16 = ext->storage_buffer_16bit_access && !vk->no_native16;
        vk_load_device_table(vk->device, vk->vki.GetDeviceProcAddr, &vk->vkd);
    } else {
        float priority = 1.0f;
        const char *exts[2];
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
        if (vk->vki.GetPhysicalDeviceFeatures2)
            vk->vki.GetPhysicalDeviceFeatures2(vk->phys, &f2);
        vk->native16 = s16.storageBuffer16BitAccess && !vk->no_native16;
        /* Sparse binding where the device and the queue have it: tensors
         * past maxMemoryAllocationSize (vk_buffer_create_sparse). */
        sparse = f2.features.sparseBinding && !vk->no_sparse &&
                 queue_sparse(vk);
        const VkPhysicalDeviceFeatures sparse_on = {.sparseBinding = sparse};
        VkPhysicalDevice16BitStorageFeatures s16_on = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
            .pNext = vk->compile_only ? &stats : NULL,
            .storageBuffer16BitAccess = VK_TRUE};
        VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
        di.pNext = vk->native16 ? (void *)&s16_on : vk->compile_only ? (void *)&stats : NULL;
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
static vkmha_status create_timestamps(vk_state *vk)
{
    const uint32_t bits = family_props(vk, vk->queue_family).timestampValidBits;
    if (bits == 0 || vk->info.timestamp_period <= 0.0f)
        return VKMHA_SUCCESS;
    vk->timestamp_mask = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = 2;
    VkResult r = vk->vkd.vkCreateQueryPool(vk->device, &qi, vk->vkalloc, &vk->timestamps);
    if (r != VK_SUCCESS) {
        vk->timestamps = VK_NULL_HANDLE;
        return vk_fail(vk, r, "vkmha_context_create: vkCreateQueryPool");
    }
    return VKMHA_SUCCESS;
}

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
    uint64_t shared = info->max_shared_memory;
    if ((st = lower_limit(vk, "max_shared_memory", d->max_shared_memory, &shared)))
        return st;
    info->max_shared_memory = (uint32_t)shared;
    if ((unsigned)d->fused_kernel > VKMHA_FUSED_KERNEL_SHARED_GPU_BLOCKS)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           "vkmha_context_create: desc->debug->fused_kernel (%d) is not a "
                           "vkmha_fused_kernel",
                           (int)d->fused_kernel);
    vk->no_native16 |= d->no_native_16bit;
    vk->no_sparse |= d->no_sparse_binding;
    vk->flash_gpu_blocks = d->fused_kernel == VKMHA_FUSED_KERNEL_SHARED_GPU_BLOCKS;
    vk->fused_kernel = vk->flash_gpu_blocks ? VKMHA_FUSED_KERNEL_SHARED : d->fused_kernel;
    if (d->fail_device_allocation_at) {
        uint64_t count = d->fail_device_allocation_count ? d->fail_device_allocation_count : 1;
        vk->fail_alloc_first = d->fail_device_allocation_at;
        vk->fail_alloc_last = count - 1 > UINT64_MAX - vk->fail_alloc_first
                                  ? UINT64_MAX
                                  : vk->fail_alloc_first + (count - 1);
    }
    return VKMHA_SUCCESS;
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
    vk->scratch_budget = desc->scratch_budget;
    if (ext) {
        vk->vkalloc = ext->allocation_callbacks;
        vk->queue_lock = ext->queue_lock;
        vk->queue_unlock = ext->queue_unlock;
        vk->queue_lock_user = ext->queue_lock_user;
    }
    if ((st = load_globals(vk, ext ? ext->get_instance_proc_addr : NULL)))
        return st;
    if (ext && ext->device)
        st = borrow_device(vk, ext);
    else if (!(st = create_instance(vk, ctx, desc->enable_validation)))
        st = pick_device(vk, desc);
    uint32_t flags = desc->flags;
    if (st || (st = apply_debug(vk, desc->debug, &flags)) || (st = create_device(vk, ext)))
        return st; /* the caller destroys the partial state */
    vk->use_subgroup = vk->info.subgroup_arithmetic && !(flags & VKMHA_CONTEXT_NO_SUBGROUP_OPS);
    if (compile_only) { /* the same choices, then pipelines only: no memory, no cache */
        if ((st = vk_pipelines_init(vk, desc->matmul_tile)))
            return st;
        return desc->flags & VKMHA_CONTEXT_EAGER_PIPELINES ? vk_pipelines_create_all(vk)
                                                          : VKMHA_SUCCESS;
    }
    if ((st = choose_memory_types(vk)))
        return st;
    if ((desc->flags & VKMHA_CONTEXT_PROFILE) && (st = create_timestamps(vk)))
        return st;
    vk->single_thread = (desc->flags & VKMHA_CONTEXT_SINGLE_THREAD) != 0;
    if ((st = vk_pipeline_cache_init(vk, desc)) ||
        (st = vk_pipelines_init(vk, desc->matmul_tile)))
        return st;
    if ((st = vk_buffer_create(vk, 16, false, false, "placeholder", &vk->dummy)))
        return st;
    /* The self-check's canaries run through the ops' own entry points. */
    const char *call = ctx->call;
    ctx->call = "vkmha_context_create";
    st = vk_self_check(vk, !(desc->flags & VKMHA_CONTEXT_NO_SELF_CHECK),
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
        while (vk->n_subs)
            vk_submission_free(vk, vk->subs[vk->n_subs - 1]);
        vkmha__free(vk->ctx, vk->subs);
        vk_release_retired(vk);
        vk_release_recorded_sets(vk);
        for (int i = 0; i < SLOT_COUNT; i++)
            vk_buffer_destroy(vk, &vk->slots[i]);
        vk_buffer_destroy(vk, &vk->dummy);
        vk_buffer_destroy(vk, &vk->upload);
        vk_buffer_destroy(vk, &vk->download);
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
    vkmha__free(vk->ctx, vk->plan.up);
    vkmha__free(vk->ctx, vk->plan.passes);
    vkmha__free(vk->ctx, vk);
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
    vkmha_status st = load_globals(&vk, NULL);
    if (st == VKMHA_SUCCESS)
        st = create_instance(&vk, &tmp, false);
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
        no_driver_hint(hint, sizeof hint);
        return vkmha__creation_fail(NULL, NULL, VKMHA_ERROR_NO_DEVICE,
                                    "%s: no Vulkan device: %s", call, hint);
    }
    return VKMHA_SUCCESS;
}

static void ctx_info(const vkmha_context *ctx, vkmha_context_info *out)
{
    const vk_state *vk = ctx->vk;
    out->device = vk->info;
    out->device_index = vk->device_index;
    out->validation_enabled = vk->validation;
    out->validation_messages = vk->validation_messages;
    out->subgroup_ops_used = vk->use_subgroup;
    out->device_memory_bytes = vk->memory_bytes;
    out->device_memory_peak_bytes = vk->memory_peak_bytes;
    out->gpu_timing = vk->timestamps != VK_NULL_HANDLE;
    out->last_gpu_time_ns = vk->last_gpu_time_ns;
    out->external_device = vk->external;
    out->push_descriptors = vk->push_descriptors;
    out->disabled_paths = vk->disabled_paths;
    out->self_check_us = vk->self_check_us;
    out->pipeline_cache_loaded = vk->pipeline_cache_loaded;
    out->pipeline_cache_bytes = vk->pipeline_cache_bytes;
    out->pipelines_created = vk->pipelines_created;
    out->scratch_bytes = vk_scratch_bytes(vk);
    out->scratch_budget = vk->scratch_budget;
    out->native_16bit_storage = vk->native16;
    out->sparse_tensors = vk->sparse;
    out->max_tensor_bytes = vk_max_tensor_bytes(vk);
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
    vk_release_retired(vk);
    vk_release_recorded_sets(vk);
    for (int i = 0; i < SLOT_COUNT; i++)
        vk_buffer_destroy(vk, &vk->slots[i]);
    vk_buffer_destroy(vk, &vk->upload);
    vk_buffer_destroy(vk, &vk->download);
    return VKMHA_SUCCESS;
}

const vkmha_backend_ops vk_backend_ops = {
    .create = vk_create,
    .destroy = ctx_destroy,
    .trim = ctx_trim,
    .info = ctx_info,
    .kernels = vk_kernels,
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
