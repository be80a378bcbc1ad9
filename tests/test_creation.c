/* Why context creation failed, without a logger (vkmha_context_last_error
 * (NULL), thread-local), and the log level threshold.
 *
 *   test_creation            bad descs, thread isolation, log levels (a Vulkan
 *                            context with the validation layer, which must
 *                            stay silent);
 *   test_creation no-driver  run with VK_ICD_FILENAMES naming a file that does
 *                            not exist (tests/meson.build): the loader finds no
 *                            driver, and the message says what to install and
 *                            names the variable;
 *   test_creation no-layer   run with VK_LAYER_PATH naming an empty directory:
 *                            the validation layer is missing, and the message
 *                            names it and its package. */
#include "util.h"

#include <pthread.h>

/* Status, *out NULL, and vkmha_context_last_error(NULL) containing every
 * one of `words` (NULL-terminated). */
static bool expect_create(const vkmha_context_desc *d, vkmha_status want,
                          const char *const *words, const char *label)
{
    vkmha_context *ctx = (vkmha_context *)(uintptr_t)0x5e7;
    bool ok = true;
    T_EXPECT_STATUS(vkmha_context_create(d, &ctx), want, ok);
    if (want != VKMHA_SUCCESS && ctx != NULL) {
        t_diag("%s: *out is not NULL", label);
        ok = false;
    }
    if (want == VKMHA_SUCCESS) {
        t_pin_libraries(); /* sanitizer builds: keep the driver mapped */
        vkmha_context_destroy(ctx);
    }
    const char *msg = vkmha_context_last_error(NULL);
    t_diag("%s: vkmha_context_last_error(NULL): \"%s\"", label, msg);
    if (want == VKMHA_SUCCESS && msg[0] != '\0') {
        t_diag("%s: a success leaves a message", label);
        ok = false;
    }
    for (; words && *words; words++)
        if (!strstr(msg, *words)) {
            t_diag("%s: the message lacks \"%s\"", label, *words);
            ok = false;
        }
    return t_report(ok, "%s", label);
}

/* ---- threads: each thread sees its own last creation error --------------- */

typedef struct thread_case {
    pthread_barrier_t *barrier;
    uint32_t flags; /* an unknown flag: a distinct message per thread */
    bool ok;
} thread_case;

static void *thread_main(void *arg)
{
    thread_case *c = (thread_case *)arg;
    char want[64];
    vkmha_context_desc d = {0};
    vkmha_context *ctx = NULL;
    d.backend = VKMHA_BACKEND_REFERENCE;
    d.flags = c->flags;
    snprintf(want, sizeof want, "0x%x", c->flags);
    vkmha_status st = vkmha_context_create(&d, &ctx);
    /* Both threads have failed before either reads its message. */
    pthread_barrier_wait(c->barrier);
    c->ok = st == VKMHA_ERROR_INVALID_ARGUMENT && strstr(vkmha_context_last_error(NULL), want);
    if (!c->ok)
        t_diag("thread 0x%x: %s, \"%s\"", c->flags, vkmha_status_string(st),
               vkmha_context_last_error(NULL));
    return NULL;
}

