/* libFuzzer harness over the argument checking of every public entry point,
 * on the reference backend (fast, no device). The input bytes choose the
 * function, every desc field, which pointers are NULL, masks, paths and the
 * values in the arrays (NaN and Inf included).
 *
 * Arrays: from the documented shapes (include/vkmha.h) the harness computes
 * the elements each non-NULL array must hold, with overflow checks:
 *   - small enough (at most CAP elements each, and a bounded amount of
 *     arithmetic): exactly that many are allocated, so AddressSanitizer
 *     catches any access past them, and the call runs;
 *   - not addressable (the count or its bytes overflow 64 bits, or the bytes
 *     exceed SIZE_MAX / 2): one-element arrays are passed, and the call must
 *     fail (a success would have read or written past them);
 *   - addressable but large: not called (a real caller would need the
 *     memory).
 * What must hold for every call: the status is a vkmha_status; a failure on
 * a context leaves a last-error message that starts with "vkmha_"; no crash,
 * no undefined behaviour, no leak (the sanitizers). A failed check traps.
 *
 * File parsers get their own target when they come (the pipeline cache
 * header). Build: meson setup build-fuzz -Dfuzzing=true (clang); run:
 * tests/fuzz/run-fuzz or build-fuzz/tests/fuzz/fuzz_api tests/fuzz/corpus. */
#include "vkmha.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP 4096u        /* elements per array */
#define WORK_CAP 200000u /* multiply-adds per call */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static vkmha_context *g_ref;

/* ---- reading the input ------------------------------------------------------ */

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t u8(reader *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

static uint32_t u32raw(reader *r)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | u8(r);
    return v;
}

/* A size: small values most often, then values at the edges of 16, 31, 32
 * and 63 bits, or any 32-bit value. */
static uint32_t size_field(reader *r)
{
    static const uint32_t edges[16] = {0, 1, 2, 3, 255, 256, 65535, 65536, 0x7fffffffu,
                                       0x80000000u, 0xfffffffeu, 0xffffffffu, 1u << 20,
                                       1u << 30, 4097, 1024};
    uint8_t b = u8(r);
    switch (b >> 6) {
    case 0:
    case 1:
        return b & 15;
    case 2:
        return edges[b & 15];
    default:
        return u32raw(r);
    }
}

static int64_t stride_field(reader *r)
{
    uint8_t b = u8(r);
    switch (b & 7) {
    case 0:
    case 1:
    case 2:
        return 0;
    case 3:
        return VKMHA_BROADCAST;
    case 4:
        return (int64_t)(b >> 3);
    case 5:
        return -(int64_t)(b >> 3) - 2;
    case 6:
        return (int64_t)1 << (b >> 3);
    default:
        return (int64_t)(((uint64_t)u32raw(r) << 32) | u32raw(r));
    }
}

static float scalar_field(reader *r)
{
    static const float vals[8] = {0.0f, 1.0f, -1.0f, 0.125f, 1e30f, -0.0f, 3.0f, 1e-30f};
    uint8_t b = u8(r);
    if (b == 254)
        return NAN;
    if (b == 255)
        return INFINITY;
    return vals[b & 7];
}

/* ---- arrays ------------------------------------------------------------------ */

/* The class of a call's arrays: see the top of the file. */
typedef enum { FITS, UNADDRESSABLE, TOO_LARGE } fit;

typedef struct sizer {
    fit worst;
} sizer;

/* Records an array of `n` elements of `elem` bytes (ok false: n overflowed). */
static void need(sizer *s, bool ok, uint64_t n, uint64_t elem)
{
    fit f = FITS;
    if (!ok || n > (uint64_t)(SIZE_MAX / 2) / elem)
        f = UNADDRESSABLE;
    else if (n > CAP)
        f = TOO_LARGE;
    if (f == UNADDRESSABLE || (f == TOO_LARGE && s->worst == FITS))
        s->worst = f;
}

/* a * b * c * d with overflow detection. */
static bool mul4(uint64_t *out, uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return !__builtin_mul_overflow(a, b, out) && !__builtin_mul_overflow(*out, c, out) &&
           !__builtin_mul_overflow(*out, d, out);
}

/* An array for the call: n elements (1 when the call is unaddressable),
 * values from the input (NaN and Inf among them). NULL if `present` is
 * false. Freed by pool_free. */
typedef struct pool {
    void *p[32];
    int n;
} pool;

