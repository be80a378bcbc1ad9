/* Device-resident tensors and the ops on them: computed now on the context's
 * queue (vkmha_*_tensor) or recorded into the application's command buffer
 * (vkmha_*_record). Argument checking is the host-array ops' (src/check.c)
 * plus each tensor's context, liveness, dtype and size. */
#include "vk_internal.h"

#include <string.h>

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT

struct vkmha_tensor {
    vkmha_context *ctx;
    vkmha_tensor_desc desc;
    uint64_t elements, bytes;
    bool wrapped;  /* buf.buf is the application's */
    vk_buffer buf; /* Vulkan */
    void *host;    /* reference backend */
};

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
 * least `need` elements. A NULL tensor passes when optional. */
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

/* Whether two tensors share memory (the same buffer range, or host range). */
static bool tensors_overlap(const vkmha_tensor *a, const vkmha_tensor *b)
{
    if (!a || !b)
        return false;
    if (a == b)
        return true;
    if (a->host || b->host)
        return vkmha__overlap(a->host, a->bytes, b->host, b->bytes);
    return a->buf.buf == b->buf.buf && a->buf.offset < b->buf.offset + b->bytes &&
           b->buf.offset < a->buf.offset + a->bytes;
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

static vkmha_status new_tensor(vkmha_context *ctx, const vkmha_tensor_desc *desc,
                               vkmha_tensor **out)
{
    uint64_t elements = 0;
    vkmha_status st;
    if (!out)
        return vkmha__fail(ctx, INVALID, "%s: out is NULL", ctx->call);
    *out = NULL;
    if ((st = check_desc(ctx, desc, &elements)))
        return st;
    vkmha_tensor *t = vkmha__calloc(ctx, 1, sizeof *t);
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
    if ((st = new_tensor(ctx, desc, &t)))
        return st;
    /* Whole 32-bit words: the shaders read U8 masks four bytes at a time. */
    const uint64_t alloc = (t->bytes + 3) & ~(uint64_t)3;
    if (ctx->vk) {
        if ((st = vk_check_size(ctx->vk, alloc, "desc->dims")) ||
            (st = vk_buffer_create(ctx->vk, alloc, false, false, "tensor", &t->buf))) {
            vkmha_tensor_destroy(t);
            return st;
        }
    } else if (!(t->host = vkmha__calloc(ctx, 1, (size_t)alloc))) {
        vkmha_tensor_destroy(t);
        return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           ctx->call);
    }
    *out = t;
    return VKMHA_SUCCESS;
}

VKMHA_API vkmha_status vkmha_tensor_wrap(vkmha_context *ctx, const vkmha_tensor_desc *desc,
                                         VkBuffer buffer, VkDeviceSize offset,
                                         VkDeviceSize size, vkmha_tensor **out)
{
    vkmha_status st;
    vkmha_tensor *t;
    if (out)
        *out = NULL;
    if (!ctx)
        return INVALID;
    vkmha__begin_call(ctx, "vkmha_tensor_wrap");
    vk_state *vk = ctx->vk;
    if (!vk)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_tensor_wrap: the reference backend has no Vulkan buffers");
    if (buffer == VK_NULL_HANDLE)
        return vkmha__fail(ctx, INVALID, "vkmha_tensor_wrap: buffer is VK_NULL_HANDLE");
    if ((st = new_tensor(ctx, desc, &t)))
        return st;
    const uint32_t es = dtype_size(t->desc.dtype);
    if (offset % es) {
        vkmha_tensor_destroy(t);
        return vkmha__fail(ctx, INVALID,
                           "vkmha_tensor_wrap: offset (%llu) is not a multiple of the "
                           "element size (%u bytes)",
                           (unsigned long long)offset, es);
    }
    /* Bound from the offset below it that the device can bind (a multiple of
     * minStorageBufferOffsetAlignment), whole 4-byte words to its end
     * (vk_dispatch): 16-bit and byte data is read in words. */
    const uint64_t mis = offset % vk->min_storage_offset_align;
    const uint64_t span = ((mis + t->bytes + 3) & ~(uint64_t)3) - mis;
    if (size < span) {
        const uint64_t bytes = t->bytes;
        vkmha_tensor_destroy(t);
        return vkmha__fail(ctx, INVALID,
                           "vkmha_tensor_wrap: size (%llu bytes) is less than the tensor's "
                           "%llu bytes up to the buffer's next 4-byte boundary (%llu)",
                           (unsigned long long)size, (unsigned long long)bytes,
                           (unsigned long long)span);
    }
    if ((st = vk_check_size(vk, mis + span, "desc->dims"))) {
        vkmha_tensor_destroy(t);
        return st;
    }
    t->wrapped = true;
    t->buf.buf = buffer;
    t->buf.offset = offset;
    t->buf.size = span;
    t->buf.id = ++vk->next_buffer_id;
    *out = t;
    return VKMHA_SUCCESS;
}

