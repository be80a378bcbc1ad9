/* Layers 5-7 of the Vulkan backend (see src/vk_base.h): the executor,
 * dispatches, masks, the host-array driver. */
#ifndef VKMHA_VK_EXEC_H
#define VKMHA_VK_EXEC_H

#include "vk_resources.h"
/* ---- the executor (src/vk_command.c, src/vk_dispatch.c) ------------------- */
/* Grows a plan array of `size`-byte elements to hold one more. */
vkmha_status vk_plan_grow(vk_state *vk, void **arr, uint32_t n, uint32_t *cap, size_t size);
/* Every call on the device is planned, then run, by one executor:
 *  - vk_exec_begin(vk, mode, cmd, sub) starts a plan for one of the modes:
 *    MODE_SYNC, the context's command buffer, submitted and waited for;
 *    MODE_RECORD, the application's command buffer `cmd` (push descriptors
 *    needed; no uploads or downloads); MODE_SUBMIT, a new submission *sub,
 *    submitted and not waited for.
 *  - vk_upload, vk_dispatch (vk_dispatch_groups), vk_barrier and
 *    vk_download add its steps. Nothing is recorded yet: pipelines are
 *    created and descriptor sites written as passes are added, so a failure
 *    leaves no command buffer half recorded (the application's untouched).
 *  - vk_exec_end(vk, st, sub) runs it: sizes staging for the copies that
 *    need it, begins the command buffer, records a barrier against earlier
 *    work, the uploads, the passes with their barriers and the downloads,
 *    then ends it per mode (MODE_SYNC also copies the downloads into host
 *    memory). st != VKMHA_SUCCESS (a planning failure) abandons the plan
 *    and returns st; any failure leaves *sub NULL.
 * Device buffers named by a plan must exist until vk_exec_end; a buffer's
 * recreation (vk_slot_ensure) belongs before vk_exec_begin. */
vkmha_status vk_exec_begin(vk_state *vk, vk_mode mode, VkCommandBuffer cmd,
                           struct vkmha_submission **sub);
vkmha_status vk_exec_end(vk_state *vk, vkmha_status st, struct vkmha_submission **sub);
/* The self-check's first pass: while gather, vk_exec_end drops each plan
 * after its pipelines are wanted (nothing runs). */
void vk_exec_gather(vk_state *vk, bool gather);
/* Frees the plan's arrays (the context's destruction). */
void vk_exec_destroy(vk_state *vk);
/* Adds a copy of `bytes` from host memory src into dst at byte `offset`
 * (directly if dst is mapped, else through staging); src is read by
 * vk_exec_end. */
vkmha_status vk_upload(vk_state *vk, const vk_buffer *dst, VkDeviceSize offset,
                       const void *src, uint64_t bytes);
/* The same for n elements of dtype `from` written to dst as dtype `to`. */
vkmha_status vk_upload_converted(vk_state *vk, const vk_buffer *dst, const void *src,
                                 uint32_t from, uint32_t to, uint64_t n);
/* Adds src -> host copies of n2 groups of n1 blocks of `len` bytes; the data
 * lands in dst when vk_exec_end returns successfully (MODE_SYNC). At most
 * four per call (an internal error beyond). */
vkmha_status vk_download(vk_state *vk, const vk_buffer *src, void *dst, size_t len, size_t n1,
                         size_t stride1, size_t n2, size_t stride2);
/* Orders the next pass after the writes of every step before it. */
void vk_barrier(vk_state *vk);
/* Adds a device copy of `bytes` from src at byte src_off to dst at dst_off
 * (offsets past each buffer's start; any alignment). */
vkmha_status vk_copy(vk_state *vk, const vk_buffer *src, VkDeviceSize src_off,
                     const vk_buffer *dst, VkDeviceSize dst_off, VkDeviceSize bytes);
/* Adds vkCmdUpdateBuffer of `bytes` (a multiple of 4; one command per
 * 65536, the most one takes) from host memory data (read by vk_exec_end)
 * into dst at byte offset (a multiple of 4): small data in the command
 * buffer itself, ordered with the passes, for data that differs between
 * recordings of one buffer. */
vkmha_status vk_update(vk_state *vk, const vk_buffer *dst, VkDeviceSize offset,
                       const void *data, VkDeviceSize bytes);
/* Adds zeros over the whole of buffer dst (vkCmdFillBuffer). */
vkmha_status vk_zero(vk_state *vk, const vk_buffer *dst);
/* Adds a dispatch of groups (x, y, z) of `pipe` with the views bufs[0 ..
 * n_bufs) bound through `site` (an absent view binds the dummy) and
 * push_size bytes of push constants. The pipeline is specialized for the
 * views' dtypes (vk_view_dtypes), the shader's `variant` bits
 * (VK_VARIANT_ACCUMULATE, VK_VARIANT_ADDEND; 0: none) and, where a view
 * starts past an aligned offset, for reading the misalign words
 * (VK_VARIANT_MISALIGNED). The views and push size must be the kernel row's
 * (src/vk_kernels.c): anything else is an internal error. */
vkmha_status vk_dispatch(vk_state *vk, vk_site *site, vk_pipe pipe, const vk_view bufs[],
                         uint32_t n_bufs, uint32_t variant, const void *push,
                         uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz);
