/* Bad input as a table: every row is one call of a public function whose
 * arguments are a valid default with the row's changes (a size, a stride, a
 * pointer, a mask field, a NaN or an Inf written into an input). Each row
 * runs on both backends (rows whose sizes are valid but beyond any device's
 * buffers run on Vulkan only: the reference backend would compute them) and
 * checks, for an error:
 *   (a) the status (INVALID_ARGUMENT, or UNSUPPORTED for what a device cannot
 *       hold: both are documented),
 *   (b) a last-error message that starts with "function:" and names the
 *       argument as a whole word (for vkmha_context_create: the logger's),
 *   (c) that no output was written (sentinels) and (d) that the context
 *       still works (t_context_works);
 * and for NaN and Inf in inputs and weights: success, and Vulkan's output
 * has its NaN and Inf exactly where the reference backend's has them, the
 * finite elements within tolerance (T_LAYER_ATOL + T_LAYER_RTOL |ref|: the
 * shapes are small and the layer's bound covers every op).
 *
 * Every bad argument of the ops and the layer is a row here: NULL descs and
 * pointers, zero sizes, inconsistent heads, wrong mask kinds and pointers,
 * overlaps (rows that were tests/test_errors.c's calls), overflows of 32
 * and 64 bits, huge sizes, strides, enum and limit values, debug options,
 * NaN and Inf, NULL out pointers of the queries. After them, the layers
 * created before the first row give the same forward as before it.
 * tests/test_errors.c keeps what is not an argument of an op: NULL
 * contexts and layers, context creation, status strings, the names of the
 * tensor forms. Both hold a refusal's message to one check
 * (t_message_names, tests/util.h) and its outputs to t_untouched.
 *
 * Tensors (another context's, destroyed, wrong dtype, too small, shared
 * memory between input and output) are checked in tests/test_embed.c. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "util.h"

#include <stddef.h>
#ifdef _WIN32
#include <windows.h>
#undef IN /* windows.h's annotations; the rows below name their own */
#undef OUT
#else
#include <sys/mman.h>
#endif

/* The maxStorageBufferRange and maxMemoryAllocationSize the rows are written
 * for (lavapipe's). */
#define RANGE (UINT64_C(128) << 20)
#define ALLOCATION (UINT64_C(2) << 30)

#define SENTINEL 12345.0f
#define POOL (1u << 16) /* floats in the input and output pools */

/* Where each default input lives in g_in. */
enum {
    IN_A = 0, IN_B = 1000, IN_BIAS = 2000, IN_X = 3000, IN_Q = 4000, IN_K = 5000,
    IN_V = 6000, IN_MBIAS = 7000, IN_QUERY = 8000, IN_KEY = 9000, IN_VALUE = 10000,
    IN_WQ = 11000, IN_WK = 12000, IN_WV = 13000, IN_WO = 14000, IN_BQ = 15000,
    IN_BK = 15100, IN_BV = 15200, IN_BO = 15300, IN_GAMMA = 15400, IN_BETA = 15500,
};

static float *g_in, *g_out, *g_w, *g_ref_out, *g_ref_w;
static uint8_t g_bytes[4096];
static size_t g_nonfinite, g_compared; /* of the last compared row's reference outputs */

/* The rows that run on Vulkan only claim arrays of up to 256 GiB. Their
 * pointers lie in a reservation of inaccessible pages (PROT_NONE, 256 GiB
 * and 1 MiB per array kind, the inputs' offsets included): the claimed
 * ranges do not overlap each other, and a single byte read or written is a
 * crash, so those calls provably touch nothing. (It was 1 TiB per kind
 * until 2026-11-29: Debian 12's qemu-user 7.2 keeps a descriptor per guest
 * page of a mapping, so the ARM run spent 100 s and 19 GB of memory on the
 * 3 TiB; 768 GiB take 30 s and 4.7 GB, docs/RELIABILITY.md.) */
#define FAR_SPAN (((size_t)1 << 38) + ((size_t)1 << 20))
static char *g_far;

enum fn {
    F_MATMUL, F_SOFTMAX, F_SPLIT, F_MERGE, F_ATTENTION, F_MHA_CREATE, F_LAYER, F_FORWARD,
    F_GET_DESC, F_GET_INFO, F_CONTEXT_CREATE, F_GET_KERNELS
};
static const char *const fn_names[] = {
    "vkmha_matmul", "vkmha_softmax", "vkmha_split_heads", "vkmha_merge_heads",
    "vkmha_attention", "vkmha_mha_create", "vkmha_mha_forward", "vkmha_mha_forward",
    "vkmha_mha_get_desc", "vkmha_context_get_info", "vkmha_context_create",
    "vkmha_context_get_kernels"};

/* Every argument of every function, at its valid default. */
typedef struct args {
    vkmha_matmul_desc mm;
    vkmha_softmax_desc sm;
    vkmha_heads_desc hd;
    vkmha_attention_desc at;
    vkmha_mask mask;
    vkmha_mha_desc md;
    vkmha_mha_io io;
    vkmha_debug_options dbg;
    const vkmha_mask *p_mask;
    const float *a, *b, *bias, *x, *q, *k, *v;
    float *c, *y, *out, *weights;
    vkmha_mha_desc *desc_out;
    vkmha_context_info *info_out;
    uint32_t kernel_capacity;   /* *count of vkmha_context_get_kernels */
    uint32_t *kernel_count;     /* non-NULL: call() points it at kernel_capacity */
    vkmha_kernel_info *kernels; /* non-NULL: call() points it at an array */
    uint32_t null_desc; /* 1: the desc (the layer's io) passed as NULL */
    uint32_t null_out;  /* 1: vkmha_mha_create's out passed as NULL */
} args;

/* A change to the default: a field set to a value, a pointer set to NULL or
 * into a pool, or an input element poisoned (T_POISON: g_in[u] = f). */
enum type { T_END, T_U32, T_I64, T_U64, T_F32, T_NULL, T_IN, T_OUT, T_BYTES, T_MASK, T_POISON };
typedef struct change {
    uint16_t off;
    uint8_t type;
    uint64_t u;
    double f;
} change;

#define U32(field, val) {offsetof(args, field), T_U32, (uint64_t)(val), 0}
#define I64(field, val) {offsetof(args, field), T_I64, (uint64_t)(int64_t)(val), 0}
#define U64(field, val) {offsetof(args, field), T_U64, (uint64_t)(val), 0}
#define F32(field, val) {offsetof(args, field), T_F32, 0, (val)}
#define NUL(field) {offsetof(args, field), T_NULL, 0, 0}
#define IN(field, idx) {offsetof(args, field), T_IN, (idx), 0}
#define OUT(field, idx) {offsetof(args, field), T_OUT, (idx), 0}
#define BYTES(field) {offsetof(args, field), T_BYTES, 0, 0}
#define MASK {offsetof(args, p_mask), T_MASK, 0, 0}
#define POISON(idx, val) {0, T_POISON, (idx), (val)}

enum where { BOTH, VK_ONLY };

typedef struct row {
    const char *label;
    uint8_t fn, where;
    vkmha_status want; /* VKMHA_SUCCESS: NaN / Inf rows, compared */
    const char *arg;   /* the word the message must contain */
    const char *extra; /* and this substring, or NULL */
    change changes[10];
} row;

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT
#define UNSUPP VKMHA_ERROR_UNSUPPORTED
#define OK VKMHA_SUCCESS
#define MAXU 0xFFFFFFFFu
#define KP VKMHA_MASK_KEY_PADDING
#define FULL VKMHA_MASK_FULL
#define CAUSAL VKMHA_MASK_CAUSAL
#define BIAS VKMHA_MASK_BIAS
#define UNFUSED VKMHA_ATTENTION_PATH_UNFUSED
#define NULLD U32(null_desc, 1)
/* The mask's refusals, one row each for an op that takes a mask (its
 * defaults: batch 2, heads 2 or 4). */
