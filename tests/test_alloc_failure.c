/* Device-memory allocation failures, in the spirit of SQLite's malloc tests:
 * a scenario (context creation, vkmha_mha_create, forwards on the fused and
 * the unfused path, vkmha_matmul, vkmha_attention) runs again and again on a
 * fresh context whose N-th vkAllocateMemory fails (vkmha_debug_options), for
 * N = 1, 2, ... until a run needs no failure. Two kinds of failure:
 *
 *   transient: only allocation N fails. The failing call returns
 *     VKMHA_ERROR_OUT_OF_DEVICE_MEMORY with a message that starts with the
 *     public function's name, writes no output, and the same call repeated
 *     succeeds and matches the reference backend; at the end the context
 *     holds exactly the device memory of a run without failures;
 *   persistent: allocation N and every later one fail. Every call returns
 *     success (matching the reference) or VKMHA_ERROR_OUT_OF_DEVICE_MEMORY.
 *
 * The transient sweep runs again with the self-check on: each path is then
 * checked by the first call that may take it, so its canaries' allocations
 * fail inside that call, which must fail cleanly and check again when
 * repeated.
 *
 * Every run: the validation layer stays silent up to and including
 * vkDestroyDevice, where it reports any VkDeviceMemory or VkBuffer not freed
 * (the logger here outlives the context, so those messages are counted).
 * Host leaks are the sanitizer build's job (tools/run-tests, build-asan).
 *
 * Then a real over-allocation: layers are created on one context until their
 * weights exceed the device-local heap; the next vkmha_mha_create returns
 * VKMHA_ERROR_OUT_OF_DEVICE_MEMORY without asking the driver (lavapipe backs
 * device memory with host memory and would grant it), and the context keeps
 * working. */
#include "util.h"

#include <unistd.h>

#define SENTINEL 12345.0f
#define MAX_RUNS 400 /* far above the scenario's allocations: a bound, not a goal */

/* ---- the scenario ---------------------------------------------------------- */

enum step {
    STEP_MHA_CREATE,
    STEP_FORWARD_FUSED,
    STEP_FORWARD_UNFUSED,
    STEP_MATMUL,
    STEP_ATTENTION,
    STEP_COUNT
};
static const char *const step_names[STEP_COUNT] = {
    "vkmha_mha_create", "vkmha_mha_forward", "vkmha_mha_forward", "vkmha_matmul",
    "vkmha_attention"};

/* Inputs and the reference backend's results, computed once. */
typedef struct fixture {
    t_layer layer;
    float *want_fused, *want_unfused, *want_weights;
    vkmha_matmul_desc mm;
    float *a, *b, *bias, *want_c;
    size_t nc;
    vkmha_attention_desc at;
    float *q, *k, *v, *want_o;
    size_t no;
    float *got, *got_w; /* outputs, sentinel-filled before each call */
    size_t n_got, n_got_w;
} fixture;

static fixture fx;

static void fill_outputs(void)
{
    t_fill(fx.got, fx.n_got, SENTINEL);
    t_fill(fx.got_w, fx.n_got_w, SENTINEL);
}

static bool outputs_untouched(void)
{
    return t_untouched(fx.got, fx.n_got, SENTINEL, NULL) &&
           t_untouched(fx.got_w, fx.n_got_w, SENTINEL, NULL);
}

