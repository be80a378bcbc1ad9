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

#include "printf_attr.h"

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
    /* A quantized B (vkmha_matmul_desc.b_quant; quant_b.type 0: none): b is
     * one matrix [quant_b.rows][quant_b.cols] (op T [n][k], op N [k][n]) of
     * layout_b.bytes bytes, extent_b; sb 0 and ldb its cols. */
    vkmha_quant_desc quant_b;
    vkmha_quant_layout layout_b;
} mm_shape;

typedef struct sm_shape {
    uint32_t batch, heads, len_q, len_k;
    float scale;
    uint32_t dtype; /* host arrays: desc->dtype */
} sm_shape;

typedef struct heads_shape {
    uint32_t batch, len, heads, head_dim;
    uint32_t dtype; /* host arrays: desc->dtype */
    /* A block of rows and heads of a larger array of one batch entry (its
     * len and heads; 0: none): src/split.c, the Vulkan backend only. */
    uint32_t full_len, full_heads;
    /* RoPE on x's rows as they are copied (the Vulkan KV cache append's
     * keys, src/vk_mha.c; rope_pairs 0: none): row l of entry b takes the
     * (cos, sin) pairs of SLOT_ROPE's row rope_row0 + b * len + l (full_len
     * in a block). */
    uint32_t rope_pairs, rope_row0;
    bool rope_interleaved;
} heads_shape;

typedef struct attn_shape {
    uint32_t batch, heads, kv_heads, len_q, len_k, d_k, d_v;
    float scale;
    vkmha_attention_path path; /* as the caller asked: AUTO, FUSED or UNFUSED */
    uint32_t kv_splits;        /* 0 = automatic, else <= min(len_k, VKMHA_MAX_KV_SPLITS) */
    uint32_t dtype;            /* host arrays: desc->dtype */
    /* A KV cache's forward (the reference backend; NULL otherwise): batch
     * entry b has lengths[b] <= len_k keys, the rest do not exist. */
    const uint32_t *lengths;
} attn_shape;

/* A checked mask: kinds and pointers agree, bias_batch / bias_heads are 1 or
 * the full size. kinds == 0 when the caller passed none. causal_offset holds
 * the bits of an int32 in [-len_q, len_k] (a KV cache's forward makes it
 * negative where an entry has fewer keys than queries): query i of an entry
 * of len_b keys sees keys j <= i + causal_offset + len_b - len_k. */
typedef vkmha_mask mask_r;

/* The score a masked position gets, exactly as masked_fill(mask == 0, -1e9). */
#define VKMHA_MASKED_SCORE (-1e9)

/* ------------------------------------------------------------------------ */
/* Context                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct vk_state vk_state; /* src/vk_internal.h */

/* How a call runs: the public forms of an op or of the layer. */
typedef enum vkmha_form {
    FORM_HOST,   /* host arrays, computed before the call returns */
    FORM_TENSOR, /* tensors, computed before the call returns (vkmha_*_tensor) */
    FORM_RECORD, /* tensors, recorded into the application's command buffer */
    FORM_SUBMIT, /* tensors, submitted without waiting (vkmha_mha_submit) */
} vkmha_form;

typedef struct vkmha_run {
    vkmha_form form;
    void *cmd;              /* FORM_RECORD: the application's VkCommandBuffer */
    vkmha_submission **sub; /* FORM_SUBMIT: where the submission goes */
} vkmha_run;

/* An array argument, checked: a host array (FORM_HOST) or a live tensor of
 * the context (the other forms), and its dtype. Both NULL: absent (an
 * optional argument). Outputs are written through `host` too. */
typedef struct vkmha_arg {
    const void *host;
    const vkmha_tensor *tensor;
    uint32_t dtype;
    /* A tensor's bytes before the argument's first element (0 but for a
     * part of a split call, src/split.c). */
    uint64_t at;
} vkmha_arg;

/* A checked mask: `m` as a host-array mask and, for tensors, the tensors of
 * its kinds (key padding, full, bias; NULL where absent), whose arrays
 * m.key_padding / full / bias then only stand in for (non-NULL). */