static void *array(pool *pl, bool present, fit f, uint64_t n, size_t elem, reader *r)
{
    if (!present)
        return NULL;
    size_t count = f == FITS ? (size_t)(n ? n : 1) : 1;
    uint8_t *p = malloc(count * elem);
    if (!p)
        abort(); /* the harness's own memory: at most CAP elements */
    uint8_t seed = u8(r);
    for (size_t i = 0; i < count * elem; i += elem) {
        if (elem == 1) {
            p[i] = (uint8_t)((i * seed) >> 3 & 1);
            continue;
        }
        float v = (float)(int)((i / elem * (seed | 1)) % 7) - 3.0f;
        if (seed == 0xfe && i == 0)
            v = NAN;
        if (seed == 0xff && i == 0)
            v = -INFINITY;
        if (elem == 2) { /* F16 or BF16: the same bits serve as either, any value is fine */
            uint32_t bits;
            memcpy(&bits, &v, sizeof bits);
            const uint16_t h = (uint16_t)(bits >> 16);
            memcpy(p + i, &h, sizeof h);
            continue;
        }
        memcpy(p + i, &v, sizeof v);
    }
    pl->p[pl->n++] = p;
    return p;
}

/* Frees the arrays allocated after the first `keep`. */
static void pool_free(pool *pl, int keep)
{
    while (pl->n > keep)
        free(pl->p[--pl->n]);
}

/* ---- the checks ----------------------------------------------------------------- */

static void check(vkmha_context *ctx, vkmha_status st, fit f)
{
    if (st != VKMHA_SUCCESS && st != VKMHA_ERROR_INVALID_ARGUMENT &&
        st != VKMHA_ERROR_UNSUPPORTED && st != VKMHA_ERROR_NO_DEVICE &&
        st != VKMHA_ERROR_OUT_OF_HOST_MEMORY && st != VKMHA_ERROR_OUT_OF_DEVICE_MEMORY &&
        st != VKMHA_ERROR_DEVICE_LOST && st != VKMHA_ERROR_VULKAN) {
        fprintf(stderr, "status %d is not a vkmha_status\n", (int)st);
        __builtin_trap();
    }
    if (f == UNADDRESSABLE && st == VKMHA_SUCCESS) {
        fprintf(stderr, "a call with unaddressable arrays succeeded\n");
        __builtin_trap();
    }
    if (ctx && st != VKMHA_SUCCESS) {
        const char *msg = vkmha_context_last_error(ctx);
        if (!msg || strncmp(msg, "vkmha_", 6) != 0) {
            fprintf(stderr, "failure without a vkmha_ message: \"%s\"\n", msg ? msg : "(NULL)");
            __builtin_trap();
        }
    }
    if (ctx && st == VKMHA_SUCCESS && vkmha_context_last_error(ctx)[0] != '\0') {
        fprintf(stderr, "success with a last error: \"%s\"\n", vkmha_context_last_error(ctx));
        __builtin_trap();
    }
}

/* A mask for [batch][heads][len_q][len_k] scores, or NULL; its arrays join
 * the sizer. */
static const vkmha_mask *mask_field(reader *r, vkmha_mask *m, uint32_t batch, uint32_t heads,
                                    uint32_t len_q, uint32_t len_k, sizer *sz, uint8_t *flags)
{
    uint8_t b = u8(r);
    if (!(b & 1))
        return NULL;
    memset(m, 0, sizeof *m);
    m->kinds = b >> 1 & 15;
    if (b & 0x20)
        m->kinds |= 1u << (u8(r) & 31); /* perhaps an unknown bit */
    *flags = u8(r); /* which arrays are given, independently of the kinds */
    m->bias_batch = u8(r) & 3;
    m->bias_heads = u8(r) & 3;
    if (b & 0x40) /* perhaps without VKMHA_MASK_CAUSAL, perhaps past len_k */
        m->causal_offset = b & 0x80 ? u32raw(r) : u8(r);
    /* The score rules: window, ALiBi, soft cap, sinks, each perhaps without
     * its field or with a bad one. */
    const uint8_t e = u8(r);
    static const float caps[8] = {0.0f, 2.5f, 50.0f, -1.0f, NAN, INFINITY, 1e-30f, 3e38f};
    m->kinds |= (uint32_t)(e & 15) << 4;
    if (e & 0x10)
        m->window = e & 0x20 ? u32raw(r) : u8(r);
    m->softcap = caps[(e >> 6) & 3 ? (u8(r) & 7) : 0];
    uint64_t n;
    const uint32_t bb = m->bias_batch ? m->bias_batch : batch;
    const uint32_t bh = m->bias_heads ? m->bias_heads : heads;
    if (*flags & 1)
        need(sz, mul4(&n, batch, len_k, 1, 1), n, 1);
    if (*flags & 2)
        need(sz, mul4(&n, batch, len_q, len_k, 1), n, 1);
    if (*flags & 4)
        need(sz, mul4(&n, bb, bh, len_q, len_k), n, 4);
    if (*flags & 8)
        need(sz, true, heads, 4);
    if (*flags & 16)
        need(sz, true, heads, 4);
    return m;
}

