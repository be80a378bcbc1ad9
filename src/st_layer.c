/* The layer's tensors in a parsed safetensors file (see
 * safetensors_format.h): PyTorch's names and layouts, their shapes checked
 * against each other, slices of fused in-projections, and conversion to
 * fp32. The file itself is parsed by safetensors_format.c. */
#include "safetensors_format.h"

#include <stdio.h>
#include <string.h>

#include "half.h"
#include "internal.h"

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT


/* ---- the layer ------------------------------------------------------------ */

typedef struct finder {
    const st_file *f;
    const char *prefix;
    char *why;
    size_t cap;
} finder;

/* Checks t (may be NULL: absent, fine) as a float tensor of `rank` dims;
 * want[r] 0 = any. `meaning` describes the expected shape in a message. */
static vkmha_status check_shape(const finder *fd, const st_tensor *t, uint32_t rank,
                                uint64_t want0, uint64_t want1, const char *meaning)
{
    if (!t)
        return VKMHA_SUCCESS;
    const st_shown nm = st_show_tensor(t);
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
        return st_bad(fd->why, fd->cap, "tensor '%s': dtype %s (F32, F16 or BF16 expected)",
                   nm.s, st_dtype_name(t->dtype));
    const uint64_t want[2] = {want0, want1};
    bool ok = t->rank == rank;
    for (uint32_t r = 0; ok && r < rank; r++)
        ok = t->dims[r] >= 1 && t->dims[r] <= UINT32_MAX && (want[r] == 0 || t->dims[r] == want[r]);
    if (ok)
        return VKMHA_SUCCESS;
    char got[64] = "", exp[64] = "";
    size_t g = 0, e = 0;
    for (uint32_t r = 0; r < t->rank && g < sizeof got; r++)
        g += (size_t)snprintf(got + g, sizeof got - g, "%s%llu", r ? ", " : "",
                              (unsigned long long)t->dims[r]);
    for (uint32_t r = 0; r < rank && e < sizeof exp; r++) {
        if (want[r])
            e += (size_t)snprintf(exp + e, sizeof exp - e, "%s%llu", r ? ", " : "",
                                  (unsigned long long)want[r]);
        else
            e += (size_t)snprintf(exp + e, sizeof exp - e, "%sany", r ? ", " : "");
    }
    return st_bad(fd->why, fd->cap, "tensor '%s': shape [%s], expected %s = [%s]", nm.s, got,
               meaning, exp);
}

static const st_tensor *find(const finder *fd, const char *name)
{
    return st_find(fd->f, fd->prefix, name);
}

/* Of two alternative names, the one present (NULL if neither); both is an
 * error. */
static vkmha_status find_either(const finder *fd, const char *a, const char *b,
                                const st_tensor **out)
{
    const st_tensor *ta = find(fd, a), *tb = find(fd, b);
    if (ta && tb)
        return st_bad(fd->why, fd->cap, "both '%s%s' and '%s%s' are present: which one is meant?",
                   fd->prefix, a, fd->prefix, b);
    *out = ta ? ta : tb;
    return VKMHA_SUCCESS;
}

static st_slice whole(const st_tensor *t)
{
    st_slice s = {t, 0, t ? t->numel : 0};
    return s;
}

static st_slice part(const st_tensor *t, uint64_t first, uint64_t count)
{
    st_slice s = {t, first, count};
    return s;
}

/* The LayerNorm's weights under norm_prefix (NULL: none) into L. */
static vkmha_status find_norm(const st_file *f, const char *norm_prefix, uint64_t E,
                              st_layer *L, char *why, size_t cap)
{
    if (!norm_prefix)
        return VKMHA_SUCCESS;
    finder nf = {f, norm_prefix, why, cap};
    const st_tensor *g = find(&nf, "weight"), *be = find(&nf, "bias");
    vkmha_status st;
    if (!g)
        return st_bad(why, cap, "missing tensor '%sweight' (the LayerNorm's)", norm_prefix);
    if ((st = check_shape(&nf, g, 1, E, 0, "[d_model]")) ||
        (st = check_shape(&nf, be, 1, E, 0, "[d_model]")))
        return st;
    L->w[ST_GAMMA] = whole(g);
    L->w[ST_BETA] = whole(be);
    return VKMHA_SUCCESS;
}

