/* Tensors at any element offset of an application's buffer: every op and
 * the layer on tensors wrapped (vkmha_tensor_wrap) at offsets that are not
 * multiples of the device's minStorageBufferOffsetAlignment, so that their
 * descriptors start below them and the shaders add the difference (the
 * `misalign` push words, shaders/typed.glsl). Each operand starts its own
 * number of elements past an aligned offset (fp32 1, 2 or 3; fp16 1, 2 or 4;
 * mask bytes 1, 2 or 3), which exercises the element-by-element fallback of
 * vec4 accesses and the shifted vec4 path.
 *
 * Each case runs twice on the same context, once on aligned tensors and once
 * on misaligned ones, and checks that
 *   - the misaligned result is bitwise the aligned one (the same kernels,
 *     only the addressing differs), and
 *   - it matches the reference backend on host arrays of the same dtype,
 *     element by element: fp32 atol 1e-5 + rtol 1e-4; fp16 2 units in the
 *     last place for an op (atol 2^-14 + rtol 2^-9), 8 for the layer; the
 *     cooperative-matrix fused attention rounds its weights P to fp16
 *     before P V, which adds up to 2^-11 sum_j p_j |v_j| <= 2^-11 max |v|
 *     (v in [-1, 1] here) to atol.
 * Contexts: the device's own kernels (on lavapipe the CPU-shaped ones,
 * native 16-bit storage), and the workgroup-per-row kernels with the
 * workgroup-shared fused kernel and packed 16-bit storage. Shapes are not
 * multiples of any tile. The arena is a buffer of vkmha's own device memory
 * (the program links the library's objects), wrapped as an engine would
 * wrap its own. */
#include "util_dtype.h"

#include "internal.h"
#include "vk_internal.h"

#include <stdlib.h>
#include <string.h>

/* Where the wrapped tensors of one run live. */
typedef struct arena {
    vkmha_context *ctx;
    vk_buffer buf;
    uint64_t next;  /* the next free byte */
    bool misalign;  /* place tensors past aligned offsets */
    uint32_t count; /* tensors placed so far */
    vkmha_tensor *made[16];
    uint32_t n_made;
} arena;

#define ARENA_BYTES (4u << 20)

static uint32_t elem_size(uint32_t dtype)
{
    return dtype == VKMHA_DTYPE_U8 ? 1 : (uint32_t)vkmha__dtype_size(dtype);
}

/* A tensor of n elements holding src (fp32 values converted to dtype, or
 * bytes for U8), at the next 256-byte boundary of the arena, or past it. */
static vkmha_tensor *put(arena *a, uint32_t dtype, uint64_t n, const void *src)
{
    static const uint32_t steps[3][3] = {{1, 2, 3}, {1, 2, 4}, {1, 2, 3}};
    const uint32_t es = elem_size(dtype);
    const uint32_t *s = steps[es == 4 ? 0 : es == 2 ? 1 : 2];
    const uint64_t off = ((a->next + 255) & ~(uint64_t)255) +
                         (a->misalign ? (uint64_t)es * s[a->count % 3] : 0);
    const uint64_t bytes = n * es, span = bytes + 8;
    a->count++;
    a->next = off + span;
    vkmha_tensor_desc d = {.dtype = dtype, .rank = 1, .dims = {(uint32_t)n}};
    vkmha_tensor *t = NULL;
    if (a->next > ARENA_BYTES || a->n_made == VKMHA_ARRAY_LEN(a->made) ||
        vkmha_tensor_wrap(a->ctx, &d, a->buf.buf, off, span, &t) != VKMHA_SUCCESS) {
        t_diag("cannot wrap %llu elements at %llu: %s", (unsigned long long)n,
               (unsigned long long)off, vkmha_context_last_error(a->ctx));
        return NULL;
    }
    a->made[a->n_made++] = t;
    if (!src)
        return t;
    void *bits = malloc((size_t)bytes);
    if (dtype == VKMHA_DTYPE_U8 || dtype == VKMHA_DTYPE_F32)
        memcpy(bits, src, (size_t)bytes);
    else
        vkmha__from_f32(dtype, src, (size_t)n, bits);
    vkmha_status st = vkmha_tensor_upload(t, 0, bits, bytes);
    free(bits);
    return st == VKMHA_SUCCESS ? t : NULL;
}