typedef struct vkmha_mask_arg {
    mask_r m;
    const vkmha_tensor *t[3];
    uint64_t at[3]; /* as vkmha_arg.at, of each tensor */
} vkmha_mask_arg;

/* The layer's forward, resolved (src/mha.c), for the backends. */
typedef struct mha_fwd {
    uint32_t B, Lq, Lk;
    vkmha_mask_arg mask;
    attn_shape as; /* the attention inside, path and splits checked */
    uint64_t n_query, n_key, n_value, n_out, n_weights; /* elements */
    uint32_t ad;   /* the activations' dtype: io and the projections */
    uint64_t es;   /* its bytes per element */
    /* A KV cache's forward (cache NULL: none): batch entry b uses cache
     * entry entry + b, which held old[b] positions and holds lengths[b]
     * after the call (old[b] + Lk if append, else old[b]); as.len_k is the
     * largest of lengths, Lk the appended positions (0 without key and
     * value). The cache's lengths are updated once the backend succeeded. */
    vkmha_kv_cache *cache;
    uint32_t entry;
    bool append;
    const uint32_t *old, *lengths;
    /* RoPE (desc rope_dims): the caller's positions [B][pos_ld] (NULL: the
     * default L_b + t), and the first query row of this call within them
     * (a part of rows: i0); the new keys are rows 0 .. Lk - 1. */
    const uint32_t *positions;
    uint32_t pos_ld, q0;
    /* A mixed batch (vkmha_mha_io.entry_tokens; NULL, 0: none): entry b's
     * tokens[b] rows are packed after the earlier entries' (Lq and Lk are
     * their sum, n_* the packed arrays'); the backend runs its parts
     * (runs of consecutive entries with equal counts, each a call of its
     * own shape) in the call's one command buffer. */
    const uint32_t *tokens;
    const struct mha_part *parts;
    uint32_t n_parts;
} mha_fwd;

/* A part of a mixed batch: f.B consecutive entries of the call, each of
 * f.Lq rows, from row0 of its packed arrays (vkmha__part_args). */
typedef struct mha_part {
    mha_fwd f;
    uint64_t row0;
} mha_part;
/* The call's arguments io[5] (query, key, value, out, attn_weights) at
 * part p's first row. */
void vkmha__part_args(const vkmha_mha_desc *d, const mha_fwd *f, const mha_part *p,
                      const vkmha_arg io[5], vkmha_arg out[5]);

/* RoPE's position of token t of batch entry b: a query row (t from 0 in
 * this call) or a new key (key). */
uint32_t vkmha__rope_position(const mha_fwd *f, uint32_t b, uint32_t t, bool key);
/* RoPE's (cos, sin) of token position `pos`, pair i of the desc's rope_dims,
 * in double (both backends use them). */
void vkmha__rope_angle(const vkmha_mha_desc *d, uint32_t pos, uint32_t i, double *c,
                       double *s);
/* Rotates `rows` rows of `heads` heads of d->d_k elements (row stride ld)
 * at the given token positions: the reference's RoPE (src/mha.c). */
void vkmha__rope_rows(const vkmha_mha_desc *d, float *x, uint32_t rows, uint32_t heads,
                      uint64_t ld, const mha_fwd *f, bool key);

/* The layer's weights, in the order the backends keep them. */
enum mha_weight { W_Q, W_K, W_V, W_O, B_Q, B_K, B_V, B_O, GAMMA, BETA, WEIGHT_COUNT };

/* What a backend does, chosen once at context creation: the reference's
 * (src/ref_backend.c) or the Vulkan backend's (src/vk_context.c). The
 * arguments arrive checked (src/check.c, src/tensor.c, src/mha.c); each op
 * entry serves every form of its op (run->form). Messages name ctx->call. */
