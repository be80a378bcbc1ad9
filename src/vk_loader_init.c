/* vk_loader_init: volkInitialize once per process, whichever thread gets
 * there first (a file of its own: see src/vk_loader.c). */
#include "vk_base.h"

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
