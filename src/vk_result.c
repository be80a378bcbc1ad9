/* VkResult names and their mapping to vkmha_status, for every Vulkan call's
 * failure message. */
#include "vk_base.h"

#include <string.h>

const char *vk_result_string(VkResult r)
{
    switch (r) {
#define R(x)                                                                            \
    case x:                                                                             \
        return #x;
        R(VK_SUCCESS)
        R(VK_NOT_READY)
        R(VK_TIMEOUT)
        R(VK_INCOMPLETE)
        R(VK_ERROR_OUT_OF_HOST_MEMORY)
        R(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        R(VK_ERROR_INITIALIZATION_FAILED)
        R(VK_ERROR_DEVICE_LOST)
        R(VK_ERROR_MEMORY_MAP_FAILED)
        R(VK_ERROR_LAYER_NOT_PRESENT)
        R(VK_ERROR_EXTENSION_NOT_PRESENT)
        R(VK_ERROR_FEATURE_NOT_PRESENT)
        R(VK_ERROR_INCOMPATIBLE_DRIVER)
        R(VK_ERROR_TOO_MANY_OBJECTS)
        R(VK_ERROR_FORMAT_NOT_SUPPORTED)
        R(VK_ERROR_FRAGMENTED_POOL)
        R(VK_ERROR_OUT_OF_POOL_MEMORY)
        R(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        R(VK_ERROR_FRAGMENTATION)
        R(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
        R(VK_PIPELINE_COMPILE_REQUIRED)
#undef R
    default:
        return "VK_ERROR_UNKNOWN";
    }
}

vkmha_status vk_fail(vk_state *vk, VkResult r, const char *what)
{
    vkmha_status st;
    switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        st = VKMHA_ERROR_OUT_OF_HOST_MEMORY;
        break;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTED_POOL:
    case VK_ERROR_TOO_MANY_OBJECTS:
        st = VKMHA_ERROR_OUT_OF_DEVICE_MEMORY;
        break;
    case VK_ERROR_DEVICE_LOST:
        vk->lost = true;
        st = VKMHA_ERROR_DEVICE_LOST;
        break;
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_INITIALIZATION_FAILED:
        st = VKMHA_ERROR_NO_DEVICE;
        break;
    default:
        st = VKMHA_ERROR_VULKAN;
        break;
    }
    /* Messages name the public call unless `what` already does. */
    const char *call = vk->ctx->call;
    if (call && strncmp(what, "vkmha_", 6) != 0)
        return vkmha__fail(vk->ctx, st, "%s: %s failed: %s", call, what, vk_result_string(r));
    return vkmha__fail(vk->ctx, st, "%s failed: %s", what, vk_result_string(r));
}
