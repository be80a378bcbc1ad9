/* vkmha-bench-decode: decode tokens per second of one MHA layer with a KV
 * cache, against the same layer without a cache and against PyTorch's cached
 * decode (bench/torch_decode.py), measured in the same run.
 *
 * A step generates one token of one sequence: its query attends over the
 * CONTEXT positions already cached plus its own (causal), as a decoder's
 * self-attention does.
 *   vkmha, cache:    vkmha_mha_forward with io.kv_cache: projects the new
 *                    token only, appends its key and value, attends over
 *                    the cache; the cache is filled to CONTEXT positions
 *                    beforehand (its tensors written, vkmha_kv_cache_set_length)
 *                    and cut back to CONTEXT after each timed step.
 *   vkmha, no cache: vkmha_mha_forward with the query and a key / value input
 *                    of all CONTEXT + 1 positions: every step projects the
 *                    whole prefix again (what a cache saves).
 *   torch, cache:    PyTorch fp32 on the CPU, a loop that concatenates the
 *                    cached keys and values (torch_decode.py).
 * Models: small (d_model 512, 8 heads) and large (d_model 4096, 32 query heads
 * over 8 key/value heads: each step reads 168 MB of fp32 weights). vkmha's
 * dtype is that of the weights, the cache and the activations; q8, q4 and
 * q4z are f16 activations and cache with the projection weights quantized
 * (vkmha_mha_desc.weight_quant: q8 and q4 in groups of 32, q4z of 128).
 * Each row also gives the bytes of the layer's projection weights
 * (scales and zero points included). --q8-cache adds, for each dtype, a row
 * with an 8-bit cache (vkmha_kv_cache_desc.quant: int8 codes and an fp16
 * scale per row of d). --rope adds a row of the same layer with RoPE on
 * every dimension (vkmha_mha_desc.rope_dims = d_k, theta 10000) and the
 * plain cache, and its ratio to the plain cache's row. --window W adds a
 * row of the same layer with a causal sliding window of W positions
 * (VKMHA_MASK_WINDOW) over the plain cache, and its ratio to the plain
 * cache's row (the step attends over W keys of the context's); with
 * --q8-cache too, also over the 8-bit cache, against its row. --mixed adds a
 * continuous-batching step of MIXED_B entries over caches of the same
 * context: entry 0 brings a chunk of MIXED_P prompt tokens while the
 * others decode a token each, as one call (vkmha_mha_io.entry_tokens,
 * packed rows: "vkmha, mixed") against the two calls it replaces (the
 * chunk on entry 0, then a decode step of the others: "vkmha, 2 calls"),
 * and their ratio. Each row:
 * median ms per step over --reps steps (after one warm-up), tokens per second,
 * the device time per step (VKMHA_CONTEXT_PROFILE: the rest of a step is the
 * host's: its uploads, recording, submission and waiting), and the device
 * bytes a cached token takes (n_kv_head * (d_k + d_v) * the dtype's size;
 * q8 cache: n_kv_head * 2 * (4 + d)). */
#include "bench_util.h"
#include "half.h" /* src/half.c: the inputs in 16 bits */

#include <vkmha.h>

#ifndef VKMHA_TORCH_DECODE
#define VKMHA_TORCH_DECODE "bench/torch_decode.py"
#endif

typedef struct model {
    const char *name;
    uint32_t d_model, heads, kv_heads;
} model;

static const model models[] = {{"small", 512, 8, 8}, {"large", 4096, 32, 8}};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float rnd(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xffffff) / 16777216.0f - 0.5f;
}

static float *random_array(size_t n, float scale)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "vkmha-bench-decode: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = rnd() * scale;
    return p;
}

static void check(vkmha_context *ctx, vkmha_status st, const char *what)
{
    bench_check("vkmha-bench-decode", ctx, st, what);
}

typedef struct timing {
    double med, min, max, gpu; /* ms per step; gpu: device ms (median), 0 if none */
} timing;

/* Times `steps` steps of the calls vkmha_mha_forward(io[0 .. n - 1]) after
 * one warm-up (device time: the calls' sum); with a cache, each step
 * appends, cut back to `context` after it (untimed). */
