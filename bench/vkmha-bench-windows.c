/* vkmha-bench-windows: attention whose keys and values are past
 * maxStorageBufferRange against the same call with them bound whole, in
 * the same run: the range is lowered through vkmha_debug_options, on the
 * shared-memory fused kernel (the GPUs', which reads such keys in windows
 * of keys) and on the default kernel (on CPU devices the CPU-shaped one,
 * which reads them through texel views of whole buffers). With --unfused
 * all run on the unfused path instead, whose matmuls then run one (entry,
 * query head) product at a time, each in windows.
 *
 *   vkmha-bench-windows [--heads 8] [--kv-heads 2] [--len-q 16] [--dim 64]
 *                       [--min-len 16384] [--max-len 262144] [--windows 4]
 *                       [--reps 5] [--unfused] [--csv FILE]
 *
 * Decode-like shapes (few queries, long keys): q and out stay small, so
 * only k and v are past the lowered range, which is set to 1 / --windows of
 * one head's keys (each head's keys then take that many windows, one
 * dispatch per (entry, key/value head) each, after a barrier). Times are
 * host wall clock around vkmha_attention (uploads, one submit, wait,
 * downloads), median of --reps after a warm-up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "vkmha.h"

/* The median ms of reps calls of d on a context with `range` (0: the
 * device's) and the fused kernel `kernel` (vkmha_fused_kernel); *st the
 * first failure. */
static double run(uint64_t range, uint32_t kernel, const vkmha_attention_desc *d,
                  const float *q, const float *k, const float *v, float *out, uint32_t reps,
                  vkmha_status *st, char *err, size_t err_len)
{
    vkmha_debug_options dbg = {.max_storage_buffer_range = range, .fused_kernel = kernel};
    vkmha_context_desc cd = {0};
    cd.backend = VKMHA_BACKEND_VULKAN;
    cd.debug = &dbg;
    vkmha_context *ctx = NULL;
    double t[64], ms = 0.0;
    if ((*st = vkmha_context_create(&cd, &ctx))) {
        snprintf(err, err_len, "%s", vkmha_context_last_error(NULL));
        return 0.0;
    }
    *st = vkmha_attention(ctx, d, q, k, v, NULL, out, NULL); /* warm-up */
    for (uint32_t i = 0; i < reps && !*st; i++) {
        const double t0 = now_ms();
        *st = vkmha_attention(ctx, d, q, k, v, NULL, out, NULL);
        t[i] = now_ms() - t0;
    }
    if (*st) {
        snprintf(err, err_len, "%s", vkmha_context_last_error(ctx));
    } else {
        qsort(t, reps, sizeof *t, cmp_double);
        ms = t[reps / 2];
    }
    vkmha_context_destroy(ctx);
    return ms;
}

