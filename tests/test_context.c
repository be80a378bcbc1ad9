/* Contexts and device queries: vkmha_enumerate_devices, vkmha_context_create
 * (NULL desc, automatic vs explicit device, flags), vkmha_context_get_info,
 * vkmha_version, two contexts at once, the log callback and the last error,
 * and a context whose buffers grow and shrink between calls.
 *
 * Tolerances: softmax outputs are probabilities in [0, 1]; fp32 against the
 * double reference is compared with atol 1e-6, rtol 1e-5. The matmul of the
 * two-context case uses test_matmul's bound, atol 2e-6 * sqrt(k), rtol 1e-5. */
#include "util.h"

#define SM_ATOL 1e-6
#define SM_RTOL 1e-5

/* ---- helpers ------------------------------------------------------------- */

/* strnlen, which C11 lacks: the length of a fixed-size name field. */
static size_t name_len(const char *s, size_t cap)
{
    size_t n = 0;
    while (n < cap && s[n])
        n++;
    return n;
}

/* Softmax of x on `ctx` and on the reference context; returns whether they
 * agree. */
static bool softmax_matches(vkmha_context *ctx, vkmha_context *ref, const char *name,
                            const vkmha_softmax_desc *d, const float *x,
                            const vkmha_mask *mask)
{
    size_t n = (size_t)(d->batch ? d->batch : 1) * (d->heads ? d->heads : 1) * d->len_q *
               d->len_k;
    float *got = t_alloc(n), *want = t_alloc(n);
    bool ok = true;
    T_EXPECT_STATUS(vkmha_softmax(ref, d, x, mask, want), VKMHA_SUCCESS, ok);
    vkmha_status st = vkmha_softmax(ctx, d, x, mask, got);
    T_EXPECT_STATUS(st, VKMHA_SUCCESS, ok);
    if (st != VKMHA_SUCCESS)
        t_diag("%s: %s", name, vkmha_context_last_error(ctx));
    if (ok)
        ok = t_close(name, "y", got, want, n, SM_ATOL, SM_RTOL);
    free(got);
    free(want);
    return ok;
}

/* A random [batch][len] key-padding mask whose first key is always kept, so
 * that no row is fully masked by padding alone. */
static uint8_t *key_padding(t_rng *rng, uint32_t batch, uint32_t len_k)
{
    uint8_t *m = t_random_mask(rng, (size_t)batch * len_k, 0.3);
    for (uint32_t b = 0; b < batch; b++)
        m[(size_t)b * len_k] = 1;
    return m;
}

static bool matmul_matches(vkmha_context *ctx, vkmha_context *ref, const char *name,
                           t_rng *rng, uint32_t m, uint32_t n, uint32_t k)
{
    vkmha_matmul_desc d = {0};
    d.m = m;
    d.n = n;
    d.k = k;
    d.op_b = VKMHA_OP_T;
    float *a = t_random(rng, (size_t)m * k, -1, 1), *b = t_random(rng, (size_t)n * k, -1, 1);
    float *bias = t_random(rng, n, -1, 1);
    float *got = t_alloc((size_t)m * n), *want = t_alloc((size_t)m * n);
    bool ok = true;
    T_EXPECT_STATUS(vkmha_matmul(ref, &d, a, b, bias, want), VKMHA_SUCCESS, ok);
    vkmha_status st = vkmha_matmul(ctx, &d, a, b, bias, got);
    T_EXPECT_STATUS(st, VKMHA_SUCCESS, ok);
    if (st != VKMHA_SUCCESS)
        t_diag("%s: %s", name, vkmha_context_last_error(ctx));
    if (ok)
        ok = t_close(name, "c", got, want, (size_t)m * n, 2e-6 * sqrt((double)k), 1e-5);
    free(a);
    free(b);
    free(bias);
    free(got);
    free(want);
    return ok;
}

/* A matmul kernel's tile: the shared variant (shader "matmul") has BM x BN
 * outputs of TM x TN per invocation, WG = (BM / TM) * (BN / TN) and
 * (BM + BN) * BK floats of shared memory; the register one ("matmul_cpu")
 * TM x TN per invocation, TN a multiple of 4, no shared memory. */
static bool tile_sane(const vkmha_kernel_info *k)
{
    const uint32_t wg = kernel_param(k, "WG"), tm = kernel_param(k, "TM"),
                   tn = kernel_param(k, "TN");
    if (!strcmp(k->shader, "matmul_cpu")) {
        if (!tm || !tn || tn % 4 || tm * tn > 64 || k->shared_bytes != 0) {
            t_diag("%s: register tile TM %u TN %u, %u bytes shared", k->name, tm, tn,
                   k->shared_bytes);
            return false;
        }
        t_diag("%s: register variant, %u invocations of %ux%u", k->name, wg, tm, tn);
        return true;
    }
    const uint32_t bm = kernel_param(k, "BM"), bn = kernel_param(k, "BN"),
                   bk = kernel_param(k, "BK");
    if (strcmp(k->shader, "matmul") || bm == UINT32_MAX || bn == UINT32_MAX ||
        bk == UINT32_MAX || !tm || !tn || !bk || bm % tm || bn % tn) {
        t_diag("%s: shader %s, BM %u BN %u BK %u TM %u TN %u: a parameter missing or zero, "
               "or a tile not divisible", k->name, k->shader, bm, bn, bk, tm, tn);
        return false;
    }
    bool ok = true;
    if (wg != (bm / tm) * (bn / tn) || k->shared_bytes != (bm + bn) * bk * 4) {
        t_diag("%s: WG %u, (BM / TM) * (BN / TN) = %u; %u bytes shared, (BM + BN) * BK * 4 "
               "= %u", k->name, wg, (bm / tm) * (bn / tn), k->shared_bytes, (bm + bn) * bk * 4);
        ok = false;
    }
    t_diag("%s: %ux%u (k %u), %ux%u per invocation, %u invocations", k->name, bm, bn, bk, tm,
           tn, wg);
    return ok;
}

/* Every row of a Vulkan context's kernel list is well-formed: a unique name,
 * one of the five ops, and for a kernel the device runs a shader, a
 * workgroup (its "WG" parameter) and shared memory within the device's
 * limits; for one it does not, nothing else. The matmul tiles are
 * consistent (tile_sane) and the row kernels run (softmax, layernorm). */
