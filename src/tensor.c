/* Tensors and the ops on them, backend-neutral: the context's live tensors,
 * creation, upload and download, and the tensor forms of each op (computed
 * now, vkmha_*_tensor; recorded into the application's command buffer,
 * vkmha_*_record, whose public functions are in src/vk_tensor.c because
 * they take Vulkan types). Argument checking is the host-array ops'
 * (src/check.c) plus each tensor's context, liveness, dtype, size and
 * memory; the backend's table (vkmha_backend_ops) keeps the storage and
 * computes. */
#include "internal.h"

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT

/* What check_tensor accepts for a float array: F32, F16 or BF16. */
#define DTYPE_FLOAT UINT32_MAX

static uint32_t dtype_size(uint32_t t)
{
    return (uint32_t)vkmha__dtype_size(t);
}

static const char *dtype_name(uint32_t t)
{
    static const char *const names[] = {"F32", "U8", "F16", "BF16"};
    return t == DTYPE_FLOAT ? "F32, F16 or BF16" : t < 4 ? names[t] : "?";
}

/* ---- the context's live tensors ------------------------------------------ */

static bool is_live(const vkmha_context *ctx, const vkmha_tensor *t)
{
    for (uint32_t i = 0; i < ctx->n_tensors; i++)
        if (ctx->tensors[i] == t)
            return true;
    return false;
}

static vkmha_status add_live(vkmha_context *ctx, vkmha_tensor *t)
{
    if (ctx->n_tensors == ctx->cap_tensors) {
        uint32_t cap = ctx->cap_tensors ? 2 * ctx->cap_tensors : 16;
        vkmha_tensor **a = vkmha__realloc(ctx, ctx->tensors, ctx->n_tensors * sizeof *a,
                                          cap * sizeof *a);
        if (!a)
            return VKMHA_ERROR_OUT_OF_HOST_MEMORY;
        ctx->tensors = a;
        ctx->cap_tensors = cap;
    }
    ctx->tensors[ctx->n_tensors++] = t;
    return VKMHA_SUCCESS;
}

static void remove_live(vkmha_context *ctx, const vkmha_tensor *t)
{
    for (uint32_t i = 0; i < ctx->n_tensors; i++)
        if (ctx->tensors[i] == t) {
            ctx->tensors[i] = ctx->tensors[--ctx->n_tensors];
            return;
        }
}

/* Checks tensor argument `name` of the call: live in ctx, of dtype, with at
 * least `need` elements. A NULL tensor passes when optional. Its size past
 * maxStorageBufferRange is the op's to bind (windows or parts: src/split.c,
 * which refuses what no part fits). */
static vkmha_status check_tensor(vkmha_context *ctx, const char *name, const vkmha_tensor *t,
                                 bool optional, uint32_t dtype, uint64_t need)
{
    if (!t)
        return optional ? VKMHA_SUCCESS
                        : vkmha__fail(ctx, INVALID, "%s: %s is NULL", ctx->call, name);
    if (!is_live(ctx, t))
        return vkmha__fail(ctx, INVALID,
                           "%s: %s is not a live tensor of this context (destroyed, or "
                           "created by another context)",
                           ctx->call, name);
    if (dtype == DTYPE_FLOAT ? t->desc.dtype == VKMHA_DTYPE_U8 : t->desc.dtype != dtype)
        return vkmha__fail(ctx, INVALID, "%s: %s has dtype %s, expected %s", ctx->call, name,
                           dtype_name(t->desc.dtype), dtype_name(dtype));
    if (t->elements < need)
        return vkmha__fail(ctx, INVALID,
                           "%s: %s holds %llu elements, the call needs %llu", ctx->call, name,
                           (unsigned long long)t->elements, (unsigned long long)need);
    return VKMHA_SUCCESS;
}

/* Whether two tensors share memory (the same range of one buffer, or of
 * host memory). */
static bool tensors_overlap(const vkmha_tensor *a, const vkmha_tensor *b)
{
    if (!a || !b)
        return false;
    if (a == b)
        return true;
    return a->mem == b->mem && a->offset < b->offset + b->bytes &&
           b->offset < a->offset + a->bytes;
}

