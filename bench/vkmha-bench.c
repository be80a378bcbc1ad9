/* vkmha-bench: vkmha's ops and MHA layer against peers measured in the same
 * run, so that ratios hold on a noisy machine.
 *
 *   vkmha-bench [--suite quick|full] [--only matmul,softmax,heads,attention,mha,dtype]
 *               [--reps N] [--max-len L] [--threads T] [--csv FILE] [--json FILE]
 *               [--torch-script bench/torch_mha.py] [--python python3]
 *
 * Implementations per row ("impl"):
 *   vulkan     vkmha's Vulkan backend (a context created for the row, with
 *              VKMHA_CONTEXT_PROFILE: GPU time from timestamp queries, and the
 *              peak VkDeviceMemory the context held);
 *   reference  vkmha's scalar backend (double accumulation; only at small
 *              sizes, it is slow);
 *   openblas   cblas_sgemm on the same matmul shapes (when built with it);
 *   torch      torch.nn.MultiheadAttention on the CPU (bench/torch_mha.py,
 *              same weights and inputs, same thread count; its output is
 *              compared with vkmha's: max_abs_diff).
 * A peer that is missing gets a row with status "absent" and no numbers.
 *
 * Timing: one warm-up, then --reps repetitions; median, min and max of the
 * host wall clock around the call (uploads, one submit, wait, downloads) and
 * the median GPU time (timestamps at the start and end of the call's command
 * buffer, scaled by timestampPeriod). Rates use the median wall time: GFLOP/s
 * (2 flops per multiply-add) for matmul, attention and MHA, GB/s (bytes read
 * + written once) for softmax and heads.
 *
 * Suites (what the default covers): quick = matmul 256..1024 and the MHA
 * projection shapes, softmax/heads/attention at L 128..512, MHA d_model 512 /
 * 8 heads at L 128..512; full (the default) = matmul up to 2048, L up to
 * --max-len (default 1024), MHA d_model 512 / 8 heads and 1024 / 16 heads at
 * batch 1, and batch 8 up to L 256. --max-len 4096 extends the grid.
 *
 * dtype rows (both suites): the MHA projection matmul, fused attention and
 * the MHA layer in f32, f16 and bf16 (path column; weights stored and
 * activations kept in that dtype), and the layer on 16 tokens at d_model
 * 2048 (bound by reading its weights), with their time and the peak device
 * memory of their context; the three dtypes of a shape are timed
 * interleaved, and "dtype" lines give each 16-bit row's time and memory as a
 * ratio to the f32 row's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "half.h" /* src/half.c: the 16-bit inputs, rounded as vkmha rounds */
#include "vkmha.h"

#ifdef VKMHA_BENCH_OPENBLAS
#include <cblas.h>
#endif

/* ---- options and output rows --------------------------------------------- */

typedef struct opts {
    bool full;
    char only[128];
    uint32_t reps, max_len, threads;
    const char *csv, *json, *torch_script, *python;
} opts;

typedef struct row {
    char op[16], impl[16], path[16], shape[64];
    uint32_t batch, len, d_model, heads;
    double flops, bytes;          /* per call; one of them is used for the rate */
    double wall_med, wall_min, wall_max, gpu_med; /* ms; gpu_med < 0: none */
    double peak_mib;              /* < 0: not applicable */
    double max_abs_diff;          /* < 0: not compared */
    const char *status;           /* "ok", "absent", "error" */
} row;

static row *rows;
static size_t n_rows, cap_rows;
static vkmha_context_info dev_info;
static char date_str[32];

static void die(const char *what)
{
    fprintf(stderr, "vkmha-bench: %s\n", what);
    exit(1);
}

/* Appends a row. Growing `rows` moves it: a pointer into it (a row, or a
 * string of one passed here) is only good until the next add_row. */
static row *add_row(const char *op, const char *impl, const char *path, const char *shape)
{
    row made = {0};
    snprintf(made.op, sizeof made.op, "%s", op);
    snprintf(made.impl, sizeof made.impl, "%s", impl);
    snprintf(made.path, sizeof made.path, "%s", path);
    snprintf(made.shape, sizeof made.shape, "%s", shape);
    made.gpu_med = made.peak_mib = made.max_abs_diff = -1;
    made.status = "ok";
    if (n_rows == cap_rows) {
        cap_rows = cap_rows ? 2 * cap_rows : 64;
        rows = realloc(rows, cap_rows * sizeof *rows);
        if (!rows)
            die("out of memory");
    }
    rows[n_rows] = made;
    return &rows[n_rows++];
}

static double rate(const row *r)
{
    if (strcmp(r->status, "ok") || r->wall_med <= 0)
        return -1;
    return (r->flops > 0 ? r->flops : r->bytes) / (r->wall_med * 1e6);
}

static const char *unit(const row *r)
{
    return r->flops > 0 ? "GFLOP/s" : "GB/s";
}