static bool kernels_sane(vkmha_context *ctx, const vkmha_device_info *dev)
{
    vkmha_kernel_info k[64];
    uint32_t n = 64;
    bool ok = true;
    T_EXPECT_STATUS(vkmha_context_get_kernels(ctx, &n, k), VKMHA_SUCCESS, ok);
    if (!ok || n == 0 || n > 64) {
        t_diag("%u kernels", n);
        return false;
    }
    static const char *const ops[] = {"matmul", "softmax", "heads", "layernorm", "attention"};
    for (uint32_t i = 0; i < n; i++) {
        const vkmha_kernel_info *r = &k[i];
        bool known_op = false, row = true;
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
            known_op = known_op || !strcmp(r->op, ops[o]);
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(k[j].name, r->name))
                row = false;
        if (!r->name[0] || !known_op || !row) {
            t_diag("kernel %u: name \"%s\" (empty or repeated), op \"%s\"", i, r->name, r->op);
            row = false;
        } else if (r->available) {
            uint32_t named = 0;
            for (uint32_t p = 0; p < r->param_count && p < VKMHA_KERNEL_MAX_PARAMS; p++)
                named += r->params[p].name[0] != '\0';
            row = r->shader[0] && r->param_count >= 1 &&
                  r->param_count <= VKMHA_KERNEL_MAX_PARAMS && named == r->param_count &&
                  kernel_param(r, "WG") == r->workgroup_size && r->workgroup_size >= 1 &&
                  r->workgroup_size <= dev->max_workgroup_invocations &&
                  r->shared_bytes <= dev->max_shared_memory;
            if (!row)
                t_diag("%s: shader \"%s\", %u parameters (%u named), WG %u, workgroup %u, "
                       "%u bytes shared (device: %u invocations, %u bytes)", r->name, r->shader,
                       r->param_count, named, kernel_param(r, "WG"), r->workgroup_size,
                       r->shared_bytes, dev->max_workgroup_invocations, dev->max_shared_memory);
        } else if (r->shader[0] || r->workgroup_size || r->shared_bytes || r->param_count) {
            t_diag("%s: not available, yet shader \"%s\", workgroup %u, %u bytes shared, %u "
                   "parameters", r->name, r->shader, r->workgroup_size, r->shared_bytes,
                   r->param_count);
            row = false;
        }
        ok = row && ok;
    }
    static const char *const needed[] = {"matmul_large", "matmul_large_vec", "matmul_small",
                                         "matmul_small_vec", "softmax", "layernorm", "heads"};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++) {
        vkmha_kernel_info r;
        if (!kernel_find(ctx, needed[i], &r) || !r.available) {
            t_diag("no available kernel \"%s\"", needed[i]);
            ok = false;
        } else if (!strncmp(needed[i], "matmul", 6)) {
            ok = tile_sane(&r) && ok;
        }
    }
    return ok;
}

typedef struct log_record {
    int calls;        /* every message */
    int errors;       /* level ERROR, status INVALID_ARGUMENT */
    vkmha_log_level level;
    vkmha_status status;
    char msg[1024];   /* the last INVALID_ARGUMENT message */
} log_record;

static void my_log(void *user, vkmha_log_level level, vkmha_status status, const char *msg)
{
    log_record *r = (log_record *)user;
    r->calls++;
    if (status != VKMHA_ERROR_INVALID_ARGUMENT)
        return; /* e.g. a validation layer message, counted by the context */
    r->errors++;
    r->level = level;
    r->status = status;
    snprintf(r->msg, sizeof r->msg, "%s", msg);
}

/* ---- cases --------------------------------------------------------------- */

/* Returns the device list (count in *n), or NULL. */
static vkmha_device_info *enumerate_cases(uint32_t *n_out)
{
    uint32_t n = 0;
    bool ok = true;
    T_EXPECT_STATUS(vkmha_enumerate_devices(&n, NULL), VKMHA_SUCCESS, ok);
    t_report(ok && n >= 1, "enumerate_devices: count query (*count 0, out NULL) finds %u "
                           "device(s)", n);
    *n_out = n;
    if (n == 0)
        return NULL;

    /* Fill, with one extra entry that must stay untouched. */
    vkmha_device_info *devs = (vkmha_device_info *)malloc((n + 1) * sizeof *devs);
    if (!devs)
        exit(2);
    memset(devs, 0xA5, (n + 1) * sizeof *devs);
    vkmha_device_info guard;
    memset(&guard, 0xA5, sizeof guard);
    uint32_t cap = n;
    ok = true;
    T_EXPECT_STATUS(vkmha_enumerate_devices(&cap, devs), VKMHA_SUCCESS, ok);
    if (cap != n) {
        t_diag("the fill call reports %u devices, the count query %u", cap, n);
        ok = false;
    }
    bool compute = false;
    for (uint32_t i = 0; ok && i < n; i++) {
        size_t len = name_len(devs[i].name, sizeof devs[i].name);
        if (len == 0 || len == sizeof devs[i].name) {
            t_diag("device %u: name empty or not terminated", i);
            ok = false;
            break;
        }
        t_diag("device %u: %s, type %d, api %u.%u, subgroup %u, compute queue %d", i,
               devs[i].name, (int)devs[i].type, devs[i].api_version >> 22,
               (devs[i].api_version >> 12) & 0x3ff, devs[i].subgroup_size,
               devs[i].has_compute_queue);
        compute |= devs[i].has_compute_queue;
    }
    if (ok && !compute) {
        t_diag("no device has a compute queue");
        ok = false;
    }
    if (memcmp(&devs[n], &guard, sizeof guard) != 0) {
        t_diag("the entry past *count was written");
        ok = false;
    }
    t_report(ok, "enumerate_devices: fills %u entries, names non-empty, a compute queue", n);

    /* A capacity of 1 fills one entry and still reports every device. */
    vkmha_device_info two[2];
    memset(two, 0xA5, sizeof two);
    cap = 1;
    ok = true;
    T_EXPECT_STATUS(vkmha_enumerate_devices(&cap, two), VKMHA_SUCCESS, ok);
    if (cap != n || strcmp(two[0].name, devs[0].name) != 0 ||
        memcmp(&two[1], &guard, sizeof guard) != 0) {
        t_diag("capacity 1: count %u (want %u), name \"%.40s\", second entry %s", cap, n,
               two[0].name, memcmp(&two[1], &guard, sizeof guard) ? "written" : "untouched");
        ok = false;
    }
    t_report(ok, "enumerate_devices: capacity 1 fills one entry and returns the full count");

    ok = true;
    cap = 3;
    T_EXPECT_STATUS(vkmha_enumerate_devices(NULL, NULL), VKMHA_ERROR_INVALID_ARGUMENT, ok);
    T_EXPECT_STATUS(vkmha_enumerate_devices(&cap, NULL), VKMHA_ERROR_INVALID_ARGUMENT, ok);
    t_report(ok, "enumerate_devices: NULL count, or out NULL with *count > 0, is invalid");
    return devs;
}

static void null_desc_case(vkmha_context *ref)
{
    vkmha_context *ctx = NULL;
    bool ok = true;
    vkmha_status st = vkmha_context_create(NULL, &ctx);
    T_EXPECT_STATUS(st, VKMHA_SUCCESS, ok);
    if (st == VKMHA_SUCCESS) {
        vkmha_context_info info;
        T_EXPECT_STATUS(vkmha_context_get_info(ctx, &info), VKMHA_SUCCESS, ok);
        if (ok && (info.backend != VKMHA_BACKEND_VULKAN || info.validation_enabled ||
                   info.device.name[0] == '\0')) {
            t_diag("desc NULL: backend %d, validation %d, name \"%s\"", (int)info.backend,
                   info.validation_enabled, info.device.name);
            ok = false;
        }
        const float x[4] = {0, 1, 2, 3};
        vkmha_softmax_desc d = {0};
        d.len_q = 1;
        d.len_k = 4;
        ok = softmax_matches(ctx, ref, "desc NULL context", &d, x, NULL) && ok;
    }
    vkmha_context_destroy(ctx);
    t_report(ok, "context_create(NULL desc): Vulkan without validation, works, destroys");
}

