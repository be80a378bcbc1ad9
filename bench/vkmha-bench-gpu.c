/* vkmha-bench-gpu: the fp16 targets of issue 27 against PyTorch in fp16 on the
 * device VKMHA_TORCH_DEVICE names (cuda on a lent GPU; bench/torch_gpu.py),
 * measured in the same run:
 *   matmul  4096^3, fp16 tensors (vkmha_matmul_tensor)   >= 0.5x torch.matmul
 *   mha     B1 L4096 d_model 1024 H16, B1 L1024 512 H8   >= 0.7x
 *           (vkmha_mha_forward_tensor, fp16 weights and activations, against
 *           torch.nn.MultiheadAttention in fp16, need_weights=False)
 * (the decode target is vkmha-bench-decode's, with VKMHA_TORCH_DTYPE=float16).
 * vkmha's times: the median host wall clock around the call and the median
 * device time of its command buffer (VKMHA_CONTEXT_PROFILE), which is the
 * fair column against PyTorch's CUDA time (both on device-resident data).
 * A "#" line per row says where its last call's device time went, per
 * kernel (vkmha_context_get_profile).
 * The ratio is torch ms / vkmha device ms (1.0: as fast). --scale divides
 * every size (a quick run on a CPU device). Prints a table and, with --csv,
 * the rows; exit status 1 when vkmha fails, never because a target is
 * missed (the ratios are the report). */
#include "bench_util.h"
#include "half.h" /* src/half.c: the inputs in fp16 */

#include <vkmha.h>

#ifndef VKMHA_TORCH_GPU
#define VKMHA_TORCH_GPU "bench/torch_gpu.py"
#endif

typedef struct target {
    const char *kind; /* "matmul" or "mha" */
    uint32_t a, b, c, d; /* matmul: M N K; mha: batch len d_model heads */
    double want;         /* the target ratio */
    double wall, gpu;    /* vkmha's medians, ms */
    double torch;        /* PyTorch's median, ms (0: absent) */
} target;

static void check(vkmha_context *ctx, vkmha_status st, const char *what)
{
    bench_check("vkmha-bench-gpu", ctx, st, what);
}

/* An fp16 tensor of n elements from random values in [-scale, scale). */
static vkmha_tensor *random_tensor(vkmha_context *ctx, uint32_t rank, const uint32_t *dims,
                                   float scale, uint64_t *seed)
{
    vkmha_tensor_desc d = {.dtype = VKMHA_DTYPE_F16, .rank = rank};
    size_t n = 1;
    for (uint32_t i = 0; i < rank; i++)
        d.dims[i] = dims[i], n *= dims[i];
    vkmha_tensor *t = NULL;
    check(ctx, vkmha_tensor_create(ctx, &d, &t), "vkmha_tensor_create");
    float *f = bench_random(n, scale, seed);
    uint16_t *h = malloc(n * sizeof *h);
    if (!h)
        check(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "the inputs");
    vkmha__from_f32(VKMHA_DTYPE_F16, f, n, h);
    check(ctx, vkmha_tensor_upload(t, 0, h, n * sizeof *h), "vkmha_tensor_upload");
    free(f), free(h);
    return t;
}

/* The kernels the rows meet, with their parameters (or "off": disabled by
 * VKMHA_DISABLE_PATHS, say), so that runs with other tiles are told apart. */
static void print_kernels(vkmha_context *ctx)
{
    static const char *const names[] = {"matmul_coop_vec", "matmul_large_vec", "flash_coop_d64",
                                        "flash_d64"};
    vkmha_kernel_info k[64];
    uint32_t count = 64;
    if (vkmha_context_get_kernels(ctx, &count, k))
        return;
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++)
        for (uint32_t i = 0; i < count && i < 64; i++) {
            if (strcmp(k[i].name, names[n]))
                continue;
            printf("# %-17s", k[i].name);
            if (!k[i].available)
                printf(" off");
            for (uint32_t j = 0; k[i].available && j < k[i].param_count; j++)
                printf(" %s=%u", k[i].params[j].name, k[i].params[j].value);
            printf("\n");
        }
}

