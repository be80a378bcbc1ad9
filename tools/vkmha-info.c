/* vkmha-info: the Vulkan devices vkmha sees, the features and limits it
 * uses, and what a context picks (device, tiles, reductions).
 *
 *   vkmha-info [--device N] [--no-subgroup-ops] [--validation] [--verbose]
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
    printf("  device-local memory       %llu MiB%s\n",
           (unsigned long long)(d->device_local_memory >> 20),
           d->unified_memory ? " (unified with host: no staging copies)" : "");
    printf("  timestamp period          %g ns\n", (double)d->timestamp_period);
}

static void print_tile(const char *name, const vkmha_tile_config *t)
{
    printf("  %-25s %s variant: %ux%u outputs, K step %u, %ux%u per invocation, %u "
           "invocations\n",
           name,
           t->variant == VKMHA_MATMUL_VARIANT_REGISTER ? "register (CPU-shaped)"
                                                       : "shared-memory (GPU-shaped)",
           t->bm, t->bn, t->bk, t->tm, t->tn, t->workgroup_size);
}

int main(int argc, char **argv)
{
    vkmha_context_desc desc = {0};
    bool no_subgroup = false, verbose = false;
    const cli_opt opts[] = {
        {.name = "--device", .metavar = "N",
         .help = "create the context on device N of the list (default: automatic)",
         .u32 = &desc.device_index, .given = &desc.use_device_index},
        CLI_FLAG("--no-subgroup-ops", no_subgroup, "reductions without subgroup arithmetic"),
        CLI_FLAG("--validation", desc.enable_validation, "enable the Vulkan validation layer"),
        CLI_FLAG("--verbose", verbose, "also print vkmha's debug and info messages"),
    };
    CLI_PARSE("vkmha-info",
              "Lists the Vulkan devices vkmha sees with the features and limits it "
              "uses,\nthen what a context picks on the chosen device (tiles, "
              "reductions).\nVKMHA_MATMUL_TILE=\"register:32,8,4,4,8\" overrides "
              "the matmul tiles.",
              opts, argc, argv);
    if (no_subgroup)
        desc.flags |= VKMHA_CONTEXT_NO_SUBGROUP_OPS;
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
    print_tile("matmul tile (large)", &info.matmul_large);
    print_tile("matmul tile (small)", &info.matmul_small);
    for (int c = 0; c < 4; c++) {
        const vkmha_attention_config *a = &info.attention[c];
        char label[64];
        snprintf(label, sizeof label, "fused attention, d <= %u", a->max_head_dim ? a->max_head_dim : 32u << c);
        if (!a->block_q)
            printf("  %-25s unfused (no block fits)\n", label);
        else
            printf("  %-25s %u queries x %u keys per block, %ux%u scores per invocation, "
                   "%u invocations, %u bytes shared\n",
                   label, a->block_q, a->block_k, a->tm, a->tn, a->workgroup_size,
                   a->shared_bytes);
        const vkmha_attention_config *r = &info.attention_register[c];
        if (r->workgroup_size)
            printf("  %-25s CPU-shaped kernel: %u invocations x %u query rows, %u keys per "
                   "step, no shared memory\n",
                   "", r->workgroup_size, r->tm, r->block_k);
    }
    printf("  %-25s %u invocations, %s\n", "softmax / LayerNorm", info.reduce_workgroup_size,
           info.subgroup_ops_used ? "subgroup arithmetic + shared memory"
                                  : "shared memory only");
    printf("  %-25s %s\n", "fp16 / bf16 storage",
           info.native_16bit_storage
               ? "native 16-bit elements (storageBuffer16BitAccess)"
               : "packed, two per 32-bit word (no storageBuffer16BitAccess)");
    printf("  %-25s %s\n", "validation layer", info.validation_enabled ? "on" : "off");
    printf("  %-25s %s\n", "matmul tiles from",
           getenv("VKMHA_MATMUL_TILE") ? "VKMHA_MATMUL_TILE" : "device type and limits");
    printf("  %-25s %llu bytes\n", "device memory held",
           (unsigned long long)info.device_memory_bytes);
    vkmha_context_destroy(ctx);
    return 0;
}
