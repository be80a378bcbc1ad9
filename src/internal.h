/* Private declarations shared by the library's source files, backend-neutral:
 * no Vulkan header (src/vk_internal.h adds the Vulkan backend's). */
#ifndef VKMHA_INTERNAL_H
#define VKMHA_INTERNAL_H

#include "vkmha.h"

#include "half.h" /* the dtypes' sizes and conversions */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VKMHA_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define VKMHA_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define VKMHA_PRINTF(f, a)
#endif

/* ------------------------------------------------------------------------ */
/* Resolved shapes: the public descs with every default filled in and every */
/* argument checked (src/check.c). The backends only ever see these.         */
/* ------------------------------------------------------------------------ */

typedef struct mm_shape {
    uint32_t batch, m, n, k;
    uint32_t lda, ldb, ldc;
    bool trans_b;
    float alpha;
    uint64_t sa, sb, sc; /* batch strides in elements; 0 = broadcast */
    /* Elements each array spans: the smallest array that holds every index. */
    uint64_t extent_a, extent_b, extent_c;
    uint32_t dtype; /* host arrays: desc->dtype (tensors have their own) */
} mm_shape;

typedef struct sm_shape {
    uint32_t batch, heads, len_q, len_k;
    float scale;
    uint32_t dtype; /* host arrays: desc->dtype */
} sm_shape;

typedef struct heads_shape {
    uint32_t batch, len, heads, head_dim;
    uint32_t dtype; /* host arrays: desc->dtype */
} heads_shape;

typedef struct attn_shape {
    uint32_t batch, heads, kv_heads, len_q, len_k, d_k, d_v;
    float scale;
    vkmha_attention_path path; /* as the caller asked: AUTO, FUSED or UNFUSED */
    uint32_t kv_splits;        /* 0 = automatic, else <= min(len_k, VKMHA_MAX_KV_SPLITS) */
    uint32_t dtype;            /* host arrays: desc->dtype */
} attn_shape;

/* A checked mask: kinds and pointers agree, bias_batch / bias_heads are 1 or
 * the full size. kinds == 0 when the caller passed none. */
typedef vkmha_mask mask_r;

/* The score a masked position gets, exactly as masked_fill(mask == 0, -1e9). */
#define VKMHA_MASKED_SCORE (-1e9)

/* ------------------------------------------------------------------------ */
/* Context                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct vk_state vk_state; /* src/vk_internal.h */

/* What a backend computes the public ops on host arrays with (shapes and
 * arguments already checked), set at context creation: the reference's
 * (src/reference.c) or the Vulkan backend's (src/vk_context.c). */
typedef struct vkmha_backend_ops {
    vkmha_status (*matmul)(vkmha_context *ctx, const mm_shape *s, const void *a,
                           const void *b, const void *bias, void *c);
    vkmha_status (*softmax)(vkmha_context *ctx, const sm_shape *s, const void *x,
                            const mask_r *mask, void *y);
    vkmha_status (*heads)(vkmha_context *ctx, const heads_shape *s, bool split,
                          const void *x, void *y);
    vkmha_status (*attention)(vkmha_context *ctx, const attn_shape *s, const void *q,
                              const void *k, const void *v, const mask_r *mask, void *out,
                              void *weights);
} vkmha_backend_ops;
extern const vkmha_backend_ops vkmha__reference_ops;

struct vkmha_context {
    vkmha_backend backend;
    vkmha_allocator allocator; /* alloc NULL: the C library */
    uint32_t flags;
    vkmha_log_fn log;
    void *log_user;
    vkmha_log_level log_level; /* the least severe level passed to log */
    char last_error[512];
    const char *call; /* the public function being called, for messages */
    bool tensor_call; /* its array arguments are tensors (src/tensor.c) */
    const vkmha_backend_ops *ops; /* the backend's ops on host arrays */
    vk_state *vk; /* NULL for the reference backend */
    /* Live tensors, to tell a tensor of this context from a stale or foreign
     * pointer without dereferencing it (src/tensor.c). */
    vkmha_tensor **tensors;
    uint32_t n_tensors, cap_tensors;
};

