/* vkmha-bench-kernels: the non-matmul kernels (masked softmax, split and
 * merge heads, residual + LayerNorm, the split-K combine of the fused
 * attention) on the Vulkan backend against the scalar reference backend, in
 * the same run.
 *
 *   vkmha-bench-kernels [--reps N] [--lens 128,512,1024] [--wg-rows]
 *                       [--only softmax,heads,layernorm,combine]
 *                       [--no-subgroup] [--csv FILE]
 *
 * Rows per kernel and shape ("impl"):
 *   reference  the reference backend on host arrays (wall clock);
 *   vk-host    the Vulkan op on host arrays: wall clock around the call
 *              (upload, one submit, wait, download) and the device time of
 *              its command buffer (VKMHA_CONTEXT_PROFILE timestamps);
 *   vk-tensor  the same op on device tensors (vkmha_*_tensor): no upload or
 *              download, so wall - gpu is the submission cost alone;
 *   wg-host, wg-tensor  (--wg-rows) the same with the workgroup-per-row
 *              kernels (VKMHA_ROW_KERNELS=gpu): GPUs' shape, and what CPU
 *              devices ran before the CPU-shaped kernels.
 * LayerNorm has no public op: the program links the library's objects and
 * calls its internal host-array entry (vk_layernorm, ref_layernorm), so it
 * has no vk-tensor row. The split-K combine of the fused attention
 * (shaders/flash_combine.comp) runs inside an attention call and the
 * reference has no split-K: its rows dispatch the combine alone, as
 * src/vk_attention.c records it, on 8 * L query rows (d_v 64, 8 key ranges),
 * against the same math as a plain C loop ("C loop", its reference row).
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
    bool no_subgroup, wg_rows;
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

static void report(const char *kernel, const char *shape, const char *impl, timing t,
                   double diff)
{
    if (!strcmp(impl, "reference") || !strcmp(impl, "C loop"))
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

/* The Vulkan kernels each row runs: what the device picks (on CPU devices
 * the CPU-shaped kernels), then with --wg-rows the workgroup-per-row
 * kernels, GPUs' shape and every device's before the CPU-shaped ones existed
 * (VKMHA_ROW_KERNELS=gpu; for the combine, one element per invocation). */
static const struct {
    const char *env, *host, *tensor;
} variants[] = {{NULL, "vk-host", "vk-tensor"}, {"gpu", "wg-host", "wg-tensor"}};
static size_t n_variants = 1;

static void set_variant(size_t v)
{
    if (variants[v].env)
        setenv("VKMHA_ROW_KERNELS", variants[v].env, 1);
    else
        unsetenv("VKMHA_ROW_KERNELS");
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
    vkmha_mask m = {.kinds = kinds, .bias_batch = 1, .bias_heads = heads};
    if (kinds & VKMHA_MASK_KEY_PADDING)
        m.key_padding = kp;
    if (kinds & VKMHA_MASK_BIAS)
        m.bias = bias = bench_random(n, 1.0f, &seed);
    char shape[64];
    snprintf(shape, sizeof shape, "[1][%u][%u][%u] %s", heads, len, len,
             kinds & VKMHA_MASK_BIAS ? "bias" : "pad+causal");
    sm_call c = {ref, {1, heads, len, len, 0.125f, 0}, x, &m, y_ref, NULL, NULL, NULL};
    report("softmax", shape, "reference", time_calls(sm_host, &c, o->reps, NULL), 0);

    for (size_t v = 0; v < n_variants; v++) {
        set_variant(v);
        c.ctx = vk_context(o);
        c.y = y;
        timing t = time_calls(sm_host, &c, o->reps, c.ctx); /* before the diff */
        report("softmax", shape, variants[v].host, t, max_abs_diff(y, y_ref, n));
        vkmha_tensor_mask tm = {.kinds = kinds, .bias_batch = 1, .bias_heads = heads};
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
        report("softmax", shape, variants[v].tensor, t, max_abs_diff(y, y_ref, n));
        vkmha_context_destroy(c.ctx); /* and its tensors */
    }
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
    heads_call c = {ref, {1, len, heads, d_model / heads, 0}, split, x, y_ref, NULL, NULL};
    report(k, shape, "reference", time_calls(heads_host, &c, o->reps, NULL), 0);
    for (size_t v = 0; v < n_variants; v++) {
        set_variant(v);
        c.ctx = vk_context(o);
        c.y = y;
        timing t = time_calls(heads_host, &c, o->reps, c.ctx);
        report(k, shape, variants[v].host, t, max_abs_diff(y, y_ref, n));
        c.tx = tensor(c.ctx, VKMHA_DTYPE_F32, n, x);
        c.ty = tensor(c.ctx, VKMHA_DTYPE_F32, n, NULL);
        t = time_calls(heads_tensor, &c, o->reps, c.ctx);
        memset(y, 0, n * 4);
        if (vkmha_tensor_download(c.ty, 0, y, n * 4))
            die(vkmha_context_last_error(c.ctx));
        report(k, shape, variants[v].tensor, t, max_abs_diff(y, y_ref, n));
        vkmha_context_destroy(c.ctx);
    }
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
    for (size_t v = 0; v < n_variants; v++) {
        set_variant(v);
        c.ctx = vk_context(o);
        c.y = y;
        timing t = time_calls(ln_run, &c, o->reps, c.ctx);
        report("layernorm", shape, variants[v].host, t, max_abs_diff(y, y_ref, n));
        vkmha_context_destroy(c.ctx);
    }
    free(x), free(res), free(gamma), free(beta), free(y_ref), free(y);
}

