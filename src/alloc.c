/* Host memory: every allocation of a context and of the objects made from it
 * goes through the context's vkmha_allocator (or the C library when it has
 * none), so an engine can account for it, or fail it for testing. */
#include "internal.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#define ALIGNMENT alignof(max_align_t)

static const vkmha_allocator *custom(const vkmha_context *ctx)
{
    return ctx && ctx->allocator.alloc ? &ctx->allocator : NULL;
}

void *vkmha__alloc_with(const vkmha_allocator *a, size_t size)
{
    if (size == 0)
        size = 1;
    return a && a->alloc ? a->alloc(a->user, size, ALIGNMENT) : malloc(size);
}

void vkmha__free_with(const vkmha_allocator *a, void *p)
{
    if (!p)
        return;
    if (a && a->alloc)
        a->free(a->user, p);
    else
        free(p);
}

void *vkmha__alloc(const vkmha_context *ctx, size_t size)
{
    return vkmha__alloc_with(custom(ctx), size);
}

void *vkmha__calloc(const vkmha_context *ctx, size_t n, size_t size)
{
    uint64_t bytes;
    if (!vkmha__mul_u64(n, size, &bytes) || bytes > SIZE_MAX)
        return NULL;
    void *p = vkmha__alloc(ctx, (size_t)bytes);
    if (p)
        memset(p, 0, (size_t)bytes);
    return p;
}

void *vkmha__realloc(const vkmha_context *ctx, void *p, size_t old_size, size_t size)
{
    const vkmha_allocator *a = custom(ctx);
    if (size == 0)
        size = 1;
    if (!a)
        return realloc(p, size);
    if (a->realloc)
        return a->realloc(a->user, p, size, ALIGNMENT);
    void *q = a->alloc(a->user, size, ALIGNMENT);
    if (!q)
        return NULL;
    if (p) {
        memcpy(q, p, old_size < size ? old_size : size);
        a->free(a->user, p);
    }
    return q;
}

void vkmha__free(const vkmha_context *ctx, void *p)
{
    vkmha__free_with(custom(ctx), p);
}
