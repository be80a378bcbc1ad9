/* The context and the public ops on host arrays, backend-neutral: the
 * backend's table (vkmha_backend_ops) is chosen once, at creation, from
 * desc->backend; each op checks its arguments once (src/check.c), then hands
 * the resolved shapes to the table. */
#include "internal.h"

#include <math.h>
#include <string.h>

/* vkmha_context_create, or a compile-only context (src/internal.h). */
static vkmha_status context_create(const vkmha_context_desc *desc, bool compile_only,
                                   vkmha_context **out)
{
    static const vkmha_context_desc defaults = {0};
    const uint32_t known_flags = VKMHA_CONTEXT_NO_SUBGROUP_OPS | VKMHA_CONTEXT_PROFILE |
                                 VKMHA_CONTEXT_EAGER_PIPELINES | VKMHA_CONTEXT_NO_SELF_CHECK |
                                 VKMHA_CONTEXT_SINGLE_THREAD;
    vkmha_status st;
    vkmha__set_creation_error("");
    if (!desc)
        desc = &defaults;
#define FAIL(status, ...) \
    vkmha__creation_fail(desc->log, desc->log_user, status, "vkmha_context_create: " __VA_ARGS__)
    if (!out)
        return FAIL(VKMHA_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    const uint32_t backend = desc->backend ? desc->backend : VKMHA_BACKEND_VULKAN;
    if (backend != VKMHA_BACKEND_VULKAN && backend != VKMHA_BACKEND_REFERENCE)
        return FAIL(VKMHA_ERROR_INVALID_ARGUMENT, "desc->backend (%u) is not a vkmha_backend",
                    desc->backend);
    if (desc->flags & ~known_flags)
        return FAIL(VKMHA_ERROR_INVALID_ARGUMENT, "desc->flags has unknown bits 0x%x",
                    desc->flags & ~known_flags);
    if (desc->log_level > VKMHA_LOG_ERROR)
        return FAIL(VKMHA_ERROR_INVALID_ARGUMENT,
                    "desc->log_level (%u) is not a vkmha_log_level", desc->log_level);
    const vkmha_allocator *al = desc->allocator;
    if (al && (!al->alloc != !al->free))
        return FAIL(VKMHA_ERROR_INVALID_ARGUMENT,
                    "desc->allocator->%s is NULL (alloc and free are both set or both NULL)",
                    al->alloc ? "free" : "alloc");
    if (al && !al->alloc && al->realloc)
        return FAIL(VKMHA_ERROR_INVALID_ARGUMENT,
                    "desc->allocator->realloc is set without alloc and free");
    if (backend == VKMHA_BACKEND_REFERENCE && desc->vulkan)
        return FAIL(VKMHA_ERROR_INVALID_ARGUMENT, "desc->vulkan is set for the reference backend");
    if (compile_only && (backend != VKMHA_BACKEND_VULKAN || desc->vulkan))
        return FAIL(VKMHA_ERROR_INVALID_ARGUMENT,
                    "a compile-only context is Vulkan, on its own device");
    vkmha_context *ctx = vkmha__alloc_with(al, sizeof *ctx);
    if (!ctx)
        return FAIL(VKMHA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
#undef FAIL
    memset(ctx, 0, sizeof *ctx);
    if (al)
        ctx->allocator = *al;
    ctx->backend = (vkmha_backend)backend;
    ctx->flags = desc->flags;
    ctx->log = desc->log;
    ctx->log_user = desc->log_user;
    ctx->log_level = desc->log_level ? (vkmha_log_level)desc->log_level : VKMHA_LOG_WARN;
    vkmha__begin_call(ctx, "vkmha_context_create"); /* names the call in messages */
    ctx->ops = backend == VKMHA_BACKEND_VULKAN ? &vk_backend_ops : &vkmha__reference_ops;
    if ((st = ctx->ops->create(ctx, desc, compile_only)) != VKMHA_SUCCESS) {
        /* The message (already logged) outlives the context. */
        vkmha__set_creation_error(ctx->last_error);
        ctx->ops->destroy(ctx);
        vkmha__free(ctx, ctx->tensors);
        vkmha__free(ctx, ctx);
        return st;
    }
    if (ctx->backend == VKMHA_BACKEND_VULKAN) {
        vkmha_context_info info = {0};
        ctx->ops->info(ctx, &info);
        ctx->storage_range = info.device.max_storage_buffer_range;
        ctx->allocation_size = info.device.max_allocation_size;
        ctx->tensor_bytes = info.max_tensor_bytes;
    }
    ctx->call = NULL;
    *out = ctx;
    return VKMHA_SUCCESS;
}

VKMHA_API vkmha_status vkmha_context_create(const vkmha_context_desc *desc,
                                            vkmha_context **out)
{
    return context_create(desc, false, out);
}

vkmha_status vkmha__context_create_compile_only(const vkmha_context_desc *desc,
                                                vkmha_context **out)
{
    return context_create(desc, true, out);
}

VKMHA_API void vkmha_context_destroy(vkmha_context *ctx)
{
    if (!ctx)
        return;
    while (ctx->n_tensors) /* tensors the application did not destroy */
        vkmha_tensor_destroy(ctx->tensors[ctx->n_tensors - 1]);
    ctx->ops->destroy(ctx);
    vkmha__free(ctx, ctx->tensors);
    vkmha__free(ctx, ctx);
}

VKMHA_API vkmha_status vkmha_context_get_info(const vkmha_context *ctx,
                                              vkmha_context_info *out)
{
    if (!ctx)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    if (!out) {
        /* The last error is the one piece of a context that a query writes. */
        vkmha_context *c = (vkmha_context *)ctx;
        vkmha__begin_call(c, "vkmha_context_get_info");
        return vkmha__fail(c, VKMHA_ERROR_INVALID_ARGUMENT, "vkmha_context_get_info: out is NULL");
    }
    memset(out, 0, sizeof *out);
    out->backend = ctx->backend;
    ctx->ops->info(ctx, out);
    return VKMHA_SUCCESS;
}

/* The arguments of a list query (fn: vkmha_context_get_kernels, ...): a
 * count, and an out that may be NULL only for a capacity of 0. */
static vkmha_status list_args(const vkmha_context *ctx, const char *fn, const uint32_t *count,
                              const void *out)
{
    if (!ctx)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    if (count && (out || !*count))
        return VKMHA_SUCCESS;
    /* The last error is the one piece of a context that a query writes. */
    vkmha_context *c = (vkmha_context *)ctx;
    vkmha__begin_call(c, fn);
    return count ? vkmha__fail(c, VKMHA_ERROR_INVALID_ARGUMENT, "%s: out is NULL but *count is %u",
                               fn, *count)
                 : vkmha__fail(c, VKMHA_ERROR_INVALID_ARGUMENT, "%s: count is NULL", fn);
}

VKMHA_API vkmha_status vkmha_context_get_kernels(const vkmha_context *ctx, uint32_t *count,
                                                 vkmha_kernel_info *out)
{
    const vkmha_status st = list_args(ctx, "vkmha_context_get_kernels", count, out);
    if (!st)
        ctx->ops->kernels(ctx, count, out);
    return st;
}

VKMHA_API vkmha_status vkmha_context_get_profile(const vkmha_context *ctx, uint32_t *count,
                                                 vkmha_profile_step *out)
{
    const vkmha_status st = list_args(ctx, "vkmha_context_get_profile", count, out);
    if (!st && ctx->ops->profile)
        ctx->ops->profile(ctx, count, out);
    else if (!st)
        *count = 0;
    return st;
}

VKMHA_API vkmha_status vkmha_context_trim(vkmha_context *ctx)
{
    if (!ctx)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    vkmha__begin_call(ctx, "vkmha_context_trim");
    return ctx->ops->trim(ctx);
}

/* ---- the ops on host arrays ------------------------------------------------ */

static const vkmha_run run_host = {.form = FORM_HOST};

VKMHA_API vkmha_status vkmha_matmul(vkmha_context *ctx, const vkmha_matmul_desc *desc,
                                    const void *a, const void *b, const void *bias, void *c)
{
    mm_shape s;
    vkmha_status st;
    if (!ctx)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    vkmha__begin_call(ctx, "vkmha_matmul");
    if ((st = vkmha__check_matmul(ctx, desc, a, b, bias, c, &s)))
        return st;
    const vkmha_arg aa = {.host = a, .dtype = s.dtype},
                    ab = {.host = b, .dtype = s.quant_b.type ? VKMHA_DTYPE_U8 : s.dtype},
                    abias = {.host = bias, .dtype = s.dtype}, ac = {.host = c, .dtype = s.dtype};
    return vkmha__matmul_split(ctx, &run_host, &s, &aa, &ab, &abias, &ac);
}

VKMHA_API vkmha_status vkmha_softmax(vkmha_context *ctx, const vkmha_softmax_desc *desc,
                                     const void *x, const vkmha_mask *mask, void *y)
{
    sm_shape s;
    vkmha_mask_arg m = {0};
    vkmha_status st;
    if (!ctx)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    vkmha__begin_call(ctx, "vkmha_softmax");
    if ((st = vkmha__check_softmax(ctx, desc, x, y, &s)) ||
        (st = vkmha__check_mask(ctx, "vkmha_softmax", mask, s.batch, s.heads, s.len_q, s.len_k,
                                0, &m.m)))
        return st;
    const vkmha_arg ax = {.host = x, .dtype = s.dtype}, ay = {.host = y, .dtype = s.dtype};
    return vkmha__softmax_split(ctx, &run_host, &s, &ax, &m, &ay);
}

VKMHA_API vkmha_status vkmha_alibi_slopes(uint32_t heads, float *slopes)
{
    if (!heads || !slopes)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    uint32_t m = 1; /* the largest power of two not above heads */
    while (m <= heads / 2)
        m *= 2;
    for (uint32_t h = 0; h < heads; h++)
        slopes[h] = h < m ? (float)exp2(-8.0 * (h + 1) / m)
                          : (float)exp2(-4.0 * (2 * (h - m) + 1) / m);
    return VKMHA_SUCCESS;
}

static vkmha_status heads_op(vkmha_context *ctx, const char *fn, bool split,
                             const vkmha_heads_desc *desc, const void *x, void *y)
{
    heads_shape s;
    vkmha_status st;
    if (!ctx)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    vkmha__begin_call(ctx, fn);
    if ((st = vkmha__check_heads(ctx, fn, desc, x, y, &s)))
        return st;
    const vkmha_arg ax = {.host = x, .dtype = s.dtype}, ay = {.host = y, .dtype = s.dtype};
    return vkmha__heads_split(ctx, &run_host, &s, split, &ax, &ay);
}

VKMHA_API vkmha_status vkmha_split_heads(vkmha_context *ctx, const vkmha_heads_desc *desc,
                                         const void *x, void *y)
{
    return heads_op(ctx, "vkmha_split_heads", true, desc, x, y);
}

VKMHA_API vkmha_status vkmha_merge_heads(vkmha_context *ctx, const vkmha_heads_desc *desc,
                                         const void *x, void *y)
{
    return heads_op(ctx, "vkmha_merge_heads", false, desc, x, y);
}

VKMHA_API vkmha_status vkmha_attention(vkmha_context *ctx, const vkmha_attention_desc *desc,
                                       const void *q, const void *k, const void *v,
                                       const vkmha_mask *mask, void *out, void *weights)
{
    attn_shape s;
    vkmha_mask_arg m = {0};
    vkmha_status st;
    if (!ctx)
        return VKMHA_ERROR_INVALID_ARGUMENT;
    vkmha__begin_call(ctx, "vkmha_attention");
    if ((st = vkmha__check_attention(ctx, desc, q, k, v, out, weights, &s)) ||
        (st = vkmha__check_mask(ctx, "vkmha_attention", mask, s.batch, s.heads, s.len_q,
                                s.len_k, 0, &m.m)))
        return st;
    const uint32_t dt = s.dtype;
    const vkmha_arg aq = {.host = q, .dtype = dt}, ak = {.host = k, .dtype = dt},
                    av = {.host = v, .dtype = dt}, ao = {.host = out, .dtype = dt},
                    aw = {.host = weights, .dtype = dt};
    return vkmha__attention_split(ctx, &run_host, &s, &aq, &ak, &av, &m, &ao, &aw);
}