/* ---- the split-K combine ---------------------------------------------------- */

/* struct combine_push: src/vk_push.h. */

typedef struct cb_call {
    vkmha_context *ctx; /* NULL: the scalar C loop */
    uint32_t rows, d_v, splits;
    const float *po, *pml; /* [splits][rows][d_v], [splits][rows][2] */
    float *out, *ml;       /* [rows][d_v], [rows][2] */
} cb_call;

/* The combine's math as a plain C loop over rows (the reference backend has
 * no split-K; this is its scalar counterpart). */
static void combine_c(const cb_call *c)
{
    for (uint32_t r = 0; r < c->rows; r++) {
        float m = -INFINITY;
        for (uint32_t s = 0; s < c->splits; s++)
            m = fmaxf(m, c->pml[2 * ((size_t)s * c->rows + r)]);
        const float m_sub = m == -INFINITY ? 0.0f : m;
        float l = 0, *o = c->out + (size_t)r * c->d_v;
        memset(o, 0, c->d_v * sizeof *o);
        for (uint32_t s = 0; s < c->splits; s++) {
            const size_t sr = (size_t)s * c->rows + r;
            const float w = expf(c->pml[2 * sr] - m_sub);
            l += c->pml[2 * sr + 1] * w;
            for (uint32_t j = 0; j < c->d_v; j++)
                o[j] += c->po[sr * c->d_v + j] * w;
        }
        for (uint32_t j = 0; l != 0 && j < c->d_v; j++)
            o[j] /= l;
        c->ml[2 * r] = m, c->ml[2 * r + 1] = l;
    }
}

/* The combine dispatch alone on host arrays, as vk_record_attention records
 * it (same pipeline, site, push constants and grid). */
static int cb_run(void *p)
{
    cb_call *c = p;
    if (!c->ctx) {
        combine_c(c);
        return 0;
    }
    vk_state *vk = c->ctx->vk;
    vkmha__begin_call(c->ctx, "flash_combine");
    const uint64_t no = (uint64_t)c->rows * c->d_v * 4, nml = (uint64_t)c->rows * 8;
    vkmha_status st;
    if ((st = vk_slot_ensure(vk, SLOT_PARTIAL_O, no * c->splits)) ||
        (st = vk_slot_ensure(vk, SLOT_PARTIAL_ML, nml * c->splits)) ||
        (st = vk_slot_ensure(vk, SLOT_OUT, no)) || (st = vk_slot_ensure(vk, SLOT_STATS, nml)) ||
        (st = vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL)))
        return 1;
    if ((st = vk_upload(vk, &vk->mem.slots[SLOT_PARTIAL_O], 0, c->po, no * c->splits)) ||
        (st = vk_upload(vk, &vk->mem.slots[SLOT_PARTIAL_ML], 0, c->pml, nml * c->splits)))
        return vk_exec_end(vk, st, NULL) != VKMHA_SUCCESS;
    struct combine_push cp = {.rows = c->rows, .len_q = 1, .heads = c->rows, .d_v = c->d_v,
                             .splits = c->splits, .o_sh = c->d_v, .o_ld = c->d_v};
    const vk_view bufs[4] = {vk_view_of(&vk->mem.slots[SLOT_PARTIAL_O], VKMHA_DTYPE_F32),
                             vk_view_of(&vk->mem.slots[SLOT_PARTIAL_ML], VKMHA_DTYPE_F32),
                             vk_view_of(&vk->mem.slots[SLOT_OUT], VKMHA_DTYPE_F32),
                             vk_view_of(&vk->mem.slots[SLOT_STATS], VKMHA_DTYPE_F32)};
    uint64_t groups = ((uint64_t)c->rows * c->d_v + vk->tuning.elementwise_wg - 1) / vk->tuning.elementwise_wg;
    if ((st = vk_dispatch_groups(vk, &vk->desc.op_sites.sites[OPSITE_ATTENTION + ASITE_COMBINE],
                                 VK_PIPE(KERNEL_FLASH_COMBINE), bufs, 4, &cp, sizeof cp,
                                 offsetof(struct combine_push, group_base), groups)))
        return vk_exec_end(vk, st, NULL) != VKMHA_SUCCESS;
    if (!(st = vk_download(vk, &vk->mem.slots[SLOT_OUT], c->out, no, 1, no, 1, no)))
        st = vk_download(vk, &vk->mem.slots[SLOT_STATS], c->ml, nml, 1, nml, 1, nml);
    return vk_exec_end(vk, st, NULL) != VKMHA_SUCCESS;
}

