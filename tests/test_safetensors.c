/* Layers from safetensors files (vkmha_mha_create_from_safetensors). The
 * files are written here, in C: a header built from a list of tensors, the
 * data encoded as F32, F16 or BF16.
 *   - Every layout (nn.MultiheadAttention packed and with kdim / vdim;
 *     q_proj / k_proj / v_proj with o_proj or out_proj, grouped-query,
 *     d_k != d_v, some biases absent; a LayerNorm under norm_prefix), every
 *     dtype, from a path and from bytes, with a prefix, metadata, unrelated
 *     tensors and an unaligned data section, on both backends: the loaded
 *     layer's forward must equal, bit for bit, that of a layer created with
 *     vkmha_mha_create from the same arrays (the weights are multiples of
 *     1/64 in [-1, 1], exact in F16 and BF16, so the arrays are the same).
 *   - F16 / BF16 conversion of special values (src/half.c,
 *     linked in): zeros, subnormals, Inf, NaN, the extremes.
 *   - Malformed files, each of which must get VKMHA_ERROR_INVALID_ARGUMENT
 *     (add_bias_kv: VKMHA_ERROR_UNSUPPORTED) with a message naming the
 *     tensor or field, no layer, and a context that still works: every
 *     proper prefix of a valid file, and a table of crafted headers.
 * Files live in a fresh directory under $TMPDIR (or /tmp), removed at the
 * end. */
#include "../src/half.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* ---- writing files --------------------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            exit(2);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void putf(buf *b, const char *fmt, ...)
{
    char s[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s, sizeof s, fmt, ap);
    va_end(ap);
    put(b, s, (size_t)n);
}

/* float -> IEEE half, round to nearest even (independent of the library's
 * half -> float). */
static uint16_t to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, m = x & 0x7fffff;
    if (e == 0xff)
        return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
    int he = (int)e - 127 + 15;
    if (he >= 0x1f)
        return (uint16_t)(sign | 0x7c00);
    if (he <= 0) {
        if (he < -10)
            return (uint16_t)sign;
        m |= 0x800000;
        uint32_t shift = (uint32_t)(14 - he), hm = m >> shift, rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1)))
            hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t hm = m >> 13, rem = m & 0x1fff;
    uint32_t h = sign | (uint32_t)he << 10 | hm;
    if (rem > 0x1000 || (rem == 0x1000 && (hm & 1)))
        h++;
    return (uint16_t)h;
}

static uint16_t to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

typedef struct tensor {
    const char *name;
    const char *dtype; /* "F32", "F16", "BF16", or any other name: raw bytes */
    uint32_t rank;
    uint64_t dims[2];
    const float *values; /* NULL: zero bytes of the dtype's size (size 8) */
} tensor;

static size_t elem_size(const char *dtype)
{
    return !strcmp(dtype, "F32") ? 4 : (!strcmp(dtype, "F16") || !strcmp(dtype, "BF16")) ? 2 : 8;
}

static uint64_t numel(const tensor *t)
{
    uint64_t n = 1;
    for (uint32_t r = 0; r < t->rank; r++)
        n *= t->dims[r];
    return n;
}

/* A safetensors file of the tensors, with __metadata__; `pad` makes the
 * header length a multiple of 8 (the writers' habit), else of 8 plus 2, so
 * the data is not 4-byte aligned. */
static buf write_file(const tensor *ts, int n, bool pad)
{
    buf h = {0}, d = {0}, f = {0};
    putf(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        uint64_t begin = d.n, count = numel(&ts[i]);
        for (uint64_t k = 0; k < count; k++) {
            float v = ts[i].values ? ts[i].values[k] : 0.0f;
            if (!strcmp(ts[i].dtype, "F32")) {
                uint32_t x;
                memcpy(&x, &v, 4);
                uint8_t le[4] = {(uint8_t)x, (uint8_t)(x >> 8), (uint8_t)(x >> 16),
                                 (uint8_t)(x >> 24)};
                put(&d, le, 4);
            } else if (elem_size(ts[i].dtype) == 2) {
                uint16_t x = !strcmp(ts[i].dtype, "F16") ? to_half(v) : to_bf16(v);
                uint8_t le[2] = {(uint8_t)x, (uint8_t)(x >> 8)};
                put(&d, le, 2);
            } else {
                uint8_t zero[8] = {0};
                put(&d, zero, 8);
            }
        }
        putf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", ts[i].name, ts[i].dtype);
        for (uint32_t r = 0; r < ts[i].rank; r++)
            putf(&h, "%s%llu", r ? "," : "", (unsigned long long)ts[i].dims[r]);
        putf(&h, "],\"data_offsets\":[%llu,%zu]}", (unsigned long long)begin, d.n);
    }
    putf(&h, "}");
    while (h.n % 8 != (pad ? 0u : 2u))
        putf(&h, " ");
    uint8_t len[8];
    for (int k = 0; k < 8; k++)
        len[k] = (uint8_t)((uint64_t)h.n >> (8 * k));
    put(&f, len, 8);
    put(&f, h.p, h.n);
    if (d.n)
        put(&f, d.p, d.n);
    free(h.p);
    free(d.p);
    return f;
}

/* A file of a raw header and `data_len` data bytes (0x3f repeated). */
static buf raw_file(const char *header, size_t data_len)
{
    buf f = {0};
    uint64_t n = strlen(header);
    uint8_t len[8];
    for (int k = 0; k < 8; k++)
        len[k] = (uint8_t)(n >> (8 * k));
    put(&f, len, 8);
    put(&f, header, n);
    for (size_t k = 0; k < data_len; k++)
        put(&f, "\x3f", 1);
    return f;
}

static char dir[256];