static void fixture_make(vkmha_context *ref, t_rng *rng)
{
    t_layer_make(&fx.layer, rng, 32, 4, 2, 2, 9, 13,
                 VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL | VKMHA_MASK_BIAS);
    fx.want_fused = t_alloc(fx.layer.n_out);
    fx.want_unfused = t_alloc(fx.layer.n_out);
    fx.want_weights = t_alloc(fx.layer.n_weights);
    vkmha_mha *m = NULL;
    bool ok = vkmha_mha_create(ref, &fx.layer.desc, &m) == VKMHA_SUCCESS;
    vkmha_mha_io io = fx.layer.io;
    io.out = fx.want_fused;
    ok = ok && vkmha_mha_forward(m, &io) == VKMHA_SUCCESS;
    io.out = fx.want_unfused;
    io.attn_weights = fx.want_weights;
    ok = ok && vkmha_mha_forward(m, &io) == VKMHA_SUCCESS;
    vkmha_mha_destroy(m);

    /* a: 100 KiB, more than the 64 KiB a slot starts with, so the matmul
     * reallocates what the forwards left. */
    vkmha_matmul_desc mm = {0};
    mm.m = 200, mm.n = 64, mm.k = 128, mm.op_b = VKMHA_OP_T;
    fx.mm = mm;
    fx.a = t_random(rng, 200 * 128, -1, 1);
    fx.b = t_random(rng, 64 * 128, -1, 1);
    fx.bias = t_random(rng, 64, -1, 1);
    fx.nc = 200 * 64;
    fx.want_c = t_alloc(fx.nc);
    ok = ok && vkmha_matmul(ref, &fx.mm, fx.a, fx.b, fx.bias, fx.want_c) == VKMHA_SUCCESS;

    /* Split-K: partial outputs and statistics, their own slots. */
    vkmha_attention_desc at = {2, 4, 2, 5, 150, 16, 8, 0, VKMHA_ATTENTION_PATH_FUSED, 3, 0};
    fx.at = at;
    fx.q = t_random(rng, 2 * 4 * 5 * 16, -1, 1);
    fx.k = t_random(rng, 2 * 2 * 150 * 16, -1, 1);
    fx.v = t_random(rng, 2 * 2 * 150 * 8, -1, 1);
    fx.no = 2 * 4 * 5 * 8;
    fx.want_o = t_alloc(fx.no);
    ok = ok && vkmha_attention(ref, &fx.at, fx.q, fx.k, fx.v, NULL, fx.want_o, NULL) ==
                   VKMHA_SUCCESS;
    fx.n_got = fx.nc > fx.layer.n_out ? fx.nc : fx.layer.n_out;
    fx.n_got_w = fx.layer.n_weights;
    fx.got = t_alloc(fx.n_got);
    fx.got_w = t_alloc(fx.n_got_w);
    if (!ok) {
        printf("Bail out! the reference backend failed on the scenario's inputs\n");
        exit(1);
    }
}

static void fixture_free(void)
{
    t_layer_free(&fx.layer);
    float *owned[] = {fx.want_fused, fx.want_unfused, fx.want_weights, fx.a, fx.b, fx.bias,
                      fx.want_c, fx.q, fx.k, fx.v, fx.want_o, fx.got, fx.got_w};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        free(owned[i]);
}

/* Runs one step on ctx; on success compares with the reference (into
 * *close). */
static vkmha_status run_step(int step, vkmha_context *ctx, vkmha_mha **mha, bool *close)
{
    vkmha_status st;
    vkmha_mha_io io = fx.layer.io;
    *close = false;
    fill_outputs();
    switch (step) {
    case STEP_MHA_CREATE:
        st = vkmha_mha_create(ctx, &fx.layer.desc, mha);
        *close = st == VKMHA_SUCCESS && *mha != NULL;
        return st;
    case STEP_FORWARD_FUSED:
        io.out = fx.got;
        st = vkmha_mha_forward(*mha, &io);
        *close = !st && t_close("forward", "out", fx.got, fx.want_fused, fx.layer.n_out,
                                T_LAYER_ATOL, T_LAYER_RTOL);
        return st;
    case STEP_FORWARD_UNFUSED:
        io.out = fx.got;
        io.attn_weights = fx.got_w;
        io.attention_path = VKMHA_ATTENTION_PATH_UNFUSED;
        st = vkmha_mha_forward(*mha, &io);
        *close = !st &&
                 t_close("unfused forward", "attn_weights", fx.got_w, fx.want_weights,
                         fx.layer.n_weights, 1e-6, 1e-5) &&
                 t_close("unfused forward", "out", fx.got, fx.want_unfused, fx.layer.n_out,
                         T_LAYER_ATOL, T_LAYER_RTOL);
        return st;
    case STEP_MATMUL:
        st = vkmha_matmul(ctx, &fx.mm, fx.a, fx.b, fx.bias, fx.got);
        *close = !st && t_close("matmul", "c", fx.got, fx.want_c, fx.nc,
                                2e-6 * sqrt(128.0), 1e-5);
        return st;
    default:
        st = vkmha_attention(ctx, &fx.at, fx.q, fx.k, fx.v, NULL, fx.got, NULL);
        *close = !st && t_close("attention", "out", fx.got, fx.want_o, fx.no,
                                2e-6 * sqrt(150.0), 1e-5);
        return st;
    }
}