typedef struct vkmha_backend_ops {
    /* The context: its backend state (compile_only: Vulkan only, see
     * vkmha__context_create_compile_only), freed by destroy (also after a
     * failed create); trim frees what only speeds later calls up. */
    vkmha_status (*create)(vkmha_context *ctx, const vkmha_context_desc *desc,
                           bool compile_only);
    void (*destroy)(vkmha_context *ctx);
    vkmha_status (*trim)(vkmha_context *ctx);
    /* Fills the backend's part of vkmha_context_info (out zeroed, backend set). */
    void (*info)(const vkmha_context *ctx, vkmha_context_info *out);
    /* vkmha_context_get_kernels after its argument checks: up to *count rows
     * into out, then *count = the number of kernels. */
    void (*kernels)(const vkmha_context *ctx, uint32_t *count, vkmha_kernel_info *out);
    /* vkmha_context_get_profile after its argument checks, likewise (NULL:
     * a backend without one, *count 0). */
    void (*profile)(const vkmha_context *ctx, uint32_t *count, vkmha_profile_step *out);
    /* The pipeline cache (vkmha_context_get_pipeline_cache's contract; fn
     * names the public call) and the path given at creation (NULL: none);
     * both NULL for a backend without one. */
    vkmha_status (*pipeline_cache)(vkmha_context *ctx, const char *fn, void *data,
                                   size_t *size);
    const char *(*pipeline_cache_path)(const vkmha_context *ctx);
    /* NULL, or why FORM_RECORD is unsupported (the message after "fn: "). */
    const char *no_commands;

    /* The ops. */
    vkmha_status (*matmul)(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                           const vkmha_arg *a, const vkmha_arg *b, const vkmha_arg *bias,
                           const vkmha_arg *c);
    vkmha_status (*softmax)(vkmha_context *ctx, const vkmha_run *run, const sm_shape *s,
                            const vkmha_arg *x, const vkmha_mask_arg *mask,
                            const vkmha_arg *y);
    vkmha_status (*heads)(vkmha_context *ctx, const vkmha_run *run, const heads_shape *s,
                          bool split, const vkmha_arg *x, const vkmha_arg *y);
    vkmha_status (*attention)(vkmha_context *ctx, const vkmha_run *run, const attn_shape *s,
                              const vkmha_arg *q, const vkmha_arg *k, const vkmha_arg *v,
                              const vkmha_mask_arg *mask, const vkmha_arg *out,
                              const vkmha_arg *weights);

    /* Tensors: the backend's struct (starting with a vkmha_tensor) is
     * tensor_size bytes. tensor_alloc gives a new tensor (desc, sizes set)
     * its memory (vkmha__tensor_words) and sets mem / offset (it may exceed
     * the device's buffer range: the ops bind such tensors in windows or
     * parts, src/split.c, and a KV cache from an entry); tensor_wrap wraps
     * a VkBuffer (vkmha_tensor_wrap's
     * arguments, buffer as a 64-bit handle); tensor_free frees what alloc or
     * wrap made; tensor_copy copies `bytes` from byte `offset` between host
     * memory and t (host -> t when `up`) and waits. */
    size_t tensor_size;
    vkmha_status (*tensor_alloc)(vkmha_tensor *t);
    vkmha_status (*tensor_wrap)(vkmha_context *ctx, const vkmha_tensor_desc *desc,
                                uint64_t buffer, uint64_t offset, uint64_t size,
                                vkmha_tensor **out);
    void (*tensor_free)(vkmha_tensor *t);
    vkmha_status (*tensor_copy)(const vkmha_tensor *t, uint64_t offset, void *host,
                                uint64_t bytes, bool up);

    /* The layer: the backend's struct (starting with a vkmha_mha) is
     * mha_size bytes. mha_weights keeps the weights src[i] (dtype dt[i],
     * n[i] elements; NULL: absent) in mha->d.storage_dtype, but for the
     * projection weights of a layer with mha->d.weight_quant, which come
     * quantized (dt U8; vkmha__weight_quant) and stay so; mha_free frees
     * what it kept (also after a failed mha_weights); mha_forward runs the
     * forward (io: query, key, value, out, attn_weights). */
    size_t mha_size;
    vkmha_status (*mha_weights)(vkmha_mha *mha, const void *const src[WEIGHT_COUNT],
                                const uint32_t dt[WEIGHT_COUNT],
                                const uint64_t n[WEIGHT_COUNT]);
    void (*mha_free)(vkmha_mha *mha);
    vkmha_status (*mha_forward)(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                                const vkmha_arg io[5]);

    /* KV caches (src/kv_cache.c; the struct starts with vkmha_kv_cache and
     * has kv_size bytes): the backend's state for a cache whose tensors
     * exist (kv_create; kv_free undoes it); zeros at positions [from,
     * capacity) of entries first .. first + count - 1 (kv_clear); entry e
     * takes what entry src[e] held (kv_reorder, keys and values only). Each
     * computes before returning. */
    size_t kv_size;
    vkmha_status (*kv_create)(vkmha_kv_cache *c);
    void (*kv_free)(vkmha_kv_cache *c);
    vkmha_status (*kv_clear)(vkmha_kv_cache *c, uint32_t first, uint32_t count, uint32_t from);
    vkmha_status (*kv_reorder)(vkmha_kv_cache *c, const uint32_t *src);

    /* vkmha_mha_submit of a layer that runs in parts (src/split.c; NULL for
     * a backend without parts): parts_open makes a submission-to-be and
     * *part, the run (FORM_RECORD) the parts record into it with;
     * parts_close submits it into *out, or drops it when st (a part's
     * failure) is not VKMHA_SUCCESS, and returns the status. */
    vkmha_status (*parts_open)(vkmha_context *ctx, vkmha_run *part, vkmha_submission **open);
    vkmha_status (*parts_close)(vkmha_context *ctx, vkmha_submission *open, vkmha_status st,
                                vkmha_submission **out);
    /* Submissions not yet done: wait (timeout in ns) or poll; free waits
     * for s and frees it. */
    vkmha_status (*submission_wait)(vkmha_submission *s, uint64_t timeout_ns);
    vkmha_status (*submission_poll)(vkmha_submission *s);
    void (*submission_free)(vkmha_submission *s);
} vkmha_backend_ops;
extern const vkmha_backend_ops vkmha__reference_ops;
extern const vkmha_backend_ops vk_backend_ops;

