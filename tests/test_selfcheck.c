/* The self-check (vkmha_path): on by default, each path checked right
 * before the first call that may take it (context creation compiles and
 * runs nothing), or all at creation with VKMHA_CONTEXT_EAGER_PIPELINES;
 * each path the context uses made wrong on purpose
 * (desc->debug->self_check_break) is disabled with a warning naming it when
 * it is first needed, and the ops then take its fallback and still match
 * the reference; VKMHA_DISABLE_PATHS disables paths unchecked and refuses
 * an unknown name; a wrong unfused attention fails every attention call
 * (the context stays usable for the rest); VKMHA_CONTEXT_NO_SELF_CHECK skips
 * it. A check's pipelines are created together (on several threads unless
 * VKMHA_PIPELINE_THREADS=1 or VKMHA_CONTEXT_SINGLE_THREAD) before its
 * judged pass, which creates none. Prints the check's cost.
 * Sparse binding (Mesa 25's lavapipe, not 22's) is one of the paths: made
 * wrong, the context makes no sparse tensors. */
#include "util.h"

#include "half.h"

static const struct {
    uint32_t bit;
    const char *name, *kernel; /* the kernel list's row it needs (NULL: see main) */
} paths[] = {
    {VKMHA_PATH_FUSED_D32, "fused_d32", "flash_d32"},
    {VKMHA_PATH_FUSED_D64, "fused_d64", "flash_d64"},
    {VKMHA_PATH_FUSED_D128, "fused_d128", "flash_d128"},
    {VKMHA_PATH_FUSED_D256, "fused_d256", "flash_d256"},
    {VKMHA_PATH_FUSED_CPU_D32, "fused_cpu_d32", "flash_cpu_d32"},
    {VKMHA_PATH_FUSED_CPU_D64, "fused_cpu_d64", "flash_cpu_d64"},
    {VKMHA_PATH_FUSED_CPU_D128, "fused_cpu_d128", "flash_cpu_d128"},
    {VKMHA_PATH_FUSED_CPU_D256, "fused_cpu_d256", "flash_cpu_d256"},
    {VKMHA_PATH_SUBGROUP, "subgroup", NULL},
    {VKMHA_PATH_NATIVE_16BIT, "native16", NULL},
    {VKMHA_PATH_MATMUL_GEMV, "gemv", "matmul_gemv"},
    {VKMHA_PATH_SPARSE, "sparse", NULL},
    {VKMHA_PATH_COOPMAT_MATMUL, "coopmat_matmul", "matmul_coop"},
    {VKMHA_PATH_COOPMAT_FUSED_D32, "coopmat_fused_d32", "flash_coop_d32"},
    {VKMHA_PATH_COOPMAT_FUSED_D64, "coopmat_fused_d64", "flash_coop_d64"},
    {VKMHA_PATH_COOPMAT_FUSED_D128, "coopmat_fused_d128", "flash_coop_d128"},
    {VKMHA_PATH_COOPMAT_FUSED_D256, "coopmat_fused_d256", "flash_coop_d256"},
    {VKMHA_PATH_COOPMAT2_MATMUL, "coopmat2_matmul", "matmul_cm2"},
    {VKMHA_PATH_FUSED_D576, "fused_d576", "flash_d576"},
    {VKMHA_PATH_FUSED_CPU_D576, "fused_cpu_d576", "flash_cpu_d576"},
    {VKMHA_PATH_COOPMAT_FUSED_D576, "coopmat_fused_d576", "flash_coop_d576"},
};

/* The WARN messages a context sent, and the self-check's account of its
 * pipelines (a DEBUG message). */
typedef struct warnings {
    char text[4096];
    char pipelines[256];
} warnings;

static void keep_warnings(void *user, vkmha_log_level level, vkmha_status status,
                          const char *msg)
{
    warnings *w = user;
    if (level == VKMHA_LOG_WARN && strlen(w->text) + strlen(msg) + 2 < sizeof w->text) {
        strcat(w->text, msg);
        strcat(w->text, "\n");
    }
    if (strstr(msg, "pipelines created together"))
        snprintf(w->pipelines, sizeof w->pipelines, "%s", msg);
    t_log(NULL, level, status, msg);
}

static vkmha_context *create(uint32_t flags, uint32_t breaks, warnings *w, vkmha_status *st)
{
    vkmha_debug_options dbg = {.self_check_break = breaks};
    vkmha_context_desc d = {.backend = VKMHA_BACKEND_VULKAN,
                            .enable_validation = t_validation(), .flags = flags,
                            .debug = &dbg, .log = keep_warnings, .log_user = w,
                            .log_level = VKMHA_LOG_DEBUG};
    vkmha_context *ctx = NULL;
    memset(w, 0, sizeof *w);
    *st = vkmha_context_create(&d, &ctx);
    t_pin_libraries(); /* sanitizer builds: keep the driver and layer mapped */
    return ctx;
}