/* Times reps calls of fn(arg) after one warm-up: median wall and device ms. */
static void timed(vkmha_context *ctx, uint32_t reps, vkmha_status (*fn)(const void *),
                  const void *arg, double *wall, double *gpu)
{
    double *w = malloc(2 * (size_t)reps * sizeof *w), *g = w + reps;
    uint32_t n_gpu = 0;
    for (uint32_t i = 0; i <= reps; i++) {
        const double t0 = now_ms();
        check(ctx, fn(arg), "the timed call");
        const double dt = now_ms() - t0;
        vkmha_context_info info;
        if (i == 0)
            continue;
        w[i - 1] = dt;
        if (vkmha_context_get_info(ctx, &info) == VKMHA_SUCCESS && info.gpu_timing)
            g[n_gpu++] = info.last_gpu_time_ns / 1e6;
    }
    qsort(w, reps, sizeof *w, cmp_double);
    *wall = w[reps / 2];
    *gpu = 0;
    if (n_gpu == reps) {
        qsort(g, reps, sizeof *g, cmp_double);
        *gpu = g[reps / 2];
    }
    free(w);
}

typedef struct mm_call {
    vkmha_context *ctx;
    vkmha_matmul_desc d;
    vkmha_tensor *a, *b, *c;
} mm_call;

static vkmha_status run_matmul(const void *arg)
{
    const mm_call *m = arg;
    return vkmha_matmul_tensor(m->ctx, &m->d, m->a, m->b, NULL, m->c);
}

typedef struct mha_call {
    vkmha_mha *mha;
    vkmha_mha_tensors io;
} mha_call;

static vkmha_status run_mha(const void *arg)
{
    const mha_call *m = arg;
    return vkmha_mha_forward_tensor(m->mha, &m->io);
}

static void measure(vkmha_context *ctx, target *t, uint32_t reps, uint64_t *seed)
{
    if (!strcmp(t->kind, "matmul")) {
        const uint32_t sa[2] = {t->a, t->c}, sb[2] = {t->c, t->b}, sc[2] = {t->a, t->b};
        mm_call m = {.ctx = ctx,
                     .d = {.m = t->a, .n = t->b, .k = t->c, .op_b = VKMHA_OP_N,
                           .dtype = VKMHA_DTYPE_F16}};
        m.a = random_tensor(ctx, 2, sa, 1.0f, seed), m.b = random_tensor(ctx, 2, sb, 1.0f, seed);
        m.c = random_tensor(ctx, 2, sc, 0.0f, seed);
        timed(ctx, reps, run_matmul, &m, &t->wall, &t->gpu);
        vkmha_tensor_destroy(m.a), vkmha_tensor_destroy(m.b), vkmha_tensor_destroy(m.c);
        return;
    }
    const uint32_t batch = t->a, len = t->b, d = t->c, heads = t->d;
    float *w[4];
    for (int i = 0; i < 4; i++)
        w[i] = bench_random((size_t)d * d, 1.0f / sqrtf((float)d), seed);
    vkmha_mha_desc md = {.d_model = d, .n_head = heads, .w_q = w[0], .w_k = w[1], .w_v = w[2],
                         .w_o = w[3], .storage_dtype = VKMHA_DTYPE_F16};
    mha_call m = {0};
    check(ctx, vkmha_mha_create(ctx, &md, &m.mha), "vkmha_mha_create");
    const uint32_t shape[3] = {batch, len, d};
    vkmha_tensor *x = random_tensor(ctx, 3, shape, 1.0f, seed),
                 *out = random_tensor(ctx, 3, shape, 0.0f, seed);
    m.io = (vkmha_mha_tensors){.batch = batch, .len_q = len, .query = x, .key = x, .value = x,
                               .out = out};
    timed(ctx, reps, run_mha, &m, &t->wall, &t->gpu);
    vkmha_tensor_destroy(x), vkmha_tensor_destroy(out);
    vkmha_mha_destroy(m.mha);
    for (int i = 0; i < 4; i++)
        free(w[i]);
}

