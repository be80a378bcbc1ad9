/* The pipeline cache: vkmha's cache format (src/pipeline_cache_format.c,
 * linked in directly) against crafted headers, then contexts that save a
 * cache, load it back from a file and from bytes, and ignore a truncated,
 * corrupt, foreign, empty or unreadable one with an INFO message naming why;
 * bad arguments; saving where nothing can be written;
 * VKMHA_CONTEXT_EAGER_PIPELINES. Every Vulkan context runs with the validation
 * layer, and each that loads (or rejects) a cache computes an MHA forward that
 * must match the reference backend: output |gpu - ref| <= 1e-5 + 1e-4 |ref|,
 * attention weights <= 1e-6 + 1e-5 |ref| (test_mha's bounds, same stages).
 * Files live in a fresh directory under $TMPDIR (or /tmp), removed at the
 * end. */
#include "../src/pipeline_cache_format.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define OUT_ATOL 1e-5
#define OUT_RTOL 1e-4
#define W_ATOL 1e-6
#define W_RTOL 1e-5
#define HDR VK_CACHE_HEADER_SIZE

/* ---- parse: crafted caches, no Vulkan ------------------------------------ */

static const vk_cache_identity test_id = {
    .vkmha_version = VKMHA_VERSION_NUMBER,
    .vendor_id = 0x10de,
    .device_id = 0x2684,
    .driver_version = 0x86000000u,
    .pipeline_cache_uuid = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
    .device_uuid = {0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab,
                    0xac, 0xad, 0xae, 0xaf},
};

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A cache for `id` of n bytes of driver data: a byte pattern that, when n >=
 * 32, starts with a VkPipelineCacheHeaderVersionOne for id. Returns the total
 * size written to out (HDR + n). */
static size_t craft(const vk_cache_identity *id, size_t n, uint8_t *out)
{
    uint8_t *d = out + HDR;
    for (size_t i = 0; i < n; i++)
        d[i] = (uint8_t)(i * 37 + 11);
    if (n >= 32) {
        put32(d, 32);
        put32(d + 4, 1);
        put32(d + 8, id->vendor_id);
        put32(d + 12, id->device_id);
        memcpy(d + 16, id->pipeline_cache_uuid, 16);
    }
    vk_pipeline_cache_header(id, d, n, out);
    return HDR + n;
}

/* Parses bytes against test_id: want_ok, or rejected with `reason` in why. */
static bool parse_is(const char *label, const uint8_t *bytes, size_t size, bool want_ok,
                     const char *reason)
{
    const void *data = (const void *)1;
    size_t data_size = 1;
    char why[256];
    vkmha_status st =
        vk_pipeline_cache_parse(bytes, size, &test_id, &data, &data_size, why, sizeof why);
    if (want_ok) {
        if (st != VKMHA_SUCCESS) {
            t_diag("%s: rejected: %s", label, why);
            return false;
        }
        if (data != bytes + HDR || data_size != size - HDR) {
            t_diag("%s: data at offset %td, %zu bytes; expected offset %u, %zu bytes", label,
                   (const uint8_t *)data - bytes, data_size, HDR, size - HDR);
            return false;
        }
        return true;
    }
    if (st != VKMHA_ERROR_INVALID_ARGUMENT || data != NULL || data_size != 0) {
        t_diag("%s: parse returned %s, data %p, %zu bytes; expected a rejection", label,
               vkmha_status_string(st), data, data_size);
        return false;
    }
    if (!strstr(why, reason)) {
        t_diag("%s: reason \"%s\" does not contain \"%s\"", label, why, reason);
        return false;
    }
    return true;
}

/* Copies a valid crafted cache, applies `edit` at offset `at` (a byte XORed
 * with x, or a 32-bit field set), and expects `reason`. */
static bool tampered_is(const char *label, size_t at, uint8_t x, bool set32, uint32_t v,
                        const char *reason)
{
    uint8_t buf[HDR + 64];
    size_t n = craft(&test_id, 64, buf);
    if (set32)
        put32(buf + at, v);
    else
        buf[at] ^= x;
    return parse_is(label, buf, n, false, reason);
}