/* A tensor; each backend's tensor struct starts with one. */
struct vkmha_tensor {
    vkmha_context *ctx;
    vkmha_tensor_desc desc;
    uint64_t elements, bytes;
    /* Where its bytes are, to tell tensors that share memory: a memory
     * object (0: host memory) and the byte offset in it (host memory: the
     * address). */
    uint64_t mem, offset;
};

/* A layer; each backend's layer struct starts with one. */
struct vkmha_mha {
    vkmha_context *ctx;
    vkmha_mha_desc d; /* defaults resolved, pointers NULL */
};

/* A KV cache (src/kv_cache.c); each backend's struct starts with one. */
struct vkmha_kv_cache {
    vkmha_mha *mha;
    vkmha_kv_cache_desc d; /* defaults resolved; keys, values: the tensors in use */
    bool own;              /* the cache created keys and values */
    uint32_t n_kv_head, d_k, d_v;
    /* The tensors' element dtype (d.dtype, or U8 for a Q8 cache) and
     * elements per (entry, head, position) row of keys [0] and values [1]:
     * d_k and d_v, or a Q8 cache's row bytes (vkmha__kv_q8_row_bytes). */
    uint32_t elem_dtype, row[2];
    uint32_t *lengths;      /* [batch] */
    uint32_t *call_lengths; /* [batch]: mha_fwd.lengths of a forward */
};

/* A Q8 KV cache's row of d elements (include/vkmha.h,
 * vkmha_kv_cache_desc.quant): the fp16 scale, 2 bytes of 0, the d codes,
 * 0s up to a multiple of 4 bytes. */
static inline uint32_t vkmha__kv_q8_row_bytes(uint32_t d)
{
    return 4 + (d + 3) / 4 * 4;
}
/* src/quant.c: the row of n fp32 values x quantized into row[] (its
 * vkmha__kv_q8_row_bytes(n) bytes), and back into n fp32 values. */
