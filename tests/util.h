/* Shared helpers for the test executables: TAP output (one line per case,
 * which meson and tools/run-tests count), a seeded RNG, element-wise
 * comparison with explicit tolerances, and contexts with the validation layer
 * on and its messages counted. Header-only: each test is its own program. */
#ifndef VKMHA_TEST_UTIL_H
#define VKMHA_TEST_UTIL_H

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define T_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define T_SANITIZED 1
#endif
#endif
#ifdef T_SANITIZED
#include <dlfcn.h>
#endif

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkmha.h"
#include "../tools/kernel_list.h" /* kernel_find, kernel_param, kernel_describe */

/* ---- portability: the Windows build (MinGW-w64, run under Wine) ---------- */

/* The POSIX calls the tests make, in their Windows form (msvcrt, which the
 * test and libvkmha-0.dll share, so that the library's getenv sees what
 * _putenv_s sets): setenv, unsetenv, mkdtemp, a directory's mkdir, and
 * t_aligned_alloc / t_aligned_free (msvcrt has no aligned_alloc). */
#ifdef _WIN32
#include <direct.h>
#include <io.h>
static inline int t_win_setenv(const char *name, const char *value, int overwrite)
{
    return !overwrite && getenv(name) ? 0 : _putenv_s(name, value);
}
#define setenv t_win_setenv
#define unsetenv(name) _putenv_s((name), "") /* an empty value removes it */
static inline char *t_win_mkdtemp(char *tmpl)
{
    return _mktemp_s(tmpl, strlen(tmpl) + 1) || _mkdir(tmpl) ? NULL : tmpl;
}
#define mkdtemp t_win_mkdtemp
#define t_mkdir(path, mode) _mkdir(path)
#define t_aligned_alloc(alignment, size) _aligned_malloc((size), (alignment))
#define t_aligned_free _aligned_free
#else
#define t_mkdir(path, mode) mkdir((path), (mode))
#define t_aligned_alloc aligned_alloc
#define t_aligned_free free
#endif

/* ---- TAP ---------------------------------------------------------------- */

static int t_cases, t_failed;

/* Reports one test case. Returns ok. */
static inline bool t_report(bool ok, const char *fmt, ...)
{
    va_list ap;
    t_cases++;
    if (!ok)
        t_failed++;
    printf("%s %d - ", ok ? "ok" : "not ok", t_cases);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    return ok;
}

