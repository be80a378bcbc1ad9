/* vkmha-bench-kernels: the non-matmul kernels (masked softmax, split and
 * merge heads, residual + LayerNorm, the split-K combine of the fused
 * attention) on the Vulkan backend against the scalar reference backend, in
 * the same run.
 *
 *   vkmha-bench-kernels [--reps N] [--lens 128,512,1024] [--no-subgroup]
 *                       [--csv FILE]
 *
 * Rows per kernel and shape ("impl"):
 *   reference  the reference backend on host arrays (wall clock);
 *   vk-host    the Vulkan op on host arrays: wall clock around the call
 *              (upload, one submit, wait, download) and the device time of
 *              its command buffer (VKMHA_CONTEXT_PROFILE timestamps);
 *   vk-tensor  the same op on device tensors (vkmha_*_tensor): no upload or
 *              download, so wall - gpu is the submission cost alone.
 * LayerNorm has no public op: the program links the library's objects and
 * calls its internal host-array entry (vk_layernorm, ref_layernorm), so it
 * has no vk-tensor row. The combine runs inside an attention call; its row is
 * the fused decode attention (len_q 1, 8 key splits) whose device time it is
 * part of, with and without the split (--kv-splits 1 has no combine).
 *
 * Timing: two warm-up calls (pipeline creation, scratch growth), then --reps
 * calls; medians. "ratio" is the row's median wall time over the reference's
 * (below 1: faster than the reference); "gpu ratio" the device time over it.
 * Every Vulkan result is compared with the reference's, element by element
 * (max_abs_diff). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "internal.h"
#include "vk_internal.h"

typedef struct opts {
    uint32_t reps;
    const char *lens, *csv, *only;
    bool no_subgroup;
} opts;

typedef struct timing {
    double wall, gpu; /* medians, ms; gpu < 0: no timestamps */
} timing;

static FILE *csv_out;
static double ref_wall; /* the current shape's reference time */

static void die(const char *what)
{
    fprintf(stderr, "vkmha-bench-kernels: %s\n", what);
    exit(1);
}

typedef int (*call_fn)(void *arg);

/* Median wall and device time of reps calls after two warm-up calls. */
static timing time_calls(call_fn fn, void *arg, uint32_t reps, vkmha_context *ctx)
{
    double *wall = malloc(reps * sizeof *wall), *gpu = malloc(reps * sizeof *gpu);
    if (!wall || !gpu)
        die("out of memory");
    for (int w = 0; w < 2; w++)
        if (fn(arg))
            die(ctx ? vkmha_context_last_error(ctx) : "reference call failed");
    uint32_t n_gpu = 0;
    for (uint32_t i = 0; i < reps; i++) {
        double t0 = now_ms();
        if (fn(arg))
            die(ctx ? vkmha_context_last_error(ctx) : "reference call failed");
        wall[i] = now_ms() - t0;
        vkmha_context_info info;
        if (ctx && vkmha_context_get_info(ctx, &info) == VKMHA_SUCCESS && info.gpu_timing &&
            info.last_gpu_time_ns)
            gpu[n_gpu++] = info.last_gpu_time_ns / 1e6;
    }
    qsort(wall, reps, sizeof *wall, cmp_double);
    qsort(gpu, n_gpu, sizeof *gpu, cmp_double);
    timing t = {wall[reps / 2], n_gpu == reps ? gpu[n_gpu / 2] : -1.0};
    free(wall);
    free(gpu);
    return t;
}

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m))
            m = d; /* NaN propagates */
    }
    return m;
}

