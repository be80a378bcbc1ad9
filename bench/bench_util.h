/* Timing helpers shared by the benchmark programs. */
#ifndef VKMHA_BENCH_UTIL_H
#define VKMHA_BENCH_UTIL_H

#include <time.h>

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

#endif /* VKMHA_BENCH_UTIL_H */
