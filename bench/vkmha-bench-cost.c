/* vkmha-bench-cost: measures attention on every path that can run it (the
 * fused path on the CPU-shaped kernel and on the workgroup-shared kernel,
 * and the unfused path) and on the default path (AUTO, chosen by
 * src/vk_cost.c's cost model), over a grid of shapes: the attention inside
 * vkmha-bench's MHA shapes, the test suite's shapes, decode shapes, wide and
 * unaligned heads, tiny heads in huge batches. Then it fits the cost model's
 * coefficients for this device to the measurements and prints them as the
 * row of src/vk_cost.c's table, and reports, for every shape, how much
 * slower than the fastest path the default path was (the target: at most
 * 10%) and what the new coefficients would choose.
 *
 *   vkmha-bench-cost [--reps 3] [--quick] [--csv FILE]
 *   MESA_SHADER_CACHE_DISABLE=true vkmha-bench-cost --compile
 *
 * --compile instead measures what each fused kernel's pipeline costs at its
 * first call, per head-dim class: a fresh context's first attention call
 * (pipeline creation, and on lavapipe the JIT compilation at first
 * dispatch) minus its second; with Mesa's disk cache off, as written, that
 * is the compile time a first run pays.
 *
 * Times are the device time of the call (VKMHA_CONTEXT_PROFILE timestamps;
 * on devices without timestamps, host wall clock), the minimum of --reps
 * after a warm-up call (other work on the machine only adds time), on host
 * arrays with random inputs and no mask. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "vk_internal.h"
#include "vkmha.h"

typedef struct shape {
    uint32_t b, h, lq, lk, dk, dv;
    const char *why;
} shape;

static const shape shapes[] = {
    /* attention of vkmha-bench's MHA rows (d_model 512 / 8 heads, 1024 / 16) */
    {1, 8, 128, 128, 64, 64, "mha"},    {1, 8, 256, 256, 64, 64, "mha"},
    {1, 8, 512, 512, 64, 64, "mha"},    {1, 8, 1024, 1024, 64, 64, "mha"},
    {1, 16, 128, 128, 64, 64, "mha"},   {1, 16, 512, 512, 64, 64, "mha"},
    {8, 8, 128, 128, 64, 64, "mha"},    {8, 8, 256, 256, 64, 64, "mha"},
    /* decode */
    {1, 8, 1, 512, 64, 64, "decode"},   {1, 8, 1, 4096, 64, 64, "decode"},
    {4, 32, 1, 2048, 128, 128, "decode"}, {1, 8, 4, 1024, 64, 64, "decode"},
    /* head dims */
    {1, 8, 512, 512, 32, 32, "dims"},   {1, 8, 256, 256, 128, 128, "dims"},
    {1, 4, 256, 256, 256, 256, "dims"}, {1, 8, 300, 300, 16, 16, "dims"},
    {1, 8, 256, 256, 4, 4, "dims"},
    /* unaligned heads (no CPU-shaped kernel) */
    {1, 8, 256, 256, 30, 30, "unaligned"}, {1, 4, 128, 128, 100, 100, "unaligned"},
    {2, 2, 9, 30, 6, 6, "unaligned"},
    /* the test suite's shapes */
    {2, 4, 17, 17, 16, 16, "tests"},    {1, 2, 3, 75, 8, 5, "tests"},
    {2, 8, 33, 40, 16, 24, "tests"},    {1, 4, 20, 129, 32, 32, "tests"},
    {1, 3, 1, 300, 64, 17, "tests"},    {1, 2, 300, 300, 64, 64, "tests"},
    {1, 2, 70, 45, 128, 100, "tests"},  {1, 2, 33, 50, 256, 200, "tests"},
    /* tiny heads, huge batch (d_model 2) */
    {70000, 2, 3, 3, 1, 1, "tiny"},     {20000, 1, 8, 8, 2, 2, "tiny"},
    {4096, 4, 16, 16, 4, 4, "tiny"},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

enum { P_CPU, P_SHARED, P_UNFUSED, P_AUTO, N_PATHS };

/* The last attention plan the debug log described. */
static void keep_plan(void *user, vkmha_log_level level, vkmha_status status, const char *msg)
{
    (void)status;
    if (level == VKMHA_LOG_DEBUG && strstr(msg, " attention"))
        snprintf((char *)user, 512, "%s", msg);
}