/* A row as bench/torch_gpu.py names it: "matmul:M:N:K", "mha:B:L:D:H". */
static void row_name(const target *t, char *out, size_t cap)
{
    if (!strcmp(t->kind, "mha"))
        snprintf(out, cap, "mha:%u:%u:%u:%u", t->a, t->b, t->c, t->d);
    else
        snprintf(out, cap, "matmul:%u:%u:%u", t->a, t->b, t->c);
}

/* Where the row's last call spent its device time (vkmha_context_get_profile),
 * summed per kernel in the order they first ran:
 * "# mha:1:4096:1024:16: matmul_coop_vec x4 1.071 ms, flash_coop_d64 x1 ...". */
static void print_profile(vkmha_context *ctx, const target *t)
{
    static vkmha_profile_step s[VKMHA_MAX_PROFILE_STEPS];
    uint32_t n = VKMHA_MAX_PROFILE_STEPS;
    char row[64];
    if (vkmha_context_get_profile(ctx, &n, s) || !n)
        return;
    row_name(t, row, sizeof row);
    printf("# %s:", row);
    for (uint32_t i = 0; i < n && i < VKMHA_MAX_PROFILE_STEPS; i++) {
        bool first = true;
        for (uint32_t j = 0; j < i && first; j++)
            first = strcmp(s[j].name, s[i].name) != 0;
        uint32_t count = 0;
        uint64_t ns = 0;
        for (uint32_t j = i; first && j < n && j < VKMHA_MAX_PROFILE_STEPS; j++)
            if (!strcmp(s[j].name, s[i].name))
                count++, ns += s[j].time_ns;
        if (first)
            printf("%s %s x%u %.3f ms", i ? "," : "", s[i].name, count, ns / 1e6);
    }
    printf("\n");
}

/* PyTorch's medians for the targets (left 0 when the peer is absent). */
static void torch_peer(const char *python, const char *script, uint32_t reps, uint32_t threads,
                       target *t, size_t n)
{
    char cmd[2048], row[64], line[256];
    int len = snprintf(cmd, sizeof cmd, "'%s' '%s' %u %u", python, script, reps, threads);
    for (size_t i = 0; i < n && len > 0 && (size_t)len < sizeof cmd; i++) {
        row_name(&t[i], row, sizeof row);
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", row);
    }
    FILE *py = popen(cmd, "r");
    while (py && fgets(line, sizeof line, py)) {
        double med, mn, mx;
        if (line[0] == '#') {
            printf("%s", line);
            continue;
        }
        if (sscanf(line, "%63s %lf %lf %lf", row, &med, &mn, &mx) != 4)
            continue;
        for (size_t i = 0; i < n; i++) {
            char want[64];
            row_name(&t[i], want, sizeof want);
            if (!strcmp(want, row))
                t[i].torch = med;
        }
    }
    if (!py || pclose(py) != 0)
        fprintf(stderr, "vkmha-bench-gpu: the torch peer (%s %s) did not run: absent\n", python,
                script);
}

