/* The safetensors file format (the format PyTorch and Hugging Face
 * checkpoints ship in), and how an attention layer's weights are found in
 * one. Pure C, no Vulkan and no context: the parser is fed untrusted bytes,
 * so it is also a fuzz target (tests/fuzz/fuzz_safetensors.c).
 *
 * Layout:
 *    0  8  N, the header's length in bytes, unsigned little-endian
 *    8  N  the header: a UTF-8 JSON object (parsed with jsmn), possibly
 *          padded with spaces, mapping each tensor's name to
 *          {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]}
 *          and optionally "__metadata__" to an object of strings
 *  8+N     the data: every tensor's bytes, little-endian, row-major, at
 *          [begin, end) counted from the start of the data
 * The tensors must cover the data exactly: no overlap, no hole, nothing
 * after the last (the rules of the reference implementation). Names are
 * compared as the raw bytes between the JSON quotes (no escape is decoded).
 */
#ifndef VKMHA_SAFETENSORS_FORMAT_H
#define VKMHA_SAFETENSORS_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "printf_attr.h"
#include "vkmha.h"

/* The reference implementation's limit on the header's length. */
#define ST_MAX_HEADER 100000000u
#define ST_MAX_RANK 8u

typedef enum st_dtype {
    ST_F32, ST_F16, ST_BF16, /* the ones vkmha converts */
    ST_F64, ST_I64, ST_U64, ST_I32, ST_U32, ST_I16, ST_U16, ST_I8, ST_U8, ST_BOOL,
    ST_F8_E4M3, ST_F8_E5M2,
    ST_DTYPE_COUNT
} st_dtype;

typedef struct st_tensor {
    const char *name; /* inside the header, not terminated */
    size_t name_len;
    st_dtype dtype;
    uint32_t rank;
    uint64_t dims[ST_MAX_RANK];
    uint64_t numel;
    uint64_t begin, end;  /* byte offsets in the data */
    const uint8_t *bytes; /* data + begin */
} st_tensor;

typedef struct st_file {
    st_tensor *tensors; /* in header order */
    size_t count;
    const uint8_t *data; /* the data section */
    uint64_t data_size;
} st_file;

/* Parses and validates `size` bytes (untrusted: any bytes, any size). Host
 * memory through `a` (NULL: malloc). VKMHA_SUCCESS and *out (free it with
 * st_free); or VKMHA_ERROR_INVALID_ARGUMENT (or _OUT_OF_HOST_MEMORY), *out
 * empty, and `why` (why_cap bytes) naming the tensor or field, e.g.
 * "tensor 'w': data_offsets [0, 12) hold 12 bytes, but shape [2, 2] of F32
 * needs 16". */
vkmha_status st_parse(const vkmha_allocator *a, const void *bytes, size_t size, st_file *out,
                      char *why, size_t why_cap);
void st_free(const vkmha_allocator *a, st_file *f);

/* The tensor called prefix + name, or NULL. */
const st_tensor *st_find(const st_file *f, const char *prefix, const char *name);

/* The layer's arrays in the order of vkmha_mha_desc. */
enum st_weight { ST_W_Q, ST_W_K, ST_W_V, ST_W_O, ST_B_Q, ST_B_K, ST_B_V, ST_B_O,
                 ST_GAMMA, ST_BETA, ST_WEIGHT_COUNT };

/* count elements of t from element `first` (the q, k or v part of a packed
 * in_proj_weight is a slice of it). t NULL: absent. */
typedef struct st_slice {
    const st_tensor *t;
    uint64_t first, count;
} st_slice;

typedef struct st_layer {
    st_slice w[ST_WEIGHT_COUNT];
    uint32_t d_model, n_head, n_kv_head, d_k, d_v, kdim, vdim;
    /* "in_proj_weight", "q_proj_weight", "q_proj.weight", "q_proj.qweight"
     * or "q_proj.qvalues" */
    const char *layout;
    /* Quantized projections (w[ST_W_Q .. ST_W_O] then absent; group 0:
     * none): GPTQ's (gptq: each one's qweight, qzeros and scales, Q4Z) or
     * vkmha's layout (qvalues, qscales, qzero_points), `quant` (a
     * vkmha_quant_type) in groups of `group` inputs (st_quant_bytes). */
    const st_tensor *qt[4][3];
    uint32_t group, quant;
    bool gptq;
} st_layer;

