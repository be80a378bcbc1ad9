/* Misuse on both backends. Every bad call must:
 *   (a) return exactly VKMHA_ERROR_INVALID_ARGUMENT (or the documented status),
 *   (b) leave a last-error message that starts with the public function's name
 *       and names the offending argument (as a whole word: "desc->m", "a"),
 *   (c) write nothing: every output buffer is filled with a sentinel first and
 *       must still hold it afterwards,
 *   (d) leave the context usable: a tiny valid softmax right after it gives the
 *       known values (atol 1e-6, rtol 1e-5: softmax of 3 values in fp32) and a
 *       last error of "".
 * The cases: NULL ctx / NULL mha never crash, context creation errors,
 * status strings, destroy(NULL), each tensor form's and dtype's name in its
 * messages, and a layer created before all the errors still computes the
 * same forward afterwards. Bad arguments of the ops and the layer are
 * tests/test_bad_input.c's rows. */
#include "util.h"

#define SENTINEL 12345.0f
#define POOL 4096 /* floats in each scratch buffer */

typedef struct env {
    vkmha_context *ctx;
    const char *name; /* "reference" or "vulkan" */
} env;

static float *g_in;  /* random inputs */
static float *g_out; /* outputs, sentinel-filled before every bad call */
static float *g_w;   /* second output (attention weights), sentinel-filled */

static void fill_sentinel(void)
{
    t_fill(g_out, POOL, SENTINEL);
    t_fill(g_w, POOL, SENTINEL);
}

static bool outputs_untouched(const char *label)
{
    return t_untouched(g_out, POOL, SENTINEL, label) && t_untouched(g_w, POOL, SENTINEL, label);
}

/* Checks (a) to (d) for one bad call and reports it as one case. `fn` is the
 * public function, `arg` the argument the message must name, `extra` an
 * optional further substring. */
static void check_bad(const env *e, vkmha_status got, vkmha_status want, const char *fn,
                      const char *arg, const char *extra, const char *label)
{
    char name[256];
    bool ok = true;
    snprintf(name, sizeof name, "%s: %s", e->name, label);
    if (got != want) {
        t_diag("%s: returned %s, expected %s", name, vkmha_status_string(got),
               vkmha_status_string(want));
        ok = false;
    }
    if (!t_message_names(name, vkmha_context_last_error(e->ctx), fn, arg, extra))
        ok = false;
    if (!outputs_untouched(name))
        ok = false;
    if (!t_context_works(e->ctx, name))
        ok = false;
    t_report(ok, "%s", name);
}

#define BAD(e, want, fn, arg, extra, label, call)                                          \
    do {                                                                                   \
        fill_sentinel();                                                                   \
        vkmha_status bad_st_ = (call);                                                     \
        check_bad((e), bad_st_, (want), (fn), (arg), (extra), (label));                    \
    } while (0)

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT

/* ---- the ops ------------------------------------------------------------- */

static vkmha_matmul_desc mm_ok(void)
{
    vkmha_matmul_desc d = {0};
    d.m = 2;
    d.n = 3;
    d.k = 4;
    return d;
}

static vkmha_softmax_desc sm_ok(void)
{
    vkmha_softmax_desc d = {0};
    d.batch = 2;
    d.heads = 2;
    d.len_q = 2;
    d.len_k = 3;
    return d;
}

static vkmha_attention_desc at_ok(void)
{
    vkmha_attention_desc d = {0};
    d.batch = 2;
    d.heads = 2;
    d.len_q = 2;
    d.len_k = 3;
    d.d_k = 4;
    d.d_v = 5;
    return d;
}

/* ---- the layer ----------------------------------------------------------- */

#define D_MODEL 16
#define N_HEAD 4
#define N_KV 2
#define HEAD_DIM (D_MODEL / N_HEAD)
#define FB 2  /* forward batch */
#define FLQ 5 /* forward len_q */
#define FLK 7 /* forward len_k */

/* The weights (torch.nn.Linear layout) of the layer used by the tests. */
typedef struct weights {
    float *w_q, *w_k, *w_v, *w_o, *b_q, *b_k, *b_v, *b_o, *gamma, *beta;
} weights;