static void device_choice_case(const vkmha_device_info *devs, uint32_t n_devs)
{
    vkmha_context_desc d = {0};
    vkmha_context *automatic = NULL, *chosen = NULL;
    vkmha_context_info ia, ic;
    bool ok = true;
    d.backend = VKMHA_BACKEND_VULKAN;
    T_EXPECT_STATUS(vkmha_context_create(&d, &automatic), VKMHA_SUCCESS, ok);
    if (ok)
        T_EXPECT_STATUS(vkmha_context_get_info(automatic, &ia), VKMHA_SUCCESS, ok);
    if (ok) {
        /* The automatic choice is index 0 when there is one device; in every
         * case asking for its index explicitly gives the same device. */
        if (n_devs == 1 && ia.device_index != 0) {
            t_diag("one device but the automatic choice has index %u", ia.device_index);
            ok = false;
        }
        d.use_device_index = true;
        d.device_index = ia.device_index;
        T_EXPECT_STATUS(vkmha_context_create(&d, &chosen), VKMHA_SUCCESS, ok);
    }
    if (ok)
        T_EXPECT_STATUS(vkmha_context_get_info(chosen, &ic), VKMHA_SUCCESS, ok);
    if (ok && (strcmp(ia.device.name, ic.device.name) != 0 ||
               ia.device_index != ic.device_index ||
               memcmp(ia.device.device_uuid, ic.device.device_uuid, 16) != 0)) {
        t_diag("automatic: \"%s\" (index %u), use_device_index %u: \"%s\" (index %u)",
               ia.device.name, ia.device_index, d.device_index, ic.device.name,
               ic.device_index);
        ok = false;
    }
    if (ok && devs && (ia.device_index >= n_devs ||
                       strcmp(devs[ia.device_index].name, ia.device.name) != 0)) {
        t_diag("the context's device_index %u does not name \"%s\" in enumerate_devices",
               ia.device_index, ia.device.name);
        ok = false;
    }
    t_report(ok, "automatic device choice and use_device_index %u give the same device (%s)",
             d.device_index, ok ? ia.device.name : "?");
    vkmha_context_destroy(chosen);
    vkmha_context_destroy(automatic);
}

static void info_cases(vkmha_context *gpu, vkmha_context *ref)
{
    vkmha_context_info info;
    bool ok = true;
    T_EXPECT_STATUS(vkmha_context_get_info(gpu, &info), VKMHA_SUCCESS, ok);
    const vkmha_device_info *dev = &info.device;
    if (ok) {
        size_t len = name_len(dev->name, sizeof dev->name);
        if (info.backend != VKMHA_BACKEND_VULKAN || len == 0 || len == sizeof dev->name ||
            !dev->has_compute_queue || dev->type > VKMHA_DEVICE_TYPE_CPU) {
            t_diag("backend %d, name \"%.40s\", compute %d, type %d", (int)info.backend,
                   dev->name, dev->has_compute_queue, (int)dev->type);
            ok = false;
        }
    }
    t_report(ok, "get_info: Vulkan backend, device name non-empty, compute queue");

    bool lim = ok;
    if (lim && (dev->subgroup_size < 1 || dev->max_workgroup_invocations < 128 ||
                dev->max_storage_buffer_range == 0 || dev->max_workgroup_size[0] == 0 ||
                dev->max_workgroup_count[0] == 0 || dev->max_shared_memory == 0)) {
        t_diag("subgroup %u, invocations %u, storage range %llu, size[0] %u, count[0] %u, "
               "shared %u",
               dev->subgroup_size, dev->max_workgroup_invocations,
               (unsigned long long)dev->max_storage_buffer_range, dev->max_workgroup_size[0],
               dev->max_workgroup_count[0], dev->max_shared_memory);
        lim = false;
    }
    t_report(lim, "get_info: subgroup_size >= 1, max_workgroup_invocations >= 128, "
                  "max_storage_buffer_range > 0");

    t_report(ok && kernels_sane(gpu, dev),
             "get_kernels: unique names, known ops, workgroups and shared memory within the "
             "limits, consistent matmul tiles");

    bool v = ok && info.validation_enabled == t_validation() &&
             (!info.subgroup_ops_used || dev->subgroup_arithmetic);
    if (ok && !v)
        t_diag("validation_enabled %d, subgroup_ops_used %d, subgroup_arithmetic %d",
               info.validation_enabled, info.subgroup_ops_used, dev->subgroup_arithmetic);
    t_report(v, "get_info: validation_enabled as t_context asked, subgroup ops only if supported");

    vkmha_context_info ri;
    memset(&ri, 0x5A, sizeof ri);
    ok = true;
    T_EXPECT_STATUS(vkmha_context_get_info(ref, &ri), VKMHA_SUCCESS, ok);
    if (ok && (strcmp(ri.device.name, "reference") != 0 ||
               ri.backend != VKMHA_BACKEND_REFERENCE || ri.validation_enabled ||
               ri.subgroup_ops_used || ri.validation_messages != 0 ||
               ri.device.max_workgroup_invocations != 0)) {
        t_diag("reference info: name \"%.40s\", backend %d, validation %d, subgroup %d",
               ri.device.name, (int)ri.backend, ri.validation_enabled, ri.subgroup_ops_used);
        ok = false;
    }
    t_report(ok, "get_info: reference context is named \"reference\", backend REFERENCE, "
                 "the rest zeroed");

    ok = true;
    T_EXPECT_STATUS(vkmha_context_get_info(gpu, NULL), VKMHA_ERROR_INVALID_ARGUMENT, ok);
    t_report(ok, "get_info: NULL out is invalid");
}

static void no_subgroup_cases(vkmha_context *nosub, vkmha_context *ref, t_rng *rng)
{
    vkmha_context_info info;
    bool ok = true;
    T_EXPECT_STATUS(vkmha_context_get_info(nosub, &info), VKMHA_SUCCESS, ok);
    t_report(ok && !info.subgroup_ops_used,
             "NO_SUBGROUP_OPS: subgroup_ops_used is false (device supports them: %d)",
             info.device.subgroup_arithmetic);

    vkmha_softmax_desc d = {0};
    d.len_q = 3;
    d.len_k = 300;
    float *x = t_random(rng, 3 * 300, -8, 8);
    t_report(softmax_matches(nosub, ref, "NO_SUBGROUP_OPS softmax 3x300", &d, x, NULL),
             "NO_SUBGROUP_OPS: softmax 3x300 equals the reference");
    free(x);

    /* Masked: key padding, causal, a full mask and a per-batch bias. */
    memset(&d, 0, sizeof d);
    d.batch = 2;
    d.heads = 3;
    d.len_q = 5;
    d.len_k = 300;
    d.scale = 0.5f;
    size_t n = (size_t)2 * 3 * 5 * 300;
    x = t_random(rng, n, -4, 4);
    uint8_t *pad = key_padding(rng, 2, 300);
    uint8_t *full = t_random_mask(rng, (size_t)2 * 5 * 300, 0.2);
    float *bias = t_random(rng, (size_t)2 * 5 * 300, -1, 1);
    vkmha_mask m = {0};
    m.kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL | VKMHA_MASK_FULL | VKMHA_MASK_BIAS;
    m.key_padding = pad;
    m.full = full;
    m.bias = bias;
    m.bias_batch = 2;
    m.bias_heads = 1;
    t_report(softmax_matches(nosub, ref, "NO_SUBGROUP_OPS masked softmax", &d, x, &m),
             "NO_SUBGROUP_OPS: masked softmax 2x3x5x300 (padding, causal, full, bias) equals "
             "the reference");
    free(x);
    free(pad);
    free(full);
    free(bias);
}