/* A diagnostic line, printed as a TAP comment. */
static inline void t_diag(const char *fmt, ...)
{
    va_list ap;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static inline int t_finish(void)
{
    printf("1..%d\n", t_cases);
    t_diag("%d passed, %d failed", t_cases - t_failed, t_failed);
    return t_failed ? 1 : 0;
}

/* A check inside a case: prints the expression and both values on failure. */
#define T_EXPECT_STATUS(got, want, ok)                                                 \
    do {                                                                               \
        vkmha_status t_got_ = (got), t_want_ = (want);                                 \
        if (t_got_ != t_want_) {                                                       \
            t_diag("%s:%d: %s returned %s, expected %s", __FILE__, __LINE__, #got,     \
                   vkmha_status_string(t_got_), vkmha_status_string(t_want_));         \
            (ok) = false;                                                              \
        }                                                                              \
    } while (0)

/* ---- RNG ---------------------------------------------------------------- */

typedef struct t_rng {
    uint64_t s;
} t_rng;

static inline uint64_t t_next(t_rng *r)
{
    /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static inline float t_uniform(t_rng *r, float lo, float hi)
{
    double u = (double)(t_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

static inline float *t_alloc(size_t n)
{
    float *p = (float *)calloc(n ? n : 1, sizeof(float));
    if (!p) {
        fprintf(stderr, "test: out of memory allocating %zu floats\n", n);
        exit(2);
    }
    return p;
}

static inline float *t_random(t_rng *r, size_t n, float lo, float hi)
{
    float *p = t_alloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = t_uniform(r, lo, hi);
    return p;
}

/* Random bytes: 0 (masked) with probability p_masked, else 1. */
static inline uint8_t *t_random_mask(t_rng *r, size_t n, double p_masked)
{
    uint8_t *m = (uint8_t *)malloc(n ? n : 1);
    if (!m)
        exit(2);
    for (size_t i = 0; i < n; i++)
        m[i] = t_uniform(r, 0.0f, 1.0f) < p_masked ? 0 : 1;
    return m;
}

/* Random masks of the given kinds (VKMHA_MASK_*) for [batch][heads][len_q]
 * [len_k] scores. fully_masked_row: key padding masks every key of batch 0,
 * so those rows are fully masked. bias_batch / bias_heads as in vkmha_mask. */
typedef struct t_mask {
    vkmha_mask m;
    uint8_t *kp, *full;
    float *bias;
} t_mask;

static inline const vkmha_mask *t_mask_make(t_mask *tm, t_rng *r, uint32_t kinds,
                                            uint32_t batch, uint32_t heads, uint32_t len_q,
                                            uint32_t len_k, uint32_t bias_batch,
                                            uint32_t bias_heads, bool fully_masked_row)
{
    memset(tm, 0, sizeof *tm);
    tm->m.kinds = kinds;
    if (kinds & VKMHA_MASK_KEY_PADDING) {
        tm->m.key_padding = tm->kp = t_random_mask(r, (size_t)batch * len_k, 0.3);
        if (fully_masked_row)
            memset(tm->kp, 0, len_k);
    }
    if (kinds & VKMHA_MASK_FULL)
        tm->m.full = tm->full = t_random_mask(r, (size_t)batch * len_q * len_k, 0.4);
    if (kinds & VKMHA_MASK_BIAS) {
        uint32_t bb = bias_batch ? bias_batch : batch, bh = bias_heads ? bias_heads : heads;
        tm->m.bias = tm->bias = t_random(r, (size_t)bb * bh * len_q * len_k, -2, 2);
        tm->m.bias_batch = bias_batch;
        tm->m.bias_heads = bias_heads;
    }
    return kinds ? &tm->m : NULL;
}

static inline void t_mask_free(t_mask *tm)
{
    free(tm->kp);
    free(tm->full);
    free(tm->bias);
}

static inline const char *t_mask_name(uint32_t kinds, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s%s%s", kinds ? "" : "none",
             kinds & VKMHA_MASK_KEY_PADDING ? "+padding" : "",
             kinds & VKMHA_MASK_FULL ? "+full" : "", kinds & VKMHA_MASK_CAUSAL ? "+causal" : "",
             kinds & VKMHA_MASK_BIAS ? "+bias" : "");
    return buf;
}

/* ---- comparison --------------------------------------------------------- */

/* Passes when every element is finite exactly where the reference is, and
 * |got - want| <= atol + rtol * |want|. On failure prints the case, the worst
 * element and the bound. Non-finite values are checked first. */
static inline bool t_close(const char *case_name, const char *what, const float *got,
                    const float *want, size_t n, double atol, double rtol)
{
    size_t worst = 0;
    double worst_excess = -1.0, max_err = 0.0;
    for (size_t i = 0; i < n; i++) {
        bool gf = isfinite(got[i]), wf = isfinite(want[i]);
        if (gf != wf || (!gf && !(isnan(got[i]) && isnan(want[i])) && got[i] != want[i])) {
            t_diag("%s: %s[%zu] = %g, reference %g (non-finite mismatch)", case_name, what,
                   i, (double)got[i], (double)want[i]);
            return false;
        }
        if (!gf)
            continue;
        double err = fabs((double)got[i] - (double)want[i]);
        double excess = err - (atol + rtol * fabs((double)want[i]));
        if (err > max_err)
            max_err = err;
        if (excess > worst_excess) {
            worst_excess = excess;
            worst = i;
        }
    }
    if (worst_excess > 0.0) {
        t_diag("%s: %s[%zu] = %.9g, reference %.9g, |diff| %.3g > atol %.3g + rtol %.3g * "
               "|ref| (max |diff| %.3g over %zu elements)",
               case_name, what, worst, (double)got[worst], (double)want[worst],
               fabs((double)got[worst] - (double)want[worst]), atol, rtol, max_err, n);
        return false;
    }
    return true;
}

static inline double t_max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m))
            m = d; /* NaN propagates as the maximum */
    }
    return m;
}

/* ---- outputs a refused call must leave alone ------------------------------ */

/* p[0 .. n) = v: a sentinel a refused call must not overwrite. */
static inline void t_fill(float *p, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        p[i] = v;
}

/* Whether p[0 .. n) all still hold `sentinel`; label (NULL: silent) names
 * the first element written. */
static inline bool t_untouched(const float *p, size_t n, float sentinel, const char *label)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != sentinel) {
            if (label)
                t_diag("%s: output element %zu was written (%g)", label, i, (double)p[i]);
            return false;
        }
    return true;
}