static vkmha_mha_desc layer_desc(const weights *w)
{
    vkmha_mha_desc d = {0};
    d.d_model = D_MODEL;
    d.n_head = N_HEAD;
    d.n_kv_head = N_KV;
    d.w_q = w->w_q;
    d.w_k = w->w_k;
    d.w_v = w->w_v;
    d.w_o = w->w_o;
    d.b_q = w->b_q;
    d.b_k = w->b_k;
    d.b_v = w->b_v;
    d.b_o = w->b_o;
    d.post_norm = true;
    d.norm_gamma = w->gamma;
    d.norm_beta = w->beta;
    return d;
}

static vkmha_mha *const NOT_WRITTEN = (vkmha_mha *)(uintptr_t)0x5e7;

static vkmha_mha_io io_ok(const float *query, const float *key, float *out)
{
    vkmha_mha_io io = {0};
    io.batch = FB;
    io.len_q = FLQ;
    io.len_k = FLK;
    io.query = query;
    io.key = key;
    io.value = key;
    io.out = out;
    return io;
}

/* ---- NULL handles, context creation, status strings ---------------------- */

/* Each form of an op names itself: a tensor call's bad desc is reported as
 * vkmha_<op>_tensor's, not the host-array op's; a bad dtype field of a
 * host-array op names desc->dtype. */
static void call_name_cases(const env *e)
{
    vkmha_tensor *t = NULL;
    const vkmha_tensor_desc td = {VKMHA_DTYPE_F32, 1, {64}};
    if (vkmha_tensor_create(e->ctx, &td, &t) != VKMHA_SUCCESS) {
        t_report(false, "%s: a tensor for the call-name cases", e->name);
        return;
    }
    BAD(e, INVALID, "vkmha_matmul_tensor", "desc", NULL, "matmul_tensor NULL desc",
        vkmha_matmul_tensor(e->ctx, NULL, t, t, NULL, t));
    BAD(e, INVALID, "vkmha_softmax_tensor", "desc", NULL, "softmax_tensor NULL desc",
        vkmha_softmax_tensor(e->ctx, NULL, t, NULL, t));
    BAD(e, INVALID, "vkmha_split_heads_tensor", "desc", NULL, "split_heads_tensor NULL desc",
        vkmha_split_heads_tensor(e->ctx, NULL, t, t));
    BAD(e, INVALID, "vkmha_merge_heads_tensor", "desc", NULL, "merge_heads_tensor NULL desc",
        vkmha_merge_heads_tensor(e->ctx, NULL, t, t));
    BAD(e, INVALID, "vkmha_attention_tensor", "desc", NULL, "attention_tensor NULL desc",
        vkmha_attention_tensor(e->ctx, NULL, t, t, t, NULL, t, NULL));
    vkmha_attention_desc ad = {0};
    ad.heads = 1, ad.len_q = ad.len_k = 2, ad.d_k = ad.d_v = 2;
    ad.dtype = VKMHA_DTYPE_U8;
    BAD(e, INVALID, "vkmha_attention", "desc->dtype", NULL, "attention dtype U8",
        vkmha_attention(e->ctx, &ad, g_in, g_in, g_in, NULL, g_out, NULL));
    vkmha_matmul_desc md = mm_ok();
    md.dtype = 77;
    BAD(e, INVALID, "vkmha_matmul", "desc->dtype", NULL, "matmul dtype 77",
        vkmha_matmul(e->ctx, &md, g_in, g_in, NULL, g_out));
    vkmha_tensor_destroy(t);
}