static void two_contexts_case(vkmha_context *a, vkmha_context *b, vkmha_context *ref,
                              t_rng *rng)
{
    vkmha_softmax_desc d = {0};
    d.batch = 2;
    d.len_q = 7;
    d.len_k = 33;
    float *x = t_random(rng, 2 * 7 * 33, -3, 3);
    bool ok = softmax_matches(a, ref, "first context softmax", &d, x, NULL);
    ok = matmul_matches(b, ref, "second context matmul", rng, 19, 23, 40) && ok;
    ok = softmax_matches(b, ref, "second context softmax", &d, x, NULL) && ok;
    ok = matmul_matches(a, ref, "first context matmul", rng, 33, 9, 70) && ok;
    t_report(ok, "two Vulkan contexts alive at once, used in turn, both correct");
    free(x);
}

/* The logger gets the error of a failing call with the user pointer; the
 * last error is "" after a successful call that follows. */
static void log_cases(vkmha_backend backend, vkmha_context *ref, log_record *rec,
                      vkmha_context **keep)
{
    const char *bname = backend == VKMHA_BACKEND_REFERENCE ? "reference" : "vulkan";
    vkmha_context_desc cd = {0};
    vkmha_context *ctx = NULL;
    cd.backend = backend;
    cd.enable_validation = backend == VKMHA_BACKEND_VULKAN && t_validation();
    cd.log = my_log;
    cd.log_user = rec;
    memset(rec, 0, sizeof *rec);
    bool ok = true;
    T_EXPECT_STATUS(vkmha_context_create(&cd, &ctx), VKMHA_SUCCESS, ok);
    if (!ok) {
        t_report(false, "%s: log callback receives the error message", bname);
        t_report(false, "%s: last_error is \"\" after a success that follows a failure", bname);
        *keep = NULL;
        return;
    }
    const float x[6] = {1, 2, 3, 4, 5, 6};
    float y[6];
    vkmha_softmax_desc d = {0};
    d.len_q = 2;
    d.len_k = 0; /* bad */
    int before = rec->errors;
    T_EXPECT_STATUS(vkmha_softmax(ctx, &d, x, NULL, y), VKMHA_ERROR_INVALID_ARGUMENT, ok);
    const char *le = vkmha_context_last_error(ctx);
    if (rec->errors != before + 1) {
        t_diag("%s: the logger got %d error messages, expected 1", bname, rec->errors - before);
        ok = false;
    } else if (rec->level != VKMHA_LOG_ERROR || strcmp(rec->msg, le) != 0 ||
               !strstr(rec->msg, "desc->len_k")) {
        t_diag("%s: logged level %d \"%s\", last error \"%s\"", bname, (int)rec->level,
               rec->msg, le);
        ok = false;
    }
    t_report(ok, "%s: log callback (own function and user pointer) receives the error "
                 "message of a failing call",
             bname);

    ok = true;
    d.len_k = 3;
    bool had = vkmha_context_last_error(ctx)[0] != '\0';
    ok = softmax_matches(ctx, ref, "softmax after a failure", &d, x, NULL);
    if (!had || vkmha_context_last_error(ctx)[0] != '\0') {
        t_diag("%s: last error before \"%s\", after the success \"%s\"", bname,
               had ? "(set)" : "", vkmha_context_last_error(ctx));
        ok = false;
    }
    if (rec->errors != before + 1) {
        t_diag("%s: a successful call logged an error", bname);
        ok = false;
    }
    t_report(ok, "%s: last_error is \"\" after a success that follows a failure", bname);
    *keep = ctx;
}

/* A context's buffers grow for a large call and are reused for small ones. */
static void growth_cases(vkmha_context *gpu, vkmha_context *ref, t_rng *rng)
{
    vkmha_softmax_desc small = {0}, large = {0};
    small.len_q = 2;
    small.len_k = 3;
    large.batch = 8;
    large.len_q = 129;
    large.len_k = 300;
    float *xs = t_random(rng, 6, -2, 2), *xs2 = t_random(rng, 6, -2, 2);
    size_t nl = (size_t)8 * 129 * 300;
    float *xl = t_random(rng, nl, -6, 6);
    uint8_t *pad = key_padding(rng, 8, 300);
    vkmha_mask m = {0};
    m.kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL;
    m.key_padding = pad;

    t_report(softmax_matches(gpu, ref, "growth: small 2x3", &small, xs, NULL),
             "growing buffers: small softmax 2x3");
    t_report(softmax_matches(gpu, ref, "growth: large 8x129x300", &large, xl, &m),
             "growing buffers: large masked softmax 8x129x300");
    t_report(softmax_matches(gpu, ref, "growth: small again", &small, xs2, NULL),
             "growing buffers: small softmax 2x3 again");
    t_report(softmax_matches(gpu, ref, "growth: large again, unmasked", &large, xl, NULL),
             "growing buffers: large softmax 8x129x300 again, unmasked");
    free(xs);
    free(xs2);
    free(xl);
    free(pad);
}

/* Attention scores [1][64][L][L] just above this device's
 * maxStorageBufferRange, while q, k, v and out stay tiny (d_k = d_v = 1).
 * The unfused path runs as calls of heads whose scores fit and matches the
 * reference; the fused path (the default) never stores the scores: it
 * succeeds and matches the reference. The layer likewise, in calls of query
 * rows of its one batch entry, and the context still computes correctly
 * afterwards. */