/* UNSUPPORTED, naming `what` ("a matmul"), when a stride of views v[0 .. n)
 * exceeds the shaders' 32-bit indices. */
vkmha_status vk_check_strides(vk_state *vk, const vk_view *const v[], uint32_t n,
                              const char *what);
/* Dispatches `groups` workgroups numbered linearly (shaders/common.glsl's
 * linear_group) as one or more x, y, z grids within maxComputeWorkGroupCount;
 * each dispatch gets its first group's number in the uint32 at byte
 * `base_offset` of its copy of the push constants. Dispatches after the
 * first follow a barrier (they write the same buffers). */
vkmha_status vk_dispatch_groups(vk_state *vk, vk_site *site, vk_pipe pipe, const vk_view bufs[],
                                uint32_t n_bufs, const void *push, uint32_t push_size,
                                uint32_t base_offset, uint64_t groups);
/* The same for workgroups first .. groups - 1 only (groups numbered as in
 * the whole grid): the shader's bound must then be `groups`, the range's
 * end, since the last grid may overshoot it. */
vkmha_status vk_dispatch_range(vk_state *vk, vk_site *site, vk_pipe pipe, const vk_view bufs[],
                               uint32_t n_bufs, const void *push, uint32_t push_size,
                               uint32_t base_offset, uint64_t first, uint64_t groups);
/* ---- the host-array driver (src/vk_host.c) -------------------------------- */
/* A call on host arrays, run by vk_run_host: its buffers are ensured by the
 * caller (sizes checked with the caller's names, slots grown, any plan made)
 * and the rest is the same for every op: upload the inputs and the mask,
 * plan the passes (`record`), download the outputs, run it and wait. */
typedef struct vk_host_upload {
    vk_buffer *buf;
    const void *src;
    uint64_t bytes;
} vk_host_upload;
typedef struct vk_host_download {
    const vk_buffer *buf;
    void *dst;
    size_t len, n1, stride1, n2, stride2; /* as vk_download's */
} vk_host_download;
typedef struct vk_host_call {
    vk_host_upload up[4]; /* bytes 0: unused */
    const mask_r *mask;   /* NULL or kinds 0: none; uploaded into the mask slots */
    uint32_t batch, len_q, len_k; /* the mask's shape */
    vk_host_download down[2]; /* dst NULL: unused */
    vkmha_status (*record)(vk_state *vk, const void *arg);
    const void *arg;
} vk_host_call;
vkmha_status vk_run_host(vk_state *vk, const vk_host_call *c);

/* The softmax's arguments (vk_record_softmax), which vk_mask_args fills. */
typedef struct vk_softmax_args {
    vk_view scores; /* the output; also the input when input is absent */
    vk_view input;
    vk_view masks[3]; /* key padding, full, bias (absent where the kind is) */
    vk_view lengths;  /* uint32 key length per batch entry, or absent */
    uint32_t batch, heads, len_q, len_k;
    float scale;
    const mask_r *mask; /* kinds and bias broadcast */
} vk_softmax_args;

/* ---- masks (src/vk_mask.c) ------------------------------------------------ */
/* Ensures the mask slots for `mask` (before vk_exec_begin); vk_mask_upload
 * then adds their uploads to the plan. */
vkmha_status vk_mask_ensure(vk_state *vk, const mask_r *mask, uint32_t batch,
                            uint32_t len_q, uint32_t len_k);
vkmha_status vk_mask_upload(vk_state *vk, const mask_r *mask, uint32_t batch, uint32_t len_q,
                            uint32_t len_k);
/* The element strides of the additive bias per batch entry and per head
 * (0 where it broadcasts), for the shaders that read it. */
void vk_bias_strides(const mask_r *m, uint32_t len_q, uint32_t len_k, uint32_t *sb,
                     uint32_t *sh);
/* The per-head rules' binding (shaders/mask.glsl's `hr`): [heads] ALiBi
 * slopes then [heads] sink logits in SLOT_MASK_HEADS, written by the
 * commands (the caller's host arrays are read while the call is made);
 * absent when the mask has neither. vk_head_rules_ensure sizes the slot
 * first, before vk_exec_begin. */
vkmha_status vk_head_rules_ensure(vk_state *vk, uint32_t heads, uint64_t flags);
vkmha_status vk_head_rules(vk_state *vk, const mask_r *m, uint32_t heads, vk_view *out);
/* The same, also binding the slot when the mask has neither (always: true):
 * the CPU-shaped kernel's value and key flags (two words per entry and
 * key/value head, `flags` words in all) follow the rules in it. */
vkmha_status vk_head_rules_any(vk_state *vk, const mask_r *m, uint32_t heads, bool always,
                               vk_view *out);
/* The push blocks' words of the rules. */
void vk_rules_push(const mask_r *m, uint32_t *window, float *softcap);
/* Views of the context's mask slots (key padding, full, bias). */
void vk_mask_slots(vk_state *vk, vk_view views[3]);
/* Points a->mask and a->masks at `mask` and views (key padding, full,
 * bias), absent where a kind is. */
void vk_mask_args(const vk_view views[3], const mask_r *mask, vk_softmax_args *a);

#endif