static void null_handle_cases(const weights *w)
{
    vkmha_matmul_desc md = mm_ok();
    vkmha_softmax_desc sd = sm_ok();
    vkmha_heads_desc hd = {2, 3, 2, 4, 0};
    vkmha_attention_desc ad = at_ok();
    vkmha_mha_desc ld = layer_desc(w);
    vkmha_mha_io io = io_ok(g_in, g_in + 1000, g_out);
    vkmha_context_info info;
    vkmha_mha_desc got_desc;
    vkmha_mha *m = NOT_WRITTEN;
    bool ok = true;

    fill_sentinel();
    T_EXPECT_STATUS(vkmha_matmul(NULL, &md, g_in, g_in + 100, NULL, g_out), INVALID, ok);
    T_EXPECT_STATUS(vkmha_softmax(NULL, &sd, g_in, NULL, g_out), INVALID, ok);
    T_EXPECT_STATUS(vkmha_split_heads(NULL, &hd, g_in, g_out), INVALID, ok);
    T_EXPECT_STATUS(vkmha_merge_heads(NULL, &hd, g_in, g_out), INVALID, ok);
    T_EXPECT_STATUS(vkmha_attention(NULL, &ad, g_in, g_in + 200, g_in + 400, NULL, g_out, g_w),
                    INVALID, ok);
    T_EXPECT_STATUS(vkmha_mha_create(NULL, &ld, &m), INVALID, ok);
    ok = outputs_untouched("NULL ctx") && ok;
    /* A NULL context cannot receive the NULL *out, so either is acceptable. */
    if (m != NOT_WRITTEN && m != NULL) {
        t_diag("vkmha_mha_create(NULL ctx) wrote a non-NULL handle");
        ok = false;
    }
    t_report(ok, "NULL ctx: every op returns VKMHA_ERROR_INVALID_ARGUMENT and writes nothing");

    ok = true;
    fill_sentinel();
    T_EXPECT_STATUS(vkmha_mha_forward(NULL, &io), INVALID, ok);
    T_EXPECT_STATUS(vkmha_mha_forward(NULL, NULL), INVALID, ok);
    T_EXPECT_STATUS(vkmha_mha_get_desc(NULL, &got_desc), INVALID, ok);
    ok = outputs_untouched("NULL mha") && ok;
    t_report(ok, "NULL mha: forward and get_desc return VKMHA_ERROR_INVALID_ARGUMENT");

    ok = true;
    T_EXPECT_STATUS(vkmha_context_get_info(NULL, &info), INVALID, ok);
    vkmha_kernel_info kernel;
    uint32_t kernel_count = 1;
    T_EXPECT_STATUS(vkmha_context_get_kernels(NULL, &kernel_count, &kernel), INVALID, ok);
    T_EXPECT_STATUS(vkmha_context_get_kernels(NULL, NULL, NULL), INVALID, ok);
    vkmha_profile_step step;
    uint32_t step_count = 1;
    T_EXPECT_STATUS(vkmha_context_get_profile(NULL, &step_count, &step), INVALID, ok);
    T_EXPECT_STATUS(vkmha_context_get_profile(NULL, NULL, NULL), INVALID, ok);
    const char *le = vkmha_context_last_error(NULL);
    if (!le) {
        t_diag("vkmha_context_last_error(NULL) is NULL");
        ok = false;
    }
    t_report(ok, "NULL ctx: get_info, get_kernels and get_profile fail, last_error is a string");

    vkmha_context_destroy(NULL);
    vkmha_mha_destroy(NULL);
    t_report(true, "vkmha_context_destroy(NULL) and vkmha_mha_destroy(NULL) are no-ops");
}

/* One vkmha_context_create failure: status, *out NULL, the logger got a
 * message naming `arg`. */
static void bad_context(vkmha_context_desc *d, bool null_out, vkmha_status want,
                        const char *arg, const char *label)
{
    t_log_capture cap = {0};
    vkmha_context *ctx = (vkmha_context *)(uintptr_t)0x5e7;
    bool ok = true;
    d->log = t_capture_log;
    d->log_user = &cap;
    vkmha_status st = vkmha_context_create(d, null_out ? NULL : &ctx);
    T_EXPECT_STATUS(st, want, ok);
    if (!null_out && ctx != NULL) {
        t_diag("%s: *out is %p, not NULL", label, (void *)ctx);
        if (st == VKMHA_SUCCESS)
            vkmha_context_destroy(ctx);
        ok = false;
    }
    if (cap.calls == 0) {
        t_diag("%s: the logger got no message", label);
        ok = false;
    } else {
        if (cap.status != want) {
            t_diag("%s: the logger got status %s", label, vkmha_status_string(cap.status));
            ok = false;
        }
        if (strncmp(cap.msg, "vkmha_context_create:", 21) != 0 || !t_has_word(cap.msg, arg)) {
            t_diag("%s: logged \"%s\" does not name \"%s\"", label, cap.msg, arg);
            ok = false;
        }
    }
    /* The same message without a logger: the thread's creation error. */
    if (strcmp(vkmha_context_last_error(NULL), cap.msg) != 0) {
        t_diag("%s: vkmha_context_last_error(NULL) is \"%s\", the logger got \"%s\"", label,
               vkmha_context_last_error(NULL), cap.msg);
        ok = false;
    }
    t_report(ok, "%s", label);
}