static void limit_cases(vkmha_context *gpu, vkmha_context *ref, t_rng *rng)
{
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    const uint32_t heads = 64;
    uint64_t range = info.device.max_storage_buffer_range;
    uint32_t len = (uint32_t)sqrt((double)range / (4.0 * heads)) + 1;
    while ((uint64_t)heads * len * len * 4 <= range)
        len++;
    size_t n = (size_t)heads * len;
    float *q = t_random(rng, n, -1, 1), *out = t_alloc(n);
    for (size_t i = 0; i < n; i++)
        out[i] = 12345.0f;
    vkmha_attention_desc d = {1, heads, 0, len, len, 1, 1, 0, VKMHA_ATTENTION_PATH_UNFUSED, 0, 0};
    float *want = t_alloc(n);
    vkmha_status st = vkmha_attention(gpu, &d, q, q, q, NULL, out, NULL);
    vkmha_status rst = vkmha_attention(ref, &d, q, q, q, NULL, want, NULL);
    t_report(st == VKMHA_SUCCESS && rst == VKMHA_SUCCESS &&
                 t_close("unfused above limit", "out", out, want, n, 1e-5, 1e-4),
             "unfused attention, scores of %llu bytes above maxStorageBufferRange (%llu): "
             "runs in calls whose scores fit: %s",
             (unsigned long long)heads * len * len * 4, (unsigned long long)range,
             vkmha_status_string(st));
    d.path = VKMHA_ATTENTION_PATH_AUTO;
    for (size_t i = 0; i < n; i++)
        out[i] = 12345.0f;
    st = vkmha_attention(gpu, &d, q, q, q, NULL, out, NULL);
    t_report(st == VKMHA_SUCCESS && rst == VKMHA_SUCCESS && t_close("fused above limit", "out", out, want, n, 1e-5, 1e-4),
             "fused attention (default) with the same shape runs: %s", vkmha_status_string(st));
    free(want);

    /* The same limit through the layer. */
    vkmha_mha_desc md = {0};
    md.d_model = heads;
    md.n_head = heads; /* d_k = d_v = 1 */
    float *w = t_random(rng, (size_t)heads * heads, -0.1f, 0.1f);
    md.w_q = md.w_k = md.w_v = md.w_o = w;
    vkmha_mha *mha = NULL;
    st = vkmha_mha_create(gpu, &md, &mha);
    float *x = t_random(rng, (size_t)len * heads, -1, 1), *y = t_alloc((size_t)len * heads);
    vkmha_mha *mr = NULL;
    rst = vkmha_mha_create(ref, &md, &mr);
    float *yr = t_alloc((size_t)len * heads);
    vkmha_mha_io io = {1, len, 0, x, x, x, NULL, yr, NULL, VKMHA_ATTENTION_PATH_UNFUSED, 0, 0, NULL, 0, NULL, NULL};
    if (rst == VKMHA_SUCCESS)
        rst = vkmha_mha_forward(mr, &io);
    io.out = y;
    if (st == VKMHA_SUCCESS)
        st = vkmha_mha_forward(mha, &io);
    t_report(st == VKMHA_SUCCESS && rst == VKMHA_SUCCESS &&
                 t_close("unfused layer above limit", "out", y, yr, (size_t)len * heads,
                         T_LAYER_ATOL, T_LAYER_RTOL),
             "unfused mha forward with scores above maxStorageBufferRange: runs in calls of "
             "query rows whose scores fit: %s",
             vkmha_status_string(st));
    io.attention_path = VKMHA_ATTENTION_PATH_AUTO;
    st = mha ? vkmha_mha_forward(mha, &io) : st;
    t_report(st == VKMHA_SUCCESS && t_close("fused layer above limit", "out", y, yr,
                                            (size_t)len * heads, T_LAYER_ATOL, T_LAYER_RTOL),
             "the same forward on the fused path (default) runs: %s", vkmha_status_string(st));
    vkmha_mha_destroy(mha);
    vkmha_mha_destroy(mr);
    free(yr);

    vkmha_softmax_desc sd = {2, 3, 5, 129, 0.5f, 0};
    float *sx = t_random(rng, (size_t)2 * 3 * 5 * 129, -3, 3);
    t_report(softmax_matches(gpu, ref, "softmax after these calls", &sd, sx, NULL),
             "the context still works after these calls");
    free(q), free(out), free(w), free(x), free(y), free(sx);
}

/* Records the last ERROR-level message, whatever its status. */
static void error_log(void *user, vkmha_log_level level, vkmha_status status, const char *msg)
{
    (void)status;
    if (level == VKMHA_LOG_ERROR)
        snprintf((char *)user, 512, "%s", msg);
}

/* desc->matmul_tile: a malformed tile is INVALID_ARGUMENT, one beyond the
 * device's limits UNSUPPORTED; both name the argument and leave *out NULL,
 * and a context created next works. */