VKMHA_API void vkmha_tensor_destroy(vkmha_tensor *t)
{
    if (!t)
        return;
    vkmha_context *ctx = t->ctx;
    remove_live(ctx, t);
    if (ctx->vk && !t->wrapped) {
        vk_wait_submissions(ctx->vk); /* a submission may still read it */
        vk_buffer_destroy(ctx->vk, &t->buf);
    }
    vkmha__free(ctx, t->host);
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
    if (!ctx->vk) {
        uint8_t *mem = (uint8_t *)t->host + offset;
        memcpy(up ? mem : host, up ? host : mem, (size_t)bytes);
        return VKMHA_SUCCESS;
    }
    vk_state *vk = ctx->vk;
    /* Mapped memory is written by the host at once: earlier submissions
     * that read the tensor must have finished. */
    if ((up && (st = vk_wait_submissions(vk))) ||
        (st = vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL)))
        return st;
    if (up)
        st = vk_upload(vk, &t->buf, offset, host, bytes);
    else {
        vk_buffer b = t->buf; /* the executor adds b.offset, mapped or not */
        b.offset += offset;
        vk_download(vk, &b, host, (size_t)bytes, 1, (size_t)bytes, 1, (size_t)bytes);
    }
    return vk_exec_end(vk, st, NULL);
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

/* Checks a tensor mask and resolves it: `m` as a host-array mask (the
 * reference backend's pointers, or stand-ins for the Vulkan checks) and the
 * Vulkan buffers of its kinds. */
static vkmha_status resolve_mask(vkmha_context *ctx, const vkmha_tensor_mask *tm,
                                 uint32_t batch, uint32_t heads, uint32_t len_q,
                                 uint32_t len_k, mask_r *m, const vk_buffer *bufs[3])
{
    vkmha_status st;
    static const uint8_t stand_in; /* a non-NULL pointer for an unused array */
    bufs[0] = bufs[1] = bufs[2] = NULL;
    if (!tm)
        return vkmha__check_mask(ctx, ctx->call, NULL, batch, heads, len_q, len_k, m);
    const vkmha_tensor *const t[3] = {tm->key_padding, tm->full, tm->bias};
    vkmha_mask hm = {tm->kinds, NULL, NULL, NULL, tm->bias_batch, tm->bias_heads};
    const void *p[3];
    for (int i = 0; i < 3; i++)
        p[i] = !t[i] ? NULL : t[i]->host ? t[i]->host : (const void *)&stand_in;
    hm.key_padding = p[0];
    hm.full = p[1];
    hm.bias = p[2];
    /* Kinds, pointers and broadcast first (as for host arrays), then the
     * tensors' sizes. */
    if ((st = vkmha__check_mask(ctx, ctx->call, &hm, batch, heads, len_q, len_k, m)))
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
        bufs[i] = &t[i]->buf;
    }
    return VKMHA_SUCCESS;
}

/* ---- running or recording ------------------------------------------------ */

/* Begins the call's commands: on the context's queue (cmd null) or into the
 * application's command buffer. */