/* src/alloc.c: host memory through the context's allocator (ctx NULL or
 * without one: the C library). Aligned to max_align_t. */
void *vkmha__alloc(const vkmha_context *ctx, size_t size);
void *vkmha__calloc(const vkmha_context *ctx, size_t n, size_t size);
/* old_size: the bytes the caller uses of p (copied when vkmha must move it). */
void *vkmha__realloc(const vkmha_context *ctx, void *p, size_t old_size, size_t size);
void vkmha__free(const vkmha_context *ctx, void *p);
/* The same with an allocator that has no context yet (NULL: C library). */
void *vkmha__alloc_with(const vkmha_allocator *a, size_t size);
void vkmha__free_with(const vkmha_allocator *a, void *p);

/* src/status.c */
/* Records `status` with a printf-style message as the context's last error,
 * forwards it to the logger, and returns status. ctx may be NULL. */
vkmha_status vkmha__fail(vkmha_context *ctx, vkmha_status status, const char *fmt, ...)
    VKMHA_PRINTF(3, 4);
vkmha_status vkmha__vfail(vkmha_context *ctx, vkmha_status status, const char *fmt,
                          va_list ap);
/* Whether the context's logger takes messages of `level` (it is set and
 * `level` is at or above desc->log_level): callers skip formatting what
 * would be dropped. */
bool vkmha__log_enabled(const vkmha_context *ctx, vkmha_log_level level);
/* Sends a message to the context's logger if vkmha__log_enabled. */
void vkmha__log(const vkmha_context *ctx, vkmha_log_level level, vkmha_status status,
                const char *fmt, ...) VKMHA_PRINTF(4, 5);
/* The failure of a call without a context (vkmha_context_create before the
 * context exists, vkmha_enumerate_devices): the message goes to the calling
 * thread's creation error (vkmha_context_last_error(NULL)) and to `log`
 * (may be NULL) at ERROR. Returns status. */
vkmha_status vkmha__creation_fail(vkmha_log_fn log, void *user, vkmha_status status,
                                  const char *fmt, ...) VKMHA_PRINTF(4, 5);
/* Sets (message "" clears) the calling thread's creation error. */
void vkmha__set_creation_error(const char *message);
/* Clears the last error at the start of the public call `fn`. */
void vkmha__begin_call(vkmha_context *ctx, const char *fn);
/* Overflow-checked a * b; false on overflow. */
bool vkmha__mul_u64(uint64_t a, uint64_t b, uint64_t *out);
/* The system's text for errno value err, in buf (thread-safe). */
const char *vkmha__error_text(int err, char *buf, size_t cap);

/* src/mha.c: vkmha_mha_create without starting a public call (messages
 * name ctx->call: the loader's, for vkmha_mha_create_from_safetensors). */
vkmha_status vkmha__mha_create(vkmha_context *ctx, const vkmha_mha_desc *desc, vkmha_mha **out);

/* src/check.c: argument checking shared by both backends. Each returns
 * VKMHA_SUCCESS and a resolved shape, or VKMHA_ERROR_INVALID_ARGUMENT with a
 * message naming the argument (prefixed by the public function's name). */
vkmha_status vkmha__check_matmul(vkmha_context *ctx, const vkmha_matmul_desc *desc,
                                 const void *a, const void *b, const void *bias,
                                 const void *c, mm_shape *out);
vkmha_status vkmha__check_mask(vkmha_context *ctx, const char *fn, const vkmha_mask *mask,
                               uint32_t batch, uint32_t heads, uint32_t len_q,
                               uint32_t len_k, mask_r *out);
vkmha_status vkmha__check_softmax(vkmha_context *ctx, const vkmha_softmax_desc *desc,
                                  const void *x, const void *y, sm_shape *out);
vkmha_status vkmha__check_heads(vkmha_context *ctx, const char *fn,
                                const vkmha_heads_desc *desc, const void *x,
                                const void *y, heads_shape *out);
vkmha_status vkmha__check_attention(vkmha_context *ctx, const vkmha_attention_desc *desc,
                                    const void *q, const void *k, const void *v,
                                    const void *out, const void *weights,
                                    attn_shape *shape);