static void report(const char *kernel, const char *shape, const char *impl, timing t,
                   double diff)
{
    if (!strcmp(impl, "reference"))
        ref_wall = t.wall;
    char gpu[32] = "-", gratio[32] = "-";
    if (t.gpu >= 0) {
        snprintf(gpu, sizeof gpu, "%.3f", t.gpu);
        snprintf(gratio, sizeof gratio, "%.2f", t.gpu / ref_wall);
    }
    printf("%-10s %-26s %-10s %9.3f %9s %7.2f %7s %10.2g\n", kernel, shape, impl, t.wall, gpu,
           t.wall / ref_wall, gratio, diff);
    fflush(stdout);
    if (csv_out)
        fprintf(csv_out, "%s,\"%s\",%s,%.4f,%s,%.3f,%s,%.3g\n", kernel, shape, impl, t.wall,
                t.gpu >= 0 ? gpu : "", t.wall / ref_wall, t.gpu >= 0 ? gratio : "", diff);
}

static vkmha_context *vk_context(const opts *o)
{
    vkmha_context_desc d = {0};
    d.flags = VKMHA_CONTEXT_PROFILE | (o->no_subgroup ? VKMHA_CONTEXT_NO_SUBGROUP_OPS : 0);
    vkmha_context *ctx = NULL;
    if (vkmha_context_create(&d, &ctx) != VKMHA_SUCCESS)
        die("cannot create a Vulkan context");
    return ctx;
}

static vkmha_tensor *tensor(vkmha_context *ctx, vkmha_dtype dt, uint64_t n, const void *src)
{
    vkmha_tensor_desc d = {dt, 1, {(uint32_t)n}};
    vkmha_tensor *t = NULL;
    if (vkmha_tensor_create(ctx, &d, &t) ||
        (src && vkmha_tensor_upload(t, 0, src, n * (dt == VKMHA_DTYPE_U8 ? 1 : 4))))
        die(vkmha_context_last_error(ctx));
    return t;
}

/* ---- softmax -------------------------------------------------------------- */

typedef struct sm_call {
    vkmha_context *ctx;
    vkmha_softmax_desc d;
    const float *x;
    const vkmha_mask *mask;
    float *y;
    vkmha_tensor *tx, *ty;
    const vkmha_tensor_mask *tmask;
} sm_call;

static int sm_host(void *p)
{
    sm_call *c = p;
    return vkmha_softmax(c->ctx, &c->d, c->x, c->mask, c->y) != VKMHA_SUCCESS;
}

static int sm_tensor(void *p)
{
    sm_call *c = p;
    return vkmha_softmax_tensor(c->ctx, &c->d, c->tx, c->tmask, c->ty) != VKMHA_SUCCESS;
}

/* kinds: the mask kinds (key padding + causal, or a per-head bias). */
static void bench_softmax(const opts *o, vkmha_context *ref, uint32_t len, uint32_t kinds)
{
    const uint32_t heads = 8;
    const size_t n = (size_t)heads * len * len;
    uint64_t seed = 1;
    float *x = bench_random(n, 4.0f, &seed), *bias = NULL;
    float *y_ref = malloc(n * 4), *y = malloc(n * 4);
    uint8_t *kp = malloc(len);
    if (!y_ref || !y || !kp)
        die("out of memory");
    for (uint32_t j = 0; j < len; j++)
        kp[j] = j < len - len / 8; /* the last eighth is padding */
    vkmha_mask m = {kinds, NULL, NULL, NULL, 1, heads};
    if (kinds & VKMHA_MASK_KEY_PADDING)
        m.key_padding = kp;
    if (kinds & VKMHA_MASK_BIAS)
        m.bias = bias = bench_random(n, 1.0f, &seed);
    char shape[64];
    snprintf(shape, sizeof shape, "[1][%u][%u][%u] %s", heads, len, len,
             kinds & VKMHA_MASK_BIAS ? "bias" : "pad+causal");
    sm_call c = {ref, {1, heads, len, len, 0.125f}, x, &m, y_ref, NULL, NULL, NULL};
    report("softmax", shape, "reference", time_calls(sm_host, &c, o->reps, NULL), 0);

    c.ctx = vk_context(o);
    c.y = y;
    timing t = time_calls(sm_host, &c, o->reps, c.ctx); /* before the diff */
    report("softmax", shape, "vk-host", t, max_abs_diff(y, y_ref, n));
    vkmha_tensor_mask tm = {kinds, NULL, NULL, NULL, 1, heads};
    if (kinds & VKMHA_MASK_KEY_PADDING)
        tm.key_padding = tensor(c.ctx, VKMHA_DTYPE_U8, len, kp);
    if (kinds & VKMHA_MASK_BIAS)
        tm.bias = tensor(c.ctx, VKMHA_DTYPE_F32, n, bias);
    c.tx = tensor(c.ctx, VKMHA_DTYPE_F32, n, x);
    c.ty = tensor(c.ctx, VKMHA_DTYPE_F32, n, NULL);
    c.tmask = &tm;
    t = time_calls(sm_tensor, &c, o->reps, c.ctx);
    memset(y, 0, n * 4);
    if (vkmha_tensor_download(c.ty, 0, y, n * 4))
        die(vkmha_context_last_error(c.ctx));
    report("softmax", shape, "vk-tensor", t, max_abs_diff(y, y_ref, n));
    vkmha_context_destroy(c.ctx); /* and its tensors */
    free(x), free(bias), free(y_ref), free(y), free(kp);
}

