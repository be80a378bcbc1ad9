/* vkmha-bench-window: the fused attention of a sliding window (issue 29:
 * vkmha_mask.window) against full causal attention, and a kernel's skipping
 * of the key blocks the causal mask hides against its not skipping them,
 * in the same run on the same context.
 *
 *   vkmha-bench-window [--len L]... [--window W] [--heads 8] [--d 64]
 *                      [--kernel default|shared] [--data] [--decode]
 *                      [--splits N] [--reps 3] [--csv FILE]
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
 * whose default is the CPU-shaped one (which skips none).
 *
 * --data: the masks whose hidden blocks are data instead, against no mask:
 *   none            no mask
 *   key padding     keys from L / 4 on padded (an entry a quarter of the
 *                   batch's padded length)
 *   -inf bias       a bias, -inf outside 4 documents of L / 4 tokens each
 *                   (packed sequences: a block-diagonal mask), 0 inside
 * each hiding 3/4 of the scores; the speed-up is none's time over the row's.
 *
 * --decode: one query, the last position, over the L keys (a decode step,
 * split-K into --splits ranges, 0: the context's choice), where whole key
 * ranges are hidden (before the window, or padded) and never settle. */
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
    bool data = false, decode = false;
    uint32_t splits = 0;
    const cli_opt opts[] = {
        CLI_CHOICES("--len", "L", len_arg, n_lens, len_names,
                    "sequence length; repeatable (default 2048 and 8192)"),
        CLI_U32("--window", "W", window, 1, 1u << 30, "the window (default 1024)"),
        CLI_U32("--heads", "N", heads, 1, 1024, "heads (default 8)"),
        CLI_U32("--d", "N", d, 4, 256, "head dim (default 64)"),
        CLI_CHOICES("--kernel", "NAME", kernel_arg, n_kernels, kernel_names,
                    "default (the device's) or shared (flash.comp forced)"),
        CLI_FLAG("--data", data, "key padding and a -inf bias against no mask, not windows"),
        CLI_FLAG("--decode", decode, "one query over the keys (a decode step), not L"),
        CLI_U32("--splits", "N", splits, 0, 1024, "key ranges with --decode (default 0: auto)"),
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
    printf("vkmha-bench-window %s: %s (%s %s), %s kernel, %u heads of %u, %s%s %u, "
           "median of %u\n",
           date, info.device.name, info.device.driver_name, info.device.driver_info, kernel,
           heads, d, decode ? "decode steps, " : "",
           data ? "data masks, hiding 3/4; window" : "window", window, reps);
    printf("%6s  %-14s %10s %10s %10s %8s\n", "len", "mask", "ms", "min ms", "device ms",
           "speed-up");
    uint64_t seed = 29;
    for (size_t li = 0; li < n_lens; li++) {
        const uint32_t L = (uint32_t)atoi(len_arg[li]);
        const uint32_t Lq = decode ? 1 : L, offset = L - Lq; /* bottom-right */
        const size_t n = (size_t)heads * L * d, nq = (size_t)heads * Lq * d;
        float *q = bench_random(nq, 1.0f, &seed), *k = bench_random(n, 1.0f, &seed),
              *v = bench_random(n, 1.0f, &seed), *out = malloc(nq * sizeof *out);
        const vkmha_attention_desc ad = {.heads = heads, .len_q = Lq, .len_k = L, .d_k = d,
                                         .d_v = d, .path = VKMHA_ATTENTION_PATH_FUSED,
                                         .kv_splits = decode ? splits : 0};
        /* The data masks' arrays, only for --data (the bias is [Lq][L]). */
        uint8_t *padding = data ? malloc(L) : NULL;
        float *bias = data ? malloc((size_t)Lq * L * sizeof *bias) : NULL;
        for (uint32_t j = 0; data && j < L; j++)
            padding[j] = j < L / 4;
        for (uint32_t i = 0; data && i < Lq; i++) /* documents of L / 4 positions */
            for (uint32_t j = 0; j < L; j++)
                bias[(size_t)i * L + j] = (i + offset) / (L / 4) == j / (L / 4) ? 0.0f : -INFINITY;
        const vkmha_mask window_masks[2] = {
            {.kinds = VKMHA_MASK_CAUSAL, .causal_offset = offset},
            {.kinds = VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW, .window = window,
             .causal_offset = offset}};
        const vkmha_mask data_masks[3] = {
            {.kinds = VKMHA_MASK_NONE},
            {.kinds = VKMHA_MASK_KEY_PADDING, .key_padding = padding},
            {.kinds = VKMHA_MASK_BIAS, .bias = bias, .bias_batch = 1, .bias_heads = 1}};
        static const char *const window_names[2] = {"causal", "causal+window"},
                                 *const data_names[3] = {"none", "key padding", "-inf bias"};
        const vkmha_mask *masks = data ? data_masks : window_masks;
        const char *const *names = data ? data_names : window_names;
        double med[3] = {0, 0, 0};
        for (int m = 0; m < (data ? 3 : 2); m++) {
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
                printf(" %7.2fx", med[0] / med[m]);
            printf("\n");
            if (csv)
                fprintf(csv, "%s,%u,%u,%u,%u,%s,%.3f,%.3f,%.3f,%.3f\n", kernel, L, window, heads,
                        d, names[m], med[m], t[0], dev, m ? med[0] / med[m] : 1.0);
        }
        free(q), free(k), free(v), free(out), free(padding), free(bias);
    }
    vkmha_context_destroy(ctx);
    if (csv)
        fclose(csv);
    return 0;
}