static vkmha_status exec_begin(vk_state *vk, VkCommandBuffer cmd)
{
    return vk_exec_begin(vk, cmd ? MODE_RECORD : MODE_SYNC, cmd, NULL);
}

/* Starts a public tensor call: fn is vkmha_<op>_tensor when cmd is null,
 * else vkmha_<op>_record (Vulkan only). */
static vkmha_status tensor_call(vkmha_context *ctx, const char *fn_tensor,
                                const char *fn_record, VkCommandBuffer cmd, bool recording)
{
    vkmha__begin_call(ctx, recording ? fn_record : fn_tensor);
    ctx->tensor_call = true;
    if (recording && !ctx->vk)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: the reference backend has no command buffers", ctx->call);
    if (recording && cmd == VK_NULL_HANDLE)
        return vkmha__fail(ctx, INVALID, "%s: cmd is VK_NULL_HANDLE", ctx->call);
    return VKMHA_SUCCESS;
}

static vkmha_status finish(vk_state *vk, vkmha_status st)
{
    return vk_exec_end(vk, st, NULL);
}

/* What the shared argument checks see of a tensor: only whether it is
 * NULL (a tensor call skips their host-overlap checks), so the handle
 * itself, never dereferenced before check_tensor found it live. */
static const void *host_of(const vkmha_tensor *t)
{
    return t;
}

static vkmha_status matmul_op(vkmha_context *ctx, VkCommandBuffer cmd, bool recording,
                              const vkmha_matmul_desc *desc, const vkmha_tensor *a,
                              const vkmha_tensor *b, const vkmha_tensor *bias, vkmha_tensor *c)
{
    mm_shape s;
    vkmha_status st;
    if ((st = tensor_call(ctx, "vkmha_matmul_tensor", "vkmha_matmul_record", cmd, recording)) ||
        (st = vkmha__check_matmul(ctx, desc, host_of(a), host_of(b), host_of(bias),
                                  host_of(c), &s)) ||
        (st = check_tensor(ctx, "a", a, false, DTYPE_FLOAT, s.extent_a)) ||
        (st = check_tensor(ctx, "b", b, false, DTYPE_FLOAT, s.extent_b)) ||
        (st = check_tensor(ctx, "bias", bias, true, DTYPE_FLOAT, s.n)) ||
        (st = check_tensor(ctx, "c", c, false, DTYPE_FLOAT, s.extent_c)) ||
        (st = check_disjoint(ctx, c, "c", (const vkmha_tensor *const[]){a, b, bias},
                             (const char *const[]){"a", "b", "bias"}, 3)))
        return st;
    const uint32_t dt[4] = {a->desc.dtype, b->desc.dtype,
                            bias ? bias->desc.dtype : VKMHA_DTYPE_F32, c->desc.dtype};
    if (!ctx->vk) {
        if ((st = ref_matmul_typed(ctx, &s, dt, a->host, b->host, bias ? bias->host : NULL,
                                   c->host)))
            return vkmha__fail(ctx, st, "%s: out of host memory", ctx->call);
        return VKMHA_SUCCESS;
    }
    vk_state *vk = ctx->vk;
    if ((st = exec_begin(vk, cmd)))
        return st;
    const vk_matmul_args args = vk_matmul_args_of(
        &s, &a->buf, &b->buf, bias ? &bias->buf : NULL, &c->buf,
        VK_DT(0, dt[0]) | VK_DT(1, dt[1]) | VK_DT(2, dt[2]) | VK_DT(3, dt[3]));
    return finish(vk, vk_record_matmul(vk, &vk->op_sites.sites[OPSITE_MATMUL], &args));
}