int main(int argc, char **argv)
{
    uint32_t reps = 10, threads = 1, scale = 1;
    const char *csv_path = NULL, *python = "python3", *script = VKMHA_TORCH_GPU;
    bool no_torch = false;
    const cli_opt opts[] = {
        CLI_U32("--reps", "N", reps, 1, 10000, "timed calls per row, median (default 10)"),
        CLI_U32("--threads", "T", threads, 1, 4096,
                "threads of a CPU torch peer (default 1; a GPU peer ignores it)"),
        CLI_U32("--scale", "S", scale, 1, 64,
                "divide every size by S, for a quick run on a CPU device (default 1)"),
        CLI_STR("--csv", "FILE", csv_path, "also write the rows to FILE (default: none)"),
        CLI_STR("--python", "PATH", python, "python with torch for the peer (default python3)"),
        CLI_STR("--torch-script", "PATH", script,
                "the PyTorch peer (default: bench/torch_gpu.py of the source tree)"),
        CLI_FLAG("--no-torch", no_torch, "skip the PyTorch peer"),
    };
    CLI_PARSE("vkmha-bench-gpu",
              "The fp16 targets of issue 27 (matmul 4096^3, the MHA forward at L4096 d1024\n"
              "H16 and L1024 d512 H8) on vkmha's device against PyTorch in fp16 on the\n"
              "device VKMHA_TORCH_DEVICE names (cuda on a GPU), in the same run.",
              opts, argc, argv);
    target t[] = {{"matmul", 4096, 4096, 4096, 0, 0.5, 0, 0, 0},
                  {"mha", 1, 4096, 1024, 16, 0.7, 0, 0, 0},
                  {"mha", 1, 1024, 512, 8, 0.7, 0, 0, 0}};
    const size_t n = sizeof t / sizeof t[0];
    for (size_t i = 0; i < n; i++) {
        t[i].b /= scale, t[i].c /= scale;
        if (!strcmp(t[i].kind, "matmul"))
            t[i].a /= scale;
    }
    /* One context: the report's device is the one timed. */
    vkmha_context_info info;
    char date[32];
    bench_date(date);
    vkmha_context_desc cd = {.backend = VKMHA_BACKEND_VULKAN, .flags = VKMHA_CONTEXT_PROFILE};
    vkmha_context *ctx = NULL;
    check(NULL, vkmha_context_create(&cd, &ctx), "vkmha_context_create");
    vkmha_context_get_info(ctx, &info);
    printf("vkmha-bench-gpu %s: %s (%s %s), matrix units %s, %u reps\n", date, info.device.name,
           info.device.driver_name, info.device.driver_info,
           info.cooperative_matrix ? "used" : "not used", reps);
    print_kernels(ctx);
    uint64_t seed = 1;
    for (size_t i = 0; i < n; i++) {
        measure(ctx, &t[i], reps, &seed);
        print_profile(ctx, &t[i]);
    }
    vkmha_context_destroy(ctx);
    if (!no_torch)
        torch_peer(python, script, reps, threads, t, n);
    FILE *csv = NULL;
    if (!bench_csv_open(csv_path, "vkmha-bench-gpu", &info, date,
                        "row,vkmha_wall_ms,vkmha_device_ms,torch_ms,ratio,target", &csv))
        return 1;
    printf("%-24s %12s %14s %10s %8s %7s\n", "row (fp16)", "vkmha wall", "vkmha device",
           "torch", "ratio", "target");
    for (size_t i = 0; i < n; i++) {
        char row[64];
        if (!strcmp(t[i].kind, "mha"))
            snprintf(row, sizeof row, "mha B%u L%u d%u H%u", t[i].a, t[i].b, t[i].c, t[i].d);
        else
            snprintf(row, sizeof row, "matmul %ux%ux%u", t[i].a, t[i].b, t[i].c);
        const double vk = t[i].gpu > 0 ? t[i].gpu : t[i].wall;
        const double ratio = t[i].torch > 0 ? t[i].torch / vk : 0;
        char torch_s[16] = "absent", ratio_s[16] = "-";
        if (t[i].torch > 0)
            snprintf(torch_s, sizeof torch_s, "%.3f", t[i].torch),
                snprintf(ratio_s, sizeof ratio_s, "%.2fx", ratio);
        printf("%-24s %12.3f %14.3f %10s %8s %6.1fx\n", row, t[i].wall, t[i].gpu, torch_s,
               ratio_s, t[i].want);
        if (csv)
            fprintf(csv, "%s,%.4f,%.4f,%.4f,%.3f,%.1f\n", row, t[i].wall, t[i].gpu, t[i].torch,
                    ratio, t[i].want);
    }
    if (csv)
        fclose(csv);
    return 0;
}
