/* Quantized weights on the host (include/vkmha.h, "Quantized weights"):
 * the layout of a quantized matrix, vkmha_quantize and vkmha_dequantize.
 * Backend-neutral: the same bytes for every backend, computed in fp32 as
 * the header defines them (tests/python/test_quant.py holds an independent
 * transcription that must agree bit for bit). */
#include "internal.h"

#include <math.h>
#include <string.h>

#include "half.h"

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT
#define FP16_MAX 65504.0f


/* desc checked, and its layout; fn names the call. */
static vkmha_status layout_of(vkmha_context *ctx, const vkmha_quant_desc *d,
                              vkmha_quant_layout *out)
{
    const char *fn = ctx->call;
    if (!d)
        return vkmha__fail(ctx, INVALID, "%s: desc is NULL", fn);
    if (d->type < VKMHA_QUANT_Q8 || d->type > VKMHA_QUANT_Q4Z)
        return vkmha__fail(ctx, INVALID, "%s: desc->type (%u) is not a quantized "
                           "vkmha_quant_type (Q8, Q4 or Q4Z)", fn, d->type);
    if (!vkmha__quant_group_ok(d->group_size))
        return vkmha__fail(ctx, INVALID, "%s: desc->group_size (%u) is not 32, 64 or 128", fn,
                           d->group_size);
    if (!d->rows || !d->cols)
        return vkmha__fail(ctx, INVALID, "%s: desc->%s is 0 (must be >= 1)", fn,
                           !d->rows ? "rows" : "cols");
    if (d->cols % d->group_size)
        return vkmha__fail(ctx, INVALID, "%s: desc->cols (%u) is not a multiple of "
                           "desc->group_size (%u): the groups run along a row", fn, d->cols,
                           d->group_size);
    /* Past this, no host array holds it, and the sums below could wrap. */
    if ((uint64_t)d->rows * d->cols > (uint64_t)(SIZE_MAX / 4))
        return vkmha__fail(ctx, INVALID, "%s: desc->rows * desc->cols (%llu) is too many "
                           "elements", fn, (unsigned long long)d->rows * d->cols);
    *out = vkmha__quant_layout(d);
    return VKMHA_SUCCESS;
}

/* Row r's group g of the quantized bytes `in` into x[group_size] (exact in
 * fp32), read as they are: the zero point's low 4 bits. */
static void decode_group(const vkmha_quant_desc *d, const vkmha_quant_layout *l,
                         const uint8_t *in, uint32_t r, uint32_t g, float *x)
{
    const uint32_t n = d->group_size;
    const size_t at = (size_t)r * (d->cols / n) + g, first = (size_t)r * d->cols + (size_t)g * n;
    uint16_t bits;
    memcpy(&bits, in + l->scales_offset + 2 * at, sizeof bits);
    const float s = vkmha__half_to_float(bits);
    const uint8_t zero = d->type == VKMHA_QUANT_Q4Z ? in[l->zeros_offset + at] : 0;
    for (uint32_t i = 0; i < n; i++) {
        const size_t e = first + i;
        const int code = d->type == VKMHA_QUANT_Q8 ? (int)(int8_t)in[e]
                                                   : (in[e / 2] >> (4 * (e & 1))) & 15;
        const int q = d->type == VKMHA_QUANT_Q4 ? code - 8
                      : d->type == VKMHA_QUANT_Q4Z ? code - (zero & 15)
                                                   : code;
        x[i] = s * (float)q; /* exact: 11 bits times at most 8 */
    }
}

vkmha_status vkmha__quant_check(vkmha_context *ctx, const vkmha_quant_desc *d,
                                const vkmha_quant_layout *l, const uint8_t *src,
                                const char *what)
{
    const uint32_t groups = d->cols / d->group_size;
    for (uint32_t r = 0; r < d->rows; r++)
        for (uint32_t g = 0; g < groups; g++) {
            const size_t at = (size_t)r * groups + g;
            uint16_t bits;
            memcpy(&bits, src + l->scales_offset + 2 * at, sizeof bits);
            const bool finite = isfinite(vkmha__half_to_float(bits));
            if (!finite || (d->type == VKMHA_QUANT_Q4Z && src[l->zeros_offset + at] > 15))
                return vkmha__fail(ctx, INVALID, "%s: %s row %u, group %u: %s", ctx->call,
                                   what, r, g, !finite ? "the scale is not a finite fp16"
                                                       : "the zero point is above 15");
        }
    return VKMHA_SUCCESS;
}

