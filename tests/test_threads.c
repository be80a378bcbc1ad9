/* Threads, under the rules of include/vkmha.h ("Thread safety"):
 *
 *   1. separate contexts are independent: 4 threads, each with its own
 *      Vulkan context (validation on), create a layer and run FORWARDS
 *      forwards (fused, split-K and unfused in turn) plus a matmul each
 *      time, all at once; every result matches the reference computed
 *      beforehand on the main thread; each thread's own reference context
 *      gives that reference bit for bit; the contexts' self-checks (on by
 *      default, each path checked before its first use) run on the four
 *      threads' first forwards at once, for the same paths;
 *   2. one context used by one thread at a time: 4 threads share one Vulkan
 *      context and one layer, each call (and the read of its last error)
 *      under a mutex, the external synchronization the header asks for.
 *
 * Threads only record; the main thread reports (TAP output is not
 * thread-safe). The suite runs this test again under ThreadSanitizer
 * (tools/run-tests, build-tsan). Tolerances: the layer's (util.h), the
 * matmul's (test_matmul.c: 2e-6 sqrt(k) + 1e-5 |ref|). */
#include "util.h"

#include <pthread.h>

#define THREADS 4
#define FORWARDS 50
#define SHARED_FORWARDS 25

/* Inputs and reference results, written before the threads start and only
 * read by them. */
static t_layer g_layer;
static float *g_want[T_ATTENTION_RUNS], *g_want_w;
static vkmha_matmul_desc g_mm;
static float *g_a, *g_b, *g_want_c;
static size_t g_nc;

/* A logger that counts the validation layer's messages and prints nothing
 * (printing from several threads would interleave). */
static void count_validation(void *user, vkmha_log_level level, vkmha_status status,
                             const char *msg)
{
    (void)level;
    (void)status;
    if (strstr(msg, "validation layer"))
        ++*(int *)user; /* one counter per context: its thread's own */
}

typedef struct worker {
    int index;
    vkmha_context *shared; /* part 2: the shared context, else NULL */
    vkmha_mha *shared_layer;
    pthread_mutex_t *lock;
    /* results */
    int forwards_ok, forwards, validation;
    uint32_t checked_before, checked_after; /* self_check_us around the first forward */
    bool matmul_ok, setup_ok, reference_ok;
    char error[256];
} worker;

/* One forward on attention run r, compared with the reference. */
static bool forward_matches(vkmha_mha *m, size_t r, float *out, float *w, char *error,
                            size_t cap)
{
    vkmha_mha_io io = g_layer.io;
    io.out = out;
    io.attn_weights = r == 2 ? w : NULL;
    io.attention_path = t_attention_runs[r].path;
    io.kv_splits = t_attention_runs[r].kv_splits;
    vkmha_status st = vkmha_mha_forward(m, &io);
    if (st != VKMHA_SUCCESS) {
        snprintf(error, cap, "forward: %s", vkmha_status_string(st));
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < g_layer.n_out && ok; i++)
        ok = fabs((double)out[i] - g_want[r][i]) <= T_LAYER_ATOL + T_LAYER_RTOL * fabs(g_want[r][i]);
    for (size_t i = 0; r == 2 && i < g_layer.n_weights && ok; i++)
        ok = fabs((double)w[i] - g_want_w[i]) <= 1e-6 + 1e-5 * fabs(g_want_w[i]);
    if (!ok)
        snprintf(error, cap, "forward [%s] differs from the reference", t_attention_runs[r].name);
    return ok;
}