/* A tensor's elements as fp32 (n of them). */
static float *get(const vkmha_tensor *t, uint32_t dtype, uint64_t n)
{
    float *out = t_alloc((size_t)n);
    void *bits = malloc((size_t)(n * elem_size(dtype)));
    if (vkmha_tensor_download(t, 0, bits, n * elem_size(dtype)) != VKMHA_SUCCESS)
        memset(bits, 0xff, (size_t)(n * elem_size(dtype))); /* NaN: fails below */
    vkmha__to_f32(dtype, bits, (size_t)n, out);
    free(bits);
    return out;
}

/* Two tensors' elements, one after the other. */
static float *get2(const vkmha_tensor *a, uint64_t na, const vkmha_tensor *b, uint64_t nb,
                   uint32_t dtype)
{
    float *fa = get(a, dtype, na), *fb = get(b, dtype, nb), *r = t_alloc((size_t)(na + nb));
    memcpy(r, fa, (size_t)na * sizeof(float));
    memcpy(r + na, fb, (size_t)nb * sizeof(float));
    free(fa);
    free(fb);
    return r;
}

static void arena_reset(arena *a, bool misalign)
{
    for (uint32_t i = 0; i < a->n_made; i++)
        vkmha_tensor_destroy(a->made[i]);
    a->n_made = 0;
    a->next = 0;
    a->count = 0;
    a->misalign = misalign;
}

typedef struct check_case {
    const char *name;
    uint32_t dtype;
    bool layer;
    bool p16; /* fp16 weights P (the cooperative fused kernel): see the top */
} check_case;

/* Misaligned vs aligned (bitwise) and vs the reference (tolerance). */
static void report(const check_case *c, const char *ctx_tag, const float *aligned,
                   const float *misaligned, const float *want, size_t n)
{
    const bool f16 = c->dtype != VKMHA_DTYPE_F32;
    const double atol = (f16 ? 1.0 / 16384 : 1e-5) + (c->p16 ? 1.0 / 2048 : 0.0);
    const double rtol = f16 ? (c->layer ? 8.0 : 2.0) / 1024 : 1e-4;
    char name[160];
    snprintf(name, sizeof name, "[%s] %s %s", ctx_tag, c->name,
             c->dtype == VKMHA_DTYPE_F32 ? "f32" : c->dtype == VKMHA_DTYPE_F16 ? "f16" : "bf16");
    bool same = aligned && misaligned && memcmp(aligned, misaligned, n * sizeof(float)) == 0;
    if (!same && aligned && misaligned)
        for (size_t i = 0; i < n; i++)
            if (memcmp(&aligned[i], &misaligned[i], sizeof(float))) {
                t_diag("%s: element %zu misaligned %.9g, aligned %.9g", name, i,
                       (double)misaligned[i], (double)aligned[i]);
                break;
            }
    bool close = misaligned && t_close(name, "out", misaligned, want, n, atol, rtol);
    t_report(same && close,
             "%s: wrapped at element offsets past the descriptor alignment = aligned "
             "bitwise, = reference (atol %g, rtol %g)",
             name, atol, rtol);
}

/* ---- the ops ---------------------------------------------------------------- */

/* Runs `run` on aligned then misaligned tensors; it returns its output. */
typedef float *(*run_fn)(arena *a, uint32_t dtype, const void *arg);

static void both(arena *a, const check_case *c, const char *tag, run_fn run, const void *arg,
                 const float *want, size_t n)
{
    arena_reset(a, false);
    float *aligned = run(a, c->dtype, arg);
    arena_reset(a, true);
    float *misaligned = run(a, c->dtype, arg);
    arena_reset(a, false);
    report(c, tag, aligned, misaligned, want, n);
    free(aligned);
    free(misaligned);
}

typedef struct mm_arg {
    vkmha_matmul_desc d;
    const float *a, *b, *bias;
    size_t na, nb, nc;
} mm_arg;