static void mask_arrays(pool *pl, vkmha_mask *m, uint8_t flags, fit f, uint32_t batch,
                        uint32_t heads, uint32_t len_q, uint32_t len_k, reader *r)
{
    const uint32_t bb = m->bias_batch ? m->bias_batch : batch;
    const uint32_t bh = m->bias_heads ? m->bias_heads : heads;
    m->key_padding = array(pl, flags & 1, f, (uint64_t)batch * len_k, 1, r);
    m->full = array(pl, flags & 2, f, (uint64_t)batch * len_q * len_k, 1, r);
    m->bias = array(pl, flags & 4, f, (uint64_t)bb * bh * len_q * len_k, 4, r);
    m->alibi = array(pl, flags & 8, f, heads, 4, r);
    m->sinks = array(pl, flags & 16, f, heads, 4, r);
}

/* A float dtype field: mostly F32, else F16, BF16, or one the library must
 * reject (U8, an unknown value), which makes the call fail before any array
 * is read. *elem: the bytes of one element. */
static uint32_t dtype_field(reader *r, sizer *sz, uint64_t *elem)
{
    static const uint32_t values[8] = {VKMHA_DTYPE_F32, VKMHA_DTYPE_F32, VKMHA_DTYPE_F32,
                                       VKMHA_DTYPE_F32, VKMHA_DTYPE_F16, VKMHA_DTYPE_BF16,
                                       VKMHA_DTYPE_U8,  200};
    const uint32_t dt = values[u8(r) & 7];
    *elem = dt == VKMHA_DTYPE_F32 ? 4 : 2;
    if (dt == VKMHA_DTYPE_U8 || dt == 200)
        sz->worst = UNADDRESSABLE;
    return dt;
}

/* ---- the entry points ------------------------------------------------------------- */

static void fuzz_matmul(reader *r, pool *pl, uint8_t ptrs)
{
    vkmha_matmul_desc d = {0};
    d.batch = size_field(r), d.m = size_field(r), d.n = size_field(r), d.k = size_field(r);
    d.op_b = (vkmha_op)(u8(r) % 3);
    d.alpha = scalar_field(r);
    d.lda = size_field(r), d.ldb = size_field(r), d.ldc = size_field(r);
    d.stride_a = stride_field(r), d.stride_b = stride_field(r), d.stride_c = stride_field(r);
    /* Extents as documented: (batch - 1) * stride + (rows - 1) * ld + cols. */
    const bool t = d.op_b == VKMHA_OP_T;
    const uint64_t batch = d.batch ? d.batch : 1;
    const uint64_t rows[3] = {d.m, t ? d.n : d.k, d.m}, cols[3] = {d.k, t ? d.k : d.n, d.n};
    const uint32_t lds[3] = {d.lda, d.ldb, d.ldc};
    const int64_t strides[3] = {d.stride_a, d.stride_b, d.stride_c};
    sizer sz = {FITS};
    uint64_t ext[3], es;
    d.dtype = dtype_field(r, &sz, &es);
    /* Perhaps a quantized B: a type (4 unknown; 0 with a group size, which
     * must fail), a group size (48 must fail). */
    const uint8_t qb = u8(r);
    static const uint32_t groups[4] = {32, 64, 128, 48};
    if (qb & 1)
        d.b_quant = (qb >> 1) % 5, d.b_group_size = groups[qb >> 4 & 3];
    bool shape_ok = d.m && d.n && d.k;
    uint64_t es_b = es;
    if (qb & 1) {
        const uint32_t g = d.b_group_size;
        const bool valid = d.b_quant >= 1 && d.b_quant <= 3 && g != 48 && cols[1] % g == 0 &&
                           (!d.ldb || d.ldb == cols[1]) &&
                           (d.stride_b == VKMHA_BROADCAST || (d.stride_b == 0 && batch == 1));
        shape_ok = shape_ok && valid;
        uint64_t values, groups_n;
        /* The header's layout: codes, fp16 scales, Q4Z's zeros, each
         * plane's end rounded up to 16. */
        const bool ok = mul4(&values, rows[1], cols[1], 1, 1);
        values = d.b_quant == VKMHA_QUANT_Q8 ? values : values / 2;
        groups_n = ok ? rows[1] * (cols[1] / g) : 0;
        uint64_t end = values + 2 * groups_n;
        if (d.b_quant == VKMHA_QUANT_Q4Z)
            end = (end + 15) / 16 * 16 + groups_n;
        ext[1] = (end + 15) / 16 * 16;
        if (shape_ok)
            need(&sz, ok, ext[1], 1);
        es_b = 1;
    }
    for (int i = 0; i < 3 && shape_ok; i++) {
        if (i == 1 && (qb & 1))
            continue; /* sized above */
        uint64_t ld = lds[i] ? lds[i] : cols[i], s, tail, e = 0;
        s = strides[i] == 0 ? rows[i] * ld : strides[i] == VKMHA_BROADCAST ? 0 : (uint64_t)strides[i];
        if (strides[i] < 0 && strides[i] != VKMHA_BROADCAST) {
            shape_ok = false; /* invalid: the library rejects it before sizes */
            break;
        }
        bool ok = !__builtin_mul_overflow(s, batch - 1, &tail) &&
                  !__builtin_add_overflow(tail, (rows[i] - 1) * ld + cols[i], &e);
        need(&sz, ok, e, es);
        ext[i] = e;
    }
    if (!shape_ok) /* a size 0 or a negative stride: must fail */
        sz.worst = UNADDRESSABLE, ext[0] = ext[1] = ext[2] = 1;
    if (ptrs & 4)
        need(&sz, true, d.n, es); /* bias */
    uint64_t work;
    if (sz.worst == FITS && shape_ok &&
        (!mul4(&work, batch, d.m, d.n, d.k) || work > WORK_CAP))
        sz.worst = TOO_LARGE;
    if (sz.worst == TOO_LARGE)
        return;
    const void *a = array(pl, ptrs & 1, sz.worst, ext[0], es, r);
    const void *b = array(pl, ptrs & 2, sz.worst, ext[1], es_b, r);
    const void *bias = array(pl, ptrs & 4, sz.worst, d.n, es, r);
    void *c = array(pl, ptrs & 8, sz.worst, ext[2], es, r);
    check(g_ref, vkmha_matmul(g_ref, (ptrs & 16) ? NULL : &d, a, b, bias, c), sz.worst);
}