static timing time_calls(vkmha_context *ctx, vkmha_mha *m, const vkmha_mha_io *io, int n,
                         vkmha_kv_cache *cache, uint32_t context, uint32_t steps)
{
    double *w = malloc(2 * (size_t)steps * sizeof *w), *g = w + steps;
    uint32_t n_gpu = 0;
    timing t = {0};
    for (uint32_t i = 0; i <= steps; i++) {
        double t0 = now_ms(), gpu = 0;
        bool timed = true;
        for (int c = 0; c < n; c++) {
            check(ctx, vkmha_mha_forward(m, &io[c]), "a decode step");
            vkmha_context_info info;
            timed = timed && vkmha_context_get_info(ctx, &info) == VKMHA_SUCCESS &&
                    info.gpu_timing && info.last_gpu_time_ns;
            gpu += timed ? info.last_gpu_time_ns / 1e6 : 0;
        }
        const double dt = now_ms() - t0;
        if (i > 0) {
            w[i - 1] = dt;
            if (timed)
                g[n_gpu++] = gpu;
        }
        if (cache)
            check(ctx, vkmha_kv_cache_set_length(cache, VKMHA_ALL_ENTRIES, context),
                  "vkmha_kv_cache_set_length");
    }
    qsort(w, steps, sizeof *w, cmp_double);
    t.med = w[steps / 2], t.min = w[0], t.max = w[steps - 1];
    if (n_gpu == steps) {
        qsort(g, steps, sizeof *g, cmp_double);
        t.gpu = g[steps / 2];
    }
    free(w);
    return t;
}

static timing time_steps(vkmha_context *ctx, vkmha_mha *m, const vkmha_mha_io *io,
                         vkmha_kv_cache *cache, uint32_t context, uint32_t steps)
{
    return time_calls(ctx, m, io, 1, cache, context, steps);
}

/* The torch peer's step for (model, context), or false when absent. */
static bool torch_step(const char *python, const char *script, const model *md,
                       uint32_t context, uint32_t steps, uint32_t threads, timing *t)
{
    char cmd[1024], line[256];
    snprintf(cmd, sizeof cmd, "'%s' '%s' %u %u %u %u %u %u", python, script, md->d_model,
             md->heads, md->kv_heads, context, steps, threads);
    FILE *py = popen(cmd, "r");
    bool ok = false;
    while (py && fgets(line, sizeof line, py))
        ok = sscanf(line, "%lf %lf %lf", &t->med, &t->min, &t->max) == 3;
    if (!py || pclose(py) != 0)
        ok = false;
    t->gpu = 0;
    return ok;
}

static FILE *csv;

static void row(const model *md, const char *dtype, uint32_t context, const char *impl,
                const timing *t, double torch_ms, uint64_t token_bytes, uint64_t weight_bytes)
{
    printf("%-5s %-4s %6u  %-15s %10.3f %10.1f %10.3f %9.2f %8llu\n", md->name, dtype,
           context, impl, t->med, 1e3 / t->med, t->gpu, weight_bytes / 1048576.0,
           (unsigned long long)token_bytes);
    if (torch_ms > 0)
        printf("%58s%.2fx the torch peer's tokens/s\n", "", torch_ms / t->med);
    if (csv)
        fprintf(csv, "%s,%u,%u,%u,%s,%u,\"%s\",%.4f,%.4f,%.4f,%.4f,%.2f,%.4f,%llu,%llu\n",
                md->name, md->d_model, md->heads, md->kv_heads, dtype, context, impl, t->med,
                t->min, t->max, t->gpu, 1e3 / t->med, torch_ms > 0 ? torch_ms / t->med : 0,
                (unsigned long long)token_bytes, (unsigned long long)weight_bytes);
}

enum { MIXED_B = 8, MIXED_P = 64 };

/* --mixed: the continuous-batching step (see the top) over MIXED_B cache
 * entries of `context` positions; x holds MIXED_P + MIXED_B - 1 rows. */