static float *run_matmul(arena *ar, uint32_t dt, const void *p)
{
    const mm_arg *m = p;
    vkmha_tensor *a = put(ar, dt, m->na, m->a), *b = put(ar, dt, m->nb, m->b),
                 *bias = put(ar, dt, m->d.n, m->bias), *c = put(ar, dt, m->nc, NULL);
    if (!a || !b || !bias || !c || vkmha_matmul_tensor(ar->ctx, &m->d, a, b, bias, c))
        return NULL;
    return get(c, dt, m->nc);
}

typedef struct sm_arg {
    vkmha_softmax_desc d;
    const float *x, *bias;
    const uint8_t *kp, *full;
    uint32_t kinds;
    size_t n;
} sm_arg;

static float *run_softmax(arena *ar, uint32_t dt, const void *p)
{
    const sm_arg *s = p;
    const uint32_t B = s->d.batch, H = s->d.heads, Lq = s->d.len_q, Lk = s->d.len_k;
    vkmha_tensor *x = put(ar, dt, s->n, s->x), *y = put(ar, dt, s->n, NULL);
    vkmha_tensor_mask m = {.kinds = s->kinds};
    m.key_padding = put(ar, VKMHA_DTYPE_U8, (uint64_t)B * Lk, s->kp);
    m.full = put(ar, VKMHA_DTYPE_U8, (uint64_t)B * Lq * Lk, s->full);
    m.bias = put(ar, VKMHA_DTYPE_F32, (uint64_t)B * H * Lq * Lk, s->bias);
    if (!x || !y || !m.key_padding || !m.full || !m.bias ||
        vkmha_softmax_tensor(ar->ctx, &s->d, x, &m, y))
        return NULL;
    return get(y, dt, s->n);
}

typedef struct heads_arg {
    vkmha_heads_desc d;
    const float *x;
    size_t n;
} heads_arg;

/* Split, then merge the split heads back (both kernels, twice misaligned). */
static float *run_heads(arena *ar, uint32_t dt, const void *p)
{
    const heads_arg *h = p;
    vkmha_tensor *x = put(ar, dt, h->n, h->x), *s = put(ar, dt, h->n, NULL),
                 *y = put(ar, dt, h->n, NULL);
    if (!x || !s || !y || vkmha_split_heads_tensor(ar->ctx, &h->d, x, s) ||
        vkmha_merge_heads_tensor(ar->ctx, &h->d, s, y))
        return NULL;
    return get2(s, h->n, y, h->n, dt);
}

typedef struct attn_arg {
    vkmha_attention_desc d;
    const float *q, *k, *v, *bias;
    const uint8_t *kp;
    size_t nq, nk, nv, no, nw;
} attn_arg;

/* The output, then the weights. */
static float *run_attention(arena *ar, uint32_t dt, const void *p)
{
    const attn_arg *t = p;
    vkmha_tensor *q = put(ar, dt, t->nq, t->q), *k = put(ar, dt, t->nk, t->k),
                 *v = put(ar, dt, t->nv, t->v), *o = put(ar, dt, t->no, NULL),
                 *w = put(ar, dt, t->nw, NULL);
    vkmha_tensor_mask m = {.kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_BIAS,
                           .bias_batch = 1};
    m.key_padding = put(ar, VKMHA_DTYPE_U8, (uint64_t)t->d.batch * t->d.len_k, t->kp);
    m.bias = put(ar, VKMHA_DTYPE_F32, (uint64_t)t->d.heads * t->d.len_q * t->d.len_k, t->bias);
    if (!q || !k || !v || !o || !w || !m.key_padding || !m.bias ||
        vkmha_attention_tensor(ar->ctx, &t->d, q, k, v, &m, o, w))
        return NULL;
    return get2(o, t->no, w, t->nw, dt);
}

typedef struct layer_arg {
    vkmha_mha *mha;
    vkmha_mha_tensors io; /* shape and path; tensors set per run */
    const float *x;
    size_t n;
} layer_arg;