/* Whether the context uses path p (before any check disabled it). */
static bool in_use(const vkmha_context_info *info, const vkmha_kernel_info *k, uint32_t n,
                   size_t p)
{
    if (paths[p].bit == VKMHA_PATH_SUBGROUP)
        return info->subgroup_ops_used;
    if (paths[p].bit == VKMHA_PATH_NATIVE_16BIT)
        return info->native_16bit_storage;
    if (paths[p].bit == VKMHA_PATH_SPARSE) /* Mesa 25's lavapipe, not 22's */
        return info->sparse_tensors;
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(k[i].name, paths[p].kernel))
            return k[i].available;
    return false;
}

/* An attention of head dims d (5 queries, 40 keys, causal) against the
 * reference; the GPU call's status in *st. */
static bool attention_right(vkmha_context *gpu, vkmha_context *ref, t_rng *rng, uint32_t d,
                            const char *tag, vkmha_status *st)
{
    const vkmha_attention_desc ad = {.batch = 1, .heads = 2, .kv_heads = 1, .len_q = 5,
                                     .len_k = 40, .d_k = d, .d_v = d};
    const t_attention_sizes n = t_attention_size(&ad);
    float *q = t_random(rng, n.q, -1, 1), *k = t_random(rng, n.k, -1, 1),
          *v = t_random(rng, n.v, -1, 1), *o = t_alloc(n.out), *r = t_alloc(n.out);
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    *st = vkmha_attention(gpu, &ad, q, k, v, &causal, o, NULL);
    const bool ok = !*st && !vkmha_attention(ref, &ad, q, k, v, &causal, r, NULL) &&
                    t_close(tag, "attention", o, r, n.out, 1e-5, 1e-4);
    free(q), free(k), free(v), free(o), free(r);
    return ok;
}

/* The ops that run each path, against the reference: attention at head
 * dims 20, 60, 120, 250, 570 (one per class, default path), a long softmax
 * row, an fp16 matmul and a matmul of 2 rows. */
static bool ops_right(vkmha_context *gpu, vkmha_context *ref, t_rng *rng, const char *tag)
{
    bool ok = true;
    static const uint32_t dims[5] = {20, 60, 120, 250, 570};
    vkmha_status st;
    for (int c = 0; c < 5 && ok; c++)
        ok = attention_right(gpu, ref, rng, dims[c], tag, &st);
    const uint32_t n = 16400;
    float *x = t_random(rng, n, -4, 4), *y = t_alloc(n), *yr = t_alloc(n);
    const vkmha_softmax_desc sd = {.len_q = 1, .len_k = n};
    ok = ok && !vkmha_softmax(gpu, &sd, x, NULL, y) && !vkmha_softmax(ref, &sd, x, NULL, yr) &&
         t_close(tag, "softmax", y, yr, n, 1e-7, 1e-4);
    free(x), free(y), free(yr);
    for (int h = 0; h < 2 && ok; h++) {
        const uint32_t m = h ? 11 : 2, nn = 37, kk = 20;
        const vkmha_matmul_desc md = {.m = m, .n = nn, .k = kk, .op_b = VKMHA_OP_T,
                                      .dtype = h ? VKMHA_DTYPE_F16 : VKMHA_DTYPE_F32};
        float *a = t_random(rng, m * kk, -1, 1), *b = t_random(rng, nn * kk, -1, 1);
        float *c = t_alloc(m * nn), *cr = t_alloc(m * nn);
        uint16_t *ha = malloc(m * kk * 2), *hb = malloc(nn * kk * 2), *hc = malloc(m * nn * 2),
                 *hr = malloc(m * nn * 2);
        if (h) {
            vkmha__from_f32(VKMHA_DTYPE_F16, a, m * kk, ha);
            vkmha__from_f32(VKMHA_DTYPE_F16, b, nn * kk, hb);
            ok = !vkmha_matmul(gpu, &md, ha, hb, NULL, hc) &&
                 !vkmha_matmul(ref, &md, ha, hb, NULL, hr);
            vkmha__to_f32(VKMHA_DTYPE_F16, hc, m * nn, c);
            vkmha__to_f32(VKMHA_DTYPE_F16, hr, m * nn, cr);
        } else {
            ok = !vkmha_matmul(gpu, &md, a, b, NULL, c) && !vkmha_matmul(ref, &md, a, b, NULL, cr);
        }
        ok = ok && t_close(tag, h ? "fp16 matmul" : "matmul of 2 rows", c, cr, m * nn,
                           h ? 2e-3 : 1e-5, h ? 2e-3 : 1e-4);
        free(a), free(b), free(c), free(cr), free(ha), free(hb), free(hc), free(hr);
    }
    return ok;
}

