/* The backend state of a Vulkan context (one per vkmha_context). Included
 * by src/vk_base.h after the types it holds. */
#ifndef VKMHA_VK_STATE_H
#define VKMHA_VK_STATE_H


/* Tuning (src/vk_tuning.c): chosen from the device's limits by
 * vk_tuning_init; after it, only vk_tuning_disable (the self-check,
 * VKMHA_DISABLE_PATHS) and vk_tuning_force_kernel (the self-check's
 * canaries) write it. Read by the kernel table and the ops. */
typedef struct vk_tuning {
    bool use_subgroup;
    vkmha_tile_config tile_large, tile_small;
    /* CPU devices: shaders/matmul_cpu.comp with LANE_COLS for A of at most
     * VK_GEMV_ROWS rows (tm rows per workgroup, workgroup_size lanes of tn
     * columns: bn columns); workgroup_size 0 elsewhere. */
    vkmha_tile_config tile_gemv;
    /* The register matmul variant reads A and B through texel buffers:
     * lavapipe fetches a texel for all SIMD lanes at once, where a storage
     * buffer read costs a branchy per-lane loop (docs/PERFORMANCE.md). The
     * CPU-shaped row kernels (cpu_rows_wg) read their inputs so too. */
    bool matmul_texel;
    uint32_t reduce_wg, elementwise_wg;
    /* CPU devices: the row kernels (softmax, LayerNorm, heads) take one row
     * per invocation, cpu_rows_wg rows per workgroup, for rows of at most
     * VK_CPU_ROW_MAX elements. 0 on GPUs. */
    uint32_t cpu_rows_wg;
    bool row_texel; /* they read their inputs' texel views where they have them */
    /* 16-bit data: read and written as 16-bit elements (the device's
     * storage16; the shaders' NATIVE16 variants), else packed in uint words. */
    bool native16;
    /* 16-bit data has texel views: R32G32_UINT (view4u) for the TEXEL_U16
     * shader variants (shaders/typed.glsl; matmul, fused attention, heads),
     * which a dispatch uses when every texel source is 16-bit
     * (vk_texel_u16), and R16G16B16A16_SFLOAT (view4h) for fp16 in the
     * shaders without one (softmax, LayerNorm). */
    bool texel16;
    vk_flash_config flash[VK_FLASH_CLASSES];
    /* shaders/flash_cpu.comp per class: workgroup_size invocations of tm
     * query rows each (block_q = their product), block_k keys per step;
     * workgroup_size 0 where the device cannot run it. */
    vk_flash_config flash_cpu[VK_FLASH_CLASSES];
    vkmha_fused_kernel fused_kernel; /* desc->debug: forced kernel, or AUTO */
    bool flash_gpu_blocks; /* desc->debug: the GPU blocks for flash.comp on any device */
    uint32_t flash_fill_groups; /* fewer fused workgroups than this: split-K */
    /* vkmha_path bits not used (vk_tuning_disable): a kernel's pipelines
     * of such a path are unavailable (vk_pipe_available). */
    uint32_t disabled_paths;
    /* vk_kind bits of the descriptor interfaces that bind more storage
     * buffers than the device's maxPerStageDescriptorStorageBuffers: their
     * kernels are unavailable, their layouts never created. */
    uint32_t unfit_kinds;
    /* The cooperative-matrix matmul (shaders/matmul_coop.comp): its tile
     * (variant COOPERATIVE; workgroup_size 0: none on this context), of the
     * device's vk_state.coop_shape, and coop_matmul: products of fp16 A and
     * B take it (GPU devices; on others only when desc->matmul_tile or
     * VKMHA_MATMUL_TILE forces it). */
    vkmha_tile_config tile_coop;
    bool coop_matmul;
    bool coop_forced; /* by desc->matmul_tile or VKMHA_MATMUL_TILE (either kernel) */
    /* The VK_NV_cooperative_matrix2 matmul (shaders/matmul_cm2.comp): its
     * tile (variant COOPERATIVE2; workgroup_size 0: none on this context),
     * and cm2_matmul: products of fp16 A and B take it, before the
     * KHR kernel (GPU devices with vk_state.coopmat2; on others only when
     * forced). */
    vkmha_tile_config tile_cm2;
    bool cm2_matmul;
    /* GPUs (and CPU devices given a shared-variant tile): shaders/
     * matmul_gemv.comp for op T products of at most VK_GPU_GEMV_ROWS rows,
     * bn output columns per workgroup of workgroup_size (0: none). */
    vkmha_tile_config tile_gemv_gpu;
    /* shaders/flash.comp's cooperative-matrix variant per class (blocks as
     * flash[]; workgroup_size 0: not on this context), which fused calls of
     * fp16 q, k and v take (GPUs; CPU devices when fused_kernel forces it). */
    vk_flash_config flash_coop[VK_FLASH_CLASSES];
} vk_tuning;

