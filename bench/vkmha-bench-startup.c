/* vkmha-bench-startup: what a start costs, with and without a warm pipeline
 * cache. Each sample is a fresh process (this program re-run with --child),
 * so nothing compiled by an earlier sample survives in memory; what survives
 * on disk is what is measured:
 *
 *   cold        no vkmha cache, Mesa's shader disk cache off
 *   vkmha-warm  a vkmha cache file saved by an earlier process, Mesa's off
 *   mesa-fresh  no vkmha cache, Mesa's disk cache on in a new empty directory
 *   mesa-warm   no vkmha cache, Mesa's disk cache on, filled by an earlier process
 *   both-warm   the vkmha cache file and Mesa's filled disk cache
 *   cold-lazy   as cold, without VKMHA_CONTEXT_EAGER_PIPELINES: the context
 *               creates only the pipelines the forward uses, and checks
 *               only the paths it may take (the self-check), when it runs
 *   warm-lazy   as cold-lazy with Mesa's filled disk cache (an application's
 *               usual start: its second run)
 *
 * (Mesa's cache is switched with MESA_SHADER_CACHE_DISABLE and
 * MESA_SHADER_CACHE_DIR; other drivers ignore them.) A sample times
 * vkmha_context_create with VKMHA_CONTEXT_EAGER_PIPELINES (instance, device,
 * the whole self-check and every compute pipeline; the -lazy scenarios
 * without it), then vkmha_mha_create + the first forward (on
 * lavapipe the shaders' machine code is generated at the first dispatch),
 * then a second forward (the same work, nothing left to compile). Samples
 * run round-robin over the scenarios so that a noisy neighbour hits them
 * alike; medians are reported.
 *
 *   vkmha-bench-startup [--reps 7] [--d-model 64] [--heads 4] [--len 16]
 *                       [--csv FILE]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "vkmha.h"

#define MAX_REPS 64
#define HEADER_BYTES 80 /* vkmha's cache header (src/pipeline_cache_format.h) */

/* ---- the child: one start ------------------------------------------------ */

static int child(const char *cache, bool save, bool lazy, uint32_t d_model, uint32_t heads,
                 uint32_t len)
{
    vkmha_context_desc cd = {0};
    cd.flags = lazy ? 0 : VKMHA_CONTEXT_EAGER_PIPELINES;
    cd.pipeline_cache_path = cache;
    vkmha_context *ctx = NULL;
    vkmha_mha *mha = NULL;
    double t0 = now_ms();
    vkmha_status st = vkmha_context_create(&cd, &ctx);
    double t_create = now_ms() - t0;
    if (st) {
        fprintf(stderr, "vkmha-bench-startup: %s (%s)\n", vkmha_context_last_error(NULL),
                vkmha_status_string(st));
        return 1;
    }
    uint64_t seed = 11;
    const size_t nw = (size_t)d_model * d_model, nx = (size_t)len * d_model;
    float *w = bench_random(4 * nw, 0.1f, &seed), *x = bench_random(nx, 1.0f, &seed);
    float *out = malloc(nx * sizeof *out);
    vkmha_mha_desc md = {0};
    md.d_model = d_model;
    md.n_head = heads;
    md.w_q = w;
    md.w_k = w + nw;
    md.w_v = w + 2 * nw;
    md.w_o = w + 3 * nw;
    vkmha_mha_io io = {0};
    io.len_q = len;
    io.query = io.key = io.value = x;
    io.out = out;
    t0 = now_ms();
    if (!out || (st = vkmha_mha_create(ctx, &md, &mha)) || (st = vkmha_mha_forward(mha, &io))) {
        fprintf(stderr, "first forward: %s\n", vkmha_context_last_error(ctx));
        return 1;
    }
    double t_first = now_ms() - t0;
    t0 = now_ms();
    if ((st = vkmha_mha_forward(mha, &io))) {
        fprintf(stderr, "second forward: %s\n", vkmha_context_last_error(ctx));
        return 1;
    }
    double t_second = now_ms() - t0;
    vkmha_context_info info;
    vkmha_context_get_info(ctx, &info);
    if (save && (st = vkmha_context_save_pipeline_cache(ctx, NULL))) {
        fprintf(stderr, "save: %s\n", vkmha_context_last_error(ctx));
        return 1;
    }
    printf("RESULT %.3f %.3f %.3f %d %llu %u\n", t_create, t_first, t_second,
           info.pipeline_cache_loaded, (unsigned long long)info.pipeline_cache_bytes,
           info.pipelines_created);
    vkmha_mha_destroy(mha);
    vkmha_context_destroy(ctx);
    free(w);
    free(x);
    free(out);
    return 0;
}

/* ---- the parent: scenarios ------------------------------------------------- */

typedef struct sample {
    double create, first, second, process; /* ms */
    int loaded;
    unsigned long long bytes;
    unsigned pipelines;
} sample;

