/*
 * examples/embed.c: vkmha as a guest in an engine.
 *
 * The "engine" owns everything: its Vulkan instance (with the validation
 * layer and synchronization validation), device, queue, a buffer arena, a
 * compute shader of its own, and its command buffer. It hands its objects to
 * vkmha, wraps slices of its arena as tensors (at non-zero offsets), and
 * records into one command buffer:
 *
 *     engine dispatch   query = 2 * query            (its own shader)
 *     barrier           compute write -> compute read   (vkmha's "before")
 *     vkmha_mha_record  out1 = MHA(query)             (fused attention)
 *     vkmha_mha_record  out2 = MHA(query)             (unfused, same buffer twice)
 *     barrier           compute write -> compute read   (vkmha's "after")
 *     engine dispatch   out1 = out1 + 1
 *     barrier           compute write -> host read
 *
 * then submits it itself and checks both outputs against vkmha's reference
 * backend run on the host. Then more frames: the ops recorded the same
 * way (split heads, attention, merge heads, matmul, softmax), a frame
 * recorded while a larger call on vkmha's own queue outgrows the scratch
 * buffers it uses (they are retired until vkmha_context_trim), and a
 * decoder's steps, one token per frame, through a KV cache. Along the way
 * it proves what an engine relies on: vkmha used the engine's loader (a
 * vkGetInstanceProcAddr that wraps vkQueueSubmit), called the queue lock
 * around each of its submits, sent every Vulkan allocation through the
 * engine's VkAllocationCallbacks and every host allocation through its
 * vkmha_allocator, freed all of them at destroy, and left the engine's
 * objects alive and valid.
 *
 * A control at the end clears vkmha's output without the barrier after
 * vkmha and expects synchronization validation to report the hazard.
 *
 * Output: one TAP line per check (run as a test by meson). Exit status 0
 * when all pass.
 */
#include <stdalign.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <volk.h>

#include "vkmha_vulkan.h"

#include "engine_scale.spv.h" /* the engine's shader, built by meson */

/* ---- checks ----------------------------------------------------------------- */

static int n_checks, n_failed;

static bool check(bool ok, const char *fmt, ...)
{
    va_list ap;
    n_checks++;
    n_failed += !ok;
    printf("%s %d - ", ok ? "ok" : "not ok", n_checks);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    return ok;
}

