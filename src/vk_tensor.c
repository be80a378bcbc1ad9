/* The Vulkan backend's tensors and its ops in every form (entries of
 * vkmha_backend_ops): a tensor is a device buffer, vkmha's or the
 * application's (wrapped); an op on host arrays runs through vk_run_host
 * (src/vk_matmul.c and the other op files), an op on tensors records into
 * the context's command buffer (vkmha_*_tensor) or the application's
 * (vkmha_*_record). Also the public functions that take Vulkan types,
 * vkmha_tensor_wrap and the ops' vkmha_*_record: thin wrappers over the
 * backend-neutral src/tensor.c, which checks the arguments. */
#include "vk_internal.h"

#include <string.h>

#define INVALID VKMHA_ERROR_INVALID_ARGUMENT

/* A VkBuffer as vkmha_tensor.mem and vkmha_backend_ops.tensor_wrap's 64-bit
 * handle, and back (a pointer or a uint64_t, by platform). */
_Static_assert(sizeof(VkBuffer) == sizeof(uint64_t), "VkBuffer is a 64-bit handle");
static uint64_t buffer_handle(VkBuffer b)
{
    uint64_t h;
    memcpy(&h, &b, sizeof h);
    return h;
}

static VkBuffer buffer_of(uint64_t h)
{
    VkBuffer b;
    memcpy(&b, &h, sizeof b);
    return b;
}

vk_buffer *vk_tensor_buf(const vkmha_tensor *t)
{
    return t ? &((vk_tensor *)(uintptr_t)t)->buf : NULL;
}

bool vk_tensor_fits(const vk_state *vk, const vkmha_tensor *t)
{
    const vk_view v = vk_view_of(vk_tensor_buf(t), t->desc.dtype);
    return vk_view_fits(vk, &v, t->bytes);
}

vk_view vk_tensor_view(const vkmha_arg *a)
{
    vk_view v = vk_view_of(vk_tensor_buf(a->tensor), a->dtype);
    v.offset += a->at;
    return v;
}

/* vk_view_split of a tensor argument. */
static vk_view tensor_view_split(const vkmha_arg *a, uint32_t heads, uint32_t len, uint32_t d)
{
    vk_view v = vk_view_split(vk_tensor_buf(a->tensor), heads, len, d, a->dtype);
    v.offset += a->at;
    return v;
}

void vk_tensor_masks(const vkmha_mask_arg *m, vk_view views[3])
{
    for (int i = 0; i < 3; i++) {
        views[i] = vk_view_of(vk_tensor_buf(m->t[i]), m->t[i] ? m->t[i]->desc.dtype : 0);
        views[i].offset += m->at[i];
    }
}

vkmha_status vk_run_begin(vk_state *vk, const vkmha_run *run)
{
    static const vk_mode modes[] = {[FORM_TENSOR] = MODE_SYNC, [FORM_RECORD] = MODE_RECORD,
                                    [FORM_SUBMIT] = MODE_SUBMIT};
    return vk_exec_begin(vk, modes[run->form], (VkCommandBuffer)run->cmd, run->sub);
}

vkmha_status vk_run_end(vk_state *vk, const vkmha_run *run, vkmha_status st)
{
    return vk_exec_end(vk, st, run->sub);
}

/* ---- tensors -------------------------------------------------------------- */

vkmha_status vk_tensor_alloc(vkmha_tensor *t)
{
    vk_state *vk = t->ctx->vk;
    vk_tensor *v = (vk_tensor *)t;
    const uint64_t alloc = vkmha__tensor_words(t);
    const bool sparse = alloc > vk->info.max_allocation_size;
    vkmha_status st;
    /* Past maxStorageBufferRange the ops bind it in windows or parts; past
     * maxMemoryAllocationSize it is sparse (where the context can: checked
     * first by the self-check). */
    if ((sparse && (st = vk_self_check_need(vk, VKMHA_PATH_SPARSE))) ||
        (st = vk_check_tensor(vk, alloc, "desc->dims")) ||
        (st = sparse ? vk_buffer_create_sparse(vk, alloc, vk->info.max_allocation_size, "tensor",
                                               &v->buf)
                     : vk_buffer_create(vk, alloc, false, false, "tensor", &v->buf)))
        return st;
    t->mem = buffer_handle(v->buf.buf);
    t->offset = v->buf.offset;
    return VKMHA_SUCCESS;
}