/* ---- one run ----------------------------------------------------------------- */

/* The logger of a run: outlives the context, so that what the validation
 * layer reports while the device is destroyed (objects never freed) counts. */
typedef struct run_log {
    int validation;
    char last_error[512];
} run_log;

static void run_logger(void *user, vkmha_log_level level, vkmha_status status, const char *msg)
{
    run_log *r = (run_log *)user;
    if (strstr(msg, "validation layer")) {
        r->validation++;
        t_diag("%s", msg);
    } else if (level >= VKMHA_LOG_ERROR && status != VKMHA_SUCCESS) {
        snprintf(r->last_error, sizeof r->last_error, "%s", msg);
    }
}

typedef struct run_result {
    bool injected;   /* some call got OUT_OF_DEVICE_MEMORY */
    bool ok;
    uint64_t memory; /* device_memory_bytes at the end, with the layer */
    uint64_t memory_no_layer;
    char where[64];  /* the first call that failed */
} run_result;

/* An OUT_OF_DEVICE_MEMORY from `fn`: message and untouched outputs. */
static bool check_oom(const char *label, const char *fn, const char *msg)
{
    size_t fl = strlen(fn);
    bool ok = strncmp(msg, fn, fl) == 0 && msg[fl] == ':' &&
              strstr(msg, "VK_ERROR_OUT_OF_DEVICE_MEMORY") != NULL;
    if (!ok)
        t_diag("%s: message \"%s\" does not start with \"%s:\" or lacks the VkResult", label,
               msg, fn);
    if (!outputs_untouched()) {
        t_diag("%s: an output was written by the failed call", label);
        ok = false;
    }
    return ok;
}

/* fail_at 0: no failure (the baseline). persistent: every allocation from
 * fail_at on fails. */
/* Whether the runs' contexts have the self-check on (the last sweep). */
static bool g_checked;

static run_result run(uint64_t fail_at, bool persistent)
{
    run_result res = {false, true, 0, 0, ""};
    run_log log = {0, ""};
    char label[128];
    snprintf(label, sizeof label, "%s failure at device allocation %llu%s",
             persistent ? "persistent" : "transient", (unsigned long long)fail_at,
             g_checked ? " (self-check on)" : "");
    vkmha_debug_options dbg = {.fail_device_allocation_at = fail_at,
                               .fail_device_allocation_count = persistent ? UINT64_MAX : 1};
    vkmha_context_desc cd = {0};
    cd.enable_validation = t_validation();
    cd.debug = &dbg;
    cd.log = run_logger;
    cd.log_user = &log;
    /* Every allocation point of creation and the forward, each run in turn;
     * the self-check's canaries (test_selfcheck.c) multiply them: only the
     * last sweep has them. */
    cd.flags = g_checked ? 0 : VKMHA_CONTEXT_NO_SELF_CHECK;
    vkmha_context *ctx = (vkmha_context *)(uintptr_t)1;
    fill_outputs();
    vkmha_status st = vkmha_context_create(&cd, &ctx);
    if (st != VKMHA_SUCCESS) {
        res.injected = true;
        snprintf(res.where, sizeof res.where, "vkmha_context_create");
        res.ok = st == VKMHA_ERROR_OUT_OF_DEVICE_MEMORY && ctx == NULL &&
                 check_oom(label, "vkmha_context_create", log.last_error);
        if (st != VKMHA_ERROR_OUT_OF_DEVICE_MEMORY)
            t_diag("%s: vkmha_context_create returned %s", label, vkmha_status_string(st));
        res.ok = res.ok && log.validation == 0;
        return res;
    }

    vkmha_mha *mha = NULL;
    for (int s = 0; s < STEP_COUNT; s++) {
        bool close;
        if (s > STEP_MHA_CREATE && s <= STEP_FORWARD_UNFUSED && !mha)
            continue; /* persistent failures: no layer to run */
        st = run_step(s, ctx, &mha, &close);
        if (st == VKMHA_SUCCESS) {
            if (!close) {
                t_diag("%s: %s succeeded with wrong results", label, step_names[s]);
                res.ok = false;
            }
            continue;
        }
        if (st != VKMHA_ERROR_OUT_OF_DEVICE_MEMORY) {
            t_diag("%s: %s returned %s: %s", label, step_names[s], vkmha_status_string(st),
                   vkmha_context_last_error(ctx));
            res.ok = false;
            continue;
        }
        if (!res.injected)
            snprintf(res.where, sizeof res.where, "%s", step_names[s]);
        res.injected = true;
        res.ok = check_oom(label, step_names[s], vkmha_context_last_error(ctx)) && res.ok;
        if (s == STEP_MHA_CREATE && mha != NULL) {
            t_diag("%s: vkmha_mha_create failed but wrote a handle", label);
            res.ok = false;
        }
        if (persistent)
            continue;
        /* Transient: the same call again works and is right. */
        st = run_step(s, ctx, &mha, &close);
        if (st || !close) {
            t_diag("%s: %s repeated after the failure: %s, results %s", label,
                   step_names[s], vkmha_status_string(st), close ? "right" : "wrong");
            res.ok = false;
        }
    }
    vkmha_context_info info;
    vkmha_context_get_info(ctx, &info);
    res.memory = info.device_memory_bytes;
    vkmha_mha_destroy(mha);
    vkmha_context_get_info(ctx, &info);
    res.memory_no_layer = info.device_memory_bytes;
    vkmha_context_destroy(ctx);
    if (log.validation) {
        t_diag("%s: %d validation messages (leaked Vulkan objects are reported at "
               "vkDestroyDevice)",
               label, log.validation);
        res.ok = false;
    }
    return res;
}