static vkmha_status softmax_op(vkmha_context *ctx, VkCommandBuffer cmd, bool recording,
                               const vkmha_softmax_desc *desc, const vkmha_tensor *x,
                               const vkmha_tensor_mask *mask, vkmha_tensor *y)
{
    sm_shape s;
    mask_r m;
    const vk_buffer *masks[3];
    vkmha_status st;
    if ((st = tensor_call(ctx, "vkmha_softmax_tensor", "vkmha_softmax_record", cmd,
                          recording)) ||
        (st = vkmha__check_softmax(ctx, desc, host_of(x), host_of(y), &s)))
        return st;
    const uint64_t n = (uint64_t)s.batch * s.heads * s.len_q * s.len_k;
    if ((st = check_tensor(ctx, "x", x, false, DTYPE_FLOAT, n)) ||
        (st = check_tensor(ctx, "y", y, false, DTYPE_FLOAT, n)) ||
        (st = resolve_mask(ctx, mask, s.batch, s.heads, s.len_q, s.len_k, &m, masks)))
        return st;
    if (x != y && tensors_overlap(x, y))
        return vkmha__fail(ctx, INVALID, "%s: y shares memory with x without being x",
                           ctx->call);
    if (!ctx->vk) {
        if ((st = ref_softmax_typed(ctx, &s, x->desc.dtype, x->host, &m, y->desc.dtype,
                                    y->host)))
            return vkmha__fail(ctx, st, "%s: out of host memory", ctx->call);
        return VKMHA_SUCCESS;
    }
    vk_state *vk = ctx->vk;
    if ((st = exec_begin(vk, cmd)))
        return st;
    vk_softmax_args a = {.scores = &y->buf, .batch = s.batch, .heads = s.heads,
                         .len_q = s.len_q, .len_k = s.len_k, .scale = s.scale,
                         .input = &x->buf,
                         .dtypes = VK_DT(3, y->desc.dtype) | VK_DT(4, x->desc.dtype)};
    vk_mask_args(masks, &m, &a);
    return finish(vk, vk_record_softmax(vk, &vk->op_sites.sites[OPSITE_SOFTMAX], &a));
}

static vkmha_status heads_op(vkmha_context *ctx, VkCommandBuffer cmd, bool recording,
                             bool split, const vkmha_heads_desc *desc, const vkmha_tensor *x,
                             vkmha_tensor *y)
{
    heads_shape s;
    vkmha_status st;
    const char *fn_tensor = split ? "vkmha_split_heads_tensor" : "vkmha_merge_heads_tensor";
    const char *fn_record = split ? "vkmha_split_heads_record" : "vkmha_merge_heads_record";
    if ((st = tensor_call(ctx, fn_tensor, fn_record, cmd, recording)) ||
        (st = vkmha__check_heads(ctx, ctx->call, desc, host_of(x), host_of(y), &s)))
        return st;
    const uint64_t n = (uint64_t)s.batch * s.len * s.heads * s.head_dim;
    if ((st = check_tensor(ctx, "x", x, false, DTYPE_FLOAT, n)) ||
        (st = check_tensor(ctx, "y", y, false, DTYPE_FLOAT, n)) ||
        (st = check_disjoint(ctx, y, "y", (const vkmha_tensor *const[]){x},
                             (const char *const[]){"x"}, 1)))
        return st;
    if (!ctx->vk) {
        if ((st = ref_heads_typed(ctx, &s, split, x->desc.dtype, x->host, y->desc.dtype,
                                  y->host)))
            return vkmha__fail(ctx, st, "%s: out of host memory", ctx->call);
        return VKMHA_SUCCESS;
    }
    vk_state *vk = ctx->vk;
    if ((st = exec_begin(vk, cmd)))
        return st;
    return finish(vk, vk_record_heads(vk, &vk->op_sites.sites[OPSITE_HEADS], &s, split, &x->buf,
                                      &y->buf,
                                      VK_DT(0, x->desc.dtype) | VK_DT(1, y->desc.dtype)));
}