/* Outputs must not share memory with inputs (names index both arrays). */
static vkmha_status check_disjoint(vkmha_context *ctx, const vkmha_tensor *out,
                                   const char *out_name, const vkmha_tensor *const in[],
                                   const char *const in_names[], int n)
{
    for (int i = 0; i < n; i++)
        if (out && tensors_overlap(out, in[i]))
            return vkmha__fail(ctx, INVALID, "%s: %s shares memory with %s", ctx->call,
                               out_name, in_names[i]);
    return VKMHA_SUCCESS;
}

/* ---- creation ------------------------------------------------------------ */

static vkmha_status check_desc(vkmha_context *ctx, const vkmha_tensor_desc *d,
                               uint64_t *elements)
{
    if (!d)
        return vkmha__fail(ctx, INVALID, "%s: desc is NULL", ctx->call);
    if (dtype_size(d->dtype) == 0)
        return vkmha__fail(ctx, INVALID, "%s: desc->dtype (%d) is not a vkmha_dtype",
                           ctx->call, (int)d->dtype);
    if (d->rank < 1 || d->rank > VKMHA_MAX_DIMS)
        return vkmha__fail(ctx, INVALID, "%s: desc->rank (%u) is not in 1..%d", ctx->call,
                           d->rank, VKMHA_MAX_DIMS);
    uint64_t n = 1;
    for (uint32_t i = 0; i < d->rank; i++) {
        if (d->dims[i] == 0)
            return vkmha__fail(ctx, INVALID, "%s: desc->dims[%u] is 0 (must be >= 1)",
                               ctx->call, i);
        if (!vkmha__mul_u64(n, d->dims[i], &n))
            return vkmha__fail(ctx, INVALID, "%s: desc->dims overflow 64 bits", ctx->call);
    }
    uint64_t bytes;
    vkmha_status st = vkmha__check_count(ctx, ctx->call, "desc->dims", n, dtype_size(d->dtype),
                                         &bytes);
    if (st)
        return st;
    *elements = n;
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__tensor_new(vkmha_context *ctx, const vkmha_tensor_desc *desc,
                               vkmha_tensor **out)
{
    uint64_t elements = 0;
    vkmha_status st;
    if (!out)
        return vkmha__fail(ctx, INVALID, "%s: out is NULL", ctx->call);
    *out = NULL;
    if ((st = check_desc(ctx, desc, &elements)))
        return st;
    vkmha_tensor *t = vkmha__calloc(ctx, 1, ctx->ops->tensor_size);
    if (!t || add_live(ctx, t)) {
        vkmha__free(ctx, t);
        return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           ctx->call);
    }
    t->ctx = ctx;
    t->desc = *desc;
    for (uint32_t i = desc->rank; i < VKMHA_MAX_DIMS; i++)
        t->desc.dims[i] = 0;
    t->elements = elements;
    t->bytes = elements * dtype_size(desc->dtype);
    *out = t;
    return VKMHA_SUCCESS;
}

VKMHA_API vkmha_status vkmha_tensor_create(vkmha_context *ctx, const vkmha_tensor_desc *desc,
                                           vkmha_tensor **out)
{
    vkmha_status st;
    vkmha_tensor *t;
    if (out)
        *out = NULL;
    if (!ctx)
        return INVALID;
    vkmha__begin_call(ctx, "vkmha_tensor_create");
    if ((st = vkmha__tensor_new(ctx, desc, &t)))
        return st;
    if ((st = ctx->ops->tensor_alloc(t))) {
        vkmha_tensor_destroy(t);
        return st;
    }
    *out = t;
    return VKMHA_SUCCESS;
}

VKMHA_API void vkmha_tensor_destroy(vkmha_tensor *t)
{
    if (!t)
        return;
    vkmha_context *ctx = t->ctx;
    remove_live(ctx, t);
    ctx->ops->tensor_free(t);
    vkmha__free(ctx, t);
}

VKMHA_API vkmha_status vkmha_tensor_get_desc(const vkmha_tensor *t, vkmha_tensor_desc *out)
{
    if (!t || !out)
        return INVALID;
    *out = t->desc;
    return VKMHA_SUCCESS;
}

VKMHA_API uint64_t vkmha_tensor_bytes(const vkmha_tensor *t)
{
    return t ? t->bytes : 0;
}