/* The pipeline store (src/vk_pipeline.c). */
typedef struct vk_pipelines {
    /* All-F32 pipelines by vk_pipe_index (n_pipes: vk_pipe_count), created
     * on first use. */
    VkPipeline *pipes;
    uint32_t n_pipes;
    /* Pipelines specialized for other dtypes or variants, created on first
     * use. */
    struct vk_typed_pipe {
        vk_pipe_key key;
        VkPipeline pipeline;
    } *typed_pipes;
    uint32_t n_typed_pipes, cap_typed_pipes;
    /* Pipelines the plans since the last vk_pipelines_build dispatch and
     * that do not exist yet (vk_pipeline_want): created together, on
     * several threads, before a plan is recorded (vk_exec_end). */
    vk_pipe_key *want;
    uint32_t n_want, cap_want;
    uint32_t created; /* pipelines created so far */
} vk_pipelines;

/* The VkPipelineCache (src/vk_pipeline_cache.c). */
typedef struct vk_cache {
    /* Passed to every vkCreateComputePipelines (null: none). */
    VkPipelineCache cache;
    bool loaded;
    uint64_t bytes;
    char *path; /* desc->pipeline_cache_path copied, or NULL */
} vk_cache;

/* Layouts and descriptor sites (src/vk_descriptors.c). */
typedef struct vk_descriptors {
    VkDescriptorSetLayout set_layouts[KIND_COUNT];
    VkPipelineLayout pipe_layouts[KIND_COUNT];
    vk_site_pool op_sites;
    /* Sites of each kind for windows past maxStorageBufferRange after the
     * first (vk_record_matmul's, KIND_MATMUL; the fused attention's,
     * KIND_FLASH; a KV cache append's blocks, KIND_HEADS; each window binds
     * other offsets), reserved before a plan by each part of it
     * (vk_window_sites_reserve: window_reserved[kind] sites in all, 0 again
     * after vk_exec_end); the plan takes them in order from
     * window_next[kind] (0 at vk_exec_begin). */
    vk_site_pool window_sites[KIND_COUNT];
    uint64_t window_reserved[KIND_COUNT];
    uint32_t window_next[KIND_COUNT];
    /* Without push descriptors, the descriptor sets of dispatches recorded
     * into the application's command buffers: a set each, from these pools,
     * kept until vkmha_context_trim (the same contract as the retired
     * scratch). The last pool is the one that still has room. */
    VkDescriptorPool *rec_pools;
    uint32_t n_rec_pools;
} vk_descriptors;

/* Device memory in use: the accounting of allocations, the scratch slots
 * and staging, retired buffers (src/vk_memory.c). The device's memory types,
 * heaps' budget and sparse binding are the device's (vk_state). */
typedef struct vk_memory {
    uint64_t next_buffer_id;
    uint64_t memory_bytes, memory_peak_bytes; /* VkDeviceMemory held now, at most */
    uint64_t heap_bytes[VK_MAX_MEMORY_HEAPS];   /* the same per memory heap */
    uint64_t sparse_bytes; /* of vk_state.sparse_space, in use */
    /* desc->scratch_budget: 0, or vk_scratch_fit after each call (set at
     * creation from the desc). */
    uint64_t scratch_budget;
    /* vkAllocateMemory calls so far, and vkmha_debug_options' failures:
     * calls number fail_alloc_first .. fail_alloc_last fail (0: none; set
     * at creation from the desc). */
    uint64_t alloc_calls, fail_alloc_first, fail_alloc_last;

    vk_buffer slots[SLOT_COUNT];
    vk_buffer dummy; /* bound where an optional tensor is absent */
    vk_buffer upload, download; /* staging, grown on demand */
    /* Work was recorded into the application's command buffers since the
     * last trim (vk_scratch_referenced): scratch buffers being replaced are
     * retired, not freed. */
    bool recorded;
    vk_buffer *retired;
    uint32_t n_retired, cap_retired;
    /* Replaced while vkmha's own submissions were pending: freed once they
     * are all done (vk_memory_collect), without waiting for them. */
    vk_buffer *deferred;
    uint32_t n_deferred, cap_deferred;
} vk_memory;