void vkmha__kv_q8_quantize(const float *x, uint32_t n, uint8_t *row);
void vkmha__kv_q8_dequantize(const uint8_t *row, uint32_t n, float *x);

/* src/kv_cache.c: checks a forward's io.kv_cache and io.kv_entry (query,
 * key and value as given: key and value both NULL means no append) and
 * fills f's cache fields, f->Lk (the appended positions) and f->as.len_k;
 * the layer's other checks follow. tokens (a mixed batch's counts; NULL:
 * len_k for every entry): what each entry appends. vkmha__kv_commit stores
 * the lengths after the backend succeeded. */
vkmha_status vkmha__kv_resolve(vkmha_mha *mha, vkmha_kv_cache *cache, uint32_t entry,
                               uint32_t len_k, const uint32_t *tokens, bool append, mha_fwd *f);
void vkmha__kv_commit(const mha_fwd *f);

/* A submission (vkmha_mha_submit); the Vulkan backend's struct starts with
 * one. */
struct vkmha_submission {
    vkmha_context *ctx;
    bool done;           /* finished (its fence signaled, or the work failed) */
    vkmha_status status; /* when done */
};

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
    const vkmha_backend_ops *ops; /* the backend's, chosen at creation */
    vk_state *vk; /* NULL for the reference backend */
    /* The most bytes one binding holds (maxStorageBufferRange) and one
     * allocation (maxMemoryAllocationSize), as the context believes them
     * (debug options lowered); 0 for the reference backend: no limit. Set
     * once at creation for splitting calls (src/split.c). tensor_bytes:
     * vkmha_context_info.max_tensor_bytes (0: no limit). */
    uint64_t storage_range, allocation_size, tensor_bytes;
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

/* src/split.c: calls (host arrays or tensors) whose arrays exceed what one
 * call of the backend can bind (Vulkan: maxStorageBufferRange,
 * maxMemoryAllocationSize) run as several calls that fit; otherwise one
 * backend call. A tensor that no part fits is refused here, naming it. */
vkmha_status vkmha__softmax_split(vkmha_context *ctx, const vkmha_run *run, const sm_shape *s,
                                  const vkmha_arg *x, const vkmha_mask_arg *m,
                                  const vkmha_arg *y);
vkmha_status vkmha__attention_split(vkmha_context *ctx, const vkmha_run *run,
                                    const attn_shape *s, const vkmha_arg *q, const vkmha_arg *k,
                                    const vkmha_arg *v, const vkmha_mask_arg *m,
                                    const vkmha_arg *out, const vkmha_arg *weights);
vkmha_status vkmha__matmul_split(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                                 const vkmha_arg *a, const vkmha_arg *b, const vkmha_arg *bias,
                                 const vkmha_arg *c);
vkmha_status vkmha__heads_split(vkmha_context *ctx, const vkmha_run *run, const heads_shape *s,
                                bool split, const vkmha_arg *x, const vkmha_arg *y);
/* The layer, in calls of whole batch entries (each entry's cache entry,
 * masks and arrays) when the whole does not fit; FORM_SUBMIT, which one
 * submission must hold, refuses that. A mixed batch (f->tokens) goes to
 * vkmha__mha_forward_mixed. */
vkmha_status vkmha__mha_forward_split(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                                      const vkmha_arg args[5]);
/* A mixed batch (f->tokens): its parts into f's copy, then the backend's
 * forward of them all (one command buffer); arrays past one binding are
 * refused naming them. */
vkmha_status vkmha__mha_forward_mixed(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                                      const vkmha_arg args[5]);

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
#ifdef _WIN32
/* The same for a Windows error code (GetLastError()). */
const char *vkmha__win_error_text(unsigned long err, char *buf, size_t cap);
#endif

/* src/mha.c: vkmha_mha_create without starting a public call (messages
 * name ctx->call: the loader's, for vkmha_mha_create_from_safetensors). */
vkmha_status vkmha__mha_create(vkmha_context *ctx, const vkmha_mha_desc *desc, vkmha_mha **out);