/* Runs fail_at = 1, 2, ... until a run needs no failure; reports one case per
 * run. Returns the allocation points tried. */
static int sweep(bool persistent, const run_result *base)
{
    uint64_t n;
    for (n = 1; n <= MAX_RUNS; n++) {
        run_result r = run(n, persistent);
        if (!r.injected) {
            bool ok = r.ok && r.memory == base->memory;
            t_report(ok, "%s failures%s: a run with allocation %llu failing needs no failure "
                     "(the scenario makes %llu device allocations) and ends like the baseline",
                     persistent ? "persistent" : "transient",
                     g_checked ? " (self-check on)" : "", (unsigned long long)n,
                     (unsigned long long)(n - 1));
            break;
        }
        bool memory_ok = persistent ? r.memory <= base->memory
                                    : r.memory == base->memory &&
                                          r.memory_no_layer == base->memory_no_layer;
        if (strcmp(r.where, "vkmha_context_create") != 0 && !memory_ok) {
            t_diag("device memory at the end: %llu bytes (%llu without the layer), baseline "
                   "%llu (%llu)",
                   (unsigned long long)r.memory, (unsigned long long)r.memory_no_layer,
                   (unsigned long long)base->memory, (unsigned long long)base->memory_no_layer);
            r.ok = false;
        }
        t_report(r.ok, "%s failure at device allocation %llu%s: %s returns "
                 "VKMHA_ERROR_OUT_OF_DEVICE_MEMORY, %s, no leak",
                 persistent ? "persistent" : "transient", (unsigned long long)n,
                 g_checked ? " (self-check on)" : "", r.where,
                 persistent ? "every call succeeds or fails cleanly"
                            : "the call repeated succeeds and matches the reference");
    }
    if (n > MAX_RUNS)
        t_report(false, "the scenario still fails after %d allocation points", MAX_RUNS);
    t_diag("%s failures: %llu device allocation points tried",
           persistent ? "persistent" : "transient", (unsigned long long)(n - 1));
    return (int)(n - 1);
}

/* ---- a real over-allocation ---------------------------------------------------- */

/* The memory this test may fill: the device-local heap, but at most 2 GiB
 * and a quarter of the host's available memory (a heap that is the host's
 * RAM, Mesa 25's lavapipe: 24 GB on a 24 GB machine, would otherwise be
 * filled while other tests run). */
static uint64_t fill_limit(uint64_t heap)
{
    uint64_t most = 2ull << 30;
#ifdef _SC_AVPHYS_PAGES
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (uint64_t)pages * (uint64_t)page / 4 < most)
        most = (uint64_t)pages * (uint64_t)page / 4;