vkmha_status vk_tensor_wrap(vkmha_context *ctx, const vkmha_tensor_desc *desc, uint64_t handle,
                            uint64_t offset, uint64_t size, vkmha_tensor **out)
{
    vkmha_status st;
    vkmha_tensor *t;
    vk_state *vk = ctx->vk;
    const VkBuffer buffer = buffer_of(handle);
    if (buffer == VK_NULL_HANDLE)
        return vkmha__fail(ctx, INVALID, "vkmha_tensor_wrap: buffer is VK_NULL_HANDLE");
    if ((st = vkmha__tensor_new(ctx, desc, &t)))
        return st;
    const uint32_t es = (uint32_t)vkmha__dtype_size(t->desc.dtype);
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
    const uint64_t mis = offset % vk->min_storage_offset_align, bytes = t->bytes;
    const uint64_t span = ((mis + bytes + 3) & ~(uint64_t)3) - mis;
    if (size < span) {
        vkmha_tensor_destroy(t); /* frees t: the message uses `bytes` */
        return vkmha__fail(ctx, INVALID,
                           "vkmha_tensor_wrap: size (%llu bytes) is less than the tensor's "
                           "%llu bytes up to the buffer's next 4-byte boundary (%llu)",
                           (unsigned long long)size, (unsigned long long)bytes,
                           (unsigned long long)span);
    }
    /* Past maxStorageBufferRange the ops bind it in windows or parts
     * (src/split.c); past maxMemoryAllocationSize it is the application's
     * sparse buffer. */
    if (mis + span > vk->max_buffer_size) {
        vkmha_tensor_destroy(t);
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_tensor_wrap: desc->dims need %llu bytes of the buffer, more "
                           "than this device's maxBufferSize (%llu bytes)",
                           (unsigned long long)(mis + span),
                           (unsigned long long)vk->max_buffer_size);
    }
    vk_tensor *v = (vk_tensor *)t;
    v->wrapped = true;
    v->buf.buf = buffer;
    v->buf.offset = offset;
    v->buf.size = span;
    v->buf.id = ++vk->mem.next_buffer_id;
    t->mem = handle;
    t->offset = offset;
    *out = t;
    return VKMHA_SUCCESS;
}

void vk_tensor_free(vkmha_tensor *t)
{
    vk_state *vk = t->ctx->vk;
    vk_tensor *v = (vk_tensor *)t;
    if (!v->wrapped) {
        vk_wait_submissions(vk); /* a submission may still read it */
        vk_buffer_destroy(vk, &v->buf);
    }
}

/* One vk_tensor_copy, in one call. */
static vkmha_status copy_block(const vkmha_tensor *t, uint64_t offset, void *host,
                               uint64_t bytes, bool up)
{
    vk_state *vk = t->ctx->vk;
    vk_buffer *buf = vk_tensor_buf(t);
    vkmha_status st;
    /* Mapped memory is written by the host at once: earlier submissions
     * that read the tensor must have finished. */
    if ((up && (st = vk_wait_submissions(vk))) ||
        (st = vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL)))
        return st;
    if (up)
        st = vk_upload(vk, buf, offset, host, bytes);
    else {
        vk_buffer b = *buf; /* the executor adds b.offset, mapped or not */
        b.offset += offset;
        st = vk_download(vk, &b, host, (size_t)bytes, 1, (size_t)bytes, 1, (size_t)bytes);
    }
    return vk_exec_end(vk, st, NULL);
}