#define MASK_ROWS(op, f)                                                                    \
    {op " mask with unknown kind bit 0x100", f, BOTH, INVALID, "mask->kinds", NULL,            \
     {MASK, U32(mask.kinds, 1u << 8)}},                                                      \
    {op " mask KEY_PADDING with NULL key_padding", f, BOTH, INVALID, "mask->key_padding",     \
     NULL, {MASK, U32(mask.kinds, KP)}},                                                     \
    {op " mask FULL with NULL full", f, BOTH, INVALID, "mask->full", NULL,                    \
     {MASK, U32(mask.kinds, FULL)}},                                                         \
    {op " mask BIAS with NULL bias", f, BOTH, INVALID, "mask->bias", NULL,                    \
     {MASK, U32(mask.kinds, BIAS)}},                                                         \
    {op " mask key_padding set without its kind", f, BOTH, INVALID, "mask->key_padding",      \
     "wrong mask kind", {MASK, U32(mask.kinds, CAUSAL), BYTES(mask.key_padding)}},           \
    {op " mask full set without its kind", f, BOTH, INVALID, "mask->full", "wrong mask kind", \
     {MASK, U32(mask.kinds, KP), BYTES(mask.key_padding), BYTES(mask.full)}},                \
    {op " mask bias_heads 3", f, BOTH, INVALID, "mask->bias_heads", NULL,                     \
     {MASK, U32(mask.kinds, BIAS), IN(mask.bias, IN_MBIAS), U32(mask.bias_heads, 3)}},       \
    {op " mask bias_batch 3 with batch 2", f, BOTH, INVALID, "mask->bias_batch", NULL,        \
     {MASK, U32(mask.kinds, BIAS), IN(mask.bias, IN_MBIAS), U32(mask.bias_batch, 3)}}