/* Checks a host copy of `bytes` at `offset` into or out of t. */
static vkmha_status check_copy(vkmha_context *ctx, const vkmha_tensor *t, uint64_t offset,
                               const void *host, const char *host_name, uint64_t bytes)
{
    if (!host)
        return vkmha__fail(ctx, INVALID, "%s: %s is NULL", ctx->call, host_name);
    if (!is_live(ctx, t))
        return vkmha__fail(ctx, INVALID, "%s: t is not a live tensor", ctx->call);
    const uint32_t align = dtype_size(t->desc.dtype) == 2 ? 2 : 4;
    if (offset % align || offset > t->bytes || bytes > t->bytes - offset)
        return vkmha__fail(ctx, INVALID,
                           "%s: offset (%llu) and bytes (%llu) do not fit the tensor's %llu "
                           "bytes at a multiple of %u",
                           ctx->call, (unsigned long long)offset, (unsigned long long)bytes,
                           (unsigned long long)t->bytes, align);
    if (bytes > SIZE_MAX)
        return vkmha__fail(ctx, INVALID, "%s: bytes exceeds SIZE_MAX", ctx->call);
    return VKMHA_SUCCESS;
}

/* Copies `bytes` between host memory and t from byte `offset`, and waits:
 * host -> tensor when `up`. */
static vkmha_status tensor_copy(const vkmha_tensor *t, uint64_t offset, void *host,
                                uint64_t bytes, bool up)
{
    vkmha_status st;
    if (!t)
        return INVALID;
    vkmha_context *ctx = t->ctx;
    vkmha__begin_call(ctx, up ? "vkmha_tensor_upload" : "vkmha_tensor_download");
    if ((st = check_copy(ctx, t, offset, host, up ? "src" : "dst", bytes)) || bytes == 0)
        return st;
    return ctx->ops->tensor_copy(t, offset, host, bytes, up);
}

VKMHA_API vkmha_status vkmha_tensor_upload(vkmha_tensor *t, uint64_t offset, const void *src,
                                           uint64_t bytes)
{
    return tensor_copy(t, offset, (void *)(uintptr_t)src, bytes, true);
}

VKMHA_API vkmha_status vkmha_tensor_download(const vkmha_tensor *t, uint64_t offset, void *dst,
                                             uint64_t bytes)
{
    return tensor_copy(t, offset, dst, bytes, false);
}

/* ---- masks of tensors ----------------------------------------------------- */

/* Checks a tensor mask and resolves it: out->m as a host-array mask whose
 * arrays stand in for the tensors out->t. */
static vkmha_status resolve_mask(vkmha_context *ctx, const vkmha_tensor_mask *tm,
                                 uint32_t batch, uint32_t heads, uint32_t len_q,
                                 uint32_t len_k, int64_t causal_shift, vkmha_mask_arg *out)
{
    vkmha_status st;
    static const uint8_t stand_in; /* a non-NULL pointer for a tensor's array */
    mask_r *m = &out->m;
    out->t[0] = out->t[1] = out->t[2] = NULL;
    out->at[0] = out->at[1] = out->at[2] = 0;
    if (!tm)
        return vkmha__check_mask(ctx, ctx->call, NULL, batch, heads, len_q, len_k, 0, m);
    const vkmha_tensor *const t[3] = {tm->key_padding, tm->full, tm->bias};
    vkmha_mask hm = {.kinds = tm->kinds, .bias_batch = tm->bias_batch,
                     .bias_heads = tm->bias_heads, .causal_offset = tm->causal_offset,
                     .window = tm->window, .softcap = tm->softcap, .alibi = tm->alibi,
                     .sinks = tm->sinks};
    const void *p[3];
    for (int i = 0; i < 3; i++)
        p[i] = t[i] ? (const void *)&stand_in : NULL;
    hm.key_padding = p[0];
    hm.full = p[1];
    hm.bias = p[2];
    /* Kinds, pointers and broadcast first (as for host arrays), then the
     * tensors' sizes. */
    if ((st = vkmha__check_mask(ctx, ctx->call, &hm, batch, heads, len_q, len_k, causal_shift,
                                m)))
        return st;
    const uint64_t need[3] = {(uint64_t)batch * len_k, (uint64_t)batch * len_q * len_k,
                              (uint64_t)m->bias_batch * m->bias_heads * len_q * len_k};
    static const char *const names[3] = {"mask->key_padding", "mask->full", "mask->bias"};
    static const vkmha_dtype types[3] = {VKMHA_DTYPE_U8, VKMHA_DTYPE_U8, VKMHA_DTYPE_F32};
    for (int i = 0; i < 3; i++) {
        if (!t[i])
            continue;
        if ((st = check_tensor(ctx, names[i], t[i], false, types[i], need[i])))
            return st;
        out->t[i] = t[i];
    }
    return VKMHA_SUCCESS;
}