/* ---- heads ---------------------------------------------------------------- */

typedef struct heads_call {
    vkmha_context *ctx;
    vkmha_heads_desc d;
    bool split;
    const float *x;
    float *y;
    vkmha_tensor *tx, *ty;
} heads_call;

static int heads_host(void *p)
{
    heads_call *c = p;
    return (c->split ? vkmha_split_heads : vkmha_merge_heads)(c->ctx, &c->d, c->x, c->y) !=
           VKMHA_SUCCESS;
}

static int heads_tensor(void *p)
{
    heads_call *c = p;
    return (c->split ? vkmha_split_heads_tensor : vkmha_merge_heads_tensor)(
               c->ctx, &c->d, c->tx, c->ty) != VKMHA_SUCCESS;
}

static void bench_heads(const opts *o, vkmha_context *ref, uint32_t len, bool split)
{
    const uint32_t heads = 8, d_model = 512;
    const size_t n = (size_t)len * d_model;
    uint64_t seed = 2;
    float *x = bench_random(n, 1.0f, &seed), *y_ref = malloc(n * 4), *y = malloc(n * 4);
    if (!y_ref || !y)
        die("out of memory");
    char shape[64];
    snprintf(shape, sizeof shape, "[1][%u][%u] %u heads", len, d_model, heads);
    const char *k = split ? "split" : "merge";
    heads_call c = {ref, {1, len, heads, d_model / heads}, split, x, y_ref, NULL, NULL};
    report(k, shape, "reference", time_calls(heads_host, &c, o->reps, NULL), 0);
    c.ctx = vk_context(o);
    c.y = y;
    timing t = time_calls(heads_host, &c, o->reps, c.ctx);
    report(k, shape, "vk-host", t, max_abs_diff(y, y_ref, n));
    c.tx = tensor(c.ctx, VKMHA_DTYPE_F32, n, x);
    c.ty = tensor(c.ctx, VKMHA_DTYPE_F32, n, NULL);
    t = time_calls(heads_tensor, &c, o->reps, c.ctx);
    memset(y, 0, n * 4);
    if (vkmha_tensor_download(c.ty, 0, y, n * 4))
        die(vkmha_context_last_error(c.ctx));
    report(k, shape, "vk-tensor", t, max_abs_diff(y, y_ref, n));
    vkmha_context_destroy(c.ctx);
    free(x), free(y_ref), free(y);
}

/* ---- LayerNorm ------------------------------------------------------------ */

typedef struct ln_call {
    vkmha_context *ctx; /* NULL: the reference */
    uint32_t rows, cols;
    const float *x, *res, *gamma, *beta;
    float *y;
} ln_call;

