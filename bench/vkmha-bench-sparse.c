/* vkmha-bench-sparse: ops on tensors past maxMemoryAllocationSize (sparse
 * buffers bound to pages of at most that size) against the same ops on the
 * same tensors in one allocation each, in the same run. Both contexts have
 * maxStorageBufferRange lowered to --page-mib through vkmha_debug_options,
 * so that they bind the same windows; the sparse one has
 * maxMemoryAllocationSize lowered to it too, and only the memory differs.
 *
 *   vkmha-bench-sparse [--page-mib 32] [--vocab 32000] [--d-model 1024]
 *                      [--len-k 262144] [--reps 7] [--csv FILE]
 *
 * Rows: a vocabulary projection, vkmha_matmul_tensor of a [m][d-model] by
 * b [vocab][d-model] (op T, fp32: 125 MiB) for a decode's one row and a
 * prefill's 64; and a decode over a long cache, vkmha_attention_tensor of
 * one query of 8 heads over keys and values [1][2][len-k][64] (fp32: 128
 * MiB each). Times are host wall clock around the call (one submit, wait),
 * median of --reps after a warm-up; both contexts' results must be equal
 * (the same windows in the same order). Needs a device with sparse binding
 * (Mesa 25's lavapipe; not Mesa 22's): elsewhere it says so and exits 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "vkmha.h"

/* A context with the range (and with `sparse` the allocations) lowered to
 * `page` bytes, and the fused kernel `kernel` (vkmha_fused_kernel); NULL
 * after a message. */
static vkmha_context *context(uint64_t page, bool sparse, uint32_t kernel)
{
    vkmha_debug_options dbg = {.max_storage_buffer_range = page,
                               .max_allocation_size = sparse ? page : 0,
                               .fused_kernel = kernel};
    vkmha_context_desc cd = {0};
    cd.backend = VKMHA_BACKEND_VULKAN;
    cd.debug = &dbg;
    vkmha_context *ctx = NULL;
    vkmha_context_info info;
    if (vkmha_context_create(&cd, &ctx)) {
        fprintf(stderr, "vkmha-bench-sparse: %s\n", vkmha_context_last_error(NULL));
        return NULL;
    }
    vkmha_context_get_info(ctx, &info);
    if (sparse && !info.sparse_tensors) {
        fprintf(stderr,
                "vkmha-bench-sparse: %s makes no sparse tensors (no sparseBinding); run it "
                "on a device that has it (e.g. Mesa 25's lavapipe)\n",
                info.device.name);
        vkmha_context_destroy(ctx);
        return NULL;
    }
    return ctx;
}

/* A rank-2 fp32 tensor [d0][d1] holding src (NULL: unset); NULL after a
 * message. */
static vkmha_tensor *tensor(vkmha_context *ctx, uint32_t d0, uint32_t d1, const float *src)
{
    const vkmha_tensor_desc d = {VKMHA_DTYPE_F32, 2, {d0, d1}};
    vkmha_tensor *t = NULL;
    if (vkmha_tensor_create(ctx, &d, &t) ||
        (src && vkmha_tensor_upload(t, 0, src, (uint64_t)d0 * d1 * 4))) {
        fprintf(stderr, "vkmha-bench-sparse: tensor [%u][%u]: %s\n", d0, d1,
                vkmha_context_last_error(ctx));
        vkmha_tensor_destroy(t);
        return NULL;
    }
    return t;
}

/* One row's operation on a context's tensors: its inputs in[0..2] and output. */
typedef struct row {
    const char *name;
    uint32_t m;      /* matmul rows; 0: the attention */
    uint32_t kernel; /* the attention's fused kernel (vkmha_fused_kernel) */
} row;

/* The median ms of reps calls of r on ctx (the inputs' host data in host[],
 * the output downloaded to out, n_out floats); negative after a message. */
static double run(vkmha_context *ctx, const row *r, uint32_t vocab, uint32_t d_model,
                  uint32_t len_k, float *const host[3], float *out, size_t n_out,
                  uint32_t reps)
{
    vkmha_tensor *t[4] = {NULL, NULL, NULL, NULL};
    vkmha_status st = VKMHA_SUCCESS;
    vkmha_matmul_desc md = {0};
    const vkmha_attention_desc ad = {1, 8, 2, 1, len_k, 64, 64, 0, VKMHA_ATTENTION_PATH_FUSED,
                                     0, 0};
    if (r->m) {
        md.m = r->m, md.n = vocab, md.k = d_model, md.op_b = VKMHA_OP_T;
        t[0] = tensor(ctx, r->m, d_model, host[0]);
        t[1] = tensor(ctx, vocab, d_model, host[1]);
        t[3] = tensor(ctx, r->m, vocab, NULL);
    } else {
        t[0] = tensor(ctx, 8, 64, host[0]);
        t[1] = tensor(ctx, 2 * len_k, 64, host[1]);
        t[2] = tensor(ctx, 2 * len_k, 64, host[2]);
        t[3] = tensor(ctx, 8, 64, NULL);
    }
    double ms[64], median = -1.0;
    if (!t[0] || !t[1] || (!r->m && !t[2]) || !t[3])
        goto done;
    for (uint32_t i = 0; i <= reps && !st; i++) { /* the first: a warm-up */
        const double t0 = now_ms();
        st = r->m ? vkmha_matmul_tensor(ctx, &md, t[0], t[1], NULL, t[3])
                  : vkmha_attention_tensor(ctx, &ad, t[0], t[1], t[2], NULL, t[3], NULL);
        if (i)
            ms[i - 1] = now_ms() - t0;
    }
    if (!st)
        st = vkmha_tensor_download(t[3], 0, out, n_out * 4);
    if (st) {
        fprintf(stderr, "vkmha-bench-sparse: %s: %s\n", r->name, vkmha_context_last_error(ctx));
        goto done;
    }
    qsort(ms, reps, sizeof *ms, cmp_double);
    median = ms[reps / 2];
done:
    for (int i = 0; i < 4; i++)
        vkmha_tensor_destroy(t[i]);
    return median;
}