/* rows query rows (batch x heads x len_q of a decode step), d_v 64, 8 key
 * ranges; one range in 8 is entirely -inf (m = -inf, l = 0), as masked
 * ranges are. */
static void bench_combine(const opts *o, uint32_t rows)
{
    const uint32_t d_v = 64, splits = 8;
    const size_t no = (size_t)rows * d_v;
    uint64_t seed = 4;
    float *po = bench_random(no * splits, 1.0f, &seed);
    float *pml = bench_random((size_t)rows * 2 * splits, 4.0f, &seed);
    for (size_t r = 0; r < (size_t)rows * splits; r++) {
        pml[2 * r + 1] = 1.0f + fabsf(pml[2 * r + 1]); /* sums are positive */
        if (r % 8 == 3)
            pml[2 * r] = -INFINITY, pml[2 * r + 1] = 0.0f;
    }
    float *out_ref = malloc(no * 4), *out = malloc(no * 4);
    float *ml_ref = malloc(rows * 8), *ml = malloc(rows * 8);
    if (!out_ref || !out || !ml_ref || !ml)
        die("out of memory");
    char shape[64];
    snprintf(shape, sizeof shape, "%u rows d_v %u, %u splits", rows, d_v, splits);
    cb_call c = {NULL, rows, d_v, splits, po, pml, out_ref, ml_ref};
    report("combine", shape, "C loop", time_calls(cb_run, &c, o->reps, NULL), 0);
    for (size_t v = 0; v < n_variants; v++) {
        set_variant(v);
        c.ctx = vk_context(o);
        c.out = out, c.ml = ml;
        timing t = time_calls(cb_run, &c, o->reps, c.ctx);
        report("combine", shape, variants[v].host, t, max_abs_diff(out, out_ref, no));
        vkmha_context_destroy(c.ctx);
    }
    free(po), free(pml), free(out_ref), free(out), free(ml_ref), free(ml);
}

int main(int argc, char **argv)
{
    opts o = {15, "128,512,1024", NULL, "softmax,heads,layernorm,combine", false, false};
    const cli_opt opts[] = {
        CLI_U32("--reps", "N", o.reps, 1, 10000, "timed calls per row, median (default 15)"),
        CLI_STR("--lens", "LIST", o.lens, "comma-separated row lengths (default 128,512,1024)"),
        CLI_STR("--only", "LIST",
                o.only, "comma-separated subset of softmax,heads,layernorm,combine (default: all)"),
        CLI_FLAG("--wg-rows", o.wg_rows, "also the workgroup-per-row variants"),
        CLI_FLAG("--no-subgroup", o.no_subgroup, "reductions without subgroup arithmetic"),
        CLI_STR("--csv", "FILE", o.csv, "also write the rows to FILE (default: none)"),
    };
    CLI_PARSE("vkmha-bench-kernels",
              "The non-matmul kernels (softmax, heads, LayerNorm, split-K combine) on Vulkan\n"
              "against the reference backend. Writes no file unless --csv is given.",
              opts, argc, argv);
    for (const char *p = o.lens; p;) { /* every length a whole number */
        char len[32];
        const size_t n = strcspn(p, ",");
        uint32_t v;
        snprintf(len, sizeof len, "%.*s", (int)(n < sizeof len - 1 ? n : sizeof len - 1), p);
        if (n >= sizeof len || !cli_u32(len, 1, 1u << 24, &v)) {
            fprintf(stderr, "vkmha-bench-kernels: --lens: \"%s\" is not a list of whole numbers "
                            "from 1 to %u\n(vkmha-bench-kernels --help lists the options)\n",
                    o.lens, 1u << 24);
            return 2;
        }
        p = p[n] ? p + n + 1 : NULL;
    }
    n_variants = o.wg_rows ? 2 : 1;
    vkmha_context_info info;
    char date[32];
    if (!bench_device(&info, date))
        return 1;
    vkmha_context_desc rd = {0};
    rd.backend = VKMHA_BACKEND_REFERENCE;
    vkmha_context *ref = NULL;
    if (vkmha_context_create(&rd, &ref))
        die(vkmha_context_last_error(NULL));
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
            bench_combine(&o, 8 * len);
    }
    vkmha_context_destroy(ref);
    if (csv_out)
        fclose(csv_out);
    return 0;
}
