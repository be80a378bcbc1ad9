/* vkmha-bench-mla: a decode step of DeepSeek's MLA attention (issue 29: head
 * dims d_k 576, d_v 512 on the fused kernels) against a 128/128 GQA decode
 * step that reads the same bytes of KV cache, in the same run on the same
 * context.
 *
 *   vkmha-bench-mla [--len N] [--heads 16] [--kv-heads 4] [--dtype f32|f16]
 *                   [--kernel default|shared] [--reps 5] [--csv FILE]
 *
 * One batch entry, one query token, H query heads, vkmha_attention_tensor on
 * device tensors (the cache stays on the device, as a KV cache's does);
 * rows:
 *   mla 576/512    one key / value head of d_k 576, d_v 512 over N keys
 *                  (MLA's absorbed form: multi-query attention on the
 *                  latent), N (576 + 512) elements of cache;
 *   gqa 128/128    Hkv key / value heads of 128 and 128 over
 *                  N (576 + 512) / (256 Hkv) keys: the same cache bytes;
 * and MLA's time over GQA's. Times are host wall clock around the call (one
 * submit, wait; nothing is uploaded), median of --reps after a warm-up; the
 * device time (VKMHA_CONTEXT_PROFILE) beside it. --kernel shared forces the
 * workgroup-shared kernel (shaders/flash.comp) on a CPU device, whose
 * default is the CPU-shaped one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cli.h"
#include "half.h" /* src/half.c: the inputs in 16 bits */
#include "vkmha.h"

#define PROG "vkmha-bench-mla"

/* A [1][heads][len][d] tensor of dtype dt holding random values. */
static vkmha_tensor *random_tensor(vkmha_context *ctx, uint32_t dt, uint32_t heads,
                                   uint32_t len, uint32_t d, uint64_t *seed)
{
    const vkmha_tensor_desc td = {.dtype = dt, .rank = 4, .dims = {1, heads, len, d}};
    vkmha_tensor *t = NULL;
    bench_check(PROG, ctx, vkmha_tensor_create(ctx, &td, &t), "vkmha_tensor_create");
    const size_t n = (size_t)heads * len * d;
    float *x = bench_random(n, 1.0f, seed);
    void *src = x;
    if (dt != VKMHA_DTYPE_F32) {
        src = malloc(n * 2);
        vkmha__from_f32(dt, x, n, src);
    }
    bench_check(PROG, ctx, vkmha_tensor_upload(t, 0, src, vkmha_tensor_bytes(t)),
                "vkmha_tensor_upload");
    if (src != x)
        free(src);
    free(x);
    return t;
}