/* Finds the layer's tensors under `prefix` (NULL: none) and checks their
 * dtypes and shapes against each other and n_head / n_kv_head (n_kv_head 0:
 * n_head). norm_prefix (NULL: none) names LayerNorm weights "weight"
 * (required) and "bias" (optional). The names, in this order of preference
 * (two layouts present at once is an error):
 *   in_proj_weight [3E][E], in_proj_bias [3E]      (torch.nn.MultiheadAttention)
 *   q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias
 *                                                  (the same with kdim / vdim)
 *   q_proj.weight, k_proj.weight, v_proj.weight, each with an optional .bias
 *   q_proj.qweight, .qzeros, .scales (and .g_idx, optional), the same for
 *                  k_proj, v_proj and o_proj / out_proj: GPTQ-packed 4-bit
 *                  linear layers as AutoGPTQ writes them (below), each with
 *                  an optional .bias
 * and out_proj.weight / out_proj.bias or o_proj.weight / o_proj.bias.
 * GPTQ (AutoGPTQ's "gptq" checkpoint format) for a linear layer of K inputs
 * and N outputs in groups of G inputs: qweight I32 [K / 8][N], input k of
 * output n in bits 4 (k % 8) .. + 3 of qweight[k / 8][n]; qzeros I32
 * [K / G][N / 8], the zero point of group g of output n minus one in bits
 * 4 (n % 8) .. of qzeros[g][n / 8]; scales F16 [K / G][N]; g_idx I32 [K],
 * if present, k / G for every k (act-order is refused); the weight is
 * scales[g][n] * (q - (stored zero + 1)). Refused naming the tensor: other
 * bit widths (told by qzeros' columns), G not 32, 64 or 128, projections
 * of different group sizes, a mix with float projections, a stored zero of
 * 15 (a zero point of 16, which vkmha's Q4Z cannot hold).
 * vkmha's layout ("Quantized weights" in vkmha.h), a tensor per plane:
 * q_proj.qvalues I8 [N][K] (Q8) or U8 [N][K / 2] (Q4, Q4Z: two codes per
 * byte, the low nibble first), .qscales F16 [N][K / G], .qzero_points U8
 * [N][K / G] (Q4Z; Q4 without it); the same for k_proj, v_proj and o_proj /
 * out_proj, one type and group size for the layer. */
vkmha_status st_find_layer(const st_file *f, const char *prefix, const char *norm_prefix,
                           uint32_t n_head, uint32_t n_kv_head, st_layer *out, char *why,
                           size_t why_cap);

/* Quantized projection i of L as vkmha's bytes (q: [N][K], L->quant in
 * groups of L->group, layout l) into dst; INVALID with why naming the
 * tensor for a zero point vkmha's layout cannot hold (GPTQ's 16, above 15)
 * or a scale that is not finite. */
vkmha_status st_quant_bytes(const st_layer *L, int i, const vkmha_quant_desc *q,
                            const vkmha_quant_layout *l, uint8_t *dst, char *why, size_t cap);

/* Whether slice s can be used as floats in place (F32, 4-byte aligned, on a
 * little-endian host), and those floats. */
const float *st_slice_f32(const st_slice *s);
/* Converts slice s to float into dst (s->count elements). */
void st_slice_to_f32(const st_slice *s, float *dst);

/* Shared by the parser (safetensors_format.c) and the layer (st_layer.c). */
/* Writes a rejection's reason into why (cap bytes); returns INVALID_ARGUMENT. */
VKMHA_PRINTF(3, 4)
vkmha_status st_bad(char *why, size_t cap, const char *fmt, ...);
/* A name from the file, printable in a message: at most 80 bytes, anything
 * but printable ASCII shown as '?'. */
typedef struct st_shown {
    char s[88];
} st_shown;
st_shown st_show_tensor(const st_tensor *t);
/* A dtype's name in the format ("F32", ...) and its bytes per element. */
const char *st_dtype_name(uint32_t dtype);
uint32_t st_dtype_size(uint32_t dtype);

#endif /* VKMHA_SAFETENSORS_FORMAT_H */