static void mixed_rows(vkmha_context *ctx, const model *md, const char *dtype, vkmha_mha *m,
                       uint32_t dt, uint32_t context, const void *x, uint32_t steps,
                       uint64_t weight_bytes)
{
    static uint32_t counts[MIXED_B];
    for (int b = 0; b < MIXED_B; b++)
        counts[b] = b ? 1 : MIXED_P;
    const uint32_t D = md->d_model, rows = MIXED_P + MIXED_B - 1;
    const uint64_t es = dt == VKMHA_DTYPE_F32 ? 4 : 2;
    vkmha_kv_cache *cache = NULL;
    const vkmha_kv_cache_desc kd = {.batch = MIXED_B, .capacity = context + MIXED_P,
                                    .dtype = dt};
    check(ctx, vkmha_kv_cache_create(m, &kd, &cache), "vkmha_kv_cache_create (--mixed)");
    check(ctx, vkmha_kv_cache_set_length(cache, VKMHA_ALL_ENTRIES, context),
          "vkmha_kv_cache_set_length");
    void *out = malloc((size_t)rows * D * es);
    const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL};
    const vkmha_mha_io mixed = {.batch = MIXED_B, .len_q = rows, .query = x, .key = x,
                                .value = x, .mask = &causal, .out = out, .dtype = dt,
                                .kv_cache = cache, .entry_tokens = counts};
    const void *rest = (const uint8_t *)x + (size_t)MIXED_P * D * es;
    const vkmha_mha_io two[2] = {
        {.len_q = MIXED_P, .query = x, .key = x, .value = x, .mask = &causal, .out = out,
         .dtype = dt, .kv_cache = cache},
        {.batch = MIXED_B - 1, .len_q = 1, .query = rest, .key = rest, .value = rest,
         .mask = &causal, .out = (uint8_t *)out + (size_t)MIXED_P * D * es, .dtype = dt,
         .kv_cache = cache, .kv_entry = 1}};
    const timing tm = time_calls(ctx, m, &mixed, 1, cache, context, steps);
    const timing t2 = time_calls(ctx, m, two, 2, cache, context, steps);
    row(md, dtype, context, "vkmha, mixed", &tm, 0, 0, weight_bytes);
    row(md, dtype, context, "vkmha, 2 calls", &t2, 0, 0, weight_bytes);
    printf("%58s%.2fx the two calls' time in one mixed call (%u + %u x 1 tokens)\n", "",
           tm.med / t2.med, MIXED_P, MIXED_B - 1);
    vkmha_kv_cache_destroy(cache);
    free(out);
}

/* The weights of dtype name `dt` ("f32", "f16", "q8", "q4", "q4z"): the
 * storage dtype and the activations' (*dt, f16 for the quantized ones), the
 * quantization (*quant, *group; 0 for the float ones). */
static void weights_of(const char *name, uint32_t *dt, uint32_t *quant, uint32_t *group)
{
    *dt = strcmp(name, "f32") == 0 ? VKMHA_DTYPE_F32 : VKMHA_DTYPE_F16;
    *quant = strcmp(name, "q8") == 0    ? VKMHA_QUANT_Q8
             : strcmp(name, "q4") == 0  ? VKMHA_QUANT_Q4
             : strcmp(name, "q4z") == 0 ? VKMHA_QUANT_Q4Z
                                        : 0;
    *group = *quant == VKMHA_QUANT_Q4Z ? 128 : *quant ? 32 : 0;
}

/* Bytes of the layer's projection weights w [out][in] (4 of them). */
static uint64_t weight_bytes(vkmha_context *ctx, const uint32_t out[4], const uint32_t in[4],
                             uint32_t dt, uint32_t quant, uint32_t group)
{
    uint64_t total = 0;
    for (int i = 0; i < 4; i++) {
        const vkmha_quant_desc q = {quant, group, out[i], in[i]};
        vkmha_quant_layout l = {0};
        if (quant)
            check(ctx, vkmha_quant_layout_of(ctx, &q, &l), "vkmha_quant_layout_of");
        total += quant ? l.bytes : (uint64_t)out[i] * in[i] * (dt == VKMHA_DTYPE_F32 ? 4 : 2);
    }
    return total;
}