/* Element i of an I32 tensor (little-endian), as unsigned bits. */
static uint32_t i32_at(const st_tensor *t, uint64_t i)
{
    const uint8_t *p = t->bytes + 4 * i;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* One GPTQ linear layer `name` (e.g. "q_proj"): its qweight, qzeros,
 * scales (t[0 .. 2]) and g_idx checked; *in, *out its inputs and outputs,
 * *group its group size. */
static vkmha_status find_gptq(const finder *fd, const char *name, const st_tensor *t[3],
                              uint64_t *in, uint64_t *out, uint32_t *group)
{
    static const char *const parts[4] = {"qweight", "qzeros", "scales", "g_idx"};
    static const st_dtype dtypes[4] = {ST_I32, ST_I32, ST_F16, ST_I32};
    static const uint32_t ranks[4] = {2, 2, 2, 1};
    const st_tensor *all[4];
    char full[64];
    for (int i = 0; i < 4; i++) {
        snprintf(full, sizeof full, "%s.%s", name, parts[i]);
        all[i] = find(fd, full);
        if (!all[i] && i < 3)
            return st_bad(fd->why, fd->cap, "missing tensor '%s%s' (a GPTQ layer)", fd->prefix,
                          full);
        if (all[i] && (all[i]->dtype != dtypes[i] || all[i]->rank != ranks[i]))
            return st_bad(fd->why, fd->cap, "tensor '%s': %s of rank %u, expected %s of rank %u "
                          "(AutoGPTQ's %s)", st_show_tensor(all[i]).s,
                          st_dtype_name(all[i]->dtype), all[i]->rank,
                          st_dtype_name(dtypes[i]), ranks[i], parts[i]);
    }
    const uint64_t K = all[0]->dims[0] * 8, N = all[0]->dims[1], G = all[2]->dims[0];
    if (!N || !G || N > UINT32_MAX || K > UINT32_MAX || all[2]->dims[1] != N)
        return st_bad(fd->why, fd->cap, "tensor '%s': shape [%llu, %llu], expected [groups, "
                      "%llu] (qweight's outputs)", st_show_tensor(all[2]).s,
                      (unsigned long long)G, (unsigned long long)all[2]->dims[1],
                      (unsigned long long)N);
    if (all[1]->dims[0] != G || all[1]->dims[1] * 8 != N)
        return st_bad(fd->why, fd->cap, "tensor '%s': shape [%llu, %llu]: vkmha takes 4-bit GPTQ "
                      "([groups %llu, outputs / 8 = %llu]); other bit widths are not supported",
                      st_show_tensor(all[1]).s, (unsigned long long)all[1]->dims[0],
                      (unsigned long long)all[1]->dims[1], (unsigned long long)G,
                      (unsigned long long)(N / 8));
    if (K % G || !vkmha__quant_group_ok(K / G))
        return st_bad(fd->why, fd->cap, "tensor '%s': %llu groups over %llu inputs: vkmha "
                      "takes groups of 32, 64 or 128 inputs", st_show_tensor(all[2]).s,
                      (unsigned long long)G, (unsigned long long)K);
    *group = (uint32_t)(K / G);
    if (all[3]) {
        if (all[3]->dims[0] != K)
            return st_bad(fd->why, fd->cap, "tensor '%s': %llu entries, expected %llu (inputs)",
                          st_show_tensor(all[3]).s, (unsigned long long)all[3]->dims[0],
                          (unsigned long long)K);
        for (uint64_t k = 0; k < K; k++)
            if (i32_at(all[3], k) != k / *group)
                return st_bad(fd->why, fd->cap, "tensor '%s': entry %llu is %d, not %llu: "
                              "act-order GPTQ (a permuted g_idx) is not supported",
                              st_show_tensor(all[3]).s, (unsigned long long)k,
                              (int)i32_at(all[3], k), (unsigned long long)(k / *group));
    }
    for (int i = 0; i < 3; i++)
        t[i] = all[i];
    *in = K, *out = N;
    return VKMHA_SUCCESS;
}

/* One linear layer `name` in vkmha's layout, a tensor per plane: qvalues
 * (I8 [N][K]: Q8; U8 [N][K / 2]: Q4, or Q4Z with qzero_points), qscales
 * (F16 [N][K / G]) and qzero_points (U8 [N][K / G]); t[0 .. 2] (t[2] NULL
 * but for Q4Z), *in = K, *out = N, *group = G, *type. */
static vkmha_status find_vq(const finder *fd, const char *name, const st_tensor *t[3],
                            uint64_t *in, uint64_t *out, uint32_t *group, uint32_t *type)
{
    static const char *const parts[3] = {"qvalues", "qscales", "qzero_points"};
    char full[64];
    for (int i = 0; i < 3; i++) {
        snprintf(full, sizeof full, "%s.%s", name, parts[i]);
        t[i] = find(fd, full);
        if (!t[i] && i < 2)
            return st_bad(fd->why, fd->cap, "missing tensor '%s%s' (a layer in vkmha's "
                          "quantized layout)", fd->prefix, full);
        if (t[i] && t[i]->rank != 2)
            return st_bad(fd->why, fd->cap, "tensor '%s': rank %u, expected 2",
                          st_show_tensor(t[i]).s, t[i]->rank);
    }
    const bool q8 = t[0]->dtype == ST_I8;
    const uint64_t N = t[0]->dims[0], K = t[0]->dims[1] * (q8 ? 1 : 2), G = t[1]->dims[1];
    /* The first tensor of a dtype the layout does not have. */
    const int bad = !q8 && t[0]->dtype != ST_U8                 ? 0
                    : t[1]->dtype != ST_F16                     ? 1
                    : t[2] && (q8 || t[2]->dtype != ST_U8)      ? 2
                                                                : -1;
    if (bad >= 0)
        return st_bad(fd->why, fd->cap, "tensor '%s': dtype %s; vkmha's layout has qvalues I8 "
                      "(Q8) or U8 (Q4, Q4Z), qscales F16, qzero_points U8 (Q4Z only)",
                      st_show_tensor(t[bad]).s, st_dtype_name(t[bad]->dtype));
    if (!N || !G || N > UINT32_MAX || K > UINT32_MAX || t[1]->dims[0] != N ||
        (t[2] && (t[2]->dims[0] != N || t[2]->dims[1] != G)))
        return st_bad(fd->why, fd->cap, "tensor '%s': shape [%llu, %llu], expected [%llu "
                      "(qvalues' rows), groups]", st_show_tensor(t[1]).s,
                      (unsigned long long)t[1]->dims[0], (unsigned long long)G,
                      (unsigned long long)N);
    if (K % G || !vkmha__quant_group_ok(K / G))
        return st_bad(fd->why, fd->cap, "tensor '%s': %llu groups over %llu inputs: vkmha "
                      "takes groups of 32, 64 or 128 inputs", st_show_tensor(t[1]).s,
                      (unsigned long long)G, (unsigned long long)K);
    *group = (uint32_t)(K / G);
    *type = q8 ? VKMHA_QUANT_Q8 : t[2] ? VKMHA_QUANT_Q4Z : VKMHA_QUANT_Q4;
    *in = K, *out = N;
    return VKMHA_SUCCESS;
}

/* A quantized layout (q_proj.qweight: GPTQ; q_proj.qvalues: vkmha's):
 * every projection in it, of one type and group size, with optional
 * biases. */
static vkmha_status find_quant_layer(const finder *fd, uint32_t H, uint32_t Hkv, bool gptq,
                                     st_layer *L)
{
    static const char *const base[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    vkmha_status st;
    uint64_t in[4], out[4];
    const st_tensor *oq = find(fd, gptq ? "out_proj.qweight" : "out_proj.qvalues");
    L->gptq = gptq;
    for (int i = 0; i < 4; i++) {
        const char *name = i == 3 && oq ? "out_proj" : base[i];
        uint32_t group = 0, type = VKMHA_QUANT_Q4Z;
        char bias[64];
        if ((st = gptq ? find_gptq(fd, name, L->qt[i], &in[i], &out[i], &group)
                       : find_vq(fd, name, L->qt[i], &in[i], &out[i], &group, &type)))
            return st;
        if (i && (group != L->group || type != L->quant))
            return st_bad(fd->why, fd->cap, "tensor '%s': %s in groups of %u inputs, but '%s' "
                          "%s in groups of %u (one quantization for the layer)",
                          st_show_tensor(L->qt[i][0]).s, vkmha__quant_name(type), group,
                          st_show_tensor(L->qt[0][0]).s, vkmha__quant_name(L->quant), L->group);
        L->group = group;
        L->quant = type;
        snprintf(bias, sizeof bias, "%s.bias", name);
        const st_tensor *b = find(fd, bias);
        if ((st = check_shape(fd, b, 1, out[i], 0, "[outputs of its weight]")))
            return st;
        L->w[ST_B_Q + i] = whole(b);
    }
    const uint64_t E = out[3];
    if (in[0] != E || out[0] % H || out[1] != out[0] / H * Hkv || out[2] % Hkv ||
        in[3] != out[2] / Hkv * H)
        return st_bad(fd->why, fd->cap, "quantized projections of inputs x outputs "
                      "%llux%llu, %llux%llu, %llux%llu, %llux%llu do not make a layer of %u "
                      "heads over %u key/value heads", (unsigned long long)in[0],
                      (unsigned long long)out[0],
                      (unsigned long long)in[1], (unsigned long long)out[1],
                      (unsigned long long)in[2], (unsigned long long)out[2],
                      (unsigned long long)in[3], (unsigned long long)out[3], H, Hkv);
    L->layout = gptq ? "q_proj.qweight" : "q_proj.qvalues";
    L->d_model = (uint32_t)E;
    L->d_k = (uint32_t)(out[0] / H);
    L->d_v = (uint32_t)(out[2] / Hkv);
    L->kdim = (uint32_t)in[1];
    L->vdim = (uint32_t)in[2];
    return VKMHA_SUCCESS;
}

/* vkmha's layout: the planes copied, each scale finite and zero point at
 * most 15 (else named). */
static vkmha_status vq_bytes(const st_layer *L, int i, const vkmha_quant_desc *q,
                             const vkmha_quant_layout *l, uint8_t *dst, char *why, size_t cap)
{
    const st_tensor *const *t = L->qt[i];
    const uint64_t groups = (uint64_t)q->rows * (q->cols / q->group_size);
    memset(dst, 0, (size_t)l->bytes);
    memcpy(dst, t[0]->bytes, (size_t)(t[0]->end - t[0]->begin));
    memcpy(dst + l->scales_offset, t[1]->bytes, (size_t)(2 * groups));
    if (t[2])
        memcpy(dst + l->zeros_offset, t[2]->bytes, (size_t)groups);
    for (uint64_t g = 0; g < groups; g++) {
        const uint16_t bits = (uint16_t)(t[1]->bytes[2 * g] | t[1]->bytes[2 * g + 1] << 8);
        if ((bits & 0x7c00) == 0x7c00 || (t[2] && t[2]->bytes[g] > 15))
            return st_bad(why, cap, "tensor '%s': row %llu, group %llu: %s",
                          st_show_tensor(t[(bits & 0x7c00) == 0x7c00 ? 1 : 2]).s,
                          (unsigned long long)(g / (q->cols / q->group_size)),
                          (unsigned long long)(g % (q->cols / q->group_size)),
                          (bits & 0x7c00) == 0x7c00 ? "the scale is not a finite fp16"
                                                    : "the zero point is above 15");
    }
    return VKMHA_SUCCESS;
}

vkmha_status st_quant_bytes(const st_layer *L, int i, const vkmha_quant_desc *q,
                            const vkmha_quant_layout *l, uint8_t *dst, char *why, size_t cap)
{
    if (!L->gptq)
        return vq_bytes(L, i, q, l, dst, why, cap);
    const st_tensor *qw = L->qt[i][0], *qz = L->qt[i][1], *sc = L->qt[i][2];
    const uint64_t N = q->rows, K = q->cols, G = K / q->group_size;
    memset(dst, 0, (size_t)l->bytes);
    for (uint64_t n = 0; n < N; n++) {
        for (uint64_t k = 0; k < K; k++) {
            const uint32_t code = i32_at(qw, (k / 8) * N + n) >> (4 * (k % 8)) & 15;
            dst[(n * K + k) / 2] |= (uint8_t)(code << (4 * (k & 1)));
        }
        for (uint64_t g = 0; g < G; g++) {
            const uint32_t stored = i32_at(qz, g * (N / 8) + n / 8) >> (4 * (n % 8)) & 15;
            if (stored == 15)
                return st_bad(why, cap, "tensor '%s': output %llu, group %llu: a stored zero "
                              "of 15 (zero point 16) does not fit vkmha's 4-bit zero points",
                              st_show_tensor(qz).s, (unsigned long long)n,
                              (unsigned long long)g);
            dst[l->zeros_offset + n * G + g] = (uint8_t)(stored + 1);
            memcpy(dst + l->scales_offset + 2 * (n * G + g), sc->bytes + 2 * (g * N + n), 2);
        }
    }
    return VKMHA_SUCCESS;
}

vkmha_status st_find_layer(const st_file *f, const char *prefix, const char *norm_prefix,
                           uint32_t n_head, uint32_t n_kv_head, st_layer *L, char *why,
                           size_t cap)
{
    finder fd = {f, prefix ? prefix : "", why, cap};
    const char *P = fd.prefix;
    vkmha_status st;
    memset(L, 0, sizeof *L);
    if (n_head == 0)
        return st_bad(why, cap, "n_head is 0 (the file does not say how many heads; >= 1)");
    const uint32_t H = n_head, Hkv = n_kv_head ? n_kv_head : n_head;
    if (Hkv > H || H % Hkv != 0)
        return st_bad(why, cap, "n_head (%u) is not a multiple of n_kv_head (%u)", H, Hkv);
    const st_tensor *packed = find(&fd, "in_proj_weight");
    const st_tensor *sep = find(&fd, "q_proj_weight"), *lin = find(&fd, "q_proj.weight");
    const st_tensor *gptq = find(&fd, "q_proj.qweight"), *vq = find(&fd, "q_proj.qvalues");
    const st_tensor *const layouts[5] = {packed, sep, lin, gptq, vq};
    const st_tensor *first = NULL, *second = NULL;
    for (int i = 0; i < 5; i++)
        if (layouts[i] && !first)
            first = layouts[i];
        else if (layouts[i] && !second)
            second = layouts[i];
    if (second)
        return st_bad(why, cap, "two layouts under prefix '%s': both '%s' and '%s'", P,
                      st_show_tensor(first).s, st_show_tensor(second).s);
    if (!first)
        return st_bad(why, cap,
                   "no attention weights under prefix '%s' (none of '%sin_proj_weight', "
                   "'%sq_proj_weight', '%sq_proj.weight', '%sq_proj.qweight', "
                   "'%sq_proj.qvalues')", P, P, P, P, P, P);
    const st_tensor *bias_kv = find(&fd, "bias_k");
    if (bias_kv || (bias_kv = find(&fd, "bias_v"))) {
        snprintf(why, cap, "tensor '%s': add_bias_kv is not supported", st_show_tensor(bias_kv).s);
        return VKMHA_ERROR_UNSUPPORTED;
    }
    if (gptq || vq) {
        L->n_head = H;
        L->n_kv_head = Hkv;
        if ((st = find_quant_layer(&fd, H, Hkv, gptq != NULL, L)))
            return st;
        return find_norm(f, norm_prefix, L->d_model, L, why, cap);
    }
    const st_tensor *wo = NULL, *bo = NULL;
    if ((st = find_either(&fd, "out_proj.weight", "o_proj.weight", &wo)) ||
        (st = find_either(&fd, "out_proj.bias", "o_proj.bias", &bo)))
        return st;
    if (!wo)
        return st_bad(why, cap, "missing tensor '%sout_proj.weight' (or '%so_proj.weight')", P, P);
    if ((st = check_shape(&fd, wo, 2, 0, 0, "[d_model, n_head * d_v]")))
        return st;
    const uint64_t E = wo->dims[0];
    if ((st = check_shape(&fd, bo, 1, E, 0, "[d_model]")))
        return st;
    const st_tensor *wq, *wk, *wv;
    uint64_t qr, kr, vr; /* rows of the projections: H * d_k, Hkv * d_k, Hkv * d_v */
    if (packed) {
        L->layout = "in_proj_weight";
        if (Hkv != H)
            return st_bad(why, cap,
                       "tensor '%s': a packed in_proj_weight has as many key/value heads as "
                       "query heads, but n_kv_head is %u and n_head %u",
                       st_show_tensor(packed).s, Hkv, H);
        if ((st = check_shape(&fd, packed, 2, 3 * E, E, "[3 * d_model, d_model]")))
            return st;
        if (E % H != 0)
            return st_bad(why, cap,
                       "tensor '%s': d_model (%llu) is not n_head (%u) heads of equal size",
                       st_show_tensor(packed).s, (unsigned long long)E, H);
        wq = wk = wv = packed;
        qr = kr = vr = E;
        L->w[ST_W_Q] = part(packed, 0, E * E);
        L->w[ST_W_K] = part(packed, E * E, E * E);
        L->w[ST_W_V] = part(packed, 2 * E * E, E * E);
    } else {
        const char *kname = sep ? "k_proj_weight" : "k_proj.weight";
        const char *vname = sep ? "v_proj_weight" : "v_proj.weight";
        L->layout = sep ? "q_proj_weight" : "q_proj.weight";
        wq = sep ? sep : lin;
        wk = find(&fd, kname);
        wv = find(&fd, vname);
        if (!wk || !wv)
            return st_bad(why, cap, "missing tensor '%s%s' ('%s' is present)", P,
                       !wk ? kname : vname, st_show_tensor(wq).s);
        if ((st = check_shape(&fd, wq, 2, 0, E, "[n_head * d_k, d_model]")))
            return st;
        qr = wq->dims[0];
        if (qr % H != 0)
            return st_bad(why, cap, "tensor '%s': %llu rows are not n_head (%u) heads of d_k each",
                       st_show_tensor(wq).s, (unsigned long long)qr, H);
        kr = qr / H * Hkv;
        if ((st = check_shape(&fd, wk, 2, kr, 0, "[n_kv_head * d_k, kdim]")) ||
            (st = check_shape(&fd, wv, 2, 0, 0, "[n_kv_head * d_v, vdim]")))
            return st;
        vr = wv->dims[0];
        if (vr % Hkv != 0)
            return st_bad(why, cap,
                       "tensor '%s': %llu rows are not n_kv_head (%u) heads of d_v each",
                       st_show_tensor(wv).s, (unsigned long long)vr, Hkv);
        L->w[ST_W_Q] = whole(wq);
        L->w[ST_W_K] = whole(wk);
        L->w[ST_W_V] = whole(wv);
    }
    if ((st = check_shape(&fd, wo, 2, E, vr / Hkv * H, "[d_model, n_head * d_v]")))
        return st;
    if (lin) {
        const char *names[3] = {"q_proj.bias", "k_proj.bias", "v_proj.bias"};
        const uint64_t rows[3] = {qr, kr, vr};
        for (int i = 0; i < 3; i++) {
            const st_tensor *b = find(&fd, names[i]);
            if ((st = check_shape(&fd, b, 1, rows[i], 0, "[rows of its weight]")))
                return st;
            L->w[ST_B_Q + i] = whole(b);
        }
    } else {
        const st_tensor *b = find(&fd, "in_proj_bias");
        if ((st = check_shape(&fd, b, 1, qr + kr + vr, 0,
                              "[rows of q, k and v projections]")))
            return st;
        if (b) {
            L->w[ST_B_Q] = part(b, 0, qr);
            L->w[ST_B_K] = part(b, qr, kr);
            L->w[ST_B_V] = part(b, qr + kr, vr);
        }
    }
    L->w[ST_W_O] = whole(wo);
    L->w[ST_B_O] = whole(bo);
    if ((st = find_norm(f, norm_prefix, E, L, why, cap)))
        return st;
    L->d_model = (uint32_t)E;
    L->n_head = H;
    L->n_kv_head = Hkv;
    L->d_k = (uint32_t)(qr / H);
    L->d_v = (uint32_t)(vr / Hkv);
    L->kdim = (uint32_t)wk->dims[1];
    L->vdim = (uint32_t)wv->dims[1];
    return VKMHA_SUCCESS;
}

/* ---- conversion ------------------------------------------------------------ */

static bool little_endian(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

const float *st_slice_f32(const st_slice *s)
{
    const uint8_t *p = s->t->bytes + s->first * 4;
    if (s->t->dtype != ST_F32 || !little_endian() || (uintptr_t)p % sizeof(float) != 0)
        return NULL;
    return (const float *)(const void *)p;
}

void st_slice_to_f32(const st_slice *s, float *dst)
{
    const uint32_t size = st_dtype_size(s->t->dtype);
    const uint8_t *p = s->t->bytes + s->first * size;
    for (uint64_t i = 0; i < s->count; i++, p += size) {
        if (s->t->dtype == ST_F32) {
            uint32_t bits = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                            (uint32_t)p[3] << 24;
            memcpy(&dst[i], &bits, sizeof bits);
        } else {
            uint16_t h = (uint16_t)(p[0] | p[1] << 8);
            dst[i] = s->t->dtype == ST_F16 ? vkmha__half_to_float(h) : vkmha__bf16_to_float(h);
        }
    }
}