static void parse_cases(void)
{
    uint8_t buf[HDR + 64], big[HDR + 64 + 8];
    size_t n = craft(&test_id, 64, buf);
    t_report(parse_is("valid", buf, n, true, NULL), "parse: a valid cache with 64 data bytes");
    size_t n0 = craft(&test_id, 0, buf);
    t_report(parse_is("valid, no data", buf, n0, true, NULL),
             "parse: a valid cache with no driver data");

    bool ok = true;
    n = craft(&test_id, 64, buf);
    for (size_t cut = 0; cut < n && ok; cut++) {
        char label[64], reason[64];
        snprintf(label, sizeof label, "cut to %zu bytes", cut);
        if (cut == 0)
            snprintf(reason, sizeof reason, "empty (0 bytes)");
        else if (cut < HDR)
            snprintf(reason, sizeof reason, "truncated (%zu of %u header bytes)", cut, HDR);
        else
            snprintf(reason, sizeof reason, "truncated (%zu of %zu bytes)", cut, n);
        ok = parse_is(label, buf, cut, false, reason);
    }
    t_report(ok, "parse: every truncation (0 to %zu bytes) is rejected as truncated", n - 1);

    /* All 80 header bytes mean something, and FNV-1a changes with any single
     * byte of the data: no bit of a cache can flip unnoticed. */
    ok = true;
    for (size_t bit = 0; bit < n * 8 && ok; bit++) {
        char label[64];
        craft(&test_id, 64, buf);
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        snprintf(label, sizeof label, "bit %zu flipped", bit);
        ok = parse_is(label, buf, n, false, "");
    }
    t_report(ok, "parse: each of the %zu single-bit flips is rejected", n * 8);

    /* One field changed in a valid cache: offset, XOR a byte with x (or, if
     * set32, store v there), the reason expected, the case. */
    static const struct {
        size_t at;
        uint8_t x;
        bool set32;
        uint32_t v;
        const char *reason, *what;
    } edits[] = {
        {0, 0x20, false, 0, "not a vkmha pipeline cache (bad magic)", "wrong magic"},
        {VK_CACHE_OFF_FORMAT, 0, true, 2, "format version 2 (this vkmha reads version 1)",
         "a newer format version"},
        {VK_CACHE_OFF_HEADER_SIZE, 0, true, 96, "header size 96", "another header size"},
        {VK_CACHE_OFF_VKMHA, 0, true, 900, "made by vkmha 0.9.0",
         "a cache made by another vkmha version"},
        {VK_CACHE_OFF_VENDOR, 0, true, 0x1002,
         "made for another device (vendorID 0x1002, this device has 0x10de)",
         "another vendorID"},
        {VK_CACHE_OFF_DEVICE, 0, true, 7, "made for another device (deviceID 0x7",
         "another deviceID"},
        {VK_CACHE_OFF_DRIVER, 0, true, 1, "made for another device (driverVersion 0x1",
         "another driverVersion"},
        {VK_CACHE_OFF_CACHE_UUID + 15, 1, false, 0,
         "made for another device (pipelineCacheUUID differs)", "another pipelineCacheUUID"},
        {VK_CACHE_OFF_DEVICE_UUID, 0x80, false, 0,
         "made for another device (deviceUUID differs)", "another deviceUUID"},
        {VK_CACHE_OFF_CHECKSUM + 7, 0x40, false, 0, "checksum mismatch", "a wrong checksum"},
        {HDR + 40, 0x01, false, 0, "checksum mismatch", "one data byte changed"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++)
        t_report(tampered_is(edits[i].what, edits[i].at, edits[i].x, edits[i].set32, edits[i].v,
                             edits[i].reason),
                 "parse: %s", edits[i].what);
    t_report(parse_is("short foreign file", (const uint8_t *)"PK\3\4", 4, false, "bad magic"),
             "parse: a 4-byte file of another kind is not taken for a truncated cache");

    /* Sizes: more bytes than the header says, a size beyond any file. */
    n = craft(&test_id, 64, big);
    memset(big + n, 0, 8);
    t_report(parse_is("trailing", big, n + 8, false, "8 bytes after its data"),
             "parse: bytes after the data");
    n = craft(&test_id, 64, buf);
    memset(buf + VK_CACHE_OFF_DATA_SIZE, 0xff, 8);
    t_report(parse_is("huge size", buf, n, false, "data size 18446744073709551615"),
             "parse: a data size of 2^64 - 1 (no overflow)");

    /* The driver's own header inside checksum-correct data. */
    vk_cache_identity other = test_id;
    other.pipeline_cache_uuid[0] ^= 1;
    n = craft(&other, 64, buf); /* driver header of `other` ... */
    vk_pipeline_cache_header(&test_id, buf + HDR, 64, buf); /* ... under test_id's */
    t_report(parse_is("driver header", buf, n, false,
                      "made for another device (the driver data's own header differs)"),
             "parse: driver data whose own header names another device");
    n = craft(&test_id, 16, buf);
    vk_pipeline_cache_header(&test_id, buf + HDR, 16, buf);
    t_report(parse_is("short driver data", buf, n, false,
                      "no valid VkPipelineCacheHeaderVersionOne"),
             "parse: 16 bytes of driver data cannot hold the driver's header");
    n = craft(&test_id, 64, buf);
    put32(buf + HDR, 65); /* headerSize beyond the data */
    vk_pipeline_cache_header(&test_id, buf + HDR, 64, buf);
    t_report(parse_is("driver header size", buf, n, false,
                      "no valid VkPipelineCacheHeaderVersionOne"),
             "parse: a driver headerSize beyond its data");
}

/* ---- Vulkan contexts ------------------------------------------------------ */

/* Everything a context logged, one message a line, and the last error. */
typedef struct log_capture {
    char text[16384];
    size_t len;
    char error[1024];
    vkmha_status error_status;
} log_capture;

static void capture(void *user, vkmha_log_level level, vkmha_status status, const char *msg)
{
    log_capture *c = (log_capture *)user;
    if (strstr(msg, "validation layer"))
        t_diag("%s", msg);
    if (level >= VKMHA_LOG_ERROR) {
        snprintf(c->error, sizeof c->error, "%s", msg);
        c->error_status = status;
    }
    int w = snprintf(c->text + c->len, sizeof c->text - c->len, "%s\n", msg);
    if (w > 0)
        c->len = c->len + (size_t)w < sizeof c->text ? c->len + (size_t)w : sizeof c->text - 1;
}

static bool logged(const log_capture *c, const char *label, const char *want)
{
    if (strstr(c->text, want))
        return true;
    t_diag("%s: the log lacks \"%s\"; it has:\n# %s", label, want, c->text);
    return false;
}

/* Validation messages over every Vulkan context, added up at destroy. */
static uint64_t g_validation;
static bool g_validation_on = true;

static vkmha_status create(vkmha_context_desc d, log_capture *cap, vkmha_context **out)
{
    memset(cap, 0, sizeof *cap);
    d.backend = VKMHA_BACKEND_VULKAN;
    d.enable_validation = t_validation();
    d.log = capture;
    d.log_user = cap;
    d.log_level = VKMHA_LOG_INFO; /* what became of the cache */
    /* Which pipelines a call builds is what these cases count: none built
     * by the self-check before it (test_selfcheck.c tests that). */
    d.flags |= VKMHA_CONTEXT_NO_SELF_CHECK;
    vkmha_status st = vkmha_context_create(&d, out);
    t_pin_libraries(); /* sanitizer builds: keep the driver and layer mapped */
    return st;
}

static vkmha_context_info info_of(const vkmha_context *ctx)
{
    vkmha_context_info info;
    memset(&info, 0, sizeof info);
    if (vkmha_context_get_info(ctx, &info) != VKMHA_SUCCESS)
        t_diag("vkmha_context_get_info failed");
    return info;
}

static void destroy(vkmha_context *ctx)
{
    if (!ctx)
        return;
    vkmha_context_info info = info_of(ctx);
    g_validation += info.validation_messages;
    g_validation_on = g_validation_on && info.validation_enabled == t_validation();
    vkmha_context_destroy(ctx);
}

/* One MHA layer (d_model 32, 4 heads of 8, post-norm, biases), a causal
 * self-attention batch, and the reference backend's output and weights. */
#define B 2
#define L 7
#define D 32
#define H 4
static float *g_w[8], *g_x, *g_want, *g_want_w;
static vkmha_mha_desc g_desc;

static void fixture(vkmha_context *ref)
{
    t_rng rng = {0x9e37};
    for (int i = 0; i < 4; i++)
        g_w[i] = t_random(&rng, D * D, -0.18f, 0.18f);
    for (int i = 4; i < 8; i++)
        g_w[i] = t_random(&rng, D, -0.1f, 0.1f);
    g_x = t_random(&rng, B * L * D, -1, 1);
    g_want = t_alloc(B * L * D);
    g_want_w = t_alloc(B * H * L * L);
    memset(&g_desc, 0, sizeof g_desc);
    g_desc.d_model = D;
    g_desc.n_head = H;
    g_desc.w_q = g_w[0];
    g_desc.w_k = g_w[1];
    g_desc.w_v = g_w[2];
    g_desc.w_o = g_w[3];
    g_desc.b_q = g_w[4];
    g_desc.b_k = g_w[5];
    g_desc.b_v = g_w[6];
    g_desc.b_o = g_w[7];
    g_desc.post_norm = true;
    vkmha_mha *mha = NULL;
    vkmha_mask mask = {.kinds = VKMHA_MASK_CAUSAL};
    vkmha_mha_io io = {.batch = B, .len_q = L, .query = g_x, .key = g_x, .value = g_x,
                       .mask = &mask, .out = g_want, .attn_weights = g_want_w};
    if (vkmha_mha_create(ref, &g_desc, &mha) || vkmha_mha_forward(mha, &io)) {
        printf("Bail out! the reference MHA forward failed: %s\n",
               vkmha_context_last_error(ref));
        exit(1);
    }
    vkmha_mha_destroy(mha);
}

/* The fixture's forward on ctx, on the fused path (with weights) and the
 * unfused one: both must match the reference. */
static bool forward_matches(vkmha_context *ctx, const char *label)
{
    vkmha_mha *mha = NULL;
    float *out = t_alloc(B * L * D), *w = t_alloc(B * H * L * L);
    bool ok = true;
    vkmha_status st = vkmha_mha_create(ctx, &g_desc, &mha);
    T_EXPECT_STATUS(st, VKMHA_SUCCESS, ok);
    static const vkmha_attention_path paths[2] = {VKMHA_ATTENTION_PATH_FUSED,
                                                  VKMHA_ATTENTION_PATH_UNFUSED};
    for (int p = 0; p < 2 && ok; p++) {
        vkmha_mask mask = {.kinds = VKMHA_MASK_CAUSAL};
        vkmha_mha_io io = {.batch = B, .len_q = L, .query = g_x, .key = g_x, .value = g_x,
                           .mask = &mask, .out = out, .attn_weights = w,
                           .attention_path = paths[p]};
        st = vkmha_mha_forward(mha, &io);
        T_EXPECT_STATUS(st, VKMHA_SUCCESS, ok);
        if (st)
            t_diag("%s: %s", label, vkmha_context_last_error(ctx));
        ok = ok && t_close(label, "out", out, g_want, B * L * D, OUT_ATOL, OUT_RTOL) &&
             t_close(label, "attn_weights", w, g_want_w, B * H * L * L, W_ATOL, W_RTOL);
    }
    vkmha_mha_destroy(mha);
    free(out);
    free(w);
    return ok;
}

/* ---- files ---------------------------------------------------------------- */

static char g_dir[512];

static void path_in_dir(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", g_dir, name);
}

static bool write_bytes(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(bytes, 1, n, f) == n;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok)
        t_diag("cannot write %s: %s", path, strerror(errno));
    return ok;
}