static const char *write_path(const char *name, const buf *f)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || (f->n && fwrite(f->p, 1, f->n, fp) != f->n) || fclose(fp) != 0) {
        printf("Bail out! cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    return path;
}

/* ---- a layer's arrays -------------------------------------------------------- */

typedef struct layer {
    uint32_t d_model, H, Hkv, d_k, d_v, kdim, vdim;
    float *w[10]; /* w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o, gamma, beta */
    float *packed_w, *packed_b;
} layer;

static float *quantized(t_rng *r, size_t n)
{
    float *p = t_alloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((int)(t_next(r) % 129) - 64) / 64.0f;
    return p;
}

static void layer_make(layer *l, t_rng *r, uint32_t d_model, uint32_t H, uint32_t Hkv,
                       uint32_t d_k, uint32_t d_v, uint32_t kdim, uint32_t vdim)
{
    *l = (layer){d_model, H, Hkv, d_k, d_v, kdim, vdim, {0}, NULL, NULL};
    const size_t n[10] = {(size_t)H * d_k * d_model, (size_t)Hkv * d_k * kdim,
                          (size_t)Hkv * d_v * vdim,  (size_t)d_model * H * d_v,
                          (size_t)H * d_k,           (size_t)Hkv * d_k,
                          (size_t)Hkv * d_v,         d_model, d_model, d_model};
    for (int i = 0; i < 10; i++)
        l->w[i] = quantized(r, n[i]);
    for (uint32_t c = 0; c < d_model; c++)
        l->w[8][c] = 1.0f + l->w[8][c] / 2; /* gamma around 1 */
    l->packed_w = t_alloc(n[0] + n[1] + n[2]);
    memcpy(l->packed_w, l->w[0], n[0] * 4);
    memcpy(l->packed_w + n[0], l->w[1], n[1] * 4);
    memcpy(l->packed_w + n[0] + n[1], l->w[2], n[2] * 4);
    l->packed_b = t_alloc(n[4] + n[5] + n[6]);
    memcpy(l->packed_b, l->w[4], n[4] * 4);
    memcpy(l->packed_b + n[4], l->w[5], n[5] * 4);
    memcpy(l->packed_b + n[4] + n[5], l->w[6], n[6] * 4);
}

static void layer_free(layer *l)
{
    for (int i = 0; i < 10; i++)
        free(l->w[i]);
    free(l->packed_w);
    free(l->packed_b);
}

/* ---- layouts ------------------------------------------------------------------ */

enum layout { PACKED, SEPARATE, LINEAR_O, LINEAR_OUT, LAYOUT_COUNT };
static const char *const layout_names[LAYOUT_COUNT] = {
    "nn.MultiheadAttention in_proj_weight", "nn.MultiheadAttention q/k/v_proj_weight (kdim, vdim)",
    "q/k/v_proj + o_proj (GQA, d_k != d_v, no k and o bias)",
    "q/k/v_proj + out_proj, LayerNorm"};

/* The tensors of layout `lay` for l under prefix "model.layers.3.attn." plus
 * unrelated ones; which biases exist follows the layout. */
typedef struct file_spec {
    tensor ts[16];
    char names[16][64];
    int n;
    bool biases[4], norm;
} file_spec;

static void add(file_spec *s, const char *name, const char *dtype, uint32_t rank, uint64_t d0,
                uint64_t d1, const float *v)
{
    tensor *t = &s->ts[s->n];
    snprintf(s->names[s->n], sizeof s->names[0], "%s%s",
             strchr(name, '#') ? "" : "model.layers.3.attn.", name + (name[0] == '#'));
    *t = (tensor){s->names[s->n], dtype, rank, {d0, d1}, v};
    s->n++;
}

static void file_spec_make(file_spec *s, const layer *l, enum layout lay, const char *dt)
{
    memset(s, 0, sizeof *s);
    const uint64_t E = l->d_model, qr = (uint64_t)l->H * l->d_k, kr = (uint64_t)l->Hkv * l->d_k,
                   vr = (uint64_t)l->Hkv * l->d_v;
    add(s, "#model.embed.weight", "F32", 2, 3, 2, NULL);
    add(s, "#model.step", "I64", 1, 1, 0, NULL);
    if (lay == PACKED) {
        add(s, "in_proj_weight", dt, 2, 3 * E, E, l->packed_w);
        add(s, "in_proj_bias", dt, 1, 3 * E, 0, l->packed_b);
        add(s, "out_proj.weight", dt, 2, E, E, l->w[3]);
        add(s, "out_proj.bias", dt, 1, E, 0, l->w[7]);
        memset(s->biases, 1, sizeof s->biases);
    } else if (lay == SEPARATE) {
        add(s, "out_proj.weight", dt, 2, E, E, l->w[3]); /* any order */
        add(s, "q_proj_weight", dt, 2, qr, E, l->w[0]);
        add(s, "k_proj_weight", dt, 2, kr, l->kdim, l->w[1]);
        add(s, "v_proj_weight", dt, 2, vr, l->vdim, l->w[2]);
        add(s, "in_proj_bias", dt, 1, qr + kr + vr, 0, l->packed_b);
        s->biases[0] = s->biases[1] = s->biases[2] = true;
    } else {
        const char *o = lay == LINEAR_O ? "o_proj" : "out_proj";
        char name[32];
        add(s, "q_proj.weight", dt, 2, qr, E, l->w[0]);
        add(s, "q_proj.bias", dt, 1, qr, 0, l->w[4]);
        add(s, "k_proj.weight", dt, 2, kr, l->kdim, l->w[1]);
        add(s, "v_proj.weight", dt, 2, vr, l->vdim, l->w[2]);
        add(s, "v_proj.bias", dt, 1, vr, 0, l->w[6]);
        snprintf(name, sizeof name, "%s.weight", o);
        add(s, name, dt, 2, E, (uint64_t)l->H * l->d_v, l->w[3]);
        s->biases[0] = s->biases[2] = true;
        if (lay == LINEAR_OUT) {
            snprintf(name, sizeof name, "%s.bias", o);
            add(s, name, dt, 1, E, 0, l->w[7]);
            s->biases[3] = true;
            add(s, "#model.layers.3.norm1.weight", dt, 1, E, 0, l->w[8]);
            add(s, "#model.layers.3.norm1.bias", dt, 1, E, 0, l->w[9]);
            s->norm = true;
        }
    }
}

static const char *const backend_names[3] = {"", "Vulkan", "reference"};

/* Loads the file (path or bytes) and compares the forward with that of a
 * layer created from l's arrays, both storing the weights as `storage`. */
static void check_load(vkmha_context *ctx, vkmha_backend be, const layer *l,
                       const file_spec *s, enum layout lay, const char *dt, bool from_path,
                       bool pad, t_rng *r, uint32_t storage)
{
    static const char *const storage_names[4] = {"F32", "", "F16", "BF16"};
    char label[256];
    snprintf(label, sizeof label, "%s, %s, %s stored as %s, %s%s: loaded layer's forward "
             "equals the layer's from the same arrays",
             backend_names[be], layout_names[lay], dt, storage_names[storage],
             from_path ? "from a path" : "from bytes", pad ? "" : ", unaligned data");
    buf f = write_file(s->ts, s->n, pad);
    vkmha_safetensors_desc sd = {0};
    if (from_path)
        sd.path = write_path("layer.safetensors", &f);
    else
        sd.data = f.p, sd.size = f.n;
    sd.prefix = "model.layers.3.attn.";
    sd.n_head = l->H;
    sd.n_kv_head = lay == PACKED || lay == SEPARATE ? 0 : l->Hkv;
    sd.post_norm = s->norm;
    sd.norm_prefix = s->norm ? "model.layers.3.norm1." : NULL;
    sd.norm_eps = 1e-5f;
    sd.storage_dtype = storage;
    vkmha_mha *loaded = NULL, *direct = NULL;
    bool ok = true;
    vkmha_status st = vkmha_mha_create_from_safetensors(ctx, &sd, &loaded);
    if (st != VKMHA_SUCCESS) {
        t_diag("%s: %s", vkmha_status_string(st), vkmha_context_last_error(ctx));
        ok = false;
    }
    vkmha_mha_desc md = {0};
    md.d_model = l->d_model, md.n_head = l->H, md.n_kv_head = l->Hkv;
    md.d_k = l->d_k, md.d_v = l->d_v, md.kdim = l->kdim, md.vdim = l->vdim;
    md.w_q = l->w[0], md.w_k = l->w[1], md.w_v = l->w[2], md.w_o = l->w[3];
    md.b_q = s->biases[0] ? l->w[4] : NULL, md.b_k = s->biases[1] ? l->w[5] : NULL;
    md.b_v = s->biases[2] ? l->w[6] : NULL, md.b_o = s->biases[3] ? l->w[7] : NULL;
    md.post_norm = s->norm;
    md.norm_gamma = s->norm ? l->w[8] : NULL;
    md.norm_beta = s->norm ? l->w[9] : NULL;
    md.norm_eps = 1e-5f;
    md.storage_dtype = storage;
    T_EXPECT_STATUS(vkmha_mha_create(ctx, &md, &direct), VKMHA_SUCCESS, ok);
    if (ok) {
        vkmha_mha_desc got;
        T_EXPECT_STATUS(vkmha_mha_get_desc(loaded, &got), VKMHA_SUCCESS, ok);
        if (got.d_model != l->d_model || got.n_head != l->H || got.n_kv_head != l->Hkv ||
            got.d_k != l->d_k || got.d_v != l->d_v || got.kdim != l->kdim ||
            got.vdim != l->vdim || got.post_norm != s->norm) {
            t_diag("loaded desc: d_model %u n_head %u n_kv_head %u d_k %u d_v %u kdim %u vdim %u",
                   got.d_model, got.n_head, got.n_kv_head, got.d_k, got.d_v, got.kdim,
                   got.vdim);
            ok = false;
        }
    }
    if (ok) {
        const uint32_t B = 2, Lq = 7, Lk = 5;
        float *q = t_random(r, (size_t)B * Lq * l->d_model, -1, 1);
        float *k = t_random(r, (size_t)B * Lk * l->kdim, -1, 1);
        float *v = t_random(r, (size_t)B * Lk * l->vdim, -1, 1);
        const size_t n_out = (size_t)B * Lq * l->d_model, n_w = (size_t)B * l->H * Lq * Lk;
        float *out[2] = {t_alloc(n_out), t_alloc(n_out)}, *wts[2] = {t_alloc(n_w), t_alloc(n_w)};
        vkmha_mha *m[2] = {loaded, direct};
        for (int i = 0; i < 2; i++) {
            vkmha_mha_io io = {0};
            io.batch = B, io.len_q = Lq, io.len_k = Lk;
            io.query = q, io.key = k, io.value = v;
            io.out = out[i], io.attn_weights = wts[i];
            T_EXPECT_STATUS(vkmha_mha_forward(m[i], &io), VKMHA_SUCCESS, ok);
        }
        ok = ok && t_close(label, "out", out[0], out[1], n_out, 0, 0) &&
             t_close(label, "attn_weights", wts[0], wts[1], n_w, 0, 0);
        free(q), free(k), free(v);
        for (int i = 0; i < 2; i++)
            free(out[i]), free(wts[i]);
    }
    vkmha_mha_destroy(loaded);
    vkmha_mha_destroy(direct);
    free(f.p);
    t_report(ok, "%s", label);
}

/* ---- malformed files ---------------------------------------------------------------- */

/* Whether msg contains each of the '|'-separated words (prints the first
 * missing one). */
static bool has_words(const char *msg, const char *words)
{
    char w[256];
    bool ok = true;
    snprintf(w, sizeof w, "%s", words);
    for (char *tok = strtok(w, "|"); tok; tok = strtok(NULL, "|"))
        if (!strstr(msg, tok)) {
            t_diag("message \"%s\" lacks \"%s\"", msg, tok);
            ok = false;
        }
    return ok;
}

/* Expects `st` from loading `bytes` (from bytes) with a message containing
 * each word of `words` ('|'-separated), no layer, and a working context. */
static bool expect_reject(vkmha_context *ctx, const buf *f, const char *prefix, uint32_t n_head,
                          vkmha_status want, const char *words, bool quiet)
{
    vkmha_safetensors_desc sd = {0};
    sd.data = f->p ? f->p : (const void *)"";
    sd.size = f->n;
    sd.prefix = prefix;
    sd.n_head = n_head;
    vkmha_mha *m = (vkmha_mha *)&sd; /* must be overwritten with NULL */
    bool ok = true;
    T_EXPECT_STATUS(vkmha_mha_create_from_safetensors(ctx, &sd, &m), want, ok);
    const char *msg = vkmha_context_last_error(ctx);
    if (m != NULL) {
        t_diag("out is not NULL after a failure");
        vkmha_mha_destroy(m == (vkmha_mha *)&sd ? NULL : m);
        ok = false;
    }
    ok = has_words(msg, words) && ok;
    if (!strstr(msg, "vkmha_mha_create_from_safetensors: desc->data: ")) {
        t_diag("message \"%s\" does not name the call and the source", msg);
        ok = false;
    }
    if (!ok || !quiet)
        t_diag("message: %s", msg);
    return ok && t_context_works(ctx, "after a rejected file");
}

#define T1 "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

typedef struct bad_case {
    const char *what;
    const char *header;   /* NULL: see bytes */
    size_t data_len;
    const char *words;    /* expected in the message */
} bad_case;

static const bad_case bad_headers[] = {
    {"empty header", "", 0, "empty"},
    {"blank header", "        ", 0, "empty"},
    {"not JSON", "{\"w\":", 0, "not valid JSON"},
    {"bad JSON character", "{\"w\" @ 1}", 0, "not valid JSON"},
    {"JSON array, not an object", "[1, 2]", 0, "not one JSON object"},
    {"two objects", "{}{}", 0, "not valid JSON"},
    {"trailing garbage", "{" T1 "} x", 8, "not valid JSON"},
    {"a bare primitive as key", "{1:2}", 0, "JSON"},
    {"no comma between entries", "{" T1 " \"b\":{}}", 8, "not valid JSON"},
    {"no comma inside an entry", "{\"w\":{\"dtype\":\"F32\" \"shape\":[2],\"data_offsets\":[0,8]}}",
     8, "not valid JSON"},
    {"trailing comma in an object", "{" T1 ",}", 8, "not valid JSON"},
    {"trailing comma in an array", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,],\"data_offsets\":[0,8]}}",
     8, "not valid JSON"},
    {"a doubled colon", "{\"w\"::{}}", 0, "not valid JSON"},
    {"a colon in an array", "{\"w\":[1:2]}", 0, "not valid JSON"},
    {"a key without a value", "{\"w\"}", 0, "JSON"},
    {"a bad literal", "{" T1 ",\"x\":tru}", 8, "not valid JSON"},
    {"a bad number", "{" T1 ",\"x\":[1.]}", 8, "not valid JSON"},
    {"a control character in a string", "{\"w\x01\":{}}", 0, "not valid JSON"},
    {"entry not an object", "{\"w\":5}", 0, "'w'|not a JSON object"},
    {"missing dtype", "{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'w'|dtype"},
    {"missing shape", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "'w'|shape"},
    {"missing data_offsets", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "'w'|data_offsets"},
    {"unknown dtype", "{\"w\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
     "'w'|unknown dtype 'F33'"},
    {"dtype not a string", "{\"w\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
     "'w'|dtype"},
    {"dtype twice", "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],"
     "\"data_offsets\":[0,8]}}", 8, "'w'|dtype given twice"},
    {"negative dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
     "'w'|shape[0]"},
    {"fractional dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8,
     "'w'|shape[0]"},
    {"dim with a leading zero", "{\"w\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}",
     8, "not valid JSON"},
    {"dim as a string", "{\"w\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
     "'w'|shape[0]"},
    {"dim above 64 bits", "{\"w\":{\"dtype\":\"F32\",\"shape\":[18446744073709551616],"
     "\"data_offsets\":[0,8]}}", 8, "'w'|shape[0]"},
    {"element count overflows", "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
     "\"data_offsets\":[0,8]}}", 8, "'w'|overflows"},
    {"nine dims", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],"
     "\"data_offsets\":[0,8]}}", 8, "'w'|9 dims"},
    {"shape not an array", "{\"w\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8,
     "'w'|shape is not an array"},
    {"three offsets", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", 8,
     "'w'|data_offsets"},
    {"offsets beyond the data", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
     4, "'w'|out of the data's 4 bytes"},
    {"offsets reversed", "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8,
     "'w'|[8, 0)"},
    {"bytes do not match the shape", "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],"
     "\"data_offsets\":[0,8]}}", 8, "'w'|hold 8 bytes|need 12"},
    {"bytes do not match the dtype", "{\"w\":{\"dtype\":\"F16\",\"shape\":[2],"
     "\"data_offsets\":[0,8]}}", 8, "'w'|need 4"},
    {"overlapping tensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
     "'a'|'b'|overlap"},
    {"a hole between tensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12,
     "bytes [4, 8)|no tensor"},
    {"bytes after the last tensor", "{" T1 "}", 12, "bytes [8, 12)|after the last"},
    {"duplicate name", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "'w' appears twice"},
    {"duplicate __metadata__", "{\"__metadata__\":{},\"__metadata__\":{}}", 0,
     "__metadata__ appears twice"},
    {"__metadata__ not an object", "{\"__metadata__\":[]}", 0, "__metadata__"},
    {"__metadata__ value not a string", "{\"__metadata__\":{\"a\":1}}", 0, "__metadata__"},
    {"no attention weights", "{" T1 "}", 8, "no attention weights|p.in_proj_weight"},
};