/* ---- the public forms on tensors, shared by their entry points ---------- */

/* src/context.c: like vkmha_context_create (desc->vulkan must be NULL), for
 * a device that compiles pipelines but cannot run them (tools/vkmha-occupancy;
 * what such a context can do: src/vk_internal.h). */
vkmha_status vkmha__context_create_compile_only(const vkmha_context_desc *desc,
                                                vkmha_context **out);

/* src/tensor.c. Starts the public tensor call `fn` in run->form: checks
 * what the form needs (FORM_SUBMIT: run->sub, cleared; FORM_RECORD: a
 * backend that records, and run->cmd). */
vkmha_status vkmha__tensor_call(vkmha_context *ctx, const vkmha_run *run, const char *fn);
/* A tensor of desc's shape, live in ctx, without storage (the backend's
 * tensor_alloc or tensor_wrap gives it some). */
vkmha_status vkmha__tensor_new(vkmha_context *ctx, const vkmha_tensor_desc *desc,
                               vkmha_tensor **out);
/* The ops on tensors in run->form (FORM_TENSOR or FORM_RECORD): checks,
 * then the backend's op. */
vkmha_status vkmha__matmul_tensors(vkmha_context *ctx, const vkmha_run *run,
                                   const vkmha_matmul_desc *desc, const vkmha_tensor *a,
                                   const vkmha_tensor *b, const vkmha_tensor *bias,
                                   vkmha_tensor *c);
vkmha_status vkmha__softmax_tensors(vkmha_context *ctx, const vkmha_run *run,
                                    const vkmha_softmax_desc *desc, const vkmha_tensor *x,
                                    const vkmha_tensor_mask *mask, vkmha_tensor *y);
vkmha_status vkmha__heads_tensors(vkmha_context *ctx, const vkmha_run *run, bool split,
                                  const vkmha_heads_desc *desc, const vkmha_tensor *x,
                                  vkmha_tensor *y);
vkmha_status vkmha__attention_tensors(vkmha_context *ctx, const vkmha_run *run,
                                      const vkmha_attention_desc *desc, const vkmha_tensor *q,
                                      const vkmha_tensor *k, const vkmha_tensor *v,
                                      const vkmha_tensor_mask *mask, vkmha_tensor *out,
                                      vkmha_tensor *weights);
/* For the layer and the KV cache: checks tensor argument `name` (live in
 * ctx, F32, F16 or BF16, at least `elements`; a NULL tensor passes when
 * optional) and gives it as a backend's argument. */
vkmha_status vkmha__tensor_arg(vkmha_context *ctx, const char *name, const vkmha_tensor *t,
                               bool optional, uint64_t elements, vkmha_arg *out);
/* The same for a U8 tensor of at least `bytes` (a Q8 KV cache's). */
vkmha_status vkmha__tensor_arg_u8(vkmha_context *ctx, const char *name, const vkmha_tensor *t,
                                  uint64_t bytes, vkmha_arg *out);
/* Checks a mask of tensors. */
vkmha_status vkmha__tensor_mask(vkmha_context *ctx, const vkmha_tensor_mask *tm,
                                uint32_t batch, uint32_t heads, uint32_t len_q,
                                uint32_t len_k, int64_t causal_shift, vkmha_mask_arg *m);
bool vkmha__tensors_overlap(const vkmha_tensor *a, const vkmha_tensor *b);
/* Parts of an array too large for one binding (src/split.c, and the
 * Vulkan matmul's windows): the most rows of `cols` elements at stride ld
 * within `elems` elements (0: not one), and a part of n units of `total`
 * made a multiple of 16 where it splits (parts after the first then keep
 * the vec4 alignment of the whole). */
static inline uint64_t vkmha__rows_within(uint64_t elems, uint64_t cols, uint64_t ld)
{
    return elems < cols ? 0 : (elems - cols) / (ld ? ld : 1) + 1;
}

static inline uint64_t vkmha__part16(uint64_t n, uint64_t total)
{
    return n < total && n >= 16 ? n - n % 16 : n;
}

