/* vkmha-info: the Vulkan devices vkmha sees, the features and limits it
 * uses, and what a context picks (device, and its kernels with their tiles,
 * blocks and workgroups).
 *
 *   vkmha-info [--device N] [--no-subgroup-ops] [--self-check] [--validation]
 *              [--verbose]
 *   (--help describes them)
 *
 * The environment variable VKMHA_MATMUL_TILE="register:32,8,4,4,8"
 * (variant:bm,bn,bk,tm,tn) overrides the matmul tiles, as
 * vkmha_context_desc.matmul_tile does; this shows the result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkmha.h"
#include "cli.h"
#include "kernel_list.h"

static const char *type_name(vkmha_device_type t)
{
    switch (t) {
    case VKMHA_DEVICE_TYPE_INTEGRATED_GPU:
        return "integrated GPU";
    case VKMHA_DEVICE_TYPE_DISCRETE_GPU:
        return "discrete GPU";
    case VKMHA_DEVICE_TYPE_VIRTUAL_GPU:
        return "virtual GPU";
    case VKMHA_DEVICE_TYPE_CPU:
        return "CPU";
    default:
        return "other";
    }
}

static void print_device(const vkmha_device_info *d)
{
    printf("  name                      %s (%s)\n", d->name, type_name(d->type));
    printf("  vendor / device id        0x%04x / 0x%04x\n", d->vendor_id, d->device_id);
    printf("  Vulkan                    %u.%u.%u\n", d->api_version >> 22,
           (d->api_version >> 12) & 0x3ff, d->api_version & 0xfff);
    printf("  driver                    %s %s (version 0x%x)\n",
           d->driver_name[0] ? d->driver_name : "?", d->driver_info, d->driver_version);
    printf("  device UUID               ");
    for (int i = 0; i < 16; i++)
        printf("%02x%s", d->device_uuid[i], i == 3 || i == 5 || i == 7 || i == 9 ? "-" : "");
    printf("\n  compute queue             %s\n", d->has_compute_queue ? "yes" : "no");
    printf("  subgroup size             %u (arithmetic in compute: %s)\n", d->subgroup_size,
           d->subgroup_arithmetic ? "yes" : "no");
    printf("  max workgroup count       %u x %u x %u\n", d->max_workgroup_count[0],
           d->max_workgroup_count[1], d->max_workgroup_count[2]);
    printf("  max workgroup size        %u x %u x %u, %u invocations\n",
           d->max_workgroup_size[0], d->max_workgroup_size[1], d->max_workgroup_size[2],
           d->max_workgroup_invocations);
    printf("  shared memory             %u bytes\n", d->max_shared_memory);
    printf("  max storage buffer range  %llu bytes\n",
           (unsigned long long)d->max_storage_buffer_range);
    printf("  max allocation size       %llu bytes\n", (unsigned long long)d->max_allocation_size);
    printf("  storage buffers a kernel  %u (maxPerStageDescriptorStorageBuffers)\n",
           d->max_storage_buffers_per_stage);
    printf("  device-local memory       %llu MiB%s\n",
           (unsigned long long)(d->device_local_memory >> 20),
           d->unified_memory ? " (unified with host: no staging copies)" : "");
    printf("  timestamp period          %g ns\n", (double)d->timestamp_period);
}

/* The context's kernels (vkmha_context_get_kernels), one line each. */
static void print_kernels(vkmha_context *ctx)
{
    vkmha_kernel_info k[64];
    uint32_t n = 64;
    if (vkmha_context_get_kernels(ctx, &n, k) != VKMHA_SUCCESS) {
        printf("  kernels: %s\n", vkmha_context_last_error(ctx));
        return;
    }
    printf("\n  %-17s %-10s %-17s %5s %8s  %s\n", "kernel", "op", "shader", "WG", "shared B",
           "parameters");
    for (uint32_t i = 0; i < n && i < 64; i++) {
        if (!k[i].available) {
            printf("  %-17s %-10s not used on this device\n", k[i].name, k[i].op);
            continue;
        }
        char d[256];
        kernel_describe(&k[i], d, sizeof d);
        printf("  %-17s %-10s %-17s %5u %8u %s\n", k[i].name, k[i].op, k[i].shader,
               k[i].workgroup_size, k[i].shared_bytes, d + strlen(k[i].shader));
    }
}