/* The executor (src/vk_command.c): the call being planned (vk_exec_begin ..
 * vk_exec_end), its mode, planning (between the two), and its steps. */
typedef struct vk_exec {
    vk_mode mode;
    bool planning;
    vk_plan plan;
    bool dirty_transfer, dirty_compute; /* writes not yet covered by a barrier */
    uint32_t timed_passes; /* steps of this call with a timestamp after them */
    /* The self-check's first pass (vk_exec_gather): plans are made (their
     * pipelines wanted) and dropped, nothing runs. */
    bool gather;
} vk_exec;

/* vkmha_mha_submit's submissions not yet known to be complete
 * (src/vk_submission.c). */
typedef struct vk_submissions {
    struct vkmha_submission **subs;
    uint32_t n_subs, cap_subs;
    /* Finished submissions kept with their command buffer and fence for the
     * next ones (at most VK_SUBMISSION_POOL): vkmha_mha_submit then creates
     * no Vulkan object per call. */
    struct vkmha_submission **pool;
    uint32_t n_pool;
    /* Created so far (vkmha_context_info.submissions_created). */
    uint64_t created;
} vk_submissions;

/* The state of a context: the instance and device, which the device and
 * context files own, and one part per module, each created, destroyed and
 * trimmed by its own module. */
struct vk_state {
    vkmha_context *ctx; /* for errors and logging */
    /* The application's VkAllocationCallbacks for every Vulkan create,
     * allocate, destroy and free (NULL: the driver's). */
    const VkAllocationCallbacks *vkalloc;
    /* Borrowed (vkmha_vulkan_desc): instance, physical device, device and
     * queue belong to the application and are never destroyed here. */
    bool external;
    void (*queue_lock)(void *user), (*queue_unlock)(void *user);
    void *queue_lock_user;
    /* VK_KHR_push_descriptor: descriptors go into the command buffer (no
     * descriptor sets), which recording into the application's command
     * buffers needs. */
    bool push_descriptors;
    vk_global_table vkg;
    VkInstance instance;
    vk_instance_table vki; /* this instance's functions: no global pointers */
    VkDebugUtilsMessengerEXT messenger;
    uint64_t validation_messages;
    bool validation;

    VkPhysicalDevice phys;
    uint32_t device_index;
    vkmha_device_info info;
    VkPhysicalDeviceMemoryProperties mem_props;
    VkDeviceSize non_coherent_atom;

    VkDevice device;
    struct VolkDeviceTable vkd; /* this device's functions */
    /* vkmha__context_create_compile_only: pipelines only, nothing runs. */
    bool compile_only;
    /* VKMHA_CONTEXT_SINGLE_THREAD: pipelines on the calling thread only. */
    bool single_thread;
    uint32_t queue_family;
    VkQueue queue;
    VkCommandPool cmd_pool;
    VkCommandBuffer own_cmd; /* the synchronous calls' command buffer */
    VkCommandBuffer cmd;     /* the one being recorded: own_cmd or the caller's */
    VkFence fence;
    bool lost;

    /* VKMHA_CONTEXT_PROFILE: 2 timestamps per call (null: off or no
     * timestamps on this queue), and in a waited-for call one after the
     * uploads and one after each of its first VK_PROFILE_PASSES steps
     * (vk_command.c). */
    VkQueryPool timestamps;
    uint64_t timestamp_mask; /* timestampValidBits ones */
    uint64_t last_gpu_time_ns;
    /* The steps of the last profiled call (vkmha_context_get_profile). */
    vkmha_profile_step profile[VK_PROFILE_PASSES];
    uint32_t profile_steps;

