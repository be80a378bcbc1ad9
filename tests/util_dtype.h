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

#endif /* VKMHA_TEST_UTIL_DTYPE_H */