static const row rows[] = {
    /* ---- vkmha_matmul: strides ---- */
    {"matmul ldb < k (op T)", F_MATMUL, BOTH, INVALID, "desc->ldb", NULL,
     {U32(mm.op_b, VKMHA_OP_T), U32(mm.ldb, 3)}},
    {"matmul ldb < n (op N)", F_MATMUL, BOTH, INVALID, "desc->ldb", NULL, {U32(mm.ldb, 4)}},
    {"matmul ldc < n", F_MATMUL, BOTH, INVALID, "desc->ldc", NULL, {U32(mm.ldc, 2)}},
    {"matmul stride_a < m * lda with batch 2", F_MATMUL, BOTH, INVALID, "desc->stride_a",
     "overlap", {U32(mm.batch, 2), I64(mm.stride_a, 11)}},
    {"matmul stride_c < m * ldc with batch 2", F_MATMUL, BOTH, INVALID, "desc->stride_c",
     "overlap", {U32(mm.batch, 2), I64(mm.stride_c, 14)}},
    {"matmul stride_b -2", F_MATMUL, BOTH, INVALID, "desc->stride_b", NULL,
     {U32(mm.batch, 2), I64(mm.stride_b, -2)}},
    {"matmul stride_a INT64_MIN", F_MATMUL, BOTH, INVALID, "desc->stride_a", NULL,
     {U32(mm.batch, 2), I64(mm.stride_a, INT64_MIN)}},
    {"matmul stride_c VKMHA_BROADCAST with batch 1", F_MATMUL, BOTH, INVALID,
     "desc->stride_c", NULL, {I64(mm.stride_c, VKMHA_BROADCAST)}},
    {"matmul stride_a INT64_MAX times batch 3 overflows 64 bits", F_MATMUL, BOTH, INVALID,
     "desc->stride_a", "overflows", {U32(mm.batch, 3), I64(mm.stride_a, INT64_MAX)}},
    {"matmul stride_c INT64_MAX with batch 2: c's bytes overflow", F_MATMUL, BOTH, INVALID,
     "c", "too many elements", {U32(mm.batch, 2), I64(mm.stride_c, INT64_MAX)}},
    {"matmul stride_b 2^62 times batch 5 overflows", F_MATMUL, BOTH, INVALID,
     "desc->stride_b", "overflows", {U32(mm.batch, 5), I64(mm.stride_b, INT64_C(1) << 62)}},
    /* ---- vkmha_matmul: sizes ---- */
    {"matmul m = k = 2^32 - 1: a's bytes overflow 64 bits", F_MATMUL, BOTH, INVALID, "a",
     "too many elements", {U32(mm.m, MAXU), U32(mm.k, MAXU)}},
    {"matmul n = k = 2^32 - 1 (op T): b's bytes overflow", F_MATMUL, BOTH, INVALID, "b",
     "too many elements", {U32(mm.n, MAXU), U32(mm.k, MAXU), U32(mm.op_b, VKMHA_OP_T)}},
    {"matmul m = ldc = 2^32 - 1: c's bytes overflow", F_MATMUL, BOTH, INVALID, "c",
     "too many elements", {U32(mm.m, MAXU), U32(mm.ldc, MAXU), U32(mm.k, 1), U32(mm.lda, 1)}},
    {"matmul batch 2^32 - 1 with stride_a 2^30: a's bytes overflow", F_MATMUL, BOTH, INVALID,
     "a", "too many elements", {U32(mm.batch, MAXU), I64(mm.stride_a, INT64_C(1) << 30)}},
    {"matmul op_b -1", F_MATMUL, BOTH, INVALID, "desc->op_b", NULL, {U32(mm.op_b, MAXU)}},
    {"matmul c overlaps b", F_MATMUL, BOTH, INVALID, "c", "overlap",
     {OUT(b, 3)}},
    /* A product whose a or c (or b with op T) is past maxMemoryAllocationSize
     * runs as calls of blocks of rows and columns (test_limits), which would
     * read these rows' small arrays: only what no block fits is refused. */
    /* b past maxMemoryAllocationSize with op N runs in blocks of its rows
     * (test_limits; k * n = 2^32 and ldb = 2^32 - 1 are only a matter of
     * memory now): one row past the range is refused. */
    {"matmul op N, n = 2^32 - 1: one row of b is 16 GiB", F_MATMUL, VK_ONLY, UNSUPP,
     "one row of b", "maxStorageBufferRange",
     {U32(mm.k, 2), U32(mm.n, MAXU), U32(mm.op_b, VKMHA_OP_N)}},
    {"matmul k = 2^30: one row of a is 4 GiB", F_MATMUL, VK_ONLY, UNSUPP, "a",
     "maxMemoryAllocationSize", {U32(mm.k, 1u << 30), U32(mm.op_b, VKMHA_OP_T)}},
    /* Batched arrays past the range run as calls of fewer products, and host
     * arrays past it of the softmax, the attention and the layer as calls of
     * entries, heads or rows (test_limits): the rows below that stay refusals
     * are those where not one part fits. */
    /* ---- vkmha_matmul: NaN and Inf ---- */
    {"matmul NaN in a", F_MATMUL, BOTH, OK, NULL, NULL, {POISON(IN_A + 5, NAN)}},
    {"matmul +Inf in b", F_MATMUL, BOTH, OK, NULL, NULL, {POISON(IN_B + 7, INFINITY)}},
    {"matmul -Inf in bias", F_MATMUL, BOTH, OK, NULL, NULL, {POISON(IN_BIAS + 2, -INFINITY)}},
    {"matmul +Inf and -Inf in one dot product", F_MATMUL, BOTH, OK, NULL, NULL,
     {POISON(IN_A + 0, INFINITY), POISON(IN_A + 1, -INFINITY)}},
    {"matmul alpha NaN", F_MATMUL, BOTH, OK, NULL, NULL, {F32(mm.alpha, NAN)}},
    {"matmul alpha +Inf", F_MATMUL, BOTH, OK, NULL, NULL, {F32(mm.alpha, INFINITY)}},
    {"matmul NaN in a, batch 3 with B broadcast", F_MATMUL, BOTH, OK, NULL, NULL,
     {U32(mm.batch, 3), I64(mm.stride_b, VKMHA_BROADCAST), POISON(IN_A + 20, NAN)}},

    /* ---- vkmha_softmax ---- */
    {"softmax sizes 2^16 each: the product is 2^64", F_SOFTMAX, BOTH, INVALID, "len_k",
     "overflow", {U32(sm.batch, 1u << 16), U32(sm.heads, 1u << 16), U32(sm.len_q, 1u << 16),
                  U32(sm.len_k, 1u << 16)}},
    {"softmax 2^62 elements: the bytes overflow", F_SOFTMAX, BOTH, INVALID, "x",
     "too many elements", {U32(sm.batch, 1u << 16), U32(sm.heads, 1u << 16),
                           U32(sm.len_q, 1u << 16), U32(sm.len_k, 1u << 14)}},
    {"softmax len_k 2^30: one row of 4 GiB", F_SOFTMAX, VK_ONLY, UNSUPP, "x",
     "maxStorageBufferRange", {U32(sm.len_k, 1u << 30)}},
    {"softmax mask kinds bit 31", F_SOFTMAX, BOTH, INVALID, "mask->kinds", NULL,
     {MASK, U32(mask.kinds, 1u << 31)}},
    {"softmax mask bias set with only KEY_PADDING", F_SOFTMAX, BOTH, INVALID, "mask->bias",
     "wrong mask kind", {MASK, U32(mask.kinds, KP), BYTES(mask.key_padding), IN(mask.bias, IN_MBIAS)}},
    {"softmax mask full set, kinds 0", F_SOFTMAX, BOTH, INVALID, "mask->full",
     "wrong mask kind", {MASK, BYTES(mask.full)}},
    {"softmax mask KEY_PADDING | FULL with NULL full", F_SOFTMAX, BOTH, INVALID, "mask->full",
     NULL, {MASK, U32(mask.kinds, KP | FULL), BYTES(mask.key_padding)}},
    {"softmax mask bias_batch 2^32 - 1", F_SOFTMAX, BOTH, INVALID, "mask->bias_batch", NULL,
     {MASK, U32(mask.kinds, BIAS), IN(mask.bias, IN_MBIAS), U32(mask.bias_batch, MAXU)}},
    {"softmax mask bias_heads 2^32 - 1", F_SOFTMAX, BOTH, INVALID, "mask->bias_heads", NULL,
     {MASK, U32(mask.kinds, BIAS), IN(mask.bias, IN_MBIAS), U32(mask.bias_heads, MAXU)}},
    {"softmax NaN in x", F_SOFTMAX, BOTH, OK, NULL, NULL, {POISON(IN_X + 7, NAN)}},
    {"softmax +Inf in x", F_SOFTMAX, BOTH, OK, NULL, NULL, {POISON(IN_X + 11, INFINITY)}},
    {"softmax -Inf in x", F_SOFTMAX, BOTH, OK, NULL, NULL, {POISON(IN_X + 3, -INFINITY)}},
    {"softmax a row of -Inf", F_SOFTMAX, BOTH, OK, NULL, NULL,
     {POISON(IN_X + 5, -INFINITY), POISON(IN_X + 6, -INFINITY), POISON(IN_X + 7, -INFINITY),
      POISON(IN_X + 8, -INFINITY), POISON(IN_X + 9, -INFINITY)}},
    {"softmax NaN in the mask bias", F_SOFTMAX, BOTH, OK, NULL, NULL,
     {MASK, U32(mask.kinds, BIAS), IN(mask.bias, IN_MBIAS), POISON(IN_MBIAS + 4, NAN)}},
    {"softmax -Inf in the mask bias", F_SOFTMAX, BOTH, OK, NULL, NULL,
     {MASK, U32(mask.kinds, BIAS), IN(mask.bias, IN_MBIAS), POISON(IN_MBIAS + 9, -INFINITY)}},
    {"softmax NaN in x at a masked position", F_SOFTMAX, BOTH, OK, NULL, NULL,
     {MASK, U32(mask.kinds, CAUSAL), POISON(IN_X + 4, NAN)}},
    {"softmax scale NaN", F_SOFTMAX, BOTH, OK, NULL, NULL, {F32(sm.scale, NAN)}},
    {"softmax scale +Inf", F_SOFTMAX, BOTH, OK, NULL, NULL, {F32(sm.scale, INFINITY)}},

    /* ---- vkmha_split_heads / vkmha_merge_heads ---- */
    {"split_heads len * heads = 2^64 - 2^33 + 1, times head_dim 2: overflow", F_SPLIT, BOTH,
     INVALID, "head_dim", "overflow",
     {U32(hd.batch, 1), U32(hd.len, MAXU), U32(hd.heads, MAXU), U32(hd.head_dim, 2)}},
    {"merge_heads 2^62 elements: the bytes overflow", F_MERGE, BOTH, INVALID, "x",
     "too many elements", {U32(hd.batch, 1u << 16), U32(hd.len, 1u << 16),
                           U32(hd.heads, 1u << 16), U32(hd.head_dim, 1u << 14)}},
    {"split_heads one entry of 2^32 elements (32-bit product wraps to 0)", F_SPLIT, VK_ONLY,
     UNSUPP, "x", "maxStorageBufferRange",
     {U32(hd.batch, 1), U32(hd.len, 1u << 10), U32(hd.heads, 1u << 10),
      U32(hd.head_dim, 1u << 12)}},
    {"merge_heads 2^32 + 2^16 elements", F_MERGE, VK_ONLY, UNSUPP, "x",
     "maxStorageBufferRange", {U32(hd.batch, 1), U32(hd.len, (1u << 16) + 1),
                               U32(hd.heads, 1u << 8), U32(hd.head_dim, 1u << 8)}},
    {"split_heads y one element into x", F_SPLIT, BOTH, INVALID, "y", "overlap",
     {OUT(x, 0), OUT(y, 1)}},
    {"merge_heads NULL x", F_MERGE, BOTH, INVALID, "x", NULL, {NUL(x)}},
    {"split_heads NULL y", F_SPLIT, BOTH, INVALID, "y", NULL, {NUL(y)}},
    {"split_heads NaN and Inf in x", F_SPLIT, BOTH, OK, NULL, NULL,
     {POISON(IN_X + 1, NAN), POISON(IN_X + 30, INFINITY), POISON(IN_X + 31, -INFINITY)}},
    {"merge_heads NaN and Inf in x", F_MERGE, BOTH, OK, NULL, NULL,
     {POISON(IN_X + 2, NAN), POISON(IN_X + 17, -INFINITY)}},

    /* ---- vkmha_attention ---- */
    {"attention heads 4 % kv_heads 3", F_ATTENTION, BOTH, INVALID, "desc->kv_heads", NULL,
     {U32(at.kv_heads, 3)}},
    {"attention kv_heads 2^32 - 1", F_ATTENTION, BOTH, INVALID, "desc->kv_heads", NULL,
     {U32(at.kv_heads, MAXU)}},
    {"attention len_k * d_k near 2^64: k's bytes overflow", F_ATTENTION, BOTH, INVALID, "k",
     "too many elements", {U32(at.batch, 1), U32(at.heads, 1), U32(at.kv_heads, 1),
                           U32(at.len_k, MAXU), U32(at.d_k, MAXU)}},
    {"attention len_k * d_v near 2^64: v's bytes overflow", F_ATTENTION, BOTH, INVALID, "v",
     "too many elements", {U32(at.batch, 1), U32(at.heads, 1), U32(at.kv_heads, 1),
                           U32(at.len_k, MAXU), U32(at.d_k, 1), U32(at.d_v, MAXU)}},
    {"attention len_q * len_k near 2^64: weights' bytes overflow", F_ATTENTION, BOTH, INVALID,
     "weights", "too many elements",
     {U32(at.batch, 1), U32(at.heads, 1), U32(at.kv_heads, 1), U32(at.len_q, MAXU),
      U32(at.len_k, MAXU), U32(at.d_k, 1)}},
    {"attention heads * len_q * len_k overflows 64 bits (weights only)", F_ATTENTION, BOTH,
     INVALID, "weights", "overflow",
     {U32(at.batch, 1), U32(at.heads, 1u << 16), U32(at.kv_heads, 1u << 16),
      U32(at.len_q, 1u << 17), U32(at.len_k, MAXU), U32(at.d_k, 1)}},
    /* Keys past the range are read in windows (tests/test_limits.c): the
     * unfused path refuses only its scores (one row of 256 MiB). */
    {"attention unfused, one head's k of 2^26 keys (256 MiB)", F_ATTENTION, VK_ONLY, UNSUPP,
     "attention scores", "maxStorageBufferRange",
     {U32(at.batch, 1), U32(at.heads, 1), U32(at.kv_heads, 1), U32(at.len_q, 1),
      U32(at.len_k, 1u << 26), U32(at.d_k, 1), U32(at.d_v, 1), U32(at.path, UNFUSED),
      NUL(weights)}},
    /* The unfused path runs in calls of rows whose scores fit: only a row
     * of scores past the range is refused (fp16 keys of 96 MiB, d_k 1). */
    {"attention unfused, one row of scores of 192 MiB", F_ATTENTION, VK_ONLY, UNSUPP,
     "attention scores", "maxStorageBufferRange",
     {U32(at.dtype, VKMHA_DTYPE_F16), U32(at.batch, 1), U32(at.heads, 1), U32(at.kv_heads, 1),
      U32(at.len_q, 1), U32(at.len_k, 3u << 24), U32(at.d_k, 1), U32(at.d_v, 1),
      U32(at.path, UNFUSED), NUL(weights)}},
    {"attention weights overlaps k", F_ATTENTION, BOTH, INVALID, "weights", "overlap",
     {OUT(k, 50), OUT(weights, 0), OUT(out, 20000)}},
    {"attention out overlaps v", F_ATTENTION, BOTH, INVALID, "out", "overlap",
     {OUT(v, 10)}},
    {"attention mask bias_heads 2 (kv_heads) with 4 heads", F_ATTENTION, BOTH, INVALID,
     "mask->bias_heads", NULL,
     {MASK, U32(mask.kinds, BIAS), IN(mask.bias, IN_MBIAS), U32(mask.bias_heads, 2)}},
    {"attention NaN in q", F_ATTENTION, BOTH, OK, NULL, NULL, {POISON(IN_Q + 9, NAN)}},
    {"attention NaN in q (unfused)", F_ATTENTION, BOTH, OK, NULL, NULL,
     {POISON(IN_Q + 9, NAN), U32(at.path, UNFUSED)}},
    {"attention NaN in k", F_ATTENTION, BOTH, OK, NULL, NULL, {POISON(IN_K + 13, NAN)}},
    {"attention +Inf in k", F_ATTENTION, BOTH, OK, NULL, NULL, {POISON(IN_K + 2, INFINITY)}},
    {"attention -Inf in v (unfused)", F_ATTENTION, BOTH, OK, NULL, NULL,
     {POISON(IN_V + 6, -INFINITY), U32(at.path, UNFUSED)}},
    {"attention +Inf in v", F_ATTENTION, BOTH, OK, NULL, NULL, {POISON(IN_V + 6, INFINITY)}},
    {"attention NaN in v at a key masked by key padding", F_ATTENTION, BOTH, OK, NULL, NULL,
     {MASK, U32(mask.kinds, KP), BYTES(mask.key_padding), POISON(IN_V + 6, NAN)}},
    {"attention causal, Lq = Lk = 70, NaN in v at key 60 (hidden from query blocks)",
     F_ATTENTION, BOTH, OK, NULL, NULL,
     {MASK, U32(mask.kinds, CAUSAL), U32(at.len_q, 70), U32(at.len_k, 70),
      POISON(IN_V + 60 * 6 + 1, NAN)}},
    {"attention causal, Lq = Lk = 70, +Inf in v at key 45 (unfused)", F_ATTENTION, BOTH, OK,
     NULL, NULL,
     {MASK, U32(mask.kinds, CAUSAL), U32(at.len_q, 70), U32(at.len_k, 70),
      U32(at.path, UNFUSED), POISON(IN_V + 45 * 6, INFINITY)}},
    {"attention NaN in the mask bias", F_ATTENTION, BOTH, OK, NULL, NULL,
     {MASK, U32(mask.kinds, BIAS), IN(mask.bias, IN_MBIAS), POISON(IN_MBIAS + 3, NAN)}},
    {"attention -Inf in the mask bias (unfused)", F_ATTENTION, BOTH, OK, NULL, NULL,
     {MASK, U32(mask.kinds, BIAS), IN(mask.bias, IN_MBIAS), U32(mask.bias_heads, 1),
      U32(at.path, UNFUSED), POISON(IN_MBIAS + 0, -INFINITY)}},
    {"attention scale +Inf", F_ATTENTION, BOTH, OK, NULL, NULL, {F32(at.scale, INFINITY)}},
    {"attention scale NaN (3 key splits)", F_ATTENTION, BOTH, OK, NULL, NULL,
     {F32(at.scale, NAN), U32(at.kv_splits, 3)}},

    /* ---- vkmha_mha_create ---- */
    {"mha_create d_k set, d_v defaulted, d_model 18 % n_head 4", F_MHA_CREATE, BOTH, INVALID,
     "desc->d_v", NULL, {U32(md.d_model, 18), U32(md.d_k, 4)}},
    {"mha_create n_kv_head 2^32 - 1", F_MHA_CREATE, BOTH, INVALID, "desc->n_kv_head", NULL,
     {U32(md.n_kv_head, MAXU)}},
    {"mha_create n_head 6 % n_kv_head 4", F_MHA_CREATE, BOTH, INVALID, "desc->n_kv_head", NULL,
     {U32(md.n_head, 6), U32(md.d_model, 24), U32(md.n_kv_head, 4)}},
    {"mha_create NULL w_q", F_MHA_CREATE, BOTH, INVALID, "desc->w_q", NULL, {NUL(md.w_q)}},
    {"mha_create NULL w_v", F_MHA_CREATE, BOTH, INVALID, "desc->w_v", NULL, {NUL(md.w_v)}},
    {"mha_create norm_beta set, post_norm false", F_MHA_CREATE, BOTH, INVALID,
     "desc->norm_beta", NULL, {U32(md.post_norm, 0), NUL(md.norm_gamma)}},
    {"mha_create norm_eps NaN", F_MHA_CREATE, BOTH, INVALID, "desc->norm_eps", NULL,
     {F32(md.norm_eps, NAN)}},
    {"mha_create norm_eps -Inf", F_MHA_CREATE, BOTH, INVALID, "desc->norm_eps", NULL,
     {F32(md.norm_eps, -INFINITY)}},
    {"mha_create w_q of (2^32 - 1)^2 elements: bytes overflow", F_MHA_CREATE, BOTH, INVALID,
     "desc->w_q", "too many elements",
     {U32(md.d_model, MAXU), U32(md.n_head, 1), U32(md.n_kv_head, 1), U32(md.d_k, MAXU),
      U32(md.d_v, 1)}},
    {"mha_create w_v rows * vdim overflows 64 bits", F_MHA_CREATE, BOTH, INVALID, "desc->w_v",
     "overflows 64 bits",
     {U32(md.d_model, 4), U32(md.n_head, MAXU), U32(md.n_kv_head, MAXU), U32(md.d_k, 1),
      U32(md.d_v, MAXU), U32(md.vdim, 4)}},
    {"mha_create w_o rows * (n_head * d_v) overflows 64 bits", F_MHA_CREATE, BOTH, INVALID,
     "desc->w_o", "overflows 64 bits",
     {U32(md.d_model, MAXU), U32(md.n_head, 4), U32(md.n_kv_head, 1), U32(md.d_k, 1),
      U32(md.d_v, MAXU), U32(md.vdim, 1)}},
    /* A weight past maxMemoryAllocationSize is kept in blocks of rows
     * (test_limits); one row past it is refused. */
    {"mha_create kdim 2^32 - 1: w_k rows of 16 GiB", F_MHA_CREATE, VK_ONLY, UNSUPP, "desc->w_k",
     "maxMemoryAllocationSize", {U32(md.kdim, MAXU)}},

    /* ---- the layer: NaN and Inf in weights and inputs (create + forward) ---- */
    {"layer NaN in w_q", F_LAYER, BOTH, OK, NULL, NULL, {POISON(IN_WQ + 17, NAN)}},
    {"layer +Inf in w_k (unfused)", F_LAYER, BOTH, OK, NULL, NULL,
     {POISON(IN_WK + 3, INFINITY), U32(io.attention_path, UNFUSED)}},
    {"layer NaN in w_v", F_LAYER, BOTH, OK, NULL, NULL, {POISON(IN_WV + 40, NAN)}},
    {"layer -Inf in w_o", F_LAYER, BOTH, OK, NULL, NULL, {POISON(IN_WO + 5, -INFINITY)}},
    {"layer NaN in b_v", F_LAYER, BOTH, OK, NULL, NULL, {POISON(IN_BV + 1, NAN)}},
    {"layer +Inf in b_q", F_LAYER, BOTH, OK, NULL, NULL, {POISON(IN_BQ + 2, INFINITY)}},
    {"layer NaN in norm_gamma", F_LAYER, BOTH, OK, NULL, NULL, {POISON(IN_GAMMA + 3, NAN)}},
    {"layer +Inf in norm_beta", F_LAYER, BOTH, OK, NULL, NULL, {POISON(IN_BETA + 0, INFINITY)}},
    {"layer NaN in the query", F_LAYER, BOTH, OK, NULL, NULL, {POISON(IN_QUERY + 20, NAN)}},
    {"layer +Inf in the key (3 key splits)", F_LAYER, BOTH, OK, NULL, NULL,
     {POISON(IN_KEY + 33, INFINITY), U32(io.kv_splits, 3)}},
    {"layer NaN in the value, causal mask", F_LAYER, BOTH, OK, NULL, NULL,
     {MASK, U32(mask.kinds, CAUSAL), POISON(IN_VALUE + 70, NAN)}},
    {"layer self-attention Lq 70, causal, NaN in input row 60 (fused blocks skip it)",
     F_LAYER, BOTH, OK, NULL, NULL,
     {MASK, U32(mask.kinds, CAUSAL), U32(io.len_q, 70), U32(io.len_k, 0),
      IN(io.key, IN_QUERY), IN(io.value, IN_QUERY), POISON(IN_QUERY + 60 * 16 + 3, NAN)}},
    {"layer -Inf in the query (unfused)", F_LAYER, BOTH, OK, NULL, NULL,
     {POISON(IN_QUERY + 1, -INFINITY), U32(io.attention_path, UNFUSED)}},

    /* ---- vkmha_mha_forward ---- */
    {"forward batch * len_q > 2^32 - 1 rows", F_FORWARD, BOTH, UNSUPP, "io->len_q", "2^32",
     {U32(io.batch, MAXU), U32(io.len_q, MAXU)}},
    {"forward batch 2 * len_k 2^32 - 1 rows", F_FORWARD, BOTH, UNSUPP, "io->len_k", "2^32",
     {U32(io.len_k, MAXU)}},
    /* With attention weights (whose heads interleave the query rows) one
     * entry is not split into rows. */
    {"forward one entry's query of (2^21 + 1) * 16 elements, weights asked for", F_FORWARD,
     VK_ONLY, UNSUPP, "io->query", "maxStorageBufferRange",
     {U32(io.batch, 1), U32(io.len_q, (1u << 21) + 1)}},
    {"forward attn_weights of 2^34 elements", F_FORWARD, VK_ONLY, UNSUPP, "io->attn_weights",
     "maxStorageBufferRange", {U32(io.batch, 1), U32(io.len_q, 65535), U32(io.len_k, 65535)}},
    /* An entry whose unfused scores are past the range runs as calls of
     * query rows (test_limits, test_context): with this layer (d_k 4) a row
     * of the key projection is always larger than a row of scores. */
    {"forward io->out overlaps io->value", F_FORWARD, BOTH, INVALID, "io->out", "overlap",
     {OUT(io.value, 7)}},
    {"forward io->attn_weights overlaps io->key", F_FORWARD, BOTH, INVALID, "io->attn_weights",
     "overlap", {OUT(io.key, 30), OUT(io.attn_weights, 0), OUT(io.out, 30000)}},
    {"forward mask bias_heads 2 (n_kv_head) with 4 heads", F_FORWARD, BOTH, INVALID,
     "mask->bias_heads", NULL,
     {MASK, U32(mask.kinds, BIAS), IN(mask.bias, IN_MBIAS), U32(mask.bias_heads, 2)}},
    {"forward mask CAUSAL | KEY_PADDING with NULL key_padding", F_FORWARD, BOTH, INVALID,
     "mask->key_padding", NULL, {MASK, U32(mask.kinds, CAUSAL | KP)}},
    {"forward attention_path 0x7fffffff", F_FORWARD, BOTH, INVALID, "io->attention_path",
     NULL, {U32(io.attention_path, 0x7fffffffu)}},
    {"forward kv_splits VKMHA_MAX_KV_SPLITS + 1", F_FORWARD, BOTH, INVALID, "io->kv_splits",
     "VKMHA_MAX_KV_SPLITS", {U32(io.kv_splits, VKMHA_MAX_KV_SPLITS + 1)}},

    /* ---- queries ---- */
    {"mha_get_desc NULL out", F_GET_DESC, BOTH, INVALID, "out", NULL, {NUL(desc_out)}},
    {"context_get_info NULL out", F_GET_INFO, BOTH, INVALID, "out", NULL, {NUL(info_out)}},
    {"context_get_kernels NULL count", F_GET_KERNELS, BOTH, INVALID, "count", NULL,
     {NUL(kernel_count)}},
    {"context_get_kernels NULL out with *count 3", F_GET_KERNELS, BOTH, INVALID, "out",
     "*count is 3", {NUL(kernels)}},

    /* ---- vkmha_context_create: debug options above the device's limits ---- */
    {"context_create debug max_workgroup_count[0] above the device's", F_CONTEXT_CREATE,
     VK_ONLY, INVALID, "desc->debug->max_workgroup_count", "[0]",
     {U32(dbg.max_workgroup_count[0], MAXU)}},
    {"context_create debug max_workgroup_count[1] above the device's", F_CONTEXT_CREATE,
     VK_ONLY, INVALID, "desc->debug->max_workgroup_count", "[1]",
     {U32(dbg.max_workgroup_count[1], MAXU)}},
    {"context_create debug max_workgroup_count[2] above the device's", F_CONTEXT_CREATE,
     VK_ONLY, INVALID, "desc->debug->max_workgroup_count", "[2]",
     {U32(dbg.max_workgroup_count[0], 1), U32(dbg.max_workgroup_count[2], MAXU)}},
    {"context_create debug max_storage_buffer_range 2^64 - 1", F_CONTEXT_CREATE, VK_ONLY,
     INVALID, "desc->debug->max_storage_buffer_range", NULL,
     {U64(dbg.max_storage_buffer_range, UINT64_MAX)}},
    {"context_create debug max_allocation_size 2^64 - 1", F_CONTEXT_CREATE, VK_ONLY, INVALID,
     "desc->debug->max_allocation_size", NULL, {U64(dbg.max_allocation_size, UINT64_MAX)}},
    {"context_create debug max_device_local_memory 2^64 - 1", F_CONTEXT_CREATE, VK_ONLY,
     INVALID, "desc->debug->max_device_local_memory", NULL,
     {U64(dbg.max_device_local_memory, UINT64_MAX)}},
    {"context_create debug max_shared_memory above the device's", F_CONTEXT_CREATE, VK_ONLY,
     INVALID, "desc->debug->max_shared_memory", NULL, {U32(dbg.max_shared_memory, MAXU)}},
    {"context_create debug fused_kernel not a vkmha_fused_kernel", F_CONTEXT_CREATE, VK_ONLY,
     INVALID, "desc->debug->fused_kernel", NULL, {U32(dbg.fused_kernel, 5)}},


    /* ---- NULL, zero and inconsistent arguments (were tests/test_errors.c's
     * calls; NULLD: the desc, io or create's out pointer NULL) ---- */
    {"matmul NULL desc", F_MATMUL, BOTH, INVALID, "desc", NULL, {NULLD}},
    {"matmul NULL a", F_MATMUL, BOTH, INVALID, "a", NULL, {NUL(a)}},
    {"matmul NULL b", F_MATMUL, BOTH, INVALID, "b", NULL, {NUL(b)}},
    {"matmul NULL c", F_MATMUL, BOTH, INVALID, "c", NULL, {NUL(c)}},
    {"matmul m 0", F_MATMUL, BOTH, INVALID, "desc->m", NULL, {U32(mm.m, 0)}},
    {"matmul n 0", F_MATMUL, BOTH, INVALID, "desc->n", NULL, {U32(mm.n, 0)}},
    {"matmul k 0", F_MATMUL, BOTH, INVALID, "desc->k", NULL, {U32(mm.k, 0)}},
    {"matmul lda 3 < k 4", F_MATMUL, BOTH, INVALID, "desc->lda", NULL, {U32(mm.lda, 3)}},
    {"matmul op_b 7", F_MATMUL, BOTH, INVALID, "desc->op_b", NULL, {U32(mm.op_b, 7)}},
    {"matmul stride_a -2 (not VKMHA_BROADCAST)", F_MATMUL, BOTH, INVALID, "desc->stride_a",
     NULL, {U32(mm.batch, 2), I64(mm.stride_a, -2)}},
    {"matmul stride_c VKMHA_BROADCAST", F_MATMUL, BOTH, INVALID, "desc->stride_c", NULL,
     {U32(mm.batch, 2), I64(mm.stride_c, VKMHA_BROADCAST)}},
    {"matmul stride_b 5 < rows * ldb 20", F_MATMUL, BOTH, INVALID, "desc->stride_b", NULL,
     {U32(mm.batch, 2), I64(mm.stride_b, 5)}},
    {"matmul c == a (4 x 4)", F_MATMUL, BOTH, INVALID, "c", "overlap",
     {U32(mm.m, 4), U32(mm.n, 4), OUT(a, 0)}},
    {"matmul c overlaps bias", F_MATMUL, BOTH, INVALID, "c", "overlap", {OUT(bias, 3)}},
    {"softmax NULL desc", F_SOFTMAX, BOTH, INVALID, "desc", NULL, {NULLD}},
    {"softmax NULL x", F_SOFTMAX, BOTH, INVALID, "x", NULL, {NUL(x)}},
    {"softmax NULL y", F_SOFTMAX, BOTH, INVALID, "y", NULL, {NUL(y)}},
    {"softmax len_q 0", F_SOFTMAX, BOTH, INVALID, "desc->len_q", NULL, {U32(sm.len_q, 0)}},
    {"softmax len_k 0", F_SOFTMAX, BOTH, INVALID, "desc->len_k", NULL, {U32(sm.len_k, 0)}},
    {"softmax y partially overlaps x", F_SOFTMAX, BOTH, INVALID, "y", "overlap",
     {OUT(x, 0), OUT(y, 1)}},
    {"softmax sizes overflow 64 bits", F_SOFTMAX, BOTH, INVALID, "len_k", "overflow",
     {U32(sm.batch, MAXU), U32(sm.heads, MAXU), U32(sm.len_q, MAXU), U32(sm.len_k, MAXU)}},
    MASK_ROWS("softmax", F_SOFTMAX),
    {"split_heads NULL desc", F_SPLIT, BOTH, INVALID, "desc", NULL, {NULLD}},
    {"split_heads NULL x", F_SPLIT, BOTH, INVALID, "x", NULL, {NUL(x)}},
    {"merge_heads NULL y", F_MERGE, BOTH, INVALID, "y", NULL, {NUL(y)}},
    {"split_heads len 0", F_SPLIT, BOTH, INVALID, "desc->len", NULL, {U32(hd.len, 0)}},
    {"merge_heads heads 0", F_MERGE, BOTH, INVALID, "desc->heads", NULL, {U32(hd.heads, 0)}},
    {"split_heads head_dim 0", F_SPLIT, BOTH, INVALID, "desc->head_dim", NULL,
     {U32(hd.head_dim, 0)}},
    {"merge_heads y == x", F_MERGE, BOTH, INVALID, "y", "overlap", {OUT(x, 0)}},
    {"split_heads sizes overflow 64 bits", F_SPLIT, BOTH, INVALID, "head_dim", "overflow",
     {U32(hd.batch, MAXU), U32(hd.len, MAXU), U32(hd.heads, MAXU), U32(hd.head_dim, MAXU)}},
    {"attention NULL desc", F_ATTENTION, BOTH, INVALID, "desc", NULL, {NULLD}},
    {"attention path 3 (not an enum value)", F_ATTENTION, BOTH, INVALID, "desc->path", NULL,
     {U32(at.path, 3)}},
    {"attention path -1", F_ATTENTION, BOTH, INVALID, "desc->path", NULL, {U32(at.path, MAXU)}},
    {"attention kv_splits above VKMHA_MAX_KV_SPLITS", F_ATTENTION, BOTH, INVALID,
     "desc->kv_splits", "VKMHA_MAX_KV_SPLITS", {U32(at.kv_splits, VKMHA_MAX_KV_SPLITS + 1)}},
    {"attention NULL q", F_ATTENTION, BOTH, INVALID, "q", NULL, {NUL(q)}},
    {"attention NULL k", F_ATTENTION, BOTH, INVALID, "k", NULL, {NUL(k)}},
    {"attention NULL v", F_ATTENTION, BOTH, INVALID, "v", NULL, {NUL(v)}},
    {"attention NULL out", F_ATTENTION, BOTH, INVALID, "out", NULL, {NUL(out)}},
    {"attention heads 0", F_ATTENTION, BOTH, INVALID, "desc->heads", NULL, {U32(at.heads, 0)}},
    {"attention len_q 0", F_ATTENTION, BOTH, INVALID, "desc->len_q", NULL, {U32(at.len_q, 0)}},
    {"attention len_k 0", F_ATTENTION, BOTH, INVALID, "desc->len_k", NULL, {U32(at.len_k, 0)}},
    {"attention d_k 0", F_ATTENTION, BOTH, INVALID, "desc->d_k", NULL, {U32(at.d_k, 0)}},
    {"attention d_v 0", F_ATTENTION, BOTH, INVALID, "desc->d_v", NULL, {U32(at.d_v, 0)}},
    {"attention heads 3 % kv_heads 2 != 0", F_ATTENTION, BOTH, INVALID, "desc->kv_heads", NULL,
     {U32(at.heads, 3), U32(at.kv_heads, 2)}},
    {"attention kv_heads 4 > heads 2", F_ATTENTION, BOTH, INVALID, "desc->kv_heads", NULL,
     {U32(at.heads, 2), U32(at.kv_heads, 4)}},
    {"attention out overlaps q", F_ATTENTION, BOTH, INVALID, "out", "overlap",
     {OUT(q, 8), NUL(weights)}},
    {"attention weights overlaps out", F_ATTENTION, BOTH, INVALID, "weights", "overlap",
     {OUT(weights, 10)}},
    {"attention sizes overflow 64 bits", F_ATTENTION, BOTH, INVALID, "q", "overflow",
     {U32(at.batch, MAXU), U32(at.len_q, MAXU), U32(at.len_k, MAXU), U32(at.d_k, MAXU),
      U32(at.heads, 1), U32(at.kv_heads, 0)}},
    MASK_ROWS("attention", F_ATTENTION),
    {"mha_create NULL out", F_MHA_CREATE, BOTH, INVALID, "out", NULL, {U32(null_out, 1)}},
    {"mha_create NULL desc", F_MHA_CREATE, BOTH, INVALID, "desc", NULL, {NULLD}},
    {"mha_create d_model 0", F_MHA_CREATE, BOTH, INVALID, "desc->d_model", NULL,
     {U32(md.d_model, 0)}},
    {"mha_create n_head 0", F_MHA_CREATE, BOTH, INVALID, "desc->n_head", NULL,
     {U32(md.n_head, 0)}},
    {"mha_create d_model 10 % n_head 4 with d_k defaulted", F_MHA_CREATE, BOTH, INVALID,
     "desc->d_model", NULL, {U32(md.d_model, 10), U32(md.n_kv_head, 0)}},
    {"mha_create n_head 4 % n_kv_head 3 != 0", F_MHA_CREATE, BOTH, INVALID, "desc->n_kv_head",
     NULL, {U32(md.n_kv_head, 3)}},
    {"mha_create n_kv_head 8 > n_head 4", F_MHA_CREATE, BOTH, INVALID, "desc->n_kv_head", NULL,
     {U32(md.n_kv_head, 8)}},
    {"mha_create NULL w_k", F_MHA_CREATE, BOTH, INVALID, "desc->w_k", NULL, {NUL(md.w_k)}},
    {"mha_create NULL w_o", F_MHA_CREATE, BOTH, INVALID, "desc->w_o", NULL, {NUL(md.w_o)}},
    {"mha_create norm_gamma set, post_norm false", F_MHA_CREATE, BOTH, INVALID,
     "desc->norm_gamma", NULL, {U32(md.post_norm, 0), NUL(md.norm_beta)}},
    {"mha_create norm_eps negative", F_MHA_CREATE, BOTH, INVALID, "desc->norm_eps", NULL,
     {F32(md.norm_eps, -1e-5)}},
    {"mha_forward NULL io", F_FORWARD, BOTH, INVALID, "io", NULL, {NULLD}},
    {"mha_forward NULL io->query", F_FORWARD, BOTH, INVALID, "io->query", NULL,
     {NUL(io.query)}},
    {"mha_forward NULL io->key", F_FORWARD, BOTH, INVALID, "io->key", NULL, {NUL(io.key)}},
    {"mha_forward NULL io->value", F_FORWARD, BOTH, INVALID, "io->value", NULL,
     {NUL(io.value)}},
    {"mha_forward NULL io->out", F_FORWARD, BOTH, INVALID, "io->out", NULL, {NUL(io.out)}},
    {"mha_forward len_q 0", F_FORWARD, BOTH, INVALID, "io->len_q", NULL, {U32(io.len_q, 0)}},
    {"mha_forward attention_path 7", F_FORWARD, BOTH, INVALID, "io->attention_path", NULL,
     {U32(io.attention_path, 7)}},
    {"mha_forward kv_splits 2^32 - 1", F_FORWARD, BOTH, INVALID, "io->kv_splits", NULL,
     {U32(io.kv_splits, MAXU)}},
    {"mha_forward io->out overlaps io->query", F_FORWARD, BOTH, INVALID, "io->out", "overlap",
     {OUT(io.query, 4)}},
    {"mha_forward io->attn_weights overlaps io->out", F_FORWARD, BOTH, INVALID,
     "io->attn_weights", "overlap", {OUT(io.attn_weights, 50)}},
    {"mha_forward mask FULL|CAUSAL with NULL full", F_FORWARD, BOTH, INVALID, "mask->full", NULL,
     {MASK, U32(mask.kinds, FULL | CAUSAL)}},
    MASK_ROWS("mha_forward", F_FORWARD),
};