static float *run_layer(arena *ar, uint32_t dt, const void *p)
{
    const layer_arg *l = p;
    vkmha_mha_tensors io = l->io;
    vkmha_tensor *x = put(ar, dt, l->n, l->x), *y = put(ar, dt, l->n, NULL);
    io.query = io.key = io.value = x;
    io.out = y;
    if (!x || !y || vkmha_mha_forward_tensor(l->mha, &io))
        return NULL;
    return get(y, dt, l->n);
}

/* ---- the cases -------------------------------------------------------------- */

static void cases(vkmha_context *gpu, vkmha_context *ref, const char *tag, uint32_t dt,
                  t_rng *r)
{
    arena a = {.ctx = gpu};
    if (vk_buffer_create(gpu->vk, ARENA_BYTES, false, false, "arena", &a.buf)) {
        t_report(false, "[%s] the arena: %s", tag, vkmha_context_last_error(gpu));
        return;
    }
    const uint32_t es = elem_size(dt);

    { /* matmul, op T with bias: C [2][13][10] = A [2][13][21] B^T [10][21] */
        mm_arg m = {.d = {.batch = 2, .m = 13, .n = 10, .k = 21, .op_b = VKMHA_OP_T,
                          .stride_b = VKMHA_BROADCAST, .dtype = dt},
                    .na = 2 * 13 * 21, .nb = 10 * 21, .nc = 2 * 13 * 10};
        float *fa = t_random(r, m.na, -1, 1), *fb = t_random(r, m.nb, -1, 1),
              *fbias = t_random(r, 10, -1, 1);
        m.a = fa, m.b = fb, m.bias = fbias;
        void *ha = t_to_dt(dt, fa, m.na), *hb = t_to_dt(dt, fb, m.nb),
             *hbias = t_to_dt(dt, fbias, 10), *hc = malloc(m.nc * es);
        vkmha_matmul(ref, &m.d, ha, hb, hbias, hc);
        float *want = t_from_dt(dt, hc, m.nc);
        both(&a, &(check_case){"matmul op T, bias, broadcast B", dt, false, false}, tag, run_matmul,
             &m, want, m.nc);
        m.d.op_b = VKMHA_OP_N; /* B as [21][10] */
        vkmha_matmul(ref, &m.d, ha, hb, hbias, hc);
        free(want);
        want = t_from_dt(dt, hc, m.nc);
        both(&a, &(check_case){"matmul op N, bias, broadcast B", dt, false, false}, tag, run_matmul,
             &m, want, m.nc);
        free(want), free(fa), free(fb), free(fbias);
        free(ha), free(hb), free(hbias), free(hc);
    }
    { /* softmax with every mask kind, as tensors */
        sm_arg s = {.d = {.batch = 2, .heads = 3, .len_q = 5, .len_k = 9, .scale = 0.5f,
                          .dtype = dt},
                    .kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_FULL | VKMHA_MASK_BIAS |
                             VKMHA_MASK_CAUSAL};
        s.n = 2 * 3 * 5 * 9;
        float *x = t_random(r, s.n, -3, 3), *bias = t_random(r, s.n, -1, 1);
        uint8_t *kp = t_random_mask(r, 2 * 9, 0.3), *full = t_random_mask(r, 2 * 5 * 9, 0.2);
        s.x = x, s.bias = bias, s.kp = kp, s.full = full;
        vkmha_mask hm = {.kinds = s.kinds, .key_padding = kp, .full = full, .bias = bias};
        void *hx = t_to_dt(dt, x, s.n), *hy = malloc(s.n * es);
        vkmha_softmax(ref, &s.d, hx, &hm, hy);
        float *want = t_from_dt(dt, hy, s.n);
        both(&a, &(check_case){"softmax, key padding + full + bias + causal", dt, false, false},
             tag, run_softmax, &s, want, s.n);
        s.d.len_k = 8; /* whole vec4s per row */
        s.n = 2 * 3 * 5 * 8;
        vkmha_softmax(ref, &s.d, hx, &hm, hy);
        free(want);
        want = t_from_dt(dt, hy, s.n);
        both(&a, &(check_case){"softmax len_k 8, every mask kind", dt, false, false}, tag,
             run_softmax, &s, want, s.n);
        free(want), free(x), free(bias), free(kp), free(full), free(hx), free(hy);
    }
    { /* split then merge heads */
        heads_arg h = {.d = {.batch = 2, .len = 13, .heads = 3, .head_dim = 8, .dtype = dt},
                       .n = 2 * 13 * 3 * 8};
        float *x = t_random(r, h.n, -1, 1);
        h.x = x;
        void *hx = t_to_dt(dt, x, h.n), *hs = malloc(h.n * es);
        vkmha_split_heads(ref, &h.d, hx, hs);
        float *want = t_alloc(2 * h.n), *split = t_from_dt(dt, hs, h.n);
        memcpy(want, split, h.n * sizeof(float));
        vkmha__to_f32(dt, hx, h.n, want + h.n); /* merged: x as stored */
        both(&a, &(check_case){"split heads, merge heads", dt, false, false}, tag, run_heads, &h,
             want, 2 * h.n);
        free(want), free(split), free(x), free(hx), free(hs);
    }
    { /* attention, GQA, d_k != d_v, key padding + bias, with weights */
        attn_arg t = {.d = {.batch = 2, .heads = 4, .kv_heads = 2, .len_q = 7, .len_k = 11,
                            .d_k = 12, .d_v = 8, .dtype = dt}};
        t.nq = 2 * 4 * 7 * 12, t.nk = 2 * 2 * 11 * 12, t.nv = 2 * 2 * 11 * 8;
        t.no = 2 * 4 * 7 * 8, t.nw = 2 * 4 * 7 * 11;
        float *q = t_random(r, t.nq, -1, 1), *k = t_random(r, t.nk, -1, 1),
              *v = t_random(r, t.nv, -1, 1), *bias = t_random(r, 4 * 7 * 11, -1, 1);
        uint8_t *kp = t_random_mask(r, 2 * 11, 0.3);
        t.q = q, t.k = k, t.v = v, t.bias = bias, t.kp = kp;
        vkmha_mask hm = {.kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_BIAS, .key_padding = kp,
                         .bias = bias, .bias_batch = 1};
        void *hq = t_to_dt(dt, q, t.nq), *hk = t_to_dt(dt, k, t.nk), *hv = t_to_dt(dt, v, t.nv);
        void *ho = malloc((t.no + t.nw) * es);
        vkmha_attention(ref, &t.d, hq, hk, hv, &hm, ho, (char *)ho + t.no * es);
        float *want = t_from_dt(dt, ho, t.no + t.nw);
        static const struct {
            vkmha_attention_path path;
            const char *name;
        } paths[] = {{VKMHA_ATTENTION_PATH_FUSED, "attention fused, weights"},
                     {VKMHA_ATTENTION_PATH_UNFUSED, "attention unfused, weights"}};
        vkmha_context_info info = {0};
        vkmha_context_get_info(gpu, &info);
        for (size_t i = 0; i < VKMHA_ARRAY_LEN(paths); i++) {
            t.d.path = paths[i].path;
            const bool p16 = info.cooperative_matrix && dt == VKMHA_DTYPE_F16 &&
                             paths[i].path == VKMHA_ATTENTION_PATH_FUSED;
            both(&a, &(check_case){paths[i].name, dt, false, p16}, tag, run_attention, &t, want,
                 t.no + t.nw);
        }
        free(want), free(q), free(k), free(v), free(bias), free(kp);
        free(hq), free(hk), free(hv), free(ho);
    }
    { /* the layer: d_model 24, 3 heads, post-norm, storage and activations in dt */
        t_layer l;
        t_layer_make(&l, r, 24, 3, 0, 2, 9, 0, 0);
        l.desc.storage_dtype = dt;
        vkmha_mha *g = NULL, *rm = NULL;
        const size_t n = 2 * 9 * 24;
        void *hx = t_to_dt(dt, l.io.query, n), *hy = malloc(n * es);
        vkmha_mha_io rio = {.batch = 2, .len_q = 9, .query = hx, .key = hx, .value = hx,
                            .out = hy, .dtype = dt};
        if (vkmha_mha_create(gpu, &l.desc, &g) || vkmha_mha_create(ref, &l.desc, &rm) ||
            vkmha_mha_forward(rm, &rio)) {
            t_report(false, "[%s] layer: %s", tag, vkmha_context_last_error(NULL));
        } else {
            float *want = t_from_dt(dt, hy, n);
            layer_arg la = {.mha = g, .io = {.batch = 2, .len_q = 9}, .x = l.io.query, .n = n};
            la.io.attention_path = VKMHA_ATTENTION_PATH_FUSED;
            both(&a, &(check_case){"layer fused", dt, true, false}, tag, run_layer, &la, want, n);
            la.io.attention_path = VKMHA_ATTENTION_PATH_UNFUSED;
            both(&a, &(check_case){"layer unfused", dt, true, false}, tag, run_layer, &la, want, n);
            free(want);
        }
        vkmha_mha_destroy(g);
        vkmha_mha_destroy(rm);
        free(hx), free(hy);
        t_layer_free(&l);
    }
    vk_buffer_destroy(gpu->vk, &a.buf);
}

