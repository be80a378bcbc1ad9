/* The Vulkan loader, through volk compiled into this file with hidden
 * visibility: its globals are vkmha's alone, never the application's. Only the
 * loader entry points (vkGetInstanceProcAddr, vkCreateInstance, ...) are
 * global, set once per process; every instance and device function is loaded
 * into the context's own tables. */
#include "vk_internal.h"

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

#if defined(_WIN32)
#include <windows.h>
static INIT_ONCE loader_once = INIT_ONCE_STATIC_INIT;
static VkResult loader_result = VK_ERROR_INITIALIZATION_FAILED;
static BOOL CALLBACK loader_init_once(PINIT_ONCE once, PVOID param, PVOID *context)
{
    (void)once;
    (void)param;
    (void)context;
    loader_result = volkInitialize();
    return TRUE;
}
VkResult vk_loader_init(void)
{
    InitOnceExecuteOnce(&loader_once, loader_init_once, NULL, NULL);
    return loader_result;
}
#else
#include <pthread.h>
static pthread_once_t loader_once = PTHREAD_ONCE_INIT;
static VkResult loader_result = VK_ERROR_INITIALIZATION_FAILED;
static void loader_init_once(void)
{
    loader_result = volkInitialize();
}
VkResult vk_loader_init(void)
{
    pthread_once(&loader_once, loader_init_once);
    return loader_result;
}
#endif

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
    LOAD(EnumerateDeviceExtensionProperties);
    LOAD(CreateDevice);
    LOAD(GetDeviceProcAddr);
    LOAD(CreateDebugUtilsMessengerEXT);
    LOAD(DestroyDebugUtilsMessengerEXT);
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