static int ln_run(void *p)
{
    ln_call *c = p;
    if (!c->ctx) {
        ref_layernorm(c->rows, c->cols, c->x, c->res, c->gamma, c->beta, 1e-5f, c->y);
        return 0;
    }
    vkmha__begin_call(c->ctx, "vk_layernorm");
    return vk_layernorm(c->ctx->vk, c->rows, c->cols, 1e-5f, c->x, c->res, c->gamma, c->beta,
                        c->y) != VKMHA_SUCCESS;
}

static void bench_layernorm(const opts *o, uint32_t rows)
{
    const uint32_t cols = 512;
    const size_t n = (size_t)rows * cols;
    uint64_t seed = 3;
    float *x = bench_random(n, 2.0f, &seed), *res = bench_random(n, 1.0f, &seed);
    float *gamma = bench_random(cols, 1.0f, &seed), *beta = bench_random(cols, 1.0f, &seed);
    float *y_ref = malloc(n * 4), *y = malloc(n * 4);
    if (!y_ref || !y)
        die("out of memory");
    char shape[64];
    snprintf(shape, sizeof shape, "[%u][%u] + residual", rows, cols);
    ln_call c = {NULL, rows, cols, x, res, gamma, beta, y_ref};
    report("layernorm", shape, "reference", time_calls(ln_run, &c, o->reps, NULL), 0);
    c.ctx = vk_context(o);
    c.y = y;
    timing t = time_calls(ln_run, &c, o->reps, c.ctx);
    report("layernorm", shape, "vk-host", t, max_abs_diff(y, y_ref, n));
    vkmha_context_destroy(c.ctx);
    free(x), free(res), free(gamma), free(beta), free(y_ref), free(y);
}

/* ---- the split-K combine, inside a decode attention ----------------------- */

typedef struct at_call {
    vkmha_context *ctx;
    vkmha_attention_desc d;
    const float *q, *k, *v;
    float *out;
    vkmha_tensor *tq, *tk, *tv, *tout;
} at_call;

static int at_host(void *p)
{
    at_call *c = p;
    return vkmha_attention(c->ctx, &c->d, c->q, c->k, c->v, NULL, c->out, NULL) !=
           VKMHA_SUCCESS;
}

static int at_tensor(void *p)
{
    at_call *c = p;
    return vkmha_attention_tensor(c->ctx, &c->d, c->tq, c->tk, c->tv, NULL, c->tout, NULL) !=
           VKMHA_SUCCESS;
}

/* Decode attention, batch 16, 8 heads, d 64, len_q 1, len_k len: with 8 key
 * splits (flash + combine) and with 1 (flash alone); the difference of the
 * device times bounds the combine's. */