/* A logger (vkmha_context_desc.log, log_user = a t_log_capture) that keeps
 * the last error message, its status and how many errors came. */
typedef struct t_log_capture {
    int calls;
    vkmha_status status;
    char msg[1024];
} t_log_capture;

static inline void t_capture_log(void *user, vkmha_log_level level, vkmha_status status,
                                 const char *msg)
{
    t_log_capture *c = (t_log_capture *)user;
    if (level < VKMHA_LOG_ERROR)
        return;
    c->calls++;
    c->status = status;
    snprintf(c->msg, sizeof c->msg, "%s", msg);
}

/* ---- messages and follow-up calls --------------------------------------- */

static inline bool t_is_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
}

/* Whether `word` occurs in `msg` not as part of a longer identifier. */
static inline bool t_has_word(const char *msg, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(msg, word); p; p = strstr(p + 1, word)) {
        bool left = p == msg || !t_is_ident(p[-1]) || !t_is_ident(word[0]);
        bool right = !t_is_ident(p[n]) || !t_is_ident(word[n - 1]);
        if (left && right)
            return true;
    }
    return false;
}

/* Whether a bad call's message is right: it starts with "fn:" and names
 * `arg` as a whole word, and contains `extra` (NULL: anything); if not,
 * says why (a diagnostic naming the case). tests/test_errors.c and
 * tests/test_bad_input.c hold every refusal to this. */
static inline bool t_message_names(const char *name, const char *msg, const char *fn,
                                   const char *arg, const char *extra)
{
    const size_t fl = strlen(fn);
    if (!msg || !msg[0]) {
        t_diag("%s: last error is empty", name);
        return false;
    }
    if (strncmp(msg, fn, fl) != 0 || msg[fl] != ':') {
        t_diag("%s: message \"%s\" does not start with \"%s:\"", name, msg, fn);
        return false;
    }
    if (!t_has_word(msg + fl, arg) || (extra && !strstr(msg, extra))) {
        t_diag("%s: message \"%s\" does not name \"%s\"%s%s", name, msg, arg,
               extra ? " with " : "", extra ? extra : "");
        return false;
    }
    return true;
}

/* A tiny valid softmax with known values (atol 1e-6, rtol 1e-5: softmax of
 * 3 values in fp32): the context still works after an error, and the last
 * error is cleared by the successful call. */
static inline bool t_context_works(vkmha_context *ctx, const char *label)
{
    const float x[6] = {1, 2, 3, 0, 0, 0};
    float y[6];
    vkmha_softmax_desc d = {0};
    d.len_q = 2;
    d.len_k = 3;
    double s = exp(-2.0) + exp(-1.0) + 1.0;
    const float want[6] = {(float)(exp(-2.0) / s), (float)(exp(-1.0) / s), (float)(1.0 / s),
                           (float)(1.0 / 3), (float)(1.0 / 3), (float)(1.0 / 3)};
    vkmha_status st = vkmha_softmax(ctx, &d, x, NULL, y);
    if (st != VKMHA_SUCCESS) {
        t_diag("%s: the follow-up softmax failed: %s (%s)", label, vkmha_status_string(st),
               vkmha_context_last_error(ctx));
        return false;
    }
    if (vkmha_context_last_error(ctx)[0] != '\0') {
        t_diag("%s: last error after a successful softmax is \"%s\"", label,
               vkmha_context_last_error(ctx));
        return false;
    }
    return t_close(label, "follow-up softmax", y, want, 6, 1e-6, 1e-5);
}

/* ---- attention paths ---------------------------------------------------- */

/* How the attention and layer tests run each case on Vulkan: the path and the
 * key splits. */
typedef struct t_attention_run {
    vkmha_attention_path path;
    uint32_t kv_splits;
    const char *name;
} t_attention_run;

/* Every case: the default path (fused: every case's head dims are at most
 * 256), the fused path with the keys split in 3 (split-K), and the unfused
 * path. */
static const t_attention_run t_attention_runs[] = {
    {VKMHA_ATTENTION_PATH_AUTO, 0, "default path (fused)"},
    {VKMHA_ATTENTION_PATH_FUSED, 3, "fused, 3 key splits"},
    {VKMHA_ATTENTION_PATH_UNFUSED, 0, "unfused"},
};
#define T_ATTENTION_RUNS (sizeof t_attention_runs / sizeof t_attention_runs[0])