static void thread_cases(void)
{
    pthread_barrier_t barrier;
    pthread_t th[2];
    thread_case cases[2] = {{&barrier, 1u << 20, false}, {&barrier, 1u << 21, false}};
    pthread_barrier_init(&barrier, NULL, 2);
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, thread_main, &cases[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    t_report(cases[0].ok && cases[1].ok,
             "two threads failing at once each read their own creation error");
}

/* ---- log levels ------------------------------------------------------------ */

typedef struct log_count {
    int at[VKMHA_LOG_ERROR + 1];
    bool planned; /* a DEBUG line with an attention plan */
} log_count;

static void count_log(void *user, vkmha_log_level level, vkmha_status status, const char *msg)
{
    log_count *c = (log_count *)user;
    (void)status;
    if ((int)level >= 0 && level <= VKMHA_LOG_ERROR)
        c->at[level]++;
    if (level == VKMHA_LOG_DEBUG && strstr(msg, " attention"))
        c->planned = true;
    if (strstr(msg, "validation layer"))
        t_diag("%s", msg);
}

/* A Vulkan context at `level` (0: the default) with a pipeline cache path
 * that does not exist (an INFO line), one attention (DEBUG lines) and one bad
 * call (an ERROR line); what reached the logger. */
static bool log_run(uint32_t level, log_count *c, vkmha_context_info *info)
{
    memset(c, 0, sizeof *c);
    vkmha_context_desc d = {0};
    d.enable_validation = t_validation();
    d.log = count_log;
    d.log_user = c;
    d.log_level = level;
    d.pipeline_cache_path = "/nonexistent-vkmha-dir/cache";
    vkmha_context *ctx = NULL;
    if (vkmha_context_create(&d, &ctx) != VKMHA_SUCCESS) {
        t_diag("cannot create a Vulkan context: %s", vkmha_context_last_error(NULL));
        return false;
    }
    t_pin_libraries();
    float q[2 * 3 * 4] = {0}, out[2 * 3 * 4];
    vkmha_attention_desc ad = {0};
    ad.heads = 2;
    ad.len_q = ad.len_k = 3;
    ad.d_k = ad.d_v = 4;
    bool ok = vkmha_attention(ctx, &ad, q, q, q, NULL, out, NULL) == VKMHA_SUCCESS;
    ad.heads = 0;
    ok = vkmha_attention(ctx, &ad, q, q, q, NULL, out, NULL) == VKMHA_ERROR_INVALID_ARGUMENT &&
         ok;
    ok = vkmha_context_get_info(ctx, info) == VKMHA_SUCCESS && ok;
    vkmha_context_destroy(ctx);
    return ok;
}

static void log_level_cases(void)
{
    static const struct {
        uint32_t level;
        bool debug, info, error;
        const char *name;
    } runs[] = {
        {0, false, false, true, "default (WARN)"},
        {VKMHA_LOG_INFO, false, true, true, "INFO"},
        {VKMHA_LOG_DEBUG, true, true, true, "DEBUG"},
        {VKMHA_LOG_ERROR, false, false, true, "ERROR"},
    };
    uint64_t validation = 0;
    bool validated = true;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        log_count c;
        vkmha_context_info info;
        bool ok = log_run(runs[i].level, &c, &info);
        validation += ok ? info.validation_messages : 0;
        validated = validated && ok && info.validation_enabled == t_validation();
        t_diag("log level %s: %d DEBUG, %d INFO, %d WARN, %d ERROR", runs[i].name,
               c.at[VKMHA_LOG_DEBUG], c.at[VKMHA_LOG_INFO], c.at[VKMHA_LOG_WARN],
               c.at[VKMHA_LOG_ERROR]);
        ok = ok && (c.at[VKMHA_LOG_DEBUG] > 0) == runs[i].debug && c.planned == runs[i].debug &&
             (c.at[VKMHA_LOG_INFO] > 0) == runs[i].info &&
             (c.at[VKMHA_LOG_ERROR] == 1) == runs[i].error && c.at[VKMHA_LOG_DEFAULT] == 0;
        t_report(ok, "log level %s: the logger gets exactly the levels asked for", runs[i].name);
    }
    t_report(validated && validation == 0,
             "validation layer %s and silent over the log level contexts (%llu messages)",
             t_validation() ? "enabled" : "off as asked (VKMHA_TEST_VALIDATION=off)",
             (unsigned long long)validation);
}

