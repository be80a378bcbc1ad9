/* vkmha-bench-quant: the few-rows matmul of a decode step's projection with
 * quantized weights against the same product with f16 and f32 weights, in
 * the same run (issue 28's ratios are to the f16 weights).
 *
 *   vkmha-bench-quant [--n 4096] [--k 4096] [--reps 9] [--csv FILE]
 *
 * Rows: vkmha_matmul_tensor of a [m][k] fp32 activation by a weight
 * b [n][k] (op T, a torch.nn.Linear weight) for m = 1 and 8, the weight in
 * f32, f16, q8 (group 32), q4 (group 32) and q4z (group 128, GPTQ's usual
 * size); the weights and activations are device tensors written once.
 * Columns: the weight's bytes (scales and zero points included) and their
 * ratio to f16's; the median wall clock of --reps calls after a warm-up
 * (one submit and wait each) and the median device time of the call
 * (VKMHA_CONTEXT_PROFILE), each with its ratio to the f16 row of the same
 * m; and the largest difference from the reference backend's product on
 * the same dequantized weights (the quantization error itself is
 * tests/python/test_quant.py's, not this program's). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "half.h"
#include "vkmha.h"

typedef struct wrow {
    const char *name;
    uint32_t dtype;      /* the weight's float dtype, when quant is 0 */
    uint32_t quant, group;
} wrow;

typedef struct result {
    double wall_ms, gpu_ms, max_diff;
    uint64_t bytes;
    bool ok;
} result;

static vkmha_tensor *tensor_with(const char *prog, vkmha_context *ctx, uint32_t dt,
                                 uint64_t n, const void *data, uint64_t bytes)
{
    const vkmha_tensor_desc d = {.dtype = dt, .rank = 1, .dims = {(uint32_t)n}};
    vkmha_tensor *t = NULL;
    bench_check(prog, ctx, vkmha_tensor_create(ctx, &d, &t), "vkmha_tensor_create");
    if (data)
        bench_check(prog, ctx, vkmha_tensor_upload(t, 0, data, bytes), "vkmha_tensor_upload");
    return t;
}

/* The weight w [n][k] (fp32) as row r's bytes (*bytes), and, for the
 * reference, the values those bytes stand for in fp32 (*values). */
static void *weight_bytes(const char *prog, vkmha_context *ref, const wrow *r, const float *w,
                          uint32_t n, uint32_t k, uint64_t *bytes, float *values)
{
    const size_t count = (size_t)n * k;
    if (!r->quant) {
        const size_t es = r->dtype == VKMHA_DTYPE_F32 ? 4 : 2;
        void *out = malloc(count * es);
        if (!out)
            exit(2);
        if (r->dtype == VKMHA_DTYPE_F32) {
            memcpy(out, w, count * 4);
            memcpy(values, w, count * 4);
        } else { /* rounded to nearest even, as every vkmha conversion */
            vkmha__from_f32(VKMHA_DTYPE_F16, w, count, out);
            vkmha__to_f32(VKMHA_DTYPE_F16, out, count, values);
        }
        *bytes = count * es;
        return out;
    }
    const vkmha_quant_desc q = {r->quant, r->group, n, k};
    vkmha_quant_layout l;
    bench_check(prog, ref, vkmha_quant_layout_of(ref, &q, &l), "vkmha_quant_layout_of");
    void *out = malloc(l.bytes);
    if (!out)
        exit(2);
    bench_check(prog, ref, vkmha_quantize(ref, &q, VKMHA_DTYPE_F32, w, out, l.bytes),
                "vkmha_quantize");
    bench_check(prog, ref, vkmha_dequantize(ref, &q, out, l.bytes, VKMHA_DTYPE_F32, values),
                "vkmha_dequantize");
    *bytes = l.bytes;
    return out;
}

static result run(const char *prog, vkmha_context *ctx, vkmha_context *ref, const wrow *r,
                  uint32_t m, uint32_t n, uint32_t k, const float *a, const float *w,
                  uint32_t reps)
{
    result res = {0};
    float *values = malloc((size_t)n * k * 4), *want = malloc((size_t)m * n * 4),
          *got = malloc((size_t)m * n * 4);
    if (!values || !want || !got)
        exit(2);
    void *b = weight_bytes(prog, ref, r, w, n, k, &res.bytes, values);
    const uint32_t wdt = r->quant ? VKMHA_DTYPE_U8 : r->dtype;
    vkmha_tensor *ta = tensor_with(prog, ctx, VKMHA_DTYPE_F32, (uint64_t)m * k, a,
                                   (uint64_t)m * k * 4),
                 *tb = tensor_with(prog, ctx, wdt, r->quant ? res.bytes : (uint64_t)n * k, b,
                                   res.bytes),
                 *tc = tensor_with(prog, ctx, VKMHA_DTYPE_F32, (uint64_t)m * n, NULL, 0);
    const vkmha_matmul_desc d = {.m = m, .n = n, .k = k, .op_b = VKMHA_OP_T,
                                 .b_quant = r->quant, .b_group_size = r->group};
    double wall[64], gpu[64];
    uint32_t n_gpu = 0;
    for (uint32_t i = 0; i <= reps; i++) { /* the first: a warm-up */
        const double t0 = now_ms();
        bench_check(prog, ctx, vkmha_matmul_tensor(ctx, &d, ta, tb, NULL, tc),
                    "vkmha_matmul_tensor");
        const double t1 = now_ms();
        vkmha_context_info info;
        if (!i)
            continue;
        wall[i - 1] = t1 - t0;
        if (!vkmha_context_get_info(ctx, &info) && info.last_gpu_time_ns)
            gpu[n_gpu++] = info.last_gpu_time_ns / 1e6;
    }
    bench_check(prog, ctx, vkmha_tensor_download(tc, 0, got, (uint64_t)m * n * 4),
                "vkmha_tensor_download");
    const vkmha_matmul_desc dref = {.m = m, .n = n, .k = k, .op_b = VKMHA_OP_T};
    bench_check(prog, ref, vkmha_matmul(ref, &dref, a, values, NULL, want), "reference");
    qsort(wall, reps, sizeof *wall, cmp_double);
    qsort(gpu, n_gpu, sizeof *gpu, cmp_double);
    res.wall_ms = wall[reps / 2];
    res.gpu_ms = n_gpu ? gpu[n_gpu / 2] : -1.0;
    res.max_diff = max_abs_diff(got, want, (size_t)m * n);
    res.ok = true;
    vkmha_tensor_destroy(ta);
    vkmha_tensor_destroy(tb);
    vkmha_tensor_destroy(tc);
    free(b), free(values), free(want), free(got);
    return res;
}