/* Elements of vkmha_attention's q, k, v, out and weights for desc d (batch 0
 * and kv_heads 0 take their defaults). */
typedef struct t_attention_sizes {
    size_t q, k, v, out, weights;
} t_attention_sizes;

static inline t_attention_sizes t_attention_size(const vkmha_attention_desc *d)
{
    const size_t b = d->batch ? d->batch : 1, hkv = d->kv_heads ? d->kv_heads : d->heads;
    t_attention_sizes n = {b * d->heads * d->len_q * d->d_k, b * hkv * d->len_k * d->d_k,
                           b * hkv * d->len_k * d->d_v, b * d->heads * d->len_q * d->d_v,
                           b * d->heads * d->len_q * d->len_k};
    return n;
}

/* ---- a layer ------------------------------------------------------------- */

/* A layer with random weights (torch.nn.Linear's init, uniform +-1/sqrt(in)),
 * biases, post-norm with random gamma and beta, and random inputs and masks
 * for one forward: desc and io are ready for vkmha_mha_create and
 * vkmha_mha_forward (io.out and io.attn_weights are the caller's). */
typedef struct t_layer {
    vkmha_mha_desc desc;
    vkmha_mha_io io;
    size_t n_out, n_weights; /* elements of io.out and io.attn_weights */
    float *mem;              /* every array above, one allocation */
    t_mask mask;
} t_layer;

/* len_k 0: self-attention (one input pointer); kinds: vkmha_mask_kind. */
static inline void t_layer_make(t_layer *l, t_rng *r, uint32_t d_model, uint32_t n_head,
                                uint32_t n_kv_head, uint32_t batch, uint32_t len_q,
                                uint32_t len_k, uint32_t kinds)
{
    const uint32_t Hkv = n_kv_head ? n_kv_head : n_head, d = d_model / n_head;
    const uint32_t Lk = len_k ? len_k : len_q;
    const size_t n_w[4] = {(size_t)n_head * d * d_model, (size_t)Hkv * d * d_model,
                           (size_t)Hkv * d * d_model, (size_t)d_model * n_head * d};
    const size_t n_b[4] = {(size_t)n_head * d, (size_t)Hkv * d, (size_t)Hkv * d, d_model};
    const size_t n_q = (size_t)batch * len_q * d_model, n_kv = (size_t)batch * Lk * d_model;
    size_t total = 2 * (size_t)d_model + n_q + (len_k ? 2 * n_kv : 0);
    for (int i = 0; i < 4; i++)
        total += n_w[i] + n_b[i];
    memset(l, 0, sizeof *l);
    l->mem = t_alloc(total);
    float *p = l->mem;
    float *w[4], *b[4];
    for (int i = 0; i < 4; i++) {
        const float bound = 1.0f / sqrtf((float)(i == 3 ? n_head * d : d_model));
        w[i] = p;
        for (size_t j = 0; j < n_w[i]; j++)
            *p++ = t_uniform(r, -bound, bound);
        b[i] = p;
        for (size_t j = 0; j < n_b[i]; j++)
            *p++ = t_uniform(r, -bound, bound);
    }
    vkmha_mha_desc *desc = &l->desc;
    desc->d_model = d_model;
    desc->n_head = n_head;
    desc->n_kv_head = n_kv_head;
    desc->w_q = w[0], desc->w_k = w[1], desc->w_v = w[2], desc->w_o = w[3];
    desc->b_q = b[0], desc->b_k = b[1], desc->b_v = b[2], desc->b_o = b[3];
    desc->post_norm = true;
    float *gamma = p, *beta = p + d_model;
    for (uint32_t c = 0; c < d_model; c++) {
        gamma[c] = t_uniform(r, 0.5f, 1.5f);
        beta[c] = t_uniform(r, -0.5f, 0.5f);
    }
    desc->norm_gamma = gamma;
    desc->norm_beta = beta;
    p += 2 * (size_t)d_model;
    vkmha_mha_io *io = &l->io;
    float *query = p;
    for (size_t j = 0; j < n_q + (len_k ? 2 * n_kv : 0); j++)
        *p++ = t_uniform(r, -1, 1);
    io->batch = batch;
    io->len_q = len_q;
    io->len_k = len_k;
    io->query = query;
    io->key = len_k ? query + n_q : query;
    io->value = len_k ? query + n_q + n_kv : query;
    io->mask = t_mask_make(&l->mask, r, kinds, batch, n_head, len_q, Lk, 0, 0, false);
    l->n_out = n_q;
    l->n_weights = (size_t)batch * n_head * len_q * Lk;
}