static void fuzz_softmax(reader *r, pool *pl, uint8_t ptrs)
{
    vkmha_softmax_desc d = {size_field(r), size_field(r), size_field(r), size_field(r),
                            scalar_field(r), 0};
    const uint32_t b = d.batch ? d.batch : 1, h = d.heads ? d.heads : 1;
    sizer sz = {FITS};
    uint64_t n, es;
    d.dtype = dtype_field(r, &sz, &es);
    need(&sz, mul4(&n, b, h, d.len_q, d.len_k), n, es);
    vkmha_mask m;
    uint8_t mf = 0;
    const vkmha_mask *mask = mask_field(r, &m, b, h, d.len_q, d.len_k, &sz, &mf);
    if (sz.worst == TOO_LARGE)
        return;
    if (mask)
        mask_arrays(pl, &m, mf, sz.worst, b, h, d.len_q, d.len_k, r);
    const void *x = array(pl, ptrs & 1, sz.worst, n, es, r);
    void *y = (ptrs & 4) ? (void *)(uintptr_t)x : array(pl, ptrs & 2, sz.worst, n, es, r);
    check(g_ref, vkmha_softmax(g_ref, (ptrs & 16) ? NULL : &d, x, mask, y), sz.worst);
}

static void fuzz_heads(reader *r, pool *pl, uint8_t ptrs, bool split)
{
    vkmha_heads_desc d = {size_field(r), size_field(r), size_field(r), size_field(r), 0};
    sizer sz = {FITS};
    uint64_t n, es;
    d.dtype = dtype_field(r, &sz, &es);
    need(&sz, mul4(&n, d.batch ? d.batch : 1, d.len, d.heads, d.head_dim), n, es);
    if (sz.worst == TOO_LARGE)
        return;
    const void *x = array(pl, ptrs & 1, sz.worst, n, es, r);
    void *y = array(pl, ptrs & 2, sz.worst, n, es, r);
    const vkmha_heads_desc *dp = (ptrs & 16) ? NULL : &d;
    check(g_ref, split ? vkmha_split_heads(g_ref, dp, x, y) : vkmha_merge_heads(g_ref, dp, x, y),
          sz.worst);
}

