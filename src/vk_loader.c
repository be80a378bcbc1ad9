/* The Vulkan loader, through volk compiled into this file with hidden
 * visibility: its globals are vkmha's alone, never the application's. Only the
 * loader entry points (vkGetInstanceProcAddr, vkCreateInstance, ...) are
 * global, set once per process; every instance and device function is loaded
 * into the context's own tables. */
#include "vk_base.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
#include <volk.c>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/* vk_loader_init is in src/vk_loader_init.c: on Windows it needs windows.h,
 * whose FARPROC volk.c declares again (differently) when compiled for
 * Windows, so the two cannot share a file. */

void vk_load_global_table(PFN_vkGetInstanceProcAddr gipa, vk_global_table *t)
{
    t->GetInstanceProcAddr = gipa ? gipa : vkGetInstanceProcAddr;
#define LOAD(name) t->name = (PFN_vk##name)t->GetInstanceProcAddr(VK_NULL_HANDLE, "vk" #name)
    LOAD(CreateInstance);
    LOAD(EnumerateInstanceExtensionProperties);
    LOAD(EnumerateInstanceLayerProperties);
    LOAD(EnumerateInstanceVersion);
#undef LOAD
}

void vk_load_instance_table(PFN_vkGetInstanceProcAddr gipa, VkInstance instance,
                            vk_instance_table *t)
{
#define LOAD(name) t->name = (PFN_vk##name)gipa(instance, "vk" #name)
    LOAD(DestroyInstance);
    LOAD(EnumeratePhysicalDevices);
    LOAD(GetPhysicalDeviceProperties);
    LOAD(GetPhysicalDeviceProperties2);
    LOAD(GetPhysicalDeviceFeatures2);
    LOAD(GetPhysicalDeviceFormatProperties);
    LOAD(GetPhysicalDeviceQueueFamilyProperties);
    LOAD(GetPhysicalDeviceMemoryProperties);
    LOAD(GetPhysicalDeviceMemoryProperties2);
    LOAD(EnumerateDeviceExtensionProperties);
    LOAD(CreateDevice);
    LOAD(GetDeviceProcAddr);
    LOAD(CreateDebugUtilsMessengerEXT);
    LOAD(DestroyDebugUtilsMessengerEXT);
    LOAD(GetPhysicalDeviceCooperativeMatrixPropertiesKHR);
    LOAD(GetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV);
#undef LOAD
}

typedef struct device_loader {
    VkDevice device;
    PFN_vkGetDeviceProcAddr get;
} device_loader;

static PFN_vkVoidFunction device_proc(void *context, const char *name)
{
    const device_loader *l = (const device_loader *)context;
    return l->get(l->device, name);
}

void vk_load_device_table(VkDevice device, PFN_vkGetDeviceProcAddr get,
                          struct VolkDeviceTable *table)
{
    device_loader l = {device, get};
    volkGenLoadDeviceTable(table, &l, device_proc);
}
