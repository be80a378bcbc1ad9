/*
 * vkmha's Vulkan interop, for engines that own their Vulkan objects and
 * schedule GPU work themselves: borrow the application's instance, device
 * and queue; wrap its buffers as tensors; record vkmha's work into its
 * command buffers. Include after (or instead of) vkmha.h; needs the Vulkan
 * headers (vulkan_core.h; VK_NO_PROTOTYPES is fine).
 *
 * ## Borrowed objects
 * With vkmha_context_desc.vulkan->device set, vkmha owns none of the
 * instance, physical device, device and queue: it never destroys them and
 * loads its function pointers into its own tables (never into the
 * application's or volk's global pointers). The application must keep them
 * alive until vkmha_context_destroy returns. vkmha creates, on that device,
 * only its own buffers, memory, pipelines, layouts, descriptor pools, one
 * command pool (for its own submissions and the tensor uploads), fences and
 * query pools, all freed at destroy.
 *
 * ## Synchronization contract of vkmha_*_record
 * A record call appends to the application's command buffer, which must be
 * in the recording state, outside a render pass, and from a pool of the
 * context's queue family (vkmha_vulkan_desc.queue_family_index). It binds
 * compute pipelines, pushes descriptors and constants, and records
 * dispatches and global memory barriers; it submits nothing and leaves no
 * binding the application relies on (the compute pipeline and compute
 * descriptor state are left changed: rebind yours after it).
 *
 *   Before: the caller makes its writes of the input tensors available to
 *   compute shaders. A global or buffer memory barrier from the stage that
 *   wrote (e.g. COMPUTE_SHADER or TRANSFER) with srcAccess = its write
 *   access to dstStage = COMPUTE_SHADER_BIT, dstAccess = SHADER_READ_BIT
 *   (VK_ACCESS_2_SHADER_STORAGE_READ_BIT with synchronization2) is enough.
 *   If earlier commands still read or write the output tensors, add their
 *   stages and SHADER_WRITE_BIT to the barrier (write-after-read/write).
 *
 *   After: the outputs are written by COMPUTE_SHADER with SHADER_WRITE_BIT
 *   access. Before the caller's commands read them (or overwrite the
 *   inputs), it records a barrier from srcStage = COMPUTE_SHADER_BIT,
 *   srcAccess = SHADER_WRITE_BIT to its consuming stage and access (e.g.
 *   COMPUTE_SHADER + SHADER_READ, TRANSFER + TRANSFER_READ, or HOST +
 *   HOST_READ for reading a mapped buffer after the fence).
 *
 *   vkmha's own ordering: every record call begins with a barrier that
 *   orders its scratch buffers after any earlier vkmha work in the same or
 *   an earlier command buffer on the same queue, so several record calls (or
 *   two into one command buffer) need nothing between them from the caller
 *   unless the caller itself writes what vkmha reads.
 *
 *   In use until the command buffer completes: the tensors it names, the
 *   layer's weights (vkmha_mha), the context's scratch buffers and its
 *   pipelines. So: do not destroy those, and submit the command buffers with
 *   vkmha work to the context's queue (vkmha_vulkan_desc.queue), in the order
 *   recorded, not concurrently with vkmha's own submissions on another
 *   queue. A later call that needs larger scratch buffers retires the old
 *   ones instead of freeing them; vkmha_context_trim frees them once your
 *   command buffers completed (vkmha_context_destroy waits for the device
 *   and frees everything).
 *
 * Descriptors: with push descriptors (VK_KHR_push_descriptor, enabled on the
 * borrowed device and listed in enabled_device_extensions;
 * vkmha_context_info.push_descriptors tells) they go into your command
 * buffer. Without them (many mobile drivers) each recorded dispatch gets a
 * descriptor set of its own, which stays valid like the retired scratch:
 * until vkmha_context_trim, which you call once the command buffers you
 * recorded have completed (vkmha_context_destroy frees them too). A
 * long-running engine without push descriptors should trim every so often
 * (say once per frame, after that frame's fence): the sets accumulate
 * until then (one per dispatch; a layer's forward records about 6-10).
 */
#ifndef VKMHA_VULKAN_H
#define VKMHA_VULKAN_H

#include "vkmha.h"