/* Valid files with wrong layer contents (prefix "p.", 2 heads). */
typedef struct bad_layer {
    const char *what;
    tensor ts[6];
    int n;
    vkmha_status want;
    const char *words;
} bad_layer;

static const float zeros[64];
#define W(name, dt, r, a, b) {"p." name, dt, r, {a, b}, zeros}

static const bad_layer bad_layers[] = {
    {"no out_proj.weight", {W("in_proj_weight", "F32", 2, 6, 2)}, 1,
     VKMHA_ERROR_INVALID_ARGUMENT, "p.out_proj.weight"},
    {"in_proj_weight misshapen", {W("in_proj_weight", "F32", 2, 5, 2), W("out_proj.weight", "F32", 2, 2, 2)},
     2, VKMHA_ERROR_INVALID_ARGUMENT, "'p.in_proj_weight'|shape [5, 2]|[6, 2]"},
    {"in_proj_weight of rank 1", {W("in_proj_weight", "F32", 1, 12, 0), W("out_proj.weight", "F32", 2, 2, 2)},
     2, VKMHA_ERROR_INVALID_ARGUMENT, "'p.in_proj_weight'|shape [12]"},
    {"in_proj_bias misshapen", {W("in_proj_weight", "F32", 2, 6, 2), W("in_proj_bias", "F32", 1, 5, 0),
     W("out_proj.weight", "F32", 2, 2, 2)}, 3, VKMHA_ERROR_INVALID_ARGUMENT, "'p.in_proj_bias'|[6]"},
    {"out_proj.bias misshapen", {W("in_proj_weight", "F32", 2, 6, 2), W("out_proj.bias", "F32", 1, 3, 0),
     W("out_proj.weight", "F32", 2, 2, 2)}, 3, VKMHA_ERROR_INVALID_ARGUMENT, "'p.out_proj.bias'"},
    {"weight of dtype F64", {W("in_proj_weight", "F64", 2, 6, 2), W("out_proj.weight", "F32", 2, 2, 2)},
     2, VKMHA_ERROR_INVALID_ARGUMENT, "'p.in_proj_weight'|dtype F64"},
    {"weight of dtype I64", {W("in_proj_weight", "F32", 2, 6, 2), W("out_proj.weight", "I64", 2, 2, 2)},
     2, VKMHA_ERROR_INVALID_ARGUMENT, "'p.out_proj.weight'|dtype I64"},
    {"two layouts", {W("in_proj_weight", "F32", 2, 6, 2), W("q_proj.weight", "F32", 2, 2, 2),
     W("out_proj.weight", "F32", 2, 2, 2)}, 3, VKMHA_ERROR_INVALID_ARGUMENT,
     "'p.in_proj_weight'|'p.q_proj.weight'"},
    {"o_proj and out_proj", {W("in_proj_weight", "F32", 2, 6, 2), W("o_proj.weight", "F32", 2, 2, 2),
     W("out_proj.weight", "F32", 2, 2, 2)}, 3, VKMHA_ERROR_INVALID_ARGUMENT,
     "p.out_proj.weight|p.o_proj.weight"},
    {"k_proj.weight missing", {W("q_proj.weight", "F32", 2, 2, 2), W("v_proj.weight", "F32", 2, 2, 2),
     W("o_proj.weight", "F32", 2, 2, 2)}, 3, VKMHA_ERROR_INVALID_ARGUMENT, "p.k_proj.weight"},
    {"v_proj_weight missing", {W("q_proj_weight", "F32", 2, 2, 2), W("k_proj_weight", "F32", 2, 2, 3),
     W("out_proj.weight", "F32", 2, 2, 2)}, 3, VKMHA_ERROR_INVALID_ARGUMENT, "p.v_proj_weight"},
    {"q rows not a multiple of n_head", {W("q_proj.weight", "F32", 2, 3, 2),
     W("k_proj.weight", "F32", 2, 2, 2), W("v_proj.weight", "F32", 2, 2, 2),
     W("o_proj.weight", "F32", 2, 2, 2)}, 4, VKMHA_ERROR_INVALID_ARGUMENT,
     "'p.q_proj.weight'|n_head (2)"},
    {"k_proj.weight rows differ from q's", {W("q_proj.weight", "F32", 2, 2, 2),
     W("k_proj.weight", "F32", 2, 4, 2), W("v_proj.weight", "F32", 2, 2, 2),
     W("o_proj.weight", "F32", 2, 2, 2)}, 4, VKMHA_ERROR_INVALID_ARGUMENT, "'p.k_proj.weight'"},
    {"q_proj.weight columns differ from d_model", {W("q_proj.weight", "F32", 2, 2, 3),
     W("k_proj.weight", "F32", 2, 2, 2), W("v_proj.weight", "F32", 2, 2, 2),
     W("o_proj.weight", "F32", 2, 2, 2)}, 4, VKMHA_ERROR_INVALID_ARGUMENT, "'p.q_proj.weight'|[2, 3]"},
    {"o_proj.weight columns differ from n_head * d_v", {W("q_proj.weight", "F32", 2, 2, 2),
     W("k_proj.weight", "F32", 2, 2, 2), W("v_proj.weight", "F32", 2, 2, 2),
     W("o_proj.weight", "F32", 2, 2, 4)}, 4, VKMHA_ERROR_INVALID_ARGUMENT, "'p.o_proj.weight'"},
    {"a zero dim", {W("q_proj.weight", "F32", 2, 0, 2),
     W("k_proj.weight", "F32", 2, 2, 2), W("v_proj.weight", "F32", 2, 2, 2),
     W("o_proj.weight", "F32", 2, 2, 2)}, 4, VKMHA_ERROR_INVALID_ARGUMENT, "'p.q_proj.weight'"},
    {"k_proj.bias misshapen", {W("q_proj.weight", "F32", 2, 2, 2), W("k_proj.bias", "F32", 1, 3, 0),
     W("k_proj.weight", "F32", 2, 2, 2), W("v_proj.weight", "F32", 2, 2, 2),
     W("o_proj.weight", "F32", 2, 2, 2)}, 5, VKMHA_ERROR_INVALID_ARGUMENT, "'p.k_proj.bias'"},
    {"packed d_model not a multiple of n_head", {W("in_proj_weight", "F32", 2, 9, 3),
     W("out_proj.weight", "F32", 2, 3, 3)}, 2, VKMHA_ERROR_INVALID_ARGUMENT,
     "'p.in_proj_weight'|d_model (3)|n_head (2)"},
    {"add_bias_kv", {W("in_proj_weight", "F32", 2, 6, 2), W("bias_k", "F32", 2, 1, 2),
     W("out_proj.weight", "F32", 2, 2, 2)}, 3, VKMHA_ERROR_UNSUPPORTED, "'p.bias_k'|add_bias_kv"},
};