static void print_row(const row *r)
{
    printf("%-9s %-9s %-8s %-28s", r->op, r->impl, r->path, r->shape);
    if (strcmp(r->status, "ok")) {
        printf(" %s\n", r->status);
        return;
    }
    printf(" %10.3f %8.3f %8.3f", r->wall_med, r->wall_min, r->wall_max);
    if (r->gpu_med >= 0)
        printf(" %9.3f", r->gpu_med);
    else
        printf(" %9s", "-");
    printf(" %8.2f %-7s", rate(r), unit(r));
    if (r->peak_mib >= 0)
        printf(" %8.1f", r->peak_mib);
    else
        printf(" %8s", "-");
    if (r->max_abs_diff >= 0)
        printf(" %9.2e", r->max_abs_diff);
    printf("\n");
    fflush(stdout);
}

/* ---- timing ---------------------------------------------------------------- */


/* One call of the thing being timed; returns 0 on success. */
typedef int (*call_fn)(void *arg);

/* Warm-up + reps calls; fills the row's times (and GPU time from `ctx` when
 * it is a profiled Vulkan context). Returns 0 on success. */
/* Times n calls interleaved: after one warm-up call each, repetition i runs
 * call 0, 1, ..., n - 1 once each, so that a slow spell of the machine hits
 * every call alike (the ratios between them are what rows compare). Row j
 * gets call j's median, min and max wall time, and its device time when
 * ctxs[j] reports one for every repetition. Returns nonzero on a failure. */
static int time_interleaved(row *const rs[], call_fn fn, void *const args[],
                            vkmha_context *const ctxs[], size_t n, uint32_t reps)
{
    double *wall = malloc(n * reps * sizeof *wall), *gpu = malloc(n * reps * sizeof *gpu);
    uint32_t *n_gpu = calloc(n, sizeof *n_gpu);
    if (!wall || !gpu || !n_gpu)
        die("out of memory");
    int err = 0;
    for (size_t j = 0; j < n && !err; j++)
        err = fn(args[j]);
    for (uint32_t i = 0; !err && i < reps; i++)
        for (size_t j = 0; j < n && !err; j++) {
            double t0 = now_ms();
            err = fn(args[j]);
            wall[j * reps + i] = now_ms() - t0;
            vkmha_context_info info;
            if (ctxs[j] && vkmha_context_get_info(ctxs[j], &info) == VKMHA_SUCCESS &&
                info.gpu_timing && info.last_gpu_time_ns)
                gpu[j * reps + n_gpu[j]++] = info.last_gpu_time_ns / 1e6;
        }
    for (size_t j = 0; j < n; j++) {
        row *r = rs[j];
        double *w = wall + j * reps, *g = gpu + j * reps;
        if (err) {
            r->status = "error";
            continue;
        }
        qsort(w, reps, sizeof *w, cmp_double);
        r->wall_med = w[reps / 2];
        r->wall_min = w[0];
        r->wall_max = w[reps - 1];
        if (n_gpu[j] == reps) {
            qsort(g, reps, sizeof *g, cmp_double);
            r->gpu_med = g[reps / 2];
        }
    }
    free(wall);
    free(gpu);
    free(n_gpu);
    return err;
}

static int time_calls(row *r, call_fn fn, void *arg, uint32_t reps, vkmha_context *ctx)
{
    return time_interleaved(&r, fn, &arg, &ctx, 1, reps);
}

/* ---- data and contexts ------------------------------------------------------ */

static uint64_t seed = 1;

static float *random_array(size_t n, float scale)
{
    return bench_random(n, scale, &seed);
}

static float *zeros(size_t n)
{
    float *p = calloc(n, sizeof *p);
    if (!p)
        die("out of memory");
    return p;
}

/* A fresh profiled Vulkan context per row: its peak memory is the row's. */
static vkmha_context *vk_context(void)
{
    vkmha_context_desc d = {0};
    d.flags = VKMHA_CONTEXT_PROFILE;
    vkmha_context *ctx = NULL;
    if (vkmha_context_create(&d, &ctx) != VKMHA_SUCCESS)
        die(vkmha_context_last_error(NULL));
    return ctx;
}

static void finish_vk_row(row *r, vkmha_context *ctx)
{
    vkmha_context_info info;
    if (vkmha_context_get_info(ctx, &info) == VKMHA_SUCCESS)
        r->peak_mib = info.device_memory_peak_bytes / (1024.0 * 1024.0);
    if (!strcmp(r->status, "error"))
        fprintf(stderr, "vkmha-bench: %s %s %s: %s\n", r->op, r->impl, r->shape,
                vkmha_context_last_error(ctx));
}

static bool selected(const opts *o, const char *what)
{
    if (!o->only[0])
        return true;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", o->only);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
        if (!strcmp(t, what))
            return true;
    return false;
}

/* ---- matmul ------------------------------------------------------------------ */

typedef struct mm_call {
    vkmha_context *ctx;
    vkmha_matmul_desc d;
    const float *a, *b;
    float *c;
} mm_call;

static int mm_run(void *p)
{
    mm_call *m = p;
    return vkmha_matmul(m->ctx, &m->d, m->a, m->b, NULL, m->c) != VKMHA_SUCCESS;
}

#ifdef VKMHA_BENCH_OPENBLAS
static int blas_run(void *p)
{
    mm_call *m = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, m->d.op_b == VKMHA_OP_T ? CblasTrans : CblasNoTrans,
                (int)m->d.m, (int)m->d.n, (int)m->d.k, 1.0f, m->a, (int)m->d.k, m->b,
                m->d.op_b == VKMHA_OP_T ? (int)m->d.k : (int)m->d.n, 0.0f, m->c, (int)m->d.n);
    return 0;
}
#endif