    /* Tensors past maxMemoryAllocationSize are sparse buffers (sparseBinding
     * enabled, VK_QUEUE_SPARSE_BINDING_BIT on the queue's family, and not
     * desc->debug->no_sparse_binding), up to vk_max_tensor_bytes each
     * (maxBufferSize where the device states one, and what is left of
     * sparseAddressSpaceSize, sparse_space: mem.sparse_bytes are in use);
     * unless the self-check disables VKMHA_PATH_SPARSE (vk_sparse_tensors). */
    bool sparse, no_sparse;
    char sparse_why[96]; /* why not sparse, for messages */
    uint64_t sparse_block; /* bytes of a sparse block (the probe's alignment) */
    uint64_t sparse_space;
    uint64_t max_buffer_size; /* maxBufferSize (Vulkan 1.3), else UINT64_MAX */
    /* Memory types: working buffers, and staging when they are not mapped. */
    uint32_t mt_work, mt_upload, mt_download;
    bool work_mapped; /* unified memory: no staging copies */
    /* The device has VK_EXT_memory_budget: every allocation also fits what
     * its heap's budget leaves (vk_memory.c's allocate). */
    bool memory_budget;
    uint32_t max_texel_elements; /* maxTexelBufferElements */
    VkDeviceSize min_storage_offset_align; /* minStorageBufferOffsetAlignment */
    /* storageBuffer16BitAccess enabled (vk_tuning.native16 starts from it);
     * no_native16: desc->debug->no_native_16bit (or a driver workaround,
     * vk_context.c). exact_f16_texels: every dispatch's pipeline is the
     * VK_VARIANT_EXACT_F16 one (a driver workaround, vk_context.c). */
    bool storage16, no_native16, exact_f16_texels;
    /* desc->debug->no_push_descriptors or its profile's. */
    bool debug_no_push;
    /* VK_KHR_cooperative_matrix: the device's shapes of subgroup scope
     * (n_matrix_shapes of them, at most VKMHA_MAX_MATRIX_SHAPES kept);
     * coop_shape: the one the cooperative kernels multiply, the largest
     * m x n, then the deepest, of the non-saturating fp16 x fp16 -> fp32
     * ones among all (m 0: none); and coopmat: the extension enabled with
     * cooperativeMatrix, vulkanMemoryModel and shaderFloat16 and a
     * coop_shape; never for a borrowed device, nor with the mobile profile
     * (no_coopmat). */
    uint32_t n_matrix_shapes;
    vkmha_matrix_shape matrix_shapes[VKMHA_MAX_MATRIX_SHAPES];
    vkmha_matrix_shape coop_shape;
    bool coopmat, no_coopmat;
    /* VK_NV_cooperative_matrix2, enabled with coopmat where the device has
     * it with workgroup scope, flexible dimensions, tensor addressing and
     * per-element operations, Vulkan 1.3 (its shaders are SPIR-V 1.6, with
     * maintenance4), 16-bit storage, and lists fp16 x fp16 -> fp32 matrices
     * of workgroup scope: cm2_shapes are those entries (workgroup size and
     * M, N, K granularities; at most VK_CM2_SHAPES kept). instance_api: the
     * apiVersion vkmha's instance asked for (0: a borrowed instance). */
    bool coopmat2;
    uint32_t n_cm2_shapes;
    struct vk_cm2_shape {
        uint32_t workgroup_size, m, n, k;
    } cm2_shapes[VK_CM2_SHAPES];
    uint32_t instance_api;
    /* VK_EXT_subgroup_size_control's maxSubgroupSize (with coopmat): the
     * cooperative kernels' workgroups are multiples of it, and their
     * subgroups full (VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT). */
    uint32_t max_subgroup_size;
    /* The self-check (src/vk_selfcheck.c): the checks not run yet
     * (VKMHA_PATH_* bits and VK_CHECK_UNFUSED), the breaks asked for
     * (vkmha_debug_options.self_check_break), whether checks are running
     * (their canaries' ops check nothing), whether the unfused attention
     * was found wrong (every attention then fails), the time spent. */
    struct {
        uint32_t pending, breaks;
        bool running, unfused_wrong;
        uint32_t us;
    } check;

    vk_tuning tuning;
    vk_pipelines pipelines;
    vk_cache cache;
    vk_descriptors desc;
    vk_memory mem;
    vk_exec exec;
    vk_submissions sub;
};

#endif