static void malformed(vkmha_context *ctx, vkmha_backend be)
{
    /* Every proper prefix of a valid file. */
    t_rng r = {7};
    layer l;
    file_spec s;
    layer_make(&l, &r, 4, 2, 2, 2, 2, 4, 4);
    file_spec_make(&s, &l, PACKED, "F16");
    buf f = write_file(s.ts, s.n, true);
    bool ok = true;
    for (size_t n = 0; n < f.n && ok; n++) {
        buf cut = {f.p, n, n};
        ok = expect_reject(ctx, &cut, "model.layers.3.attn.", 2, VKMHA_ERROR_INVALID_ARGUMENT,
                           n < 8 ? "truncated" : "", true);
    }
    t_report(ok, "%s: each of the %zu proper prefixes of a valid file is rejected",
             backend_names[be], f.n);
    free(f.p);
    layer_free(&l);

    /* Header lengths: huge, beyond the file. */
    uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    buf hb = {huge, sizeof huge, sizeof huge};
    t_report(expect_reject(ctx, &hb, NULL, 1, VKMHA_ERROR_INVALID_ARGUMENT,
                           "header length 9223372036854775807|limit", false),
             "%s: header length 2^63 - 1 rejected", backend_names[be]);
    uint8_t over[16] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    buf ob = {over, sizeof over, sizeof over};
    t_report(expect_reject(ctx, &ob, NULL, 1, VKMHA_ERROR_INVALID_ARGUMENT,
                           "truncated|header length 100|only 8 bytes", false),
             "%s: header length beyond the file rejected", backend_names[be]);
    /* Not UTF-8, and a NUL inside the header. */
    const char *const binary[3] = {"{\"w\xff\":1}", "{\"w\xc0\xaf\":1}", "{\"\xed\xa0\x80\":1}"};
    for (int i = 0; i < 3; i++) {
        buf b = raw_file(binary[i], 0);
        t_report(expect_reject(ctx, &b, NULL, 1, VKMHA_ERROR_INVALID_ARGUMENT, "not UTF-8", false),
                 "%s: header with invalid UTF-8 (%s) rejected", backend_names[be],
                 i == 0 ? "0xff" : i == 1 ? "overlong" : "surrogate");
        free(b.p);
    }
    buf nul = raw_file("{}  ", 0);
    nul.p[10] = '\0';
    t_report(expect_reject(ctx, &nul, NULL, 1, VKMHA_ERROR_INVALID_ARGUMENT, "not UTF-8|offset 2",
                           false),
             "%s: header with a NUL byte rejected", backend_names[be]);
    free(nul.p);
    /* A deeply nested value: no recursion, no stack overflow. */
    buf deep = {0};
    putf(&deep, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":");
    for (int i = 0; i < 100000; i++)
        putf(&deep, "[");
    for (int i = 0; i < 100000; i++)
        putf(&deep, "]");
    putf(&deep, "}}");
    put(&deep, "", 1);
    buf df = raw_file((const char *)deep.p, 8);
    t_report(expect_reject(ctx, &df, "q.", 1, VKMHA_ERROR_INVALID_ARGUMENT,
                           "no attention weights", false),
             "%s: a value nested 100000 deep is parsed (and the layer's weights are missing)",
             backend_names[be]);
    free(deep.p);
    free(df.p);

    for (size_t i = 0; i < (sizeof bad_headers / sizeof bad_headers[0]); i++) {
        buf b = raw_file(bad_headers[i].header, bad_headers[i].data_len);
        t_report(expect_reject(ctx, &b, "p.", 1, VKMHA_ERROR_INVALID_ARGUMENT,
                               bad_headers[i].words, false),
                 "%s: %s: rejected, message names it", backend_names[be], bad_headers[i].what);
        free(b.p);
    }
    for (size_t i = 0; i < (sizeof bad_layers / sizeof bad_layers[0]); i++) {
        buf b = write_file(bad_layers[i].ts, bad_layers[i].n, true);
        t_report(expect_reject(ctx, &b, "p.", 2, bad_layers[i].want, bad_layers[i].words, false),
                 "%s: %s: %s, message names the tensor", backend_names[be], bad_layers[i].what,
                 vkmha_status_string(bad_layers[i].want));
        free(b.p);
    }
}

