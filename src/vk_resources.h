/* Layers 2-4 of the Vulkan backend (see src/vk_base.h): instance, device,
 * submissions, memory, descriptors, pipelines and their cache. */
#ifndef VKMHA_VK_RESOURCES_H
#define VKMHA_VK_RESOURCES_H

#include "vk_base.h"
/* ---- the instance (src/vk_instance.c) -------------------------------------- */
/* What to do when the loader finds no driver or no device, for messages
 * (the most common first-run failure). */
void vk_no_driver_hint(char *buf, size_t cap);
/* The loader's global functions: the application's (gipa) or the system's. */
vkmha_status vk_load_globals(vk_state *vk, PFN_vkGetInstanceProcAddr gipa);
/* Creates vk->instance (and the messenger when validating). */
vkmha_status vk_create_instance(vk_state *vk, vkmha_context *ctx, bool validation);

/* ---- the device (src/vk_device.c) ------------------------------------------ */
/* The physical device desc asks for (or the automatic choice), adopted:
 * vk->phys, vk->info, vk->mem_props. */
vkmha_status vk_pick_device(vk_state *vk, const vkmha_context_desc *desc);
/* The application's instance, physical device, device and queue
 * (vkmha_vulkan_desc): checked, never owned. */
vkmha_status vk_borrow_device(vk_state *vk, const vkmha_vulkan_desc *ext);
/* The device (or the borrowed one's features), the queue, the command pool
 * and buffer, the fence, sparse binding; VK_EXT_memory_budget looked up. */
vkmha_status vk_create_device(vk_state *vk, const vkmha_vulkan_desc *ext);
/* The memory types of working buffers and staging. */
vkmha_status vk_choose_memory_types(vk_state *vk);
/* VKMHA_CONTEXT_PROFILE: a pool of 2 timestamp queries, where the queue
 * family has timestamps; otherwise profiling stays off. */
vkmha_status vk_create_timestamps(vk_state *vk);

/* ---- src/vk_pipeline_cache.c ---------------------------------------------- */
/* Checks desc's pipeline cache fields, loads a valid cache (a missing,
 * corrupt or foreign one is logged at INFO and ignored) and creates
 * vk->cache.cache. Before vk_pipelines_init. */
vkmha_status vk_pipeline_cache_init(vk_state *vk, const vkmha_context_desc *desc);
/* Destroys the cache (before the device) and frees the copied path. */
void vk_pipeline_cache_destroy(vk_state *vk);
/* The table's pipeline_cache and pipeline_cache_path entries. */
vkmha_status vk_pipeline_cache_get(vkmha_context *ctx, const char *fn, void *data,
                                   size_t *size);
const char *vk_pipeline_cache_path(const vkmha_context *ctx);
/* The table's kernels entry (src/vk_pipeline.c). */
void vk_kernels(const vkmha_context *ctx, uint32_t *count, vkmha_kernel_info *out);


/* ---- src/vk_memory.c ----------------------------------------------------- */
/* The first memory type allowed by `bits` with all of `need` and as many of
 * `want` as possible; -1 if none. */
int vk_find_memory_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits,
                        VkMemoryPropertyFlags need, VkMemoryPropertyFlags want);
/* mapped: host-visible (staging); else the working memory type. `what` names
 * the tensor in error messages. */
vkmha_status vk_buffer_create(vk_state *vk, VkDeviceSize size, bool staging, bool download,
                              const char *what, vk_buffer *out);
/* A sparse working buffer (vk_state.sparse; a tensor past
 * maxMemoryAllocationSize, checked first by vk_check_tensor) bound to pages
 * of at most page_max bytes and maxMemoryAllocationSize (whole sparse
 * blocks, at least one), never mapped, without texel views. */
vkmha_status vk_buffer_create_sparse(vk_state *vk, VkDeviceSize size, VkDeviceSize page_max,
                                     const char *what, vk_buffer *out);
void vk_buffer_destroy(vk_state *vk, vk_buffer *b);
/* Gives b its R32_UINT view (vk_buffer.view1u) where the context reads
 * texels and b is whole (not sparse, not a wrapped tensor's part) and within
 * maxTexelBufferElements words; nothing otherwise. */
vkmha_status vk_buffer_view_words(vk_state *vk, vk_buffer *b);
vkmha_status vk_slot_ensure(vk_state *vk, vk_slot slot, VkDeviceSize size);
/* The same for a slot only bound in windows of at most maxStorageBufferRange
 * (a matmul's operands, vk_record_matmul): it may be larger, up to
 * maxMemoryAllocationSize. */
vkmha_status vk_slot_ensure_windowed(vk_state *vk, vk_slot slot, VkDeviceSize size);
/* Bytes of the scratch buffers: slots, staging and retired buffers. */
uint64_t vk_scratch_bytes(const vk_state *vk);
/* Frees scratch buffers, largest first, until at most `budget` bytes are
 * left; none while recorded command buffers may use them (vk->mem.recorded). */