static void fuzz_attention(reader *r, pool *pl, uint8_t ptrs)
{
    vkmha_attention_desc d = {0};
    d.batch = size_field(r), d.heads = size_field(r), d.kv_heads = size_field(r);
    d.len_q = size_field(r), d.len_k = size_field(r), d.d_k = size_field(r);
    d.d_v = size_field(r);
    d.scale = scalar_field(r);
    d.path = (vkmha_attention_path)(u8(r) % 4);
    d.kv_splits = size_field(r);
    const uint32_t b = d.batch ? d.batch : 1, hkv = d.kv_heads ? d.kv_heads : d.heads;
    sizer sz = {FITS};
    uint64_t nq, nk, nv, no, nw = 0, work, es;
    d.dtype = dtype_field(r, &sz, &es);
    need(&sz, mul4(&nq, b, d.heads, d.len_q, d.d_k), nq, es);
    need(&sz, mul4(&nk, b, hkv, d.len_k, d.d_k), nk, es);
    need(&sz, mul4(&nv, b, hkv, d.len_k, d.d_v), nv, es);
    need(&sz, mul4(&no, b, d.heads, d.len_q, d.d_v), no, es);
    if (ptrs & 32)
        need(&sz, mul4(&nw, b, d.heads, d.len_q, d.len_k), nw, es);
    vkmha_mask m;
    uint8_t mf = 0;
    const vkmha_mask *mask = mask_field(r, &m, b, d.heads, d.len_q, d.len_k, &sz, &mf);
    if (sz.worst == FITS && (!mul4(&work, b, d.heads, d.len_q, d.len_k) ||
                             !mul4(&work, work, (uint64_t)d.d_k + d.d_v, 1, 1) ||
                             work > WORK_CAP))
        sz.worst = TOO_LARGE;
    if (sz.worst == TOO_LARGE)
        return;
    if (mask)
        mask_arrays(pl, &m, mf, sz.worst, b, d.heads, d.len_q, d.len_k, r);
    const void *q = array(pl, ptrs & 1, sz.worst, nq, es, r);
    const void *k = array(pl, ptrs & 2, sz.worst, nk, es, r);
    const void *v = array(pl, ptrs & 4, sz.worst, nv, es, r);
    void *out = array(pl, ptrs & 8, sz.worst, no, es, r);
    void *w = array(pl, ptrs & 32, sz.worst, nw, es, r);
    check(g_ref,
          vkmha_attention(g_ref, (ptrs & 16) ? NULL : &d, q, k, v, mask, out, w), sz.worst);
}