int main(int argc, char **argv)
{
    vkmha_context_desc desc = {0};
    bool no_subgroup = false, verbose = false, self_check = false;
    const cli_opt opts[] = {
        {.name = "--device", .metavar = "N",
         .help = "create the context on device N of the list (default: automatic)",
         .u32 = &desc.device_index, .given = &desc.use_device_index},
        CLI_FLAG("--no-subgroup-ops", no_subgroup, "reductions without subgroup arithmetic"),
        CLI_FLAG("--self-check", self_check,
                 "check every path now (VKMHA_CONTEXT_EAGER_PIPELINES), not before first use"),
        CLI_FLAG("--validation", desc.enable_validation, "enable the Vulkan validation layer"),
        CLI_FLAG("--verbose", verbose, "also print vkmha's debug and info messages"),
    };
    CLI_PARSE("vkmha-info",
              "Lists the Vulkan devices vkmha sees with the features and limits it "
              "uses,\nthen what a context picks on the chosen device (its kernels with "
              "their tiles,\nblocks and workgroups).\n"
              "VKMHA_MATMUL_TILE=\"register:32,8,4,4,8\" overrides the matmul tiles.",
              opts, argc, argv);
    if (no_subgroup)
        desc.flags |= VKMHA_CONTEXT_NO_SUBGROUP_OPS;
    if (self_check)
        desc.flags |= VKMHA_CONTEXT_EAGER_PIPELINES;
    desc.log = cli_log_stderr;
    desc.log_level = verbose ? VKMHA_LOG_DEBUG : VKMHA_LOG_DEFAULT;
    printf("vkmha %u.%u.%u\n", vkmha_version() / 10000, vkmha_version() / 100 % 100,
           vkmha_version() % 100);

    vkmha_device_info devs[16];
    uint32_t n = 16;
    vkmha_status st = vkmha_enumerate_devices(&n, devs);
    if (st != VKMHA_SUCCESS) {
        fprintf(stderr, "vkmha-info: no Vulkan devices (%s): %s\n", vkmha_status_string(st),
                vkmha_context_last_error(NULL));
        return 1;
    }
    for (uint32_t i = 0; i < n && i < 16; i++) {
        printf("\ndevice %u\n", i);
        print_device(&devs[i]);
    }

    vkmha_context *ctx = NULL;
    st = vkmha_context_create(&desc, &ctx);
    if (st != VKMHA_SUCCESS) { /* the logger printed the reason */
        fprintf(stderr, "vkmha-info: cannot create a context: %s\n", vkmha_status_string(st));
        return 1;
    }
    vkmha_context_info info;
    vkmha_context_get_info(ctx, &info);
    printf("\ncontext on device %u (%s)\n", info.device_index, info.device.name);
    printf("  %-25s %s\n", "softmax / LayerNorm",
           info.subgroup_ops_used ? "subgroup arithmetic + shared memory"
                                  : "shared memory only");
    printf("  %-25s %s\n", "fp16 / bf16 storage",
           info.native_16bit_storage
               ? "native 16-bit elements (storageBuffer16BitAccess)"
               : "packed, two per 32-bit word (no storageBuffer16BitAccess)");
    printf("  %-25s %llu bytes, %s\n", "tensors up to", (unsigned long long)info.max_tensor_bytes,
           info.sparse_tensors ? "sparse buffers past maxMemoryAllocationSize"
                               : "one allocation each (maxMemoryAllocationSize)");
    /* Matrix units: the device's shapes, and whether kernels use them. */
    printf("  %-25s %u shape%s (VK_KHR_cooperative_matrix)%s\n", "matrix units",
           info.matrix_shape_count, info.matrix_shape_count == 1 ? "" : "s",
           info.matrix_shape_count ? ":" : "");
    for (uint32_t i = 0; i < info.matrix_shape_count && i < VKMHA_MAX_MATRIX_SHAPES; i++) {
        const vkmha_matrix_shape *m = &info.matrix_shapes[i];
        printf("  %-25s %ux%ux%u  %s x %s + %s -> %s%s\n", "", m->m, m->n, m->k,
               vkmha_matrix_type_name(m->a_type), vkmha_matrix_type_name(m->b_type),
               vkmha_matrix_type_name(m->c_type), vkmha_matrix_type_name(m->result_type),
               m->saturating ? " (saturating)" : "");
    }
    printf("  %-25s %s\n", "cooperative kernels",
           !vkmha_cooperative_matrix_built()
               ? "not in this build (its glslang could not compile them)"
           : !info.cooperative_matrix
               ? "built; not on this device (no fp16 matrices with vulkanMemoryModel and "
                 "shaderFloat16, or the mobile profile)"
               : "built and enabled (kernels: matmul_coop where listed available; CPU "
                 "devices only with VKMHA_MATMUL_TILE=cooperative)");
    printf("  %-25s %s", "VK_NV_cooperative_matrix2",
           info.cooperative_matrix2
               ? "enabled (kernel: matmul_cm2 where listed available; CPU devices only with "
                 "VKMHA_MATMUL_TILE=coopmat2); fp16 workgroup sizes"
               : "not used (needs the extension with workgroup scope and tensor addressing, "
                 "Vulkan 1.3, and a build whose glslang compiled its kernel)");
    for (uint32_t i = 0; i < 4 && info.matrix2_workgroup_sizes[i]; i++)
        printf(" %u", info.matrix2_workgroup_sizes[i]);
    printf("\n");
    printf("  %-25s %s\n", "validation layer", info.validation_enabled ? "on" : "off");
    printf("  %-25s %s\n", "matmul tiles from",
           getenv("VKMHA_MATMUL_TILE") ? "VKMHA_MATMUL_TILE" : "device type and limits");
    printf("  %-25s %llu bytes\n", "device memory held",
           (unsigned long long)info.device_memory_bytes);
    if (info.self_check_us)
        printf("  %-25s %.1f ms\n", "self-check", info.self_check_us / 1000.0);
    else
        printf("  %-25s %s\n", "self-check",
               "not run yet (each path before its first use; --self-check: all now)");
    printf("  %-25s", "disabled paths");
    for (uint32_t i = 0; i < 32; i++)
        if (info.disabled_paths & (1u << i))
            printf(" %s", vkmha_path_name(1u << i));
    printf("%s\n", info.disabled_paths ? "" : " none");
    print_kernels(ctx);
    vkmha_context_destroy(ctx);
    return 0;
}