/* Bytes a tensor's storage takes: whole 32-bit words (the shaders read U8
 * masks four bytes at a time). */
static inline uint64_t vkmha__tensor_words(const vkmha_tensor *t)
{
    return (t->bytes + 3) & ~(uint64_t)3;
}

/* src/mha.c. The layer on tensors in run->form (FORM_TENSOR, FORM_RECORD or
 * FORM_SUBMIT). */
vkmha_status vkmha__mha_forward_tensors(vkmha_mha *mha, const vkmha_run *run,
                                        const vkmha_mha_tensors *io);
/* The forward's arguments' names: io->query, io->key, io->value, io->out,
 * io->attn_weights. */
extern const char *const vkmha__mha_io_names[5];
/* A projection y [rows][out] = x [rows][in] W^T + b as a resolved matmul. */
mm_shape vkmha__projection(uint32_t rows, uint32_t out, uint32_t in);
/* A submission that is already done (the reference backend's), or NULL out
 * of host memory. */
vkmha_submission *vkmha__submission_done(vkmha_context *ctx);

/* Projection weight i (W_Q + i) of a resolved layer desc: [out][in]. */
static inline uint32_t vkmha__weight_in(const vkmha_mha_desc *d, int i)
{
    const uint32_t ins[4] = {d->d_model, d->kdim, d->vdim, d->n_head * d->d_v};
    return ins[i];
}

static inline uint32_t vkmha__weight_out(const vkmha_mha_desc *d, int i)
{
    const uint32_t outs[4] = {d->n_head * d->d_k, d->n_kv_head * d->d_k,
                              d->n_kv_head * d->d_v, d->d_model};
    return outs[i];
}

/* The quantized matrix the layer keeps of projection weight i
 * (d->weight_quant set). */
static inline vkmha_quant_desc vkmha__weight_quant(const vkmha_mha_desc *d, int i)
{
    return (vkmha_quant_desc){.type = d->weight_quant, .group_size = d->weight_group_size,
                              .rows = vkmha__weight_out(d, i), .cols = vkmha__weight_in(d, i)};
}

/* A vkmha_quant_type's name in messages ("none" for VKMHA_QUANT_NONE). */
static inline const char *vkmha__quant_name(uint32_t type)
{
    static const char *const names[] = {"none", "Q8", "Q4", "Q4Z"};
    return type <= VKMHA_QUANT_Q4Z ? names[type] : "?";
}

/* Whether g is a group size of the quantized formats: 32, 64 or 128. */
static inline bool vkmha__quant_group_ok(uint64_t g)
{
    return g == 32 || g == 64 || g == 128;
}

/* The layout of a checked quant desc (include/vkmha.h, "Quantized
 * weights"). */
static inline vkmha_quant_layout vkmha__quant_layout(const vkmha_quant_desc *d)
{
    vkmha_quant_layout l;
    const uint64_t groups = (uint64_t)d->rows * (d->cols / d->group_size),
                   values = (uint64_t)d->rows * d->cols / (d->type == VKMHA_QUANT_Q8 ? 1 : 2),
                   scales_end = values + 2 * groups;
    l.scales_offset = values; /* a multiple of 16: cols is a multiple of 32 */
    l.zeros_offset = d->type == VKMHA_QUANT_Q4Z ? (scales_end + 15) / 16 * 16 : 0;
    const uint64_t end = l.zeros_offset ? l.zeros_offset + groups : scales_end;
    l.bytes = (end + 15) / 16 * 16;
    return l;
}

/* The most rows of the quantized matrix d whose layout fits `bytes` (a
 * window or a block of its rows as a matrix of its own: vkmha__quant_slice
 * on the host, planes' ranges copied on the device). */
uint32_t vkmha__quant_rows_within(const vkmha_quant_desc *d, uint64_t bytes);
/* Rows [r0, r0 + sub->rows) of the quantized matrix d (layout l) as the
 * byte ranges of its planes (codes, scales and, with Q4Z, zero points):
 * bytes[i] from from[i] of d's bytes to to[i] of the matrix of their own
 * (sub, layout sl); returns how many ranges (2 or 3). The device copies
 * them (a window of a quantized B: src/vk_matmul.c). */