/* vkmha_mha_create, then (if it worked) get_desc and forwards. */
static void fuzz_layer(reader *r, pool *pl, uint8_t ptrs)
{
    vkmha_mha_desc d = {0};
    d.d_model = size_field(r), d.n_head = size_field(r), d.n_kv_head = size_field(r);
    d.d_k = size_field(r), d.d_v = size_field(r), d.kdim = size_field(r);
    d.vdim = size_field(r);
    d.scale = scalar_field(r);
    d.norm_eps = scalar_field(r);
    uint8_t opt = u8(r);
    d.post_norm = opt & 1;
    if (opt & 0x20) { /* a head shard, perhaps a bad range */
        d.head_begin = u8(r) & 15;
        d.head_end = u8(r) & 15;
    }
    if (opt & 0x10) { /* RoPE, perhaps odd, past d_k, a bad base or scale */
        d.rope_dims = u8(r) & 31;
        d.rope_theta = scalar_field(r);
        d.rope_scale = scalar_field(r);
        d.rope_layout = u8(r) & 3;
    }
    /* The documented weight shapes (defaults as the header gives them; a
     * d_model not divisible by n_head leaves d_k 0, which the library
     * rejects, and sizes nothing here). */
    const uint64_t H = d.n_head, Hkv = d.n_kv_head ? d.n_kv_head : d.n_head;
    const uint64_t dk = d.d_k ? d.d_k : (H ? d.d_model / H : 0);
    const uint64_t dv = d.d_v ? d.d_v : (H ? d.d_model / H : 0);
    const uint64_t kdim = d.kdim ? d.kdim : d.d_model, vdim = d.vdim ? d.vdim : d.d_model;
    sizer sz = {FITS};
    uint64_t n[10], es, storage_es;
    d.weight_dtype = dtype_field(r, &sz, &es);
    d.storage_dtype = dtype_field(r, &sz, &storage_es);
    need(&sz, mul4(&n[0], H, dk, d.d_model, 1), n[0], es);
    need(&sz, mul4(&n[1], Hkv, dk, kdim, 1), n[1], es);
    need(&sz, mul4(&n[2], Hkv, dv, vdim, 1), n[2], es);
    need(&sz, mul4(&n[3], d.d_model, H, dv, 1), n[3], es);
    n[4] = H * dk, n[5] = Hkv * dk, n[6] = Hkv * dv, n[7] = n[8] = n[9] = d.d_model;
    for (int i = 4; i < 10; i++)
        need(&sz, true, n[i], es);
    if (sz.worst == TOO_LARGE)
        return;
    const void **w[10] = {&d.w_q, &d.w_k, &d.w_v, &d.w_o, &d.b_q, &d.b_k, &d.b_v, &d.b_o,
                           &d.norm_gamma, &d.norm_beta};
    for (int i = 0; i < 10; i++) {
        bool present = i < 4 ? (ptrs >> i & 1) : i < 8 ? (opt >> 1 & 1) : (opt >> (i - 6) & 1);
        *w[i] = array(pl, present, i < 4 ? sz.worst : sz.worst == FITS ? FITS : UNADDRESSABLE,
                      n[i], es, r);
    }
    vkmha_mha *mha = (vkmha_mha *)(uintptr_t)1;
    vkmha_status st = vkmha_mha_create(g_ref, (ptrs & 16) ? NULL : &d, (ptrs & 32) ? NULL : &mha);
    check(g_ref, st, sz.worst);
    if (st != VKMHA_SUCCESS) {
        if (!(ptrs & 32) && mha != NULL) {
            fprintf(stderr, "vkmha_mha_create failed without writing NULL\n");
            __builtin_trap();
        }
        return;
    }
    vkmha_mha_desc got;
    check(g_ref, vkmha_mha_get_desc(mha, (opt & 0x80) ? NULL : &got), FITS);

    /* Perhaps a KV cache of fuzzed batch, capacity, dtype and quant (tiny:
     * its tensors are allocated; a Q8 one's forwards run its rows), and its
     * operations. */
    vkmha_kv_cache *cache = NULL;
    if (opt & 0x40) {
        vkmha_kv_cache_desc cd = {.batch = u8(r) & 7, .capacity = u8(r) & 31};
        uint64_t ces;
        sizer cs = {FITS};
        cd.dtype = dtype_field(r, &cs, &ces);
        const uint8_t quant = u8(r);
        cd.quant = quant & 0x80 ? quant & 7 : VKMHA_QUANT_NONE; /* Q8, the others, junk */
        check(g_ref, vkmha_kv_cache_create(mha, &cd, &cache), cs.worst);
        uint32_t src[8];
        for (int i = 0; i < 8; i++)
            src[i] = u8(r) & 7;
        const uint8_t op = u8(r);
        if (cache && (op & 1))
            check(g_ref, vkmha_kv_cache_truncate(cache, op & 2 ? VKMHA_ALL_ENTRIES : u8(r) & 7,
                                                 u8(r) & 31),
                  FITS);
        if (cache && (op & 4))
            check(g_ref, vkmha_kv_cache_reorder(cache, src), FITS);
    }

    /* Forwards on the layer. */
    const int keep = pl->n; /* the weights */
    for (int f = 0; f < 2 && r->n; f++, pool_free(pl, keep)) {
        vkmha_mha_io io = {0};
        io.batch = size_field(r), io.len_q = size_field(r), io.len_k = size_field(r);
        if (cache) {
            io.kv_cache = cache;
            io.kv_entry = u8(r) & 7;
        }
        io.attention_path = (vkmha_attention_path)(u8(r) % 4);
        io.kv_splits = size_field(r);
        uint8_t io_ptrs = u8(r);
        /* RoPE's positions (bit 0; any bits, 2^31 and past too), perhaps
         * for a layer without RoPE. */
        const uint8_t pos_ptr = (opt & 0x10) ? u8(r) : 0;
        const uint64_t B = io.batch ? io.batch : 1, Lk = io.len_k ? io.len_k : io.len_q;
        /* A mixed batch's counts (bit 0, up to 8 entries; any counts, or
         * with bit 1 the last one making them add up to len_q): its arrays
         * are packed rows, len_q of them (R, else B per token). */
        uint32_t tokens[8];
        const uint8_t tok = cache ? u8(r) : 0;
        if ((tok & 1) && B <= 8) {
            uint64_t sum = 0;
            for (uint64_t b = 0; b < B; b++)
                sum += tokens[b] = u8(r) & 7;
            if ((tok & 2) && sum - tokens[B - 1] < io.len_q)
                tokens[B - 1] = (uint32_t)(io.len_q - (sum - tokens[B - 1]));
            io.entry_tokens = tokens;
        }
        const uint64_t R = io.entry_tokens ? 1 : B;
        sizer fs = {FITS};
        uint64_t nq, nk, nv, nw = 0, work[2], ies;
        io.dtype = dtype_field(r, &fs, &ies);
        need(&fs, mul4(&nq, R, io.len_q, d.d_model, 1), nq, ies);
        need(&fs, mul4(&nk, R, Lk, kdim, 1), nk, ies);
        need(&fs, mul4(&nv, R, Lk, vdim, 1), nv, ies);
        uint64_t npos = 0;
        if (pos_ptr & 1)
            need(&fs, mul4(&npos, R, io.len_q, 1, 1), npos, 4);
        /* With a cache the attention's key axis is its longest entry after
         * the append (key and value absent: no append); a bad entry range
         * is refused before any array is read. */
        uint64_t Lkv = Lk;
        const bool no_append = cache && (io_ptrs & 128);
        if (cache) {
            uint32_t len = 0;
            Lkv = 0;
            for (uint64_t b = 0; b < B && B <= 8; b++)
                if (vkmha_kv_cache_get_lengths(cache, io.kv_entry + (uint32_t)b, 1, &len) ==
                    VKMHA_SUCCESS)
                    Lkv = len + (no_append ? 0 : Lk) > Lkv ? len + (no_append ? 0 : Lk) : Lkv;
        }
        if (io_ptrs & 32)
            need(&fs, mul4(&nw, B, H, io.len_q, Lkv), nw, ies);
        vkmha_mask m;
        uint8_t mf = 0;
        io.mask = mask_field(r, &m, (uint32_t)B, d.n_head, io.len_q, (uint32_t)Lkv, &fs, &mf);
        /* Rows beyond 2^32 are refused before any array is read. */
        if (R * io.len_q > UINT32_MAX || R * Lk > UINT32_MAX)
            fs.worst = UNADDRESSABLE;
        /* Work: the projections (rows x weight elements) and the attention. */
        if (fs.worst == FITS &&
            (!mul4(&work[0], B, (uint64_t)io.len_q * (n[0] + n[3]) + Lk * (n[1] + n[2]), 1, 1) ||
             !mul4(&work[1], B * H, io.len_q, Lk, dk + dv) || work[0] > 4 * WORK_CAP ||
             work[1] > WORK_CAP))
            fs.worst = TOO_LARGE;
        /* Self-attention with one pointer: that array must hold each. */
        if ((io_ptrs & 64) && fs.worst == FITS && (nk > nq || nv > nq))
            fs.worst = TOO_LARGE;
        if (fs.worst == TOO_LARGE)
            continue;
        if (io.mask)
            mask_arrays(pl, &m, mf, fs.worst, (uint32_t)B, d.n_head, io.len_q, (uint32_t)Lkv, r);
        io.query = array(pl, io_ptrs & 1, fs.worst, nq, ies, r);
        io.key = (io_ptrs & 64) ? io.query : array(pl, io_ptrs & 2, fs.worst, nk, ies, r);
        io.value = (io_ptrs & 64) ? io.query : array(pl, io_ptrs & 4, fs.worst, nv, ies, r);
        io.out = array(pl, io_ptrs & 8, fs.worst, nq, ies, r);
        io.attn_weights = array(pl, io_ptrs & 32, fs.worst, nw, ies, r);
        io.positions = array(pl, pos_ptr & 1, fs.worst, npos, 4, r);
        if (no_append)
            io.key = io.value = NULL;
        check(g_ref, vkmha_mha_forward(mha, (io_ptrs & 16) ? NULL : &io), fs.worst);
    }
    vkmha_kv_cache_destroy(cache);
    vkmha_mha_destroy(mha);
}