/* ---- running a row ---------------------------------------------------------- */

/* The default arguments with inputs in `in`, outputs in `out` and `w`. */
static void defaults(args *a, float *in, float *out, float *w)
{
    memset(a, 0, sizeof *a);
    a->mm.m = 3, a->mm.n = 5, a->mm.k = 4;
    a->sm = (vkmha_softmax_desc){2, 2, 3, 5, 0, 0};
    a->hd = (vkmha_heads_desc){2, 3, 2, 4, 0};
    a->at = (vkmha_attention_desc){2, 4, 2, 3, 5, 4, 6, 0, 0, 0, 0};
    a->md.d_model = 16, a->md.n_head = 4, a->md.n_kv_head = 2;
    a->md.w_q = in + IN_WQ, a->md.w_k = in + IN_WK, a->md.w_v = in + IN_WV;
    a->md.w_o = in + IN_WO;
    a->md.b_q = in + IN_BQ, a->md.b_k = in + IN_BK, a->md.b_v = in + IN_BV;
    a->md.b_o = in + IN_BO;
    a->md.post_norm = true;
    a->md.norm_gamma = in + IN_GAMMA, a->md.norm_beta = in + IN_BETA;
    a->io.batch = 2, a->io.len_q = 3, a->io.len_k = 5;
    a->io.query = in + IN_QUERY, a->io.key = in + IN_KEY, a->io.value = in + IN_VALUE;
    a->io.out = out, a->io.attn_weights = w;
    a->a = in + IN_A, a->b = in + IN_B, a->bias = in + IN_BIAS, a->x = in + IN_X;
    a->q = in + IN_Q, a->k = in + IN_K, a->v = in + IN_V;
    a->c = a->y = a->out = out;
    a->weights = w;
}