static void context_create_cases(void)
{
    vkmha_context_desc d;
    memset(&d, 0, sizeof d);
    d.backend = VKMHA_BACKEND_REFERENCE;
    bad_context(&d, true, INVALID, "out", "context_create reference NULL out");
    memset(&d, 0, sizeof d);
    d.backend = VKMHA_BACKEND_VULKAN;
    bad_context(&d, true, INVALID, "out", "context_create vulkan NULL out");
    memset(&d, 0, sizeof d);
    d.backend = 7;
    bad_context(&d, false, INVALID, "desc->backend", "context_create backend 7");
    memset(&d, 0, sizeof d);
    d.backend = VKMHA_BACKEND_REFERENCE;
    d.flags = 1u << 5;
    bad_context(&d, false, INVALID, "desc->flags", "context_create reference unknown flag 0x20");
    memset(&d, 0, sizeof d);
    d.backend = VKMHA_BACKEND_VULKAN;
    d.flags = VKMHA_CONTEXT_NO_SUBGROUP_OPS | 0x80000000u;
    bad_context(&d, false, INVALID, "desc->flags", "context_create vulkan unknown flag 0x80000000");
    memset(&d, 0, sizeof d);
    d.backend = VKMHA_BACKEND_VULKAN;
    d.use_device_index = true;
    d.device_index = 99;
    bad_context(&d, false, VKMHA_ERROR_NO_DEVICE, "desc->device_index",
                "context_create device_index 99: VKMHA_ERROR_NO_DEVICE");
    memset(&d, 0, sizeof d);
    d.backend = VKMHA_BACKEND_REFERENCE;
    d.log_level = VKMHA_LOG_ERROR + 1;
    bad_context(&d, false, INVALID, "desc->log_level", "context_create log_level above ERROR");
}

static void status_string_cases(void)
{
    static const struct {
        vkmha_status s;
        const char *name;
    } all[] = {
        {VKMHA_SUCCESS, "VKMHA_SUCCESS"},
        {VKMHA_ERROR_INVALID_ARGUMENT, "VKMHA_ERROR_INVALID_ARGUMENT"},
        {VKMHA_ERROR_UNSUPPORTED, "VKMHA_ERROR_UNSUPPORTED"},
        {VKMHA_ERROR_NO_DEVICE, "VKMHA_ERROR_NO_DEVICE"},
        {VKMHA_ERROR_OUT_OF_HOST_MEMORY, "VKMHA_ERROR_OUT_OF_HOST_MEMORY"},
        {VKMHA_ERROR_OUT_OF_DEVICE_MEMORY, "VKMHA_ERROR_OUT_OF_DEVICE_MEMORY"},
        {VKMHA_ERROR_DEVICE_LOST, "VKMHA_ERROR_DEVICE_LOST"},
        {VKMHA_ERROR_VULKAN, "VKMHA_ERROR_VULKAN"},
    };
    const size_t n = sizeof all / sizeof all[0];
    const char *got[sizeof all / sizeof all[0] + 2];
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        got[i] = vkmha_status_string(all[i].s);
        if (!got[i] || strcmp(got[i], all[i].name) != 0) {
            t_diag("vkmha_status_string(%d) = \"%s\", expected \"%s\"", (int)all[i].s,
                   got[i] ? got[i] : "(NULL)", all[i].name);
            ok = false;
        }
    }
    got[n] = vkmha_status_string((vkmha_status)-99);
    got[n + 1] = vkmha_status_string((vkmha_status)5);
    for (size_t i = n; i < n + 2; i++)
        if (!got[i] || !got[i][0]) {
            t_diag("vkmha_status_string of an unknown value is NULL or empty");
            ok = false;
        }
    for (size_t i = 0; ok && i < n + 2; i++)
        for (size_t j = i + 1; j < n + 2; j++)
            if ((i < n || j < n) /* the two unknown values may share a name */ &&
                strcmp(got[i], got[j]) == 0) {
                t_diag("statuses %zu and %zu share the name \"%s\"", i, j, got[i]);
                ok = false;
            }
    t_report(ok, "vkmha_status_string: every status named, unknown values non-NULL, distinct");
}

/* ---- main ---------------------------------------------------------------- */

static float *forward_once(vkmha_mha *layer, const char *what, bool *ok)
{
    float *out = t_alloc((size_t)FB * FLQ * D_MODEL);
    static uint8_t pad[FB * FLK];
    for (size_t i = 0; i < sizeof pad; i++)
        pad[i] = i % FLK != 2; /* key 2 masked in every batch entry */
    vkmha_mask m = {0};
    m.kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL;
    m.key_padding = pad;
    vkmha_mha_io io = io_ok(g_in + 2000, g_in + 3000, out);
    io.mask = &m;
    vkmha_status st = vkmha_mha_forward(layer, &io);
    if (st != VKMHA_SUCCESS) {
        t_diag("%s: forward failed: %s", what, vkmha_status_string(st));
        *ok = false;
    }
    return out;
}