/* vkmha_context_create without a device: the reference backend, invalid
 * backends and flags, a NULL out. */
/* Quantized weights: vkmha_quant_layout_of, vkmha_quantize and
 * vkmha_dequantize with fuzzed descs (types, group sizes, sizes), dtypes,
 * buffer sizes around the layout's and NULL pointers. A desc the layout
 * refuses must fail the other two; the arrays are sized from the layout
 * where it exists (dst and src bytes: the layout's, or one byte short). */
static void fuzz_quant(reader *r, pool *pl, uint8_t ptrs)
{
    static const uint32_t groups[8] = {32, 64, 128, 32, 0, 16, 96, 0xffffffffu};
    vkmha_quant_desc d = {0};
    d.type = u8(r) % 5;
    d.group_size = groups[u8(r) & 7];
    d.rows = size_field(r), d.cols = size_field(r);
    vkmha_quant_layout l = {0};
    const vkmha_quant_desc *dp = (ptrs & 16) ? NULL : &d;
    const vkmha_status st = vkmha_quant_layout_of(g_ref, dp, (ptrs & 32) ? NULL : &l);
    check(g_ref, st, FITS);
    sizer sz = {FITS};
    uint64_t es, n;
    const uint32_t dt = dtype_field(r, &sz, &es);
    need(&sz, mul4(&n, d.rows, d.cols, 1, 1), n, es);
    vkmha_quant_layout lay;
    if (vkmha_quant_layout_of(g_ref, &d, &lay) != VKMHA_SUCCESS)
        sz.worst = UNADDRESSABLE, lay.bytes = 1;
    else
        need(&sz, true, lay.bytes, 1);
    if (sz.worst == TOO_LARGE)
        return;
    /* One byte short of the layout: must fail. */
    const bool short_bytes = (ptrs & 64) && lay.bytes > 1;
    const uint64_t bytes = short_bytes ? lay.bytes - 1 : lay.bytes;
    const fit f = short_bytes ? UNADDRESSABLE : sz.worst;
    const void *x = array(pl, ptrs & 1, sz.worst, n, es, r);
    void *q = array(pl, ptrs & 2, sz.worst, lay.bytes, 1, r);
    void *y = array(pl, ptrs & 4, sz.worst, n, es, r);
    check(g_ref, vkmha_quantize(g_ref, dp, dt, x, q, bytes), f);
    check(g_ref, vkmha_dequantize(g_ref, dp, q, bytes, dt, y), f);
}