uint32_t vkmha__quant_row_planes(const vkmha_quant_desc *d, const vkmha_quant_layout *l,
                                 uint32_t r0, const vkmha_quant_desc *sub,
                                 const vkmha_quant_layout *sl, uint64_t from[3], uint64_t to[3],
                                 uint64_t bytes[3]);

/* src/quant.c. vkmha_quantize after its checks (desc, layout l), in the
 * current call: an unquantizable group's message names `what`. */
vkmha_status vkmha__quantize(vkmha_context *ctx, const vkmha_quant_desc *desc,
                             const vkmha_quant_layout *l, uint32_t src_dtype, const void *src,
                             void *dst, const char *what);
/* The bytes of a quantized matrix (desc checked, layout l) as the
 * dequantization takes them: scales finite, Q4Z zero points at most 15;
 * INVALID naming `what`, the row and group otherwise. */
vkmha_status vkmha__quant_check(vkmha_context *ctx, const vkmha_quant_desc *d,
                                const vkmha_quant_layout *l, const uint8_t *src,
                                const char *what);
/* Rows [r0, r0 + sub->rows) and columns [c0, c0 + sub->cols) (c0 and the
 * columns whole groups) of the quantized matrix src (d, layout l), as a
 * matrix of their own in dst (sub, layout sl, sl->bytes written). */
void vkmha__quant_slice(const vkmha_quant_desc *d, const vkmha_quant_layout *l,
                        const uint8_t *src, uint32_t r0, uint32_t c0,
                        const vkmha_quant_desc *sub, const vkmha_quant_layout *sl, uint8_t *dst);
/* The values of the quantized matrix src (desc checked;
 * layout l) in fp32, exact, read as the kernels read them: no checks, a
 * zero point's low 4 bits. */
void vkmha__dequantize_f32(const vkmha_quant_desc *d, const vkmha_quant_layout *l,
                           const uint8_t *src, float *dst);

/* src/check.c: argument checking shared by both backends. Each returns
 * VKMHA_SUCCESS and a resolved shape, or VKMHA_ERROR_INVALID_ARGUMENT with a
 * message naming the argument (prefixed by the public function's name). */
vkmha_status vkmha__check_matmul(vkmha_context *ctx, const vkmha_matmul_desc *desc,
                                 const void *a, const void *b, const void *bias,
                                 const void *c, mm_shape *out);
/* The causal offset `off` (the caller's, shifted) into m->causal_offset:
 * clamped to [-len_q, len_k], or with a window or ALiBi (whose distances it
 * places) checked to keep positions below 2^31 (INVALID naming it). The
 * result fits an int32_t. */
vkmha_status vkmha__mask_place(vkmha_context *ctx, const char *fn, mask_r *m, int64_t off,
                               uint32_t len_q, uint32_t len_k);
/* causal_shift: added to mask->causal_offset before it is clamped (a KV
 * cache's alignment, mha.c's causal_shift; 0 for the ops). */
vkmha_status vkmha__check_mask(vkmha_context *ctx, const char *fn, const vkmha_mask *mask,
                               uint32_t batch, uint32_t heads, uint32_t len_q,
                               uint32_t len_k, int64_t causal_shift, mask_r *out);
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
                   uint32_t len_q, uint32_t len_k, uint32_t len_b);
/* The additive bias for score (b, h, i, j), 0 without one. */
/* Query i's key position (include/vkmha.h, "Masks"): i + causal_offset +
 * len_b - len_k for an entry of len_b keys. */
int64_t ref_position(const mask_r *mask, uint32_t i, uint32_t len_k, uint32_t len_b);
double ref_bias(const mask_r *mask, uint32_t b, uint32_t h, uint32_t i, uint32_t j,
                uint32_t len_q, uint32_t len_k);

#endif /* VKMHA_INTERNAL_H */