/* Checks a float dtype field (F32, F16 or BF16) named `what`. */
vkmha_status vkmha__check_dtype(vkmha_context *ctx, const char *what, uint32_t dtype);
/* Checks an attention path and key-split count (named `what`.path and
 * `what`.kv_splits in messages) and stores them, kv_splits clamped to len_k,
 * in s. */
vkmha_status vkmha__check_path(vkmha_context *ctx, const char *fn, const char *path_name,
                               const char *splits_name, vkmha_attention_path path,
                               uint32_t kv_splits, attn_shape *s);
/* Checks that `n` elements of `size` bytes fit in memory; on success stores
 * n * size in *bytes. */
vkmha_status vkmha__check_count(vkmha_context *ctx, const char *fn, const char *what,
                                uint64_t n, uint64_t size, uint64_t *bytes);
/* Whether [a, a + an) and [b, b + bn) (in bytes) intersect. */
bool vkmha__overlap(const void *a, uint64_t an, const void *b, uint64_t bn);

/* ------------------------------------------------------------------------ */
/* Reference backend (src/reference.c): scalar C, double accumulation,      */
/* written for obviousness, not speed. Shares no code with the shaders.     */
/* ------------------------------------------------------------------------ */

void ref_matmul(const mm_shape *s, const float *a, const float *b, const float *bias,
                float *c);
/* y may equal x. Row buffers come from ctx's allocator (ctx may be NULL). */
vkmha_status ref_softmax(const vkmha_context *ctx, const sm_shape *s, const float *x, const mask_r *mask, float *y);
void ref_split_heads(const heads_shape *s, const float *x, float *y);
void ref_merge_heads(const heads_shape *s, const float *x, float *y);
/* weights may be NULL. Returns VKMHA_ERROR_OUT_OF_HOST_MEMORY if a row buffer
 * cannot be allocated. */
vkmha_status ref_attention(const vkmha_context *ctx, const attn_shape *s, const float *q, const float *k,
                           const float *v, const mask_r *mask, float *out,
                           float *weights);
/* y[r] = gamma * (x[r] + res[r] - mean) / sqrt(var + eps) + beta, over rows of
 * `cols` elements; biased variance like torch.nn.LayerNorm. y may equal x. */
void ref_layernorm(uint32_t rows, uint32_t cols, const float *x, const float *res,
                   const float *gamma, const float *beta, float eps, float *y);
/* The same on arrays of any float dtype (dt: each array's vkmha_dtype, in
 * argument order): 16-bit inputs widened to fp32 copies, fp32 results
 * rounded into 16-bit outputs as the shaders store them. Only
 * VKMHA_ERROR_OUT_OF_HOST_MEMORY can fail (no message set). */
vkmha_status ref_matmul_typed(const vkmha_context *ctx, const mm_shape *s,
                              const uint32_t dt[4], const void *a, const void *b,
                              const void *bias, void *c);
vkmha_status ref_softmax_typed(const vkmha_context *ctx, const sm_shape *s, uint32_t dt_x,
                               const void *x, const mask_r *mask, uint32_t dt_y, void *y);
vkmha_status ref_heads_typed(const vkmha_context *ctx, const heads_shape *s, bool split,
                             uint32_t dt_x, const void *x, uint32_t dt_y, void *y);
vkmha_status ref_attention_typed(const vkmha_context *ctx, const attn_shape *s,
                                 const uint32_t dt[5], const void *q, const void *k,
                                 const void *v, const mask_r *mask, void *out, void *weights);
/* Whether score (b, ., i, j) is masked (masks broadcast over heads); shared
 * by ref_softmax and ref_attention. */
bool ref_is_masked(const mask_r *mask, uint32_t b, uint32_t i, uint32_t j,
                   uint32_t len_q, uint32_t len_k);
/* The additive bias for score (b, h, i, j), 0 without one. */
double ref_bias(const mask_r *mask, uint32_t b, uint32_t h, uint32_t i, uint32_t j,
                uint32_t len_q, uint32_t len_k);

#endif /* VKMHA_INTERNAL_H */