static void *own_context(void *arg)
{
    worker *wk = (worker *)arg;
    float *out = t_alloc(g_layer.n_out), *w = t_alloc(g_layer.n_weights), *c = t_alloc(g_nc);
    vkmha_context_desc cd = {0};
    cd.enable_validation = t_validation();
    cd.log = count_validation;
    cd.log_user = &wk->validation;
    vkmha_context *gpu = NULL;
    vkmha_mha *m = NULL;
    wk->setup_ok = vkmha_context_create(&cd, &gpu) == VKMHA_SUCCESS &&
                   vkmha_mha_create(gpu, &g_layer.desc, &m) == VKMHA_SUCCESS;
    if (!wk->setup_ok)
        snprintf(wk->error, sizeof wk->error, "thread %d: context or layer creation failed (%s)",
                 wk->index, gpu ? vkmha_context_last_error(gpu) : vkmha_context_last_error(NULL));
    wk->matmul_ok = wk->setup_ok;
    vkmha_context_info info;
    if (wk->setup_ok && !vkmha_context_get_info(gpu, &info))
        wk->checked_before = info.self_check_us;
    for (int i = 0; wk->setup_ok && i < FORWARDS; i++) {
        /* Each thread starts at another path, so that all paths run at once. */
        size_t r = (size_t)(i + wk->index) % T_ATTENTION_RUNS;
        wk->forwards++;
        wk->forwards_ok += forward_matches(m, r, out, w, wk->error, sizeof wk->error);
        if (i == 0 && !vkmha_context_get_info(gpu, &info))
            wk->checked_after = info.self_check_us;
        bool mm = vkmha_matmul(gpu, &g_mm, g_a, g_b, NULL, c) == VKMHA_SUCCESS;
        for (size_t j = 0; j < g_nc && mm; j++)
            mm = fabs((double)c[j] - g_want_c[j]) <=
                 2e-6 * sqrt((double)g_mm.k) + 1e-5 * fabs(g_want_c[j]);
        wk->matmul_ok = wk->matmul_ok && mm;
    }
    vkmha_mha_destroy(m);
    vkmha_context_destroy(gpu); /* the logger counts messages up to here */
    vkmha_context_desc rd = {0};
    rd.backend = VKMHA_BACKEND_REFERENCE;
    vkmha_context *ref = NULL;
    wk->reference_ok = vkmha_context_create(&rd, &ref) == VKMHA_SUCCESS &&
                       vkmha_matmul(ref, &g_mm, g_a, g_b, NULL, c) == VKMHA_SUCCESS &&
                       memcmp(c, g_want_c, g_nc * sizeof *c) == 0;
    vkmha_context_destroy(ref);
    free(out), free(w), free(c);
    return NULL;
}

static void *shared_context(void *arg)
{
    worker *wk = (worker *)arg;
    float *out = t_alloc(g_layer.n_out), *w = t_alloc(g_layer.n_weights);
    wk->setup_ok = true;
    for (int i = 0; i < SHARED_FORWARDS; i++) {
        size_t r = (size_t)(i + wk->index) % T_ATTENTION_RUNS;
        pthread_mutex_lock(wk->lock);
        bool ok = forward_matches(wk->shared_layer, r, out, w, wk->error, sizeof wk->error);
        /* The last error belongs to the context: read it under the lock. */
        if (vkmha_context_last_error(wk->shared)[0] != '\0') {
            snprintf(wk->error, sizeof wk->error, "last error \"%s\" after a success",
                     vkmha_context_last_error(wk->shared));
            ok = false;
        }
        pthread_mutex_unlock(wk->lock);
        wk->forwards++;
        wk->forwards_ok += ok;
    }
    free(out), free(w);
    return NULL;
}

static bool run_threads(worker wk[THREADS], void *(*fn)(void *))
{
    pthread_t th[THREADS];
    int started = 0;
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&th[i], NULL, fn, &wk[i]) == 0)
            started++;
        else
            break;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return started == THREADS;
}