static vkmha_status attention_op(vkmha_context *ctx, VkCommandBuffer cmd, bool recording,
                                 const vkmha_attention_desc *desc, const vkmha_tensor *q,
                                 const vkmha_tensor *k, const vkmha_tensor *v,
                                 const vkmha_tensor_mask *mask, vkmha_tensor *out,
                                 vkmha_tensor *weights)
{
    attn_shape s;
    mask_r m;
    const vk_buffer *masks[3];
    vkmha_status st;
    if ((st = tensor_call(ctx, "vkmha_attention_tensor", "vkmha_attention_record", cmd,
                          recording)) ||
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
        (st = resolve_mask(ctx, mask, s.batch, s.heads, s.len_q, s.len_k, &m, masks)))
        return st;
    const uint32_t dt[5] = {q->desc.dtype, k->desc.dtype, v->desc.dtype, out->desc.dtype,
                            weights ? weights->desc.dtype : VKMHA_DTYPE_F32};
    if (!ctx->vk) {
        if ((st = ref_attention_typed(ctx, &s, dt, q->host, k->host, v->host, &m, out->host,
                                      weights ? weights->host : NULL)))
            return vkmha__fail(ctx, st, "%s: out of host memory", ctx->call);
        return VKMHA_SUCCESS;
    }
    vk_state *vk = ctx->vk;
    vk_attn_plan plan;
    if ((st = vk_attention_prepare(vk, &s, weights != NULL, weights ? &weights->buf : NULL,
                                   (const vk_buffer *const[4]){&q->buf, &k->buf, &v->buf,
                                                               &out->buf},
                                   VK_DT(0, dt[0]) | VK_DT(1, dt[1]) | VK_DT(2, dt[2]) |
                                       VK_DT(3, dt[3]) | VK_DT(4, dt[4]),
                                   &plan)) ||
        (st = exec_begin(vk, cmd)))
        return st;
    for (int i = 0; i < 3; i++)
        plan.masks[i] = masks[i];
    const vk_heads_view vq = vk_view_split(&q->buf, s.heads, s.len_q, s.d_k, dt[0]),
                        vkv = vk_view_split(&k->buf, s.kv_heads, s.len_k, s.d_k, dt[1]),
                        vv = vk_view_split(&v->buf, s.kv_heads, s.len_k, s.d_v, dt[2]),
                        vo = vk_view_split(&out->buf, s.heads, s.len_q, s.d_v, dt[3]);
    return finish(vk, vk_record_attention(vk, &vk->op_sites.sites[OPSITE_ATTENTION], &plan, &m,
                                          &vq, &vkv, &vv, &vo));
}

/* ---- the public entry points ---------------------------------------------- */

VKMHA_API vkmha_status vkmha_matmul_tensor(vkmha_context *ctx, const vkmha_matmul_desc *desc,
                                           const vkmha_tensor *a, const vkmha_tensor *b,
                                           const vkmha_tensor *bias, vkmha_tensor *c)
{
    return ctx ? matmul_op(ctx, VK_NULL_HANDLE, false, desc, a, b, bias, c) : INVALID;
}

VKMHA_API vkmha_status vkmha_matmul_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                           const vkmha_matmul_desc *desc,
                                           const vkmha_tensor *a, const vkmha_tensor *b,
                                           const vkmha_tensor *bias, vkmha_tensor *c)
{
    return ctx ? matmul_op(ctx, cmd, true, desc, a, b, bias, c) : INVALID;
}

VKMHA_API vkmha_status vkmha_softmax_tensor(vkmha_context *ctx, const vkmha_softmax_desc *desc,
                                            const vkmha_tensor *x,
                                            const vkmha_tensor_mask *mask, vkmha_tensor *y)
{
    return ctx ? softmax_op(ctx, VK_NULL_HANDLE, false, desc, x, mask, y) : INVALID;
}

VKMHA_API vkmha_status vkmha_softmax_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                            const vkmha_softmax_desc *desc,
                                            const vkmha_tensor *x,
                                            const vkmha_tensor_mask *mask, vkmha_tensor *y)
{
    return ctx ? softmax_op(ctx, cmd, true, desc, x, mask, y) : INVALID;
}

VKMHA_API vkmha_status vkmha_split_heads_tensor(vkmha_context *ctx,
                                                const vkmha_heads_desc *desc,
                                                const vkmha_tensor *x, vkmha_tensor *y)
{
    return ctx ? heads_op(ctx, VK_NULL_HANDLE, false, true, desc, x, y) : INVALID;
}