/* A wrap at an offset that is not a multiple of the element size fails,
 * naming the offset; one that is, past the alignment, succeeds. */
static void bad_offsets(vkmha_context *gpu)
{
    vk_buffer b = {0};
    bool ok = vk_buffer_create(gpu->vk, 4096, false, false, "arena", &b) == VKMHA_SUCCESS;
    vkmha_tensor *t = NULL;
    const vkmha_tensor_desc f32 = {.dtype = VKMHA_DTYPE_F32, .rank = 1, .dims = {8}};
    const vkmha_tensor_desc f16 = {.dtype = VKMHA_DTYPE_F16, .rank = 1, .dims = {7}};
    vkmha_status st = vkmha_tensor_wrap(gpu, &f32, b.buf, 258, 64, &t);
    ok = ok && st == VKMHA_ERROR_INVALID_ARGUMENT && !t &&
         t_has_word(vkmha_context_last_error(gpu), "offset");
    st = vkmha_tensor_wrap(gpu, &f16, b.buf, 257, 64, &t);
    ok = ok && st == VKMHA_ERROR_INVALID_ARGUMENT && !t;
    /* 7 fp16 at byte 258: 14 bytes, whole words to byte 272 (span 14). */
    st = vkmha_tensor_wrap(gpu, &f16, b.buf, 258, 13, &t);
    ok = ok && st == VKMHA_ERROR_INVALID_ARGUMENT && !t &&
         t_has_word(vkmha_context_last_error(gpu), "size");
    st = vkmha_tensor_wrap(gpu, &f16, b.buf, 258, 14, &t);
    ok = ok && st == VKMHA_SUCCESS && t;
    vkmha_tensor_destroy(t);
    st = vkmha_tensor_wrap(gpu, &f32, b.buf, 260, 32, &t);
    ok = ok && st == VKMHA_SUCCESS && t;
    vkmha_tensor_destroy(t);
    t_report(ok, "vkmha_tensor_wrap: an offset that is not a multiple of the element size, "
                 "or a size short of the last whole word, is INVALID naming it; element "
                 "offsets past the alignment are accepted");

    /* 6 fp16 written at bytes 258 .. 269 share their first and last words
     * with bytes 256, 257, 270, 271 of the application's: kept. */
    const vkmha_tensor_desc bytes = {.dtype = VKMHA_DTYPE_U8, .rank = 1, .dims = {16}};
    const vkmha_tensor_desc six = {.dtype = VKMHA_DTYPE_F16, .rank = 1, .dims = {6}};
    const vkmha_heads_desc hd = {.batch = 1, .len = 1, .heads = 1, .head_dim = 6};
    const uint16_t x16[6] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600};
    uint8_t fill[16], got[16];
    memset(fill, 0xab, sizeof fill);
    vkmha_tensor *all = NULL, *x = NULL, *y = NULL;
    ok = vkmha_tensor_wrap(gpu, &bytes, b.buf, 256, 16, &all) == VKMHA_SUCCESS &&
         vkmha_tensor_create(gpu, &six, &x) == VKMHA_SUCCESS &&
         vkmha_tensor_wrap(gpu, &six, b.buf, 258, 14, &y) == VKMHA_SUCCESS &&
         vkmha_tensor_upload(all, 0, fill, sizeof fill) == VKMHA_SUCCESS &&
         vkmha_tensor_upload(x, 0, x16, sizeof x16) == VKMHA_SUCCESS &&
         vkmha_split_heads_tensor(gpu, &hd, x, y) == VKMHA_SUCCESS &&
         vkmha_tensor_download(all, 0, got, sizeof got) == VKMHA_SUCCESS;
    ok = ok && memcmp(got + 2, x16, sizeof x16) == 0 && got[0] == 0xab && got[1] == 0xab &&
         got[14] == 0xab && got[15] == 0xab;
    vkmha_tensor_destroy(all);
    vkmha_tensor_destroy(x);
    vkmha_tensor_destroy(y);
    vk_buffer_destroy(gpu->vk, &b);
    t_report(ok, "an fp16 tensor that starts and ends in the middle of 4-byte words is "
                 "written exactly, its neighbours' halves of those words kept");
}