int main(void)
{
    t_rng rng = {7};
    env envs[2];
    envs[0].ctx = t_context(VKMHA_BACKEND_REFERENCE, 0);
    envs[0].name = "reference";
    envs[1].ctx = t_context(VKMHA_BACKEND_VULKAN, 0);
    envs[1].name = "vulkan";

    g_in = t_random(&rng, POOL, -1, 1);
    g_out = t_alloc(POOL);
    g_w = t_alloc(POOL);
    weights w;
    w.w_q = t_random(&rng, D_MODEL * N_HEAD * HEAD_DIM, -0.5f, 0.5f);
    w.w_k = t_random(&rng, D_MODEL * N_KV * HEAD_DIM, -0.5f, 0.5f);
    w.w_v = t_random(&rng, D_MODEL * N_KV * HEAD_DIM, -0.5f, 0.5f);
    w.w_o = t_random(&rng, D_MODEL * N_HEAD * HEAD_DIM, -0.5f, 0.5f);
    w.b_q = t_random(&rng, N_HEAD * HEAD_DIM, -0.1f, 0.1f);
    w.b_k = t_random(&rng, N_KV * HEAD_DIM, -0.1f, 0.1f);
    w.b_v = t_random(&rng, N_KV * HEAD_DIM, -0.1f, 0.1f);
    w.b_o = t_random(&rng, D_MODEL, -0.1f, 0.1f);
    w.gamma = t_random(&rng, D_MODEL, 0.5f, 1.5f);
    w.beta = t_random(&rng, D_MODEL, -0.1f, 0.1f);

    /* A valid layer on each backend, created before any error. */
    vkmha_mha *layer[2] = {NULL, NULL};
    float *before[2] = {NULL, NULL};
    bool ok = true;
    vkmha_mha_desc ld = layer_desc(&w);
    for (int i = 0; i < 2; i++) {
        vkmha_status st = vkmha_mha_create(envs[i].ctx, &ld, &layer[i]);
        if (st != VKMHA_SUCCESS) {
            printf("Bail out! %s: cannot create the layer: %s (%s)\n", envs[i].name,
                   vkmha_status_string(st), vkmha_context_last_error(envs[i].ctx));
            return 1;
        }
        before[i] = forward_once(layer[i], envs[i].name, &ok);
    }

    null_handle_cases(&w);
    context_create_cases();
    status_string_cases();

    for (int i = 0; i < 2; i++)
        call_name_cases(&envs[i]);

    /* The layers created before the errors still compute the same forward.
     * Same backend before vs after: atol 1e-6, rtol 1e-6 (same computation,
     * expected bit-identical). Vulkan vs reference: atol 1e-4, rtol 1e-4
     * (fp32 accumulation over d_model = 16 terms through two projections,
     * attention and LayerNorm, vs double accumulation). */
    float *after[2];
    for (int i = 0; i < 2; i++)
        after[i] = forward_once(layer[i], envs[i].name, &ok);
    size_t n = (size_t)FB * FLQ * D_MODEL;
    for (int i = 0; i < 2; i++) {
        char label[128];
        snprintf(label, sizeof label, "%s: layer created before the errors", envs[i].name);
        ok = t_close(label, "out after vs before", after[i], before[i], n, 1e-6, 1e-6) && ok;
    }
    ok = t_close("layer after the errors", "vulkan out vs reference", after[1], after[0], n,
                 1e-4, 1e-4) &&
         ok;
    t_report(ok, "a layer created before the errors gives the same forward after them "
                 "(vulkan vs reference atol 1e-4 rtol 1e-4)");

    for (int i = 0; i < 2; i++) {
        vkmha_mha_destroy(layer[i]);
        free(before[i]);
        free(after[i]);
    }
    free(w.w_q);
    free(w.w_k);
    free(w.w_v);
    free(w.w_o);
    free(w.b_q);
    free(w.b_k);
    free(w.b_v);
    free(w.b_o);
    free(w.gamma);
    free(w.beta);
    free(g_in);
    free(g_out);
    free(g_w);

    t_report_validation(envs[1].ctx);
    vkmha_context_destroy(envs[1].ctx);
    vkmha_context_destroy(envs[0].ctx);
    return t_finish();
}