int main(int argc, char **argv)
{
    static const char *prog = "vkmha-bench-quant";
    uint32_t n = 4096, k = 4096, reps = 9;
    const char *csv_path = NULL;
    const cli_opt opts[] = {
        CLI_U32("--n", "N", n, 1, 1u << 20, "the weight's rows, outputs (default 4096)"),
        CLI_U32("--k", "K", k, 128, 1u << 20,
                "its columns, inputs: a multiple of 128 (default 4096)"),
        CLI_U32("--reps", "N", reps, 1, 63, "timed calls per row, median (default 9)"),
        CLI_STR("--csv", "FILE", csv_path, "also write the results to FILE (default: none)"),
    };
    CLI_PARSE(prog,
              "The few-rows matmul (a decode step's projection) with q8 / q4 / q4z weights\n"
              "against f16 and f32 weights, in the same run.",
              opts, argc, argv);
    if (k % 128) {
        fprintf(stderr, "%s: --k (%u) must be a multiple of 128 (every group size)\n", prog, k);
        return 2;
    }
    vkmha_context_info info;
    char date[32];
    FILE *csv;
    if (!bench_begin(csv_path, prog,
                     "m,n,k,weight,bytes,bytes_vs_f16,wall_ms,wall_vs_f16,gpu_ms,gpu_vs_f16,"
                     "max_abs_diff",
                     &info, date, &csv))
        return 1;
    vkmha_context_desc cd = {.backend = VKMHA_BACKEND_VULKAN, .flags = VKMHA_CONTEXT_PROFILE};
    vkmha_context *ctx = NULL, *ref = NULL;
    bench_check(prog, NULL, vkmha_context_create(&cd, &ctx), "vkmha_context_create");
    const vkmha_context_desc rd = {.backend = VKMHA_BACKEND_REFERENCE};
    bench_check(prog, NULL, vkmha_context_create(&rd, &ref), "reference context");
    printf("few-rows matmul, weight [%u][%u] op T, fp32 activations; ratios to the f16 "
           "weight\ndevice %s (%s %s), %s\n",
           n, k, info.device.name, info.device.driver_name, info.device.driver_info, date);
    printf("%3s %-6s %10s %7s %10s %7s %10s %7s %10s\n", "m", "weight", "MiB", "bytes",
           "wall ms", "ratio", "gpu ms", "ratio", "max diff");
    static const wrow rows[] = {{"f16", VKMHA_DTYPE_F16, 0, 0},
                                {"f32", VKMHA_DTYPE_F32, 0, 0},
                                {"q8", 0, VKMHA_QUANT_Q8, 32},
                                {"q4", 0, VKMHA_QUANT_Q4, 32},
                                {"q4z", 0, VKMHA_QUANT_Q4Z, 128}};
    uint64_t seed = 28;
    float *w = bench_random((size_t)n * k, 1.0f, &seed);
    static const uint32_t ms[2] = {1, 8};
    for (int mi = 0; mi < 2; mi++) {
        float *a = bench_random((size_t)ms[mi] * k, 1.0f, &seed);
        result f16 = {0};
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            const result r = run(prog, ctx, ref, &rows[i], ms[mi], n, k, a, w, reps);
            if (!i)
                f16 = r;
            const double gr = r.gpu_ms > 0 && f16.gpu_ms > 0 ? r.gpu_ms / f16.gpu_ms : 0;
            printf("%3u %-6s %10.2f %6.3fx %10.3f %6.2fx %10.3f %6.2fx %10.2g\n", ms[mi],
                   rows[i].name, r.bytes / 1048576.0, (double)r.bytes / f16.bytes, r.wall_ms,
                   r.wall_ms / f16.wall_ms, r.gpu_ms, gr, r.max_diff);
            if (csv)
                fprintf(csv, "%u,%u,%u,%s,%llu,%.4f,%.4f,%.3f,%.4f,%.3f,%.3g\n", ms[mi], n, k,
                        rows[i].name, (unsigned long long)r.bytes,
                        (double)r.bytes / f16.bytes, r.wall_ms, r.wall_ms / f16.wall_ms,
                        r.gpu_ms, gr, r.max_diff);
        }
        free(a);
    }
    free(w);
    if (csv)
        fclose(csv);
    vkmha_context_destroy(ctx);
    vkmha_context_destroy(ref);
    return 0;
}