static inline void t_layer_free(t_layer *l)
{
    free(l->mem);
    t_mask_free(&l->mask);
}

/* A layer's desc alone (no inputs), as tests that build their own inputs
 * want it: every array (w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o,
 * norm_gamma, norm_beta) uniform in [-amp, amp] from one allocation, mem
 * (the caller frees it), gamma around 1; post-norm on; kdim = vdim = kdim. */
typedef struct t_layer_desc {
    vkmha_mha_desc d;
    float *mem;
} t_layer_desc;

static inline void t_layer_desc_make(t_layer_desc *l, t_rng *r, uint32_t d_model, uint32_t H,
                                     uint32_t Hkv, uint32_t d_k, uint32_t d_v, uint32_t kdim,
                                     float amp)
{
    const size_t n[10] = {(size_t)H * d_k * d_model, (size_t)Hkv * d_k * kdim,
                          (size_t)Hkv * d_v * kdim,  (size_t)d_model * H * d_v,
                          (size_t)H * d_k,           (size_t)Hkv * d_k,
                          (size_t)Hkv * d_v,         d_model,
                          d_model,                   d_model};
    size_t total = 0;
    for (int i = 0; i < 10; i++)
        total += n[i];
    memset(l, 0, sizeof *l);
    float *p = l->mem = t_random(r, total, -amp, amp);
    const void **w[10] = {&l->d.w_q, &l->d.w_k, &l->d.w_v, &l->d.w_o, &l->d.b_q,
                          &l->d.b_k, &l->d.b_v, &l->d.b_o, &l->d.norm_gamma, &l->d.norm_beta};
    for (int i = 0; i < 10; i++) {
        *w[i] = p;
        p += n[i];
    }
    float *gamma = (float *)l->d.norm_gamma;
    for (uint32_t c = 0; c < d_model; c++)
        gamma[c] += 1.0f;
    l->d.d_model = d_model;
    l->d.n_head = H;
    l->d.n_kv_head = Hkv;
    l->d.d_k = d_k;
    l->d.d_v = d_v;
    l->d.kdim = l->d.vdim = kdim;
    l->d.post_norm = true;
}

/* Layer outputs against the reference: five chained fp32 stages against
 * double accumulation, and a LayerNorm that divides by a standard deviation
 * (test_mha.c explains the bounds). */
#define T_LAYER_ATOL 1e-5
#define T_LAYER_RTOL 1e-4

/* Random weights in [-1, 1] of rows x cols quantized on the host (type,
 * group) into *layout's bytes; NULL if that failed. */
static inline uint8_t *t_quantized(vkmha_context *ref, t_rng *rng, uint32_t type,
                                   uint32_t group, uint32_t rows, uint32_t cols,
                                   vkmha_quant_layout *layout)
{
    const vkmha_quant_desc q = {type, group, rows, cols};
    float *w = t_random(rng, (size_t)rows * cols, -1, 1);
    uint8_t *b = vkmha_quant_layout_of(ref, &q, layout) ? NULL : malloc(layout->bytes);
    if (b && vkmha_quantize(ref, &q, VKMHA_DTYPE_F32, w, b, layout->bytes)) {
        free(b);
        b = NULL;
    }
    free(w);
    return b;
}

/* The layer d (kdim = vdim = d_model) created on ref and on gpu, each over
 * a KV cache of 16 positions: a prompt of 5 random tokens, then 3 steps of
 * one, gpu's outputs against ref's at the layer tolerances; failures
 * diagnosed under `name`. */