int main(void)
{
    t_rng rng = {0x5e1fc4ec};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    warnings w;
    vkmha_status st;

    /* On by default, and lazy: creation runs and compiles nothing; the ops
     * check every path in use, none disabled; its cost. */
    vkmha_context *gpu = create(0, 0, &w, &st);
    vkmha_context_info info;
    vkmha_kernel_info kernels[64];
    uint32_t n_kernels = 64;
    bool ok = gpu && !vkmha_context_get_info(gpu, &info) &&
              !vkmha_context_get_kernels(gpu, &n_kernels, kernels);
    if (!ok) {
        printf("Bail out! cannot create a Vulkan context: %s\n", vkmha_context_last_error(NULL));
        return 1;
    }
    t_report(info.self_check_us == 0 && info.pipelines_created == 0,
             "context creation checked and compiled nothing (self-check %u us, %u pipelines)",
             info.self_check_us, info.pipelines_created);
    ok = ops_right(gpu, ref, &rng, "checked context") && !vkmha_context_get_info(gpu, &info);
    t_report(ok && info.self_check_us > 0 && info.disabled_paths == 0 && w.text[0] == '\0',
             "the first calls checked the paths they take (%u us on %s) and found every path "
             "right; the checked context computes right",
             info.self_check_us, info.device.name);
    t_report_validation(gpu);
    const vkmha_context_info base = info;
    vkmha_context_destroy(gpu);

    /* Each path right before its first use: a wrong fused_d64 kernel (or
     * CPU-shaped one, the kernel this device uses for head dims up to 64)
     * is not seen by an attention of head dim 20, and is disabled by the
     * first one of head dim 60. With VKMHA_CONTEXT_EAGER_PIPELINES every
     * path is checked at creation. */
    const uint32_t d64 = in_use(&base, kernels, n_kernels, 1) ? VKMHA_PATH_FUSED_D64
                                                               : VKMHA_PATH_FUSED_CPU_D64;
    gpu = create(0, VKMHA_PATH_FUSED_D64 | VKMHA_PATH_FUSED_CPU_D64, &w, &st);
    vkmha_context_info after20 = {0};
    ok = gpu && attention_right(gpu, ref, &rng, 20, "d 20", &st) &&
         !vkmha_context_get_info(gpu, &after20) && after20.disabled_paths == 0 &&
         w.text[0] == '\0' && attention_right(gpu, ref, &rng, 60, "d 60", &st) &&
         !vkmha_context_get_info(gpu, &info) && (info.disabled_paths & d64) &&
         t_has_word(w.text, vkmha_path_name(d64)) &&
         info.self_check_us > after20.self_check_us;
    t_report(ok, "a wrong %s: unseen after an attention of head dim 20 (disabled 0x%x), "
                 "disabled by the first of head dim 60 (0x%x), which is right",
             vkmha_path_name(d64), after20.disabled_paths, gpu ? info.disabled_paths : 0);
    vkmha_context_destroy(gpu);
    gpu = create(VKMHA_CONTEXT_EAGER_PIPELINES, d64, &w, &st);
    ok = gpu && !vkmha_context_get_info(gpu, &info) && info.self_check_us > 0 &&
         info.disabled_paths == d64 && t_has_word(w.text, vkmha_path_name(d64)) &&
         ops_right(gpu, ref, &rng, "eager");
    t_report(ok, "with VKMHA_CONTEXT_EAGER_PIPELINES: every path checked at creation (%u us), "
                 "the wrong one disabled there (0x%x)",
             gpu ? info.self_check_us : 0, gpu ? info.disabled_paths : 0);
    vkmha_context_destroy(gpu);

    /* The first call a layer forward in parts (its arrays past a lowered
     * maxStorageBufferRange: the forward records part after part into one
     * submission): the check runs before the first part, and the forward
     * equals the reference. */
    {
        vkmha_debug_options dbg = {.max_storage_buffer_range = 64 * 1024};
        vkmha_context_desc d = {.backend = VKMHA_BACKEND_VULKAN,
                                .enable_validation = t_validation(), .debug = &dbg,
                                .log = keep_warnings, .log_user = &w,
                                .log_level = VKMHA_LOG_DEBUG};
        memset(&w, 0, sizeof w);
        vkmha_context *parts = NULL;
        t_layer l;
        t_layer_make(&l, &rng, 64, 4, 2, 2, 300, 0, VKMHA_MASK_CAUSAL);
        vkmha_mha *mg = NULL, *mr = NULL;
        float *want = t_alloc(l.n_out), *got = t_alloc(l.n_out);
        vkmha_mha_io io = l.io, io_ref = l.io;
        io.out = got;
        io_ref.out = want;
        ok = !vkmha_context_create(&d, &parts) && !vkmha_context_get_info(parts, &info) &&
             info.self_check_us == 0 && !vkmha_mha_create(parts, &l.desc, &mg) &&
             !vkmha_mha_create(ref, &l.desc, &mr) && !vkmha_mha_forward(mg, &io) &&
             !vkmha_mha_forward(mr, &io_ref) &&
             t_close("parts", "forward", got, want, l.n_out, T_LAYER_ATOL, T_LAYER_RTOL) &&
             !vkmha_context_get_info(parts, &info) && info.self_check_us > 0 &&
             info.disabled_paths == 0;
        t_report(ok, "a first call that runs in parts (a layer past a 64 KiB storage range) "
                     "checks its paths first (%u us) and equals the reference",
                 parts ? info.self_check_us : 0);
        if (parts)
            t_report_validation(parts);
        vkmha_mha_destroy(mg), vkmha_mha_destroy(mr);
        vkmha_context_destroy(parts);
        free(want), free(got);
        t_layer_free(&l);
    }

    /* The first attention's check (its matmuls, the unfused path, the fused
     * kernels of head dim 20, the reductions): its pipelines created
     * together before the judged pass, which creates none; the same on the
     * calling thread alone (VKMHA_PIPELINE_THREADS=1,
     * VKMHA_CONTEXT_SINGLE_THREAD). */
    static const char *const how[3] = {"", " with VKMHA_PIPELINE_THREADS=1",
                                       " with VKMHA_CONTEXT_SINGLE_THREAD"};
    uint32_t first = 0;
    for (int mode = 0; mode < 3; mode++) {
        if (mode == 1)
            setenv("VKMHA_PIPELINE_THREADS", "1", 1);
        gpu = create(mode == 2 ? VKMHA_CONTEXT_SINGLE_THREAD : 0, 0, &w, &st);
        unsigned together = 0, judging = 1;
        double ms = 0;
        ok = gpu && attention_right(gpu, ref, &rng, 20, "first attention", &st);
        const char *at = strstr(w.pipelines, "self-check: ");
        ok = ok && !vkmha_context_get_info(gpu, &info) && at &&
             sscanf(at, "self-check: %u pipelines created together in %lf ms, %u while judging",
                    &together, &ms, &judging) == 3 &&
             together >= 3 && judging == 0 && info.pipelines_created >= together &&
             (!mode || together == first) && info.disabled_paths == 0 &&
             ops_right(gpu, ref, &rng, how[mode][0] ? how[mode] : "threads");
        if (!mode)
            first = together;
        t_report(ok, "self-check%s: %u pipelines created together in %.1f ms before the judged "
                     "pass, %u while judging",
                 how[mode], together, ms, judging);
        vkmha_context_destroy(gpu);
        unsetenv("VKMHA_PIPELINE_THREADS");
    }

    /* vkmha_path_name: each bit's name, NULL for anything else. */
    ok = vkmha_path_name(0) == NULL && vkmha_path_name(VKMHA_PATH_SUBGROUP | 1u) == NULL &&
         vkmha_path_name(1u << 31) == NULL;
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++)
        ok = ok && vkmha_path_name(paths[p].bit) &&
             strcmp(vkmha_path_name(paths[p].bit), paths[p].name) == 0;
    t_report(ok, "vkmha_path_name names each path as VKMHA_DISABLE_PATHS does, NULL otherwise");

    /* Each path in use, made wrong: disabled with a warning naming it (by
     * the first call needing it), and the ops still right through its
     * fallback. */
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        if (!in_use(&base, kernels, n_kernels, p)) {
            t_report(true, "path %s: not used on this device (nothing to check)", paths[p].name);
            continue;
        }
        gpu = create(0, paths[p].bit, &w, &st);
        char tag[64];
        snprintf(tag, sizeof tag, "%s broken", paths[p].name);
        ok = gpu && ops_right(gpu, ref, &rng, tag) && !vkmha_context_get_info(gpu, &info) &&
             info.disabled_paths == paths[p].bit && t_has_word(w.text, paths[p].name) &&
             strstr(w.text, "disabled");
        if (!ok)
            t_diag("%s: %s, disabled_paths 0x%x, warnings: %s", tag, vkmha_status_string(st),
                   gpu ? info.disabled_paths : 0, w.text);
        if (gpu && paths[p].bit == VKMHA_PATH_SUBGROUP)
            ok = ok && !info.subgroup_ops_used;
        if (gpu && paths[p].bit == VKMHA_PATH_NATIVE_16BIT)
            ok = ok && !info.native_16bit_storage;
        if (gpu && paths[p].bit == VKMHA_PATH_SPARSE) /* tensors past it refused */
            ok = ok && !info.sparse_tensors &&
                 info.max_tensor_bytes == info.device.max_allocation_size;
        t_report(ok, "path %s made wrong: disabled with a warning naming it, the ops right "
                     "through its fallback",
                 paths[p].name);
        if (gpu)
            t_report_validation(gpu);
        vkmha_context_destroy(gpu);
    }

    /* VKMHA_DISABLE_PATHS: unchecked, and a bad name refused. */
    setenv("VKMHA_DISABLE_PATHS", "subgroup,fused_cpu_d64,sparse", 1);
    gpu = create(VKMHA_CONTEXT_NO_SELF_CHECK, 0, &w, &st);
    ok = gpu && !vkmha_context_get_info(gpu, &info) &&
         info.disabled_paths ==
             (VKMHA_PATH_SUBGROUP | VKMHA_PATH_FUSED_CPU_D64 | VKMHA_PATH_SPARSE) &&
         !info.subgroup_ops_used && !info.sparse_tensors && info.self_check_us == 0 &&
         ops_right(gpu, ref, &rng, "env");
    t_report(ok, "VKMHA_DISABLE_PATHS=subgroup,fused_cpu_d64,sparse disables all three "
                 "(unchecked; VKMHA_CONTEXT_NO_SELF_CHECK skips the check)");
    vkmha_context_destroy(gpu);
    setenv("VKMHA_DISABLE_PATHS", "subgroup,warp_drive", 1);
    gpu = create(0, 0, &w, &st);
    t_report(!gpu && st == VKMHA_ERROR_INVALID_ARGUMENT &&
                 strstr(vkmha_context_last_error(NULL), "warp_drive"),
             "VKMHA_DISABLE_PATHS with an unknown name: %s (%s)", vkmha_status_string(st),
             vkmha_context_last_error(NULL));
    unsetenv("VKMHA_DISABLE_PATHS");

    /* No path left: a wrong unfused attention fails the first attention
     * and every later one, naming the call; the other ops still work. */
    gpu = create(0, 1u << 31, &w, &st);
    vkmha_status later = VKMHA_SUCCESS;
    char first_error[512] = "";
    ok = gpu && !attention_right(gpu, ref, &rng, 20, "unfused broken", &st) &&
         st == VKMHA_ERROR_UNSUPPORTED &&
         strstr(vkmha_context_last_error(gpu), "vkmha_attention: self-check") &&
         strstr(vkmha_context_last_error(gpu), "no attention path");
    if (gpu)
        snprintf(first_error, sizeof first_error, "%s", vkmha_context_last_error(gpu));
    ok = ok && !attention_right(gpu, ref, &rng, 60, "unfused broken", &later) &&
         later == VKMHA_ERROR_UNSUPPORTED &&
         strstr(vkmha_context_last_error(gpu), "no attention path");
    t_report(ok, "a wrong unfused attention fails every attention call: %s (%s), then %s (%s)",
             vkmha_status_string(st), first_error, vkmha_status_string(later),
             gpu ? vkmha_context_last_error(gpu) : "no context");
    if (gpu) {
        const uint32_t n = 100;
        float *x = t_random(&rng, n, -4, 4), *y = t_alloc(n), *yr = t_alloc(n);
        const vkmha_softmax_desc sd = {.len_q = 4, .len_k = 25};
        t_report(!vkmha_softmax(gpu, &sd, x, NULL, y) && !vkmha_softmax(ref, &sd, x, NULL, yr) &&
                     t_close("unfused broken", "softmax", y, yr, n, 1e-7, 1e-4),
                 "the other ops still work there");
        free(x), free(y), free(yr);
        t_report_validation(gpu);
    }
    vkmha_context_destroy(gpu);
    vkmha_context_destroy(ref);
    return t_finish();
}
