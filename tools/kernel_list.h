/* Lookups in a context's kernel list (vkmha_context_get_kernels), for the
 * tools, the benchmarks and the tests (tests/util.h). */
#ifndef VKMHA_KERNEL_LIST_H
#define VKMHA_KERNEL_LIST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "vkmha.h"

/* The kernel named `name` ("matmul_large", "flash_d64", ...) of ctx; false,
 * with *out zeroed, when the context has none of that name (the reference
 * backend has none at all) or the query fails. */
static inline bool kernel_find(const vkmha_context *ctx, const char *name,
                               vkmha_kernel_info *out)
{
    vkmha_kernel_info k[64];
    uint32_t n = 64;
    memset(out, 0, sizeof *out);
    if (vkmha_context_get_kernels(ctx, &n, k) != VKMHA_SUCCESS)
        return false;
    for (uint32_t i = 0; i < n && i < 64; i++)
        if (!strcmp(k[i].name, name)) {
            *out = k[i];
            return true;
        }
    return false;
}

/* The value of k's parameter `name` ("BM", "WG", ...); UINT32_MAX if k has
 * none of that name. */
static inline uint32_t kernel_param(const vkmha_kernel_info *k, const char *name)
{
    for (uint32_t i = 0; i < k->param_count && i < VKMHA_KERNEL_MAX_PARAMS; i++)
        if (!strcmp(k->params[i].name, name))
            return k->params[i].value;
    return UINT32_MAX;
}

/* "shader WG=8 TM=4 ..." (or "not available") in buf, which it returns. */
static inline const char *kernel_describe(const vkmha_kernel_info *k, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "%s", k->available ? k->shader : "not available");
    for (uint32_t i = 0; i < k->param_count && i < VKMHA_KERNEL_MAX_PARAMS && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, " %s=%u", k->params[i].name,
                                k->params[i].value);
    return buf;
}

#endif /* VKMHA_KERNEL_LIST_H */