/* Views at byte offsets inside one buffer (vk_view.offset, the recording
 * functions' operands): split heads from a view 7 fp32 elements into the
 * arena into a view 2 elements further than its end, recorded with
 * vk_record_heads and run by the executor; the result is the reference's
 * and the bytes around the output are kept. */
static void view_offsets(vkmha_context *gpu, vkmha_context *ref, t_rng *r)
{
    vk_state *vk = gpu->vk;
    const heads_shape hs = {.batch = 2, .len = 5, .heads = 3, .head_dim = 7};
    const vkmha_heads_desc hd = {.batch = 2, .len = 5, .heads = 3, .head_dim = 7};
    const size_t n = 2 * 5 * 3 * 7, bytes = n * sizeof(float);
    float *x = t_random(r, n, -1, 1), *want = t_alloc(n), *got = t_alloc(n + 2);
    float *fill = t_alloc(n + 2);
    for (size_t i = 0; i < n + 2; i++)
        fill[i] = -7.0f;
    vk_buffer b = {0};
    const VkDeviceSize x_at = 7 * 4, y_at = x_at + bytes + 8;
    bool ok = vk_buffer_create(vk, 4096, false, false, "arena", &b) == VKMHA_SUCCESS &&
              vkmha_split_heads(ref, &hd, x, want) == VKMHA_SUCCESS;
    vkmha__begin_call(gpu, "view_offsets");
    ok = ok && vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL) == VKMHA_SUCCESS;
    if (ok) {
        const vk_view xv = {.buf = &b, .offset = x_at, .dtype = VKMHA_DTYPE_F32},
                      yv = {.buf = &b, .offset = y_at, .dtype = VKMHA_DTYPE_F32};
        vkmha_status st = vk_upload(vk, &b, x_at, x, bytes);
        if (!st)
            st = vk_upload(vk, &b, y_at - 4, fill, bytes + 8);
        if (!st)
            st = vk_record_heads(vk, &vk->desc.op_sites.sites[OPSITE_HEADS], &hs, true, xv, yv);
        vk_buffer around = b;
        around.offset = y_at - 4;
        if (!st)
            st = vk_download(vk, &around, got, bytes + 8, 1, bytes + 8, 1, bytes + 8);
        ok = vk_exec_end(vk, st, NULL) == VKMHA_SUCCESS;
    }
    ok = ok && memcmp(got + 1, want, bytes) == 0 && got[0] == -7.0f && got[n + 1] == -7.0f;
    vk_buffer_destroy(vk, &b);
    t_report(ok, "recording on views at byte offsets 28 and %llu of one buffer: split heads "
                 "= reference exactly, the elements around the output kept",
             (unsigned long long)y_at);
    free(x), free(want), free(got), free(fill);
}