/* Bad arguments and files that cannot be read. */
static void bad_arguments(vkmha_context *ctx)
{
    t_rng r = {11};
    layer l;
    file_spec s;
    layer_make(&l, &r, 4, 2, 2, 2, 2, 4, 4);
    file_spec_make(&s, &l, PACKED, "F32");
    buf f = write_file(s.ts, s.n, true);
    const char *path = write_path("args.safetensors", &f);
    struct {
        const char *what, *path;
        bool data, norm_prefix, post_norm;
        uint32_t n_head, n_kv_head;
        const char *words;
    } cases[] = {
        {"path and data both set", path, true, false, false, 2, 0, "desc->path and desc->data"},
        {"neither path nor data", NULL, false, false, false, 2, 0, "desc->path and desc->data"},
        {"no such file", "/nonexistent/x.safetensors", false, false, false, 2, 0,
#ifdef _WIN32 /* the system's words: ERROR_PATH_NOT_FOUND */
         "/nonexistent/x.safetensors|not found"},
#else
         "/nonexistent/x.safetensors|No such file"},
#endif
        {"a directory", dir, false, false, false, 2, 0, "not a regular file"},
        {"n_head 0", path, false, false, false, 0, 0, "n_head is 0"},
        {"n_head not a multiple of n_kv_head", path, false, false, false, 2, 3, "n_kv_head (3)"},
        {"packed weights with n_kv_head != n_head", path, false, false, false, 2, 1,
         "'model.layers.3.attn.in_proj_weight'|n_kv_head is 1"},
        {"norm_prefix without post_norm", path, false, true, false, 2, 0, "desc->norm_prefix"},
        {"LayerNorm weight missing", path, false, true, true, 2, 0, "'nope.weight'"},
    };
    for (size_t i = 0; i < (sizeof cases / sizeof cases[0]); i++) {
        vkmha_safetensors_desc sd = {0};
        sd.path = cases[i].path;
        sd.data = cases[i].data ? f.p : NULL;
        sd.size = f.n;
        sd.prefix = "model.layers.3.attn.";
        sd.n_head = cases[i].n_head;
        sd.n_kv_head = cases[i].n_kv_head;
        sd.post_norm = cases[i].post_norm;
        sd.norm_prefix = cases[i].norm_prefix ? "nope." : NULL;
        vkmha_mha *m = NULL;
        bool ok = true;
        T_EXPECT_STATUS(vkmha_mha_create_from_safetensors(ctx, &sd, &m),
                        VKMHA_ERROR_INVALID_ARGUMENT, ok);
        ok = has_words(vkmha_context_last_error(ctx), cases[i].words) && ok;
        t_diag("message: %s", vkmha_context_last_error(ctx));
        ok = ok && m == NULL && t_context_works(ctx, cases[i].what);
        t_report(ok, "bad argument: %s", cases[i].what);
    }
    /* A bad storage dtype is found by the layer's checks, and still reported
     * as this function's. */
    vkmha_safetensors_desc bad = {0};
    bad.path = path, bad.prefix = "model.layers.3.attn.", bad.n_head = 2;
    bad.storage_dtype = VKMHA_DTYPE_U8;
    vkmha_mha *bm = NULL;
    bool bok = true;
    T_EXPECT_STATUS(vkmha_mha_create_from_safetensors(ctx, &bad, &bm),
                    VKMHA_ERROR_INVALID_ARGUMENT, bok);
    bok = bok && bm == NULL &&
          has_words(vkmha_context_last_error(ctx),
                    "vkmha_mha_create_from_safetensors:|desc->storage_dtype");
    t_report(bok, "bad argument: storage_dtype U8, named by vkmha_mha_create_from_safetensors");
    vkmha_mha *m = NULL;
    bool ok = true;
    T_EXPECT_STATUS(vkmha_mha_create_from_safetensors(ctx, NULL, &m), VKMHA_ERROR_INVALID_ARGUMENT,
                    ok);
    vkmha_safetensors_desc sd = {0};
    sd.path = path;
    sd.n_head = 2;
    T_EXPECT_STATUS(vkmha_mha_create_from_safetensors(ctx, &sd, NULL),
                    VKMHA_ERROR_INVALID_ARGUMENT, ok);
    T_EXPECT_STATUS(vkmha_mha_create_from_safetensors(NULL, &sd, &m),
                    VKMHA_ERROR_INVALID_ARGUMENT, ok);
    t_report(ok && m == NULL, "NULL desc, out and ctx rejected");
    free(f.p);
    layer_free(&l);
}