uint32_t vkmha__quant_rows_within(const vkmha_quant_desc *d, uint64_t bytes)
{
    const uint64_t groups = d->cols / d->group_size,
                   row = d->cols / (d->type == VKMHA_QUANT_Q8 ? 1 : 2) + 2 * groups +
                         (d->type == VKMHA_QUANT_Q4Z ? groups : 0);
    vkmha_quant_desc sub = *d;
    sub.rows = (uint32_t)(bytes / row < d->rows ? bytes / row : d->rows);
    while (sub.rows && vkmha__quant_layout(&sub).bytes > bytes) /* the planes' padding */
        sub.rows--;
    return sub.rows;
}

uint32_t vkmha__quant_row_planes(const vkmha_quant_desc *d, const vkmha_quant_layout *l,
                                 uint32_t r0, const vkmha_quant_desc *sub,
                                 const vkmha_quant_layout *sl, uint64_t from[3], uint64_t to[3],
                                 uint64_t bytes[3])
{
    const uint64_t groups = d->cols / d->group_size;
    from[0] = (uint64_t)r0 * d->cols / (d->type == VKMHA_QUANT_Q8 ? 1 : 2), to[0] = 0;
    bytes[0] = sl->scales_offset;
    from[1] = l->scales_offset + 2 * groups * r0, to[1] = sl->scales_offset;
    bytes[1] = 2 * groups * sub->rows;
    from[2] = l->zeros_offset + groups * r0, to[2] = sl->zeros_offset;
    bytes[2] = groups * sub->rows;
    return d->type == VKMHA_QUANT_Q4Z ? 3 : 2;
}

void vkmha__quant_slice(const vkmha_quant_desc *d, const vkmha_quant_layout *l,
                        const uint8_t *src, uint32_t r0, uint32_t c0,
                        const vkmha_quant_desc *sub, const vkmha_quant_layout *sl, uint8_t *dst)
{
    const uint32_t g = d->group_size, groups = d->cols / g, sub_groups = sub->cols / g;
    const size_t per = d->type == VKMHA_QUANT_Q8 ? 1 : 2; /* elements per byte */
    memset(dst, 0, (size_t)sl->bytes);
    for (uint32_t r = 0; r < sub->rows; r++) {
        const size_t row = (size_t)r0 + r, at = row * groups + c0 / g,
                     sub_at = (size_t)r * sub_groups;
        memcpy(dst + (size_t)r * sub->cols / per, src + (row * d->cols + c0) / per,
               sub->cols / per);
        memcpy(dst + sl->scales_offset + 2 * sub_at, src + l->scales_offset + 2 * at,
               2 * (size_t)sub_groups);
        if (d->type == VKMHA_QUANT_Q4Z)
            memcpy(dst + sl->zeros_offset + sub_at, src + l->zeros_offset + at, sub_groups);
    }
}

void vkmha__dequantize_f32(const vkmha_quant_desc *d, const vkmha_quant_layout *l,
                           const uint8_t *src, float *dst)
{
    for (uint32_t r = 0; r < d->rows; r++)
        for (uint32_t g = 0; g < d->cols / d->group_size; g++)
            decode_group(d, l, src, r, g, dst + (size_t)r * d->cols + (size_t)g * d->group_size);
}

VKMHA_API vkmha_status vkmha_quant_layout_of(vkmha_context *ctx, const vkmha_quant_desc *desc,
                                             vkmha_quant_layout *out)
{
    if (!ctx)
        return INVALID;
    vkmha__begin_call(ctx, "vkmha_quant_layout_of");
    if (!out)
        return vkmha__fail(ctx, INVALID, "%s: out is NULL", ctx->call);
    vkmha_quant_layout l;
    vkmha_status st = layout_of(ctx, desc, &l);
    if (!st)
        *out = l;
    return st;
}

/* Element i of a row of src_dtype, in fp32 (exact). */
static float element(uint32_t dtype, const void *row, uint32_t i)
{
    if (dtype == VKMHA_DTYPE_F32) {
        float f;
        memcpy(&f, (const char *)row + 4 * (size_t)i, sizeof f);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)row + 2 * (size_t)i, sizeof h);
    return dtype == VKMHA_DTYPE_F16 ? vkmha__half_to_float(h) : vkmha__bf16_to_float(h);
}