vkmha_status vk_tensor_copy(const vkmha_tensor *t, uint64_t offset, void *host, uint64_t bytes,
                            bool up)
{
    /* An unmapped tensor is copied through staging, one allocation: a
     * tensor past maxMemoryAllocationSize (sparse) in calls of at most that. */
    const uint64_t most =
        vk_tensor_buf(t)->map ? bytes : t->ctx->vk->info.max_allocation_size & ~(uint64_t)15;
    vkmha_status st = VKMHA_SUCCESS;
    for (uint64_t at = 0; at < bytes && !st; at += most) {
        const uint64_t n = bytes - at < most ? bytes - at : most;
        st = copy_block(t, offset + at, (uint8_t *)host + at, n, up);
    }
    return st;
}

/* ---- the ops, in every form ------------------------------------------------ */

/* Host arrays are written through the const pointer of vkmha_arg. */
static void *out_host(const vkmha_arg *a)
{
    return (void *)(uintptr_t)a->host;
}

vkmha_status vk_op_matmul(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                          const vkmha_arg *a, const vkmha_arg *b, const vkmha_arg *bias,
                          const vkmha_arg *c)
{
    vk_state *vk = ctx->vk;
    vkmha_status st;
    if ((st = vk_self_check_need(vk, VK_CHECK_MATMUL)))
        return st;
    if (run->form == FORM_HOST)
        return vk_matmul(vk, s, a->host, b->host, bias->host, out_host(c));
    const vk_matmul_args args = vk_matmul_args_of(s, vk_tensor_view(a), vk_tensor_view(b),
                                                  vk_tensor_view(bias), vk_tensor_view(c));
    /* tensors past maxStorageBufferRange */
    if ((st = vk_matmul_prepare(vk, &args, 1)) ||
        (st = vk_run_begin(vk, run)))
        return st;
    return vk_run_end(vk, run, vk_record_matmul(vk, &vk->desc.op_sites.sites[OPSITE_MATMUL], &args));
}

vkmha_status vk_op_softmax(vkmha_context *ctx, const vkmha_run *run, const sm_shape *s,
                           const vkmha_arg *x, const vkmha_mask_arg *mask, const vkmha_arg *y)
{
    vk_state *vk = ctx->vk;
    vkmha_status st;
    if ((st = vk_self_check_need(vk, 0)))
        return st;
    if (run->form == FORM_HOST)
        return vk_softmax(vk, s, x->host, &mask->m, out_host(y));
    if ((st = vk_head_rules_ensure(vk, s->heads, 0)) || (st = vk_run_begin(vk, run)))
        return st;
    vk_view masks[3];
    vk_tensor_masks(mask, masks);
    vk_softmax_args a = {.scores = vk_tensor_view(y), .input = vk_tensor_view(x),
                         .batch = s->batch, .heads = s->heads, .len_q = s->len_q,
                         .len_k = s->len_k, .scale = s->scale};
    vk_mask_args(masks, &mask->m, &a);
    return vk_run_end(vk, run, vk_record_softmax(vk, &vk->desc.op_sites.sites[OPSITE_SOFTMAX], &a));
}

vkmha_status vk_op_heads(vkmha_context *ctx, const vkmha_run *run, const heads_shape *s,
                         bool split, const vkmha_arg *x, const vkmha_arg *y)
{
    vk_state *vk = ctx->vk;
    vkmha_status st;
    if ((st = vk_self_check_need(vk, 0)))
        return st;
    if (run->form == FORM_HOST)
        return vk_heads(vk, s, split, x->host, out_host(y));
    if ((st = vk_run_begin(vk, run)))
        return st;
    return vk_run_end(vk, run,
                      vk_record_heads(vk, &vk->desc.op_sites.sites[OPSITE_HEADS], s, split,
                                      vk_tensor_view(x), vk_tensor_view(y)));
}