#define VK_CHECK(call)                                                                    \
    do {                                                                                  \
        VkResult r_ = (call);                                                             \
        if (r_ != VK_SUCCESS) {                                                           \
            printf("Bail out! %s failed: %d\n", #call, (int)r_);                          \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define VKMHA_CHECK(call)                                                                 \
    do {                                                                                  \
        vkmha_status s_ = (call);                                                         \
        if (s_ != VKMHA_SUCCESS) {                                                        \
            printf("Bail out! %s failed: %s\n", #call, vkmha_status_string(s_));          \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* A context creation: also says why it failed (there is no context yet to
 * ask, so vkmha keeps the message for the thread). */
#define VKMHA_CREATE_CHECK(call)                                                          \
    do {                                                                                  \
        vkmha_status s_ = (call);                                                         \
        if (s_ != VKMHA_SUCCESS) {                                                        \
            printf("Bail out! %s failed: %s: %s\n", #call, vkmha_status_string(s_),      \
                   vkmha_context_last_error(NULL));                                       \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* ---- the engine's allocators, counting --------------------------------------- */

/* Every block carries its size in a 64-byte header (so realloc can copy). */
#define HEADER 64

typedef struct counter {
    long live, total;
} counter;

static void *counted_alloc(counter *c, size_t size, size_t alignment)
{
    if (alignment > HEADER)
        return NULL;
    unsigned char *p = aligned_alloc(HEADER, HEADER + ((size + HEADER - 1) / HEADER) * HEADER);
    if (!p)
        return NULL;
    memcpy(p, &size, sizeof size);
    c->live++;
    c->total++;
    return p + HEADER;
}

static void counted_free(counter *c, void *p)
{
    if (!p)
        return;
    c->live--;
    free((unsigned char *)p - HEADER);
}

static void *counted_realloc(counter *c, void *old, size_t size, size_t alignment)
{
    void *p = counted_alloc(c, size, alignment);
    if (p && old) {
        size_t old_size;
        memcpy(&old_size, (unsigned char *)old - HEADER, sizeof old_size);
        memcpy(p, old, old_size < size ? old_size : size);
        counted_free(c, old);
    }
    return p;
}

static counter vk_allocs, host_allocs;

static VKAPI_ATTR void *VKAPI_CALL vk_alloc_fn(void *user, size_t size, size_t alignment,
                                              VkSystemAllocationScope scope)
{
    (void)scope;
    return counted_alloc(user, size, alignment);
}
static VKAPI_ATTR void *VKAPI_CALL vk_realloc_fn(void *user, void *p, size_t size,
                                                size_t alignment, VkSystemAllocationScope scope)
{
    (void)scope;
    if (size == 0) {
        counted_free(user, p);
        return NULL;
    }
    return counted_realloc(user, p, size, alignment);
}
static VKAPI_ATTR void VKAPI_CALL vk_free_fn(void *user, void *p)
{
    counted_free(user, p);
}

static void *host_alloc(void *user, size_t size, size_t alignment)
{
    return counted_alloc(user, size, alignment);
}
static void *host_realloc(void *user, void *p, size_t size, size_t alignment)
{
    return counted_realloc(user, p, size, alignment);
}
static void host_free(void *user, void *p)
{
    counted_free(user, p);
}

/* ---- the engine's loader: counts vkQueueSubmit, checks the lock is held ----- */

static bool queue_locked;
static int locks, unlocks, submits_locked, submits_unlocked;

static void queue_lock(void *user)
{
    (void)user;
    queue_locked = true; /* a real engine takes its queue mutex here */
    locks++;
}
static void queue_unlock(void *user)
{
    (void)user;
    queue_locked = false;
    unlocks++;
}

static PFN_vkQueueSubmit real_queue_submit;
static PFN_vkGetDeviceProcAddr real_get_device_proc_addr;

static VKAPI_ATTR VkResult VKAPI_CALL engine_queue_submit(VkQueue q, uint32_t n,
                                                          const VkSubmitInfo *si, VkFence f)
{
    if (queue_locked)
        submits_locked++;
    else
        submits_unlocked++;
    return real_queue_submit(q, n, si, f);
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL engine_get_device_proc_addr(VkDevice d,
                                                                            const char *name)
{
    if (strcmp(name, "vkQueueSubmit") == 0)
        return (PFN_vkVoidFunction)engine_queue_submit;
    return real_get_device_proc_addr(d, name);
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL engine_get_instance_proc_addr(VkInstance i,
                                                                              const char *name)
{
    if (strcmp(name, "vkGetDeviceProcAddr") == 0)
        return (PFN_vkVoidFunction)engine_get_device_proc_addr;
    return vkGetInstanceProcAddr(i, name);
}

/* ---- the engine's Vulkan ------------------------------------------------------ */

static int validation_messages;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    (void)user;
    if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        validation_messages++;
        printf("# validation: %s\n", data->pMessage);
    }
    return VK_FALSE;
}

typedef struct engine {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    bool storage16; /* storageBuffer16BitAccess enabled */
    bool sparse;    /* sparseBinding enabled, on a queue family that binds sparse memory */
    uint32_t family;
    VkDevice device;
    VkQueue queue;
    VkBuffer arena;
    VkDeviceMemory arena_mem;
    float *arena_map;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline scale;
    VkDescriptorPool pool;
    VkCommandPool cmd_pool;
    VkCommandBuffer cmd;
    VkFence fence;
} engine;

#define ARENA_BYTES (4u << 20)

static void engine_create(engine *e)
{
    VK_CHECK(volkInitialize());
    VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    VkValidationFeaturesEXT features = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
    features.enabledValidationFeatureCount = 1;
    features.pEnabledValidationFeatures = &sync;
    VkDebugUtilsMessengerCreateInfoEXT mi = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
    mi.pfnUserCallback = on_validation;
    features.pNext = &mi;
    const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
    const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME,
                          VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "vkmha embed example";
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pNext = &features;
    ci.pApplicationInfo = &app;
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = layers;
    ci.enabledExtensionCount = 2;
    ci.ppEnabledExtensionNames = exts;
    VK_CHECK(vkCreateInstance(&ci, NULL, &e->instance));
    volkLoadInstanceOnly(e->instance);
    VK_CHECK(vkCreateDebugUtilsMessengerEXT(e->instance, &mi, NULL, &e->messenger));

    uint32_t n = 1;
    VkResult r = vkEnumeratePhysicalDevices(e->instance, &n, &e->phys);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) {
        printf("Bail out! no Vulkan device\n");
        exit(1);
    }
    vkGetPhysicalDeviceProperties(e->phys, &e->props);
    VkQueueFamilyProperties qf[16];
    uint32_t nq = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(e->phys, &nq, qf);
    e->family = UINT32_MAX;
    for (uint32_t i = 0; i < nq && e->family == UINT32_MAX; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            e->family = i;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qi.queueFamilyIndex = e->family;
    qi.queueCount = 1;
    qi.pQueuePriorities = &priority;
    const char *dev_exts[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
    /* 16-bit storage where the device has it (Vulkan 1.1 core, optional); the
     * engine tells vkmha (vkmha_vulkan_desc.storage_buffer_16bit_access). */
    VkPhysicalDevice16BitStorageFeatures s16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &s16};
    vkGetPhysicalDeviceFeatures2(e->phys, &f2);
    e->storage16 = s16.storageBuffer16BitAccess;
    /* Sparse binding too, where the queue family has it: vkmha then makes
     * tensors past maxMemoryAllocationSize (vkmha_vulkan_desc.sparse_binding). */
    e->sparse = f2.features.sparseBinding &&
                (qf[e->family].queueFlags & VK_QUEUE_SPARSE_BINDING_BIT);
    const VkPhysicalDeviceFeatures sparse_on = {.sparseBinding = e->sparse};
    VkPhysicalDevice16BitStorageFeatures s16_on = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .storageBuffer16BitAccess = e->storage16};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    di.pNext = &s16_on;
    di.pEnabledFeatures = &sparse_on;
    di.queueCreateInfoCount = 1;
    di.pQueueCreateInfos = &qi;
    di.enabledExtensionCount = 1;
    di.ppEnabledExtensionNames = dev_exts;
    VK_CHECK(vkCreateDevice(e->phys, &di, NULL, &e->device));
    volkLoadDevice(e->device);
    vkGetDeviceQueue(e->device, e->family, 0, &e->queue);

    /* The arena: one host-visible coherent buffer the engine maps. */
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = ARENA_BYTES;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    VK_CHECK(vkCreateBuffer(e->device, &bi, NULL, &e->arena));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(e->device, e->arena, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(e->phys, &mp);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; i++)
        if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want)
            type = i;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type;
    VK_CHECK(vkAllocateMemory(e->device, &ai, NULL, &e->arena_mem));
    VK_CHECK(vkBindBufferMemory(e->device, e->arena, e->arena_mem, 0));
    VK_CHECK(vkMapMemory(e->device, e->arena_mem, 0, VK_WHOLE_SIZE, 0, (void **)&e->arena_map));

    /* Its own compute shader: x[i] = x[i] * mul + add over a range. */
    VkDescriptorSetLayoutBinding b = {0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                      VK_SHADER_STAGE_COMPUTE_BIT, NULL};
    VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    li.bindingCount = 1;
    li.pBindings = &b;
    VK_CHECK(vkCreateDescriptorSetLayout(e->device, &li, NULL, &e->set_layout));
    VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 12};
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &e->set_layout;
    pli.pushConstantRangeCount = 1;
    pli.pPushConstantRanges = &pr;
    VK_CHECK(vkCreatePipelineLayout(e->device, &pli, NULL, &e->layout));
    VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smi.codeSize = sizeof engine_scale_spv;
    smi.pCode = engine_scale_spv;
    VkShaderModule module;
    VK_CHECK(vkCreateShaderModule(e->device, &smi, NULL, &module));
    VkComputePipelineCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cpi.stage = (VkPipelineShaderStageCreateInfo){.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cpi.stage.module = module;
    cpi.stage.pName = "main";
    cpi.layout = e->layout;
    VK_CHECK(vkCreateComputePipelines(e->device, VK_NULL_HANDLE, 1, &cpi, NULL, &e->scale));
    vkDestroyShaderModule(e->device, module, NULL);
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 4};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpi.maxSets = 4;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &ps;
    VK_CHECK(vkCreateDescriptorPool(e->device, &dpi, NULL, &e->pool));

    VkCommandPoolCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    cpci.queueFamilyIndex = e->family;
    VK_CHECK(vkCreateCommandPool(e->device, &cpci, NULL, &e->cmd_pool));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = e->cmd_pool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VK_CHECK(vkAllocateCommandBuffers(e->device, &cai, &e->cmd));
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vkCreateFence(e->device, &fi, NULL, &e->fence));
}

static void engine_destroy(engine *e)
{
    vkDestroyFence(e->device, e->fence, NULL);
    vkDestroyCommandPool(e->device, e->cmd_pool, NULL);
    vkDestroyDescriptorPool(e->device, e->pool, NULL);
    vkDestroyPipeline(e->device, e->scale, NULL);
    vkDestroyPipelineLayout(e->device, e->layout, NULL);
    vkDestroyDescriptorSetLayout(e->device, e->set_layout, NULL);
    vkDestroyBuffer(e->device, e->arena, NULL);
    vkFreeMemory(e->device, e->arena_mem, NULL);
    vkDestroyDevice(e->device, NULL);
    vkDestroyDebugUtilsMessengerEXT(e->instance, e->messenger, NULL);
    vkDestroyInstance(e->instance, NULL);
}

/* Submits the engine's command buffer under the queue lock (vkmha submits
 * on the same queue) and waits for its fence. */
static void engine_submit_wait(engine *e)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &e->cmd;
    queue_lock(NULL);
    VK_CHECK(vkQueueSubmit(e->queue, 1, &si, e->fence));
    queue_unlock(NULL);
    VK_CHECK(vkWaitForFences(e->device, 1, &e->fence, VK_TRUE, UINT64_MAX));
    VK_CHECK(vkResetFences(e->device, 1, &e->fence));
}

/* Records the engine's shader over `count` floats at byte `offset`. */
static void engine_scale(engine *e, VkDeviceSize offset, uint32_t count, float mul, float add)
{
    VkDescriptorSet set;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = e->pool;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &e->set_layout;
    VK_CHECK(vkAllocateDescriptorSets(e->device, &ai, &set));
    VkDescriptorBufferInfo info = {e->arena, offset, (VkDeviceSize)count * 4};
    VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w.dstSet = set;
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &info;
    vkUpdateDescriptorSets(e->device, 1, &w, 0, NULL);
    struct { uint32_t n; float mul, add; } push = {count, mul, add};
    vkCmdBindPipeline(e->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, e->scale);
    vkCmdBindDescriptorSets(e->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, e->layout, 0, 1, &set, 0,
                            NULL);
    vkCmdPushConstants(e->cmd, e->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
    vkCmdDispatch(e->cmd, (count + 63) / 64, 1, 1);
}

static void memory_barrier(engine *e, VkPipelineStageFlags src, VkAccessFlags src_access,
                           VkPipelineStageFlags dst, VkAccessFlags dst_access)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = src_access;
    mb.dstAccessMask = dst_access;
    vkCmdPipelineBarrier(e->cmd, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* ---- the demo --------------------------------------------------------------- */

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) / (double)(1ull << 24)) - 0.5f;
}

static VkDeviceSize align_up(VkDeviceSize x, VkDeviceSize a)
{
    return (x + a - 1) / a * a;
}

/* Element-wise |got - want| <= atol + rtol * |want|; prints the worst. */
static bool close_to(const float *got, const float *want, size_t n, double atol, double rtol,
                     const char *what)
{
    double worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - (double)want[i]);
        double excess = err - (atol + rtol * fabs((double)want[i]));
        if (!(excess <= worst)) {
            worst = excess;
            at = i;
        }
    }
    if (worst > 0.0 || isnan(worst))
        printf("# %s[%zu] = %.9g, reference %.9g\n", what, at, (double)got[at],
               (double)want[at]);
    return !(worst > 0.0) && !isnan(worst);
}

