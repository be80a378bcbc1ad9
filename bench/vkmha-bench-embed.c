/*
 * vkmha-bench-embed: forward latency at small shapes, by how the work gets
 * to the device. The peer is vkmha's own host-array API (vkmha_mha_forward:
 * uploads, one submit, wait, download), measured in the same run:
 *
 *   host      vkmha_mha_forward on host arrays
 *   tensor    vkmha_mha_forward_tensor: inputs and output stay on the device
 *   submit    vkmha_mha_submit + vkmha_submission_wait
 *   record    the application records one forward into its own command
 *             buffer, submits it and waits (recording included)
 *   record8   eight forwards recorded into one command buffer, one submit:
 *             the time per forward
 *
 * The application's device is a plain one made here (no validation layer),
 * borrowed by the vkmha context for every mode. Median of --reps runs after
 * two warm-up runs. Usage: vkmha-bench-embed [--reps N] [--csv FILE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <volk.h>

#include "bench_util.h"
#include "vkmha_vulkan.h"

#define MODES 5
static const char *const mode_names[MODES] = {"host", "tensor", "submit", "record", "record8"};

typedef struct app {
    VkInstance instance;
    VkPhysicalDevice phys;
    uint32_t family;
    VkDevice device;
    VkQueue queue;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
} app;

static void die(const char *what, int code)
{
    fprintf(stderr, "vkmha-bench-embed: %s failed (%d)\n", what, code);
    exit(1);
}

static void app_create(app *a)
{
    VkResult r;
    if ((r = volkInitialize()))
        die("volkInitialize", r);
    VkApplicationInfo ai = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
    ai.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pApplicationInfo = &ai;
    if ((r = vkCreateInstance(&ici, NULL, &a->instance)))
        die("vkCreateInstance", r);
    volkLoadInstanceOnly(a->instance);
    uint32_t n = 1;
    r = vkEnumeratePhysicalDevices(a->instance, &n, &a->phys);
    if ((r && r != VK_INCOMPLETE) || !n)
        die("vkEnumeratePhysicalDevices", r);
    VkQueueFamilyProperties qf[16];
    uint32_t nq = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(a->phys, &nq, qf);
    for (a->family = 0; a->family < nq; a->family++)
        if (qf[a->family].queueFlags & VK_QUEUE_COMPUTE_BIT)
            break;
    const float one = 1.0f;
    VkDeviceQueueCreateInfo q = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    q.queueFamilyIndex = a->family;
    q.queueCount = 1;
    q.pQueuePriorities = &one;
    const char *ext = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &q;
    dci.enabledExtensionCount = 1;
    dci.ppEnabledExtensionNames = &ext;
    if ((r = vkCreateDevice(a->phys, &dci, NULL, &a->device)))
        die("vkCreateDevice", r);
    volkLoadDevice(a->device);
    vkGetDeviceQueue(a->device, a->family, 0, &a->queue);
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = a->family;
    if ((r = vkCreateCommandPool(a->device, &pci, NULL, &a->pool)))
        die("vkCreateCommandPool", r);
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = a->pool;
    cai.commandBufferCount = 1;
    if ((r = vkAllocateCommandBuffers(a->device, &cai, &a->cmd)))
        die("vkAllocateCommandBuffers", r);
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((r = vkCreateFence(a->device, &fci, NULL, &a->fence)))
        die("vkCreateFence", r);
}

static void app_destroy(app *a)
{
    vkDestroyFence(a->device, a->fence, NULL);
    vkDestroyCommandPool(a->device, a->pool, NULL);
    vkDestroyDevice(a->device, NULL);
    vkDestroyInstance(a->instance, NULL);
}

/* Records `count` forwards into the application's command buffer, submits
 * it and waits. */
static void run_recorded(app *a, vkmha_mha *mha, const vkmha_mha_tensors *io, int count)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkResetCommandBuffer(a->cmd, 0);
    vkBeginCommandBuffer(a->cmd, &bi);
    for (int i = 0; i < count; i++) {
        vkmha_status st = vkmha_mha_record(mha, a->cmd, io);
        if (st)
            die("vkmha_mha_record", st);
    }
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(a->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    vkEndCommandBuffer(a->cmd);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &a->cmd;
    vkQueueSubmit(a->queue, 1, &si, a->fence);
    vkWaitForFences(a->device, 1, &a->fence, VK_TRUE, UINT64_MAX);
    vkResetFences(a->device, 1, &a->fence);
}

/* One forward (or eight for record8) in `mode`; returns ms per forward. */
static double run_mode(int mode, app *a, vkmha_mha *mha, const vkmha_mha_io *host_io,
                       const vkmha_mha_tensors *tio)
{
    vkmha_status st = VKMHA_SUCCESS;
    vkmha_submission *sub = NULL;
    double t0 = now_ms();
    switch (mode) {
    case 0:
        st = vkmha_mha_forward(mha, host_io);
        break;
    case 1:
        st = vkmha_mha_forward_tensor(mha, tio);
        break;
    case 2:
        if (!(st = vkmha_mha_submit(mha, tio, &sub)))
            st = vkmha_submission_wait(sub, UINT64_MAX);
        vkmha_submission_destroy(sub);
        break;
    case 3:
        run_recorded(a, mha, tio, 1);
        break;
    default:
        run_recorded(a, mha, tio, 8);
        return (now_ms() - t0) / 8;
    }
    if (st)
        die(mode_names[mode], st);
    return now_ms() - t0;
}