vkmha_status vk_op_attention(vkmha_context *ctx, const vkmha_run *run, const attn_shape *s,
                             const vkmha_arg *q, const vkmha_arg *k, const vkmha_arg *v,
                             const vkmha_mask_arg *mask, const vkmha_arg *out,
                             const vkmha_arg *weights)
{
    vk_state *vk = ctx->vk;
    vkmha_status st;
    if ((st = vk_self_check_need(vk, vk_check_attention(s->d_k, s->d_v))))
        return st;
    if (run->form == FORM_HOST)
        return vk_attention(vk, s, q->host, k->host, v->host, &mask->m, out_host(out),
                            out_host(weights));
    const vk_view vq = tensor_view_split(q, s->heads, s->len_q, s->d_k),
                  vkv = tensor_view_split(k, s->kv_heads, s->len_k, s->d_k),
                  vv = tensor_view_split(v, s->kv_heads, s->len_k, s->d_v),
                  vo = tensor_view_split(out, s->heads, s->len_q, s->d_v),
                  vw = vk_tensor_view(weights);
    vk_attn_plan plan;
    if ((st = vk_attention_prepare(vk, s, &mask->m, weights->tensor != NULL,
                                   weights->tensor ? &vw : NULL,
                                   (const vk_view[4]){vq, vkv, vv, vo}, 0, &plan)) ||
        (st = vk_run_begin(vk, run)))
        return st;
    vk_tensor_masks(mask, plan.masks);
    return vk_run_end(vk, run,
                      vk_record_attention(vk, &vk->desc.op_sites.sites[OPSITE_ATTENTION], &plan,
                                          &mask->m, &vq, &vkv, &vv, &vo));
}

/* ---- the public functions with Vulkan types -------------------------------- */

VKMHA_API vkmha_status vkmha_tensor_wrap(vkmha_context *ctx, const vkmha_tensor_desc *desc,
                                         VkBuffer buffer, VkDeviceSize offset,
                                         VkDeviceSize size, vkmha_tensor **out)
{
    if (out)
        *out = NULL;
    if (!ctx)
        return INVALID;
    vkmha__begin_call(ctx, "vkmha_tensor_wrap");
    return ctx->ops->tensor_wrap(ctx, desc, buffer_handle(buffer), offset, size, out);
}

/* The form of a record call into cmd. */
static vkmha_run record_run(VkCommandBuffer cmd)
{
    return (vkmha_run){.form = FORM_RECORD, .cmd = (void *)cmd};
}

VKMHA_API vkmha_status vkmha_matmul_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                           const vkmha_matmul_desc *desc,
                                           const vkmha_tensor *a, const vkmha_tensor *b,
                                           const vkmha_tensor *bias, vkmha_tensor *c)
{
    const vkmha_run run = record_run(cmd);
    return ctx ? vkmha__matmul_tensors(ctx, &run, desc, a, b, bias, c) : INVALID;
}

VKMHA_API vkmha_status vkmha_softmax_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                            const vkmha_softmax_desc *desc,
                                            const vkmha_tensor *x,
                                            const vkmha_tensor_mask *mask, vkmha_tensor *y)
{
    const vkmha_run run = record_run(cmd);
    return ctx ? vkmha__softmax_tensors(ctx, &run, desc, x, mask, y) : INVALID;
}

VKMHA_API vkmha_status vkmha_split_heads_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                                const vkmha_heads_desc *desc,
                                                const vkmha_tensor *x, vkmha_tensor *y)
{
    const vkmha_run run = record_run(cmd);
    return ctx ? vkmha__heads_tensors(ctx, &run, true, desc, x, y) : INVALID;
}

VKMHA_API vkmha_status vkmha_merge_heads_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                                const vkmha_heads_desc *desc,
                                                const vkmha_tensor *x, vkmha_tensor *y)
{
    const vkmha_run run = record_run(cmd);
    return ctx ? vkmha__heads_tensors(ctx, &run, false, desc, x, y) : INVALID;
}

VKMHA_API vkmha_status vkmha_attention_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                              const vkmha_attention_desc *desc,
                                              const vkmha_tensor *q, const vkmha_tensor *k,
                                              const vkmha_tensor *v,
                                              const vkmha_tensor_mask *mask,
                                              vkmha_tensor *out, vkmha_tensor *weights)
{
    const vkmha_run run = record_run(cmd);
    return ctx ? vkmha__attention_tensors(ctx, &run, desc, q, k, v, mask, out, weights)
               : INVALID;
}
