/* A program with its own volk (examples/volk_impl.c compiles volk.c) that
 * links vkmha statically. Before volk's globals were renamed
 * (src/volk_rename.py) this did not link: every volk symbol was defined twice
 * ("multiple definition of vkCreateInstance", ...). */
#include <volk.h>

#include "../util.h"
#define CONSUMER_AFTER_CREATE() t_pin_libraries()
#include "consumer.h"

int main(void)
{
    VkResult r = volkInitialize();
    uint32_t version = volkGetInstanceVersion();
    t_report(r == VK_SUCCESS && version >= VK_API_VERSION_1_1,
             "the program's own volk loads Vulkan %u.%u", VK_API_VERSION_MAJOR(version),
             VK_API_VERSION_MINOR(version));
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    VkInstance instance = VK_NULL_HANDLE;
    uint32_t n = 0;
    r = vkCreateInstance(&ci, NULL, &instance);
    if (r == VK_SUCCESS) {
        volkLoadInstance(instance);
        r = vkEnumeratePhysicalDevices(instance, &n, NULL);
    }
    t_report(r == VK_SUCCESS && n > 0 && volkGetLoadedInstance() == instance,
             "the program's volk globals are its own: instance loaded, %u devices", n);
    t_report(consumer_forward("static + own volk") == 0,
             "vkmha linked statically: a layer forward matches the reference, validation "
             "silent");
    /* vkmha loaded its own tables: the program's volk still points at its
     * own instance. */
    t_report(volkGetLoadedInstance() == instance && vkDestroyInstance != NULL,
             "vkmha left the program's volk state alone");
    if (instance)
        vkDestroyInstance(instance, NULL);
    return t_finish();
}