/* The file's bytes (malloc'd) and size; NULL if it cannot be read. */
static uint8_t *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    *n = 0;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1)) &&
            fread(buf, 1, (size_t)len, f) == (size_t)len)
            *n = (size_t)len;
    }
    fclose(f);
    return buf;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- cases ----------------------------------------------------------------- */

/* The cache a first context saved: its bytes and the driver's share. */
static uint8_t *g_cache;
static size_t g_cache_size;

/* Whether the driver's share of a saved cache starts with a whole
 * VkPipelineCacheHeaderVersionOne (32 bytes or more, inside the data),
 * which vkmha requires before it hands the data back to a driver. Mesa
 * 26.2's lavapipe announces 32 bytes and writes the header's first 20:
 * vkmha must then refuse the file, and say so. */
static bool driver_header_whole(const uint8_t *cache, size_t size)
{
    const uint8_t *d = cache + HDR;
    const size_t n = size - HDR;
    const uint32_t header = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 |
                            (uint32_t)d[3] << 24;
    return n == 0 || (n >= 32 && header >= 32 && header <= n);
}

/* A context given the saved cache: loaded (n driver bytes) where the driver's
 * header is whole, else refused for it; either way its forward matches. */
static bool loads_or_refuses(vkmha_context *ctx, const log_capture *cap, const char *label,
                             const char *loaded_msg, const char *source, bool whole, size_t n)
{
    const vkmha_context_info info = info_of(ctx);
    char want[700];
    bool ok;
    if (whole) {
        ok = logged(cap, label, loaded_msg) && info.pipeline_cache_loaded &&
             info.pipeline_cache_bytes == n;
    } else {
        snprintf(want, sizeof want, "pipeline cache %s ignored: the driver data has no valid "
                                    "VkPipelineCacheHeaderVersionOne", source);
        t_diag("%s: the driver's own cache data (%zu bytes) has no whole header: refused", label,
               n);
        ok = logged(cap, label, want) && !info.pipeline_cache_loaded;
    }
    if (!ok)
        t_diag("loaded %d, %llu bytes", info.pipeline_cache_loaded,
               (unsigned long long)info.pipeline_cache_bytes);
    return forward_matches(ctx, label) && ok;
}