static vkmha_context *make_context(vkmha_fused_kernel kernel, char *plan)
{
    vkmha_debug_options dbg = {.fused_kernel = kernel};
    vkmha_context_desc cd = {0};
    cd.flags = VKMHA_CONTEXT_PROFILE;
    cd.debug = &dbg;
    cd.log = keep_plan;
    cd.log_user = plan;
    cd.log_level = VKMHA_LOG_DEBUG; /* the plan line of each attention call */
    vkmha_context *ctx = NULL;
    if (vkmha_context_create(&cd, &ctx)) {
        fprintf(stderr, "vkmha-bench-cost: cannot create a Vulkan context: %s\n",
                vkmha_context_last_error(NULL));
        exit(1);
    }
    return ctx;
}

/* Median time in us of attention of shape s on ctx with `path`, or -1 if it
 * does not run; *ran: what the plan said ran ("cpu", "shared", "unfused"). */
static double measure(vkmha_context *ctx, const char *plan, const shape *s,
                      vkmha_attention_path path, uint32_t reps, const float *q, const float *k,
                      const float *v, float *out, char ran[16])
{
    vkmha_attention_desc d = {s->b, s->h, 0, s->lq, s->lk, s->dk, s->dv, 0, path, 0, 0};
    double t[16];
    reps = reps < 1 ? 1 : reps > 16 ? 16 : reps;
    if (vkmha_attention(ctx, &d, q, k, v, NULL, out, NULL))
        return -1.0;
    snprintf(ran, 16, "%s", strstr(plan, ": unfused attention")  ? "unfused"
                            : strstr(plan, "(CPU-shaped kernel)") ? "cpu"
                                                                  : "shared");
    vkmha_context_info info;
    for (uint32_t r = 0; r < reps; r++) {
        double t0 = now_ms();
        if (vkmha_attention(ctx, &d, q, k, v, NULL, out, NULL))
            return -1.0;
        double wall = (now_ms() - t0) * 1e3;
        vkmha_context_get_info(ctx, &info);
        t[r] = info.gpu_timing ? info.last_gpu_time_ns / 1e3 : wall;
    }
    qsort(t, reps, sizeof t[0], cmp_double);
    return t[0]; /* the least disturbed by other work on the machine */
}

/* What the cost model's features need of a context's kernels
 * (vkmha_context_get_kernels): the query rows per workgroup of each
 * head-dim class's fused kernels (1 where the device lacks one) and the
 * large matmul tile (the register variant's BM = WG * TM, BN = TN, BK = 4). */
typedef struct chosen_kernels {
    uint32_t cpu_block_q[4], shared_block_q[4];
    vkmha_tile_config tile;
} chosen_kernels;

static chosen_kernels read_kernels(const vkmha_context *ctx)
{
    chosen_kernels c;
    vkmha_kernel_info k;
    char name[32];
    for (uint32_t cls = 0; cls < 4; cls++) {
        snprintf(name, sizeof name, "flash_cpu_d%u", 32u << cls);
        c.cpu_block_q[cls] = kernel_find(ctx, name, &k) && k.available
                                 ? kernel_param(&k, "WG") * kernel_param(&k, "TM") : 1;
        snprintf(name, sizeof name, "flash_d%u", 32u << cls);
        c.shared_block_q[cls] = kernel_find(ctx, name, &k) && k.available
                                    ? kernel_param(&k, "BR") : 1;
    }
    kernel_find(ctx, "matmul_large", &k);
    const bool reg = !strcmp(k.shader, "matmul_cpu");
    const uint32_t tm = kernel_param(&k, "TM"), tn = kernel_param(&k, "TN");
    c.tile = (vkmha_tile_config){
        .bm = reg ? kernel_param(&k, "WG") * tm : kernel_param(&k, "BM"),
        .bn = reg ? tn : kernel_param(&k, "BN"), .bk = reg ? 4 : kernel_param(&k, "BK"),
        .tm = tm, .tn = tn, .workgroup_size = k.workgroup_size,
        .variant = reg ? VKMHA_MATMUL_VARIANT_REGISTER : VKMHA_MATMUL_VARIANT_SHARED};
    return c;
}

/* Weighted least squares on relative error, coefficients >= 0 (features
 * whose coefficient comes out negative are dropped and the rest refit).
 * x: n rows of m features, y: n times; rows with y < 0 are skipped. */