static void bench_matmul_shape(const opts *o, uint32_t m, uint32_t n, uint32_t k, vkmha_op op,
                               const char *label, vkmha_context *ref)
{
    char shape[64];
    snprintf(shape, sizeof shape, "%s %ux%ux%u op %s", label, m, n, k,
             op == VKMHA_OP_T ? "T" : "N");
    float *a = random_array((size_t)m * k, 1), *b = random_array((size_t)n * k, 1);
    float *c = zeros((size_t)m * n), *c2 = zeros((size_t)m * n);
    double flops = 2.0 * m * n * k;
    mm_call call = {NULL, {0}, a, b, c};
    call.d.m = m, call.d.n = n, call.d.k = k, call.d.op_b = op;

    row *r = add_row("matmul", "vulkan", "-", shape);
    r->flops = flops;
    call.ctx = vk_context();
    time_calls(r, mm_run, &call, o->reps, call.ctx);
    finish_vk_row(r, call.ctx);
    vkmha_context_destroy(call.ctx);
    print_row(r);

    r = add_row("matmul", "openblas", "-", shape);
    r->flops = flops;
#ifdef VKMHA_BENCH_OPENBLAS
    call.c = c2;
    time_calls(r, blas_run, &call, o->reps, NULL);
    r->max_abs_diff = max_abs_diff(c, c2, (size_t)m * n);
#else
    r->status = "absent";
#endif
    print_row(r);

    if ((double)m * n * k <= 512.0 * 512 * 512) {
        r = add_row("matmul", "reference", "-", shape);
        r->flops = flops;
        call.ctx = ref;
        call.c = c2;
        time_calls(r, mm_run, &call, 1, NULL);
        r->max_abs_diff = max_abs_diff(c, c2, (size_t)m * n);
        print_row(r);
    }
    free(a), free(b), free(c), free(c2);
}

static void bench_matmul(const opts *o, vkmha_context *ref)
{
    for (uint32_t s = 256; s <= (o->full ? 2048u : 1024u); s *= 2)
        bench_matmul_shape(o, s, s, s, VKMHA_OP_N, "square", ref);
    /* The MHA projections: x [L][d_model] * W^T, W [d_model][d_model]. */
    const uint32_t lens[] = {128, 1024};
    for (size_t i = 0; i < 2; i++)
        for (uint32_t dm = 512; dm <= 1024; dm *= 2)
            bench_matmul_shape(o, lens[i], dm, dm, VKMHA_OP_T, "proj", ref);
}

/* ---- softmax, heads, attention ---------------------------------------------- */

typedef struct op_call {
    vkmha_context *ctx;
    const void *desc;
    const float *x, *y, *z;
    float *out, *out2;
    int kind; /* 0 softmax, 1 split, 2 merge, 3 attention */
} op_call;

static int op_run(void *p)
{
    op_call *c = p;
    switch (c->kind) {
    case 0:
        return vkmha_softmax(c->ctx, c->desc, c->x, NULL, c->out) != VKMHA_SUCCESS;
    case 1:
        return vkmha_split_heads(c->ctx, c->desc, c->x, c->out) != VKMHA_SUCCESS;
    case 2:
        return vkmha_merge_heads(c->ctx, c->desc, c->x, c->out) != VKMHA_SUCCESS;
    default:
        return vkmha_attention(c->ctx, c->desc, c->x, c->y, c->z, NULL, c->out, NULL) !=
               VKMHA_SUCCESS;
    }
}

/* Runs `call` on a fresh Vulkan context and, when `ref_ok`, on the reference
 * backend too (compared element by element). */
static void bench_op(const opts *o, const char *op, const char *path, const char *shape,
                     op_call *call, size_t n_out, double flops, double bytes,
                     vkmha_context *ref, bool ref_ok)
{
    row *r = add_row(op, "vulkan", path, shape);
    r->flops = flops, r->bytes = bytes;
    call->ctx = vk_context();
    time_calls(r, op_run, call, o->reps, call->ctx);
    finish_vk_row(r, call->ctx);
    vkmha_context_destroy(call->ctx);
    print_row(r);
    if (!ref_ok)
        return;
    float *vk_out = call->out;
    r = add_row(op, "reference", path, shape);
    r->flops = flops, r->bytes = bytes;
    call->ctx = ref;
    call->out = call->out2;
    time_calls(r, op_run, call, 1, NULL);
    r->max_abs_diff = max_abs_diff(vk_out, call->out2, n_out);
    call->out = vk_out;
    print_row(r);
}

/* The attention paths to measure: one place to add the fused path once
 * vkmha_attention_desc.path exists (VKMHA_ATTENTION_PATH_FUSED). */
/* The attention paths every attention and MHA row is measured on. */
static const struct {
    const char *name;
    vkmha_attention_path path;
} attention_paths[] = {{"fused", VKMHA_ATTENTION_PATH_FUSED},
                       {"unfused", VKMHA_ATTENTION_PATH_UNFUSED}};