int main(int argc, char **argv)
{
    uint32_t reps = 30;
    const char *csv_path = NULL;
    const cli_opt opts[] = {
        CLI_U32("--reps", "N", reps, 1, 100000, "timed runs per mode, median (default 30)"),
        CLI_STR("--csv", "FILE", csv_path, "also write the results to FILE (default: none)"),
    };
    CLI_PARSE("vkmha-bench-embed",
              "Forward latency at small shapes by how the work reaches the "
              "device: host arrays,\ntensors, submit, and recorded into the "
              "application's command buffer. Writes no\nfile unless --csv is "
              "given.",
              opts, argc, argv);
    app a = {0};
    app_create(&a);
    const char *ext = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    vkmha_vulkan_desc vd = {0};
    vd.get_instance_proc_addr = vkGetInstanceProcAddr;
    vd.instance = a.instance;
    vd.physical_device = a.phys;
    vd.device = a.device;
    vd.queue_family_index = a.family;
    vd.queue = a.queue;
    vd.enabled_device_extensions = &ext;
    vd.enabled_device_extension_count = 1;
    vkmha_context_desc cd = {0};
    cd.vulkan = &vd;
    vkmha_context *ctx = NULL;
    vkmha_status st = vkmha_context_create(&cd, &ctx);
    if (st) {
        fprintf(stderr, "vkmha-bench-embed: %s\n", vkmha_context_last_error(NULL));
        die("vkmha_context_create", st);
    }
    vkmha_context_info info;
    vkmha_context_get_info(ctx, &info);

    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv)
        fprintf(csv, "d_model,heads,len,mode,ms_per_forward,ratio_vs_host\n");
    printf("device: %s (%s)\nmedian ms per forward of %u runs; ratio = mode / host\n",
           info.device.name, info.device.driver_info, reps);
    printf("%7s %5s %5s | %9s %9s %9s %9s %9s | %6s %6s %6s %6s\n", "d_model", "heads", "len",
           "host", "tensor", "submit", "record", "record8", "tensor", "submit", "record",
           "rec8");
    static const uint32_t shapes[][3] = {{256, 4, 1}, {256, 4, 16}, {256, 4, 64},
                                         {512, 8, 1}, {512, 8, 16}, {512, 8, 128}};
    uint64_t seed = 7;
    double *times = malloc((size_t)reps * sizeof *times);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const uint32_t D = shapes[s][0], H = shapes[s][1], L = shapes[s][2];
        float *w = bench_random(4 * (size_t)D * D, 0.05f, &seed);
        float *x = bench_random((size_t)L * D, 1.0f, &seed), *y = malloc((size_t)L * D * 4);
        vkmha_mha_desc md = {0};
        md.d_model = D;
        md.n_head = H;
        md.w_q = w;
        md.w_k = w + D * D;
        md.w_v = w + 2 * D * D;
        md.w_o = w + 3 * D * D;
        vkmha_mha *mha = NULL;
        if ((st = vkmha_mha_create(ctx, &md, &mha)))
            die("vkmha_mha_create", st);
        vkmha_tensor_desc td = {VKMHA_DTYPE_F32, 3, {1, L, D, 0}};
        vkmha_tensor *tx = NULL, *ty = NULL;
        if ((st = vkmha_tensor_create(ctx, &td, &tx)) || (st = vkmha_tensor_create(ctx, &td, &ty)) ||
            (st = vkmha_tensor_upload(tx, 0, x, (uint64_t)L * D * 4)))
            die("tensor", st);
        const vkmha_mha_io io = {1, L, 0, x, x, x, NULL, y, NULL, 0, 0, 0, NULL, 0, NULL, NULL};
        const vkmha_mha_tensors tio = {1, L, 0, tx, tx, tx, NULL, ty, NULL, 0, 0, NULL, 0, NULL, NULL};
        double med[MODES];
        for (int m = 0; m < MODES; m++) {
            for (int i = 0; i < 2; i++)
                run_mode(m, &a, mha, &io, &tio);
            for (uint32_t i = 0; i < reps; i++)
                times[i] = run_mode(m, &a, mha, &io, &tio);
            qsort(times, (size_t)reps, sizeof *times, cmp_double);
            med[m] = times[reps / 2];
        }
        printf("%7u %5u %5u | %9.3f %9.3f %9.3f %9.3f %9.3f | %6.2f %6.2f %6.2f %6.2f\n", D, H,
               L, med[0], med[1], med[2], med[3], med[4], med[1] / med[0], med[2] / med[0],
               med[3] / med[0], med[4] / med[0]);
        for (int m = 0; csv && m < MODES; m++)
            fprintf(csv, "%u,%u,%u,%s,%.4f,%.4f\n", D, H, L, mode_names[m], med[m],
                    med[m] / med[0]);
        vkmha_tensor_destroy(tx);
        vkmha_tensor_destroy(ty);
        vkmha_mha_destroy(mha);
        free(w);
        free(x);
        free(y);
    }
    free(times);
    if (csv)
        fclose(csv);
    vkmha_context_destroy(ctx);
    app_destroy(&a);
    return 0;
}