#endif
    return heap < most ? heap : most;
}

/* A tensor of about the device-local heap's size, and one past it, on a
 * context whose limits are the device's own: each is refused cleanly (a
 * status and a message naming the call, no memory held) or, for the first,
 * made within the heap and the device's budget; never the host's memory
 * taken (the tensor is not written: nothing here touches its pages). */
static void near_heap_tensor_case(void)
{
    vkmha_context *gpu = t_context(VKMHA_BACKEND_VULKAN, 0);
    vkmha_context_info before, after;
    bool ok = !vkmha_context_get_info(gpu, &before);
    const uint64_t heap = before.device.device_local_memory;
    const uint64_t sizes[2] = {heap - heap / 8, heap + (1u << 20)};
    for (int i = 0; ok && i < 2; i++) {
        /* Rows of 4 KiB (fp32 [rows][1024]). */
        const uint64_t rows = sizes[i] / 4096;
        const vkmha_tensor_desc td = {VKMHA_DTYPE_F32, 2,
                                      {rows > UINT32_MAX ? UINT32_MAX : (uint32_t)rows, 1024}};
        vkmha_tensor *t = NULL;
        const vkmha_status st = vkmha_tensor_create(gpu, &td, &t);
        const char *msg = vkmha_context_last_error(gpu);
        ok = !vkmha_context_get_info(gpu, &after);
        t_diag("a tensor of %llu MiB on a heap of %llu MiB: %s%s%s",
               (unsigned long long)(rows >> 8), (unsigned long long)(heap >> 20),
               vkmha_status_string(st), st ? ": " : "", st ? msg : "");
        if (st == VKMHA_SUCCESS)
            ok = ok && i == 0 && t && after.device_memory_bytes <= heap;
        else
            ok = ok && !t &&
                 (st == VKMHA_ERROR_OUT_OF_DEVICE_MEMORY || st == VKMHA_ERROR_UNSUPPORTED) &&
                 strncmp(msg, "vkmha_tensor_create: ", 21) == 0 &&
                 after.device_memory_bytes == before.device_memory_bytes;
        vkmha_tensor_destroy(t);
    }
    ok = ok && !vkmha_context_get_info(gpu, &after) &&
         after.device_memory_bytes == before.device_memory_bytes && t_context_works(gpu, "");
    t_report(ok, "tensors of 7/8 of the device-local heap and past it: made within the heap, "
                 "or refused cleanly with nothing held; the context works after");
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
}