void vk_scratch_fit(vk_state *vk, uint64_t budget);
/* Grows the staging buffers to at least these bytes (the executor: for
 * copies into or out of unmapped buffers). */
vkmha_status vk_staging_ensure_unmapped(vk_state *vk, VkDeviceSize upload,
                                        VkDeviceSize download);
/* Checks a tensor of `bytes` against maxStorageBufferRange and the allocation
 * limit; UNSUPPORTED with a message naming `what` otherwise. */
vkmha_status vk_check_size(vk_state *vk, uint64_t bytes, const char *what);
/* Only the maxMemoryAllocationSize part of vk_check_size. */
vkmha_status vk_check_alloc(vk_state *vk, uint64_t bytes, const char *what);
/* A tensor of `bytes`: one allocation, or past maxMemoryAllocationSize a
 * sparse buffer where the context binds them (vk_state.sparse), within
 * max_tensor_bytes and what is left of sparseAddressSpaceSize. */
vkmha_status vk_check_tensor(vk_state *vk, uint64_t bytes, const char *what);
/* The largest tensor (vkmha_context_info.max_tensor_bytes): maxMemoryAllocationSize,
 * or with sparse tensors sparseAddressSpaceSize and maxBufferSize, the lower. */
uint64_t vk_max_tensor_bytes(const vk_state *vk);
/* Whether the context makes tensors past maxMemoryAllocationSize sparse
 * buffers: the device binds them (vk->sparse) and VKMHA_PATH_SPARSE is not
 * disabled. */
bool vk_sparse_tensors(const vk_state *vk);
/* The executor records into the application's command buffers: the scratch
 * buffers are referenced from now on, and replaced ones are retired until
 * vkmha_context_trim. */
void vk_scratch_referenced(vk_state *vk);
/* vkmha_context_trim's part (after vkmha's submissions are done): retired
 * buffers, the scratch slots and staging freed. vk_memory_destroy: those
 * and the placeholder buffer. */
void vk_memory_trim(vk_state *vk);
void vk_memory_destroy(vk_state *vk);

/* ---- submissions (src/vk_submission.c) -------------------------------------- */
/* MODE_SUBMIT's part of vk_exec_begin: a new submission (its command buffer
 * and fence), the newest of vk->sub.subs. */
vkmha_status vk_submit_begin(vk_state *vk, struct vkmha_submission **out);
/* vkmha_backend_ops.parts_open / parts_close: a submission whose command
 * buffer the parts of a call record into (FORM_RECORD), pending only once
 * it is submitted at the close (dropped if st, a part's failure). */
vkmha_status vk_parts_open(vkmha_context *ctx, vkmha_run *part, struct vkmha_submission **open);
vkmha_status vk_parts_close(vkmha_context *ctx, struct vkmha_submission *open, vkmha_status st,
                            struct vkmha_submission **out);
/* The newest submission's command buffer: begun, or ended and submitted
 * (freed on failure). */
vkmha_status vk_submission_begin_commands(vk_state *vk);
vkmha_status vk_submission_submit(vk_state *vk);
/* Waits for every pending submission (before a scratch buffer is replaced,
 * or a descriptor set they use is rewritten). */
vkmha_status vk_wait_submissions(vk_state *vk);
/* Frees the retired scratch buffers and clears `recorded` (vkmha_context_trim). */
void vk_release_retired(vk_state *vk);
/* Whether none of vkmha's submissions is pending (their fences polled, not
 * waited for). */
bool vk_submissions_idle(vk_state *vk);
/* Frees the scratch buffers replaced while submissions were pending, once
 * none is (after each call, and at trim). */
void vk_memory_collect(vk_state *vk);
/* Frees every submission (the context's destruction, after the device is
 * idle or vkmha's own work is done). */
void vk_submissions_destroy(vk_state *vk);
/* Frees a submission's Vulkan objects and removes it from the pending list. */
void vk_submission_free(vk_state *vk, struct vkmha_submission *s);

/* ---- src/vk_descriptors.c --------------------------------------------------- */
/* Creates each kind's layouts and the context's sites (vk->desc.op_sites). */
vkmha_status vk_descriptors_init(vk_state *vk);
void vk_descriptors_destroy(vk_state *vk);
/* Creates `count` sites, site i for shaders of kinds[i]. */
vkmha_status vk_site_pool_create(vk_state *vk, const vk_kind *kinds, uint32_t count,
                                 vk_site_pool *out);
