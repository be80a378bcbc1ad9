/* Timing helpers shared by the benchmark programs. */
#ifndef VKMHA_BENCH_UTIL_H
#define VKMHA_BENCH_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vkmha.h"
#include "cli.h" /* tools/cli.h: the options of every program */
#include "kernel_list.h" /* tools/kernel_list.h: lookups in the kernel list */

/* Monotonic wall clock in milliseconds. */
static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* qsort comparator for doubles, ascending (for medians). */
static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The largest |a[i] - b[i]| over n elements; NaN if any difference is NaN. */
static inline double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m))
            m = d; /* NaN propagates */
    }
    return m;
}

/* n floats uniform in [-scale, scale) from the LCG state *seed (the same
 * sequence in every benchmark program); exits on allocation failure. */
static inline float *bench_random(size_t n, float scale, uint64_t *seed)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = scale * (float)((double)(*seed >> 40) / 8388608.0 - 1.0);
    }
    return p;
}

/* Today's date (UTC, YYYY-MM-DD), for a report's header. */
static inline void bench_date(char date[32])
{
    time_t now = time(NULL);
    strftime(date, 32, "%Y-%m-%d", gmtime(&now));
}

/* The default Vulkan device's info and today's date (bench_date), for
 * a report's header; false after a message when there is no device. */
static inline bool bench_device(vkmha_context_info *info, char date[32])
{
    vkmha_context *probe = NULL;
    vkmha_status st = vkmha_context_create(NULL, &probe);
    if (st != VKMHA_SUCCESS) {
        fprintf(stderr, "cannot create a Vulkan context (%s): %s\n", vkmha_status_string(st),
                vkmha_context_last_error(NULL));
        return false;
    }
    vkmha_context_get_info(probe, info);
    vkmha_context_destroy(probe);
    bench_date(date);
    return true;
}

/* Exits with status 1 after "PROG: WHAT: STATUS: the context's message" on
 * stderr unless st is VKMHA_SUCCESS (ctx may be NULL: the last creation's). */
static inline void bench_check(const char *prog, vkmha_context *ctx, vkmha_status st,
                               const char *what)
{
    if (st == VKMHA_SUCCESS)
        return;
    fprintf(stderr, "%s: %s: %s: %s\n", prog, what, vkmha_status_string(st),
            vkmha_context_last_error(ctx));
    exit(1);
}

/* The --csv FILE (path NULL: none, *out NULL) opened for writing with its
 * first two lines: "# prog,device,...,driver,...,date,..." (info and date:
 * bench_device's) and the column names; false after a message when it
 * cannot be written. */
static inline bool bench_csv_open(const char *path, const char *prog,
                                  const vkmha_context_info *info, const char *date,
                                  const char *columns, FILE **out)
{
    *out = NULL;
    if (!path)
        return true;
    if (!(*out = fopen(path, "w"))) {
        fprintf(stderr, "cannot write %s\n", path);
        return false;
    }
    fprintf(*out, "# %s,device,%s,driver,%s %s,date,%s\n%s\n", prog, info->device.name,
            info->device.driver_name, info->device.driver_info, date, columns);
    return true;
}

/* The device time of the last call on a VKMHA_CONTEXT_PROFILE context: the
 * sum of its steps (vkmha_context_get_profile), ms; 0 without a profile. */
static inline double bench_device_ms(vkmha_context *ctx)
{
    vkmha_profile_step steps[VKMHA_MAX_PROFILE_STEPS];
    uint32_t n = VKMHA_MAX_PROFILE_STEPS;
    if (vkmha_context_get_profile(ctx, &n, steps) != VKMHA_SUCCESS)
        return 0.0;
    double ms = 0.0;
    for (uint32_t i = 0; i < n && i < VKMHA_MAX_PROFILE_STEPS; i++)
        ms += steps[i].time_ns * 1e-6;
    return ms;
}

/* A Vulkan context that profiles its calls (VKMHA_CONTEXT_PROFILE), its
 * fused kernel "default" (the device's) or "shared" (flash.comp forced);
 * exits after a message when it cannot be created. */
static inline vkmha_context *bench_profile_context(const char *prog, const char *kernel)
{
    const vkmha_debug_options dbg = {.fused_kernel = strcmp(kernel, "shared")
                                                         ? VKMHA_FUSED_KERNEL_AUTO
                                                         : VKMHA_FUSED_KERNEL_SHARED};
    const vkmha_context_desc cd = {.backend = VKMHA_BACKEND_VULKAN,
                                   .flags = VKMHA_CONTEXT_PROFILE, .debug = &dbg};
    vkmha_context *ctx = NULL;
    bench_check(prog, NULL, vkmha_context_create(&cd, &ctx), "vkmha_context_create");
    return ctx;
}

/* A report's start: bench_device, then bench_csv_open; false after a
 * message. */
static inline bool bench_begin(const char *csv_path, const char *prog, const char *columns,
                               vkmha_context_info *info, char date[32], FILE **csv)
{
    return bench_device(info, date) && bench_csv_open(csv_path, prog, info, date, columns, csv);
}

#endif /* VKMHA_BENCH_UTIL_H */