typedef enum mesa_mode { MESA_OFF, MESA_FRESH, MESA_WARM } mesa_mode;

typedef struct scenario {
    const char *name;
    mesa_mode mesa;
    bool vkmha_cache;
    bool lazy;
    sample s[MAX_REPS];
} scenario;

static char g_self[1024], g_base[512], g_shape[128];

/* Runs one child with Mesa's cache as `mesa_dir` (NULL: off). */
static bool run_child(const char *mesa_dir, const char *cache, bool save, bool lazy,
                      sample *out)
{
    if (mesa_dir) {
        unsetenv("MESA_SHADER_CACHE_DISABLE");
        setenv("MESA_SHADER_CACHE_DIR", mesa_dir, 1);
    } else {
        setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
        unsetenv("MESA_SHADER_CACHE_DIR");
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' --child %s %s%s%s%s%s", g_self, g_shape,
             save ? "--save " : "", lazy ? "--lazy " : "",
             cache ? "--cache '" : "", cache ? cache : "", cache ? "'" : "");
    double t0 = now_ms();
    FILE *p = popen(cmd, "r");
    if (!p) {
        fprintf(stderr, "cannot run %s: %s\n", cmd, strerror(errno));
        return false;
    }
    char line[256];
    bool ok = false;
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "RESULT %lf %lf %lf %d %llu %u", &out->create, &out->first,
                   &out->second, &out->loaded, &out->bytes, &out->pipelines) == 6)
            ok = true;
    int rc = pclose(p);
    out->process = now_ms() - t0;
    if (!ok || rc != 0)
        fprintf(stderr, "child failed (status %d): %s\n", rc, cmd);
    return ok && rc == 0;
}