static void bench_small_ops(const opts *o, vkmha_context *ref)
{
    const uint32_t max_len = o->full ? o->max_len : (o->max_len < 512 ? o->max_len : 512);
    const uint32_t heads = 8, d_model = 512, d_k = 64;
    for (uint32_t len = 128; len <= max_len; len *= 2) {
        char shape[64];
        if (selected(o, "softmax")) {
            vkmha_softmax_desc sd = {1, heads, len, len, 0.125f, 0};
            size_t n = (size_t)heads * len * len;
            float *x = random_array(n, 3), *y = zeros(n), *y2 = zeros(n);
            op_call c = {NULL, &sd, x, NULL, NULL, y, y2, 0};
            snprintf(shape, sizeof shape, "[1][%u][%u][%u]", heads, len, len);
            bench_op(o, "softmax", "-", shape, &c, n, 0, 8.0 * n, ref, len <= 512);
            free(x), free(y), free(y2);
        }
        if (selected(o, "heads")) {
            vkmha_heads_desc hd = {1, len, heads, d_model / heads, 0};
            size_t n = (size_t)len * d_model;
            float *x = random_array(n, 1), *y = zeros(n), *y2 = zeros(n);
            op_call c = {NULL, &hd, x, NULL, NULL, y, y2, 1};
            snprintf(shape, sizeof shape, "[1][%u][%u] split %u", len, d_model, heads);
            bench_op(o, "heads", "-", shape, &c, n, 0, 8.0 * n, ref, true);
            c.kind = 2;
            snprintf(shape, sizeof shape, "[1][%u][%u] merge %u", len, d_model, heads);
            bench_op(o, "heads", "-", shape, &c, n, 0, 8.0 * n, ref, true);
            free(x), free(y), free(y2);
        }
        if (selected(o, "attention")) {
            for (size_t p = 0; p < sizeof attention_paths / sizeof attention_paths[0]; p++) {
                vkmha_attention_desc ad = {0};
                ad.batch = 1, ad.heads = heads, ad.len_q = ad.len_k = len;
                ad.d_k = ad.d_v = d_k;
                ad.path = attention_paths[p].path;
                size_t n = (size_t)heads * len * d_k;
                float *q = random_array(n, 1), *k = random_array(n, 1), *v = random_array(n, 1);
                float *out = zeros(n), *out2 = zeros(n);
                op_call c = {NULL, &ad, q, k, v, out, out2, 3};
                snprintf(shape, sizeof shape, "B1 H%u L%u d_k %u", heads, len, d_k);
                bench_op(o, "attention", attention_paths[p].name, shape, &c, n,
                         4.0 * heads * (double)len * len * d_k, 0, ref, len <= 512);
                free(q), free(k), free(v), free(out), free(out2);
            }
        }
    }
}

/* ---- MHA forward, with the PyTorch peer ------------------------------------ */

typedef struct mha_call {
    vkmha_mha *mha;
    vkmha_mha_io io;
} mha_call;

static int mha_run(void *p)
{
    mha_call *m = p;
    return vkmha_mha_forward(m->mha, &m->io) != VKMHA_SUCCESS;
}

typedef struct mha_shape {
    uint32_t d_model, heads, batch, len;
    float *w[4], *x, *out;  /* vkmha's output, kept for the torch comparison */
    size_t vk_row;
} mha_shape;

/* The MHA paths to measure (the layer's default today; add
 * VKMHA_ATTENTION_PATH_FUSED / _UNFUSED through vkmha_mha_io.attention_path
 * here once it exists). */

static bool write_file(const char *path, const float *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(p, sizeof *p, n, f) == n;
    if (f && fclose(f))
        ok = false;
    return ok;
}

static bool read_file(const char *path, float *p, size_t n)
{
    FILE *f = fopen(path, "rb");
    bool ok = f && fread(p, sizeof *p, n, f) == n;
    if (f)
        fclose(f);
    return ok;
}