VKMHA_API vkmha_status vkmha_merge_heads_tensor(vkmha_context *ctx,
                                                const vkmha_heads_desc *desc,
                                                const vkmha_tensor *x, vkmha_tensor *y)
{
    return ctx ? heads_op(ctx, VK_NULL_HANDLE, false, false, desc, x, y) : INVALID;
}

VKMHA_API vkmha_status vkmha_split_heads_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                                const vkmha_heads_desc *desc,
                                                const vkmha_tensor *x, vkmha_tensor *y)
{
    return ctx ? heads_op(ctx, cmd, true, true, desc, x, y) : INVALID;
}

VKMHA_API vkmha_status vkmha_merge_heads_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                                const vkmha_heads_desc *desc,
                                                const vkmha_tensor *x, vkmha_tensor *y)
{
    return ctx ? heads_op(ctx, cmd, true, false, desc, x, y) : INVALID;
}

VKMHA_API vkmha_status vkmha_attention_tensor(vkmha_context *ctx,
                                              const vkmha_attention_desc *desc,
                                              const vkmha_tensor *q, const vkmha_tensor *k,
                                              const vkmha_tensor *v,
                                              const vkmha_tensor_mask *mask,
                                              vkmha_tensor *out, vkmha_tensor *weights)
{
    return ctx ? attention_op(ctx, VK_NULL_HANDLE, false, desc, q, k, v, mask, out, weights)
               : INVALID;
}

VKMHA_API vkmha_status vkmha_attention_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                              const vkmha_attention_desc *desc,
                                              const vkmha_tensor *q, const vkmha_tensor *k,
                                              const vkmha_tensor *v,
                                              const vkmha_tensor_mask *mask,
                                              vkmha_tensor *out, vkmha_tensor *weights)
{
    return ctx ? attention_op(ctx, cmd, true, desc, q, k, v, mask, out, weights) : INVALID;
}

VKMHA_API vkmha_status vkmha_context_trim(vkmha_context *ctx)
{
    vkmha_status st;
    if (!ctx)
        return INVALID;
    vkmha__begin_call(ctx, "vkmha_context_trim");
    vk_state *vk = ctx->vk;
    if (!vk)
        return VKMHA_SUCCESS;
    if ((st = vk_wait_submissions(vk)))
        return st;
    vk_release_retired(vk);
    for (int i = 0; i < SLOT_COUNT; i++)
        vk_buffer_destroy(vk, &vk->slots[i]);
    vk_buffer_destroy(vk, &vk->upload);
    vk_buffer_destroy(vk, &vk->download);
    return VKMHA_SUCCESS;
}

/* ---- for the layer (src/mha.c) -------------------------------------------- */

vkmha_status vkmha__tensor_arg(vkmha_context *ctx, const char *name, const vkmha_tensor *t,
                               bool optional, uint64_t elements, const void **host,
                               vk_buffer **buf, uint32_t *dtype)
{
    vkmha_status st = check_tensor(ctx, name, t, optional, DTYPE_FLOAT, elements);
    if (st)
        return st;
    *dtype = t ? t->desc.dtype : VKMHA_DTYPE_F32;
    *host = t ? (t->host ? t->host : (const void *)t) : NULL;
    *buf = t ? (vk_buffer *)&t->buf : NULL;
    return VKMHA_SUCCESS;
}

vkmha_status vkmha__tensor_mask(vkmha_context *ctx, const vkmha_tensor_mask *tm,
                                uint32_t batch, uint32_t heads, uint32_t len_q,
                                uint32_t len_k, mask_r *m, const vk_buffer *bufs[3])
{
    return resolve_mask(ctx, tm, batch, heads, len_q, len_k, m, bufs);
}

bool vkmha__tensors_overlap(const vkmha_tensor *a, const vkmha_tensor *b)
{
    return tensors_overlap(a, b);
}