/* A tensor wrapped from an application's buffer past maxMemoryAllocationSize
 * (an engine's own sparse buffer; here an ordinary one on a context that
 * believes 64 KiB allocations and 64 KiB of range): b of [601][128] fp32
 * (300 KiB) at 4 bytes past an aligned offset of a 1 MiB buffer is taken,
 * and vkmha_matmul_tensor (op T, its windows) matches the reference
 * within test_matmul's tolerance. */
static void wrap_past_allocation(vkmha_context *ref, t_rng *r)
{
    enum { M = 5, N = 601, K = 128 };
    const vkmha_debug_options dbg = {.max_storage_buffer_range = 64 * 1024,
                                     .max_allocation_size = 64 * 1024};
    vkmha_context *gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &dbg, NULL, NULL);
    float *a = t_random(r, M * K, -1, 1), *b = t_random(r, (size_t)N * K, -1, 1);
    float *want = t_alloc(M * N), *got = t_alloc(M * N);
    const vkmha_tensor_desc da = {VKMHA_DTYPE_F32, 2, {M, K}}, db = {VKMHA_DTYPE_F32, 2, {N, K}},
                            dc = {VKMHA_DTYPE_F32, 2, {M, N}};
    vk_buffer buf = {0};
    vkmha_tensor *ta = NULL, *tb = NULL, *tc = NULL;
    vkmha_matmul_desc md = {0};
    md.m = M, md.n = N, md.k = K, md.op_b = VKMHA_OP_T;
    const uint64_t bytes = (uint64_t)N * K * 4;
    vkmha_status st = vk_buffer_create(gpu->vk, 1u << 20, false, false, "arena", &buf);
    if (!st)
        st = vkmha_tensor_wrap(gpu, &db, buf.buf, 260, bytes, &tb);
    if (st)
        t_diag("wrap: %s", vkmha_context_last_error(gpu));
    bool ok = !st && !vkmha_tensor_create(gpu, &da, &ta) && !vkmha_tensor_create(gpu, &dc, &tc) &&
              !vkmha_tensor_upload(ta, 0, a, M * K * 4) && !vkmha_tensor_upload(tb, 0, b, bytes) &&
              !vkmha_matmul_tensor(gpu, &md, ta, tb, NULL, tc) &&
              !vkmha_tensor_download(tc, 0, got, M * N * 4) &&
              !vkmha_matmul(ref, &md, a, b, NULL, want) &&
              t_close("wrapped b past the allocation", "c", got, want, M * N,
                      2e-6 * sqrt((double)K), 1e-5);
    t_report(ok, "vkmha_tensor_wrap of 300 KiB of an application's buffer past "
                 "maxMemoryAllocationSize (64 KiB): taken, and a matmul on it matches the "
                 "reference");
    vkmha_tensor_destroy(ta), vkmha_tensor_destroy(tb), vkmha_tensor_destroy(tc);
    vk_buffer_destroy(gpu->vk, &buf);
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
    free(a), free(b), free(want), free(got);
}