int main(int argc, char **argv)
{
    static const char *const model_names[] = {"small", "large", NULL};
    static const char *const dtype_names[] = {"f32", "f16", "q8", "q4", "q4z", NULL};
    static const char *const context_names[] = {"512", "2048", "8192", NULL};
    const char *model_arg[2], *dtype_arg[5], *context_arg[3];
    size_t n_models = 0, n_dtypes = 0, n_contexts = 0;
    uint32_t steps = 9, threads = 2, no_cache_max = 2048;
    const char *csv_path = NULL, *python = "/usr/bin/python3", *script = VKMHA_TORCH_DECODE;
    bool no_torch = false, verbose = false, q8_cache = false, rope = false, mixed = false;
    uint32_t window = 0;
    const cli_opt opts[] = {
        CLI_CHOICES("--model", "NAME", model_arg, n_models, model_names,
                    "small (d_model 512, 8 heads) or large (4096, 32 over 8 key/value heads); "
                    "repeatable (default: both)"),
        CLI_CHOICES("--dtype", "NAME", dtype_arg, n_dtypes, dtype_names,
                    "vkmha's weights and cache: f32 or f16, or f16 with the projection "
                    "weights in q8, q4 or q4z; repeatable (default: f32 and f16)"),
        CLI_CHOICES("--context", "N", context_arg, n_contexts, context_names,
                    "cached positions before the step; repeatable (default: all)"),
        CLI_U32("--reps", "N", steps, 1, 1000, "timed steps per row (default 9)"),
        CLI_U32("--no-cache-max", "N", no_cache_max, 0, 0,
                "time vkmha without a cache up to this context (default 2048)"),
        CLI_U32("--threads", "N", threads, 1, 1024, "the torch peer's threads (default 2)"),
        CLI_FLAG("--q8-cache", q8_cache, "also time each dtype with an 8-bit KV cache"),
        CLI_FLAG("--rope", rope, "also time each dtype with RoPE on every dimension"),
        CLI_U32("--window", "W", window, 0, 1u << 30,
                "also time each dtype with a causal sliding window of W (default 0: none)"),
        CLI_FLAG("--mixed", mixed, "also time a mixed batch (a prompt chunk beside decodes) "
                                   "against two calls"),
        CLI_FLAG("--no-torch", no_torch, "skip the torch peer"),
        CLI_STR("--python", "PATH", python, "the python with torch (default /usr/bin/python3)"),
        CLI_STR("--csv", "FILE", csv_path, "also write the rows as CSV"),
        CLI_FLAG("--verbose", verbose, "vkmha's debug messages on stderr"),
    };
    CLI_PARSE("vkmha-bench-decode",
              "Decode tokens per second with a KV cache, against no cache and PyTorch.", opts,
              argc, argv);
    if (!n_models)
        model_arg[n_models++] = "small", model_arg[n_models++] = "large";
    if (!n_dtypes)
        dtype_arg[n_dtypes++] = "f32", dtype_arg[n_dtypes++] = "f16";
    if (!n_contexts)
        for (const char *const *c = context_names; *c; c++)
            context_arg[n_contexts++] = *c;
    if (csv_path && !(csv = fopen(csv_path, "w"))) {
        perror(csv_path);
        return 1;
    }
    if (csv)
        fprintf(csv, "model,d_model,heads,kv_heads,dtype,context,impl,ms_med,ms_min,ms_max,"
                     "device_ms,tokens_per_s,vs_torch,cache_bytes_per_token,weight_bytes\n");

    vkmha_context_desc cd = {.backend = VKMHA_BACKEND_VULKAN, .flags = VKMHA_CONTEXT_PROFILE};
    if (verbose) {
        cd.log = cli_log_stderr;
        cd.log_level = VKMHA_LOG_DEBUG;
    }
    vkmha_context *ctx = NULL;
    check(NULL, vkmha_context_create(&cd, &ctx), "vkmha_context_create");
    vkmha_context_info info;
    check(ctx, vkmha_context_get_info(ctx, &info), "vkmha_context_get_info");
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    printf("vkmha-bench-decode %s: %s (%s), %u steps per row, torch peer %u threads\n", date,
           info.device.name, info.device.driver_info, steps, threads);
    printf("%-5s %-4s %6s  %-15s %10s %10s %10s %9s %8s\n", "model", "dt", "ctx", "impl",
           "ms/step", "tokens/s", "device ms", "W MiB", "B/token");

    for (size_t mi = 0; mi < n_models; mi++) {
        const model *md = &models[strcmp(model_arg[mi], "small") == 0 ? 0 : 1];
        const uint32_t D = md->d_model, H = md->heads, Hkv = md->kv_heads, d = D / H;
        float *w[4] = {random_array((size_t)H * d * D, 1.0f / sqrtf((float)D)),
                       random_array((size_t)Hkv * d * D, 1.0f / sqrtf((float)D)),
                       random_array((size_t)Hkv * d * D, 1.0f / sqrtf((float)D)),
                       random_array((size_t)D * H * d, 1.0f / sqrtf((float)(H * d)))};
        uint32_t max_ctx = 0;
        for (size_t c = 0; c < n_contexts; c++) {
            uint32_t v = (uint32_t)atoi(context_arg[c]);
            max_ctx = v > max_ctx ? v : max_ctx;
        }
        /* The positions of the no-cache rows: a prefix and the new token. */
        const uint32_t prefix = max_ctx < no_cache_max ? max_ctx : no_cache_max;
        const uint32_t seq_rows = prefix + 1 > MIXED_P + MIXED_B ? prefix + 1 : MIXED_P + MIXED_B;
        float *seq = random_array((size_t)seq_rows * D, 1.0f), *out = malloc(D * 4);
        for (size_t c = 0; c < n_contexts; c++) {
            const uint32_t C = (uint32_t)atoi(context_arg[c]);
            timing tt = {0};
            const bool have_torch =
                !no_torch && torch_step(python, script, md, C, steps, threads, &tt);
            /* The peer's dtype: VKMHA_TORCH_DTYPE=float16 (bench/torch_decode.py). */
            const char *tdt = getenv("VKMHA_TORCH_DTYPE");
            const bool t16 = tdt && !strcmp(tdt, "float16");
            const char *tname = t16 ? "f16" : "f32";
            const unsigned long long tbytes = (unsigned long long)Hkv * 2 * d * (t16 ? 2 : 4);
            if (have_torch) {
                printf("%-5s %-4s %6u  %-15s %10.3f %10.1f %10s %9s %8llu\n", md->name, tname,
                       C, "torch, cache", tt.med, 1e3 / tt.med, "-", "", tbytes);
                if (csv)
                    fprintf(csv, "%s,%u,%u,%u,%s,%u,\"torch, cache\",%.4f,%.4f,%.4f,0,%.2f,1,"
                                 "%llu,\n",
                            md->name, D, H, Hkv, tname, C, tt.med, tt.min, tt.max,
                            1e3 / tt.med, tbytes);
            } else {
                printf("%-5s %-4s %6u  %-15s %10s\n", md->name, tname, C, "torch, cache",
                       no_torch ? "skipped" : "absent");
            }
            for (size_t di = 0; di < n_dtypes; di++) {
                uint32_t dt, quant, group;
                weights_of(dtype_arg[di], &dt, &quant, &group);
                const uint64_t es = dt == VKMHA_DTYPE_F32 ? 4 : 2;
                vkmha_mha_desc ld = {.d_model = D, .n_head = H, .n_kv_head = Hkv,
                                     .w_q = w[0], .w_k = w[1], .w_v = w[2], .w_o = w[3],
                                     .storage_dtype = dt, .weight_quant = quant,
                                     .weight_group_size = group};
                const uint32_t w_out[4] = {H * d, Hkv * d, Hkv * d, D}, w_in[4] = {D, D, D, H * d};
                const uint64_t wb = weight_bytes(ctx, w_out, w_in, dt, quant, group);
                vkmha_mha *m = NULL, *mr = NULL;
                check(ctx, vkmha_mha_create(ctx, &ld, &m), "vkmha_mha_create");
                vkmha_mha_desc rd = ld;
                rd.rope_dims = d;
                if (rope)
                    check(ctx, vkmha_mha_create(ctx, &rd, &mr), "vkmha_mha_create (RoPE)");
                const vkmha_mask causal = {.kinds = VKMHA_MASK_CAUSAL},
                                 windowed = {.kinds = VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW,
                                             .window = window};
                void *x = malloc((size_t)seq_rows * D * es);
                if (!x)
                    check(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "the inputs");
                vkmha__from_f32(dt, seq, (size_t)seq_rows * D, x);
                timing t = {0}, t8 = {0};
                /* The rows: the cache of the dtype; with --q8-cache an 8-bit
                 * cache; with --rope the RoPE layer; with --window the
                 * windowed step over each of the caches before. */
                enum { PLAIN, Q8, ROPE, WINDOW, WINDOW_Q8 };
                int kinds[5], n_kinds = 0;
                kinds[n_kinds++] = PLAIN;
                if (q8_cache)
                    kinds[n_kinds++] = Q8;
                if (rope)
                    kinds[n_kinds++] = ROPE;
                if (window)
                    kinds[n_kinds++] = WINDOW;
                if (window && q8_cache)
                    kinds[n_kinds++] = WINDOW_Q8;
                for (int k = 0; k < n_kinds; k++) {
                    const bool with_rope = kinds[k] == ROPE;
                    const bool with_window = kinds[k] == WINDOW || kinds[k] == WINDOW_Q8;
                    const int q8 = kinds[k] == Q8 || kinds[k] == WINDOW_Q8;
                    vkmha_mha *layer = with_rope ? mr : m;
                    /* The cache, filled with C positions of random keys and values
                     * (fp16 or fp32 bits; a q8 cache's rows: a scale and codes). */
                    vkmha_kv_cache *cache = NULL;
                    const vkmha_kv_cache_desc kd = {.capacity = C + 1, .dtype = q8 ? 0 : dt,
                                                    .quant = q8 ? VKMHA_QUANT_Q8 : 0};
                    check(ctx, vkmha_kv_cache_create(layer, &kd, &cache),
                          "vkmha_kv_cache_create");
                    vkmha_tensor *kv[2];
                    vkmha_kv_cache_get_tensors(cache, &kv[0], &kv[1]);
                    for (int i = 0; i < 2; i++) {
                        const uint64_t bytes = vkmha_tensor_bytes(kv[i]);
                        uint8_t *fill = malloc(bytes);
                        /* small fp16 / fp32 bits */
                        for (uint64_t b = 0; fill && b < bytes; b += 2) {
                            fill[b] = (uint8_t)(rng >> 13);
                            fill[b + 1] = 0x30 | (rnd() > 0 ? 0x80 : 0);
                            rng = rng * 6364136223846793005ull + 1;
                        }
                        check(ctx, fill ? vkmha_tensor_upload(kv[i], 0, fill, bytes)
                                        : VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                              "filling the cache");
                        free(fill);
                }
                check(ctx, vkmha_kv_cache_set_length(cache, VKMHA_ALL_ENTRIES, C),
                      "vkmha_kv_cache_set_length");
                vkmha_mha_io io = {.len_q = 1, .query = x, .key = x, .value = x,
                                   .mask = with_window ? &windowed : &causal, .out = out,
                                   .kv_cache = cache,
                                   .dtype = dt};
                const uint64_t token_bytes =
                    (uint64_t)Hkv * 2 * (q8 ? 4 + (d + 3) / 4 * 4 : d * es);
                const timing tq = time_steps(ctx, layer, &io, cache, C, steps);
                row(md, dtype_arg[di], C,
                    with_window ? (q8 ? "vkmha, q8 window" : "vkmha, window")
                    : with_rope ? "vkmha, RoPE"
                    : q8        ? "vkmha, q8 cache"
                                : "vkmha, cache",
                    &tq,
                    have_torch ? tt.med : 0, token_bytes, wb);
                vkmha_kv_cache_destroy(cache);
                if (kinds[k] == PLAIN)
                    t = tq;
                if (kinds[k] == Q8)
                    t8 = tq;
                if (with_rope)
                    printf("%58s%.3fx the plain cache's step with RoPE\n", "", tq.med / t.med);
                if (with_window) {
                    const timing *base = q8 ? &t8 : &t;
                    printf("%58s%.2fx faster with a window of %u (device: %.2fx)\n", "",
                           base->med / tq.med, window, tq.gpu > 0 ? base->gpu / tq.gpu : 0.0);
                }
                }
                if (mixed)
                    mixed_rows(ctx, md, dtype_arg[di], m, dt, C, x, steps, wb);
                if (C <= no_cache_max) {
                    /* The last of C + 1 positions attends over all of them. */
                    vkmha_mha_io nc = {.len_q = 1, .len_k = C + 1,
                                       .query = (uint8_t *)x + (size_t)C * D * es, .key = x,
                                       .value = x, .out = out, .dtype = dt};
                    timing tn = time_steps(ctx, m, &nc, NULL, C, steps < 3 ? steps : 3);
                    row(md, dtype_arg[di], C, "vkmha, no cache", &tn, have_torch ? tt.med : 0, 0,
                        wb);
                    printf("%58s%.1fx faster with the cache\n", "", tn.med / t.med);
                }
                vkmha_mha_destroy(m);
                vkmha_mha_destroy(mr);
                free(x);
            }
        }
        for (int i = 0; i < 4; i++)
            free(w[i]);
        free(seq), free(out);
    }
    vkmha_context_destroy(ctx);
    if (csv)
        fclose(csv);
    return 0;
}
