/* Argument checking shared by both backends: every public op goes through
 * here before a backend sees it, so bad input gets the same status and message
 * on Vulkan and on the reference, and the backends only handle resolved,
 * valid shapes. */
#include "internal.h"

#include <float.h>
#include <math.h>

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT

bool vkmha__overlap(const void *a, uint64_t an, const void *b, uint64_t bn)
{
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    if (!a || !b || an == 0 || bn == 0)
        return false;
    return pa < pb + bn && pb < pa + an;
}

/* Host arrays must not overlap; tensors are checked by src/tensor.c (their
 * pointers are handles, not memory). */
static bool overlaps(const vkmha_context *ctx, const void *a, uint64_t an, const void *b,
                     uint64_t bn)
{
    return !ctx->tensor_call && vkmha__overlap(a, an, b, bn);
}

vkmha_status vkmha__check_count(vkmha_context *ctx, const char *fn, const char *what,
                                uint64_t n, uint64_t size, uint64_t *bytes)
{
    /* Host arrays must be addressable: n * size < SIZE_MAX. */
    if (!vkmha__mul_u64(n, size, bytes) || *bytes > (uint64_t)(SIZE_MAX / 2))
        return vkmha__fail(ctx, INVALID, "%s: %s has too many elements (%llu)", fn, what,
                           (unsigned long long)n);
    return VKMHA_SUCCESS;
}

/* Overflow-checked product of up to 4 factors. */
static bool product(uint64_t *out, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return vkmha__mul_u64(a, b, out) && vkmha__mul_u64(*out, c, out) &&
           vkmha__mul_u64(*out, d, out);
}

/* Resolves one matrix's row stride `ld` (0: packed) against its row length. */
static vkmha_status resolve_ld(vkmha_context *ctx, const char *name, uint32_t ld,
                               uint32_t cols, const char *cols_name, uint32_t *out)
{
    if (ld == 0)
        ld = cols;
    if (ld < cols)
        return vkmha__fail(ctx, INVALID, "%s: desc->%s (%u) is less than %s (%u)", ctx->call,
                           name, ld, cols_name, cols);
    *out = ld;
    return VKMHA_SUCCESS;
}

/* Resolves a batch stride (0: packed, VKMHA_BROADCAST: 0) and the array's
 * extent in elements: (batch - 1) * stride + (rows - 1) * ld + cols. */