static void bench_combine(const opts *o, vkmha_context *ref, uint32_t len)
{
    const uint32_t batch = 16, heads = 8, d = 64;
    const size_t nq = (size_t)batch * heads * d, nk = nq * len;
    uint64_t seed = 4;
    float *q = bench_random(nq, 1.0f, &seed), *k = bench_random(nk, 1.0f, &seed);
    float *v = bench_random(nk, 1.0f, &seed);
    float *out_ref = malloc(nq * 4), *out = malloc(nq * 4);
    if (!out_ref || !out)
        die("out of memory");
    at_call c = {ref, {0}, q, k, v, out_ref, NULL, NULL, NULL, NULL};
    c.d.batch = batch, c.d.heads = heads, c.d.len_q = 1, c.d.len_k = len;
    c.d.d_k = c.d.d_v = d;
    c.d.path = VKMHA_ATTENTION_PATH_FUSED;
    char shape[64];
    snprintf(shape, sizeof shape, "B%u H%u 1x%u d%u", batch, heads, len, d);
    report("decode", shape, "reference", time_calls(at_host, &c, o->reps, NULL), 0);
    c.ctx = vk_context(o);
    c.out = out;
    c.tq = tensor(c.ctx, VKMHA_DTYPE_F32, nq, q);
    c.tk = tensor(c.ctx, VKMHA_DTYPE_F32, nk, k);
    c.tv = tensor(c.ctx, VKMHA_DTYPE_F32, nk, v);
    c.tout = tensor(c.ctx, VKMHA_DTYPE_F32, nq, NULL);
    for (uint32_t splits = 8; splits >= 1; splits /= 8) {
        c.d.kv_splits = splits;
        char impl[32];
        snprintf(impl, sizeof impl, "vk-host/%u", splits);
        timing t = time_calls(at_host, &c, o->reps, c.ctx);
        report("decode", shape, impl, t, max_abs_diff(out, out_ref, nq));
        t = time_calls(at_tensor, &c, o->reps, c.ctx);
        memset(out, 0, nq * 4);
        if (vkmha_tensor_download(c.tout, 0, out, nq * 4))
            die(vkmha_context_last_error(c.ctx));
        snprintf(impl, sizeof impl, "vk-tensor/%u", splits);
        report("decode", shape, impl, t, max_abs_diff(out, out_ref, nq));
    }
    vkmha_context_destroy(c.ctx);
    free(q), free(k), free(v), free(out_ref), free(out);
}

int main(int argc, char **argv)
{
    opts o = {15, "128,512,1024", NULL, "softmax,heads,layernorm,combine", false};
    const bench_opt table[] = {
        {"--reps", NULL, &o.reps, NULL},
        {"--lens", NULL, NULL, &o.lens},
        {"--csv", NULL, NULL, &o.csv},
        {"--only", NULL, NULL, &o.only},
        {"--no-subgroup", &o.no_subgroup, NULL, NULL},
    };
    if (!bench_parse_args(argc, argv, table, VKMHA_ARRAY_LEN(table)) || !o.reps) {
        fprintf(stderr, "usage: vkmha-bench-kernels [--reps N] [--lens 128,512,1024] "
                        "[--no-subgroup] [--csv FILE]\n");
        return 2;
    }
    vkmha_context_info info;
    char date[32];
    if (!bench_device(&info, date))
        return 1;
    vkmha_context_desc rd = {0};
    rd.backend = VKMHA_BACKEND_REFERENCE;
    vkmha_context *ref = NULL;
    if (vkmha_context_create(&rd, &ref))
        die("cannot create the reference context");
    if (o.csv && !(csv_out = fopen(o.csv, "w")))
        die("cannot open the CSV file");
    if (csv_out)
        fprintf(csv_out, "kernel,shape,impl,wall_ms,gpu_ms,ratio,gpu_ratio,max_abs_diff\n");
    printf("# %s, %s, %s, median of %u\n", date, info.device.name,
           o.no_subgroup ? "no subgroup ops" : "subgroup ops where supported", o.reps);
    printf("%-10s %-26s %-10s %9s %9s %7s %7s %10s\n", "kernel", "shape", "impl", "wall ms",
           "gpu ms", "ratio", "gpu rat", "max diff");
    for (const char *p = o.lens; p && *p;) {
        uint32_t len = (uint32_t)strtoul(p, NULL, 10);
        p = strchr(p, ',');
        p = p ? p + 1 : NULL;
        if (!len)
            continue;
        if (strstr(o.only, "softmax")) {
            bench_softmax(&o, ref, len, VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL);
            bench_softmax(&o, ref, len, VKMHA_MASK_BIAS);
        }
        if (strstr(o.only, "heads")) {
            bench_heads(&o, ref, len, true);
            bench_heads(&o, ref, len, false);
        }
        if (strstr(o.only, "layernorm"))
            bench_layernorm(&o, len);
        if (strstr(o.only, "combine"))
            bench_combine(&o, ref, len);
    }
    vkmha_context_destroy(ref);
    if (csv_out)
        fclose(csv_out);
    return 0;
}