static inline bool t_layer_cache_steps(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                                       const vkmha_mha_desc *d, const char *name)
{
    const uint32_t D = d->d_model;
    float *x = t_random(rng, (size_t)8 * D, -1, 1),
          *out[2] = {t_alloc((size_t)5 * D), t_alloc((size_t)5 * D)};
    vkmha_mha *m[2] = {NULL, NULL};
    vkmha_kv_cache *c[2] = {NULL, NULL};
    const vkmha_kv_cache_desc cd = {.capacity = 16};
    bool ok = true;
    for (int b = 0; b < 2; b++)
        ok = ok && !vkmha_mha_create(b ? gpu : ref, d, &m[b]) &&
             !vkmha_kv_cache_create(m[b], &cd, &c[b]);
    if (!ok)
        t_diag("%s: creation: %s / %s", name, vkmha_context_last_error(ref),
               vkmha_context_last_error(gpu));
    for (uint32_t t = 0; ok && t < 4; t++) {
        const uint32_t len = t ? 1 : 5, first = t ? 4 + t : 0;
        for (int b = 0; ok && b < 2; b++) {
            const vkmha_mha_io io = {.len_q = len, .query = x + first * D,
                                     .key = x + first * D, .value = x + first * D,
                                     .out = out[b], .kv_cache = c[b]};
            ok = !vkmha_mha_forward(m[b], &io);
            if (!ok)
                t_diag("%s: %s", name, vkmha_context_last_error(b ? gpu : ref));
        }
        ok = ok && t_close(name, t ? "a step's out" : "the prompt's out", out[1], out[0],
                           (size_t)len * D, T_LAYER_ATOL, T_LAYER_RTOL);
    }
    for (int b = 0; b < 2; b++) {
        vkmha_kv_cache_destroy(c[b]);
        vkmha_mha_destroy(m[b]);
        free(out[b]);
    }
    free(x);
    return ok;
}

/* ---- contexts ----------------------------------------------------------- */

static inline void t_log(void *user, vkmha_log_level level, vkmha_status status, const char *msg)
{
    (void)user;
    (void)status;
    /* Errors of bad-input tests are expected; the validation layer's messages
     * are counted by the context itself (vkmha_context_info). */
    if (level >= VKMHA_LOG_WARN && getenv("VKMHA_TEST_VERBOSE"))
        t_diag("log: %s", msg);
    else if (strstr(msg, "validation layer") != NULL)
        t_diag("%s", msg);
}

/* Sanitizer builds: one more reference to every loaded library (the Vulkan
 * loader, the driver, the validation layer, LLVM), so that they stay mapped
 * after the loader closes them and the sanitizers' reports at exit can name
 * their frames (tests/lsan.supp and tests/tsan.supp match library names). */
static inline void t_pin_libraries(void)
{
#ifdef T_SANITIZED
    char line[4096];
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return;
    while (fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (!path || !strstr(path, ".so"))
            continue;
        path[strcspn(path, "\n")] = '\0';
        (void)dlopen(path, RTLD_NOW | RTLD_NOLOAD); /* a reference, never closed */
    }
    fclose(maps);
#endif
}

/* Whether the tests' Vulkan contexts ask for the validation layer: always,
 * but where VKMHA_TEST_VALIDATION=off says the platform has none (the
 * Windows build under Wine: Debian has no Windows build of the layer;
 * tools/run-tests says so in its count). */
static inline bool t_validation(void)
{
    const char *v = getenv("VKMHA_TEST_VALIDATION");
    return !(v && !strcmp(v, "off"));
}

/* Creates a context of `backend`, with the validation layer on for Vulkan
 * (synchronization validation included), the debug options `debug` (may be
 * NULL) and the logger `log` (NULL: t_log), which gets every level (DEBUG
 * included: test_limits reads the dispatch splits). Exits with status 1 (a
 * failure, never a skip) when it cannot be created, printing the reason. */
static inline vkmha_context *t_context_ex(vkmha_backend backend, uint32_t flags,
                                          const vkmha_debug_options *debug, vkmha_log_fn log,
                                          void *log_user)
{
    vkmha_context_desc desc = {0};
    vkmha_context *ctx = NULL;
    desc.backend = backend;
    desc.enable_validation = backend == VKMHA_BACKEND_VULKAN && t_validation();
    /* The self-check of creation has tests of its own (test_selfcheck.c):
     * on lavapipe it builds every pipeline of the context at once (about a
     * second), which the suite's hundreds of contexts need not repeat. */
    desc.flags = flags | VKMHA_CONTEXT_NO_SELF_CHECK;
    desc.debug = debug;
    desc.log = log ? log : t_log;
    desc.log_user = log_user;
    desc.log_level = VKMHA_LOG_DEBUG;
    vkmha_status st = vkmha_context_create(&desc, &ctx);
    if (st != VKMHA_SUCCESS) {
        printf("Bail out! cannot create a %s context: %s: %s\n",
               backend == VKMHA_BACKEND_REFERENCE ? "reference" : "Vulkan",
               vkmha_status_string(st), vkmha_context_last_error(NULL));
        exit(1);
    }
    if (backend == VKMHA_BACKEND_VULKAN) {
        vkmha_context_info info;
        t_pin_libraries();
        if (vkmha_context_get_info(ctx, &info) == VKMHA_SUCCESS)
            t_diag("device: %s (%s, %s), subgroup size %u, subgroup ops %s",
                   info.device.name, info.device.driver_name, info.device.driver_info,
                   info.device.subgroup_size, info.subgroup_ops_used ? "on" : "off");
    }
    return ctx;
}

