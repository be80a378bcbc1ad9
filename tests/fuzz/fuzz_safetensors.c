/* libFuzzer target: the safetensors parser and the layer's name and shape
 * resolution (src/safetensors_format.c, what vkmha_mha_create_from_safetensors
 * runs on every file before anything else), on arbitrary bytes. Pure C, no
 * Vulkan. Besides memory safety (AddressSanitizer and UBSan with
 * -Dfuzzing=true; tests/fuzz/run-fuzz, FUZZ_RUNS=1000000 for a long session)
 * and no leak, it checks:
 *   - an accepted file's tensors lie inside the data, hold exactly their
 *     shape times their dtype's size, and cover the data without overlap;
 *   - a found layer's slices lie inside their tensors and have the sizes the
 *     layer's dims give; converting every slice reads only those bytes, and
 *     the in-place fp32 view, where there is one, equals the conversion;
 *   - a quantized layer's projections (GPTQ's or vkmha's layout) convert to
 *     vkmha's bytes reading only their tensors and writing only the
 *     layout's, with zero points of at most 15 (GPTQ's 1 .. 15), or are
 *     refused naming the tensor;
 *   - a rejection is VKMHA_ERROR_INVALID_ARGUMENT (or _UNSUPPORTED for
 *     add_bias_kv) with a terminated, non-empty reason.
 * The layer is looked for under prefix "" with 1, 2 and 3 heads, with and
 * without LayerNorm weights under "norm.". Seeds: tests/fuzz/corpus_safetensors/
 * (tests/fuzz/make-corpus-safetensors.py). */
#include "safetensors_format.h"

#include "internal.h" /* vkmha__quant_layout */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, size_t size)
{
    fprintf(stderr, "fuzz_safetensors: %s (input of %zu bytes)\n", what, size);
    abort();
}

static void check_why(vkmha_status st, const char *why, size_t cap, size_t size)
{
    if (st != VKMHA_ERROR_INVALID_ARGUMENT && st != VKMHA_ERROR_UNSUPPORTED)
        fail("rejected with neither INVALID_ARGUMENT nor UNSUPPORTED", size);
    if (memchr(why, '\0', cap) == NULL || why[0] == '\0')
        fail("rejected without a terminated, non-empty reason", size);
}

static const uint32_t elem[ST_DTYPE_COUNT] = {
    [ST_F32] = 4, [ST_F16] = 2, [ST_BF16] = 2, [ST_F64] = 8, [ST_I64] = 8, [ST_U64] = 8,
    [ST_I32] = 4, [ST_U32] = 4, [ST_I16] = 2, [ST_U16] = 2, [ST_I8] = 1, [ST_U8] = 1,
    [ST_BOOL] = 1, [ST_F8_E4M3] = 1, [ST_F8_E5M2] = 1,
};

static void check_file(const st_file *f, const uint8_t *bytes, size_t size)
{
    uint64_t covered = 0;
    if (f->data < bytes + 8 || f->data + f->data_size != bytes + size)
        fail("the data section is not the end of the input", size);
    for (size_t i = 0; i < f->count; i++) {
        const st_tensor *t = &f->tensors[i];
        if (t->begin > t->end || t->end > f->data_size || t->bytes != f->data + t->begin)
            fail("accepted a tensor outside the data", size);
        if (t->end - t->begin != t->numel * elem[t->dtype])
            fail("accepted a tensor whose bytes differ from its shape", size);
        covered += t->end - t->begin;
        if (t->name < (const char *)bytes + 8 || t->name + t->name_len > (const char *)f->data)
            fail("a name outside the header", size);
    }
    /* No overlap and no hole: the sizes add up to the data. */
    if (covered != f->data_size)
        fail("accepted tensors that do not cover the data exactly", size);
}

static void check_layer(const st_layer *L, size_t size)
{
    const uint64_t H = L->n_head, Hkv = L->n_kv_head;
    const uint64_t want[ST_WEIGHT_COUNT] = {
        H * L->d_k * L->d_model, Hkv * L->d_k * L->kdim, Hkv * L->d_v * L->vdim,
        (uint64_t)L->d_model * H * L->d_v, H * L->d_k, Hkv * L->d_k, Hkv * L->d_v,
        L->d_model, L->d_model, L->d_model};
    for (int i = 0; i < ST_WEIGHT_COUNT; i++) {
        const st_slice *s = &L->w[i];
        if (!s->t) {
            if (i <= ST_W_O && !L->group)
                fail("a found layer lacks a weight", size);
            continue;
        }
        if (i <= ST_W_O && L->group)
            fail("a GPTQ layer with a float weight", size);
        if (s->count != want[i] || s->first > s->t->numel || s->count > s->t->numel - s->first)
            fail("a slice of the wrong size or outside its tensor", size);
        float *dst = malloc(s->count * sizeof(float) + 1);
        if (!dst)
            fail("out of memory", size);
        st_slice_to_f32(s, dst);
        const float *direct = st_slice_f32(s);
        if (direct && memcmp(direct, dst, s->count * sizeof(float)) != 0)
            fail("the in-place fp32 view differs from the conversion", size);
        free(dst);
    }
}

/* A quantized layer's projections converted (ASan: within their tensors
 * and the layout's bytes); its zero points 1 .. 15 (GPTQ) or 0 .. 15 when
 * accepted. */
static void check_quant(const st_layer *L, size_t size)
{
    const uint32_t rows[4] = {L->n_head * L->d_k, L->n_kv_head * L->d_k,
                              L->n_kv_head * L->d_v, L->d_model},
                   cols[4] = {L->d_model, L->kdim, L->vdim, L->n_head * L->d_v};
    for (int i = 0; i < 4; i++) {
        const vkmha_quant_desc q = {L->quant, L->group, rows[i], cols[i]};
        const vkmha_quant_layout l = vkmha__quant_layout(&q);
        uint8_t *dst = malloc((size_t)l.bytes);
        char why[256];
        if (!dst)
            fail("out of memory", size);
        memset(why, 'x', sizeof why);
        const vkmha_status st = st_quant_bytes(L, i, &q, &l, dst, why, sizeof why);
        if (st)
            check_why(st, why, sizeof why, size);
        for (uint64_t z = 0; !st && l.zeros_offset && z < (uint64_t)rows[i] * (cols[i] / L->group);
             z++)
            if (dst[l.zeros_offset + z] < (L->gptq ? 1 : 0) || dst[l.zeros_offset + z] > 15)
                fail("a converted zero point outside its range", size);
        free(dst);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size)
{
    st_file f;
    char why[256];
    memset(why, 'x', sizeof why);
    vkmha_status st = st_parse(NULL, bytes, size, &f, why, sizeof why);
    if (st != VKMHA_SUCCESS) {
        check_why(st, why, sizeof why, size);
        if (f.tensors || f.count)
            fail("rejected, but returned tensors", size);
        return 0;
    }
    check_file(&f, bytes, size);
    for (uint32_t heads = 1; heads <= 3; heads++)
        for (int norm = 0; norm < 2; norm++) {
            st_layer L;
            memset(why, 'x', sizeof why);
            st = st_find_layer(&f, "", norm ? "norm." : NULL, heads, 0, &L, why, sizeof why);
            if (st != VKMHA_SUCCESS) {
                check_why(st, why, sizeof why, size);
                continue;
            }
            check_layer(&L, size);
            if (L.group)
                check_quant(&L, size);
        }
    st_free(NULL, &f);
    return 0;
}