static void torch_peer(const opts *o, mha_shape *shapes, size_t n)
{
    char dir[] = "/tmp/vkmha-bench-XXXXXX", path[512], line[256];
    bool ok = mkdtemp(dir) != NULL;
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *man = ok ? fopen(path, "w") : NULL;
    ok = man != NULL;
    static const char *const names[4] = {"w_q", "w_k", "w_v", "w_o"};
    for (size_t i = 0; ok && i < n; i++) {
        mha_shape *s = &shapes[i];
        snprintf(path, sizeof path, "%s/%zu", dir, i);
        ok = mkdir(path, 0700) == 0;
        for (int j = 0; ok && j < 4; j++) {
            snprintf(path, sizeof path, "%s/%zu/%s.f32", dir, i, names[j]);
            ok = write_file(path, s->w[j], (size_t)s->d_model * s->d_model);
        }
        snprintf(path, sizeof path, "%s/%zu/x.f32", dir, i);
        ok = ok && write_file(path, s->x, (size_t)s->batch * s->len * s->d_model);
        fprintf(man, "%zu %u %u %u %u\n", i, s->d_model, s->heads, s->batch, s->len);
    }
    if (man)
        fclose(man);
    bool *done = calloc(n, sizeof *done);
    if (!done)
        die("out of memory");
    FILE *py = NULL;
    if (ok) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' %u %u", o->python, o->torch_script, dir,
                 o->threads, o->reps);
        py = popen(cmd, "r");
    }
    while (py && fgets(line, sizeof line, py)) {
        size_t id;
        double med, mn, mx;
        if (line[0] == '#') {
            printf("%s", line);
            continue;
        }
        if (sscanf(line, "%zu %lf %lf %lf", &id, &med, &mn, &mx) != 4 || id >= n)
            continue;
        mha_shape *s = &shapes[id];
        const double flops = rows[s->vk_row].flops;
        row *r = add_row("mha", "torch", "-", rows[s->vk_row].shape);
        r->batch = s->batch, r->len = s->len, r->d_model = s->d_model, r->heads = s->heads;
        r->flops = flops;
        r->wall_med = med, r->wall_min = mn, r->wall_max = mx;
        size_t no = (size_t)s->batch * s->len * s->d_model;
        float *t_out = zeros(no);
        snprintf(path, sizeof path, "%s/%zu/out.f32", dir, id);
        if (read_file(path, t_out, no))
            r->max_abs_diff = max_abs_diff(s->out, t_out, no);
        free(t_out);
        done[id] = true;
        print_row(r);
    }
    int rc = py ? pclose(py) : -1;
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        row *r = add_row("mha", "torch", "-", rows[shapes[i].vk_row].shape);
        r->batch = shapes[i].batch, r->len = shapes[i].len;
        r->d_model = shapes[i].d_model, r->heads = shapes[i].heads;
        r->status = "absent";
        print_row(r);
    }
    if (rc != 0)
        fprintf(stderr, "vkmha-bench: the torch peer (%s %s) did not run: absent\n",
                o->python, o->torch_script);
    free(done);
    /* Remove the exported tensors. */
    for (size_t i = 0; i < n; i++) {
        static const char *const files[] = {"w_q", "w_k", "w_v", "w_o", "x", "out"};
        for (int j = 0; j < 6; j++) {
            snprintf(path, sizeof path, "%s/%zu/%s.f32", dir, i, files[j]);
            unlink(path);
        }
        snprintf(path, sizeof path, "%s/%zu", dir, i);
        rmdir(path);
    }
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    unlink(path);
    rmdir(dir);
}

static void bench_mha(const opts *o, vkmha_context *ref)
{
    struct cfg {
        uint32_t d_model, heads, batch, max_len;
    } cfgs[] = {
        {512, 8, 1, o->max_len},
        {1024, 16, 1, o->max_len},
        {512, 8, 8, 256},
        {1024, 16, 8, 256},
    };
    size_t n_cfg = o->full ? 4 : 1, n = 0;
    mha_shape shapes[64];
    for (size_t ci = 0; ci < n_cfg; ci++) {
        const struct cfg *c = &cfgs[ci];
        uint32_t top = c->max_len < o->max_len ? c->max_len : o->max_len;
        if (!o->full && top > 512)
            top = 512;
        float *w[4];
        float bound = 1.0f / sqrtf((float)c->d_model);
        for (int j = 0; j < 4; j++)
            w[j] = random_array((size_t)c->d_model * c->d_model, bound);
        vkmha_mha_desc d = {0};
        d.d_model = c->d_model;
        d.n_head = c->heads;
        d.w_q = w[0], d.w_k = w[1], d.w_v = w[2], d.w_o = w[3];
        for (uint32_t len = 128; len <= top && n < 64; len *= 2) {
            size_t nx = (size_t)c->batch * len * c->d_model;
            mha_shape *s = &shapes[n++];
            s->d_model = c->d_model, s->heads = c->heads, s->batch = c->batch, s->len = len;
            for (int j = 0; j < 4; j++)
                s->w[j] = w[j];
            s->x = random_array(nx, 1);
            s->out = zeros(nx);
            char shape[64];
            snprintf(shape, sizeof shape, "B%u L%u d%u H%u", c->batch, len, c->d_model,
                     c->heads);
            /* 4 projections + Q K^T + P V, 2 flops per multiply-add. */
            double flops = 2.0 * c->batch * len *
                           (4.0 * c->d_model * c->d_model + 2.0 * len * c->d_model);
            for (size_t p = 0; p < sizeof attention_paths / sizeof attention_paths[0]; p++) {
                row *r = add_row("mha", "vulkan", attention_paths[p].name, shape);
                r->batch = c->batch, r->len = len, r->d_model = c->d_model, r->heads = c->heads;
                r->flops = flops;
                vkmha_context *ctx = vk_context();
                mha_call call = {NULL, {0}};
                call.io.batch = c->batch, call.io.len_q = len;
                call.io.query = call.io.key = call.io.value = s->x;
                call.io.out = s->out;
                call.io.attention_path = attention_paths[p].path;
                if (vkmha_mha_create(ctx, &d, &call.mha) == VKMHA_SUCCESS)
                    time_calls(r, mha_run, &call, o->reps, ctx);
                else
                    r->status = "error";
                finish_vk_row(r, ctx);
                vkmha_mha_destroy(call.mha);
                vkmha_context_destroy(ctx);
                if (p == 0)
                    s->vk_row = n_rows - 1;
                print_row(r);
            }
            if (c->batch == 1 && len <= 256) {
                row *r = add_row("mha", "reference", "-", shape);
                r->batch = c->batch, r->len = len, r->d_model = c->d_model, r->heads = c->heads;
                r->flops = flops;
                float *out2 = zeros(nx);
                mha_call call = {NULL, {0}};
                call.io.batch = c->batch, call.io.len_q = len;
                call.io.query = call.io.key = call.io.value = s->x;
                call.io.out = out2;
                if (vkmha_mha_create(ref, &d, &call.mha) == VKMHA_SUCCESS)
                    time_calls(r, mha_run, &call, 1, NULL);
                else
                    r->status = "error";
                r->max_abs_diff = max_abs_diff(s->out, out2, nx);
                vkmha_mha_destroy(call.mha);
                free(out2);
                print_row(r);
            }
        }
    }
    torch_peer(o, shapes, n);
    for (size_t i = 0; i < n; i++) {
        free(shapes[i].x);
        free(shapes[i].out);
        /* Weights are shared by the shapes of one config: free them with the
         * config's last shape. */
        if (i + 1 == n || shapes[i + 1].w[0] != shapes[i].w[0])
            for (int j = 0; j < 4; j++)
                free(shapes[i].w[j]);
    }
}