static void fuzz_context(reader *r)
{
    vkmha_context_desc d = {0};
    uint8_t b = u8(r);
    static const vkmha_backend backends[4] = {VKMHA_BACKEND_REFERENCE, (vkmha_backend)3,
                                              (vkmha_backend)-1, (vkmha_backend)0x7fffffff};
    d.backend = backends[b & 3];
    d.flags = (b & 4) ? u32raw(r) : 0;
    vkmha_debug_options dbg = {{size_field(r), size_field(r), size_field(r)}, size_field(r),
                               size_field(r), size_field(r), size_field(r),
                               (vkmha_fused_kernel)u32raw(r), (u8(r) & 1) != 0,
                               size_field(r), size_field(r),
                               {size_field(r), size_field(r), size_field(r)},
                               (u8(r) & 1) != 0, u8(r) & 3, u32raw(r), (u8(r) & 1) != 0,
                               size_field(r), size_field(r)};
    d.scratch_budget = size_field(r);
    d.debug = (b & 8) ? &dbg : NULL;
    vkmha_context *ctx = (vkmha_context *)(uintptr_t)1;
    vkmha_status st = vkmha_context_create(&d, (b & 16) ? NULL : &ctx);
    check(NULL, st, FITS);
    if (st == VKMHA_SUCCESS) {
        vkmha_context_info info;
        check(ctx, vkmha_context_get_info(ctx, (b & 32) ? NULL : &info), FITS);
        /* get_kernels after a successful get_info only: a query that
         * succeeds keeps the last error of the one before. */
        const uint8_t kb = u8(r);
        vkmha_kernel_info kernels[3];
        uint32_t capacity = kb & 3;
        if (!(b & 32))
            check(ctx, vkmha_context_get_kernels(ctx, (kb & 4) ? NULL : &capacity,
                                                 (kb & 8) ? NULL : kernels), FITS);
        vkmha_context_destroy(ctx);
    } else if (!(b & 16) && ctx != NULL) {
        fprintf(stderr, "vkmha_context_create failed without writing NULL\n");
        __builtin_trap();
    }
    /* enumerate_devices' argument checks only (NULL count, or out NULL with
     * a capacity): they fail before the Vulkan loader is touched. */
    uint32_t count = (b >> 6) | 1u;
    check(NULL, vkmha_enumerate_devices((b & 32) ? NULL : &count, NULL), UNADDRESSABLE);
    if (!vkmha_status_string((vkmha_status)(int32_t)u32raw(r)))
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_ref) {
        vkmha_context_desc d = {0};
        d.backend = VKMHA_BACKEND_REFERENCE;
        if (vkmha_context_create(&d, &g_ref) != VKMHA_SUCCESS)
            abort();
    }
    reader r = {data, size};
    pool pl = {{0}, 0};
    uint8_t fn = u8(&r), ptrs = u8(&r);
    switch (fn % 9) {
    case 0:
        fuzz_matmul(&r, &pl, ptrs);
        break;
    case 1:
        fuzz_softmax(&r, &pl, ptrs);
        break;
    case 2:
        fuzz_heads(&r, &pl, ptrs, true);
        break;
    case 3:
        fuzz_heads(&r, &pl, ptrs, false);
        break;
    case 4:
        fuzz_attention(&r, &pl, ptrs);
        break;
    case 5:
        fuzz_layer(&r, &pl, ptrs);
        break;
    case 6:
        fuzz_context(&r);
        break;
    case 7:
        fuzz_quant(&r, &pl, ptrs);
        break;
    default: /* NULL handles */
        check(NULL, vkmha_matmul(NULL, NULL, NULL, NULL, NULL, NULL), UNADDRESSABLE);
        check(NULL, vkmha_mha_forward(NULL, NULL), UNADDRESSABLE);
        check(NULL, vkmha_mha_get_desc(NULL, NULL), UNADDRESSABLE);
        check(NULL, vkmha_context_get_info(NULL, NULL), UNADDRESSABLE);
        check(NULL, vkmha_context_get_kernels(NULL, NULL, NULL), UNADDRESSABLE);
        check(NULL, vkmha_quantize(NULL, NULL, 0, NULL, NULL, 0), UNADDRESSABLE);
        vkmha_mha_destroy(NULL);
        vkmha_context_destroy(NULL);
        break;
    }
    pool_free(&pl, 0);
    return 0;
}