typedef struct poisoned {
    uint64_t idx;
    float old;
} poisoned;

/* Applies the row's changes; returns how many inputs it poisoned (into p). */
static int apply(args *a, const row *r, poisoned p[8])
{
    int n = 0;
    for (int i = 0; i < 10 && r->changes[i].type != T_END; i++) {
        const change *c = &r->changes[i];
        char *f = (char *)a + c->off;
        switch (c->type) {
        case T_U32: {
            uint32_t v = (uint32_t)c->u;
            memcpy(f, &v, sizeof v);
            break;
        }
        case T_I64: {
            int64_t v = (int64_t)c->u;
            memcpy(f, &v, sizeof v);
            break;
        }
        case T_U64:
            memcpy(f, &c->u, sizeof c->u);
            break;
        case T_F32: {
            float v = (float)c->f;
            memcpy(f, &v, sizeof v);
            break;
        }
        case T_NULL: {
            void *v = NULL;
            memcpy(f, &v, sizeof v);
            break;
        }
        case T_IN:
        case T_OUT:
        case T_BYTES:
        case T_MASK: {
            void *v = c->type == T_IN      ? (void *)(g_in + c->u)
                      : c->type == T_OUT   ? (void *)(g_out + c->u)
                      : c->type == T_BYTES ? (void *)g_bytes
                                           : (void *)&a->mask;
            memcpy(f, &v, sizeof v);
            break;
        }
        default: /* T_POISON */
            p[n].idx = c->u;
            p[n++].old = g_in[c->u];
            g_in[c->u] = (float)c->f;
            break;
        }
    }
    a->io.mask = a->p_mask;
    return n;
}