/* ---- the tensor forms of the ops ------------------------------------------ */

vkmha_status vkmha__tensor_call(vkmha_context *ctx, const vkmha_run *run, const char *fn)
{
    vkmha__begin_call(ctx, fn);
    ctx->tensor_call = true;
    if (run->form == FORM_SUBMIT) {
        if (!run->sub)
            return vkmha__fail(ctx, INVALID, "%s: out is NULL", ctx->call);
        *run->sub = NULL;
    }
    if (run->form == FORM_RECORD && ctx->ops->no_commands)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED, "%s: %s", ctx->call,
                           ctx->ops->no_commands);
    if (run->form == FORM_RECORD && !run->cmd)
        return vkmha__fail(ctx, INVALID, "%s: cmd is VK_NULL_HANDLE", ctx->call);
    return VKMHA_SUCCESS;
}

/* What the shared argument checks see of a tensor: only whether it is
 * NULL (a tensor call skips their host-overlap checks), so the handle
 * itself, never dereferenced before check_tensor found it live. */
static const void *host_of(const vkmha_tensor *t)
{
    return t;
}

/* A checked tensor (or NULL: absent) as a backend's argument. */
static vkmha_arg arg_of(const vkmha_tensor *t)
{
    return (vkmha_arg){.tensor = t, .dtype = t ? t->desc.dtype : VKMHA_DTYPE_F32};
}

vkmha_status vkmha__matmul_tensors(vkmha_context *ctx, const vkmha_run *run,
                                   const vkmha_matmul_desc *desc, const vkmha_tensor *a,
                                   const vkmha_tensor *b, const vkmha_tensor *bias,
                                   vkmha_tensor *c)
{
    mm_shape s;
    vkmha_status st;
    if ((st = vkmha__tensor_call(ctx, run,
                                 run->form == FORM_RECORD ? "vkmha_matmul_record"
                                                          : "vkmha_matmul_tensor")) ||
        (st = vkmha__check_matmul(ctx, desc, host_of(a), host_of(b), host_of(bias),
                                  host_of(c), &s)) ||
        (st = check_tensor(ctx, "a", a, false, DTYPE_FLOAT, s.extent_a)) ||
        (st = check_tensor(ctx, "b", b, false,
                           s.quant_b.type ? VKMHA_DTYPE_U8 : DTYPE_FLOAT, s.extent_b)) ||
        (st = check_tensor(ctx, "bias", bias, true, DTYPE_FLOAT, s.n)) ||
        (st = check_tensor(ctx, "c", c, false, DTYPE_FLOAT, s.extent_c)) ||
        (st = check_disjoint(ctx, c, "c", (const vkmha_tensor *const[]){a, b, bias},
                             (const char *const[]){"a", "b", "bias"}, 3)))
        return st;
    const vkmha_arg aa = arg_of(a), ab = arg_of(b), abias = arg_of(bias), ac = arg_of(c);
    return vkmha__matmul_split(ctx, run, &s, &aa, &ab, &abias, &ac);
}