static void over_allocation_case(void)
{
    vkmha_context *gpu = t_context(VKMHA_BACKEND_VULKAN, 0);
    vkmha_context_info info;
    vkmha_context_get_info(gpu, &info);
    const uint64_t limit = fill_limit(info.device.device_local_memory);
    if (limit < info.device.device_local_memory) {
        vkmha_context_destroy(gpu);
        const vkmha_debug_options lowered = {.max_device_local_memory = limit};
        gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &lowered, NULL, NULL);
        vkmha_context_get_info(gpu, &info);
        t_diag("the device-local heap lowered to %llu MiB (desc->debug->max_device_local_memory)",
               (unsigned long long)(limit >> 20));
    }
    /* Layers of d_model 4096 (4 weights of 64 MiB) until the heap is full.
     * The weight arrays are never written: calloc maps zero pages, so only
     * the device copies take host memory (lavapipe), at most the heap. */
    const uint32_t dm = 4096;
    const size_t nw = (size_t)dm * dm;
    float *w = calloc(nw, sizeof(float));
    vkmha_mha_desc d = {0};
    d.d_model = dm;
    d.n_head = 32;
    d.w_q = d.w_k = d.w_v = d.w_o = w;
    const uint64_t per_layer = 4 * (uint64_t)nw * sizeof(float);
    const uint64_t heap = info.device.device_local_memory;
    /* One more than the heap can hold (an 80 GiB GPU: 320 layers). */
    const size_t max_layers = (size_t)(heap / per_layer) + 2;
    vkmha_mha **layers = calloc(max_layers, sizeof *layers);
    size_t n = 0;
    vkmha_status st = VKMHA_SUCCESS;
    /* The lowered heap is the one reported. */
    bool ok = w != NULL && layers != NULL && heap == limit;
    while (ok && n < max_layers) {
        vkmha_mha *m = NULL;
        st = vkmha_mha_create(gpu, &d, &m);
        if (st != VKMHA_SUCCESS)
            break;
        layers[n++] = m;
    }
    char msg[512];
    snprintf(msg, sizeof msg, "%s", vkmha_context_last_error(gpu));
    /* device_memory_bytes counts every heap: a discrete GPU's upload staging
     * lies in host memory, outside the lowered device-local heap (an H200:
     * 7 layers and 256 MiB of staging are more than 2 GiB). Trimmed, the
     * context holds the layers (and a few small buffers) only. */
    vkmha_context_trim(gpu);
    vkmha_context_get_info(gpu, &info);
    ok = ok && st == VKMHA_ERROR_OUT_OF_DEVICE_MEMORY &&
         strncmp(msg, "vkmha_mha_create: ", 18) == 0 && strstr(msg, "heap") &&
         info.device_memory_bytes <= heap &&
         /* vkmha's own check stops at the heap; a GPU's driver (which holds
          * some of it) may refuse first: an H100 after 316 of 318 layers;
          * and so may the heap's budget (VK_EXT_memory_budget). */
         (info.device_memory_bytes + per_layer > heap || strstr(msg, "vkAllocateMemory") ||
          strstr(msg, "budget"));
    t_diag("%zu layers of %llu MiB fit the %llu MiB heap; then: %s", n,
           (unsigned long long)(per_layer >> 20), (unsigned long long)(heap >> 20), msg);
    t_report(ok, "layers beyond the device-local heap: VKMHA_ERROR_OUT_OF_DEVICE_MEMORY "
                 "naming the heap, never more than the heap held (%llu MiB)",
             (unsigned long long)(info.device_memory_bytes >> 20));
    for (size_t i = 0; i < n; i++)
        vkmha_mha_destroy(layers[i]);
    free(layers);
    free(w);

    /* The context still works: the scenario's forward. */
    vkmha_mha *m = NULL;
    vkmha_mha_io io = fx.layer.io;
    io.out = fx.got;
    st = vkmha_mha_create(gpu, &fx.layer.desc, &m);
    if (!st)
        st = vkmha_mha_forward(m, &io);
    t_report(!st && t_close("after the over-allocation", "out", fx.got, fx.want_fused,
                            fx.layer.n_out, T_LAYER_ATOL, T_LAYER_RTOL),
             "the context works after the over-allocation: %s", vkmha_status_string(st));
    vkmha_mha_destroy(m);
    vkmha_context_get_info(gpu, &info);
    /* Scratch stays (staging grown for the weights on a discrete GPU, until
     * vkmha_context_trim); the layers' own memory goes. */
    t_report(info.device_memory_bytes - info.scratch_bytes < 64u << 20,
             "the layers' memory is freed (%llu bytes held, %llu of them scratch)",
             (unsigned long long)info.device_memory_bytes,
             (unsigned long long)info.scratch_bytes);
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
}

int main(void)
{
    t_rng rng = {31};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    /* A first Vulkan context pins the driver's libraries in sanitizer
     * builds (tests/util.h) before any run destroys an instance. */
    vkmha_context *first = t_context(VKMHA_BACKEND_VULKAN, 0);
    fixture_make(ref, &rng);

    run_result base = run(0, false);
    t_report(base.ok && !base.injected,
             "baseline run without failures: every step matches the reference, %llu bytes "
             "of device memory at the end",
             (unsigned long long)base.memory);
    int transient = sweep(false, &base);
    int persistent = sweep(true, &base);
    g_checked = true;
    const run_result checked = run(0, false);
    t_report(checked.ok && !checked.injected,
             "baseline run with the self-check on: every step matches the reference, %llu "
             "bytes of device memory at the end",
             (unsigned long long)checked.memory);
    int with_check = sweep(false, &checked);
    t_diag("device allocation points tried: %d transient + %d persistent + %d transient with "
           "the self-check on",
           transient, persistent, with_check);
    over_allocation_case();
    near_heap_tensor_case();

    t_report_validation(first);
    vkmha_context_destroy(first);
    fixture_free();
    vkmha_context_destroy(ref);
    return t_finish();
}
