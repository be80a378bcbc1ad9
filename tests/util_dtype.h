/* Host arrays of any float dtype for the tests that link src/half.c: fp32
 * values rounded as the device rounds, and 16-bit arrays widened back. */
#ifndef VKMHA_TEST_UTIL_DTYPE_H
#define VKMHA_TEST_UTIL_DTYPE_H

#include "half.h"
#include "util.h"

/* n elements of dtype dt from fp32 values (exits on out of memory). */
static inline void *t_to_dt(uint32_t dt, const float *x, size_t n)
{
    void *p = malloc(n * vkmha__dtype_size(dt) + 4);
    if (!p)
        exit(2);
    vkmha__from_f32(dt, x, n, p);
    return p;
}

/* n elements of dtype dt widened to fp32. */
static inline float *t_from_dt(uint32_t dt, const void *x, size_t n)
{
    float *f = t_alloc(n);
    vkmha__to_f32(dt, x, n, f);
    return f;
}

/* One unit in the last place of dtype dt at 1 (its rounding step). */
static inline double t_dt_unit(uint32_t dt)
{
    return dt == VKMHA_DTYPE_F16 ? 0x1p-11 : dt == VKMHA_DTYPE_BF16 ? 0x1p-8 : 0x1p-24;
}

/* t_close on two arrays of dtype dt, widened. */
static inline bool t_close_dt(const char *name, const char *what, uint32_t dt, const void *got,
                              const void *want, size_t n, double atol, double rtol)
{
    float *g = t_from_dt(dt, got, n), *w = t_from_dt(dt, want, n);
    bool ok = t_close(name, what, g, w, n, atol, rtol);
    free(g);
    free(w);
    return ok;
}

#endif /* VKMHA_TEST_UTIL_DTYPE_H */
