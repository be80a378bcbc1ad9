/* Embedding (issue 4), beside examples/embed.c (borrowed device, wrapped
 * buffers, recording, queue lock, VkAllocationCallbacks):
 *   - tensors on both backends: every op and the layer on tensors give the
 *     same result as on host arrays (bitwise on Vulkan: the same kernels),
 *     upload / download at offsets, U8 mask tensors;
 *   - vkmha_mha_submit: several in flight, poll, wait, destroy;
 *   - the host allocator sees every allocation freed at destroy, and failing
 *     its 1st, 2nd, ... allocation in turn (context create, layer create,
 *     forward on host arrays and on tensors, tensor create) returns
 *     VKMHA_ERROR_OUT_OF_HOST_MEMORY, leaks nothing and leaves the context
 *     usable, until a run needs no failure;
 *   - bad tensors and embedding arguments: another context's tensor, a
 *     destroyed one, wrong dtype, too small, record without a command buffer
 *     or push descriptors or on the reference backend, half-set handles;
 *   - vkmha_context_trim frees scratch and the next call still computes. */
#include "util.h"

#include "vkmha_vulkan.h"

/* The system's Vulkan loader, opened by the test itself (a custom loader). */
#ifdef _WIN32
#include <windows.h>
#define LOADER_NAME "vulkan-1.dll"
static void *loader_open(void) { return (void *)LoadLibraryA(LOADER_NAME); }
static void *loader_sym(void *lib, const char *name)
{
    return (void *)(uintptr_t)GetProcAddress((HMODULE)lib, name);
}
static const char *loader_error(void) { return "LoadLibraryA failed"; }
static void loader_close(void *lib) { FreeLibrary((HMODULE)lib); }
#else
#include <dlfcn.h>
#define LOADER_NAME "libvulkan.so.1"
static void *loader_open(void) { return dlopen(LOADER_NAME, RTLD_NOW | RTLD_LOCAL); }
static void *loader_sym(void *lib, const char *name) { return dlsym(lib, name); }
static const char *loader_error(void) { return dlerror(); }
static void loader_close(void *lib) { dlclose(lib); }
#endif

static vkmha_context *counted_context(vkmha_backend backend, t_counting *c, vkmha_status *st)
{
    vkmha_allocator a = {t_counting_alloc, NULL, t_counting_free, c};
    vkmha_context_desc d = {0};
    d.backend = backend;
    d.enable_validation = backend == VKMHA_BACKEND_VULKAN && t_validation();
    d.allocator = &a;
    d.log = t_log;
    /* Host allocations are counted and failed in turn here: not the
     * self-check's too (test_selfcheck.c). */
    d.flags = VKMHA_CONTEXT_NO_SELF_CHECK;
    vkmha_context *ctx = NULL;
    *st = vkmha_context_create(&d, &ctx);
    if (*st != VKMHA_SUCCESS)
        t_diag("vkmha_context_create: %s", vkmha_context_last_error(NULL));
    return ctx;
}

/* ---- a small layer ------------------------------------------------------------ */

enum { D = 40, H = 4, L = 13, B = 2 };
#define N_ACT ((size_t)B * L * D)

typedef struct layer_data {
    float *w, *x;
} layer_data;

static vkmha_mha_desc layer_desc(const layer_data *ld)
{
    vkmha_mha_desc d = {0};
    d.d_model = D;
    d.n_head = H;
    d.w_q = ld->w;
    d.w_k = ld->w + D * D;
    d.w_v = ld->w + 2 * D * D;
    d.w_o = ld->w + 3 * D * D;
    d.b_o = ld->w + 4 * D * D;
    d.post_norm = true;
    return d;
}

static vkmha_tensor *tensor(vkmha_context *ctx, vkmha_dtype t, uint32_t rank, uint32_t d0,
                            uint32_t d1, uint32_t d2, uint32_t d3)
{
    vkmha_tensor_desc td = {t, rank, {d0, d1, d2, d3}};
    vkmha_tensor *out = NULL;
    if (vkmha_tensor_create(ctx, &td, &out) != VKMHA_SUCCESS) {
        printf("Bail out! vkmha_tensor_create: %s\n", vkmha_context_last_error(ctx));
        exit(1);
    }
    return out;
}

static vkmha_tensor *tensor_from(vkmha_context *ctx, const float *src, uint32_t d0,
                                 uint32_t d1, uint32_t d2)
{
    vkmha_tensor *t = tensor(ctx, VKMHA_DTYPE_F32, 3, d0, d1, d2, 0);
    if (vkmha_tensor_upload(t, 0, src, (uint64_t)d0 * d1 * d2 * 4) != VKMHA_SUCCESS) {
        printf("Bail out! vkmha_tensor_upload: %s\n", vkmha_context_last_error(ctx));
        exit(1);
    }
    return t;
}

static float *download(vkmha_tensor *t)
{
    float *p = t_alloc(vkmha_tensor_bytes(t) / 4);
    vkmha_status st = vkmha_tensor_download(t, 0, p, vkmha_tensor_bytes(t));
    if (st != VKMHA_SUCCESS)
        t_diag("download: %s", vkmha_status_string(st));
    return p;
}

/* Exact equality (the tensor and the host-array paths run the same kernels
 * on the same data). */
static bool same(const char *name, const float *a, const float *b, size_t n)
{
    return t_close(name, "tensor vs host array", a, b, n, 0.0, 0.0);
}

/* ---- tensors vs host arrays ---------------------------------------------------- */

