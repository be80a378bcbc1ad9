/* The Vulkan instance: the loader's global functions, layers and instance
 * extensions, the validation layer and its messenger, and what to say when
 * no driver is found. */
#include "vk_resources.h"

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
void vk_no_driver_hint(char *buf, size_t cap)
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
vkmha_status vk_load_globals(vk_state *vk, PFN_vkGetInstanceProcAddr gipa)
{
    if (!gipa) {
        VkResult r = vk_loader_init();
        if (r != VK_SUCCESS) {
            char hint[512];
            vk_no_driver_hint(hint, sizeof hint);
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
vkmha_status vk_create_instance(vk_state *vk, vkmha_context *ctx, bool validation)
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
    /* 1.3 where the loader has it: the VK_NV_cooperative_matrix2 kernel is
     * SPIR-V 1.6, which needs a device used at 1.3 (the effective version
     * is the lower of this and the device's; nothing else changes). */
    app.apiVersion = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3
                                                          : VK_API_VERSION_1_1;
    vk->instance_api = app.apiVersion;
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
        vk_no_driver_hint(hint, sizeof hint);
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