/* A Vulkan context that believes at most `range` bytes of
 * maxStorageBufferRange and `allocation` of maxMemoryAllocationSize (0: the
 * device's): lowered through vkmha_debug_options where the device has more,
 * so that a test sized for those limits (lavapipe's) runs alike on any
 * device; fused_kernel: vkmha_debug_options.fused_kernel (0: the default). */
static inline vkmha_context *t_context_limited_ex(uint64_t range, uint64_t allocation,
                                                  uint32_t fused_kernel, vkmha_log_fn log,
                                                  void *log_user)
{
    vkmha_debug_options kernel = {.fused_kernel = fused_kernel};
    vkmha_context *gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &kernel, log, log_user);
    vkmha_context_info info;
    if (vkmha_context_get_info(gpu, &info) != VKMHA_SUCCESS)
        return gpu;
    vkmha_debug_options lowered = kernel;
    if (range && info.device.max_storage_buffer_range > range)
        lowered.max_storage_buffer_range = range;
    if (allocation && info.device.max_allocation_size > allocation)
        lowered.max_allocation_size = allocation;
    if (!lowered.max_storage_buffer_range && !lowered.max_allocation_size)
        return gpu;
    vkmha_context_destroy(gpu);
    return t_context_ex(VKMHA_BACKEND_VULKAN, 0, &lowered, log, log_user);
}

static inline vkmha_context *t_context_limited(uint64_t range, uint64_t allocation,
                                               vkmha_log_fn log, void *log_user)
{
    return t_context_limited_ex(range, allocation, 0, log, log_user);
}

static inline vkmha_context *t_context(vkmha_backend backend, uint32_t flags)
{
    return t_context_ex(backend, flags, NULL, NULL, NULL);
}

/* The Vulkan contexts the attention, layer and non-finite tests run every
 * case on: reductions with subgroup arithmetic and with shared memory only,
 * and the fused path on each of its kernels (the device's own choice, then
 * the workgroup-shared kernel forced: on CPU devices the default is the
 * CPU-shaped one, so both run), and the workgroup-shared kernel with the
 * blocks chosen for GPUs (on CPU devices those that fit its limits). */
typedef struct t_vk_variant {
    uint32_t flags;
    vkmha_fused_kernel kernel;
    const char *tag;
} t_vk_variant;
static const t_vk_variant t_vk_variants[] = {
    {0, VKMHA_FUSED_KERNEL_AUTO, "subgroup reduction"},
    {VKMHA_CONTEXT_NO_SUBGROUP_OPS, VKMHA_FUSED_KERNEL_AUTO, "shared-memory reduction"},
    {0, VKMHA_FUSED_KERNEL_SHARED, "workgroup-shared fused kernel"},
    {0, VKMHA_FUSED_KERNEL_SHARED_GPU_BLOCKS, "workgroup-shared fused kernel, GPU blocks"},
};
#define T_VK_VARIANTS (sizeof t_vk_variants / sizeof t_vk_variants[0])

static inline vkmha_context *t_context_variant(const t_vk_variant *v)
{
    vkmha_debug_options dbg = {.fused_kernel = v->kernel};
    return t_context_ex(VKMHA_BACKEND_VULKAN, v->flags, &dbg, NULL, NULL);
}

/* The last case of every Vulkan test: the validation layer sent nothing
 * (without the layer, t_validation: a comment saying so, no case). */
static inline void t_report_validation(vkmha_context *ctx)
{
    vkmha_context_info info;
    if (vkmha_context_get_info(ctx, &info) != VKMHA_SUCCESS) {
        t_report(false, "validation layer messages: cannot query the context");
        return;
    }
    if (!t_validation()) {
        t_diag("validation layer off (VKMHA_TEST_VALIDATION=off): not checked");
        return;
    }
    t_diag("validation layer messages: %llu", (unsigned long long)info.validation_messages);
    t_report(info.validation_enabled && info.validation_messages == 0,
             "validation layer enabled and silent (%llu messages)",
             (unsigned long long)info.validation_messages);
}