static void tensor_ops(vkmha_context *ctx, const char *be, t_rng *r)
{
    char name[160];
    /* matmul with bias, op T, batch 2, odd sizes */
    const uint32_t M = 7, N = 9, K = 13, BT = 2;
    float *a = t_random(r, BT * M * K, -1, 1), *b = t_random(r, BT * N * K, -1, 1),
          *bias = t_random(r, N, -1, 1), *c = t_alloc(BT * M * N);
    vkmha_matmul_desc md = {.batch = BT, .m = M, .n = N, .k = K, .op_b = VKMHA_OP_T, .alpha = 0.5f};
    bool ok = vkmha_matmul(ctx, &md, a, b, bias, c) == VKMHA_SUCCESS;
    vkmha_tensor *ta = tensor_from(ctx, a, BT, M, K), *tb = tensor_from(ctx, b, BT, N, K),
                 *tbias = tensor_from(ctx, bias, 1, 1, N), *tc = tensor(ctx, VKMHA_DTYPE_F32, 3,
                                                                       BT, M, N, 0);
    ok = vkmha_matmul_tensor(ctx, &md, ta, tb, tbias, tc) == VKMHA_SUCCESS && ok;
    float *got = download(tc);
    snprintf(name, sizeof name, "%s: vkmha_matmul_tensor equals vkmha_matmul (7x9x13, op T, bias, batch 2)", be);
    t_report(ok && same(name, got, c, BT * M * N), "%s", name);
    free(got);

    /* softmax, out of place and in place, with a U8 key-padding tensor */
    const uint32_t SB = 2, SH = 3, SQ = 5, SK = 11;
    const size_t ns = (size_t)SB * SH * SQ * SK;
    float *x = t_random(r, ns, -3, 3), *y = t_alloc(ns);
    uint8_t *kp = t_random_mask(r, SB * SK, 0.3);
    vkmha_mask m = {.kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL, .key_padding = kp};
    vkmha_softmax_desc sd = {SB, SH, SQ, SK, 0.7f, 0};
    ok = vkmha_softmax(ctx, &sd, x, &m, y) == VKMHA_SUCCESS;
    vkmha_tensor *tx = tensor_from(ctx, x, SB * SH, SQ, SK), *ty = tensor(ctx, VKMHA_DTYPE_F32, 1,
                                                                          (uint32_t)ns, 0, 0, 0);
    vkmha_tensor *tkp = tensor(ctx, VKMHA_DTYPE_U8, 2, SB, SK, 0, 0);
    ok = vkmha_tensor_upload(tkp, 0, kp, SB * SK) == VKMHA_SUCCESS && ok;
    vkmha_tensor_mask tm = {.kinds = m.kinds, .key_padding = tkp};
    ok = vkmha_softmax_tensor(ctx, &sd, tx, &tm, ty) == VKMHA_SUCCESS && ok;
    got = download(ty);
    snprintf(name, sizeof name, "%s: vkmha_softmax_tensor (y != x, U8 key-padding tensor + causal) equals vkmha_softmax", be);
    t_report(ok && same(name, got, y, ns), "%s", name);
    free(got);
    ok = vkmha_softmax_tensor(ctx, &sd, tx, &tm, tx) == VKMHA_SUCCESS;
    got = download(tx);
    snprintf(name, sizeof name, "%s: vkmha_softmax_tensor in place (y == x)", be);
    t_report(ok && same(name, got, y, ns), "%s", name);
    free(got);

    /* split then merge heads */
    vkmha_heads_desc hd = {2, 5, 3, 7, 0};
    const size_t nh = 2 * 5 * 3 * 7;
    float *hx = t_random(r, nh, -1, 1), *hy = t_alloc(nh);
    ok = vkmha_split_heads(ctx, &hd, hx, hy) == VKMHA_SUCCESS;
    vkmha_tensor *thx = tensor_from(ctx, hx, 2, 5, 21), *thy = tensor(ctx, VKMHA_DTYPE_F32, 4, 2,
                                                                     3, 5, 7);
    vkmha_tensor *thz = tensor(ctx, VKMHA_DTYPE_F32, 3, 2, 5, 21, 0);
    ok = vkmha_split_heads_tensor(ctx, &hd, thx, thy) == VKMHA_SUCCESS &&
         vkmha_merge_heads_tensor(ctx, &hd, thy, thz) == VKMHA_SUCCESS && ok;
    got = download(thy);
    float *back = download(thz);
    snprintf(name, sizeof name, "%s: split / merge heads on tensors equal the host-array split, and merge inverts it", be);
    t_report(ok && same(name, got, hy, nh) && same(name, back, hx, nh), "%s", name);
    free(got);
    free(back);

    /* attention with GQA, a bias tensor and weights */
    vkmha_attention_desc ad = {2, 4, 2, 9, 14, 8, 6, 0, 0, 0, 0};
    const size_t nq = 2 * 4 * 9 * 8, nk = 2 * 2 * 14 * 8, nv = 2 * 2 * 14 * 6,
                 no = 2 * 4 * 9 * 6, nw = 2 * 4 * 9 * 14, nb = 4 * 9 * 14;
    float *q = t_random(r, nq, -1, 1), *k = t_random(r, nk, -1, 1), *v = t_random(r, nv, -1, 1),
          *bb = t_random(r, nb, -1, 1), *o = t_alloc(no), *wts = t_alloc(nw);
    vkmha_mask am = {.kinds = VKMHA_MASK_BIAS, .bias = bb, .bias_batch = 1};
    ok = vkmha_attention(ctx, &ad, q, k, v, &am, o, wts) == VKMHA_SUCCESS;
    vkmha_tensor *tq = tensor_from(ctx, q, 8, 9, 8), *tk = tensor_from(ctx, k, 4, 14, 8),
                 *tv = tensor_from(ctx, v, 4, 14, 6), *tbb = tensor_from(ctx, bb, 4, 9, 14),
                 *to = tensor(ctx, VKMHA_DTYPE_F32, 1, (uint32_t)no, 0, 0, 0),
                 *tw = tensor(ctx, VKMHA_DTYPE_F32, 1, (uint32_t)nw, 0, 0, 0);
    vkmha_tensor_mask atm = {.kinds = VKMHA_MASK_BIAS, .bias = tbb, .bias_batch = 1};
    ok = vkmha_attention_tensor(ctx, &ad, tq, tk, tv, &atm, to, tw) == VKMHA_SUCCESS && ok;
    got = download(to);
    float *gw = download(tw);
    snprintf(name, sizeof name, "%s: vkmha_attention_tensor (GQA, bias tensor, weights) equals vkmha_attention", be);
    t_report(ok && same(name, got, o, no) && same(name, gw, wts, nw), "%s", name);
    free(got);
    free(gw);

    /* upload / download at an offset */
    float part[5] = {1, 2, 3, 4, 5}, read[5] = {0};
    ok = vkmha_tensor_upload(to, 12, part, sizeof part) == VKMHA_SUCCESS &&
         vkmha_tensor_download(to, 12, read, sizeof read) == VKMHA_SUCCESS;
    got = download(to);
    t_report(ok && memcmp(read, part, sizeof part) == 0 && memcmp(got + 3, part, sizeof part) == 0 &&
                 same("offset upload keeps the rest", got, o, 3),
             "%s: vkmha_tensor_upload / _download at byte offset 12", be);
    free(got);

    vkmha_tensor *all[] = {ta, tb, tbias, tc, tx, ty, tkp, thx, thy, thz, tq, tk, tv, tbb, to, tw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        vkmha_tensor_destroy(all[i]);
    float *frees[] = {a, b, bias, c, x, y, hx, hy, q, k, v, bb, o, wts};
    for (size_t i = 0; i < sizeof frees / sizeof frees[0]; i++)
        free(frees[i]);
    free(kp);
}

/* The layer on tensors, synchronously and submitted, equals the host API. */
static void tensor_layer(vkmha_context *ctx, const char *be, const layer_data *ld)
{
    char name[160];
    vkmha_mha_desc md = layer_desc(ld);
    vkmha_mha *mha = NULL;
    if (vkmha_mha_create(ctx, &md, &mha) != VKMHA_SUCCESS) {
        t_report(false, "%s: vkmha_mha_create: %s", be, vkmha_context_last_error(ctx));
        return;
    }
    float *want = t_alloc(N_ACT);
    vkmha_mha_io io = {B, L, 0, ld->x, ld->x, ld->x, NULL, want, NULL, 0, 0, 0, NULL, 0, NULL, NULL};
    bool ok = vkmha_mha_forward(mha, &io) == VKMHA_SUCCESS;
    vkmha_tensor *tx = tensor_from(ctx, ld->x, B, L, D);
    vkmha_tensor *out[4];
    for (int i = 0; i < 4; i++)
        out[i] = tensor(ctx, VKMHA_DTYPE_F32, 3, B, L, D, 0);
    vkmha_mha_tensors tio = {B, L, 0, tx, tx, tx, NULL, out[0], NULL, 0, 0, NULL, 0, NULL, NULL};
    ok = vkmha_mha_forward_tensor(mha, &tio) == VKMHA_SUCCESS && ok;
    float *got = download(out[0]);
    snprintf(name, sizeof name, "%s: vkmha_mha_forward_tensor equals vkmha_mha_forward (post-norm, self-attention)", be);
    t_report(ok && same(name, got, want, N_ACT), "%s", name);
    free(got);

    /* Three submissions in flight, on every path; poll, then wait. */
    vkmha_submission *sub[3] = {NULL, NULL, NULL};
    ok = true;
    for (int i = 0; i < 3; i++) {
        tio.out = out[1 + i];
        tio.attention_path = t_attention_runs[i].path;
        tio.kv_splits = t_attention_runs[i].kv_splits;
        ok = vkmha_mha_submit(mha, &tio, &sub[i]) == VKMHA_SUCCESS && sub[i] && ok;
    }
    vkmha_status polled = sub[2] ? vkmha_submission_poll(sub[2]) : VKMHA_ERROR_INVALID_ARGUMENT;
    ok = (polled == VKMHA_SUCCESS || polled == VKMHA_NOT_READY) && ok;
    for (int i = 0; i < 3; i++)
        ok = sub[i] && vkmha_submission_wait(sub[i], UINT64_MAX) == VKMHA_SUCCESS &&
             vkmha_submission_poll(sub[i]) == VKMHA_SUCCESS && ok;
    for (int i = 0; i < 3; i++) {
        vkmha_submission_destroy(sub[i]);
        got = download(out[1 + i]);
        snprintf(name, sizeof name, "%s: vkmha_mha_submit (%s), 3 in flight, poll %s, wait",
                 be, t_attention_runs[i].name, vkmha_status_string(polled));
        t_report(ok && t_close(name, "out", got, want, N_ACT, 1e-5, 1e-4), "%s", name);
        free(got);
    }
    vkmha_submission_destroy(NULL);

    /* A steady loop of submit, wait, destroy reuses the pooled command
     * buffers and fences: no new one after the first calls. */
    vkmha_context_info before = {0}, after = {0};
    vkmha_context_get_info(ctx, &before);
    ok = true;
    for (int i = 0; i < 12 && ok; i++) {
        vkmha_submission *s = NULL;
        tio.out = out[1];
        ok = vkmha_mha_submit(mha, &tio, &s) == VKMHA_SUCCESS &&
             vkmha_submission_wait(s, UINT64_MAX) == VKMHA_SUCCESS;
        vkmha_submission_destroy(s);
    }
    vkmha_context_get_info(ctx, &after);
    got = download(out[1]);
    snprintf(name, sizeof name, "%s: 12 x (submit, wait, destroy): right, and %llu submissions "
             "created before, %llu after", be, (unsigned long long)before.submissions_created,
             (unsigned long long)after.submissions_created);
    t_report(ok && t_close(name, "out", got, want, N_ACT, 1e-5, 1e-4) &&
                 after.submissions_created == before.submissions_created,
             "%s", name);
    free(got);

    /* Two layers chained on the device: out[1] = layer(layer(x)), with no
     * host round trip, equals the host-array calls one after the other. */
    float *mid = t_alloc(N_ACT), *two = t_alloc(N_ACT);
    vkmha_mha_io io1 = {B, L, 0, ld->x, ld->x, ld->x, NULL, mid, NULL, 0, 0, 0, NULL, 0, NULL, NULL},
                 io2 = {B, L, 0, mid, mid, mid, NULL, two, NULL, 0, 0, 0, NULL, 0, NULL, NULL};
    ok = vkmha_mha_forward(mha, &io1) == VKMHA_SUCCESS &&
         vkmha_mha_forward(mha, &io2) == VKMHA_SUCCESS;
    vkmha_mha_tensors t1 = {B, L, 0, tx, tx, tx, NULL, out[0], NULL, 0, 0, NULL, 0, NULL, NULL},
                      t2 = {B, L, 0, out[0], out[0], out[0], NULL, out[1], NULL, 0, 0, NULL, 0, NULL, NULL};
    ok = vkmha_mha_forward_tensor(mha, &t1) == VKMHA_SUCCESS &&
         vkmha_mha_forward_tensor(mha, &t2) == VKMHA_SUCCESS && ok;
    got = download(out[1]);
    snprintf(name, sizeof name, "%s: two layers chained on tensors equal two host-array forwards", be);
    t_report(ok && same(name, got, two, N_ACT), "%s", name);
    free(got);
    free(mid);
    free(two);
    for (int i = 0; i < 4; i++)
        vkmha_tensor_destroy(out[i]);
    vkmha_tensor_destroy(tx);
    vkmha_mha_destroy(mha);
    free(want);
}

/* ---- host allocations ------------------------------------------------------------ */

/* One run of: [context create], layer create, forward on host arrays,
 * tensor create + forward on tensors; with the context's allocator failing
 * its fail_at-th allocation. Returns the first failing status (0: none). */
static vkmha_status alloc_run(vkmha_backend backend, t_counting *c, const layer_data *ld,
                              const float *want, bool *wrong)
{
    vkmha_status st;
    *wrong = false;
    vkmha_context *ctx = counted_context(backend, c, &st);
    if (st)
        return st;
    vkmha_mha_desc md = layer_desc(ld);
    vkmha_mha *mha = NULL;
    float *out = t_alloc(N_ACT);
    vkmha_tensor *tx = NULL, *to = NULL;
    vkmha_tensor_desc td = {VKMHA_DTYPE_F32, 3, {B, L, D, 0}};
    vkmha_mha_io io = {B, L, 0, ld->x, ld->x, ld->x, NULL, out, NULL, 0, 0, 0, NULL, 0, NULL, NULL};
    vkmha_status first = VKMHA_SUCCESS;
    if ((st = vkmha_mha_create(ctx, &md, &mha)) || (st = vkmha_mha_forward(mha, &io)) ||
        (st = vkmha_tensor_create(ctx, &td, &tx)) || (st = vkmha_tensor_create(ctx, &td, &to)) ||
        (st = vkmha_tensor_upload(tx, 0, ld->x, N_ACT * 4))) {
        first = st;
    } else {
        vkmha_mha_tensors tio = {B, L, 0, tx, tx, tx, NULL, to, NULL, 0, 0, NULL, 0, NULL, NULL};
        first = vkmha_mha_forward_tensor(mha, &tio);
    }
    /* Usable after the failure: finish the work with allocations allowed. */
    c->fail_at = 0;
    if (!mha && vkmha_mha_create(ctx, &md, &mha) != VKMHA_SUCCESS)
        *wrong = true;
    if (mha && (vkmha_mha_forward(mha, &io) != VKMHA_SUCCESS ||
                !t_close("after a failed allocation", "out", out, want, N_ACT, 1e-5, 1e-4)))
        *wrong = true;
    vkmha_tensor_destroy(tx);
    vkmha_tensor_destroy(to);
    vkmha_mha_destroy(mha);
    vkmha_context_destroy(ctx);
    free(out);
    return first;
}

static void alloc_failures(vkmha_backend backend, const char *be, const layer_data *ld,
                           const float *want)
{
    long points = 0, wrong_status = 0, leaks = 0, unusable = 0;
    for (long n = 1; n < 10000; n++) {
        t_counting c = {0, 0, n, 0};
        bool wrong;
        vkmha_status st = alloc_run(backend, &c, ld, want, &wrong);
        if (c.failed == 0) { /* the run needed fewer than n allocations */
            if (st != VKMHA_SUCCESS)
                wrong_status++;
            break;
        }
        points++;
        if (st != VKMHA_ERROR_OUT_OF_HOST_MEMORY) {
            wrong_status++;
            t_diag("%s: failing allocation %ld gave %s", be, n, vkmha_status_string(st));
        }
        if (c.live != 0) {
            leaks++;
            t_diag("%s: failing allocation %ld leaked %ld blocks", be, n, c.live);
        }
        unusable += wrong;
    }
    t_diag("%s: %ld host allocation points failed in turn", be, points);
    t_report(points > 5 && wrong_status == 0 && leaks == 0 && unusable == 0,
             "%s: failing each of the %ld host allocations of create + layer + forward (host "
             "arrays and tensors) in turn: always VKMHA_ERROR_OUT_OF_HOST_MEMORY, no leak, the "
             "context still computes (%ld wrong, %ld leaks, %ld unusable)",
             be, points, wrong_status, leaks, unusable);
}

static void allocator_accounting(vkmha_backend backend, const char *be, const layer_data *ld)
{
    t_counting c = {0};
    vkmha_status st;
    vkmha_context *ctx = counted_context(backend, &c, &st);
    if (st) {
        t_report(false, "%s: context with a t_counting allocator: %s", be, vkmha_status_string(st));
        return;
    }
    tensor_layer(ctx, be, ld); /* layers, tensors and submissions on the t_counting allocator */
    long total = c.total;
    vkmha_context_destroy(ctx);
    t_report(c.live == 0 && total > 0,
             "%s: every one of the %ld host allocations went through the allocator and was "
             "freed by destroy (%ld live)",
             be, total, c.live);
}

/* ---- bad arguments --------------------------------------------------------------- */

static void expect(vkmha_context *ctx, vkmha_status got, vkmha_status want, const char *word,
                   const char *what)
{
    const char *msg = ctx ? vkmha_context_last_error(ctx) : "";
    bool ok = got == want && (!ctx || strstr(msg, word) != NULL);
    if (!ok)
        t_diag("%s: got %s (%s)", what, vkmha_status_string(got), msg);
    t_report(ok, "%s -> %s naming %s", what, vkmha_status_string(want), word);
}

static void bad_tensors(vkmha_context *gpu, vkmha_context *ref)
{
    vkmha_tensor *a = tensor(gpu, VKMHA_DTYPE_F32, 2, 4, 4, 0, 0),
                 *c = tensor(gpu, VKMHA_DTYPE_F32, 2, 4, 4, 0, 0),
                 *other = tensor(ref, VKMHA_DTYPE_F32, 2, 4, 4, 0, 0),
                 *bytes = tensor(gpu, VKMHA_DTYPE_U8, 2, 4, 4, 0, 0),
                 *small = tensor(gpu, VKMHA_DTYPE_F32, 1, 15, 0, 0, 0),
                 *dead = tensor(gpu, VKMHA_DTYPE_F32, 2, 4, 4, 0, 0);
    vkmha_tensor_destroy(dead);
    vkmha_matmul_desc md = {.batch = 1, .m = 4, .n = 4, .k = 4, .op_b = VKMHA_OP_N};
    expect(gpu, vkmha_matmul_tensor(gpu, &md, other, a, NULL, c), VKMHA_ERROR_INVALID_ARGUMENT,
           "a", "vkmha_matmul_tensor with another context's tensor");
    expect(gpu, vkmha_matmul_tensor(gpu, &md, a, dead, NULL, c), VKMHA_ERROR_INVALID_ARGUMENT,
           "b", "vkmha_matmul_tensor with a destroyed tensor");
    expect(gpu, vkmha_matmul_tensor(gpu, &md, a, bytes, NULL, c), VKMHA_ERROR_INVALID_ARGUMENT,
           "dtype", "vkmha_matmul_tensor with a U8 tensor as b");
    expect(gpu, vkmha_matmul_tensor(gpu, &md, a, small, NULL, c), VKMHA_ERROR_INVALID_ARGUMENT,
           "15 elements", "vkmha_matmul_tensor with b too small");
    expect(gpu, vkmha_matmul_tensor(gpu, &md, a, c, NULL, a), VKMHA_ERROR_INVALID_ARGUMENT,
           "shares memory", "vkmha_matmul_tensor with c == a");
    expect(gpu, vkmha_matmul_record(gpu, VK_NULL_HANDLE, &md, a, a, NULL, c),
           VKMHA_ERROR_INVALID_ARGUMENT, "cmd", "vkmha_matmul_record without a command buffer");
    expect(ref, vkmha_matmul_record(ref, (VkCommandBuffer)(uintptr_t)8, &md, other, other, NULL,
                                    other),
           VKMHA_ERROR_UNSUPPORTED, "reference", "vkmha_matmul_record on the reference backend");
    vkmha_tensor_desc td = {VKMHA_DTYPE_F32, 5, {1, 1, 1, 1}};
    vkmha_tensor *t = (vkmha_tensor *)(uintptr_t)1;
    expect(gpu, vkmha_tensor_create(gpu, &td, &t), VKMHA_ERROR_INVALID_ARGUMENT, "desc->rank",
           "vkmha_tensor_create with rank 5");
    t_report(t == NULL, "a failed vkmha_tensor_create writes NULL");
    td = (vkmha_tensor_desc){VKMHA_DTYPE_F32, 4, {65536, 65536, 65536, 65536}};
    expect(gpu, vkmha_tensor_create(gpu, &td, &t), VKMHA_ERROR_INVALID_ARGUMENT, "desc->dims",
           "vkmha_tensor_create whose element count overflows 64 bits");
    td = (vkmha_tensor_desc){VKMHA_DTYPE_F32, 2, {4, 4}};
    expect(gpu, vkmha_tensor_wrap(gpu, &td, (VkBuffer)(uintptr_t)0x1234, 3, 64, &t),
           VKMHA_ERROR_INVALID_ARGUMENT, "offset", "vkmha_tensor_wrap at an unaligned offset");
    expect(gpu, vkmha_tensor_wrap(gpu, &td, VK_NULL_HANDLE, 0, 64, &t),
           VKMHA_ERROR_INVALID_ARGUMENT, "buffer", "vkmha_tensor_wrap of VK_NULL_HANDLE");
    float host[4];
    expect(gpu, vkmha_tensor_upload(a, 60, host, 16), VKMHA_ERROR_INVALID_ARGUMENT, "offset",
           "vkmha_tensor_upload past the end");
    expect(gpu, vkmha_tensor_download(a, 0, NULL, 16), VKMHA_ERROR_INVALID_ARGUMENT, "dst",
           "vkmha_tensor_download to NULL");
    /* The context still computes after all of it. */
    float one[16];
    for (int i = 0; i < 16; i++)
        one[i] = (float)(i % 5);
    float res[16];
    bool ok = vkmha_tensor_upload(a, 0, one, sizeof one) == VKMHA_SUCCESS &&
              vkmha_matmul_tensor(gpu, &md, a, a, NULL, c) == VKMHA_SUCCESS &&
              vkmha_tensor_download(c, 0, res, sizeof res) == VKMHA_SUCCESS;
    double want00 = 0;
    for (int p = 0; p < 4; p++)
        want00 += one[p] * one[p * 4];
    t_report(ok && res[0] == (float)want00, "the context computes after the bad calls");
    vkmha_tensor *list[] = {a, c, other, bytes, small};
    for (size_t i = 0; i < 5; i++)
        vkmha_tensor_destroy(list[i]);
}

static void bad_embedding(void)
{
    vkmha_context *ctx = (vkmha_context *)(uintptr_t)1;
    t_counting cnt = {0};
    vkmha_allocator half = {t_counting_alloc, NULL, NULL, &cnt};
    vkmha_context_desc d = {0};
    d.allocator = &half;
    expect(NULL, vkmha_context_create(&d, &ctx), VKMHA_ERROR_INVALID_ARGUMENT, "",
           "vkmha_context_create with alloc but no free");
    t_report(ctx == NULL && cnt.total == 0, "nothing allocated, *out NULL");
    vkmha_vulkan_desc vd = {0};
    vd.device = (VkDevice)(uintptr_t)0x10;
    d = (vkmha_context_desc){0};
    d.vulkan = &vd;
    expect(NULL, vkmha_context_create(&d, &ctx), VKMHA_ERROR_INVALID_ARGUMENT, "",
           "vkmha_context_create with a device but no instance");
    vd = (vkmha_vulkan_desc){0};
    vd.queue_lock = (void (*)(void *))free;
    expect(NULL, vkmha_context_create(&d, &ctx), VKMHA_ERROR_INVALID_ARGUMENT, "",
           "vkmha_context_create with queue_lock but no queue_unlock");
}

static void no_push_descriptors(const layer_data *ld)
{
    setenv("VKMHA_NO_PUSH_DESCRIPTORS", "1", 1);
    vkmha_context *ctx = t_context(VKMHA_BACKEND_VULKAN, 0);
    unsetenv("VKMHA_NO_PUSH_DESCRIPTORS");
    vkmha_context_info info;
    vkmha_context_get_info(ctx, &info);
    vkmha_mha_desc md = layer_desc(ld);
    vkmha_mha *mha = NULL;
    vkmha_mha_create(ctx, &md, &mha);
    vkmha_tensor *tx = tensor_from(ctx, ld->x, B, L, D), *to = tensor(ctx, VKMHA_DTYPE_F32, 3,
                                                                        B, L, D, 0);
    vkmha_mha_tensors tio = {B, L, 0, tx, tx, tx, NULL, to, NULL, 0, 0, NULL, 0, NULL, NULL};
    /* Recording without them: examples/embed.c run as example_embed_no_push. */
    t_report(!info.push_descriptors, "VKMHA_NO_PUSH_DESCRIPTORS=1 turns push descriptors off");
    /* Submissions still work on descriptor sets (they wait for each other). */
    vkmha_submission *s1 = NULL, *s2 = NULL;
    bool ok = vkmha_mha_submit(mha, &tio, &s1) == VKMHA_SUCCESS &&
              vkmha_mha_submit(mha, &tio, &s2) == VKMHA_SUCCESS &&
              vkmha_submission_wait(s2, UINT64_MAX) == VKMHA_SUCCESS;
    vkmha_submission_destroy(s1);
    vkmha_submission_destroy(s2);
    t_report(ok, "vkmha_mha_submit twice without push descriptors");
    vkmha_tensor_destroy(tx);
    vkmha_tensor_destroy(to);
    vkmha_mha_destroy(mha);
    t_report_validation(ctx);
    vkmha_context_destroy(ctx);
}

static void trim(vkmha_context *ctx, const layer_data *ld, const float *want)
{
    vkmha_mha_desc md = layer_desc(ld);
    vkmha_mha *mha = NULL;
    float *out = t_alloc(N_ACT);
    vkmha_mha_io io = {B, L, 0, ld->x, ld->x, ld->x, NULL, out, NULL, 0, 0, 0, NULL, 0, NULL, NULL};
    vkmha_context_info before, after;
    bool ok = vkmha_mha_create(ctx, &md, &mha) == VKMHA_SUCCESS &&
              vkmha_mha_forward(mha, &io) == VKMHA_SUCCESS &&
              vkmha_context_get_info(ctx, &before) == VKMHA_SUCCESS &&
              vkmha_context_trim(ctx) == VKMHA_SUCCESS &&
              vkmha_context_get_info(ctx, &after) == VKMHA_SUCCESS;
    memset(out, 0, N_ACT * 4);
    ok = ok && vkmha_mha_forward(mha, &io) == VKMHA_SUCCESS;
    t_report(ok && after.device_memory_bytes < before.device_memory_bytes &&
                 t_close("after trim", "out", out, want, N_ACT, 1e-5, 1e-4),
             "vkmha_context_trim frees scratch (%llu -> %llu bytes) and the next forward "
             "still matches the reference",
             (unsigned long long)before.device_memory_bytes,
             (unsigned long long)after.device_memory_bytes);
    vkmha_mha_destroy(mha);
    free(out);
}

/* Scratch replaced while vkmha's own submission is pending is not waited
 * for: it is freed once the submission is done. A forward of a longer
 * sequence (heavy enough to be running still) is submitted on tensors, then
 * a forward of a longer one yet on host arrays grows the same projection
 * slots; the debug log says the replaced buffers wait for the submission,
 * both outputs match the reference (1e-5 + 1e-4 |ref|, as above), the
 * validation layer is silent (it would see a buffer freed while in use),
 * and after the submission is waited for and one more call, the scratch is
 * what the slots hold. */
static int g_deferred;
static void count_deferred(void *user, vkmha_log_level level, vkmha_status status,
                           const char *msg)
{
    if (strstr(msg, "is freed once the pending submissions are done"))
        g_deferred++;
    t_log(user, level, status, msg);
}

static void grow_while_submitted(vkmha_context *ref, const layer_data *ld, t_rng *r)
{
    enum { LS = 384, LB = 520 }; /* the submitted and the growing forward's lengths */
    vkmha_context *ctx = t_context_ex(VKMHA_BACKEND_VULKAN, 0, NULL, count_deferred, NULL);
    const vkmha_mha_desc md = layer_desc(ld);
    vkmha_mha *mha = NULL, *rm = NULL;
    float *xs = t_random(r, (size_t)B * LS * D, -1, 1), *xb = t_random(r, (size_t)B * LB * D, -1, 1);
    float *ws = t_alloc((size_t)B * LS * D), *wb = t_alloc((size_t)B * LB * D),
          *gb = t_alloc((size_t)B * LB * D);
    vkmha_mha_io rs = {B, LS, 0, xs, xs, xs, NULL, ws, NULL, 0, 0, 0, NULL, 0, NULL, NULL},
                 rb = {B, LB, 0, xb, xb, xb, NULL, wb, NULL, 0, 0, 0, NULL, 0, NULL, NULL},
                 gio = {B, LB, 0, xb, xb, xb, NULL, gb, NULL, 0, 0, 0, NULL, 0, NULL, NULL};
    bool ok = vkmha_mha_create(ref, &md, &rm) == VKMHA_SUCCESS &&
              vkmha_mha_forward(rm, &rs) == VKMHA_SUCCESS &&
              vkmha_mha_forward(rm, &rb) == VKMHA_SUCCESS &&
              vkmha_mha_create(ctx, &md, &mha) == VKMHA_SUCCESS;
    /* The slots at the first length, before the submission. */
    vkmha_mha_io first = {B, L, 0, ld->x, ld->x, ld->x, NULL, gb, NULL, 0, 0, 0, NULL, 0, NULL, NULL};
    ok = ok && vkmha_mha_forward(mha, &first) == VKMHA_SUCCESS;
    vkmha_tensor *tx = tensor_from(ctx, xs, B, LS, D), *to = tensor(ctx, VKMHA_DTYPE_F32, 3, B, LS, D, 0);
    vkmha_mha_tensors tio = {B, LS, 0, tx, tx, tx, NULL, to, NULL, 0, 0, NULL, 0, NULL, NULL};
    vkmha_submission *s = NULL;
    g_deferred = 0;
    ok = ok && vkmha_mha_submit(mha, &tio, &s) == VKMHA_SUCCESS;
    const bool running = ok && vkmha_submission_poll(s) == VKMHA_NOT_READY;
    ok = ok && vkmha_mha_forward(mha, &gio) == VKMHA_SUCCESS;
    const int deferred = g_deferred;
    ok = ok && vkmha_submission_wait(s, UINT64_MAX) == VKMHA_SUCCESS;
    vkmha_submission_destroy(s);
    float *gs = download(to);
    ok = ok && t_close("grow while submitted", "submitted out", gs, ws, (size_t)B * LS * D, 1e-5, 1e-4) &&
         t_close("grow while submitted", "growing out", gb, wb, (size_t)B * LB * D, 1e-5, 1e-4);
    /* The growing call ended with the queue idle, so what waited is freed
     * (vk_memory_collect at its end): the scratch is then what the same
     * call leaves after a trim, nothing more. */
    vkmha_context_info held, fresh;
    ok = ok && vkmha_context_get_info(ctx, &held) == VKMHA_SUCCESS &&
         vkmha_context_trim(ctx) == VKMHA_SUCCESS &&
         vkmha_mha_forward(mha, &gio) == VKMHA_SUCCESS &&
         vkmha_context_get_info(ctx, &fresh) == VKMHA_SUCCESS;
    if (!running)
        t_diag("the submission was done before the growing call: nothing had to wait");
    t_report(ok && (deferred > 0 || !running) && held.scratch_bytes == fresh.scratch_bytes,
             "scratch replaced while a submission runs: %d buffers freed once it is done (not "
             "waited for), both outputs match the reference, %llu bytes of scratch held after, "
             "as after a trim and the same call (%llu)",
             deferred, (unsigned long long)held.scratch_bytes,
             (unsigned long long)fresh.scratch_bytes);
    vkmha_tensor_destroy(tx);
    vkmha_tensor_destroy(to);
    vkmha_mha_destroy(mha);
    vkmha_mha_destroy(rm);
    t_report_validation(ctx);
    vkmha_context_destroy(ctx);
    free(xs), free(xb), free(ws), free(wb), free(gb), free(gs);
}

/* ---- the application's loader for vkmha's own instance ---------------------- */

static PFN_vkGetInstanceProcAddr system_gipa;
static long gipa_calls;

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL t_counting_gipa(VkInstance i, const char *name)
{
    gipa_calls++;
    return system_gipa(i, name);
}

/* desc->vulkan with only get_instance_proc_addr: vkmha creates its instance
 * and device through the application's loader. */
static void own_device_custom_loader(const layer_data *ld, const float *want)
{
    void *lib = loader_open();
    system_gipa =
        lib ? (PFN_vkGetInstanceProcAddr)loader_sym(lib, "vkGetInstanceProcAddr") : NULL;
    if (!system_gipa) {
        t_report(false, "custom loader: cannot open " LOADER_NAME ": %s", loader_error());
        return;
    }
    vkmha_vulkan_desc vd = {0};
    vd.get_instance_proc_addr = t_counting_gipa;
    vkmha_context_desc d = {0};
    d.vulkan = &vd;
    d.enable_validation = t_validation();
    d.log = t_log;
    vkmha_context *ctx = NULL;
    vkmha_status st = vkmha_context_create(&d, &ctx);
    if (st != VKMHA_SUCCESS)
        t_diag("vkmha_context_create: %s", vkmha_context_last_error(NULL));
    vkmha_context_info info = {0};
    vkmha_mha *mha = NULL;
    float *out = t_alloc(N_ACT);
    vkmha_mha_desc md = layer_desc(ld);
    vkmha_mha_io io = {B, L, 0, ld->x, ld->x, ld->x, NULL, out, NULL, 0, 0, 0, NULL, 0, NULL, NULL};
    bool ok = st == VKMHA_SUCCESS && vkmha_context_get_info(ctx, &info) == VKMHA_SUCCESS &&
              vkmha_mha_create(ctx, &md, &mha) == VKMHA_SUCCESS &&
              vkmha_mha_forward(mha, &io) == VKMHA_SUCCESS;
    t_report(ok && !info.external_device && gipa_calls > 10 &&
                 t_close("custom loader", "out", out, want, N_ACT, 1e-5, 1e-4),
             "vkmha's own instance and device through the application's "
             "vkGetInstanceProcAddr (%ld calls), forward matches the reference",
             gipa_calls);
    vkmha_mha_destroy(mha);
    if (ctx)
        t_report_validation(ctx);
    vkmha_context_destroy(ctx);
    free(out);
    loader_close(lib);
}

int main(void)
{
    t_rng rng = {2026};
    layer_data ld;
    ld.w = t_random(&rng, 4 * D * D + D, -0.3f, 0.3f);
    ld.x = t_random(&rng, N_ACT, -1, 1);
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    vkmha_context *gpu = t_context(VKMHA_BACKEND_VULKAN, 0);

    /* The reference result of the small layer. */
    float *want = t_alloc(N_ACT);
    vkmha_mha_desc md = layer_desc(&ld);
    vkmha_mha *layer = NULL;
    vkmha_mha_io io = {B, L, 0, ld.x, ld.x, ld.x, NULL, want, NULL, 0, 0, 0, NULL, 0, NULL, NULL};
    if (vkmha_mha_create(ref, &md, &layer) || vkmha_mha_forward(layer, &io)) {
        printf("Bail out! reference layer\n");
        return 1;
    }
    vkmha_mha_destroy(layer);

    tensor_ops(ref, "reference", &rng);
    tensor_ops(gpu, "vulkan", &rng);
    allocator_accounting(VKMHA_BACKEND_REFERENCE, "reference", &ld);
    allocator_accounting(VKMHA_BACKEND_VULKAN, "vulkan", &ld);
    alloc_failures(VKMHA_BACKEND_REFERENCE, "reference", &ld, want);
    alloc_failures(VKMHA_BACKEND_VULKAN, "vulkan", &ld, want);
    bad_tensors(gpu, ref);
    bad_embedding();
    trim(gpu, &ld, want);
    grow_while_submitted(ref, &ld, &rng);
    no_push_descriptors(&ld);
    own_device_custom_loader(&ld, want);

    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
    vkmha_context_destroy(ref);
    free(ld.w);
    free(ld.x);
    free(want);
    return t_finish();
}