static void fit(const double *x, const double *y, int n, int m, double *coef)
{
    bool active[8];
    for (int j = 0; j < m; j++)
        active[j] = true;
    for (int iter = 0; iter < m; iter++) {
        double a[8][9] = {{0}};
        for (int i = 0; i < n; i++) {
            if (y[i] <= 0)
                continue;
            const double w = 1.0 / (y[i] * y[i]);
            for (int j = 0; j < m; j++)
                for (int l = 0; l < m; l++)
                    a[j][l] += w * x[i * m + j] * x[i * m + l];
            for (int j = 0; j < m; j++)
                a[j][m] += w * x[i * m + j] * y[i];
        }
        for (int j = 0; j < m; j++)
            if (!active[j]) {
                memset(a[j], 0, sizeof a[j]);
                for (int l = 0; l < m; l++)
                    a[l][j] = 0.0;
                a[j][j] = 1.0;
            }
        /* Gaussian elimination with partial pivoting, columns scaled. */
        double scale[8];
        for (int j = 0; j < m; j++)
            scale[j] = a[j][j] > 0 ? 1.0 / sqrt(a[j][j]) : 1.0;
        for (int j = 0; j < m; j++) {
            for (int l = 0; l < m; l++)
                a[j][l] *= scale[j] * scale[l];
            a[j][m] *= scale[j];
        }
        for (int c = 0; c < m; c++) {
            int p = c;
            for (int r = c + 1; r < m; r++)
                if (fabs(a[r][c]) > fabs(a[p][c]))
                    p = r;
            for (int l = 0; l <= m; l++) {
                double tmp = a[c][l];
                a[c][l] = a[p][l];
                a[p][l] = tmp;
            }
            if (fabs(a[c][c]) < 1e-300)
                continue;
            for (int r = 0; r < m; r++) {
                if (r == c)
                    continue;
                const double f = a[r][c] / a[c][c];
                for (int l = c; l <= m; l++)
                    a[r][l] -= f * a[c][l];
            }
        }
        int worst = -1;
        for (int j = 0; j < m; j++) {
            coef[j] = active[j] && fabs(a[j][j]) > 1e-300 ? a[j][m] / a[j][j] * scale[j] : 0.0;
            if (coef[j] < 0 && (worst < 0 || coef[j] < coef[worst]))
                worst = j;
        }
        if (worst < 0)
            return;
        active[worst] = false;
    }
    for (int j = 0; j < m; j++)
        coef[j] = coef[j] < 0 ? 0.0 : coef[j];
}

static double predict(const double *coef, const double *f, int m)
{
    double t = 0.0;
    for (int j = 0; j < m; j++)
        t += coef[j] * f[j];
    return t;
}

/* First-call cost of each fused kernel per head-dim class (see the top). */
static void compile_times(void)
{
    static const uint32_t dims[4] = {32, 64, 128, 256};
    printf("%-16s %6s %14s %14s\n", "kernel", "d", "first call ms", "second call ms");
    for (int kernel = 0; kernel < 2; kernel++)
        for (int c = 0; c < 4; c++) {
            char plan[512] = "";
            vkmha_context *ctx = make_context(kernel ? VKMHA_FUSED_KERNEL_SHARED
                                                     : VKMHA_FUSED_KERNEL_REGISTER,
                                              plan);
            const shape s = {1, 1, 8, 8, dims[c], dims[c], "compile"};
            uint64_t seed = 1;
            float *q = bench_random(8 * dims[c], 1.0f, &seed),
                  *k = bench_random(8 * dims[c], 1.0f, &seed),
                  *v = bench_random(8 * dims[c], 1.0f, &seed), *out = malloc(8 * dims[c] * 4);
            vkmha_attention_desc d = {1, 1, 0, 8, 8, dims[c], dims[c], 0,
                                      VKMHA_ATTENTION_PATH_FUSED, 1, 0};
            double t0 = now_ms();
            vkmha_status st = vkmha_attention(ctx, &d, q, k, v, NULL, out, NULL);
            double t1 = now_ms();
            st = st ? st : vkmha_attention(ctx, &d, q, k, v, NULL, out, NULL);
            double t2 = now_ms();
            if (st)
                printf("%-16s %6u %s\n", kernel ? "shared-memory" : "CPU-shaped", s.dk,
                       vkmha_status_string(st));
            else
                printf("%-16s %6u %14.0f %14.2f\n",
                       strstr(plan, "CPU-shaped") ? "CPU-shaped" : "shared-memory", s.dk,
                       t1 - t0, t2 - t1);
            free(q), free(k), free(v), free(out);
            vkmha_context_destroy(ctx);
        }
}