int main(int argc, char **argv)
{
    uint32_t page_mib = 32, vocab = 32000, d_model = 1024, len_k = 262144, reps = 7;
    const char *csv_path = NULL;
    const cli_opt opts[] = {
        CLI_U32("--page-mib", "N", page_mib, 1, 4096,
                "the lowered range, and the sparse context's allocations, in MiB (default 32)"),
        CLI_U32("--vocab", "N", vocab, 1, 1u << 20, "the projection's outputs (default 32000)"),
        CLI_U32("--d-model", "N", d_model, 1, 1u << 16, "its inputs (default 1024)"),
        CLI_U32("--len-k", "L", len_k, 1, 1u << 24, "the decode's keys (default 262144)"),
        CLI_U32("--reps", "N", reps, 1, 63, "timed calls per row, median (default 7)"),
        CLI_STR("--csv", "FILE", csv_path, "also write the results to FILE (default: none)"),
    };
    CLI_PARSE("vkmha-bench-sparse",
              "Ops on sparse tensors (past maxMemoryAllocationSize) against the same tensors\n"
              "in one allocation each, in the same run.",
              opts, argc, argv);
    vkmha_context_info info;
    char date[32];
    FILE *csv;
    if (!bench_begin(csv_path, "vkmha-bench-sparse",
                     "op,m,n_or_len_k,k_or_dim,tensor_bytes,page_bytes,whole_ms,sparse_ms,"
                     "max_abs_diff",
                     &info, date, &csv))
        return 1;
    const uint64_t page = (uint64_t)page_mib << 20;
    printf("tensors past maxMemoryAllocationSize (sparse, pages of %u MiB) vs one allocation "
           "each,\nthe range lowered to %u MiB in both\ndevice %s (%s %s), %s\n",
           page_mib, page_mib, info.device.name, info.device.driver_name,
           info.device.driver_info, date);
    printf("%-40s %10s %10s %10s %8s %10s\n", "op", "MiB", "whole ms", "sparse ms", "ratio",
           "max diff");
    const row rows[] = {
        {"matmul op T, 1 row (decode's logits)", 1, 0},
        {"matmul op T, 64 rows (prefill's logits)", 64, 0},
        {"attention, 1 query, 8 heads over 2", 0, VKMHA_FUSED_KERNEL_AUTO},
        {"attention, the same, shared-memory kernel", 0, VKMHA_FUSED_KERNEL_SHARED}};
    uint64_t seed = 5;
    int status = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        const size_t n_in[3] = {r->m ? (size_t)r->m * d_model : 8 * 64,
                                r->m ? (size_t)vocab * d_model : (size_t)2 * len_k * 64,
                                r->m ? 0 : (size_t)2 * len_k * 64};
        const size_t n_out = r->m ? (size_t)r->m * vocab : 8 * 64;
        float *host[3], *out[2] = {malloc(n_out * 4), malloc(n_out * 4)};
        for (int j = 0; j < 3; j++)
            host[j] = n_in[j] ? bench_random(n_in[j], 1.0f, &seed) : NULL;
        vkmha_context *whole = context(page, false, r->kernel),
                      *sparse = whole ? context(page, true, r->kernel) : NULL;
        const double w = sparse ? run(whole, r, vocab, d_model, len_k, host, out[0], n_out, reps)
                                : -1.0,
                     s = sparse ? run(sparse, r, vocab, d_model, len_k, host, out[1], n_out, reps)
                                : -1.0;
        const bool made = sparse != NULL;
        vkmha_context_destroy(whole);
        vkmha_context_destroy(sparse);
        const double diff = w < 0 || s < 0 ? 0.0 : max_abs_diff(out[0], out[1], n_out);
        const double mib = n_in[1] * 4.0 / 1048576.0;
        if (w < 0 || s < 0) {
            status = 1;
        } else {
            printf("%-40s %10.1f %10.2f %10.2f %7.2fx %10.2g\n", r->name, mib, w, s, s / w,
                   diff);
            if (csv)
                fprintf(csv, "%s,%u,%u,%u,%llu,%llu,%.3f,%.3f,%.3g\n",
                        r->m                                       ? "matmul"
                        : r->kernel == VKMHA_FUSED_KERNEL_SHARED ? "attention_shared"
                                                                   : "attention",
                        r->m ? r->m : 1,
                        r->m ? vocab : len_k, r->m ? d_model : 64,
                        (unsigned long long)(n_in[1] * 4), (unsigned long long)page, w, s,
                        diff);
        }
        fflush(stdout);
        for (int j = 0; j < 3; j++)
            free(host[j]);
        free(out[0]), free(out[1]);
        if (!made) /* no device to run the other rows on */
            break;
    }
    printf("ratio: sparse / one allocation, in this run (attention: keys and values each of "
           "the\nsize shown). max diff: between the two contexts' outputs. Sparse buffers "
           "have no texel\nviews (Mesa 25's lavapipe reads them wrong): on CPU devices the "
           "default kernels then\nread them as storage buffers, the fused attention in "
           "windows of keys.\n");
    if (csv)
        fclose(csv);
    return status;
}