/* F16 and BF16 special values through the library's conversion. */
static void conversions(void)
{
    const struct {
        uint16_t bits;
        float want;
    } half[] = {
        {0x0000, 0.0f}, {0x8000, -0.0f}, {0x3c00, 1.0f}, {0xc000, -2.0f}, {0x7bff, 65504.0f},
        {0x0400, 6.103515625e-05f}, {0x0001, 5.9604644775390625e-08f},
        {0x03ff, 6.0975551605224609375e-05f}, {0x3555, 0.333251953125f},
        {0x7c00, INFINITY}, {0xfc00, -INFINITY},
    };
    bool ok = true;
    for (size_t i = 0; i < (sizeof half / sizeof half[0]); i++) {
        float got = vkmha__half_to_float(half[i].bits);
        if (memcmp(&got, &half[i].want, 4) != 0) {
            t_diag("half 0x%04x -> %g, expected %g", half[i].bits, (double)got,
                   (double)half[i].want);
            ok = false;
        }
        if (isfinite(half[i].want) && to_half(half[i].want) != half[i].bits) {
            t_diag("the test's encoder: %g -> 0x%04x, expected 0x%04x", (double)half[i].want,
                   to_half(half[i].want), half[i].bits);
            ok = false;
        }
    }
    ok = ok && isnan(vkmha__half_to_float(0x7e00)) && isnan(vkmha__half_to_float(0xfc01));
    /* Every finite half round-trips through the test's encoder. */
    for (uint32_t h = 0; h < 0x10000 && ok; h++) {
        float f = vkmha__half_to_float((uint16_t)h);
        if (isfinite(f) && to_half(f) != (uint16_t)h && !(f == 0.0f && (h & 0x7fff) == 0)) {
            t_diag("half 0x%04x -> %g -> 0x%04x", h, (double)f, to_half(f));
            ok = false;
        }
    }
    t_report(ok, "F16 -> fp32: zeros, normals, subnormals, the largest, Inf, NaN; all 63488 "
             "finite halves round-trip");
    ok = vkmha__bf16_to_float(0x3f80) == 1.0f && vkmha__bf16_to_float(0xc040) == -3.0f &&
         vkmha__bf16_to_float(0x7f80) == INFINITY && isnan(vkmha__bf16_to_float(0x7fc0)) &&
         vkmha__bf16_to_float(0x0001) == 9.18354961579912115600575419704879435795832466228193376178712270530013483949005603790283203125e-41f &&
         vkmha__bf16_to_float(0x7f7f) == 3.38953138925153547590470800371487866880e+38f;
    t_report(ok, "BF16 -> fp32: 1, -3, Inf, NaN, the smallest subnormal, the largest");
}