/* The outputs a successful call of `fn` writes, in elements. */
static void output_sizes(int fn, const args *a, const vkmha_mha_desc *md, size_t *n_out,
                         size_t *n_w)
{
    const uint64_t batch = a->mm.batch ? a->mm.batch : 1;
    *n_w = 0;
    switch (fn) {
    case F_MATMUL:
        *n_out = (size_t)(batch * a->mm.m * a->mm.n);
        break;
    case F_SOFTMAX:
        *n_out = (size_t)a->sm.batch * a->sm.heads * a->sm.len_q * a->sm.len_k;
        break;
    case F_SPLIT:
    case F_MERGE:
        *n_out = (size_t)a->hd.batch * a->hd.len * a->hd.heads * a->hd.head_dim;
        break;
    case F_ATTENTION:
        *n_out = (size_t)a->at.batch * a->at.heads * a->at.len_q * a->at.d_v;
        *n_w = (size_t)a->at.batch * a->at.heads * a->at.len_q * a->at.len_k;
        break;
    default: /* the layer */
        *n_out = (size_t)a->io.batch * a->io.len_q * md->d_model;
        *n_w = (size_t)a->io.batch * md->n_head * a->io.len_q *
               (a->io.len_k ? a->io.len_k : a->io.len_q);
        break;
    }
}