#include <vulkan/vulkan_core.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vkmha_vulkan_desc {
    /* The application's loader entry point (e.g. its own libvulkan, or a
     * layer-injecting wrapper); NULL: vkmha loads the system's libvulkan. */
    PFN_vkGetInstanceProcAddr get_instance_proc_addr VKMHA_ZERO;

    /* The objects to borrow: instance, physical_device, device and queue are
     * all set or all null (null: vkmha creates its own instance and device).
     * queue must be a queue of queue_family_index, which must support
     * compute. */
    VkInstance instance VKMHA_ZERO;
    VkPhysicalDevice physical_device VKMHA_ZERO;
    VkDevice device VKMHA_ZERO;
    uint32_t queue_family_index VKMHA_ZERO;
    VkQueue queue VKMHA_ZERO;
    /* VkApplicationInfo.apiVersion the instance was created with (0: 1.1);
     * vkmha needs 1.1. */
    uint32_t instance_api_version VKMHA_ZERO;
    /* The device extensions the application enabled; vkmha uses
     * VK_KHR_push_descriptor when listed here. */
    const char *const *enabled_device_extensions VKMHA_ZERO;
    uint32_t enabled_device_extension_count VKMHA_ZERO;
    /* The application enabled VkPhysicalDevice16BitStorageFeatures::
     * storageBuffer16BitAccess (Vulkan 1.1) on the device: vkmha then reads
     * and writes fp16 / bf16 data as 16-bit elements. false: it packs them
     * two per 32-bit word, which every device runs. */
    bool storage_buffer_16bit_access VKMHA_ZERO;

    /* Passed to every Vulkan create, allocate, destroy and free call vkmha
     * makes (on borrowed objects and its own instance and device alike).
     * NULL: the driver's allocator. The pointer is kept: the callbacks must
     * outlive the context. */
    const VkAllocationCallbacks *allocation_callbacks VKMHA_ZERO;

    /* Called around every vkQueueSubmit (and vkQueueBindSparse, for sparse
     * tensors) vkmha makes on the queue (vkmha waits with fences, never
     * with vkQueueWaitIdle), so the application can
     * share one queue between threads (Vulkan requires external
     * synchronization of a queue). Both or neither. */
    void (*queue_lock)(void *user) VKMHA_ZERO;
    void (*queue_unlock)(void *user) VKMHA_ZERO;
    void *queue_lock_user VKMHA_ZERO;

    /* The application enabled VkPhysicalDeviceFeatures::sparseBinding on
     * the device: where queue_family_index has VK_QUEUE_SPARSE_BINDING_BIT,
     * tensors past maxMemoryAllocationSize are then sparse buffers bound
     * with vkQueueBindSparse on `queue` (vkmha waits for it with a fence,
     * inside queue_lock / queue_unlock). false: such tensors are refused. */
    bool sparse_binding VKMHA_ZERO;
} vkmha_vulkan_desc;

/* Wraps `size` bytes of an application's buffer from `offset` as a tensor of
 * desc's shape, without copying. The buffer must be of the context's device,
 * created with VK_BUFFER_USAGE_STORAGE_BUFFER_BIT (plus TRANSFER_SRC / _DST
 * for vkmha_tensor_download / _upload; _DST and _SRC for a KV cache's
 * tensors, which creation zeroes and vkmha_kv_cache_reorder copies by
 * transfers; TRANSFER_SRC for a quantized matmul b past
 * maxStorageBufferRange, whose blocks of rows are copied), bound to
 * memory, and outlive the
 * tensor. offset must be a multiple of the element size (4 bytes for F32,
 * 2 for F16 and BF16, 1 for U8), nothing more: a tensor between two
 * multiples of minStorageBufferOffsetAlignment is bound from the one below
 * it and addressed from there by the shaders (no copy; a misaligned tensor
 * may read its elements one by one where an aligned one reads four at a
 * time). vkmha reads and writes whole 4-byte words of the buffer: size must
 * reach from offset to the 4-byte boundary at or after the tensor's last
 * byte (the tensor's bytes, plus 2 when a 16-bit tensor ends halfway in a
 * word). That span may exceed maxStorageBufferRange (the ops bind it in
 * windows or parts) and maxMemoryAllocationSize (the application's own
 * sparse buffer), up to maxBufferSize where the device states one; a 16-bit
 * neighbour sharing a word with the tensor is kept intact.
 * vkmha_tensor_destroy frees only vkmha's handle. */
VKMHA_API vkmha_status vkmha_tensor_wrap(vkmha_context *ctx, const vkmha_tensor_desc *desc,
                                         VkBuffer buffer, VkDeviceSize offset,
                                         VkDeviceSize size, vkmha_tensor **out);

/* The ops and the layer, recorded into the application's command buffer
 * under the contract above; nothing is submitted and nothing waits. The
 * Vulkan backend only (else VKMHA_ERROR_UNSUPPORTED). Argument errors and
 * scratch allocation fail before anything is recorded, and so does any
 * error while planning the work (a pipeline the driver fails to create, a
 * grid beyond the device's limits): a call that fails records nothing into
 * cmd. */
VKMHA_API vkmha_status vkmha_mha_record(vkmha_mha *mha, VkCommandBuffer cmd,
                                        const vkmha_mha_tensors *io);
VKMHA_API vkmha_status vkmha_matmul_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                           const vkmha_matmul_desc *desc,
                                           const vkmha_tensor *a, const vkmha_tensor *b,
                                           const vkmha_tensor *bias, vkmha_tensor *c);
VKMHA_API vkmha_status vkmha_softmax_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                            const vkmha_softmax_desc *desc,
                                            const vkmha_tensor *x,
                                            const vkmha_tensor_mask *mask, vkmha_tensor *y);
VKMHA_API vkmha_status vkmha_split_heads_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                                const vkmha_heads_desc *desc,
                                                const vkmha_tensor *x, vkmha_tensor *y);
VKMHA_API vkmha_status vkmha_merge_heads_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                                const vkmha_heads_desc *desc,
                                                const vkmha_tensor *x, vkmha_tensor *y);
VKMHA_API vkmha_status vkmha_attention_record(vkmha_context *ctx, VkCommandBuffer cmd,
                                              const vkmha_attention_desc *desc,
                                              const vkmha_tensor *q, const vkmha_tensor *k,
                                              const vkmha_tensor *v,
                                              const vkmha_tensor_mask *mask,
                                              vkmha_tensor *out, vkmha_tensor *weights);

#ifdef __cplusplus
}
#endif

#endif /* VKMHA_VULKAN_H */