static double median(const sample *s, uint32_t n, int field)
{
    double v[MAX_REPS];
    for (uint32_t i = 0; i < n; i++) {
        const double f[4] = {s[i].create, s[i].first, s[i].second, s[i].process};
        v[i] = field == 4 ? s[i].create + s[i].first : f[field];
    }
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    uint32_t reps = 7, d_model = 64, heads = 4, len = 16;
    const char *csv_path = NULL, *cache = NULL;
    bool is_child = false, save = false, lazy = false;
    const cli_opt opts[] = {
        CLI_U32("--reps", "N", reps, 1, MAX_REPS, "samples per scenario, median (default 7)"),
        CLI_U32("--d-model", "N", d_model, 1, 65536, "model width (default 64)"),
        CLI_U32("--heads", "N", heads, 1, 65536, "heads, dividing --d-model (default 4)"),
        CLI_U32("--len", "N", len, 1, 1u << 20, "sequence length (default 16)"),
        CLI_STR("--csv", "FILE", csv_path, "also write the samples to FILE (default: none)"),
        /* The child's (this program re-run for one sample): */
        CLI_FLAG("--child", is_child, "internal: run one sample in this process"),
        CLI_FLAG("--save", save, "internal (--child): save the vkmha cache"),
        CLI_FLAG("--lazy", lazy, "internal (--child): no eager pipelines"),
        CLI_STR("--cache", "FILE", cache, "internal (--child): the vkmha cache file"),
    };
    CLI_PARSE("vkmha-bench-startup",
              "What a start costs (context, first and second forward), cold "
              "and with warm\nvkmha and Mesa shader caches, each sample a fresh "
              "process. Writes no file\nunless --csv is given.",
              opts, argc, argv);
    if (d_model % heads) {
        fprintf(stderr, "vkmha-bench-startup: --heads (%u) must divide --d-model (%u)\n",
                heads, d_model);
        return 2;
    }
    if (is_child)
        return child(cache, save, lazy, d_model, heads, len);

    if (strchr(argv[0], '\'') || strlen(argv[0]) >= sizeof g_self) {
        fprintf(stderr, "run me from a path without quotes\n");
        return 2;
    }
    snprintf(g_self, sizeof g_self, "%s", argv[0]);
    snprintf(g_shape, sizeof g_shape, "--d-model %u --heads %u --len %u", d_model, heads, len);
    const char *tmp = getenv("TMPDIR");
    snprintf(g_base, sizeof g_base, "%s/vkmha-startup-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (strchr(g_base, '\'') || !mkdtemp(g_base)) {
        fprintf(stderr, "cannot create a directory: %s\n", strerror(errno));
        return 1;
    }
    char vk_cache[600], mesa_warm[600], mesa_fresh[600];
    snprintf(vk_cache, sizeof vk_cache, "%s/vkmha.cache", g_base);
    snprintf(mesa_warm, sizeof mesa_warm, "%s/mesa-warm", g_base);

    vkmha_context_info info;
    char date[32];
    if (!bench_device(&info, date))
        return 1;

    /* Warm-ups: one process saves the vkmha cache (Mesa's off), one fills
     * Mesa's cache directory. */
    sample warm;
    if (!run_child(NULL, vk_cache, true, false, &warm) ||
        !run_child(mesa_warm, NULL, false, false, &warm))
        return 1;
    /* What the driver keeps: the bytes after vkmha's header, the first 64
     * shown in hex. */
    unsigned long long file_bytes = 0;
    char hex[160] = "";
    FILE *f = fopen(vk_cache, "rb");
    if (f) {
        unsigned char b[HEADER_BYTES + 64];
        size_t n = fread(b, 1, sizeof b, f);
        for (size_t i = HEADER_BYTES; i < n; i++)
            snprintf(hex + 2 * (i - HEADER_BYTES), 3, "%02x", b[i]);
        if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > 0)
            file_bytes = (unsigned long long)ftell(f);
        fclose(f);
    }

    static scenario sc[] = {
        {.name = "cold", .mesa = MESA_OFF},
        {.name = "vkmha-warm", .mesa = MESA_OFF, .vkmha_cache = true},
        {.name = "mesa-fresh", .mesa = MESA_FRESH},
        {.name = "mesa-warm", .mesa = MESA_WARM},
        {.name = "both-warm", .mesa = MESA_WARM, .vkmha_cache = true},
        {.name = "cold-lazy", .mesa = MESA_OFF, .lazy = true},
        {.name = "warm-lazy", .mesa = MESA_WARM, .lazy = true},
    };
    const uint32_t n_sc = sizeof sc / sizeof sc[0];
    for (uint32_t r = 0; r < reps; r++)
        for (uint32_t i = 0; i < n_sc; i++) {
            const char *dir = NULL;
            if (sc[i].mesa == MESA_FRESH) {
                snprintf(mesa_fresh, sizeof mesa_fresh, "%s/mesa-fresh-%u", g_base, r);
                dir = mesa_fresh;
            } else if (sc[i].mesa == MESA_WARM) {
                dir = mesa_warm;
            }
            if (!run_child(dir, sc[i].vkmha_cache ? vk_cache : NULL, false, sc[i].lazy,
                           &sc[i].s[r]))
                return 1;
            if (sc[i].vkmha_cache && !sc[i].s[r].loaded) {
                fprintf(stderr, "%s: the vkmha cache was not loaded\n", sc[i].name);
                return 1;
            }
        }

    printf("Start-up: vkmha_context_create (with EAGER_PIPELINES, except *-lazy) + first "
           "MHA forward, "
           "d_model %u, %u heads, len %u, batch 1\n"
           "device %s (%s %s), %s; %u fresh processes per scenario, medians\n"
           "vkmha cache file: %llu bytes (%llu of driver data from vkGetPipelineCacheData)\n"
           "driver data%s: %s\n\n",
           d_model, heads, len, info.device.name, info.device.driver_name,
           info.device.driver_info, date, reps, file_bytes,
           file_bytes > HEADER_BYTES ? file_bytes - HEADER_BYTES : 0,
           file_bytes > HEADER_BYTES + 64 ? " (first 64 bytes)" : "", hex);
    printf("%-11s %10s %10s %10s %10s %11s %9s\n", "scenario", "create ms", "1st fwd ms",
           "2nd fwd ms", "start ms", "process ms", "vs cold");
    const double cold = median(sc[0].s, reps, 4);
    for (uint32_t i = 0; i < n_sc; i++) {
        double start = median(sc[i].s, reps, 4);
        printf("%-11s %10.1f %10.1f %10.1f %10.1f %11.1f %8.2fx\n", sc[i].name,
               median(sc[i].s, reps, 0), median(sc[i].s, reps, 1), median(sc[i].s, reps, 2),
               start, median(sc[i].s, reps, 3), start / cold);
    }
    printf("\nstart = create + first forward. Targets: vkmha-warm <= 0.2x cold; warm-lazy "
           "create <= 50 ms; cold-lazy start <= cold's create.\n");

    if (csv_path) {
        FILE *csv = fopen(csv_path, "w");
        if (!csv) {
            fprintf(stderr, "cannot write %s\n", csv_path);
            return 1;
        }
        fprintf(csv, "# vkmha-bench-startup,device,%s,driver,%s %s,date,%s,shape,%s,"
                     "cache_file_bytes,%llu\n"
                     "scenario,rep,create_ms,first_forward_ms,second_forward_ms,process_ms,"
                     "cache_loaded,cache_driver_bytes,pipelines_created\n",
                info.device.name, info.device.driver_name, info.device.driver_info, date,
                g_shape, file_bytes);
        for (uint32_t i = 0; i < n_sc; i++)
            for (uint32_t r = 0; r < reps; r++) {
                const sample *s = &sc[i].s[r];
                fprintf(csv, "%s,%u,%.3f,%.3f,%.3f,%.3f,%d,%llu,%u\n", sc[i].name, r,
                        s->create, s->first, s->second, s->process, s->loaded, s->bytes,
                        s->pipelines);
            }
        fclose(csv);
    }
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", g_base);
    return system(rm) == 0 ? 0 : 1;
}