static vkmha_status resolve_batch(vkmha_context *ctx, const char *name, int64_t stride,
                                  bool may_broadcast, uint32_t batch, uint32_t rows,
                                  uint32_t ld, uint32_t cols, uint64_t *stride_out,
                                  uint64_t *extent)
{
    uint64_t matrix = (uint64_t)(rows - 1) * ld + cols, s, tail;
    uint64_t packed = (uint64_t)rows * ld;
    if (stride == 0) {
        s = packed;
    } else if (stride == VKMHA_BROADCAST && may_broadcast) {
        s = 0;
    } else if (stride < 0) {
        return vkmha__fail(ctx, INVALID,
                           "%s: desc->%s (%lld) is negative%s", ctx->call, name,
                           (long long)stride,
                           may_broadcast ? " and not VKMHA_BROADCAST" : "");
    } else if ((uint64_t)stride < packed && batch > 1) {
        return vkmha__fail(ctx, INVALID,
                           "%s: desc->%s (%lld) is less than rows * ld (%llu): "
                           "batch entries would overlap", ctx->call,
                           name, (long long)stride, (unsigned long long)packed);
    } else {
        s = (uint64_t)stride;
    }
    if (!vkmha__mul_u64(s, batch - 1, &tail) || tail > UINT64_MAX - matrix)
        return vkmha__fail(ctx, INVALID, "%s: desc->%s times batch overflows", ctx->call,
                           name);
    *stride_out = s;
    *extent = tail + matrix;
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__check_dtype(vkmha_context *ctx, const char *what, uint32_t dtype)
{
    if (dtype != VKMHA_DTYPE_F32 && dtype != VKMHA_DTYPE_F16 && dtype != VKMHA_DTYPE_BF16)
        return vkmha__fail(ctx, INVALID, "%s: %s (%u) is not a float vkmha_dtype (F32, F16 or BF16)",
                           ctx->call, what, dtype);
    return VKMHA_SUCCESS;
}

/* The host arrays' dtype field of an op's desc: checked for host arrays,
 * ignored (F32 sizes) for tensors, which carry their own. */
static vkmha_status check_desc_dtype(vkmha_context *ctx, uint32_t dtype, uint32_t *out,
                                     uint64_t *size)
{
    vkmha_status st;
    if (ctx->tensor_call)
        dtype = VKMHA_DTYPE_F32;
    else if ((st = vkmha__check_dtype(ctx, "desc->dtype", dtype)))
        return st;
    *out = dtype;
    *size = vkmha__dtype_size(dtype);
    return VKMHA_SUCCESS;
}

/* A quantized B (desc->b_quant): one matrix [b_rows][b_cols] of op(B)'s
 * layout, its groups along b_cols, packed; into s->quant_b, layout_b and
 * extent_b (bytes). Without one, b_group_size must be 0. */
static vkmha_status check_quant_b(vkmha_context *ctx, const vkmha_matmul_desc *desc,
                                  mm_shape *s)
{
    const uint32_t g = desc->b_group_size, b_cols = s->trans_b ? s->k : s->n;
    if (!desc->b_quant) {
        if (g)
            return vkmha__fail(ctx, INVALID, "%s: desc->b_group_size (%u) is set but "
                               "desc->b_quant is 0 (B not quantized)", ctx->call, g);
        return VKMHA_SUCCESS;
    }
    if (desc->b_quant > VKMHA_QUANT_Q4Z)
        return vkmha__fail(ctx, INVALID, "%s: desc->b_quant (%u) is not a vkmha_quant_type",
                           ctx->call, desc->b_quant);
    if (!vkmha__quant_group_ok(g))
        return vkmha__fail(ctx, INVALID, "%s: desc->b_group_size (%u) is not 32, 64 or 128",
                           ctx->call, g);
    if (b_cols % g)
        return vkmha__fail(ctx, INVALID, "%s: desc->%s (%u) is not a multiple of "
                           "desc->b_group_size (%u): a quantized b's groups run along %s",
                           ctx->call, s->trans_b ? "k" : "n", b_cols, g,
                           s->trans_b ? "k (op T)" : "n (op N)");
    if (desc->ldb && desc->ldb != b_cols)
        return vkmha__fail(ctx, INVALID, "%s: desc->ldb (%u) must be 0 with a quantized b "
                           "(its rows are packed)", ctx->call, desc->ldb);
    if (desc->stride_b != VKMHA_BROADCAST && (desc->stride_b != 0 || s->batch > 1))
        return vkmha__fail(ctx, INVALID, "%s: desc->stride_b (%lld) must be VKMHA_BROADCAST "
                           "with a quantized b (or 0 with batch 1): one matrix for every "
                           "product", ctx->call, (long long)desc->stride_b);
    s->quant_b = (vkmha_quant_desc){.type = desc->b_quant, .group_size = g,
                                    .rows = s->trans_b ? s->n : s->k, .cols = b_cols};
    s->layout_b = vkmha__quant_layout(&s->quant_b);
    s->sb = 0;
    s->extent_b = s->layout_b.bytes;
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__check_matmul(vkmha_context *ctx, const vkmha_matmul_desc *desc,
                                 const void *a, const void *b, const void *bias,
                                 const void *c, mm_shape *out)
{
    vkmha_status st;
    uint64_t bytes_a, bytes_b, bytes_c;
    mm_shape s = {0};
    if (!desc)
        return vkmha__fail(ctx, INVALID, "%s: desc is NULL", ctx->call);
    if (!a || !b || !c)
        return vkmha__fail(ctx, INVALID, "%s: %s is NULL", ctx->call,
                           !a ? "a" : !b ? "b" : "c");
    if (desc->m == 0 || desc->n == 0 || desc->k == 0)
        return vkmha__fail(ctx, INVALID, "%s: desc->%s is 0 (must be >= 1)", ctx->call,
                           desc->m == 0 ? "m" : desc->n == 0 ? "n" : "k");
    if (desc->op_b != VKMHA_OP_N && desc->op_b != VKMHA_OP_T)
        return vkmha__fail(ctx, INVALID, "%s: desc->op_b (%d) is not a vkmha_op", ctx->call,
                           (int)desc->op_b);
    s.batch = desc->batch ? desc->batch : 1;
    s.m = desc->m;
    s.n = desc->n;
    s.k = desc->k;
    s.trans_b = desc->op_b == VKMHA_OP_T;
    s.alpha = desc->alpha != 0.0f ? desc->alpha : 1.0f;
    uint64_t es;
    if ((st = check_desc_dtype(ctx, desc->dtype, &s.dtype, &es)))
        return st;

    uint32_t b_rows = s.trans_b ? s.n : s.k, b_cols = s.trans_b ? s.k : s.n;
    if ((st = resolve_ld(ctx, "lda", desc->lda, s.k, "k", &s.lda)) ||
        (st = resolve_ld(ctx, "ldb", desc->ldb, b_cols, s.trans_b ? "k" : "n", &s.ldb)) ||
        (st = resolve_ld(ctx, "ldc", desc->ldc, s.n, "n", &s.ldc)))
        return st;
    if ((st = resolve_batch(ctx, "stride_a", desc->stride_a, true, s.batch, s.m, s.lda,
                            s.k, &s.sa, &s.extent_a)) ||
        (!desc->b_quant &&
         (st = resolve_batch(ctx, "stride_b", desc->stride_b, true, s.batch, b_rows,
                             s.ldb, b_cols, &s.sb, &s.extent_b))) ||
        (st = check_quant_b(ctx, desc, &s)) ||
        (st = resolve_batch(ctx, "stride_c", desc->stride_c, false, s.batch, s.m, s.ldc,
                            s.n, &s.sc, &s.extent_c)))
        return st;
    if ((st = vkmha__check_count(ctx, ctx->call, "a", s.extent_a, es, &bytes_a)) ||
        (st = vkmha__check_count(ctx, ctx->call, "b", s.extent_b,
                                 s.quant_b.type ? 1 : es, &bytes_b)) ||
        (st = vkmha__check_count(ctx, ctx->call, "c", s.extent_c, es, &bytes_c)))
        return st;
    if (overlaps(ctx, c, bytes_c, a, bytes_a) || overlaps(ctx, c, bytes_c, b, bytes_b) ||
        overlaps(ctx, c, bytes_c, bias, (uint64_t)s.n * es))
        return vkmha__fail(ctx, INVALID, "%s: c overlaps %s", ctx->call,
                           overlaps(ctx, c, bytes_c, a, bytes_a)   ? "a"
                           : overlaps(ctx, c, bytes_c, b, bytes_b) ? "b"
                                                                    : "bias");
    *out = s;
    return VKMHA_SUCCESS;
}

/* A mask's [heads] fp32 array (NULL: absent): every value finite. */
static vkmha_status check_head_values(vkmha_context *ctx, const char *fn, const float *v,
                                      uint32_t heads, const char *field)
{
    for (uint32_t h = 0; v && h < heads; h++)
        if (!isfinite(v[h]))
            return vkmha__fail(ctx, INVALID, "%s: mask->%s[%u] is %g (must be finite)", fn,
                               field, h, (double)v[h]);
    return VKMHA_SUCCESS;
}

static vkmha_status check_mask_pointer(vkmha_context *ctx, const char *fn, uint32_t kinds,
                                       uint32_t kind, const void *p, const char *field,
                                       const char *kind_name)
{
    if ((kinds & kind) && !p)
        return vkmha__fail(ctx, INVALID, "%s: mask->%s is NULL but mask->kinds has %s", fn,
                           field, kind_name);
    if (!(kinds & kind) && p)
        return vkmha__fail(ctx, INVALID,
                           "%s: mask->%s is set but mask->kinds lacks %s (wrong mask kind?)",
                           fn, field, kind_name);
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__mask_place(vkmha_context *ctx, const char *fn, mask_r *m, int64_t off,
                               uint32_t len_q, uint32_t len_k)
{
    const uint32_t positioned = VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW | VKMHA_MASK_ALIBI;
    if (!(m->kinds & positioned))
        return VKMHA_SUCCESS;
    if (m->kinds & (VKMHA_MASK_WINDOW | VKMHA_MASK_ALIBI)) {
        /* Positions are distances here: not clamped, but kept where the
         * shaders' int arithmetic holds them. */
        const int64_t far = (off < 0 ? -off : off) + (int64_t)len_q + len_k;
        if (far >= INT64_C(1) << 31)
            return vkmha__fail(ctx, INVALID,
                               "%s: mask->causal_offset (%lld after a KV cache's alignment) "
                               "puts query positions past 2^31 - len_k",
                               fn, (long long)off);
    } else {
        /* Shifted first (a KV cache's alignment), then clamped: an offset
         * of len_k or more hides nothing and one of -len_q or less hides
         * every key of every row, so the shaders' signed arithmetic stays
         * below 2^31 in magnitude. */
        off = off > (int64_t)len_k ? (int64_t)len_k
              : off < -(int64_t)len_q ? -(int64_t)len_q
                                      : off;
    }
    m->causal_offset = (uint32_t)(int32_t)off;
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__check_mask(vkmha_context *ctx, const char *fn, const vkmha_mask *mask,
                               uint32_t batch, uint32_t heads, uint32_t len_q,
                               uint32_t len_k, int64_t causal_shift, mask_r *out)
{
    const uint32_t known = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_FULL | VKMHA_MASK_CAUSAL |
                           VKMHA_MASK_BIAS | VKMHA_MASK_WINDOW | VKMHA_MASK_ALIBI |
                           VKMHA_MASK_SOFTCAP | VKMHA_MASK_SINKS;
    /* The kinds that place the queries at key positions (pos_i). */
    const uint32_t positioned = VKMHA_MASK_CAUSAL | VKMHA_MASK_WINDOW | VKMHA_MASK_ALIBI;
    vkmha_status st;
    uint64_t n, bytes;
    mask_r m = {0};
    if (!mask) {
        *out = m;
        return VKMHA_SUCCESS;
    }
    if (mask->kinds & ~known)
        return vkmha__fail(ctx, INVALID, "%s: mask->kinds has unknown bits 0x%x", fn,
                           mask->kinds & ~known);
    if ((st = check_mask_pointer(ctx, fn, mask->kinds, VKMHA_MASK_KEY_PADDING,
                                 mask->key_padding, "key_padding", "VKMHA_MASK_KEY_PADDING")) ||
        (st = check_mask_pointer(ctx, fn, mask->kinds, VKMHA_MASK_FULL, mask->full, "full",
                                 "VKMHA_MASK_FULL")) ||
        (st = check_mask_pointer(ctx, fn, mask->kinds, VKMHA_MASK_BIAS, mask->bias, "bias",
                                 "VKMHA_MASK_BIAS")) ||
        (st = check_mask_pointer(ctx, fn, mask->kinds, VKMHA_MASK_ALIBI, mask->alibi, "alibi",
                                 "VKMHA_MASK_ALIBI")) ||
        (st = check_mask_pointer(ctx, fn, mask->kinds, VKMHA_MASK_SINKS, mask->sinks, "sinks",
                                 "VKMHA_MASK_SINKS")))
        return st;
    if (mask->causal_offset && !(mask->kinds & positioned))
        return vkmha__fail(ctx, INVALID,
                           "%s: mask->causal_offset is %u but mask->kinds lacks "
                           "VKMHA_MASK_CAUSAL, VKMHA_MASK_WINDOW and VKMHA_MASK_ALIBI "
                           "(wrong mask kind?)",
                           fn, mask->causal_offset);
    if ((mask->kinds & VKMHA_MASK_WINDOW) ? mask->window == 0 : mask->window != 0)
        return vkmha__fail(ctx, INVALID, "%s: mask->window is %u %s VKMHA_MASK_WINDOW", fn,
                           mask->window, mask->window ? "but mask->kinds lacks" : "with");
    if ((mask->kinds & VKMHA_MASK_SOFTCAP)
            ? !(mask->softcap > 0.0f && mask->softcap <= FLT_MAX)
            : mask->softcap != 0.0f)
        return vkmha__fail(ctx, INVALID, "%s: mask->softcap is %g %s", fn,
                           (double)mask->softcap,
                           (mask->kinds & VKMHA_MASK_SOFTCAP)
                               ? "(must be finite and > 0 with VKMHA_MASK_SOFTCAP)"
                               : "but mask->kinds lacks VKMHA_MASK_SOFTCAP");
    m = *mask;
    if ((st = vkmha__mask_place(ctx, fn, &m, (int64_t)m.causal_offset + causal_shift, len_q,
                                len_k)))
        return st;
    /* Wider than every distance: the same as 2^31 - 1, which the shaders'
     * ints hold. */
    if (m.window > INT32_MAX)
        m.window = INT32_MAX;
    if (m.kinds & VKMHA_MASK_FULL) {
        if (!product(&n, batch, len_q, len_k, 1))
            return vkmha__fail(ctx, INVALID, "%s: mask->full [batch][len_q][len_k] overflows",
                               fn);
        if ((st = vkmha__check_count(ctx, fn, "mask->full", n, 1, &bytes)))
            return st;
    }
    if (m.kinds & VKMHA_MASK_BIAS) {
        m.bias_batch = m.bias_batch ? m.bias_batch : batch;
        m.bias_heads = m.bias_heads ? m.bias_heads : heads;
        if (m.bias_batch != 1 && m.bias_batch != batch)
            return vkmha__fail(ctx, INVALID, "%s: mask->bias_batch (%u) is neither 1 nor batch (%u)",
                               fn, m.bias_batch, batch);
        if (m.bias_heads != 1 && m.bias_heads != heads)
            return vkmha__fail(ctx, INVALID, "%s: mask->bias_heads (%u) is neither 1 nor heads (%u)",
                               fn, m.bias_heads, heads);
        if (!product(&n, m.bias_batch, m.bias_heads, len_q, len_k))
            return vkmha__fail(ctx, INVALID, "%s: mask->bias size overflows", fn);
        if ((st = vkmha__check_count(ctx, fn, "mask->bias", n, 4, &bytes)))
            return st;
    } else {
        m.bias_batch = m.bias_heads = 0;
    }
    /* The per-head values last: no array is read before every size is
     * known good. */
    if ((st = check_head_values(ctx, fn, m.alibi, heads, "alibi")) ||
        (st = check_head_values(ctx, fn, m.sinks, heads, "sinks")))
        return st;
    *out = m;
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__check_softmax(vkmha_context *ctx, const vkmha_softmax_desc *desc,
                                  const void *x, const void *y, sm_shape *out)
{
    vkmha_status st;
    uint64_t n, bytes, es;
    sm_shape s;
    if (!desc)
        return vkmha__fail(ctx, INVALID, "%s: desc is NULL", ctx->call);
    if (!x || !y)
        return vkmha__fail(ctx, INVALID, "%s: %s is NULL", ctx->call, !x ? "x" : "y");
    if (desc->len_q == 0 || desc->len_k == 0)
        return vkmha__fail(ctx, INVALID, "%s: desc->%s is 0 (must be >= 1)", ctx->call,
                           desc->len_q == 0 ? "len_q" : "len_k");
    s.batch = desc->batch ? desc->batch : 1;
    s.heads = desc->heads ? desc->heads : 1;
    s.len_q = desc->len_q;
    s.len_k = desc->len_k;
    s.scale = desc->scale != 0.0f ? desc->scale : 1.0f;
    if ((st = check_desc_dtype(ctx, desc->dtype, &s.dtype, &es)))
        return st;
    if (!product(&n, s.batch, s.heads, s.len_q, s.len_k))
        return vkmha__fail(ctx, INVALID, "%s: batch * heads * len_q * len_k overflows", ctx->call);
    if ((st = vkmha__check_count(ctx, ctx->call, "x", n, es, &bytes)))
        return st;
    if (x != y && overlaps(ctx, x, bytes, y, bytes))
        return vkmha__fail(ctx, INVALID, "%s: y overlaps x without being equal to it", ctx->call);
    *out = s;
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__check_heads(vkmha_context *ctx, const char *fn,
                                const vkmha_heads_desc *desc, const void *x,
                                const void *y, heads_shape *out)
{
    vkmha_status st;
    uint64_t n, bytes, es;
    heads_shape s = {0};
    if (!desc)
        return vkmha__fail(ctx, INVALID, "%s: desc is NULL", fn);
    if (!x || !y)
        return vkmha__fail(ctx, INVALID, "%s: %s is NULL", fn, !x ? "x" : "y");
    if (desc->len == 0 || desc->heads == 0 || desc->head_dim == 0)
        return vkmha__fail(ctx, INVALID, "%s: desc->%s is 0 (must be >= 1)", fn,
                           desc->len == 0 ? "len" : desc->heads == 0 ? "heads" : "head_dim");
    s.batch = desc->batch ? desc->batch : 1;
    s.len = desc->len;
    s.heads = desc->heads;
    s.head_dim = desc->head_dim;
    if ((st = check_desc_dtype(ctx, desc->dtype, &s.dtype, &es)))
        return st;
    if (!product(&n, s.batch, s.len, s.heads, s.head_dim))
        return vkmha__fail(ctx, INVALID, "%s: batch * len * heads * head_dim overflows", fn);
    if ((st = vkmha__check_count(ctx, fn, "x", n, es, &bytes)))
        return st;
    if (overlaps(ctx, x, bytes, y, bytes))
        return vkmha__fail(ctx, INVALID, "%s: y overlaps x", fn);
    *out = s;
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__check_path(vkmha_context *ctx, const char *fn, const char *path_name,
                               const char *splits_name, vkmha_attention_path path,
                               uint32_t kv_splits, attn_shape *s)
{
    if (path != VKMHA_ATTENTION_PATH_AUTO && path != VKMHA_ATTENTION_PATH_FUSED &&
        path != VKMHA_ATTENTION_PATH_UNFUSED)
        return vkmha__fail(ctx, INVALID,
                           "%s: %s (%d) is not a vkmha_attention_path (AUTO, FUSED or UNFUSED)",
                           fn, path_name, (int)path);
    if (kv_splits > VKMHA_MAX_KV_SPLITS)
        return vkmha__fail(ctx, INVALID, "%s: %s (%u) is more than VKMHA_MAX_KV_SPLITS (%u)",
                           fn, splits_name, kv_splits, VKMHA_MAX_KV_SPLITS);
    s->path = path;
    s->kv_splits = kv_splits < s->len_k ? kv_splits : s->len_k;
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__check_attention(vkmha_context *ctx, const vkmha_attention_desc *desc,
                                    const void *q, const void *k, const void *v,
                                    const void *out, const void *weights,
                                    attn_shape *shape)
{
    const char *fn = ctx->call;
    vkmha_status st;
    uint64_t nq, nk, nv, no, nw, bq, bk, bv, bo, bw = 0, es;
    attn_shape s = {0};
    if (!desc)
        return vkmha__fail(ctx, INVALID, "%s: desc is NULL", fn);
    if (!q || !k || !v || !out)
        return vkmha__fail(ctx, INVALID, "%s: %s is NULL", fn,
                           !q ? "q" : !k ? "k" : !v ? "v" : "out");
    if (desc->heads == 0 || desc->len_q == 0 || desc->len_k == 0 || desc->d_k == 0 ||
        desc->d_v == 0)
        return vkmha__fail(ctx, INVALID, "%s: desc->%s is 0 (must be >= 1)", fn,
                           desc->heads == 0   ? "heads"
                           : desc->len_q == 0 ? "len_q"
                           : desc->len_k == 0 ? "len_k"
                           : desc->d_k == 0   ? "d_k"
                                              : "d_v");
    s.batch = desc->batch ? desc->batch : 1;
    s.heads = desc->heads;
    s.kv_heads = desc->kv_heads ? desc->kv_heads : desc->heads;
    if (s.kv_heads > s.heads || s.heads % s.kv_heads != 0)
        return vkmha__fail(ctx, INVALID, "%s: desc->heads (%u) is not a multiple of "
                           "desc->kv_heads (%u)", fn, s.heads, s.kv_heads);
    s.len_q = desc->len_q;
    s.len_k = desc->len_k;
    s.d_k = desc->d_k;
    s.d_v = desc->d_v;
    s.scale = desc->scale != 0.0f ? desc->scale : (float)(1.0 / sqrt((double)s.d_k));
    if ((st = check_desc_dtype(ctx, desc->dtype, &s.dtype, &es)))
        return st;
    if ((st = vkmha__check_path(ctx, fn, "desc->path", "desc->kv_splits", desc->path,
                                desc->kv_splits, &s)))
        return st;
    if (!product(&nq, s.batch, s.heads, s.len_q, s.d_k))
        return vkmha__fail(ctx, INVALID, "%s: q is too large: batch * heads * len_q * d_k overflow 64 bits", fn);
    if (!product(&nk, s.batch, s.kv_heads, s.len_k, s.d_k))
        return vkmha__fail(ctx, INVALID, "%s: k is too large: batch * kv_heads * len_k * d_k overflow 64 bits", fn);
    if (!product(&nv, s.batch, s.kv_heads, s.len_k, s.d_v))
        return vkmha__fail(ctx, INVALID, "%s: v is too large: batch * kv_heads * len_k * d_v overflow 64 bits", fn);
    if (!product(&no, s.batch, s.heads, s.len_q, s.d_v))
        return vkmha__fail(ctx, INVALID, "%s: out is too large: batch * heads * len_q * d_v overflow 64 bits", fn);
    if (!product(&nw, s.batch, s.heads, s.len_q, s.len_k))
        return vkmha__fail(ctx, INVALID,
                           "%s: weights is too large: batch * heads * len_q * len_k overflow 64 bits", fn);
    if ((st = vkmha__check_count(ctx, fn, "q", nq, es, &bq)) ||
        (st = vkmha__check_count(ctx, fn, "k", nk, es, &bk)) ||
        (st = vkmha__check_count(ctx, fn, "v", nv, es, &bv)) ||
        (st = vkmha__check_count(ctx, fn, "out", no, es, &bo)) ||
        (weights && (st = vkmha__check_count(ctx, fn, "weights", nw, es, &bw))))
        return st;
    const void *in[3] = {q, k, v};
    const uint64_t in_bytes[3] = {bq, bk, bv};
    const char *in_name[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        if (overlaps(ctx, out, bo, in[i], in_bytes[i]))
            return vkmha__fail(ctx, INVALID, "%s: out overlaps %s", fn, in_name[i]);
        if (overlaps(ctx, weights, bw, in[i], in_bytes[i]))
            return vkmha__fail(ctx, INVALID, "%s: weights overlaps %s", fn, in_name[i]);
    }
    if (overlaps(ctx, out, bo, weights, bw))
        return vkmha__fail(ctx, INVALID, "%s: weights overlaps out", fn);
    *shape = s;
    return VKMHA_SUCCESS;
}