vkmha_status vkmha__softmax_tensors(vkmha_context *ctx, const vkmha_run *run,
                                    const vkmha_softmax_desc *desc, const vkmha_tensor *x,
                                    const vkmha_tensor_mask *mask, vkmha_tensor *y)
{
    sm_shape s;
    vkmha_mask_arg m;
    vkmha_status st;
    if ((st = vkmha__tensor_call(ctx, run,
                                 run->form == FORM_RECORD ? "vkmha_softmax_record"
                                                          : "vkmha_softmax_tensor")) ||
        (st = vkmha__check_softmax(ctx, desc, host_of(x), host_of(y), &s)))
        return st;
    const uint64_t n = (uint64_t)s.batch * s.heads * s.len_q * s.len_k;
    if ((st = check_tensor(ctx, "x", x, false, DTYPE_FLOAT, n)) ||
        (st = check_tensor(ctx, "y", y, false, DTYPE_FLOAT, n)) ||
        (st = resolve_mask(ctx, mask, s.batch, s.heads, s.len_q, s.len_k, 0, &m)))
        return st;
    if (x != y && tensors_overlap(x, y))
        return vkmha__fail(ctx, INVALID, "%s: y shares memory with x without being x",
                           ctx->call);
    const vkmha_arg ax = arg_of(x), ay = arg_of(y);
    return vkmha__softmax_split(ctx, run, &s, &ax, &m, &ay);
}

vkmha_status vkmha__heads_tensors(vkmha_context *ctx, const vkmha_run *run, bool split,
                                  const vkmha_heads_desc *desc, const vkmha_tensor *x,
                                  vkmha_tensor *y)
{
    heads_shape s;
    vkmha_status st;
    static const char *const fns[2][2] = {
        {"vkmha_merge_heads_tensor", "vkmha_merge_heads_record"},
        {"vkmha_split_heads_tensor", "vkmha_split_heads_record"}};
    if ((st = vkmha__tensor_call(ctx, run, fns[split][run->form == FORM_RECORD])) ||
        (st = vkmha__check_heads(ctx, ctx->call, desc, host_of(x), host_of(y), &s)))
        return st;
    const uint64_t n = (uint64_t)s.batch * s.len * s.heads * s.head_dim;
    if ((st = check_tensor(ctx, "x", x, false, DTYPE_FLOAT, n)) ||
        (st = check_tensor(ctx, "y", y, false, DTYPE_FLOAT, n)) ||
        (st = check_disjoint(ctx, y, "y", (const vkmha_tensor *const[]){x},
                             (const char *const[]){"x"}, 1)))
        return st;
    const vkmha_arg ax = arg_of(x), ay = arg_of(y);
    return vkmha__heads_split(ctx, run, &s, split, &ax, &ay);
}

vkmha_status vkmha__attention_tensors(vkmha_context *ctx, const vkmha_run *run,
                                      const vkmha_attention_desc *desc, const vkmha_tensor *q,
                                      const vkmha_tensor *k, const vkmha_tensor *v,
                                      const vkmha_tensor_mask *mask, vkmha_tensor *out,
                                      vkmha_tensor *weights)
{
    attn_shape s;
    vkmha_mask_arg m;
    vkmha_status st;
    if ((st = vkmha__tensor_call(ctx, run,
                                 run->form == FORM_RECORD ? "vkmha_attention_record"
                                                          : "vkmha_attention_tensor")) ||
        (st = vkmha__check_attention(ctx, desc, host_of(q), host_of(k), host_of(v),
                                     host_of(out), host_of(weights), &s)))
        return st;
    const uint64_t nq = (uint64_t)s.batch * s.heads * s.len_q * s.d_k,
                   nk = (uint64_t)s.batch * s.kv_heads * s.len_k * s.d_k,
                   nv = (uint64_t)s.batch * s.kv_heads * s.len_k * s.d_v,
                   no = (uint64_t)s.batch * s.heads * s.len_q * s.d_v,
                   nw = (uint64_t)s.batch * s.heads * s.len_q * s.len_k;
    const vkmha_tensor *const in[3] = {q, k, v};
    static const char *const in_names[3] = {"q", "k", "v"};
    if ((st = check_tensor(ctx, "q", q, false, DTYPE_FLOAT, nq)) ||
        (st = check_tensor(ctx, "k", k, false, DTYPE_FLOAT, nk)) ||
        (st = check_tensor(ctx, "v", v, false, DTYPE_FLOAT, nv)) ||
        (st = check_tensor(ctx, "out", out, false, DTYPE_FLOAT, no)) ||
        (st = check_tensor(ctx, "weights", weights, true, DTYPE_FLOAT, nw)) ||
        (st = check_disjoint(ctx, out, "out", in, in_names, 3)) ||
        (st = check_disjoint(ctx, weights, "weights", in, in_names, 3)) ||
        (st = check_disjoint(ctx, weights, "weights", (const vkmha_tensor *const[]){out},
                             (const char *const[]){"out"}, 1)) ||
        (st = resolve_mask(ctx, mask, s.batch, s.heads, s.len_q, s.len_k, 0, &m)))
        return st;
    const vkmha_arg aq = arg_of(q), ak = arg_of(k), av = arg_of(v), ao = arg_of(out),
                    aw = arg_of(weights);
    return vkmha__attention_split(ctx, run, &s, &aq, &ak, &av, &m, &ao, &aw);
}