int main(void)
{
    t_rng r = {20261123};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    static const struct {
        const char *tag, *row_kernels;
        vkmha_fused_kernel kernel;
        bool packed;
    } variants[] = {
        {"device kernels", NULL, VKMHA_FUSED_KERNEL_AUTO, false},
        {"row kernels gpu, workgroup-shared fused, packed 16-bit", "gpu",
         VKMHA_FUSED_KERNEL_SHARED, true},
    };
    for (size_t v = 0; v < VKMHA_ARRAY_LEN(variants); v++) {
        if (variants[v].row_kernels)
            setenv("VKMHA_ROW_KERNELS", variants[v].row_kernels, 1);
        vkmha_debug_options dbg = {.fused_kernel = variants[v].kernel,
                                   .no_native_16bit = variants[v].packed};
        vkmha_context *gpu = t_context_ex(VKMHA_BACKEND_VULKAN, 0, &dbg, NULL, NULL);
        unsetenv("VKMHA_ROW_KERNELS");
        if (v == 0)
            t_diag("minStorageBufferOffsetAlignment %llu bytes",
                   (unsigned long long)gpu->vk->min_storage_offset_align);
        static const uint32_t dtypes[] = {VKMHA_DTYPE_F32, VKMHA_DTYPE_F16};
        for (size_t d = 0; d < VKMHA_ARRAY_LEN(dtypes); d++)
            cases(gpu, ref, variants[v].tag, dtypes[d], &r);
        bad_offsets(gpu);
        view_offsets(gpu, ref, &r);
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
    }
    wrap_past_allocation(ref, &r);
    vkmha_context_destroy(ref);
    return t_finish();
}