void vk_site_pool_destroy(vk_state *vk, vk_site_pool *p);
/* A descriptor set of `kind` for one recorded dispatch (no push descriptors),
 * as a site whose bindings are all to be written; kept until
 * vk_release_recorded_sets (vkmha_context_trim, vkmha_context_destroy). */
vkmha_status vk_recorded_site(vk_state *vk, vk_kind kind, vk_site *out);
void vk_release_recorded_sets(vk_state *vk);
/* Reserves n more sites of vk->desc.window_sites[kind] for the next plan (the
 * windows after each matmul's or attention pass's first, ...: each part of
 * the plan reserves its own), growing the pool; outside a plan. */
vkmha_status vk_window_sites_reserve(vk_state *vk, vk_kind kind, uint64_t n);
/* The next `n` (>= 1) sites of vk->desc.window_sites[kind] for the plan being
 * made; NULL (an internal error reported) when fewer were reserved. */
vk_site *vk_window_sites_take(vk_state *vk, vk_kind kind, uint64_t n);
/* A plan begins (the window sites are taken from the first again) or ends
 * (the next plan's parts reserve anew): the executor's calls. */
void vk_window_sites_begin(vk_state *vk);
void vk_window_sites_end(vk_state *vk);

/* ---- src/vk_pipeline.c ------------------------------------------------------ */
/* Tuning (vk_tuning_init), layouts and sites (vk_descriptors_init), and the
 * store of the kernel table's pipelines. */
vkmha_status vk_pipelines_init(vk_state *vk, const vk_tuning_desc *tuning);
void vk_pipelines_destroy(vk_state *vk);
/* The pipeline of key k (its pipe specialized for its dtypes and variant),
 * created on first use. */
vkmha_status vk_pipeline_get(vk_state *vk, const vk_pipe_key *k, VkPipeline *out);
/* The pipeline of key k if it exists, else null. */
VkPipeline vk_pipeline_find(const vk_state *vk, const vk_pipe_key *k);
/* Adds key k to vk->pipelines.want (once). */
vkmha_status vk_pipeline_want(vk_state *vk, const vk_pipe_key *k);
/* Creates the pipelines of vk->pipelines.want that do not exist, on up to
 * VK_BUILD_THREADS_MAX threads (one per CPU; VKMHA_PIPELINE_THREADS lowers
 * it; the calling thread only with VKMHA_CONTEXT_SINGLE_THREAD or
 * application VkAllocationCallbacks), and empties it. */
vkmha_status vk_pipelines_build(vk_state *vk);
/* VKMHA_CONTEXT_EAGER_PIPELINES: creates every pipeline this device can use
 * (vk_pipe_available). */
vkmha_status vk_pipelines_create_all(vk_state *vk);
/* Destroys the pipelines built so far (they are built again on first use):
 * after a change of the code they would be built from. */
void vk_pipelines_forget(vk_state *vk);
/* The longest pipeline name (vk_pipe_name), with its NUL. */
#define VK_PIPE_NAME_MAX 32
/* What vk_pipeline_get creates for `pipe` on this context. */
typedef struct vk_pipe_info {
    char name[VK_PIPE_NAME_MAX]; /* its role: "matmul_large_vec", "flash_d64", ... */
    const char *op;     /* the public op it serves: "matmul", ..., "attention" */
    bool available;     /* false: not run on this device (vk_pipe_available;
                           never created; the rest is zero) */
    const char *shader; /* the SPIR-V variant (meson.build): "matmul", "softmax_sg", ... */
    uint32_t n_spec;
    uint32_t spec[VK_MAX_SPEC];          /* specialization constants by constant_id */
    const char *spec_names[VK_MAX_SPEC]; /* their names in the shader: "WG", "BM", ... */
    uint32_t workgroup_size;             /* spec[0], invocations */
    uint32_t shared_bytes;               /* the shared memory it declares */
} vk_pipe_info;
void vk_pipe_info_get(const vk_state *vk, vk_pipe pipe, vk_pipe_info *out);
/* The driver's statistics of `pipe` with `dtypes` (created if needed) on a compile-only
 * context (vkmha__context_create_compile_only), through
 * VK_KHR_pipeline_executable_properties: *count in, the capacity of `out`;
 * out, the statistics written (names, units and meaning are the driver's).
 * *subgroup_size: the subgroup (wave) size the driver compiled it for. */
vkmha_status vk_pipeline_statistics(vk_state *vk, vk_pipe pipe, uint32_t dtypes,
                                    uint32_t variant, uint32_t *subgroup_size,
                                    VkPipelineExecutableStatisticKHR *out, uint32_t *count);

/* src/vk_submission.c: on submissions not yet done. */
vkmha_status vk_submission_wait_op(vkmha_submission *s, uint64_t timeout_ns);
vkmha_status vk_submission_poll_op(vkmha_submission *s);
void vk_submission_free_op(vkmha_submission *s);

#endif