static void save_and_reload_cases(void)
{
    char path[600], tmp[610];
    path_in_dir(path, sizeof path, "cache.bin");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    vkmha_context_desc d = {0};
    log_capture cap;
    vkmha_context *ctx = NULL;

    /* First start: no file yet, every pipeline created at creation. */
    d.pipeline_cache_path = path;
    d.flags = VKMHA_CONTEXT_EAGER_PIPELINES;
    bool ok = true;
    T_EXPECT_STATUS(create(d, &cap, &ctx), VKMHA_SUCCESS, ok);
    if (!ok) {
        t_report(false, "first start with a missing cache file: %s", cap.error);
        return;
    }
    char want[700];
    snprintf(want, sizeof want, "vkmha_context_create: no pipeline cache at %s yet", path);
    vkmha_context_info info = info_of(ctx);
    ok = logged(&cap, "missing file", want) && !info.pipeline_cache_loaded &&
         info.pipeline_cache_bytes == 0;
    t_report(ok, "a missing cache file is logged at INFO and the context starts with none");

    uint32_t eager = info.pipelines_created;
    ok = eager > 0 && forward_matches(ctx, "eager context");
    uint32_t after = info_of(ctx).pipelines_created;
    if (after != eager)
        t_diag("pipelines_created %u at creation, %u after forwards", eager, after);
    t_report(ok && after == eager,
             "EAGER_PIPELINES: %u pipelines at creation, none added by forwards on the "
             "fused and unfused paths",
             eager);

    /* Save to the desc's path; the file is what get_pipeline_cache gives. */
    ok = true;
    size_t n = 0;
    T_EXPECT_STATUS(vkmha_context_save_pipeline_cache(ctx, NULL), VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS(vkmha_context_get_pipeline_cache(ctx, NULL, &n), VKMHA_SUCCESS, ok);
    uint8_t *got = malloc(n ? n : 1);
    T_EXPECT_STATUS(vkmha_context_get_pipeline_cache(ctx, got, &n), VKMHA_SUCCESS, ok);
    g_cache = read_bytes(path, &g_cache_size);
    if (!g_cache || g_cache_size != n || memcmp(g_cache, got, n) != 0) {
        t_diag("the file (%s) has %zu bytes, get_pipeline_cache %zu, or their bytes differ",
               g_cache ? "read" : "unreadable", g_cache_size, n);
        ok = false;
    }
    if (exists(tmp)) {
        t_diag("%s was left behind", tmp);
        ok = false;
    }
    t_report(ok, "save(NULL) writes desc->pipeline_cache_path: %zu bytes (%zu of driver data)",
             g_cache_size, g_cache_size > HDR ? g_cache_size - HDR : 0);
    free(got);
    destroy(ctx);
    if (!g_cache || g_cache_size < HDR) {
        free(g_cache);
        g_cache = NULL;
        return;
    }
    t_diag("the driver's pipeline cache data: %zu bytes", g_cache_size - HDR);

    /* Second start: the file is loaded; pipelines are created lazily. */
    d.flags = 0;
    ok = true;
    T_EXPECT_STATUS(create(d, &cap, &ctx), VKMHA_SUCCESS, ok);
    const bool whole = driver_header_whole(g_cache, g_cache_size);
    if (ok) {
        info = info_of(ctx);
        snprintf(want, sizeof want, "vkmha_context_create: pipeline cache %s loaded (%zu bytes",
                 path, g_cache_size - HDR);
        ok = loads_or_refuses(ctx, &cap, "reload", want, path, whole, g_cache_size - HDR);
    }
    t_report(ok, "a second context %s the saved file (%zu driver bytes) and its forward "
                 "matches the reference",
             whole ? "loads" : "refuses (the driver's header is not whole)",
             g_cache_size - HDR);
    uint32_t lazy = info.pipelines_created, lazy_after = info_of(ctx).pipelines_created;
    t_report(lazy == 0 && lazy_after > 0,
             "without EAGER_PIPELINES: %u pipelines at creation, %u after the forwards", lazy,
             lazy_after);
    destroy(ctx);
}

static void bytes_cases(void)
{
    if (!g_cache)
        return;
    vkmha_context_desc d = {0};
    log_capture cap;
    vkmha_context *ctx = NULL, *ctx2 = NULL;
    bool ok = true;
    d.pipeline_cache_data = g_cache;
    d.pipeline_cache_size = g_cache_size;
    T_EXPECT_STATUS(create(d, &cap, &ctx), VKMHA_SUCCESS, ok);
    if (!ok) {
        t_report(false, "bytes in: %s", cap.error);
        return;
    }
    const bool whole = driver_header_whole(g_cache, g_cache_size);
    ok = loads_or_refuses(ctx, &cap, "bytes in", "pipeline cache desc->pipeline_cache_data loaded",
                          "desc->pipeline_cache_data", whole, g_cache_size - HDR);
    t_report(ok, "bytes in: desc->pipeline_cache_data is %s, the forward matches",
             whole ? "loaded" : "refused (the driver's header is not whole)");

    /* The size protocol: ask, too small (nothing written), exact. */
    size_t n = 0;
    ok = true;
    T_EXPECT_STATUS(vkmha_context_get_pipeline_cache(ctx, NULL, &n), VKMHA_SUCCESS, ok);
    uint8_t *buf = malloc(n + 1);
    memset(buf, 0x5a, n + 1);
    size_t small = n - 1;
    T_EXPECT_STATUS(vkmha_context_get_pipeline_cache(ctx, buf, &small),
                    VKMHA_ERROR_INVALID_ARGUMENT, ok);
    const char *msg = vkmha_context_last_error(ctx);
    if (strncmp(msg, "vkmha_context_get_pipeline_cache: *size (", 41) != 0) {
        t_diag("message \"%s\" does not start with the function and name *size", msg);
        ok = false;
    }
    for (size_t i = 0; i <= n; i++)
        if (buf[i] != 0x5a) {
            t_diag("a too small call wrote byte %zu", i);
            ok = false;
            break;
        }
    if (small != n) {
        t_diag("a too small call returned *size %zu, not the %zu needed", small, n);
        ok = false;
    }
    /* The driver may write less than it announced (Vulkan: *pDataSize is
     * what was written); never more. */
    size_t exact = n;
    T_EXPECT_STATUS(vkmha_context_get_pipeline_cache(ctx, buf, &exact), VKMHA_SUCCESS, ok);
    ok = ok && exact >= HDR && exact <= n && buf[n] == 0x5a;
    t_report(ok, "get_pipeline_cache: size query %zu, too small -> INVALID_ARGUMENT naming "
                 "*size with the size needed and nothing written, exact fits (%zu written)",
             n, exact);

    /* Bytes out of the bytes-in context load into a third context. */
    ok = true;
    d.pipeline_cache_data = buf;
    d.pipeline_cache_size = exact;
    T_EXPECT_STATUS(create(d, &cap, &ctx2), VKMHA_SUCCESS, ok);
    const bool whole_out = driver_header_whole(buf, exact);
    ok = ok && loads_or_refuses(ctx2, &cap, "bytes out -> in", "pipeline cache "
                                "desc->pipeline_cache_data loaded", "desc->pipeline_cache_data",
                                whole_out, exact - HDR);
    t_report(ok, "bytes out -> bytes in: a third context %s the %zu bytes",
             whole_out ? "loads" : "refuses (the driver's header is not whole)", exact);
    destroy(ctx2);
    free(buf);
    destroy(ctx);
}

/* A context given `bytes` as a file (or as data) must start, say why it
 * ignored them, and compute correctly. */
static void rejected_case(const char *label, const char *path, const uint8_t *bytes,
                          size_t n, bool as_data, const char *reason)
{
    vkmha_context_desc d = {0};
    log_capture cap;
    vkmha_context *ctx = NULL;
    bool ok = true;
    if (as_data) {
        d.pipeline_cache_data = bytes;
        d.pipeline_cache_size = n;
    } else {
        d.pipeline_cache_path = path;
        if (bytes && !write_bytes(path, bytes, n)) {
            t_report(false, "ignored cache: %s", label);
            return;
        }
    }
    T_EXPECT_STATUS(create(d, &cap, &ctx), VKMHA_SUCCESS, ok);
    if (!ok) {
        t_report(false, "ignored cache: %s: %s", label, cap.error);
        return;
    }
    char want[900];
    snprintf(want, sizeof want, "vkmha_context_create: pipeline cache %s ignored: %s",
             as_data ? "desc->pipeline_cache_data" : path, reason);
    vkmha_context_info info = info_of(ctx);
    ok = logged(&cap, label, want) && !info.pipeline_cache_loaded &&
         info.pipeline_cache_bytes == 0;
    ok = forward_matches(ctx, label) && ok;
    t_report(ok, "ignored cache: %s -> \"%s\", forward matches", label, reason);
    destroy(ctx);
    if (!as_data && bytes)
        remove(path);
}

static void rejected_cases(void)
{
    if (!g_cache)
        return;
    char path[600], reason[128];
    const size_t n = g_cache_size, data = n - HDR;
    uint8_t *b = malloc(n);
    path_in_dir(path, sizeof path, "bad.bin");

    snprintf(reason, sizeof reason, "truncated (%zu of %zu bytes)", n - 10, n);
    rejected_case("truncated by 10 bytes", path, g_cache, n - 10, false, reason);

    if (data > 0) {
        memcpy(b, g_cache, n);
        b[HDR + data / 2] ^= 0x10;
        rejected_case("one data byte flipped", path, b, n, false, "checksum mismatch");
    } else {
        t_report(false, "the driver gave no cache data to flip");
    }

    memcpy(b, g_cache, n);
    b[VK_CACHE_OFF_CACHE_UUID + 3] ^= 0xff;
    rejected_case("another pipelineCacheUUID", path, b, n, false,
                  "made for another device (pipelineCacheUUID differs)");
    rejected_case("another pipelineCacheUUID, as bytes", NULL, b, n, true,
                  "made for another device (pipelineCacheUUID differs)");

    memcpy(b, g_cache, n);
    b[VK_CACHE_OFF_DEVICE_UUID + 15] ^= 0x01;
    rejected_case("another deviceUUID", path, b, n, false,
                  "made for another device (deviceUUID differs)");

    memcpy(b, g_cache, n);
    b[VK_CACHE_OFF_VENDOR] ^= 0x02;
    rejected_case("another vendorID", path, b, n, false, "made for another device (vendorID");

    memcpy(b, g_cache, n);
    memcpy(b, "VKMHAPX", 8);
    rejected_case("wrong magic", path, b, n, false, "not a vkmha pipeline cache (bad magic)");

    rejected_case("a zero-length file", path, b, 0, false, "empty (0 bytes)");

    char dir[600];
    path_in_dir(dir, sizeof dir, "subdir");
    rejected_case("a directory as the path", dir, NULL, 0, false, "not a regular file");
    free(b);
}

/* A failed context creation: INVALID_ARGUMENT, *out NULL, and a logged error
 * that starts with the function and names every argument in `args`. */
static void bad_create(const char *label, vkmha_context_desc d, const char *arg1,
                       const char *arg2)
{
    log_capture cap;
    vkmha_context *ctx = (vkmha_context *)(uintptr_t)0x5e7;
    bool ok = true;
    T_EXPECT_STATUS(create(d, &cap, &ctx), VKMHA_ERROR_INVALID_ARGUMENT, ok);
    if (ctx) {
        t_diag("%s: *out is not NULL", label);
        if (ok)
            destroy(ctx);
        ok = false;
    }
    if (strncmp(cap.error, "vkmha_context_create: ", 22) != 0 || !strstr(cap.error, arg1) ||
        (arg2 && !strstr(cap.error, arg2))) {
        t_diag("%s: logged \"%s\" does not start with vkmha_context_create and name %s%s%s",
               label, cap.error, arg1, arg2 ? " and " : "", arg2 ? arg2 : "");
        ok = false;
    }
    t_report(ok, "bad argument: %s", label);
}

/* A failed call on a live context: status, message prefix and substrings,
 * then the context still computes correctly. */
static void bad_call(vkmha_context *ctx, const char *label, vkmha_status got,
                     vkmha_status want, const char *fn, const char *what1, const char *what2)
{
    bool ok = true;
    T_EXPECT_STATUS(got, want, ok);
    const char *msg = vkmha_context_last_error(ctx);
    size_t fl = strlen(fn);
    if (strncmp(msg, fn, fl) != 0 || msg[fl] != ':' || !strstr(msg, what1) ||
        (what2 && !strstr(msg, what2))) {
        t_diag("%s: message \"%s\" does not start with %s: and contain \"%s\"%s%s", label, msg,
               fn, what1, what2 ? " and " : "", what2 ? what2 : "");
        ok = false;
    }
    if (info_of(ctx).backend == VKMHA_BACKEND_VULKAN)
        ok = forward_matches(ctx, label) && ok;
    t_report(ok, "%s", label);
}

static void argument_cases(void)
{
    static const uint8_t bytes[4] = {1, 2, 3, 4};
    vkmha_context_desc d = {0};
    d.pipeline_cache_path = "x.bin";
    d.pipeline_cache_data = bytes;
    d.pipeline_cache_size = sizeof bytes;
    bad_create("path and data together", d, "desc->pipeline_cache_path",
               "desc->pipeline_cache_data");
    memset(&d, 0, sizeof d);
    d.pipeline_cache_data = bytes;
    bad_create("data without a size", d, "desc->pipeline_cache_size", NULL);
    memset(&d, 0, sizeof d);
    d.pipeline_cache_size = 16;
    bad_create("a size without data", d, "desc->pipeline_cache_data", NULL);
    memset(&d, 0, sizeof d);
    d.pipeline_cache_path = "";
    bad_create("an empty path", d, "desc->pipeline_cache_path", NULL);

    /* On a context without a path. */
    log_capture cap;
    vkmha_context *ctx = NULL;
    memset(&d, 0, sizeof d);
    if (create(d, &cap, &ctx) != VKMHA_SUCCESS) {
        t_report(false, "a context without a pipeline cache: %s", cap.error);
        return;
    }
    if (strstr(cap.text, "pipeline cache"))
        t_diag("a context given no cache logged about one: %s", cap.text);
    t_report(!strstr(cap.text, "pipeline cache"),
             "a context given no pipeline cache logs nothing about one");
    bad_call(ctx, "get_pipeline_cache with size NULL",
             vkmha_context_get_pipeline_cache(ctx, NULL, NULL), VKMHA_ERROR_INVALID_ARGUMENT,
             "vkmha_context_get_pipeline_cache", "size is NULL", NULL);
    bad_call(ctx, "save(NULL) without desc->pipeline_cache_path",
             vkmha_context_save_pipeline_cache(ctx, NULL), VKMHA_ERROR_INVALID_ARGUMENT,
             "vkmha_context_save_pipeline_cache", "path is NULL",
             "desc->pipeline_cache_path");

    /* Nowhere to write: a missing directory, and a directory in the way of
     * the rename. Neither leaves a temporary file. */
    char path[600], tmp[610];
    path_in_dir(path, sizeof path, "missing/cache.bin");
    bad_call(ctx, "save into a missing directory",
             vkmha_context_save_pipeline_cache(ctx, path), VKMHA_ERROR_INVALID_ARGUMENT,
             "vkmha_context_save_pipeline_cache", "cannot write path", strerror(ENOENT));
    path_in_dir(path, sizeof path, "subdir");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    bad_call(ctx, "save over a directory", vkmha_context_save_pipeline_cache(ctx, path),
             VKMHA_ERROR_INVALID_ARGUMENT, "vkmha_context_save_pipeline_cache",
             "cannot rename", path);
    struct stat st;
    t_report(stat(path, &st) == 0 && S_ISDIR(st.st_mode) && !exists(tmp),
             "a failed save leaves the directory in place and no %s", tmp);
    destroy(ctx);

    /* The reference backend has no pipeline cache. */
    vkmha_context_desc rd = {0};
    rd.backend = VKMHA_BACKEND_REFERENCE;
    vkmha_context *ref = NULL;
    if (vkmha_context_create(&rd, &ref) == VKMHA_SUCCESS) {
        size_t n = 0;
        bad_call(ref, "reference: get_pipeline_cache",
                 vkmha_context_get_pipeline_cache(ref, NULL, &n), VKMHA_ERROR_UNSUPPORTED,
                 "vkmha_context_get_pipeline_cache", "reference backend", NULL);
        bad_call(ref, "reference: save_pipeline_cache",
                 vkmha_context_save_pipeline_cache(ref, path), VKMHA_ERROR_UNSUPPORTED,
                 "vkmha_context_save_pipeline_cache", "reference backend", NULL);
        vkmha_context_destroy(ref);
    }
}

int main(void)
{
    parse_cases();

    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/vkmha-pcache-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        printf("Bail out! cannot create a directory in %s: %s\n", base ? base : "/tmp",
               strerror(errno));
        return 1;
    }
    char sub[600];
    path_in_dir(sub, sizeof sub, "subdir");
    if (t_mkdir(sub, 0700) != 0) {
        printf("Bail out! cannot create %s: %s\n", sub, strerror(errno));
        return 1;
    }

    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    fixture(ref);
    vkmha_context_destroy(ref);

    save_and_reload_cases();
    bytes_cases();
    rejected_cases();
    argument_cases();

    t_diag("validation layer messages over all contexts: %llu",
           (unsigned long long)g_validation);
    t_report(g_validation_on && g_validation == 0,
             "validation layer enabled in every context and silent (%llu messages)",
             (unsigned long long)g_validation);

    char path[600];
    path_in_dir(path, sizeof path, "cache.bin");
    remove(path);
    rmdir(sub);
    rmdir(g_dir);
    free(g_cache);
    for (int i = 0; i < 8; i++)
        free(g_w[i]);
    free(g_x);
    free(g_want);
    free(g_want_w);
    return t_finish();
}