/* The KV-cache tests' contexts: the reference, the device's default
 * Vulkan one, and one with the workgroup-shared fused kernel forced (on CPU
 * devices the default is the CPU-shaped one, so both run). */
typedef struct t_cache_contexts {
    vkmha_context *ref, *gpu, *shared;
} t_cache_contexts;

static inline t_cache_contexts t_cache_contexts_create(void)
{
    vkmha_debug_options shared = {.fused_kernel = VKMHA_FUSED_KERNEL_SHARED};
    return (t_cache_contexts){t_context(VKMHA_BACKEND_REFERENCE, 0),
                              t_context(VKMHA_BACKEND_VULKAN, 0),
                              t_context_ex(VKMHA_BACKEND_VULKAN, 0, &shared, NULL, NULL)};
}

/* Reports the Vulkan contexts' validation messages, destroys the three. */
static inline void t_cache_contexts_destroy(const t_cache_contexts *c)
{
    t_report_validation(c->gpu);
    t_report_validation(c->shared);
    vkmha_context_destroy(c->ref);
    vkmha_context_destroy(c->gpu);
    vkmha_context_destroy(c->shared);
}

/* ---- the context's kernels (vkmha_context_get_kernels) --------------------- */

/* Whether k runs the matmul tile t (variant SHARED or REGISTER, as
 * vkmha_context_desc.matmul_tile gives it): the register variant is shader
 * "matmul_cpu" with WG = bm / tm, TM, TN = tn (bn == tn, bk 4); the shared
 * one shader "matmul" with BM, BN, BK, TM, TN and WG = (bm / tm) * (bn / tn). */
static inline bool t_kernel_has_tile(const vkmha_kernel_info *k, const vkmha_tile_config *t)
{
    if (!k->available || !t->tm || !t->tn)
        return false;
    if (t->variant == VKMHA_MATMUL_VARIANT_REGISTER)
        return !strcmp(k->shader, "matmul_cpu") && kernel_param(k, "WG") == t->bm / t->tm &&
               kernel_param(k, "TM") == t->tm && kernel_param(k, "TN") == t->tn &&
               t->bn == t->tn && t->bk == 4;
    return !strcmp(k->shader, "matmul") && kernel_param(k, "BM") == t->bm &&
           kernel_param(k, "BN") == t->bn && kernel_param(k, "BK") == t->bk &&
           kernel_param(k, "TM") == t->tm && kernel_param(k, "TN") == t->tn &&
           kernel_param(k, "WG") == (t->bm / t->tm) * (t->bn / t->tn);
}

/* Whether every matmul kernel of ctx ("matmul_large", "matmul_small" and
 * their vec forms) runs tile t; says which does not. */
static inline bool t_matmul_kernels_have_tile(vkmha_context *ctx, const vkmha_tile_config *t)
{
    static const char *const names[] = {"matmul_large", "matmul_large_vec", "matmul_small",
                                        "matmul_small_vec"};
    bool ok = true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        vkmha_kernel_info k;
        char d[160];
        if (!kernel_find(ctx, names[i], &k) || !t_kernel_has_tile(&k, t)) {
            t_diag("%s: %s, not the tile %ux%u (k %u), %ux%u per invocation", names[i],
                   kernel_describe(&k, d, sizeof d), t->bm, t->bn, t->bk, t->tm, t->tn);
            ok = false;
        }
    }
    return ok;
}

/* ---- a counting host allocator that can fail its Nth allocation ----------- */

/* For vkmha_allocator {t_counting_alloc, NULL, t_counting_free, &c}: counts
 * live and total allocations and fails allocation number fail_at. */

typedef struct t_counting {
    long live, total;
    long fail_at; /* 1-based allocation to fail; 0: never */
    long failed;
} t_counting;

static inline void *t_counting_alloc(void *user, size_t size, size_t alignment)
{
    t_counting *c = user;
    if (c->fail_at && c->total + 1 == c->fail_at) {
        c->total++;
        c->failed++;
        return NULL;
    }
    void *p = t_aligned_alloc(alignment < 16 ? 16 : alignment, (size + 15) / 16 * 16);
    if (p) {
        c->live++;
        c->total++;
    }
    return p;
}

static inline void t_counting_free(void *user, void *p)
{
    t_counting *c = user;
    if (p) {
        c->live--;
        t_aligned_free(p);
    }
}

#endif /* VKMHA_TEST_UTIL_H */