/* ---- the public entry points (the record forms: src/vk_tensor.c) ---------- */

static const vkmha_run run_tensor = {.form = FORM_TENSOR};

VKMHA_API vkmha_status vkmha_matmul_tensor(vkmha_context *ctx, const vkmha_matmul_desc *desc,
                                           const vkmha_tensor *a, const vkmha_tensor *b,
                                           const vkmha_tensor *bias, vkmha_tensor *c)
{
    return ctx ? vkmha__matmul_tensors(ctx, &run_tensor, desc, a, b, bias, c) : INVALID;
}

VKMHA_API vkmha_status vkmha_softmax_tensor(vkmha_context *ctx, const vkmha_softmax_desc *desc,
                                            const vkmha_tensor *x,
                                            const vkmha_tensor_mask *mask, vkmha_tensor *y)
{
    return ctx ? vkmha__softmax_tensors(ctx, &run_tensor, desc, x, mask, y) : INVALID;
}

VKMHA_API vkmha_status vkmha_split_heads_tensor(vkmha_context *ctx,
                                                const vkmha_heads_desc *desc,
                                                const vkmha_tensor *x, vkmha_tensor *y)
{
    return ctx ? vkmha__heads_tensors(ctx, &run_tensor, true, desc, x, y) : INVALID;
}

VKMHA_API vkmha_status vkmha_merge_heads_tensor(vkmha_context *ctx,
                                                const vkmha_heads_desc *desc,
                                                const vkmha_tensor *x, vkmha_tensor *y)
{
    return ctx ? vkmha__heads_tensors(ctx, &run_tensor, false, desc, x, y) : INVALID;
}

VKMHA_API vkmha_status vkmha_attention_tensor(vkmha_context *ctx,
                                              const vkmha_attention_desc *desc,
                                              const vkmha_tensor *q, const vkmha_tensor *k,
                                              const vkmha_tensor *v,
                                              const vkmha_tensor_mask *mask,
                                              vkmha_tensor *out, vkmha_tensor *weights)
{
    return ctx ? vkmha__attention_tensors(ctx, &run_tensor, desc, q, k, v, mask, out, weights)
               : INVALID;
}

/* ---- for the layer (src/mha.c) -------------------------------------------- */

vkmha_status vkmha__tensor_arg(vkmha_context *ctx, const char *name, const vkmha_tensor *t,
                               bool optional, uint64_t elements, vkmha_arg *out)
{
    vkmha_status st = check_tensor(ctx, name, t, optional, DTYPE_FLOAT, elements);
    if (st)
        return st;
    *out = arg_of(t);
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__tensor_arg_u8(vkmha_context *ctx, const char *name, const vkmha_tensor *t,
                                  uint64_t bytes, vkmha_arg *out)
{
    vkmha_status st = check_tensor(ctx, name, t, false, VKMHA_DTYPE_U8, bytes);
    if (st)
        return st;
    *out = arg_of(t);
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__tensor_mask(vkmha_context *ctx, const vkmha_tensor_mask *tm,
                                uint32_t batch, uint32_t heads, uint32_t len_q,
                                uint32_t len_k, int64_t causal_shift, vkmha_mask_arg *m)
{
    return resolve_mask(ctx, tm, batch, heads, len_q, len_k, causal_shift, m);
}

bool vkmha__tensors_overlap(const vkmha_tensor *a, const vkmha_tensor *b)
{
    return tensors_overlap(a, b);
}