static void normal_cases(void)
{
    /* A Vulkan context alive throughout: the driver stays loaded (and, in
     * sanitizer builds, pinned: its one-time globals stay reachable). */
    vkmha_context *keep = t_context(VKMHA_BACKEND_VULKAN, 0);
    vkmha_context_desc d = {0};
    static const char *const flags_words[] = {"vkmha_context_create", "desc->flags", NULL};
    d.backend = VKMHA_BACKEND_REFERENCE;
    d.flags = 1u << 30;
    expect_create(&d, VKMHA_ERROR_INVALID_ARGUMENT, flags_words,
                  "bad desc without a logger: vkmha_context_last_error(NULL) names desc->flags");
    d.flags = 0;
    expect_create(&d, VKMHA_SUCCESS, NULL, "a success clears the creation error");

    d.flags = 1u << 30;
    (void)vkmha_context_create(&d, NULL);
    static const char *const out_words[] = {"vkmha_context_create", "out is NULL", NULL};
    expect_create(&d, VKMHA_ERROR_INVALID_ARGUMENT, flags_words,
                  "the message is the last failure's");
    {
        bool ok = true;
        vkmha_status st = vkmha_context_create(&d, NULL);
        T_EXPECT_STATUS(st, VKMHA_ERROR_INVALID_ARGUMENT, ok);
        for (const char *const *w = out_words; *w; w++)
            ok = ok && strstr(vkmha_context_last_error(NULL), *w);
        t_report(ok, "NULL out: \"%s\"", vkmha_context_last_error(NULL));
    }
    {
        bool ok = true;
        T_EXPECT_STATUS(vkmha_enumerate_devices(NULL, NULL), VKMHA_ERROR_INVALID_ARGUMENT, ok);
        ok = ok && strstr(vkmha_context_last_error(NULL), "vkmha_enumerate_devices: count");
        uint32_t n = 0;
        T_EXPECT_STATUS(vkmha_enumerate_devices(&n, NULL), VKMHA_SUCCESS, ok);
        ok = ok && n > 0 && vkmha_context_last_error(NULL)[0] == '\0';
        t_report(ok, "vkmha_enumerate_devices: errors in vkmha_context_last_error(NULL), "
                     "cleared by a success (%u devices)",
                 n);
    }
    thread_cases();
    log_level_cases();
    t_report_validation(keep);
    vkmha_context_destroy(keep);
}

/* VK_ICD_FILENAMES names a missing file: no driver at all. */
static void no_driver_cases(void)
{
    const char *icd = getenv("VK_ICD_FILENAMES");
    const char *const words[] = {"mesa-vulkan-drivers", "VK_ICD_FILENAMES", icd ? icd : "?",
                                 NULL};
    vkmha_context_desc d = {0};
    expect_create(&d, VKMHA_ERROR_NO_DEVICE, words,
                  "no driver: VKMHA_ERROR_NO_DEVICE, the message says what to install and "
                  "names VK_ICD_FILENAMES");
    bool ok = true;
    uint32_t n = 0;
    T_EXPECT_STATUS(vkmha_enumerate_devices(&n, NULL), VKMHA_ERROR_NO_DEVICE, ok);
    const char *msg = vkmha_context_last_error(NULL);
    t_diag("vkmha_enumerate_devices: \"%s\"", msg);
    for (const char *const *w = words; *w; w++)
        ok = ok && strstr(msg, *w);
    ok = ok && strncmp(msg, "vkmha_enumerate_devices: ", 25) == 0;
    t_report(ok, "no driver: vkmha_enumerate_devices gives the same advice under its own name");
    d.backend = VKMHA_BACKEND_REFERENCE;
    expect_create(&d, VKMHA_SUCCESS, NULL, "no driver: the reference backend still works");
}

/* VK_LAYER_PATH names an empty directory: no validation layer. */
static void no_layer_cases(void)
{
    const char *const words[] = {"desc->enable_validation", "VK_LAYER_KHRONOS_validation",
                                 "vulkan-validationlayers", NULL};
    vkmha_context_desc d = {0};
    d.enable_validation = true;
    expect_create(&d, VKMHA_ERROR_UNSUPPORTED, words,
                  "no validation layer: VKMHA_ERROR_UNSUPPORTED naming the layer and its "
                  "package");
    d.enable_validation = false;
    expect_create(&d, VKMHA_SUCCESS, NULL, "no validation layer: a context without it works");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "no-driver") == 0)
        no_driver_cases();
    else if (strcmp(mode, "no-layer") == 0)
        no_layer_cases();
    else if (mode[0] == '\0')
        normal_cases();
    else {
        printf("Bail out! unknown mode %s (no-driver, no-layer or none)\n", mode);
        return 1;
    }
    return t_finish();
}