/* Calls the row's function on ctx (with `layer`, the context's valid layer,
 * for forward and get_desc). msg receives the message to check. */
static vkmha_status call(int fn, args *a, vkmha_context *ctx, vkmha_mha *layer,
                         vkmha_backend backend, char *msg, size_t cap)
{
    vkmha_status st;
    vkmha_mha *m = NULL;
    vkmha_mha_desc got_desc;
    vkmha_context_info info;
    vkmha_kernel_info kernels[3];
    switch (fn) {
    case F_MATMUL:
        st = vkmha_matmul(ctx, a->null_desc ? NULL : &a->mm, a->a, a->b, a->bias, a->c);
        break;
    case F_SOFTMAX:
        st = vkmha_softmax(ctx, a->null_desc ? NULL : &a->sm, a->x, a->p_mask, a->y);
        break;
    case F_SPLIT:
        st = vkmha_split_heads(ctx, a->null_desc ? NULL : &a->hd, a->x, a->y);
        break;
    case F_MERGE:
        st = vkmha_merge_heads(ctx, a->null_desc ? NULL : &a->hd, a->x, a->y);
        break;
    case F_ATTENTION:
        st = vkmha_attention(ctx, a->null_desc ? NULL : &a->at, a->q, a->k, a->v, a->p_mask,
                             a->out, a->weights);
        break;
    case F_MHA_CREATE:
    case F_LAYER:
        m = (vkmha_mha *)(uintptr_t)1;
        st = vkmha_mha_create(ctx, a->null_desc ? NULL : &a->md, a->null_out ? NULL : &m);
        if (st == VKMHA_SUCCESS && fn == F_LAYER)
            st = vkmha_mha_forward(m, &a->io);
        if (st != VKMHA_SUCCESS && fn == F_MHA_CREATE && m != NULL && !a->null_out) {
            snprintf(msg, cap, "vkmha_mha_create failed but wrote a handle");
            return VKMHA_ERROR_VULKAN;
        }
        if (m != (vkmha_mha *)(uintptr_t)1)
            vkmha_mha_destroy(m);
        break;
    case F_FORWARD:
        st = vkmha_mha_forward(layer, a->null_desc ? NULL : &a->io);
        break;
    case F_GET_DESC:
        a->desc_out = a->desc_out ? &got_desc : NULL;
        st = vkmha_mha_get_desc(layer, a->desc_out);
        break;
    case F_GET_INFO:
        a->info_out = a->info_out ? &info : NULL;
        st = vkmha_context_get_info(ctx, a->info_out);
        break;
    case F_GET_KERNELS:
        a->kernel_count = a->kernel_count ? &a->kernel_capacity : NULL;
        a->kernels = a->kernels ? kernels : NULL;
        st = vkmha_context_get_kernels(ctx, a->kernel_count, a->kernels);
        break;
    default: { /* F_CONTEXT_CREATE */
        t_log_capture c = {0};
        vkmha_context_desc cd = {0};
        vkmha_context *made = (vkmha_context *)(uintptr_t)1;
        cd.backend = backend;
        cd.debug = &a->dbg;
        cd.log = t_capture_log;
        cd.log_user = &c;
        st = vkmha_context_create(&cd, &made);
        snprintf(msg, cap, "%s", made == NULL ? c.msg : "*out was not set to NULL");
        if (st == VKMHA_SUCCESS && made)
            vkmha_context_destroy(made);
        return st;
    }
    }
    snprintf(msg, cap, "%s", vkmha_context_last_error(ctx));
    return st;
}

static void fill_sentinels(void)
{
    t_fill(g_out, POOL, SENTINEL);
    t_fill(g_w, POOL, SENTINEL);
}