/* Every host allocation of a load (the parser's tokens and tensor table,
 * conversions, the layer) fails in turn: OUT_OF_HOST_MEMORY, no layer,
 * nothing leaked, the context still works; then a load with no failure. */
static void host_allocation_failures(vkmha_backend be)
{
    t_rng r = {13};
    layer l;
    file_spec s;
    layer_make(&l, &r, 4, 2, 2, 2, 2, 4, 4);
    file_spec_make(&s, &l, LINEAR_OUT, "BF16");
    buf f = write_file(s.ts, s.n, true);
    t_counting c = {0, 0, 0, 0};
    vkmha_allocator a = {t_counting_alloc, NULL, t_counting_free, &c};
    vkmha_context_desc cd = {0};
    cd.backend = be;
    cd.enable_validation = be == VKMHA_BACKEND_VULKAN && t_validation();
    cd.allocator = &a;
    cd.log = t_log;
    vkmha_context *ctx = NULL;
    if (vkmha_context_create(&cd, &ctx) != VKMHA_SUCCESS) {
        t_report(false, "%s: context with a counting allocator", backend_names[be]);
        free(f.p);
        layer_free(&l);
        return;
    }
    vkmha_safetensors_desc sd = {0};
    sd.data = f.p, sd.size = f.n;
    sd.prefix = "model.layers.3.attn.";
    sd.n_head = 2;
    sd.n_kv_head = 2;
    sd.post_norm = true;
    sd.norm_prefix = "model.layers.3.norm1.";
    bool ok = true;
    long n = 1, baseline = c.live;
    for (;; n++) {
        vkmha_mha *m = NULL;
        c.fail_at = c.total + n;
        c.failed = 0;
        vkmha_status st = vkmha_mha_create_from_safetensors(ctx, &sd, &m);
        c.fail_at = 0;
        if (c.failed == 0) {
            T_EXPECT_STATUS(st, VKMHA_SUCCESS, ok);
            vkmha_mha_destroy(m);
            break;
        }
        if (st != VKMHA_ERROR_OUT_OF_HOST_MEMORY || m != NULL || c.live != baseline ||
            !strstr(vkmha_context_last_error(ctx), "out of host memory")) {
            t_diag("allocation %ld failed: %s, \"%s\", layer %p, %ld allocations live (%ld "
                   "before)", n, vkmha_status_string(st), vkmha_context_last_error(ctx),
                   (void *)m, c.live, baseline);
            vkmha_mha_destroy(m);
            ok = false;
            break;
        }
        if (!t_context_works(ctx, "after a failed host allocation")) {
            ok = false;
            break;
        }
        baseline = c.live;
    }
    ok = ok && c.live == baseline;
    if (be == VKMHA_BACKEND_VULKAN)
        t_report_validation(ctx);
    vkmha_context_destroy(ctx);
    t_report(ok && c.live == 0,
             "%s: each of the %ld host allocations of a load fails in turn: "
             "OUT_OF_HOST_MEMORY, nothing leaked, context usable; all freed at destroy",
             backend_names[be], n - 1);
    free(f.p);
    layer_free(&l);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/vkmha-st-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    conversions();
    const vkmha_backend backends[2] = {VKMHA_BACKEND_REFERENCE, VKMHA_BACKEND_VULKAN};
    const char *const dts[3] = {"F32", "F16", "BF16"};
    for (int bi = 0; bi < 2; bi++) {
        vkmha_context *ctx = t_context(backends[bi], 0);
        t_rng r = {42 + (uint64_t)bi};
        layer ls[LAYOUT_COUNT];
        layer_make(&ls[PACKED], &r, 12, 3, 3, 4, 4, 12, 12);
        layer_make(&ls[SEPARATE], &r, 12, 2, 2, 6, 6, 5, 7);
        layer_make(&ls[LINEAR_O], &r, 16, 4, 2, 4, 3, 9, 16);
        layer_make(&ls[LINEAR_OUT], &r, 10, 2, 1, 5, 5, 10, 10);
        for (int lay = 0; lay < LAYOUT_COUNT; lay++)
            for (int d = 0; d < 3; d++) {
                file_spec s;
                file_spec_make(&s, &ls[lay], (enum layout)lay, dts[d]);
                check_load(ctx, backends[bi], &ls[lay], &s, (enum layout)lay, dts[d],
                           d != 1, true, &r, VKMHA_DTYPE_F32);
                if (d == 0)
                    check_load(ctx, backends[bi], &ls[lay], &s, (enum layout)lay, dts[d],
                               false, false, &r, VKMHA_DTYPE_F32);
                /* Kept in 16 bits on the device (the values are exact in both). */
                if (lay == SEPARATE)
                    check_load(ctx, backends[bi], &ls[lay], &s, (enum layout)lay, dts[d],
                               false, true, &r, d == 2 ? VKMHA_DTYPE_BF16 : VKMHA_DTYPE_F16);
            }
        for (int lay = 0; lay < LAYOUT_COUNT; lay++)
            layer_free(&ls[lay]);
        malformed(ctx, backends[bi]);
        if (bi == 0)
            bad_arguments(ctx);
        host_allocation_failures(backends[bi]);
        if (backends[bi] == VKMHA_BACKEND_VULKAN)
            t_report_validation(ctx);
        vkmha_context_destroy(ctx);
    }
    char path[512];
    const char *names[2] = {"layer.safetensors", "args.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        remove(path);
    }
    rmdir(dir);
    return t_finish();
}
