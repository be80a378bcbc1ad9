/* A program that calls Vulkan itself through libvulkan (linked with
 * -lvulkan) and links vkmha statically. Before volk's globals were renamed
 * (src/volk_rename.py), libvkmha.a defined vkEnumerateInstanceVersion & co.
 * as function-pointer variables, the link picked them over libvulkan's
 * functions, and this program's first Vulkan call jumped to a null pointer.
 * It also has functions named as vkmha's internal ones: where the archive
 * localizes them (CONSUMER_LOCALIZED, src/localize_static.py) they must
 * not clash ("multiple definition"). */
#include <vulkan/vulkan.h>

#include "../util.h"
#define CONSUMER_AFTER_CREATE() t_pin_libraries()
#include "consumer.h"

#if CONSUMER_LOCALIZED
int vk_create(int x);
int ref_matmul(int x);
int vk_create(int x)
{
    return x + 1;
}
int ref_matmul(int x)
{
    return 2 * x;
}
#endif

int main(void)
{
    uint32_t version = 0;
    VkResult r = vkEnumerateInstanceVersion(&version);
    t_report(r == VK_SUCCESS && version >= VK_API_VERSION_1_1,
             "the program's own vkEnumerateInstanceVersion (libvulkan) works: %u.%u",
             VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    VkInstance instance = VK_NULL_HANDLE;
    r = vkCreateInstance(&ci, NULL, &instance);
    uint32_t n = 0;
    if (r == VK_SUCCESS)
        r = vkEnumeratePhysicalDevices(instance, &n, NULL);
    t_report(r == VK_SUCCESS && n > 0, "the program's own instance sees %u devices", n);
    t_report(consumer_forward("static + libvulkan") == 0,
             "vkmha linked statically: a layer forward matches the reference, validation "
             "silent");
#if CONSUMER_LOCALIZED
    t_report(vk_create(1) == 2 && ref_matmul(3) == 6,
             "the program's own vk_create and ref_matmul link beside vkmha's private ones");
#endif
    if (instance)
        vkDestroyInstance(instance, NULL);
    return t_finish();
}