int main(int argc, char **argv)
{
    uint32_t heads = 8, kv_heads = 2, len_q = 16, dim = 64, min_len = 16384, max_len = 262144,
             windows = 4, reps = 5;
    bool unfused = false;
    const char *csv_path = NULL;
    const cli_opt opts[] = {
        CLI_U32("--heads", "N", heads, 1, 1024, "query heads (default 8)"),
        CLI_U32("--kv-heads", "N", kv_heads, 1, 1024,
                "key/value heads, dividing --heads (default 2)"),
        CLI_U32("--len-q", "L", len_q, 1, 4096, "queries (default 16)"),
        CLI_U32("--dim", "D", dim, 1, 256, "head dim of keys and values (default 64)"),
        CLI_U32("--min-len", "L", min_len, 64, 1u << 24, "first key length (default 16384)"),
        CLI_U32("--max-len", "L", max_len, 64, 1u << 24,
                "last key length; lengths quadruple (default 262144)"),
        CLI_U32("--windows", "N", windows, 2, 1024,
                "windows per head's keys: the lowered range (default 4)"),
        CLI_U32("--reps", "N", reps, 1, 64, "timed calls per point, median (default 5)"),
        CLI_FLAG("--unfused", unfused, "both on the unfused path (default: fused)"),
        CLI_STR("--csv", "FILE", csv_path, "also write the results to FILE (default: none)"),
    };
    CLI_PARSE("vkmha-bench-windows",
              "Attention whose keys are past maxStorageBufferRange (read in windows) against\n"
              "the same call bound whole, in the same run.",
              opts, argc, argv);
    if (heads % kv_heads) {
        fprintf(stderr, "vkmha-bench-windows: --kv-heads (%u) must divide --heads (%u)\n",
                kv_heads, heads);
        return 2;
    }
    vkmha_context_info info;
    char date[32];
    FILE *csv;
    if (!bench_begin(csv_path, "vkmha-bench-windows",
                     "path,heads,kv_heads,len_q,dim,len_k,range_bytes,status,shared_whole_ms,"
                     "shared_windows_ms,default_whole_ms,default_lowered_ms",
                     &info, date, &csv))
        return 1;
    printf("attention (%s path), keys read in windows vs bound whole: %u heads over %u, %u "
           "queries, d %u, %u windows a head, fp32\ndevice %s (%s %s), %s\n",
           unfused ? "unfused" : "fused", heads, kv_heads, len_q, dim, windows,
           info.device.name, info.device.driver_name, info.device.driver_info, date);
    printf("%8s %10s %21s %8s %21s %8s\n", "", "", "shared-memory kernel", "", "default kernel",
           "");
    printf("%8s %10s %10s %10s %8s %10s %10s %8s\n", "len_k", "range MiB", "whole ms",
           "windows ms", "ratio", "whole ms", "lowered ms", "ratio");
    uint64_t seed = 11;
    for (uint64_t len = min_len; len <= max_len; len *= 4) {
        const vkmha_attention_desc d = {1, heads, kv_heads, len_q, (uint32_t)len, dim, dim, 0,
                                        unfused ? VKMHA_ATTENTION_PATH_UNFUSED
                                                : VKMHA_ATTENTION_PATH_FUSED,
                                        0, 0};
        const size_t nq = (size_t)heads * len_q * dim, nk = (size_t)kv_heads * len * dim;
        float *q = bench_random(nq, 1.0f, &seed), *k = bench_random(nk, 1.0f, &seed),
              *v = bench_random(nk, 1.0f, &seed), *out = malloc(nq * sizeof *out);
        /* One head's keys in `windows` windows (and a whole call's q, out
         * well within it). */
        const uint64_t range = (uint64_t)len * dim * 4 / windows;
        /* The shared-memory kernel whole and in windows; the default
         * kernel whole and at the lowered range (on CPU devices the
         * CPU-shaped kernel, which reads keys through texel views). */
        const uint64_t ranges[4] = {0, range, 0, range};
        const uint32_t kernels[4] = {VKMHA_FUSED_KERNEL_SHARED, VKMHA_FUSED_KERNEL_SHARED, 0, 0};
        vkmha_status st[4];
        char err[4][512];
        double ms[4];
        int bad = -1;
        for (int i = 0; i < 4; i++) {
            ms[i] = run(ranges[i], kernels[i], &d, q, k, v, out, reps, &st[i], err[i], 512);
            if (st[i] && bad < 0)
                bad = i;
        }
        if (bad >= 0)
            printf("%8llu %10.2f %s\n", (unsigned long long)len, range / 1048576.0, err[bad]);
        else
            printf("%8llu %10.2f %10.2f %10.2f %7.2fx %10.2f %10.2f %7.2fx\n",
                   (unsigned long long)len, range / 1048576.0, ms[0], ms[1], ms[1] / ms[0],
                   ms[2], ms[3], ms[3] / ms[2]);
        if (csv)
            fprintf(csv, "%s,%u,%u,%u,%u,%llu,%llu,%s,%.3f,%.3f,%.3f,%.3f\n",
                    unfused ? "unfused" : "fused", heads, kv_heads, len_q, dim,
                    (unsigned long long)len, (unsigned long long)range,
                    vkmha_status_string(bad >= 0 ? st[bad] : VKMHA_SUCCESS), ms[0], ms[1],
                    ms[2], ms[3]);
        fflush(stdout);
        free(q), free(k), free(v), free(out);
    }
    printf("ratio: at the lowered range / whole, in this run. The default kernel is the one "
           "the\ncontext chooses: on CPU devices the CPU-shaped one, which reads keys past the "
           "range\nthrough texel views of whole buffers, without windows.\n");
    if (csv)
        fclose(csv);
    return 0;
}
