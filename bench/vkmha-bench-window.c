/* vkmha-bench-window: the fused attention of a sliding window (issue 29:
 * vkmha_mask.window) against full causal attention, and a kernel's skipping
 * of the key blocks the causal mask hides against its not skipping them,
 * in the same run on the same context.
 *
 *   vkmha-bench-window [--len L]... [--window W] [--heads 8] [--d 64]
 *                      [--kernel default|shared] [--reps 3] [--csv FILE]
 *
 * One batch entry, H heads of d dims, L queries over L keys (a prefill),
 * vkmha_attention on host arrays of fp32, fused path; rows:
 *   causal          VKMHA_MASK_CAUSAL
 *   causal+window   VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW, window W
 * and the window's speed-up over causal (the window leaves W / (L / 2) of
 * the causal scores: a quarter at L 8192, W 1024). Times are host wall
 * clock around the call (uploads, one submit, wait, downloads), median of
 * --reps after a warm-up; the device time (VKMHA_CONTEXT_PROFILE) beside
 * it. --kernel shared forces the workgroup-shared kernel
 * (shaders/flash.comp, which skips hidden key blocks) on a CPU device,
 * whose default is the CPU-shaped one (which skips none). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cli.h"
#include "vkmha.h"

int main(int argc, char **argv)
{
    const char *len_arg[8], *kernel_names[] = {"default", "shared", NULL}, *kernel = "default";
    const char *kernel_arg[1];
    size_t n_lens = 0, n_kernels = 0;
    static const char *const len_names[] = {"1024", "2048", "4096", "8192", "16384", NULL};
    uint32_t window = 1024, heads = 8, d = 64, reps = 3;
    const char *csv_path = NULL;
    const cli_opt opts[] = {
        CLI_CHOICES("--len", "L", len_arg, n_lens, len_names,
                    "sequence length; repeatable (default 2048 and 8192)"),
        CLI_U32("--window", "W", window, 1, 1u << 30, "the window (default 1024)"),
        CLI_U32("--heads", "N", heads, 1, 1024, "heads (default 8)"),
        CLI_U32("--d", "N", d, 4, 256, "head dim (default 64)"),
        CLI_CHOICES("--kernel", "NAME", kernel_arg, n_kernels, kernel_names,
                    "default (the device's) or shared (flash.comp forced)"),
        CLI_U32("--reps", "N", reps, 1, 16, "timed calls per row, median (default 3)"),
        CLI_STR("--csv", "FILE", csv_path, "also write the rows as CSV"),
    };
    CLI_PARSE("vkmha-bench-window",
              "A sliding window's fused attention against full causal attention.", opts, argc,
              argv);
    if (!n_lens)
        len_arg[n_lens++] = "2048", len_arg[n_lens++] = "8192";
    if (n_kernels)
        kernel = kernel_arg[0];
    vkmha_context_info info;
    char date[32];
    FILE *csv;
    if (!bench_begin(csv_path, "vkmha-bench-window",
                     "kernel,len,window,heads,d,mask,ms_med,ms_min,device_ms,speedup", &info,
                     date, &csv))
        return 1;
    vkmha_context *ctx = bench_profile_context("vkmha-bench-window", kernel);
    printf("vkmha-bench-window %s: %s (%s %s), %s kernel, %u heads of %u, window %u, "
           "median of %u\n",
           date, info.device.name, info.device.driver_name, info.device.driver_info, kernel,
           heads, d, window, reps);
    printf("%6s  %-14s %10s %10s %10s %8s\n", "len", "mask", "ms", "min ms", "device ms",
           "speed-up");
    uint64_t seed = 29;
    for (size_t li = 0; li < n_lens; li++) {
        const uint32_t L = (uint32_t)atoi(len_arg[li]);
        const size_t n = (size_t)heads * L * d;
        float *q = bench_random(n, 1.0f, &seed), *k = bench_random(n, 1.0f, &seed),
              *v = bench_random(n, 1.0f, &seed), *out = malloc(n * sizeof *out);
        const vkmha_attention_desc ad = {.heads = heads, .len_q = L, .len_k = L, .d_k = d,
                                         .d_v = d, .path = VKMHA_ATTENTION_PATH_FUSED};
        const vkmha_mask masks[2] = {
            {.kinds = VKMHA_MASK_CAUSAL},
            {.kinds = VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW, .window = window}};
        static const char *const names[2] = {"causal", "causal+window"};
        double med[2] = {0, 0};
        for (int m = 0; m < 2; m++) {
            double t[16], dev = 0.0;
            bench_check("vkmha-bench-window", ctx,
                        vkmha_attention(ctx, &ad, q, k, v, &masks[m], out, NULL), "warm-up");
            for (uint32_t r = 0; r < reps; r++) {
                const double t0 = now_ms();
                bench_check("vkmha-bench-window", ctx,
                            vkmha_attention(ctx, &ad, q, k, v, &masks[m], out, NULL),
                            "vkmha_attention");
                t[r] = now_ms() - t0;
                dev = bench_device_ms(ctx);
            }
            qsort(t, reps, sizeof *t, cmp_double);
            med[m] = t[reps / 2];
            printf("%6u  %-14s %10.1f %10.1f %10.1f", L, names[m], med[m], t[0], dev);
            if (m)
                printf(" %7.2fx", med[0] / med[1]);
            printf("\n");
            if (csv)
                fprintf(csv, "%s,%u,%u,%u,%u,%s,%.3f,%.3f,%.3f,%.3f\n", kernel, L, window, heads,
                        d, names[m], med[m], t[0], dev, m ? med[0] / med[1] : 1.0);
        }
        free(q), free(k), free(v), free(out);
    }
    vkmha_context_destroy(ctx);
    if (csv)
        fclose(csv);
    return 0;
}