static float clampf(float v, float lo, float hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The scale of a group from its fp32 quotient: fp16 bits in *bits, false
 * when the quotient exceeds the largest fp16. */
static bool scale_of(float quotient, uint16_t *bits, float *d)
{
    if (!(quotient <= FP16_MAX))
        return false;
    *bits = vkmha__float_to_half(quotient);
    *d = vkmha__half_to_float(*bits);
    return true;
}

/* Quantizes group g of row r (x: its group_size values) into codes (one per
 * value: the stored code, Q4 already offset by 8), *scale and *zero. */
static vkmha_status quantize_group(vkmha_context *ctx, const vkmha_quant_desc *d,
                                   const char *what, uint32_t r, uint32_t g, const float *x,
                                   uint8_t *codes, uint16_t *scale, uint8_t *zero)
{
    const uint32_t n = d->group_size;
    float amax = 0, lo = 0, hi = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return vkmha__fail(ctx, INVALID, "%s: %s row %u, group %u (columns %u..%u) holds "
                               "%s: it cannot be quantized", ctx->call, what, r, g, g * n,
                               g * n + n - 1, isnan(x[i]) ? "NaN" : "an infinity");
        amax = fmaxf(amax, fabsf(x[i]));
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    const bool z = d->type == VKMHA_QUANT_Q4Z;
    if (z && lo == hi)
        lo = -1.0f, hi = 1.0f;
    /* The fp32 quotient of the scale, as the header writes it. */
    const float quotient = z ? (hi - lo) / 15.0f
                             : amax / (d->type == VKMHA_QUANT_Q8 ? 127.0f : 7.0f);
    float s;
    if (!scale_of(quotient, scale, &s))
        return vkmha__fail(ctx, INVALID, "%s: %s row %u, group %u (columns %u..%u): its "
                           "scale (%g) exceeds the largest fp16 (65504)", ctx->call, what, r, g,
                           g * n, g * n + n - 1, (double)quotient);
    *zero = 0;
    if (s == 0.0f) { /* all zeros, or a scale below fp16's smallest */
        memset(codes, d->type == VKMHA_QUANT_Q4 ? 8 : 0, n);
        return VKMHA_SUCCESS;
    }
    if (z)
        *zero = (uint8_t)clampf(rintf(-lo / s), 0.0f, 15.0f);
    for (uint32_t i = 0; i < n; i++) {
        const float q = rintf(x[i] / s);
        codes[i] = d->type == VKMHA_QUANT_Q8 ? (uint8_t)(int8_t)clampf(q, -127.0f, 127.0f)
                   : z ? (uint8_t)clampf(q + (float)*zero, 0.0f, 15.0f)
                       : (uint8_t)(clampf(q, -8.0f, 7.0f) + 8.0f);
    }
    return VKMHA_SUCCESS;
}

/* ---- a Q8 KV cache's rows (vkmha_kv_cache_desc.quant) ----------------------- */

/* As quantize_group's Q8 for a row that cannot be refused (the append runs
 * on the device): NaN or Inf stores the NaN scale 0x7e00 and codes 0, a
 * scale past fp16's saturates at 65504. shaders/kv_q8.comp does the same. */
void vkmha__kv_q8_quantize(const float *x, uint32_t n, uint8_t *row)
{
    float amax = 0;
    bool finite = true;
    for (uint32_t i = 0; i < n; i++) {
        finite = finite && isfinite(x[i]);
        amax = fmaxf(amax, fabsf(x[i]));
    }
    const uint16_t bits = finite ? vkmha__float_to_half(amax / 127.0f) : 0x7e00;
    const float s = finite ? vkmha__half_to_float(bits) : 0.0f;
    memset(row, 0, vkmha__kv_q8_row_bytes(n));
    row[0] = (uint8_t)(bits & 0xff);
    row[1] = (uint8_t)(bits >> 8);
    for (uint32_t i = 0; s != 0.0f && i < n; i++)
        row[4 + i] = (uint8_t)(int8_t)clampf(rintf(x[i] / s), -127.0f, 127.0f);
}

void vkmha__kv_q8_dequantize(const uint8_t *row, uint32_t n, float *x)
{
    const float s = vkmha__half_to_float((uint16_t)(row[0] | row[1] << 8));
    for (uint32_t i = 0; i < n; i++)
        x[i] = s * (float)(int8_t)row[4 + i];
}

/* The start of vkmha_quantize and vkmha_dequantize (fn): the call named,
 * and its checks: the float array (src or dst, of dtype) and the quantized
 * bytes (the other, of `bytes` bytes) named as the call names them. */
static vkmha_status begin_call(vkmha_context *ctx, const char *fn,
                               const vkmha_quant_desc *desc, uint32_t dtype,
                               const char *dtype_name, const void *src, const void *dst,
                               bool src_quantized, uint64_t bytes, const char *bytes_name,
                               vkmha_quant_layout *l)
{
    vkmha_status st;
    uint64_t n;
    if (!ctx)
        return INVALID;
    vkmha__begin_call(ctx, fn);
    if ((st = layout_of(ctx, desc, l)))
        return st;
    if (!src || !dst)
        return vkmha__fail(ctx, INVALID, "%s: %s is NULL", ctx->call, !src ? "src" : "dst");
    if ((st = vkmha__check_dtype(ctx, dtype_name, dtype)))
        return st;
    /* Both arrays addressable, as every host array of vkmha's. */
    if ((st = vkmha__check_count(ctx, ctx->call, src_quantized ? "dst" : "src",
                                 (uint64_t)desc->rows * desc->cols,
                                 vkmha__dtype_size(dtype), &n)) ||
        (st = vkmha__check_count(ctx, ctx->call, src_quantized ? "src" : "dst", l->bytes, 1,
                                 &n)))
        return st;
    if (bytes < l->bytes)
        return vkmha__fail(ctx, INVALID, "%s: %s (%llu) is less than the %s matrix's %llu "
                           "bytes (vkmha_quant_layout_of)", ctx->call, bytes_name,
                           (unsigned long long)bytes, vkmha__quant_name(desc->type),
                           (unsigned long long)l->bytes);
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__quantize(vkmha_context *ctx, const vkmha_quant_desc *desc,
                             const vkmha_quant_layout *l, uint32_t src_dtype, const void *src,
                             void *dst, const char *what)
{
    vkmha_status st;
    const uint32_t n = desc->group_size, groups = desc->cols / n;
    const size_t es = vkmha__dtype_size(src_dtype);
    uint8_t *out = dst;
    memset(out, 0, (size_t)l->bytes);
    float x[128];
    uint8_t codes[128];
    for (uint32_t r = 0; r < desc->rows; r++) {
        const char *row = (const char *)src + (size_t)r * desc->cols * es;
        for (uint32_t g = 0; g < groups; g++) {
            for (uint32_t i = 0; i < n; i++)
                x[i] = element(src_dtype, row, g * n + i);
            const size_t at = (size_t)r * groups + g;
            uint16_t scale = 0;
            uint8_t zero = 0;
            if ((st = quantize_group(ctx, desc, what, r, g, x, codes, &scale, &zero)))
                return st;
            memcpy(out + l->scales_offset + 2 * at, &scale, sizeof scale);
            if (desc->type == VKMHA_QUANT_Q4Z)
                out[l->zeros_offset + at] = zero;
            const size_t first = (size_t)r * desc->cols + (size_t)g * n;
            for (uint32_t i = 0; i < n; i++) {
                if (desc->type == VKMHA_QUANT_Q8)
                    out[first + i] = codes[i];
                else
                    out[(first + i) / 2] |= (uint8_t)(codes[i] << (4 * ((first + i) & 1)));
            }
        }
    }
    return VKMHA_SUCCESS;
}

VKMHA_API vkmha_status vkmha_quantize(vkmha_context *ctx, const vkmha_quant_desc *desc,
                                      uint32_t src_dtype, const void *src, void *dst,
                                      uint64_t dst_bytes)
{
    vkmha_quant_layout l;
    vkmha_status st;
    if ((st = begin_call(ctx, "vkmha_quantize", desc, src_dtype, "src_dtype", src, dst, false,
                         dst_bytes, "dst_bytes", &l)))
        return st;
    return vkmha__quantize(ctx, desc, &l, src_dtype, src, dst, "src");
}

VKMHA_API vkmha_status vkmha_dequantize(vkmha_context *ctx, const vkmha_quant_desc *desc,
                                        const void *src, uint64_t src_bytes, uint32_t dst_dtype,
                                        void *dst)
{
    vkmha_quant_layout l;
    vkmha_status st;
    if ((st = begin_call(ctx, "vkmha_dequantize", desc, dst_dtype, "dst_dtype", src, dst, true,
                         src_bytes, "src_bytes", &l)))
        return st;
    if ((st = vkmha__quant_check(ctx, desc, &l, src, "src")))
        return st;
    const uint32_t n = desc->group_size, groups = desc->cols / n;
    const size_t es = vkmha__dtype_size(dst_dtype);
    float row[128];
    for (uint32_t r = 0; r < desc->rows; r++)
        for (uint32_t g = 0; g < groups; g++) {
            decode_group(desc, &l, src, r, g, row);
            vkmha__from_f32(dst_dtype, row, n,
                            (char *)dst + ((size_t)r * desc->cols + (size_t)g * n) * es);
        }
    return VKMHA_SUCCESS;
}
