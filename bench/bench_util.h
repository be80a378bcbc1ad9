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

/* The default Vulkan device's info and today's date (UTC, YYYY-MM-DD), for
 * a report's header; false after a message when there is no device. */
static inline bool bench_device(vkmha_context_info *info, char date[32])
{
    vkmha_context *probe = NULL;
    if (vkmha_context_create(NULL, &probe)) {
        fprintf(stderr, "no Vulkan device\n");
        return false;
    }
    vkmha_context_get_info(probe, info);
    vkmha_context_destroy(probe);
    time_t now = time(NULL);
    strftime(date, 32, "%Y-%m-%d", gmtime(&now));
    return true;
}

/* A command-line option: "--name" sets *flag; "--name VALUE" sets *u32
 * (atoi) or *str. Exactly one of the three pointers is set. */
typedef struct bench_opt {
    const char *name;
    bool *flag;
    uint32_t *u32;
    const char **str;
} bench_opt;

/* Parses argv against the n options; false after a message on stderr for an
 * unknown option or a missing value. */
static inline bool bench_parse_args(int argc, char **argv, const bench_opt *opts, size_t n)
{
    for (int i = 1; i < argc; i++) {
        const bench_opt *o = NULL;
        for (size_t k = 0; k < n && !o; k++)
            if (!strcmp(argv[i], opts[k].name))
                o = &opts[k];
        if (!o) {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return false;
        }
        if (o->flag) {
            *o->flag = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s needs a value\n", argv[i]);
            return false;
        }
        const char *v = argv[++i];
        if (o->u32)
            *o->u32 = (uint32_t)atoi(v);
        else
            *o->str = v;
    }
    return true;
}

#endif /* VKMHA_BENCH_UTIL_H */