int main(int argc, char **argv)
{
    static const char *const kernel_names[] = {"default", "shared", NULL},
                             *dtype_names[] = {"f32", "f16", NULL};
    const char *kernel = "default", *dtype = "f32", *csv_path = NULL;
    uint32_t len = 4096, heads = 16, kv_heads = 4, reps = 5;
    const cli_opt opts[] = {
        CLI_U32("--len", "N", len, 1, 1u << 20, "MLA's keys (default 4096)"),
        CLI_U32("--heads", "N", heads, 1, 256, "query heads of both (default 16)"),
        CLI_U32("--kv-heads", "N", kv_heads, 1, 256,
                "key / value heads of the 128/128 attention (default 4)"),
        CLI_CHOICE("--dtype", "NAME", dtype, dtype_names, "f32 (default) or f16"),
        CLI_CHOICE("--kernel", "NAME", kernel, kernel_names,
                   "default (the device's) or shared (flash.comp forced)"),
        CLI_U32("--reps", "N", reps, 1, 64, "timed calls per row, median (default 5)"),
        CLI_STR("--csv", "FILE", csv_path, "also write the rows as CSV"),
    };
    CLI_PARSE(PROG, "An MLA decode step (d_k 576, d_v 512) against a 128/128 one of the same "
                    "cache bytes.",
              opts, argc, argv);
    if (heads % kv_heads) {
        fprintf(stderr, "%s: --kv-heads %u must divide --heads %u\n", PROG, kv_heads, heads);
        return 2;
    }
    const uint32_t dt = strcmp(dtype, "f16") ? VKMHA_DTYPE_F32 : VKMHA_DTYPE_F16;
    vkmha_context_info info;
    char date[32];
    FILE *csv;
    if (!bench_begin(csv_path, PROG,
                     "kernel,dtype,attention,heads,kv_heads,d_k,d_v,len,cache_bytes,ms_med,"
                     "ms_min,device_ms,ratio",
                     &info, date, &csv))
        return 1;
    vkmha_context *ctx = bench_profile_context(PROG, kernel);
    /* The 128/128 rows' keys: the same elements of cache as MLA's. */
    const uint32_t gqa_len = (uint32_t)(((uint64_t)len * (576 + 512)) / (256u * kv_heads));
    const struct {
        const char *name;
        uint32_t kv_heads, d_k, d_v, len;
    } rows[2] = {{"mla 576/512", 1, 576, 512, len}, {"gqa 128/128", kv_heads, 128, 128, gqa_len}};
    printf("%s %s: %s (%s %s), %s kernel, %s, %u query heads, median of %u\n", PROG, date,
           info.device.name, info.device.driver_name, info.device.driver_info, kernel, dtype,
           heads, reps);
    printf("%-12s %4s %4s %4s %7s %10s %9s %9s %10s %7s\n", "attention", "Hkv", "d_k", "d_v",
           "keys", "cache MiB", "ms", "min ms", "device ms", "ratio");
    uint64_t seed = 576;
    double med[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        vkmha_tensor *q = random_tensor(ctx, dt, heads, 1, rows[r].d_k, &seed),
                     *k = random_tensor(ctx, dt, rows[r].kv_heads, rows[r].len, rows[r].d_k, &seed),
                     *v = random_tensor(ctx, dt, rows[r].kv_heads, rows[r].len, rows[r].d_v, &seed),
                     *o = random_tensor(ctx, dt, heads, 1, rows[r].d_v, &seed);
        const vkmha_attention_desc ad = {.batch = 1, .heads = heads,
                                         .kv_heads = rows[r].kv_heads, .len_q = 1,
                                         .len_k = rows[r].len, .d_k = rows[r].d_k,
                                         .d_v = rows[r].d_v, .path = VKMHA_ATTENTION_PATH_FUSED,
                                         .dtype = dt};
        double t[64], dev = 0.0;
        bench_check(PROG, ctx, vkmha_attention_tensor(ctx, &ad, q, k, v, NULL, o, NULL),
                    "warm-up");
        for (uint32_t i = 0; i < reps; i++) {
            const double t0 = now_ms();
            bench_check(PROG, ctx, vkmha_attention_tensor(ctx, &ad, q, k, v, NULL, o, NULL),
                        "vkmha_attention_tensor");
            t[i] = now_ms() - t0;
            dev = bench_device_ms(ctx);
        }
        qsort(t, reps, sizeof *t, cmp_double);
        med[r] = t[reps / 2];
        const uint64_t bytes = vkmha_tensor_bytes(k) + vkmha_tensor_bytes(v);
        printf("%-12s %4u %4u %4u %7u %10.2f %9.3f %9.3f %10.3f", rows[r].name, rows[r].kv_heads,
               rows[r].d_k, rows[r].d_v, rows[r].len, bytes / 1048576.0, med[r], t[0], dev);
        if (r)
            printf(" %6.2fx", med[0] / med[1]);
        printf("\n");
        if (csv)
            fprintf(csv, "%s,%s,%s,%u,%u,%u,%u,%u,%llu,%.4f,%.4f,%.4f,%.4f\n", kernel, dtype,
                    rows[r].name, heads, rows[r].kv_heads, rows[r].d_k, rows[r].d_v,
                    rows[r].len, (unsigned long long)bytes, med[r], t[0], dev,
                    r ? med[0] / med[1] : 1.0);
        vkmha_tensor_destroy(q), vkmha_tensor_destroy(k), vkmha_tensor_destroy(v),
            vkmha_tensor_destroy(o);
    }
    printf("ratio: MLA's step time over the 128/128 step's (same cache bytes)\n");
    vkmha_context_destroy(ctx);
    if (csv)
        fclose(csv);
    return 0;
}