static bool untouched(void)
{
    return t_untouched(g_out, POOL, SENTINEL, NULL) && t_untouched(g_w, POOL, SENTINEL, NULL);
}

/* One row on one backend; ref_done: the reference ran this row first and its
 * outputs are in g_ref_out / g_ref_w. */
static bool run_row(const row *r, vkmha_context *ctx, vkmha_mha *layer, vkmha_backend backend,
                    const char *name, bool compare)
{
    args a;
    poisoned p[8];
    char msg[1024] = "";
    bool ok = true;
    if (r->where == VK_ONLY)
        defaults(&a, (float *)g_far, (float *)(g_far + FAR_SPAN),
                 (float *)(g_far + 2 * FAR_SPAN));
    else
        defaults(&a, g_in, g_out, g_w);
    a.desc_out = (vkmha_mha_desc *)(uintptr_t)1; /* non-NULL: call() points it */
    a.info_out = (vkmha_context_info *)(uintptr_t)1;
    a.kernel_capacity = 3;
    a.kernel_count = &a.kernel_capacity;
    a.kernels = (vkmha_kernel_info *)(uintptr_t)1;
    int n_poison = apply(&a, r, p);
    fill_sentinels();
    vkmha_status st = call(r->fn, &a, ctx, layer, backend, msg, sizeof msg);
    for (int i = n_poison - 1; i >= 0; i--)
        g_in[p[i].idx] = p[i].old;
    if (st != r->want) {
        t_diag("%s: returned %s, expected %s (\"%s\")", name, vkmha_status_string(st),
               vkmha_status_string(r->want), msg);
        ok = false;
    }
    if (r->want == VKMHA_SUCCESS) {
        size_t n_out, n_w;
        vkmha_mha_desc md = a.md;
        output_sizes(r->fn, &a, &md, &n_out, &n_w);
        if (ok && !compare) { /* the reference: keep its outputs */
            memcpy(g_ref_out, g_out, n_out * sizeof(float));
            memcpy(g_ref_w, g_w, n_w * sizeof(float));
        } else if (ok) {
            g_compared = n_out + n_w;
            g_nonfinite = 0;
            for (size_t i = 0; i < n_out + n_w; i++)
                g_nonfinite += !isfinite(i < n_out ? g_ref_out[i] : g_ref_w[i - n_out]);
            ok = t_close(name, "out", g_out, g_ref_out, n_out, T_LAYER_ATOL, T_LAYER_RTOL) &&
                 t_close(name, "weights", g_w, g_ref_w, n_w, T_LAYER_ATOL, T_LAYER_RTOL);
        }
        return ok;
    }
    if (!t_message_names(name, msg, fn_names[r->fn], r->arg, r->extra))
        ok = false;
    if (r->where == BOTH && !untouched()) {
        t_diag("%s: an output was written", name);
        ok = false;
    }
    if (r->fn != F_CONTEXT_CREATE && !t_context_works(ctx, name))
        ok = false;
    return ok;
}

int main(void)
{
    t_rng rng = {1234};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    /* The rows' refusals are sized for a 128 MiB maxStorageBufferRange and a
     * 2 GiB maxMemoryAllocationSize (lavapipe's): a device with more (4 GiB
     * of range on NVIDIA) is lowered to them, else a row sized for a refusal
     * would run and read past the host arrays. */
    vkmha_context *gpu = t_context_limited(RANGE, ALLOCATION, NULL, NULL);
    g_in = t_random(&rng, POOL, -1, 1);
    g_out = t_alloc(POOL);
    g_w = t_alloc(POOL);
    g_ref_out = t_alloc(POOL);
    g_ref_w = t_alloc(POOL);
    for (size_t i = 0; i < sizeof g_bytes; i++)
        g_bytes[i] = (uint8_t)(i % 3 != 1); /* every third key masked */
    for (size_t i = 0; i < 1000; i++) /* the layer's weights: torch init scale */
        g_in[IN_WQ + i] *= 0.25f, g_in[IN_WK + i] *= 0.25f, g_in[IN_WV + i] *= 0.25f,
            g_in[IN_WO + i] *= 0.25f;

#ifdef _WIN32
    g_far = VirtualAlloc(NULL, 3 * FAR_SPAN, MEM_RESERVE, PAGE_NOACCESS);
    if (!g_far) {
#else
    g_far = mmap(NULL, 3 * FAR_SPAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
    if (g_far == MAP_FAILED) {
#endif
        printf("Bail out! cannot reserve %zu bytes of address space\n", 3 * FAR_SPAN);
        return 1;
    }
    args d;
    defaults(&d, g_in, g_out, g_w);
    vkmha_mha *layer_ref = NULL, *layer_gpu = NULL;
    if (vkmha_mha_create(ref, &d.md, &layer_ref) || vkmha_mha_create(gpu, &d.md, &layer_gpu)) {
        printf("Bail out! cannot create the default layer: %s / %s\n",
               vkmha_context_last_error(ref), vkmha_context_last_error(gpu));
        return 1;
    }

    /* The default layers' forward before every row, to compare after them. */
    vkmha_mha *layers[2] = {layer_ref, layer_gpu};
    const size_t n_fwd = (size_t)d.io.batch * d.io.len_q * d.md.d_model;
    float *before[2], *after[2];
    for (int i = 0; i < 2; i++) {
        before[i] = t_alloc(n_fwd), after[i] = t_alloc(n_fwd);
        vkmha_mha_io io = d.io;
        io.out = before[i], io.attn_weights = NULL;
        if (vkmha_mha_forward(layers[i], &io)) {
            printf("Bail out! the default layer's forward: %s\n",
                   vkmha_context_last_error(i ? gpu : ref));
            return 1;
        }
    }

    int tried = 0;
    const size_t n_rows = sizeof rows / sizeof rows[0];
    for (size_t i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        char name[256];
        bool ok = true;
        if (r->where == BOTH) {
            snprintf(name, sizeof name, "reference: %s", r->label);
            ok = run_row(r, ref, layer_ref, VKMHA_BACKEND_REFERENCE, name, false);
            tried++;
        }
        snprintf(name, sizeof name, "vulkan: %s", r->label);
        bool compare = r->where == BOTH;
        if (r->want == VKMHA_SUCCESS && !compare) {
            t_diag("%s: a success row must run on both backends", r->label);
            ok = false;
        }
        ok = run_row(r, gpu, layer_gpu, VKMHA_BACKEND_VULKAN, name, compare) && ok;
        tried++;
        if (r->want == VKMHA_SUCCESS)
            t_report(ok, "%s: NaN and Inf where the reference has them (%zu of %zu outputs)",
                     r->label, g_nonfinite, g_compared);
        else
            t_report(ok, "%s [%s]", r->label, r->where == BOTH ? "both backends" : "vulkan");
    }
    t_diag("bad-input table: %zu rows, %d calls (rows on both backends count twice)", n_rows,
           tried);

    /* The layers created before the rows compute the same forward after
     * them: the same backend before and after within 1e-6 + 1e-6 |ref| (the
     * same computation, expected bit-identical); Vulkan against the
     * reference within 1e-4 + 1e-4 |ref| (fp32 against double accumulation
     * through two projections, attention and LayerNorm over d_model 16). */
    bool same = true;
    for (int i = 0; i < 2; i++) {
        vkmha_mha_io io = d.io;
        io.out = after[i], io.attn_weights = NULL;
        same = vkmha_mha_forward(layers[i], &io) == VKMHA_SUCCESS &&
               t_close(i ? "vulkan layer" : "reference layer", "out after the rows vs before",
                       after[i], before[i], n_fwd, 1e-6, 1e-6) &&
               same;
    }
    same = t_close("layer after the rows", "vulkan out vs reference", after[1], after[0], n_fwd,
                   1e-4, 1e-4) &&
           same;
    t_report(same, "a layer created before the rows gives the same forward after them (vulkan "
                   "vs reference atol 1e-4 rtol 1e-4)");
    for (int i = 0; i < 2; i++)
        free(before[i]), free(after[i]);

    vkmha_mha_destroy(layer_ref);
    vkmha_mha_destroy(layer_gpu);
    free(g_in), free(g_out), free(g_w), free(g_ref_out), free(g_ref_w);
#ifdef _WIN32
    VirtualFree(g_far, 0, MEM_RELEASE);
#else
    munmap(g_far, 3 * FAR_SPAN);
#endif
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
    vkmha_context_destroy(ref);
    return t_finish();
}