/* ---- fp16 and bf16 ------------------------------------------------------------ */

typedef struct dt_call {
    vkmha_context *ctx;
    int kind; /* 0 matmul, 1 attention, 2 layer */
    vkmha_matmul_desc md;
    vkmha_attention_desc ad;
    const void *a, *b, *c;
    void *out;
    vkmha_mha *mha;
    vkmha_mha_io io;
} dt_call;

static int dt_run(void *p)
{
    dt_call *c = p;
    vkmha_status st = c->kind == 0   ? vkmha_matmul(c->ctx, &c->md, c->a, c->b, NULL, c->out)
                      : c->kind == 1 ? vkmha_attention(c->ctx, &c->ad, c->a, c->b, c->c, NULL,
                                                       c->out, NULL)
                                     : vkmha_mha_forward(c->mha, &c->io);
    return st != VKMHA_SUCCESS;
}

/* An array of n random values in +-scale, in dtype dt. */
static void *random_dt(uint32_t dt, size_t n, float scale)
{
    float *f = random_array(n, scale);
    void *p = malloc(n * vkmha__dtype_size(dt) + 4);
    if (!p)
        die("out of memory");
    vkmha__from_f32(dt, f, n, p);
    free(f);
    return p;
}

/* The rows of one kind of call in f32, f16 and bf16, timed interleaved. */
static void bench_dtypes(const opts *o)
{
    static const uint32_t dts[3] = {VKMHA_DTYPE_F32, VKMHA_DTYPE_F16, VKMHA_DTYPE_BF16};
    static const char *const names[3] = {"f32", "f16", "bf16"};
    const uint32_t L = o->full ? 1024 : 512, H = 8, dk = 64;
    /* kind 0 matmul, 1 attention, 2 the layer at L; 3 the layer on 16 tokens
     * at d_model 2048, whose time goes to reading its 4 weight matrices
     * (64 MiB in fp32): the shape of a decoding step without a cache. */
    for (int kind = 0; kind < 4; kind++) {
        const size_t first = n_rows;
        const uint32_t d_model = kind == 3 ? 2048 : 512, heads = kind == 3 ? 16 : H;
        const uint32_t len = kind == 3 ? 16 : L;
        dt_call calls[3] = {{0}};
        row *rs[3];
        void *args[3];
        vkmha_context *ctxs[3];
        void *w[3][4] = {{NULL}};
        bool ok = true;
        for (int di = 0; di < 3; di++) {
            const uint32_t dt = dts[di];
            dt_call *c = &calls[di];
            c->kind = kind < 2 ? kind : 2;
            char shape[64];
            row *r;
            size_t na, nb, nout;
            if (kind == 0) {
                c->md.m = len, c->md.n = d_model, c->md.k = d_model, c->md.op_b = VKMHA_OP_T;
                c->md.dtype = dt;
                na = (size_t)len * d_model, nb = (size_t)d_model * d_model, nout = na;
                snprintf(shape, sizeof shape, "dtype: proj %ux%ux%u op T", len, d_model,
                         d_model);
                r = add_row("matmul", "vulkan", names[di], shape);
                r->flops = 2.0 * len * d_model * d_model;
            } else if (kind == 1) {
                c->ad.batch = 1, c->ad.heads = heads, c->ad.len_q = c->ad.len_k = len;
                c->ad.d_k = c->ad.d_v = dk, c->ad.dtype = dt;
                na = nb = nout = (size_t)heads * len * dk;
                snprintf(shape, sizeof shape, "dtype: B1 H%u L%u d_k %u", heads, len, dk);
                r = add_row("attention", "vulkan", names[di], shape);
                r->flops = 4.0 * heads * (double)len * len * dk;
            } else {
                na = nout = (size_t)len * d_model, nb = 0;
                snprintf(shape, sizeof shape, "dtype: B1 L%u d%u H%u", len, d_model, heads);
                r = add_row("mha", "vulkan", names[di], shape);
                r->flops = 2.0 * len * (4.0 * d_model * d_model + 2.0 * len * d_model);
            }
            r->batch = 1, r->len = len, r->d_model = d_model, r->heads = heads;
            c->a = random_dt(dt, na, 1);
            c->b = nb ? random_dt(dt, nb, 1) : NULL;
            c->c = kind == 1 ? random_dt(dt, nb, 1) : NULL;
            c->out = calloc(nout + 2, vkmha__dtype_size(dt));
            c->ctx = vk_context();
            if (kind >= 2) {
                vkmha_mha_desc d = {0};
                d.d_model = d_model, d.n_head = heads;
                for (int j = 0; j < 4; j++)
                    w[di][j] = random_dt(dt, (size_t)d_model * d_model, 1.0f / sqrtf(d_model));
                d.w_q = w[di][0], d.w_k = w[di][1], d.w_v = w[di][2], d.w_o = w[di][3];
                d.weight_dtype = d.storage_dtype = dt;
                c->io.batch = 1, c->io.len_q = len, c->io.dtype = dt;
                c->io.query = c->io.key = c->io.value = c->a;
                c->io.out = c->out;
                ok = ok && vkmha_mha_create(c->ctx, &d, &c->mha) == VKMHA_SUCCESS;
            }
            args[di] = c, ctxs[di] = c->ctx;
        }
        for (int di = 0; di < 3; di++) /* added last, so they stay put */
            rs[di] = &rows[first + di];
        if (!ok || time_interleaved(rs, dt_run, args, ctxs, 3, o->reps))
            for (int di = 0; di < 3; di++)
                rs[di]->status = "error";
        for (int di = 0; di < 3; di++) {
            dt_call *c = &calls[di];
            finish_vk_row(rs[di], c->ctx);
            vkmha_mha_destroy(c->mha);
            vkmha_context_destroy(c->ctx);
            print_row(rs[di]);
            free((void *)c->a), free((void *)c->b), free((void *)c->c), free(c->out);
            for (int j = 0; j < 4; j++)
                free(w[di][j]);
        }
        for (size_t i = first + 1; i < n_rows && rate(&rows[first]) > 0; i++)
            if (rate(&rows[i]) > 0)
                printf("dtype %-9s %-28s %s / f32: time %.3fx, peak device memory %.3fx\n",
                       rows[i].op, rows[i].shape, rows[i].path,
                       rows[i].wall_med / rows[first].wall_med,
                       rows[i].peak_mib / rows[first].peak_mib);
    }
}