int main(int argc, char **argv)
{
    uint32_t reps = 3;
    bool quick = false;
    const char *csv_path = NULL;
    bool compile = false;
    const cli_opt opts[] = {
        CLI_U32("--reps", "N", reps, 1, 1000, "timed calls per shape and path, median (default 3)"),
        CLI_FLAG("--quick", quick, "fewer shapes"),
        CLI_STR("--csv", "FILE", csv_path, "also write the measurements to FILE (default: none)"),
        CLI_FLAG("--compile", compile, "only time the pipelines' compilation, then exit"),
    };
    CLI_PARSE("vkmha-bench-cost",
              "Attention on every path that can run it and on the default path chosen by\n"
              "src/vk_cost.c's cost model, over a grid of shapes; fits the model's\n"
              "coefficients for this device. Writes no file unless --csv is given.",
              opts, argc, argv);
    if (compile) {
        compile_times();
        return 0;
    }
    char plan[2][512] = {"", ""};
    vkmha_context *ctx_default = make_context(VKMHA_FUSED_KERNEL_AUTO, plan[0]);
    vkmha_context *ctx_shared = make_context(VKMHA_FUSED_KERNEL_SHARED, plan[1]);
    vkmha_context_info info;
    vkmha_context_get_info(ctx_default, &info);
    const chosen_kernels kernels = read_kernels(ctx_default);
    char date[32];
    bench_device(&info, date);
    printf("attention paths and the cost model: %s (%s), %s\n", info.device.name,
           info.device.driver_info, date);
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv)
        fprintf(csv, "batch,heads,len_q,len_k,d_k,d_v,group,cpu_kernel_us,shared_kernel_us,"
                     "unfused_us,auto_us,auto_ran,auto_over_best\n");

    double t[N_SHAPES][N_PATHS];
    char ran[N_SHAPES][16];
    double ff[2][N_SHAPES * VK_COST_FUSED_FEATURES], fu[N_SHAPES * VK_COST_UNFUSED_FEATURES];
    double yc[N_SHAPES], ys[N_SHAPES], yu[N_SHAPES];
    printf("%-30s %10s %10s %10s %10s %-8s %7s\n", "shape (B H Lq Lk dk dv)", "cpu us",
           "shared us", "unfused us", "auto us", "auto ran", "/best");
    size_t n = 0;
    for (size_t i = 0; i < N_SHAPES; i++) {
        const shape *s = &shapes[i];
        if (quick && (uint64_t)s->b * s->h * s->lq * s->lk > 2u * 1024 * 1024)
            continue;
        uint64_t seed = 1;
        const size_t nq = (size_t)s->b * s->h * s->lq * s->dk,
                     nk = (size_t)s->b * s->h * s->lk * s->dk,
                     nv = (size_t)s->b * s->h * s->lk * s->dv,
                     no = (size_t)s->b * s->h * s->lq * s->dv;
        float *q = bench_random(nq, 1.0f, &seed), *k = bench_random(nk, 1.0f, &seed),
              *v = bench_random(nv, 1.0f, &seed), *out = malloc(no * sizeof *out);
        char r_cpu[16] = "", r_sh[16] = "", r_un[16] = "";
        t[n][P_CPU] = measure(ctx_default, plan[0], s, VKMHA_ATTENTION_PATH_FUSED, reps, q, k,
                              v, out, r_cpu);
        if (strcmp(r_cpu, "cpu"))
            t[n][P_CPU] = -1.0; /* the shape does not suit it: the shared kernel ran */
        t[n][P_SHARED] = measure(ctx_shared, plan[1], s, VKMHA_ATTENTION_PATH_FUSED, reps, q, k,
                                 v, out, r_sh);
        t[n][P_UNFUSED] = measure(ctx_default, plan[0], s, VKMHA_ATTENTION_PATH_UNFUSED, reps,
                                  q, k, v, out, r_un);
        t[n][P_AUTO] = measure(ctx_default, plan[0], s, VKMHA_ATTENTION_PATH_AUTO, reps, q, k,
                               v, out, ran[n]);
        double best = INFINITY;
        for (int p = 0; p < P_AUTO; p++)
            if (t[n][p] > 0 && t[n][p] < best)
                best = t[n][p];
        char label[64];
        snprintf(label, sizeof label, "%u %u %u %u %u %u", s->b, s->h, s->lq, s->lk, s->dk,
                 s->dv);
        printf("%-30s %10.0f %10.0f %10.0f %10.0f %-8s %6.2fx\n", label, t[n][P_CPU],
               t[n][P_SHARED], t[n][P_UNFUSED], t[n][P_AUTO], ran[n], t[n][P_AUTO] / best);
        if (csv)
            fprintf(csv, "%u,%u,%u,%u,%u,%u,%s,%.1f,%.1f,%.1f,%.1f,%s,%.3f\n", s->b, s->h, s->lq,
                    s->lk, s->dk, s->dv, s->why, t[n][P_CPU], t[n][P_SHARED], t[n][P_UNFUSED],
                    t[n][P_AUTO], ran[n], t[n][P_AUTO] / best);
        const attn_shape as = {s->b, s->h, s->h, s->lq, s->lk, s->dk, s->dv, 0.0f, 0, 0, 0, NULL};
        const uint32_t cls = s->dk > 128 || s->dv > 128 ? 3 : s->dk > 64 || s->dv > 64 ? 2
                             : s->dk > 32 || s->dv > 32 ? 1 : 0;
        vk_cost_fused_features(&as, kernels.cpu_block_q[cls], false,
                               &ff[0][n * VK_COST_FUSED_FEATURES]);
        vk_cost_fused_features(&as, kernels.shared_block_q[cls], false,
                               &ff[1][n * VK_COST_FUSED_FEATURES]);
        vk_cost_unfused_features(&as, &kernels.tile, &fu[n * VK_COST_UNFUSED_FEATURES]);
        yc[n] = t[n][P_CPU], ys[n] = t[n][P_SHARED], yu[n] = t[n][P_UNFUSED];
        n++;
        free(q), free(k), free(v), free(out);
    }

    double cc[VK_COST_FUSED_FEATURES], cs[VK_COST_FUSED_FEATURES], cu[VK_COST_UNFUSED_FEATURES];
    fit(ff[0], yc, (int)n, VK_COST_FUSED_FEATURES, cc);
    fit(ff[1], ys, (int)n, VK_COST_FUSED_FEATURES, cs);
    fit(fu, yu, (int)n, VK_COST_UNFUSED_FEATURES, cu);
    double worst_auto = 0.0, worst_new = 0.0;
    for (size_t i = 0; i < n; i++) {
        double best = INFINITY, pred[3], pick_t = -1.0, pick_p = INFINITY;
        for (int p = 0; p < P_AUTO; p++)
            if (t[i][p] > 0 && t[i][p] < best)
                best = t[i][p];
        pred[P_CPU] = predict(cc, &ff[0][i * VK_COST_FUSED_FEATURES], VK_COST_FUSED_FEATURES);
        pred[P_SHARED] = predict(cs, &ff[1][i * VK_COST_FUSED_FEATURES], VK_COST_FUSED_FEATURES);
        pred[P_UNFUSED] = predict(cu, &fu[i * VK_COST_UNFUSED_FEATURES], VK_COST_UNFUSED_FEATURES);
        for (int p = 0; p < P_AUTO; p++)
            if (t[i][p] > 0 && pred[p] < pick_p)
                pick_p = pred[p], pick_t = t[i][p];
        if (t[i][P_AUTO] / best > worst_auto)
            worst_auto = t[i][P_AUTO] / best;
        if (pick_t / best > worst_new)
            worst_new = pick_t / best;
        if (pick_t / best > 1.10)
            printf("new coefficients on shape %zu: %.2fx the fastest (predicted cpu %.0f, shared "
                   "%.0f, unfused %.0f us)\n",
                   i, pick_t / best, pred[P_CPU], pred[P_SHARED], pred[P_UNFUSED]);
    }
    printf("\ndefault path (this build's cost model): at most %.2fx the fastest path over %zu "
           "shapes (target <= 1.10x)\n",
           worst_auto, n);
    printf("with the coefficients fitted in this run: at most %.2fx\n", worst_new);
    printf("\nsrc/vk_cost.c row for this device type (%s):\n",
           info.device.type == VKMHA_DEVICE_TYPE_CPU ? "CPU" : "this GPU type");
    printf("     {%.4g, %.4g, %.4g, %.4g, %.4g},\n", cc[0], cc[1], cc[2], cc[3], cc[4]);
    printf("     {%.4g, %.4g, %.4g, %.4g, %.4g},\n", cs[0], cs[1], cs[2], cs[3], cs[4]);
    printf("     {%.4g, %.4g, %.4g, %.4g, %.4g}},\n", cu[0], cu[1], cu[2], cu[3], cu[4]);
    if (csv)
        fclose(csv);
    vkmha_context_destroy(ctx_default);
    vkmha_context_destroy(ctx_shared);
    return 0;
}