int main(void)
{
    /* A layer the size of a small model's: d_model 96, 6 heads of 16, a
     * sequence of 77 (no tile size divides it), batch 2. */
    enum { D = 96, H = 6, L = 77, B = 2 };
    const uint32_t n_act = B * L * D, n_w = D * D;
    setvbuf(stdout, NULL, _IOLBF, 0); /* every TAP line out, even before a crash */
    engine e = {0};
    engine_create(&e);
    real_get_device_proc_addr = vkGetDeviceProcAddr;
    real_queue_submit = vkQueueSubmit;

    /* 1. vkmha borrows the engine's objects, loader and allocators. */
    const char *dev_exts[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
    VkAllocationCallbacks callbacks = {&vk_allocs, vk_alloc_fn, vk_realloc_fn, vk_free_fn,
                                       NULL, NULL};
    vkmha_vulkan_desc vd = {0};
    vd.get_instance_proc_addr = engine_get_instance_proc_addr;
    vd.instance = e.instance;
    vd.physical_device = e.phys;
    vd.device = e.device;
    vd.queue_family_index = e.family;
    vd.queue = e.queue;
    vd.instance_api_version = VK_API_VERSION_1_1;
    vd.enabled_device_extensions = dev_exts;
    vd.enabled_device_extension_count = 1;
    vd.storage_buffer_16bit_access = e.storage16;
    vd.sparse_binding = e.sparse;
    vd.allocation_callbacks = &callbacks;
    vd.queue_lock = queue_lock;
    vd.queue_unlock = queue_unlock;
    vkmha_allocator host = {host_alloc, host_realloc, host_free, &host_allocs};
    vkmha_context_desc cd = {0};
    cd.vulkan = &vd;
    cd.allocator = &host;
    vkmha_context *ctx = NULL;
    VKMHA_CREATE_CHECK(vkmha_context_create(&cd, &ctx));
    vkmha_context_info info;
    VKMHA_CHECK(vkmha_context_get_info(ctx, &info));
    /* The test suite runs this example twice: with push descriptors, and with
     * VKMHA_NO_PUSH_DESCRIPTORS=1 (descriptor sets kept until the trim). */
    const char *no_push = getenv("VKMHA_NO_PUSH_DESCRIPTORS"), *profile = getenv("VKMHA_PROFILE");
    /* The mobile limits profile (VKMHA_PROFILE=mobile) turns push
     * descriptors and 16-bit storage off too. */
    const bool mobile = profile && strcmp(profile, "mobile") == 0;
    const bool want_push = (!no_push || !*no_push || strcmp(no_push, "0") == 0) && !mobile;
    check(info.external_device && info.push_descriptors == want_push,
          "vkmha borrows the engine's device (%s) and %s", info.device.name,
          want_push ? "pushes descriptors" : "records on descriptor sets of its own");
    check(info.native_16bit_storage == (e.storage16 && !mobile),
          "vkmha uses 16-bit storage exactly when the engine enabled it (%d)%s", e.storage16,
          mobile ? " and the mobile profile allows it (no)" : "");
    check(info.sparse_tensors == e.sparse &&
              info.max_tensor_bytes >= info.device.max_allocation_size,
          "vkmha makes sparse tensors exactly when the engine enabled sparse binding (%d): "
          "tensors up to %llu bytes",
          e.sparse, (unsigned long long)info.max_tensor_bytes);
    {
        /* fp16 on the engine's device: [1 2; 3 4] [5 6; 7 8] = [19 22; 43 50],
         * exact in fp16 (the bits of each value). */
        const uint16_t a16[4] = {0x3c00, 0x4000, 0x4200, 0x4400};
        const uint16_t b16[4] = {0x4500, 0x4600, 0x4700, 0x4800};
        const uint16_t want16[4] = {0x4cc0, 0x4d80, 0x5160, 0x5240};
        uint16_t got16[4] = {0};
        const vkmha_tensor_desc td = {VKMHA_DTYPE_F16, 2, {2, 2}};
        vkmha_tensor *ta = NULL, *tb = NULL, *tc = NULL;
        vkmha_matmul_desc mm = {0};
        mm.m = mm.n = mm.k = 2;
        VKMHA_CHECK(vkmha_tensor_create(ctx, &td, &ta));
        VKMHA_CHECK(vkmha_tensor_create(ctx, &td, &tb));
        VKMHA_CHECK(vkmha_tensor_create(ctx, &td, &tc));
        VKMHA_CHECK(vkmha_tensor_upload(ta, 0, a16, sizeof a16));
        VKMHA_CHECK(vkmha_tensor_upload(tb, 0, b16, sizeof b16));
        VKMHA_CHECK(vkmha_matmul_tensor(ctx, &mm, ta, tb, NULL, tc));
        VKMHA_CHECK(vkmha_tensor_download(tc, 0, got16, sizeof got16));
        check(memcmp(got16, want16, sizeof got16) == 0,
              "an fp16 matmul on the engine's device (%s 16-bit storage)",
              info.native_16bit_storage ? "native" : "packed");
        vkmha_tensor_destroy(ta);
        vkmha_tensor_destroy(tb);
        vkmha_tensor_destroy(tc);
    }

    /* 2. The layer, with its weights uploaded once (vkmha's own submit). */
    uint64_t seed = 42;
    float *w = malloc(4 * n_w * sizeof(float));
    float *query = malloc(n_act * sizeof(float));
    for (uint32_t i = 0; i < 4 * n_w; i++)
        w[i] = frand(&seed) * 0.2f;
    for (uint32_t i = 0; i < n_act; i++)
        query[i] = frand(&seed);
    vkmha_mha_desc md = {0};
    md.d_model = D;
    md.n_head = H;
    md.w_q = w;
    md.w_k = w + n_w;
    md.w_v = w + 2 * n_w;
    md.w_o = w + 3 * n_w;
    vkmha_mha *mha = NULL;
    VKMHA_CHECK(vkmha_mha_create(ctx, &md, &mha));

    /* 3. Slices of the engine's arena as tensors, at non-zero offsets. */
    const VkDeviceSize align = e.props.limits.minStorageBufferOffsetAlignment > 256
                                   ? e.props.limits.minStorageBufferOffsetAlignment
                                   : 256;
    const VkDeviceSize bytes = (VkDeviceSize)n_act * 4;
    const VkDeviceSize q_off = align, o1_off = align_up(q_off + bytes, align),
                       o2_off = align_up(o1_off + bytes, align);
    vkmha_tensor_desc td = {VKMHA_DTYPE_F32, 3, {B, L, D, 0}};
    vkmha_tensor *tq, *to1, *to2;
    VKMHA_CHECK(vkmha_tensor_wrap(ctx, &td, e.arena, q_off, bytes, &tq));
    VKMHA_CHECK(vkmha_tensor_wrap(ctx, &td, e.arena, o1_off, bytes, &to1));
    VKMHA_CHECK(vkmha_tensor_wrap(ctx, &td, e.arena, o2_off, bytes, &to2));
    memcpy((char *)e.arena_map + q_off, query, bytes);

    /* 4. One command buffer: the engine's work around two MHA records. */
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VK_CHECK(vkBeginCommandBuffer(e.cmd, &bi));
    memory_barrier(&e, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_WRITE_BIT,
                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                   VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    engine_scale(&e, q_off, n_act, 2.0f, 0.0f);
    /* vkmha's "before": the engine's writes of the input, visible to compute. */
    memory_barrier(&e, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    vkmha_mha_tensors io = {B, L, 0, tq, tq, tq, NULL, to1, NULL,
                            VKMHA_ATTENTION_PATH_FUSED, 0, NULL, 0, NULL, NULL};
    VKMHA_CHECK(vkmha_mha_record(mha, e.cmd, &io));
    io.out = to2;
    io.attention_path = VKMHA_ATTENTION_PATH_UNFUSED;
    VKMHA_CHECK(vkmha_mha_record(mha, e.cmd, &io)); /* nothing needed in between */
    /* vkmha's "after": its output writes, visible to the engine's shader. */
    memory_barrier(&e, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                   VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    engine_scale(&e, o1_off, n_act, 1.0f, 1.0f);
    memory_barrier(&e, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                   VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    VK_CHECK(vkEndCommandBuffer(e.cmd));
    const int vkmha_submits = submits_locked;
    engine_submit_wait(&e);

    /* 5. The same math on vkmha's reference backend, on the host. */
    vkmha_context *ref_ctx = NULL;
    vkmha_context_desc rd = {0};
    rd.backend = VKMHA_BACKEND_REFERENCE;
    VKMHA_CREATE_CHECK(vkmha_context_create(&rd, &ref_ctx));
    vkmha_mha *ref = NULL;
    VKMHA_CHECK(vkmha_mha_create(ref_ctx, &md, &ref));
    float *doubled = malloc(n_act * sizeof(float)), *want = malloc(n_act * sizeof(float));
    float *want1 = malloc(n_act * sizeof(float));
    for (uint32_t i = 0; i < n_act; i++)
        doubled[i] = 2.0f * query[i];
    vkmha_mha_io rio = {B, L, 0, doubled, doubled, doubled, NULL, want, NULL, 0, 0, 0, NULL, 0, NULL, NULL};
    VKMHA_CHECK(vkmha_mha_forward(ref, &rio));
    for (uint32_t i = 0; i < n_act; i++)
        want1[i] = want[i] + 1.0f;
    /* fp32 on the device against double accumulation: |diff| <= 1e-5 + 1e-4 |ref|. */
    check(close_to((const float *)((char *)e.arena_map + o1_off), want1, n_act, 1e-5, 1e-4,
                   "out1"),
          "fused MHA recorded between the engine's dispatches matches the reference "
          "(atol 1e-5, rtol 1e-4)");
    check(close_to((const float *)((char *)e.arena_map + o2_off), want, n_act, 1e-5, 1e-4,
                   "out2"),
          "unfused MHA recorded into the same command buffer matches the reference");
    check(locks == unlocks && locks >= vkmha_submits + 1 && vkmha_submits >= 1 &&
              submits_unlocked == 0,
          "vkmha submitted %d times, each inside the queue lock (%d locks, %d unlocks, %d "
          "unlocked submits)",
          vkmha_submits, locks, unlocks, submits_unlocked);

    /* 5b. A frame in flight while vkmha grows: record a forward, then, before
     * the engine submits it, a larger batch on vkmha's own queue outgrows the
     * scratch buffers the recording uses. They are retired, not freed, so
     * the recorded work still runs on them; vkmha_context_trim frees them
     * once the engine's fence says the frame is done. */
    VK_CHECK(vkResetCommandPool(e.device, e.cmd_pool, 0));
    VK_CHECK(vkResetDescriptorPool(e.device, e.pool, 0));
    memcpy((char *)e.arena_map + q_off, doubled, bytes);
    VK_CHECK(vkBeginCommandBuffer(e.cmd, &bi));
    memory_barrier(&e, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_WRITE_BIT,
                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    io.out = to2;
    io.attention_path = VKMHA_ATTENTION_PATH_AUTO;
    VKMHA_CHECK(vkmha_mha_record(mha, e.cmd, &io));
    memory_barrier(&e, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                   VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    VK_CHECK(vkEndCommandBuffer(e.cmd));
    vkmha_tensor_desc big_desc = {VKMHA_DTYPE_F32, 3, {4 * B, L, D, 0}};
    vkmha_tensor *big_in, *big_out;
    VKMHA_CHECK(vkmha_tensor_create(ctx, &big_desc, &big_in));
    VKMHA_CHECK(vkmha_tensor_create(ctx, &big_desc, &big_out));
    float *big = malloc(4 * bytes);
    for (int i = 0; i < 4; i++)
        memcpy((char *)big + i * bytes, doubled, bytes);
    VKMHA_CHECK(vkmha_tensor_upload(big_in, 0, big, 4 * bytes));
    vkmha_mha_tensors big_io = {4 * B, L, 0, big_in, big_in, big_in, NULL, big_out, NULL, 0, 0, NULL, 0, NULL, NULL};
    VKMHA_CHECK(vkmha_mha_forward_tensor(mha, &big_io));
    engine_submit_wait(&e);
    VKMHA_CHECK(vkmha_tensor_download(big_out, 3 * bytes, big, bytes));
    vkmha_context_info grown, trimmed;
    VKMHA_CHECK(vkmha_context_get_info(ctx, &grown));
    VKMHA_CHECK(vkmha_context_trim(ctx));
    VKMHA_CHECK(vkmha_context_get_info(ctx, &trimmed));
    check(close_to((const float *)((char *)e.arena_map + o2_off), want, n_act, 1e-5, 1e-4,
                   "out2") &&
              close_to(big, want, n_act, 1e-5, 1e-4, "big batch"),
          "a recorded frame still computes after a larger call outgrew its scratch buffers "
          "(retired until vkmha_context_trim: %llu -> %llu bytes of device memory)",
          (unsigned long long)grown.device_memory_bytes,
          (unsigned long long)trimmed.device_memory_bytes);
    vkmha_tensor_destroy(big_in);
    vkmha_tensor_destroy(big_out);
    free(big);

    /* 5c. The ops record too: an attention block built from them (split the
     * heads of the doubled query, attend, merge; then a matmul and a softmax
     * over the merged rows), recorded into one command buffer with no
     * barrier between vkmha calls, checked against the reference backend. */
    {
        const uint32_t dk = D / H;
        vkmha_tensor_desc flat = {VKMHA_DTYPE_F32, 1, {n_act}};
        vkmha_tensor_desc heads_desc = {VKMHA_DTYPE_F32, 4, {B, H, L, dk}};
        vkmha_tensor_desc rows_desc = {VKMHA_DTYPE_F32, 2, {B * L, D}};
        vkmha_tensor *h, *att, *merged, *proj, *soft, *wt;
        VKMHA_CHECK(vkmha_tensor_create(ctx, &heads_desc, &h));
        VKMHA_CHECK(vkmha_tensor_create(ctx, &heads_desc, &att));
        VKMHA_CHECK(vkmha_tensor_create(ctx, &flat, &merged));
        VKMHA_CHECK(vkmha_tensor_create(ctx, &rows_desc, &proj));
        VKMHA_CHECK(vkmha_tensor_create(ctx, &rows_desc, &soft));
        VKMHA_CHECK(vkmha_tensor_create(ctx, &rows_desc, &wt));
        VKMHA_CHECK(vkmha_tensor_upload(wt, 0, w, (uint64_t)n_w * 4));
        const vkmha_heads_desc hd = {B, L, H, dk, 0};
        const vkmha_attention_desc ad = {B, H, 0, L, L, dk, dk, 0, 0, 0, 0};
        const vkmha_matmul_desc mmd = {.batch = 1, .m = B * L, .n = D, .k = D, .op_b = VKMHA_OP_T};
        const vkmha_softmax_desc sd = {1, 1, B * L, D, 0, 0};
        const vkmha_tensor_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
        memcpy((char *)e.arena_map + q_off, doubled, bytes);
        VK_CHECK(vkResetCommandPool(e.device, e.cmd_pool, 0));
        VK_CHECK(vkBeginCommandBuffer(e.cmd, &bi));
        memory_barrier(&e, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_WRITE_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
        VKMHA_CHECK(vkmha_split_heads_record(ctx, e.cmd, &hd, tq, h));
        VKMHA_CHECK(vkmha_attention_record(ctx, e.cmd, &ad, h, h, h, &causal, att, NULL));
        VKMHA_CHECK(vkmha_merge_heads_record(ctx, e.cmd, &hd, att, merged));
        VKMHA_CHECK(vkmha_matmul_record(ctx, e.cmd, &mmd, merged, wt, NULL, proj));
        VKMHA_CHECK(vkmha_softmax_record(ctx, e.cmd, &sd, proj, NULL, soft));
        VK_CHECK(vkEndCommandBuffer(e.cmd));
        engine_submit_wait(&e);
        /* vkmha_tensor_download orders itself after earlier work on the queue. */
        float *got = malloc(bytes), *r_h = malloc(bytes), *r_att = malloc(bytes),
              *r_m = malloc(bytes), *r_p = malloc(bytes), *r_s = malloc(bytes);
        VKMHA_CHECK(vkmha_tensor_download(soft, 0, got, bytes));
        const vkmha_mask r_causal = {.kinds = VKMHA_MASK_CAUSAL};
        VKMHA_CHECK(vkmha_split_heads(ref_ctx, &hd, doubled, r_h));
        VKMHA_CHECK(vkmha_attention(ref_ctx, &ad, r_h, r_h, r_h, &r_causal, r_att, NULL));
        VKMHA_CHECK(vkmha_merge_heads(ref_ctx, &hd, r_att, r_m));
        VKMHA_CHECK(vkmha_matmul(ref_ctx, &mmd, r_m, w, NULL, r_p));
        VKMHA_CHECK(vkmha_softmax(ref_ctx, &sd, r_p, NULL, r_s));
        check(close_to(got, r_s, n_act, 1e-6, 1e-4, "ops"),
              "split heads, causal attention, merge heads, matmul and softmax recorded with "
              "vkmha_*_record match the reference (atol 1e-6, rtol 1e-4)");
        vkmha_tensor *made[] = {h, att, merged, proj, soft, wt};
        for (int i = 0; i < 6; i++)
            vkmha_tensor_destroy(made[i]);
        free(got);
        free(r_h);
        free(r_att);
        free(r_m);
        free(r_p);
        free(r_s);
    }

    /* 5d. A decoder in the engine's frames: a KV cache of the layer, one
     * token per frame recorded with vkmha_mha_record (the cache's length
     * advances when the step is recorded), against the reference layer's
     * cached steps on the host. */
    {
        enum { STEPS = 4 };
        vkmha_kv_cache *cache = NULL, *rcache = NULL;
        const vkmha_kv_cache_desc kd = {.batch = 1, .capacity = STEPS, .dtype = VKMHA_DTYPE_F32};
        VKMHA_CHECK(vkmha_kv_cache_create(mha, &kd, &cache));
        VKMHA_CHECK(vkmha_kv_cache_create(ref, &kd, &rcache));
        vkmha_tensor_desc tok = {VKMHA_DTYPE_F32, 3, {1, 1, D, 0}};
        vkmha_tensor *tx, *ty;
        VKMHA_CHECK(vkmha_tensor_create(ctx, &tok, &tx));
        VKMHA_CHECK(vkmha_tensor_create(ctx, &tok, &ty));
        const vkmha_tensor_mask t_causal = {.kinds = VKMHA_MASK_CAUSAL};
        const vkmha_mask r_causal = {.kinds = VKMHA_MASK_CAUSAL};
        float *got = malloc(D * sizeof(float)), *want_s = malloc(D * sizeof(float));
        bool ok = got && want_s;
        for (uint32_t s = 0; ok && s < STEPS; s++) {
            const float *x = doubled + (size_t)s * D; /* the next token */
            VKMHA_CHECK(vkmha_tensor_upload(tx, 0, x, D * sizeof(float)));
            VK_CHECK(vkResetCommandPool(e.device, e.cmd_pool, 0));
            VK_CHECK(vkBeginCommandBuffer(e.cmd, &bi));
            vkmha_mha_tensors step = {1, 1, 0, tx, tx, tx, &t_causal, ty, NULL, 0, 0, cache, 0, NULL, NULL};
            VKMHA_CHECK(vkmha_mha_record(mha, e.cmd, &step));
            VK_CHECK(vkEndCommandBuffer(e.cmd));
            engine_submit_wait(&e);
            VKMHA_CHECK(vkmha_tensor_download(ty, 0, got, D * sizeof(float)));
            vkmha_mha_io r_step = {1, 1, 0, x, x, x, &r_causal, want_s, NULL, 0, 0, 0, rcache, 0, NULL, NULL};
            VKMHA_CHECK(vkmha_mha_forward(ref, &r_step));
            ok = close_to(got, want_s, D, 1e-5, 1e-4, "decode step");
        }
        check(ok, "a decoder step per frame (vkmha_mha_record with a KV cache) matches the "
                  "reference's cached steps (%d steps, atol 1e-5, rtol 1e-4)",
              STEPS);
        free(got);
        free(want_s);
        vkmha_tensor_destroy(tx);
        vkmha_tensor_destroy(ty);
        vkmha_kv_cache_destroy(cache);
        vkmha_kv_cache_destroy(rcache);
    }

    /* Control: the engine overwriting vkmha's output without the "after"
     * barrier is a write-after-write hazard the validation layer must report,
     * or its silence above proves nothing. */
    const int clean_messages = validation_messages;
    VK_CHECK(vkResetCommandPool(e.device, e.cmd_pool, 0));
    VK_CHECK(vkResetDescriptorPool(e.device, e.pool, 0));
    VK_CHECK(vkBeginCommandBuffer(e.cmd, &bi));
    printf("# recording a deliberate write-after-write hazard (no barrier after vkmha):\n");
    io.out = to1;
    VKMHA_CHECK(vkmha_mha_record(mha, e.cmd, &io));
    vkCmdFillBuffer(e.cmd, e.arena, o1_off, bytes, 0); /* the engine clears the output */
    VK_CHECK(vkEndCommandBuffer(e.cmd));
    check(clean_messages == 0 && validation_messages > 0,
          "synchronization validation was silent for the documented barriers (%d messages) "
          "and reports the hazard without the \"after\" barrier (%d messages)",
          clean_messages, validation_messages - clean_messages);
    const int after_control = validation_messages;
    VK_CHECK(vkResetCommandPool(e.device, e.cmd_pool, 0));

    /* 6. Teardown: vkmha frees all it took and leaves the engine alone. */
    vkmha_tensor_destroy(tq);
    vkmha_tensor_destroy(to1);
    vkmha_tensor_destroy(to2);
    vkmha_mha_destroy(mha);
    const long vk_total = vk_allocs.total, host_total = host_allocs.total;
    vkmha_context_destroy(ctx);
    check(vk_allocs.live == 0 && vk_total > 0,
          "every Vulkan allocation through the engine's VkAllocationCallbacks freed at "
          "destroy (%ld made, %ld live)",
          vk_allocs.total, vk_allocs.live);
    check(host_allocs.live == 0 && host_total > 0,
          "every host allocation through the engine's vkmha_allocator freed at destroy "
          "(%ld made, %ld live)",
          host_allocs.total, host_allocs.live);
    vkmha_mha_destroy(ref);
    vkmha_context_destroy(ref_ctx);
    VK_CHECK(vkDeviceWaitIdle(e.device)); /* the engine's device is still alive */
    engine_destroy(&e);
    check(validation_messages == after_control,
          "no validation message from the rest and the teardown (%d)",
          validation_messages - after_control);

    free(w);
    free(query);
    free(doubled);
    free(want);
    free(want1);
    printf("1..%d\n# %d passed, %d failed\n", n_checks, n_checks - n_failed, n_failed);
    return n_failed ? 1 : 0;
}