int main(void)
{
    t_rng rng = {77};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    /* Pins the driver libraries in sanitizer builds (util.h) and is part 2's
     * shared context. */
    vkmha_context *gpu = t_context(VKMHA_BACKEND_VULKAN, 0);

    t_layer_make(&g_layer, &rng, 32, 4, 2, 2, 21, 37,
                 VKMHA_MASK_KEY_PADDING | VKMHA_MASK_CAUSAL | VKMHA_MASK_BIAS);
    vkmha_mha *mr = NULL;
    bool ok = vkmha_mha_create(ref, &g_layer.desc, &mr) == VKMHA_SUCCESS;
    g_want_w = t_alloc(g_layer.n_weights);
    for (size_t r = 0; r < T_ATTENTION_RUNS; r++) {
        g_want[r] = t_alloc(g_layer.n_out);
        vkmha_mha_io io = g_layer.io;
        io.out = g_want[r];
        io.attn_weights = g_want_w;
        ok = ok && vkmha_mha_forward(mr, &io) == VKMHA_SUCCESS;
    }
    vkmha_mha_destroy(mr);
    g_mm = (vkmha_matmul_desc){0};
    g_mm.batch = 3, g_mm.m = 45, g_mm.n = 33, g_mm.k = 29;
    g_a = t_random(&rng, 3 * 45 * 29, -1, 1);
    g_b = t_random(&rng, 3 * 29 * 33, -1, 1);
    g_nc = 3 * 45 * 33;
    g_want_c = t_alloc(g_nc);
    ok = ok && vkmha_matmul(ref, &g_mm, g_a, g_b, NULL, g_want_c) == VKMHA_SUCCESS;
    if (!ok) {
        printf("Bail out! the reference backend failed\n");
        return 1;
    }

    /* 1. One context per thread. */
    worker wk[THREADS];
    memset(wk, 0, sizeof wk);
    for (int i = 0; i < THREADS; i++)
        wk[i].index = i;
    t_report(run_threads(wk, own_context), "%d threads started, one Vulkan context each",
             THREADS);
    for (int i = 0; i < THREADS; i++) {
        if (wk[i].error[0])
            t_diag("thread %d: %s", i, wk[i].error);
        t_report(wk[i].setup_ok && wk[i].forwards_ok == FORWARDS && wk[i].forwards == FORWARDS,
                 "own context, thread %d: %d of %d forwards match the reference (every "
                 "attention path)",
                 i, wk[i].forwards_ok, FORWARDS);
        t_report(wk[i].matmul_ok, "own context, thread %d: %d matmuls match the reference", i,
                 FORWARDS);
        t_report(wk[i].checked_before == 0 && wk[i].checked_after > 0,
                 "own context, thread %d: the self-check ran in the first forward (%u us), "
                 "not at creation (%u us)",
                 i, wk[i].checked_after, wk[i].checked_before);
        t_report(wk[i].reference_ok,
                 "own reference context, thread %d: the matmul bit for bit as on the main "
                 "thread",
                 i);
        t_diag("thread %d: validation layer messages: %d", i, wk[i].validation);
        t_report(wk[i].validation == 0,
                 "own context, thread %d: validation layer silent through destroy (%d)", i,
                 wk[i].validation);
    }

    /* 2. One context shared, every call under a mutex. */
    pthread_mutex_t lock;
    pthread_mutex_init(&lock, NULL);
    vkmha_mha *shared_layer = NULL;
    ok = vkmha_mha_create(gpu, &g_layer.desc, &shared_layer) == VKMHA_SUCCESS;
    memset(wk, 0, sizeof wk);
    for (int i = 0; i < THREADS; i++) {
        wk[i].index = i;
        wk[i].shared = gpu;
        wk[i].shared_layer = shared_layer;
        wk[i].lock = &lock;
    }
    t_report(ok && run_threads(wk, shared_context),
             "%d threads share one context and one layer under a mutex", THREADS);
    for (int i = 0; i < THREADS; i++) {
        if (wk[i].error[0])
            t_diag("thread %d: %s", i, wk[i].error);
        t_report(wk[i].forwards_ok == SHARED_FORWARDS,
                 "shared context, thread %d: %d of %d forwards match the reference", i,
                 wk[i].forwards_ok, SHARED_FORWARDS);
    }
    pthread_mutex_destroy(&lock);
    vkmha_mha_destroy(shared_layer);

    t_layer_free(&g_layer);
    for (size_t r = 0; r < T_ATTENTION_RUNS; r++)
        free(g_want[r]);
    free(g_want_w), free(g_a), free(g_b), free(g_want_c);
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
    vkmha_context_destroy(ref);
    return t_finish();
}