/* ---- CSV and JSON --------------------------------------------------------- */

static void csv_escape(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void num(FILE *f, double v, const char *sep)
{
    if (v >= 0)
        fprintf(f, "%.6g%s", v, sep);
    else
        fprintf(f, "%s", sep); /* empty: not measured (never zero) */
}

static void write_csv(const opts *o, const char *driver)
{
    FILE *f = fopen(o->csv, "w");
    if (!f)
        die("cannot write the CSV file");
    fprintf(f, "date,device,driver,threads,op,impl,path,shape,batch,len,d_model,heads,"
               "wall_ms_median,wall_ms_min,wall_ms_max,gpu_ms_median,rate,unit,"
               "peak_device_mib,max_abs_diff,status\n");
    for (size_t i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        fprintf(f, "%s,", date_str);
        csv_escape(f, dev_info.device.name);
        fputc(',', f);
        csv_escape(f, driver);
        fprintf(f, ",%u,%s,%s,%s,", o->threads, r->op, r->impl, r->path);
        csv_escape(f, r->shape);
        fprintf(f, ",%u,%u,%u,%u,", r->batch, r->len, r->d_model, r->heads);
        bool ok = !strcmp(r->status, "ok");
        num(f, ok ? r->wall_med : -1, ",");
        num(f, ok ? r->wall_min : -1, ",");
        num(f, ok ? r->wall_max : -1, ",");
        num(f, ok ? r->gpu_med : -1, ",");
        num(f, rate(r), ",");
        fprintf(f, "%s,", unit(r));
        num(f, r->peak_mib, ",");
        num(f, r->max_abs_diff, ",");
        fprintf(f, "%s\n", r->status);
    }
    fclose(f);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, const char *key, double v)
{
    fprintf(f, ", \"%s\": ", key);
    if (v >= 0 && isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fprintf(f, "null");
}

static void write_json(const opts *o, const char *driver)
{
    FILE *f = fopen(o->json, "w");
    if (!f)
        die("cannot write the JSON file");
    fprintf(f, "{\"date\": ");
    json_str(f, date_str);
    fprintf(f, ", \"device\": ");
    json_str(f, dev_info.device.name);
    fprintf(f, ", \"driver\": ");
    json_str(f, driver);
    fprintf(f, ", \"threads\": %u, \"reps\": %u, \"rows\": [\n", o->threads, o->reps);
    for (size_t i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        bool ok = !strcmp(r->status, "ok");
        fprintf(f, "  {\"op\": \"%s\", \"impl\": \"%s\", \"path\": \"%s\", \"shape\": ", r->op,
                r->impl, r->path);
        json_str(f, r->shape);
        fprintf(f, ", \"batch\": %u, \"len\": %u, \"d_model\": %u, \"heads\": %u", r->batch,
                r->len, r->d_model, r->heads);
        json_num(f, "wall_ms_median", ok ? r->wall_med : -1);
        json_num(f, "wall_ms_min", ok ? r->wall_min : -1);
        json_num(f, "wall_ms_max", ok ? r->wall_max : -1);
        json_num(f, "gpu_ms_median", ok ? r->gpu_med : -1);
        json_num(f, "rate", rate(r));
        fprintf(f, ", \"unit\": \"%s\"", unit(r));
        json_num(f, "peak_device_mib", r->peak_mib);
        json_num(f, "max_abs_diff", r->max_abs_diff);
        fprintf(f, ", \"status\": \"%s\"}%s\n", r->status, i + 1 < n_rows ? "," : "");
    }
    fprintf(f, "]}\n");
    fclose(f);
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    opts o = {true, "", 5, 1024, 0, NULL, NULL, VKMHA_TORCH_SCRIPT, "python3"};
    static const char *const suites[] = {"quick", "full", NULL};
    const char *suite = "full", *only = "";
    const cli_opt options[] = {
        CLI_CHOICE("--suite", "NAME", suite, suites,
                   "quick: fewer shapes; full: the whole grid (default full)"),
        CLI_STR("--only", "LIST", only,
                "comma-separated subset of matmul,softmax,heads,attention,mha,dtype (default: "
                "all)"),
        CLI_U32("--reps", "N", o.reps, 1, 10000, "timed repetitions per row, median (default 5)"),
        CLI_U32("--max-len", "L", o.max_len, 128, 1u << 20, "longest sequence (default 1024)"),
        CLI_U32("--threads", "T", o.threads, 1, 4096,
                "threads of the CPU peers (default: the online CPUs)"),
        CLI_STR("--csv", "FILE", o.csv, "also write the rows to FILE as CSV (default: none)"),
        CLI_STR("--json", "FILE", o.json, "also write the rows to FILE as JSON (default: none)"),
        CLI_STR("--torch-script", "PATH", o.torch_script,
                "the PyTorch peer (default: bench/torch_mha.py of the source tree)"),
        CLI_STR("--python", "PATH", o.python, "python with torch for the peer (default python3)"),
    };
    CLI_PARSE("vkmha-bench",
              "vkmha's ops and MHA forward on Vulkan against OpenBLAS and "
              "PyTorch (when present)\nand the reference backend. Writes no "
              "file unless --csv or --json is given\n(tools/bench writes "
              "docs/ only with --write-docs).",
              options, argc, argv);
    o.full = strcmp(suite, "quick") != 0;
    snprintf(o.only, sizeof o.only, "%s", only);
    if (!o.reps)
        o.reps = 1;
    if (o.max_len < 128)
        o.max_len = 128;
    if (!o.threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o.threads = n > 0 ? (uint32_t)n : 1;
    }
#ifdef VKMHA_BENCH_OPENBLAS
    openblas_set_num_threads((int)o.threads);
#endif
    time_t t = time(NULL);
    strftime(date_str, sizeof date_str, "%Y-%m-%dT%H:%M:%S%z", localtime(&t));

    vkmha_context *vk = vk_context(), *ref = NULL;
    vkmha_context_desc rd = {0};
    rd.backend = VKMHA_BACKEND_REFERENCE;
    if (vkmha_context_create(&rd, &ref))
        die(vkmha_context_last_error(NULL));
    vkmha_context_get_info(vk, &dev_info);
    vkmha_kernel_info tile;
    char tile_str[160];
    kernel_find(vk, "matmul_large", &tile);
    vkmha_context_destroy(vk);
    char driver[600];
    snprintf(driver, sizeof driver, "%s %s", dev_info.device.driver_name,
             dev_info.device.driver_info);
    printf("vkmha-bench %s: %s (%s), %u threads for peers, %u reps, suite %s\n", date_str,
           dev_info.device.name, driver, o.threads, o.reps, o.full ? "full" : "quick");
    printf("matmul tile (matmul_large): %s; GPU timestamps %s\n",
           kernel_describe(&tile, tile_str, sizeof tile_str),
           dev_info.device.timestamp_period > 0 ? "on" : "unavailable");
    printf("%-9s %-9s %-8s %-28s %10s %8s %8s %9s %16s %8s %9s\n", "op", "impl", "path",
           "shape", "median ms", "min", "max", "GPU ms", "rate", "peak MiB", "max|diff|");

    if (selected(&o, "matmul"))
        bench_matmul(&o, ref);
    bench_small_ops(&o, ref);
    if (selected(&o, "mha"))
        bench_mha(&o, ref);
    if (selected(&o, "dtype"))
        bench_dtypes(&o);

    /* The ratios the targets are stated in (docs/PERFORMANCE.md). */
    for (size_t i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        if (strcmp(r->impl, "vulkan") || rate(r) <= 0)
            continue;
        const char *peer = !strcmp(r->op, "matmul") ? "openblas"
                           : !strcmp(r->op, "mha")  ? "torch"
                                                    : NULL;
        for (size_t j = 0; peer && j < n_rows; j++)
            if (!strcmp(rows[j].impl, peer) && !strcmp(rows[j].op, r->op) &&
                !strcmp(rows[j].shape, r->shape) && rate(&rows[j]) > 0)
                printf("ratio %-6s %-28s vulkan / %-8s = %.3fx (%.2f vs %.2f %s)\n", r->op,
                       r->shape, peer, rate(r) / rate(&rows[j]), rate(r), rate(&rows[j]),
                       unit(r));
    }
    if (o.csv)
        write_csv(&o, driver);
    if (o.json)
        write_json(&o, driver);
    vkmha_context_destroy(ref);
    free(rows);
    return 0;
}