static void tile_override_cases(vkmha_context *ref, t_rng *rng)
{
    static const struct {
        const char *name;
        vkmha_tile_config tile;
        vkmha_status want;
    } bad[] = {
        {"register tm 0", {8, 8, 4, 0, 8, 0, VKMHA_MATMUL_VARIANT_REGISTER},
         VKMHA_ERROR_INVALID_ARGUMENT},
        {"register bn != tn", {8, 16, 4, 1, 8, 0, VKMHA_MATMUL_VARIANT_REGISTER},
         VKMHA_ERROR_INVALID_ARGUMENT},
        {"shared bm % tm", {30, 32, 16, 4, 4, 0, VKMHA_MATMUL_VARIANT_SHARED},
         VKMHA_ERROR_INVALID_ARGUMENT},
        {"variant 7", {32, 32, 16, 4, 4, 0, (vkmha_matmul_variant)7},
         VKMHA_ERROR_INVALID_ARGUMENT},
        {"shared, 4096 invocations", {256, 256, 4, 4, 4, 0, VKMHA_MATMUL_VARIANT_SHARED},
         VKMHA_ERROR_UNSUPPORTED},
        {"register, 2^20 invocations",
         {1u << 20, 4, 4, 1, 4, 0, VKMHA_MATMUL_VARIANT_REGISTER}, VKMHA_ERROR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char msg[512] = "";
        vkmha_context_desc d = {0};
        d.log = error_log;
        d.log_user = msg;
        d.matmul_tile = &bad[i].tile;
        vkmha_context *ctx = (vkmha_context *)msg; /* must become NULL */
        vkmha_status st = vkmha_context_create(&d, &ctx);
        bool ok = true;
        T_EXPECT_STATUS(st, bad[i].want, ok);
        if (ctx) {
            t_diag("*out is not NULL");
            ok = false;
            if (st == VKMHA_SUCCESS)
                vkmha_context_destroy(ctx);
        }
        if (!strstr(msg, "vkmha_context_create: desc->matmul_tile")) {
            t_diag("message does not name desc->matmul_tile: \"%s\"", msg);
            ok = false;
        }
        t_report(ok, "matmul_tile %s: %s, message names the argument", bad[i].name,
                 vkmha_status_string(bad[i].want));
    }
    /* Variant AUTO takes the device type's variant; the context works. */
    vkmha_tile_config autov = {16, 8, 4, 2, 8, 0, VKMHA_MATMUL_VARIANT_AUTO};
    vkmha_context_desc d = {0};
    d.enable_validation = t_validation();
    d.log = t_log;
    d.matmul_tile = &autov;
    vkmha_context *ctx = NULL;
    vkmha_status st = vkmha_context_create(&d, &ctx);
    vkmha_context_info info = {0};
    if (st == VKMHA_SUCCESS)
        vkmha_context_get_info(ctx, &info);
    bool cpu = info.device.type == VKMHA_DEVICE_TYPE_CPU;
    vkmha_tile_config resolved = autov;
    resolved.variant = cpu ? VKMHA_MATMUL_VARIANT_REGISTER : VKMHA_MATMUL_VARIANT_SHARED;
    bool ok = st == VKMHA_SUCCESS && t_matmul_kernels_have_tile(ctx, &resolved);
    if (ok && cpu)
        ok = matmul_matches(ctx, ref, "matmul_tile AUTO 16x8", rng, 37, 29, 64);
    t_report(ok, "matmul_tile with variant AUTO: the device type's variant, correct results");
    if (ctx)
        t_report_validation(ctx);
    vkmha_context_destroy(ctx);
}

/* Records the DEBUG line of a fused attention's plan. */
static void plan_log(void *user, vkmha_log_level level, vkmha_status status, const char *msg)
{
    (void)status;
    if (level == VKMHA_LOG_DEBUG && strstr(msg, "fused attention ("))
        snprintf((char *)user, 512, "%s", msg);
    t_log(NULL, level, status, msg);
}

/* The query blocks x key blocks a fused attention of head dim 64 on a
 * context running `kernel` (vkmha_debug_options.fused_kernel) plans, from
 * its DEBUG line; false if the context cannot be made or the call fails. */
static bool planned_blocks(uint32_t kernel, const vkmha_tile_config *tile, uint32_t *bq,
                           uint32_t *bk, vkmha_kernel_info *d64, const char *name)
{
    char line[512] = "";
    vkmha_debug_options dbg = {.fused_kernel = kernel};
    vkmha_context_desc cd = {0};
    cd.enable_validation = t_validation();
    cd.log = plan_log;
    cd.log_user = line;
    cd.log_level = VKMHA_LOG_DEBUG;
    cd.debug = &dbg;
    cd.matmul_tile = tile;
    vkmha_context *ctx = NULL;
    if (vkmha_context_create(&cd, &ctx) != VKMHA_SUCCESS) {
        t_diag("no context for kernel %u: %s", kernel, vkmha_context_last_error(NULL));
        return false;
    }
    const uint32_t L = 37, D = 64;
    float *q = t_alloc((size_t)L * D), *out = t_alloc((size_t)L * D);
    for (size_t i = 0; i < (size_t)L * D; i++)
        q[i] = (float)(i % 7) * 0.125f;
    vkmha_attention_desc ad = {1, 1, 0, L, L, D, D, 0, VKMHA_ATTENTION_PATH_FUSED, 0, 0};
    bool ok = vkmha_attention(ctx, &ad, q, q, q, NULL, out, NULL) == VKMHA_SUCCESS &&
              kernel_find(ctx, name, d64);
    const char *at = strstr(line, "blocks of ");
    ok = ok && at && sscanf(at, "blocks of %u queries x %u keys", bq, bk) == 2;
    t_diag("kernel %u: \"%s\"", kernel, line);
    t_report_validation(ctx);
    vkmha_context_destroy(ctx);
    free(q), free(out);
    return ok;
}

/* vkmha_context_get_kernels: the count protocol (capacity in, count out,
 * nothing written past the capacity), the reference backend's empty list,
 * and values that are what the context runs: the matmul tile of
 * desc->matmul_tile and of VKMHA_MATMUL_TILE, the CPU-shaped kernels
 * unavailable where the device does not use them, and the fused attention's
 * blocks as its DEBUG plan line gives them. */
static void kernel_query_cases(vkmha_context *gpu, vkmha_context *ref)
{
    vkmha_kernel_info all[64], part[4];
    uint32_t n = 0, total = 64;
    bool ok = true;
    T_EXPECT_STATUS(vkmha_context_get_kernels(gpu, &n, NULL), VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS(vkmha_context_get_kernels(gpu, &total, all), VKMHA_SUCCESS, ok);
    memset(part, 0x5A, sizeof part);
    uint32_t two = 2;
    T_EXPECT_STATUS(vkmha_context_get_kernels(gpu, &two, part), VKMHA_SUCCESS, ok);
    unsigned char sentinel[sizeof part[0]];
    memset(sentinel, 0x5A, sizeof sentinel);
    if (ok && (n == 0 || total != n || two != n || memcmp(part, all, 2 * sizeof part[0]) ||
               memcmp(&part[2], sentinel, sizeof sentinel) ||
               memcmp(&part[3], sentinel, sizeof sentinel))) {
        t_diag("count %u, then %u with capacity 64 and %u with capacity 2", n, total, two);
        ok = false;
    }
    t_report(ok, "get_kernels: *count 0 gives the count (%u); capacity 2 fills 2 entries, "
                 "the same as the whole list's, and writes nothing past them", n);

    ok = true;
    memset(part, 0x5A, sizeof part);
    n = 4;
    T_EXPECT_STATUS(vkmha_context_get_kernels(ref, &n, part), VKMHA_SUCCESS, ok);
    uint32_t zero = 0;
    T_EXPECT_STATUS(vkmha_context_get_kernels(ref, &zero, NULL), VKMHA_SUCCESS, ok);
    t_report(ok && n == 0 && zero == 0 && !memcmp(&part[0], sentinel, sizeof sentinel),
             "get_kernels: the reference backend has no kernels (count %u) and writes none", n);

    /* desc->matmul_tile: the shared variant shows up in every matmul kernel;
     * on a CPU device the CPU-shaped kernels, which need the register
     * matmul's texel views, are then unavailable and say so. */
    const vkmha_tile_config shm = {32, 32, 16, 4, 4, 0, VKMHA_MATMUL_VARIANT_SHARED};
    vkmha_context_desc cd = {0};
    cd.enable_validation = t_validation();
    cd.log = t_log;
    cd.matmul_tile = &shm;
    vkmha_context *ctx = NULL;
    ok = true;
    T_EXPECT_STATUS(vkmha_context_create(&cd, &ctx), VKMHA_SUCCESS, ok);
    vkmha_context_info info = {0};
    if (ok)
        vkmha_context_get_info(ctx, &info);
    const bool cpu = info.device.type == VKMHA_DEVICE_TYPE_CPU;
    ok = ok && t_matmul_kernels_have_tile(ctx, &shm);
    static const char *const cpu_shaped[] = {"flash_cpu_d32", "flash_cpu_d64", "flash_cpu_d128",
                                             "flash_cpu_d256", "flash_cpu_d576", "softmax_cpu", "heads_cpu",
                                             "layernorm_cpu"};
    for (size_t i = 0; ok && i < sizeof cpu_shaped / sizeof cpu_shaped[0]; i++) {
        vkmha_kernel_info k;
        if (!kernel_find(ctx, cpu_shaped[i], &k) || k.available || k.shader[0] || k.param_count ||
            k.workgroup_size) {
            t_diag("%s: available %d, shader \"%s\", %u parameters", cpu_shaped[i],
                   k.available, k.shader, k.param_count);
            ok = false;
        }
    }
    t_report(ok, "get_kernels: desc->matmul_tile shared 32x32x16 is every matmul kernel's "
                 "tile; the CPU-shaped kernels are listed as not available");
    if (ctx) {
        vkmha_kernel_info d64;
        t_report(kernels_sane(ctx, &info.device) && kernel_find(ctx, "flash_d64", &d64) &&
                     d64.available && !strcmp(d64.op, "attention"),
                 "get_kernels: the list of a context with a matmul_tile is well-formed, "
                 "flash_d64 available (%s device)", cpu ? "CPU" : "GPU");
        t_report_validation(ctx);
    }
    vkmha_context_destroy(ctx);

    /* VKMHA_MATMUL_TILE does the same when desc->matmul_tile is NULL. */
    const vkmha_tile_config reg = {16, 8, 4, 2, 8, 0, VKMHA_MATMUL_VARIANT_REGISTER};
    const vkmha_tile_config *env_tile = cpu ? &reg : &shm;
    setenv("VKMHA_MATMUL_TILE", cpu ? "register:16,8,4,2,8" : "shared:32,32,16,4,4", 1);
    ctx = t_context(VKMHA_BACKEND_VULKAN, 0);
    unsetenv("VKMHA_MATMUL_TILE");
    t_report(ctx && t_matmul_kernels_have_tile(ctx, env_tile),
             "get_kernels: VKMHA_MATMUL_TILE=%s is every matmul kernel's tile",
             cpu ? "register:16,8,4,2,8" : "shared:32,32,16,4,4");
    if (ctx)
        t_report_validation(ctx);
    vkmha_context_destroy(ctx);

    /* The fused kernel's blocks: the workgroup-shared one plans BR x BC
     * blocks of flash_d64; the CPU-shaped one (CPU devices) WG * TM queries
     * of flash_cpu_d64. */
    uint32_t bq = 0, bk = 0;
    vkmha_kernel_info k;
    char d[160];
    ok = planned_blocks(VKMHA_FUSED_KERNEL_SHARED, NULL, &bq, &bk, &k, "flash_d64") &&
         k.available && bq == kernel_param(&k, "BR") && bk == kernel_param(&k, "BC");
    t_report(ok, "get_kernels: flash_d64 (%s) has the blocks the fused attention plans "
                 "(%u queries x %u keys)", kernel_describe(&k, d, sizeof d), bq, bk);
    vkmha_kernel_info kc;
    const bool has_cpu_kernel = kernel_find(gpu, "flash_cpu_d64", &kc) && kc.available;
    if (has_cpu_kernel || cpu) {
        ok = planned_blocks(VKMHA_FUSED_KERNEL_REGISTER, NULL, &bq, &bk, &k, "flash_cpu_d64") &&
             k.available && bq == kernel_param(&k, "WG") * kernel_param(&k, "TM");
        t_report(ok, "get_kernels: flash_cpu_d64 (%s) has the blocks the CPU-shaped fused "
                     "attention plans (%u queries)", kernel_describe(&k, d, sizeof d), bq);
    } else {
        /* A GPU: the CPU-shaped kernel is not used, and the list says so. */
        t_report(!kc.available && kernel_find(gpu, "flash_cpu_d64", &kc),
                 "get_kernels: flash_cpu_d64 is listed as not available on this GPU");
    }
}

/* The per-step profile of a profiled context's debug log: the step lines
 * ("<call>: profile: step I ...: T us") and the last summary ("N steps T
 * us"). */
typedef struct profile_capture {
    int steps;         /* step lines since the last summary */
    int summary_steps; /* N of the last summary, -1 before one */
    double step_us, summary_us;
    bool malformed;
} profile_capture;

static void profile_log(void *user, vkmha_log_level level, vkmha_status status, const char *msg)
{
    profile_capture *c = (profile_capture *)user;
    const char *at = strstr(msg, ": profile: ");
    t_log(NULL, level, status, msg);
    if (level != VKMHA_LOG_DEBUG || !at)
        return;
    const char *us = strrchr(msg, ':');
    double t = -1.0;
    int n = -1;
    if (!strncmp(at, ": profile: step ", 16)) {
        c->malformed |= !us || sscanf(us, ": %lf us", &t) != 1 || t < 0.0;
        c->steps++, c->step_us += t;
    } else if (!strncmp(at, ": profile: uploads ", 19)) {
        const char *count = strstr(at, " us, ");
        c->malformed |= !count || sscanf(count, " us, %d steps %lf us", &n, &t) != 2;
        c->summary_steps = n, c->summary_us = t;
        if (n != c->steps) /* every step of the call has its line */
            c->malformed = true;
        c->steps = 0, c->step_us = 0.0;
    }
}

/* vkmha_context_get_profile after a profiled matmul (info: after it, logged:
 * the steps its debug lines counted): every step named (a kernel of the
 * context, or a transfer), their time within the call's, the count query
 * and its bad arguments. */
static void profile_steps_case(vkmha_context *ctx, const vkmha_context_info *info, int logged)
{
    static vkmha_profile_step steps[VKMHA_MAX_PROFILE_STEPS];
    static vkmha_kernel_info kernels[128];
    uint32_t n = 0, got = VKMHA_MAX_PROFILE_STEPS, nk = 128;
    bool ok = vkmha_context_get_profile(ctx, &n, NULL) == VKMHA_SUCCESS && n >= 1 &&
              (int)n == logged && vkmha_context_get_profile(ctx, &got, steps) == VKMHA_SUCCESS &&
              got == n && vkmha_context_get_kernels(ctx, &nk, kernels) == VKMHA_SUCCESS;
    uint64_t sum = 0;
    bool matmul = false;
    for (uint32_t i = 0; ok && i < n; i++) {
        const vkmha_profile_step *st = &steps[i];
        const bool transfer = !strcmp(st->name, "copy") || !strcmp(st->name, "fill") ||
                              !strcmp(st->name, "update");
        bool listed = false;
        for (uint32_t k = 0; k < nk && k < 128; k++)
            listed = listed || (!strcmp(kernels[k].name, st->name) && kernels[k].available);
        ok = transfer ? st->bytes > 0 && st->workgroups[0] == 0
                      : listed && st->bytes == 0 && st->workgroups[0] * st->workgroups[1] *
                                                            st->workgroups[2] > 0;
        if (!ok)
            t_diag("profile step %u: %s, %u x %u x %u workgroups, %llu bytes", i, st->name,
                   st->workgroups[0], st->workgroups[1], st->workgroups[2],
                   (unsigned long long)st->bytes);
        matmul = matmul || !strncmp(st->name, "matmul", 6);
        sum += st->time_ns;
    }
    t_report(ok && matmul && sum <= info->last_gpu_time_ns,
             "vkmha_context_get_profile: %u step(s) of the profiled matmul, each a listed kernel "
             "or a transfer, a matmul among them, %llu of the call's %llu ns",
             n, (unsigned long long)sum, (unsigned long long)info->last_gpu_time_ns);
    /* A capacity of 1 fills one and still counts all; bad arguments. */
    uint32_t one = 1;
    vkmha_profile_step first = {0};
    ok = vkmha_context_get_profile(ctx, &one, &first) == VKMHA_SUCCESS && one == n &&
         !strcmp(first.name, steps[0].name);
    ok = ok && vkmha_context_get_profile(ctx, NULL, steps) == VKMHA_ERROR_INVALID_ARGUMENT &&
         strstr(vkmha_context_last_error(ctx), "count is NULL");
    one = 1;
    ok = ok && vkmha_context_get_profile(ctx, &one, NULL) == VKMHA_ERROR_INVALID_ARGUMENT &&
         strstr(vkmha_context_last_error(ctx), "out is NULL");
    t_report(ok, "vkmha_context_get_profile: capacity 1 fills the first step and counts all; "
             "a NULL count or out is INVALID_ARGUMENT naming it");
}

/* VKMHA_CONTEXT_PROFILE and the device-memory counters. */
static void profile_memory_cases(vkmha_context *ref, t_rng *rng)
{
    profile_capture cap = {.summary_steps = -1};
    vkmha_context *ctx =
        t_context_ex(VKMHA_BACKEND_VULKAN, VKMHA_CONTEXT_PROFILE, NULL, profile_log, &cap);
    vkmha_context_info before, after, plain;
    vkmha_context_get_info(ctx, &before);
    t_report(before.last_gpu_time_ns == 0 && before.device_memory_bytes > 0 &&
                 before.device_memory_peak_bytes >= before.device_memory_bytes,
             "new context: no GPU time yet, holds %llu bytes (peak %llu)",
             (unsigned long long)before.device_memory_bytes,
             (unsigned long long)before.device_memory_peak_bytes);
    bool ok = matmul_matches(ctx, ref, "profiled matmul", rng, 300, 256, 512);
    vkmha_context_get_info(ctx, &after);
    if (after.gpu_timing) {
        /* A 300 x 256 x 512 matmul: more than 1 us and less than a minute on
         * any device. */
        ok = ok && after.last_gpu_time_ns > 1000 && after.last_gpu_time_ns < 60000000000ull;
        t_report(ok, "VKMHA_CONTEXT_PROFILE: last_gpu_time_ns %llu for a 300x256x512 matmul",
                 (unsigned long long)after.last_gpu_time_ns);
        /* With a debug logger each step is timed: a line per step, their
         * time within the call's (0.1 us of rounding per line). */
        t_report(!cap.malformed && cap.summary_steps >= 1 &&
                     cap.summary_us <= after.last_gpu_time_ns / 1000.0 +
                                           0.1 * (cap.summary_steps + 1),
                 "VKMHA_CONTEXT_PROFILE with a debug logger: %d step line(s), %.1f us of the "
                 "call's %.1f us (well-formed: %s)",
                 cap.summary_steps, cap.summary_us, after.last_gpu_time_ns / 1000.0,
                 cap.malformed ? "no" : "yes");
        profile_steps_case(ctx, &after, cap.summary_steps);
    } else {
        t_report(ok && after.last_gpu_time_ns == 0,
                 "VKMHA_CONTEXT_PROFILE: no timestamps on this queue, time reported as 0");
    }
    uint64_t tensors = (300ull * 512 + 256ull * 512 + 300ull * 256) * 4;
    t_report(after.device_memory_bytes >= before.device_memory_bytes + tensors &&
                 after.device_memory_peak_bytes >= after.device_memory_bytes,
             "device memory grows with the tensors: %llu -> %llu bytes (>= %llu more), peak "
             "%llu",
             (unsigned long long)before.device_memory_bytes,
             (unsigned long long)after.device_memory_bytes, (unsigned long long)tensors,
             (unsigned long long)after.device_memory_peak_bytes);
    /* A layer's weights count while it lives and not after; the peak stays. */
    const uint32_t dm = 64;
    float *w = t_random(rng, (size_t)dm * dm, -0.1f, 0.1f);
    vkmha_mha_desc md = {0};
    md.d_model = dm;
    md.n_head = 4;
    md.w_q = md.w_k = md.w_v = md.w_o = w;
    vkmha_mha *mha = NULL;
    vkmha_context_info with, without;
    ok = vkmha_mha_create(ctx, &md, &mha) == VKMHA_SUCCESS;
    vkmha_context_get_info(ctx, &with);
    vkmha_mha_destroy(mha);
    vkmha_context_get_info(ctx, &without);
    t_report(ok && with.device_memory_bytes >= after.device_memory_bytes + 4ull * dm * dm * 4 &&
                 without.device_memory_bytes == after.device_memory_bytes &&
                 without.device_memory_peak_bytes >= with.device_memory_bytes,
             "mha weights: %llu bytes with the layer, %llu after destroy, peak %llu",
             (unsigned long long)with.device_memory_bytes,
             (unsigned long long)without.device_memory_bytes,
             (unsigned long long)without.device_memory_peak_bytes);
    free(w);
    t_report_validation(ctx);
    vkmha_context_destroy(ctx);

    /* Without the flag: no timing. The reference backend: all zero. */
    vkmha_context *noprof = t_context(VKMHA_BACKEND_VULKAN, 0);
    ok = matmul_matches(noprof, ref, "unprofiled matmul", rng, 17, 9, 33);
    vkmha_context_get_info(noprof, &plain);
    uint32_t steps = 5;
    vkmha_profile_step step;
    t_report(ok && !plain.gpu_timing && plain.last_gpu_time_ns == 0 &&
                 vkmha_context_get_profile(noprof, &steps, &step) == VKMHA_SUCCESS && steps == 0,
             "without VKMHA_CONTEXT_PROFILE: gpu_timing false, last_gpu_time_ns 0, no profile "
             "steps");
    vkmha_context_destroy(noprof);
    vkmha_context_info ri;
    vkmha_context_get_info(ref, &ri);
    steps = 5;
    t_report(!ri.gpu_timing && ri.device_memory_bytes == 0 && ri.device_memory_peak_bytes == 0 &&
                 vkmha_context_get_profile(ref, &steps, &step) == VKMHA_SUCCESS && steps == 0,
             "reference backend: no GPU time, no device memory, no profile steps");
}

int main(void)
{
    t_rng rng = {2024};
    t_report(vkmha_version() == VKMHA_VERSION_NUMBER, "vkmha_version() %u == %u",
             vkmha_version(), (unsigned)VKMHA_VERSION_NUMBER);
    /* The header's version is the project's (meson.build: the shared
     * library's soname version, pkg-config's and CMake's). */
    char header_version[32];
    snprintf(header_version, sizeof header_version, "%d.%d.%d", VKMHA_VERSION_MAJOR,
             VKMHA_VERSION_MINOR, VKMHA_VERSION_PATCH);
    t_report(strcmp(header_version, VKMHA_PROJECT_VERSION) == 0,
             "vkmha.h's version %s is meson.build's %s", header_version, VKMHA_PROJECT_VERSION);

    /* The contexts first: t_context pins the driver libraries in sanitizer
     * builds before any instance is destroyed (tests/util.h). */
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    vkmha_context *gpu = t_context(VKMHA_BACKEND_VULKAN, 0);

    uint32_t n_devs = 0;
    vkmha_device_info *devs = enumerate_cases(&n_devs);

    null_desc_case(ref);
    device_choice_case(devs, n_devs);
    info_cases(gpu, ref);

    vkmha_context *nosub = t_context(VKMHA_BACKEND_VULKAN, VKMHA_CONTEXT_NO_SUBGROUP_OPS);
    no_subgroup_cases(nosub, ref, &rng);
    two_contexts_case(gpu, nosub, ref, &rng);

    log_record rec_ref, rec_vk;
    vkmha_context *log_ref = NULL, *log_vk = NULL;
    log_cases(VKMHA_BACKEND_REFERENCE, ref, &rec_ref, &log_ref);
    log_cases(VKMHA_BACKEND_VULKAN, ref, &rec_vk, &log_vk);

    growth_cases(gpu, ref, &rng);
    limit_cases(gpu, ref, &rng);
    tile_override_cases(ref, &rng);
    kernel_query_cases(gpu, ref);
    profile_memory_cases(ref, &rng);

    t_diag("validation: the main Vulkan context");
    t_report_validation(gpu);
    t_diag("validation: the NO_SUBGROUP_OPS context");
    t_report_validation(nosub);
    t_diag("validation: the Vulkan context with its own logger");
    if (log_vk)
        t_report_validation(log_vk);
    else
        t_report(false, "validation layer: the logging Vulkan context was not created");
    vkmha_context_destroy(log_vk);
    vkmha_context_destroy(log_ref);
    vkmha_context_destroy(nosub);
    vkmha_context_destroy(gpu);
    vkmha_context_destroy(ref);
    free(devs);
    return t_finish();
}
