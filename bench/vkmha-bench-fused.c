/* vkmha-bench-fused: the MHA forward on the fused attention path against the
 * unfused one, in the same run, over long sequences: time and peak device
 * memory. Each (path, length) gets a fresh context so the peak is its own.
 *
 *   vkmha-bench-fused [--d-model 512] [--heads 8] [--batch 1]
 *                     [--min-len 512] [--max-len 16384] [--reps 3]
 *                     [--causal] [--csv FILE]
 *
 * Times are host wall clock around vkmha_mha_forward (uploads, one submit,
 * wait, downloads), median of --reps after a warm-up; lengths whose first
 * forward takes over 20 s are timed once. Memory is the context's
 * device_memory_peak_bytes: everything vkmha allocated (input, projections,
 * attention workspace, output, weights). "Beyond" subtracts the layer's
 * inputs, weights and output; "workspace" further subtracts the three
 * projections [B*L][d_model], leaving what attention itself needs: the
 * [B][H][L][L] scores when unfused, per-row statistics when fused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "vkmha.h"

#define MIB (1024.0 * 1024.0)


typedef struct result {
    vkmha_status status;
    char error[512];
    double ms;
    uint64_t peak;
} result;

static result run(const vkmha_mha_desc *d, const vkmha_mha_io *io, uint32_t reps)
{
    result r = {0};
    vkmha_context *ctx = NULL;
    vkmha_mha *mha = NULL;
    if ((r.status = vkmha_context_create(NULL, &ctx))) {
        snprintf(r.error, sizeof r.error, "%s", vkmha_context_last_error(NULL));
        return r;
    }
    double t[16];
    reps = reps > 16 ? 16 : reps ? reps : 1;
    double t0 = now_ms();
    if (!(r.status = vkmha_mha_create(ctx, d, &mha)) &&
        !(r.status = vkmha_mha_forward(mha, io))) {
        double first = now_ms() - t0;
        if (first > 20000.0)
            reps = 1, t[0] = first;
        else
            for (uint32_t i = 0; i < reps && !r.status; i++) {
                t0 = now_ms();
                r.status = vkmha_mha_forward(mha, io);
                t[i] = now_ms() - t0;
            }
    }
    if (r.status) {
        snprintf(r.error, sizeof r.error, "%s", vkmha_context_last_error(ctx));
    } else {
        qsort(t, reps, sizeof *t, cmp_double);
        r.ms = t[reps / 2];
        vkmha_context_info info;
        vkmha_context_get_info(ctx, &info);
        r.peak = info.device_memory_peak_bytes;
    }
    vkmha_mha_destroy(mha);
    vkmha_context_destroy(ctx);
    return r;
}

int main(int argc, char **argv)
{
    uint32_t d_model = 512, heads = 8, batch = 1, reps = 3, min_len = 512, max_len = 16384;
    bool causal = false;
    const char *csv_path = NULL;
    const cli_opt opts[] = {
        CLI_U32("--d-model", "N", d_model, 1, 65536, "model width (default 512)"),
        CLI_U32("--heads", "N", heads, 1, 65536, "heads, dividing --d-model (default 8)"),
        CLI_U32("--batch", "N", batch, 1, 65536, "batch size (default 1)"),
        CLI_U32("--min-len", "L", min_len, 1, 1u << 20, "first sequence length (default 512)"),
        CLI_U32("--max-len", "L", max_len, 1, 1u << 20,
                "last sequence length; lengths double (default 16384)"),
        CLI_U32("--reps", "N", reps, 1, 16, "timed forwards per point, median (default 3)"),
        CLI_FLAG("--causal", causal, "causal mask"),
        CLI_STR("--csv", "FILE", csv_path, "also write the results to FILE (default: none)"),
    };
    CLI_PARSE("vkmha-bench-fused",
              "The MHA forward on the fused attention path against the unfused "
              "one over long\nsequences: time and peak device memory. Writes "
              "no file unless --csv is given.",
              opts, argc, argv);
    if (d_model % heads) {
        fprintf(stderr, "vkmha-bench-fused: --heads (%u) must divide --d-model (%u)\n", heads,
                d_model);
        return 2;
    }

    vkmha_context_info info;
    char date[32];
    if (!bench_device(&info, date))
        return 1;

    uint64_t seed = 7;
    const float bound = 1.0f / sqrtf((float)d_model);
    const size_t nw = (size_t)d_model * d_model;
    float *w[4];
    for (int i = 0; i < 4; i++)
        w[i] = bench_random(nw, bound, &seed);
    vkmha_mha_desc d = {0};
    d.d_model = d_model;
    d.n_head = heads;
    d.w_q = w[0], d.w_k = w[1], d.w_v = w[2], d.w_o = w[3];
    vkmha_mask mask = {.kinds = VKMHA_MASK_CAUSAL};

    FILE *csv;
    if (!bench_csv_open(csv_path, "vkmha-bench-fused", &info, date,
                        "path,batch,len,d_model,heads,causal,status,ms,peak_mib,beyond_io_mib,"
                        "workspace_mib",
                        &csv))
        return 1;
    printf("MHA forward, fused vs unfused attention: d_model %u, %u heads, batch %u%s\n"
           "device %s (%s %s), %s\n",
           d_model, heads, batch, causal ? ", causal mask" : "", info.device.name,
           info.device.driver_name, info.device.driver_info, date);
    printf("%6s %-8s %11s %11s %12s %13s %9s\n", "len", "path", "ms", "peak MiB", "beyond MiB",
           "workspace MiB", "speed");

    for (uint64_t len = min_len; len <= max_len; len *= 2) {
        const size_t n = (size_t)batch * len * d_model;
        float *x = bench_random(n, 1.0f, &seed), *out = malloc(n * sizeof *out);
        if (!out) {
            fprintf(stderr, "out of host memory\n");
            return 1;
        }
        /* Self-attention: the input is uploaded once. */
        const double io_bytes = 2.0 * n * 4, weight_bytes = 4.0 * nw * 4,
                     proj_bytes = 3.0 * n * 4;
        result res[2];
        static const vkmha_attention_path paths[2] = {VKMHA_ATTENTION_PATH_FUSED,
                                                      VKMHA_ATTENTION_PATH_UNFUSED};
        static const char *const names[2] = {"fused", "unfused"};
        for (int p = 0; p < 2; p++) {
            vkmha_mha_io io = {batch, (uint32_t)len, 0, x, x, x, causal ? &mask : NULL,
                               out, NULL, paths[p], 0, 0, NULL, 0, NULL, NULL};
            res[p] = run(&d, &io, reps);
            const result *r = &res[p];
            if (r->status) {
                printf("%6llu %-8s %s\n", (unsigned long long)len, names[p], r->error);
            } else {
                double beyond = r->peak - io_bytes - weight_bytes;
                printf("%6llu %-8s %11.1f %11.1f %12.1f %13.2f", (unsigned long long)len,
                       names[p], r->ms, r->peak / MIB, beyond / MIB,
                       (beyond - proj_bytes) / MIB);
                if (p == 1 && !res[0].status)
                    printf(" %8.2fx", r->ms / res[0].ms);
                printf("\n");
            }
            if (csv) {
                if (r->status)
                    fprintf(csv, "%s,%u,%llu,%u,%u,%d,%s,,,,\n", names[p], batch,
                            (unsigned long long)len, d_model, heads, causal,
                            vkmha_status_string(r->status));
                else
                    fprintf(csv, "%s,%u,%llu,%u,%u,%d,ok,%.2f,%.2f,%.2f,%.3f\n", names[p],
                            batch, (unsigned long long)len, d_model, heads, causal, r->ms,
                            r->peak / MIB, (r->peak - io_bytes - weight_bytes) / MIB,
                            (r->peak - io_bytes - weight_bytes - proj_bytes) / MIB);
                fflush(csv);
            }
            fflush(stdout);
        }
        free(x);
        free(out);
    }
    printf("speed: fused speed / unfused speed (unfused ms / fused ms) in this run\n");
    if (csv)
        fclose(csv);
    for (int i = 0; i < 4; i++)
        free(w[i]);
    return 0;
}
