/* Private declarations of the Vulkan backend. */
#ifndef VKMHA_VK_INTERNAL_H
#define VKMHA_VK_INTERNAL_H

#include "internal.h"

/* Generated from volk.h (src/volk_rename.py): volk's globals get vkmha's
 * prefix, so that a static libvkmha.a never exports them. */
#include "vkmha_volk_rename.h"
#include <volk.h>

#include "vkmha_vulkan.h"

/* ---- buffers (src/vk_memory.c) ------------------------------------------ */

typedef struct vk_buffer {
    VkBuffer buf;
    VkDeviceSize offset; /* where the data starts in buf (wrapped tensors) */
    VkDeviceMemory mem;
    /* A sparse buffer (vk_buffer_create_sparse; mem null): its memory, in
     * n_pages allocations of at most maxMemoryAllocationSize, bound in
     * order from its start. */
    VkDeviceMemory *pages;
    uint32_t n_pages;
    VkDeviceSize page_size; /* bytes of each page but the last */
    VkDeviceSize size;
    VkDeviceSize alloc_size; /* bytes of its VkDeviceMemory (all its pages) */
    void *map;      /* persistently mapped, or NULL */
    bool coherent;  /* mapped memory needs no flush / invalidate */
    uint64_t id;    /* unique per (re)creation: descriptor caches compare it */
    uint32_t heap;  /* memory heap of its VkDeviceMemory */
    /* An R32G32B32A32_SFLOAT view of the whole buffer, when the context reads
     * matmul operands as texel buffers (vk_state.matmul_texel), else null. */
    VkBufferView view4;
    /* R16G16B16A16_SFLOAT and R32G32_UINT views, for reading 16-bit data as
     * 4-element texels (vk_state.texel16; vk_texel_view), else null. */
    VkBufferView view4h, view4u;
} vk_buffer;

/* A typed strided view of a device buffer, the operand of every recording
 * function: the tensor of `dtype` whose element (i0, i1, i2, i3) lies at
 * byte `offset` + (i0 stride[0] + i1 stride[1] + i2 stride[2] + i3) *
 * element size past the start of buf (buf->offset). The innermost dimension
 * is contiguous; a 1-D view has strides 0. Any offset that is a multiple of
 * the element size works: a descriptor starts at the aligned offset below
 * and the shaders add the rest (vk_dispatch). buf NULL: absent. */
typedef struct vk_view {
    const vk_buffer *buf;
    VkDeviceSize offset; /* bytes */
    uint32_t dtype;      /* vkmha_dtype: F32, F16, BF16, or U8 (masks) */
    uint64_t stride[3];  /* elements */
} vk_view;

/* a / b, rounded up (b > 0). */
static inline uint64_t vk_div_up(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

/* The dense view of a whole buffer; buf NULL: an absent operand. */
static inline vk_view vk_view_of(const vk_buffer *buf, uint32_t dtype)
{
    return (vk_view){.buf = buf, .dtype = dtype};
}

/* Device buffers cached in the context and reused by every call whose tensors
 * fit: they only grow. Which tensor lives in which slot is each op's choice. */
typedef enum vk_slot {
    SLOT_Q_IN,    /* host inputs */
    SLOT_K_IN,
    SLOT_V_IN,
    SLOT_AUX,     /* small host inputs (matmul bias) */
    SLOT_MASK_KP, /* key padding, full mask and additive bias */
    SLOT_MASK_FULL,
    SLOT_MASK_BIAS,
    SLOT_Q_PROJ,  /* projections [B * L][heads * d]; Q_PROJ also holds the merged heads */
    SLOT_K_PROJ,
    SLOT_V_PROJ,
    SLOT_Q_HEADS, /* split heads [B][heads][L][d] */
    SLOT_K_HEADS,
    SLOT_V_HEADS,
    SLOT_SCORES,  /* [B][H][Lq][Lk] scores, then weights in place */
    SLOT_STATS,   /* fused attention: (max, sum) per query row */
    SLOT_PARTIAL_O, /* fused split-K: per key range, output and (max, sum) */
    SLOT_PARTIAL_ML,
    SLOT_O_HEADS, /* attention output [B][H][Lq][d_v] */
    SLOT_OUT,     /* op and layer outputs */
    SLOT_WEIGHTS, /* attention weights of a 16-bit dtype (host arrays) */
    SLOT_MM_ACC,  /* fp32 sums of a 16-bit matmul's ranges of k (vk_record_matmul) */
    SLOT_COUNT
} vk_slot;

/* ---- kernels and pipelines (src/vk_kernels.c, vk_tuning.c, vk_pipeline.c) -- */

/* The most threads that create pipelines at once (vk_pipelines_build). */
#define VK_BUILD_THREADS_MAX 16

/* The most rows of A that take the matmul's TILE_GEMV (a decode step's batch). */
#define VK_GEMV_ROWS 4u

/* The longest row a CPU-shaped row kernel walks in one invocation: llvmpipe
 * ends any loop after 65535 iterations, and longer rows have work enough for
 * the workgroup-per-row kernels. */
#define VK_CPU_ROW_MAX 16384u

/* Fused attention pipelines by largest head dim: 32, 64, 128, 256. */
#define VK_FLASH_CLASSES 4
/* Keys per online-softmax step of shaders/flash_cpu.comp (its BK). */
#define VK_FLASH_CPU_BLOCK_K 4

/* The fused attention shader's blocking for one head-dim class, chosen from
 * the device's limits (src/vk_pipeline.c; all zero: the class runs
 * unfused). vkmha_context_get_kernels shows it as parameters. */
typedef struct vk_flash_config {
    uint32_t max_head_dim; /* used when d_k and d_v are at most this */
    uint32_t block_q;      /* query rows per workgroup */
    uint32_t block_k;      /* keys per step */
    uint32_t tm, tn;       /* scores per invocation: tm queries x tn keys */
    uint32_t workgroup_size;
} vk_flash_config;

/* The push-constant range of every pipeline layout: the 128 bytes Vulkan
 * guarantees. VK_PUSH_BLOCK(name) checks that struct name, the C mirror of a
 * shader's push-constant block, fits it in whole 32-bit words. */
#define VK_PUSH_BYTES 128
#define VK_PUSH_BLOCK(name)                                                                 \
    _Static_assert(sizeof(struct name) <= VK_PUSH_BYTES && sizeof(struct name) % 4 == 0,    \
                   #name " must fit the push-constant range")

/* Specialization constants of a pipeline, at most (the matmul's). */
#define VK_MAX_SPEC 7
/* The dtypes of a dispatch's buffers: 2 bits (a vkmha_dtype: F32 0, F16 2,
 * BF16 3) per index in the buffers it passes, the specialization constant
 * DTYPES of shaders/typed.glsl (constant_id VK_SPEC_DTYPES). 0: all F32. */
#define VK_DT(index, dtype) ((uint32_t)(dtype) << (2 * (index)))
#define VK_DT_OF(dtypes, index) (((dtypes) >> (2 * (index))) & 3u)
#define VK_SPEC_DTYPES 16
/* Bit 31 of a dispatch's dtypes word, set by vk_dispatch: a buffer starts
 * past its descriptor's aligned offset (a tensor wrapped at such an offset),
 * so the pipeline reads the misalign push words (shaders/typed.glsl). */
#define VK_DT_MISALIGNED (1u << 31)
/* Bits 30 and 29: the matmul variants for ranges of k past
 * maxStorageBufferRange (vk_record_matmul; shaders/matmul.comp): C += ..., or
 * the bias binding is an fp32 [m][n] addend. Specialized, so that the plain
 * matmul's code is untouched by them. */
#define VK_DT_ACCUMULATE (1u << 30)
#define VK_DT_ADDEND (1u << 29)

/* Bindings of a site, at most: KIND_FLASH has 9 (q, k, v, 3 masks, out,
 * statistics, key lengths), and so has KIND_FLASH_CPU (q, k, v as vec4
 * texel buffers).
 * KIND_MATMUL has 4 (A, B, bias, C), or 6 with matmul_texel: A and B as vec4
 * texel buffers, bias, C, then A and B again as storage buffers (for shapes
 * whose strides rule out vec4 reads). With matmul_texel the softmax (8),
 * heads (3), LayerNorm (8) and the split-K combine (6) add texel views of
 * their inputs. */
#define VK_MAX_BINDINGS 9
/* vk_dispatch's misalign words hold a byte for each of the first
 * VK_MISALIGN_SLOTS buffers; later ones (a shader's key lengths) must start
 * on a descriptor boundary. */
#define VK_MISALIGN_SLOTS 8

/* The kernel table and the pipelines' keys; the push blocks' C mirrors. */
#include "vk_kernels.h"
#include "vk_push.h"

/* Not a vkmha_mask_kind: shaders/mask.glsl's MASK_LENGTHS (the dispatch
 * binds each batch entry's key length). */
#define VK_MASK_LENGTHS 16u

/* A descriptor set bound to one dispatch site; rewritten only when a buffer
 * behind it was recreated. A site is used at most once per command buffer. */
typedef struct vk_site {
    VkDescriptorSet set;
    vk_kind kind;
    uint64_t ids[VK_MAX_BINDINGS];          /* buffer id and texel view kind */
    VkDeviceSize offsets[VK_MAX_BINDINGS]; /* the view's offset */
} vk_site;

/* The sites vk_record_attention uses, by name (vk_attention_site_kinds
 * gives each one's kind). */
typedef enum vk_attention_site {
    ASITE_SCORES,       /* unfused: the scores matmul Q K^T */
    ASITE_SOFTMAX,      /* unfused: the masked softmax */
    ASITE_PV,           /* unfused: the P V matmul */
    ASITE_WEIGHTS_COPY, /* unfused: its fp32 weights into 16-bit ones (heads, one head) */
    ASITE_FLASH,        /* the workgroup-shared fused shader */
    ASITE_FLASH_WEIGHTS, /* its weights pass (the same shader, weights bound as output) */
    ASITE_FLASH_CPU,    /* the CPU-shaped fused shader */
    ASITE_FLASH_CPU_WEIGHTS,
    ASITE_COMBINE,      /* split-K's combine */
    VK_ATTENTION_SITES
} vk_attention_site;
extern const vk_kind vk_attention_site_kinds[VK_ATTENTION_SITES]; /* src/vk_kernels.c */

/* The context's own sites, for the ops on host arrays. */
typedef enum vk_op_site {
    OPSITE_MATMUL,
    OPSITE_SOFTMAX,
    OPSITE_HEADS,
    OPSITE_ATTENTION,  /* VK_ATTENTION_SITES sites */
    OPSITE_LAYERNORM = OPSITE_ATTENTION + VK_ATTENTION_SITES, /* vk_layernorm */
    OPSITE_COUNT
} vk_op_site;

/* A pool of sites that share a VkDescriptorPool (the context's for the ops,
 * each layer's own for its forward). */
typedef struct vk_site_pool {
    VkDescriptorPool pool;
    uint32_t count;
    vk_site *sites;
} vk_site_pool;

/* ---- the backend state of a context ------------------------------------- */

/* ---- plans: what a call records, built before anything is recorded ----- */

/* A copy from host memory into a device buffer: n elements of dtype `from`
 * at src, converted to `to` (src/half.c) as they are written, at byte
 * `offset` of dst (a copy: the caller's buffer struct may be a temporary).
 * from == to copies bytes unchanged. */
typedef struct vk_plan_upload {
    vk_buffer dst;
    VkDeviceSize offset;
    const void *src; /* read when the plan runs: valid until vk_exec_end */
    uint32_t from, to;
    uint64_t n, bytes; /* bytes written into dst */
} vk_plan_upload;

/* A copy from a device buffer into host memory: n2 groups of n1 blocks of
 * len bytes, strided alike on the device and the host. */
typedef struct vk_plan_download {
    vk_buffer src; /* a copy, as dst above */
    uint8_t *dst;
    size_t len, n1, stride1, n2, stride2;
    size_t span; /* bytes from the first to the last one copied */
    /* When the plan runs: where the host reads the data from (the working
     * buffer when mapped, else download staging) and at which byte. */
    const vk_buffer *from;
    VkDeviceSize from_off;
} vk_plan_download;

/* What a pass records: a dispatch, or a transfer command (vk_copy,
 * vk_update, vk_zero). */
typedef enum vk_pass_op { PASS_DISPATCH, PASS_COPY, PASS_UPDATE, PASS_ZERO } vk_pass_op;

/* One dispatch, resolved: its pipeline was created and its descriptors
 * chosen when it was planned (vk_dispatch), so running it cannot fail. */
typedef struct vk_pass {
    vk_pass_op op;
    /* PASS_COPY: size bytes from src at src_off to dst at dst_off;
     * PASS_UPDATE: size bytes of data (read when the plan runs) to dst;
     * PASS_ZERO: zeros over size bytes of dst at dst_off. */
    struct vk_pass_xfer {
        VkBuffer src, dst;
        VkDeviceSize src_off, dst_off, size;
        const void *data;
    } xfer;
    VkPipeline pipeline; /* null until vk_exec_end when it did not exist yet */
    vk_pipe pipe;
    uint32_t dtypes;
    vk_kind kind;
    VkDescriptorSet set; /* without push descriptors: the site's, written */
    uint32_t n_writes;   /* with push descriptors: the bindings to push */
    struct vk_pass_binding {
        uint32_t binding;
        VkDescriptorType type;
        VkDescriptorBufferInfo info; /* storage buffers */
        VkBufferView view;           /* texel buffers */
    } writes[VK_MAX_BINDINGS];
    uint32_t push[VK_PUSH_BYTES / 4], push_size;
    uint32_t groups[3];
    bool barrier; /* after the writes of the steps before it */
} vk_pass;

/* The steps of one call, in order: its uploads, then its passes, then its
 * downloads (the shape of every call). */
typedef struct vk_plan {
    vk_plan_upload *up;
    vk_pass *passes;
    uint32_t n_up, cap_up, n_passes, cap_passes;
    vk_plan_download down[4];
    uint32_t n_down;
    bool barrier_next; /* vk_barrier since the last pass */
} vk_plan;

/* The loader's global functions, from the system loader or the
 * application's vkGetInstanceProcAddr (vkmha_vulkan_desc). */
typedef struct vk_global_table {
    PFN_vkGetInstanceProcAddr GetInstanceProcAddr;
    PFN_vkCreateInstance CreateInstance;
    PFN_vkEnumerateInstanceExtensionProperties EnumerateInstanceExtensionProperties;
    PFN_vkEnumerateInstanceLayerProperties EnumerateInstanceLayerProperties;
    PFN_vkEnumerateInstanceVersion EnumerateInstanceVersion; /* NULL: a 1.0 loader */
} vk_global_table;

typedef struct vk_instance_table {
    PFN_vkDestroyInstance DestroyInstance;
    PFN_vkEnumeratePhysicalDevices EnumeratePhysicalDevices;
    PFN_vkGetPhysicalDeviceProperties GetPhysicalDeviceProperties;
    PFN_vkGetPhysicalDeviceProperties2 GetPhysicalDeviceProperties2;
    PFN_vkGetPhysicalDeviceFeatures2 GetPhysicalDeviceFeatures2;
    PFN_vkGetPhysicalDeviceFormatProperties GetPhysicalDeviceFormatProperties;
    PFN_vkGetPhysicalDeviceQueueFamilyProperties GetPhysicalDeviceQueueFamilyProperties;
    PFN_vkGetPhysicalDeviceMemoryProperties GetPhysicalDeviceMemoryProperties;
    PFN_vkGetPhysicalDeviceMemoryProperties2 GetPhysicalDeviceMemoryProperties2;
    PFN_vkEnumerateDeviceExtensionProperties EnumerateDeviceExtensionProperties;
    PFN_vkCreateDevice CreateDevice;
    PFN_vkGetDeviceProcAddr GetDeviceProcAddr;
    PFN_vkCreateDebugUtilsMessengerEXT CreateDebugUtilsMessengerEXT;
    PFN_vkDestroyDebugUtilsMessengerEXT DestroyDebugUtilsMessengerEXT;
} vk_instance_table;

/* Where a call's commands go. */
typedef enum vk_mode {
    MODE_SYNC,   /* the context's command buffer, submitted and waited for */
    MODE_RECORD, /* the application's command buffer, not submitted */
    MODE_SUBMIT, /* a submission's command buffer, submitted, not waited for */
} vk_mode;

struct vk_state {
    vkmha_context *ctx; /* for errors and logging */
    /* The application's VkAllocationCallbacks for every Vulkan create,
     * allocate, destroy and free (NULL: the driver's). */
    const VkAllocationCallbacks *vkalloc;
    /* The pipeline cache passed to every vkCreateComputePipelines (null: none;
     * src/vk_pipeline_cache.c). */
    VkPipelineCache pipeline_cache;
    bool pipeline_cache_loaded;
    uint64_t pipeline_cache_bytes;
    uint32_t pipelines_created;
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
    char *pipeline_cache_path; /* desc->pipeline_cache_path copied, or NULL */
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

    /* Tensors past maxMemoryAllocationSize are sparse buffers (sparseBinding
     * enabled, VK_QUEUE_SPARSE_BINDING_BIT on the queue's family, and not
     * desc->debug->no_sparse_binding), up to vk_max_tensor_bytes each
     * (maxBufferSize where the device states one, and what is left of
     * sparseAddressSpaceSize, sparse_space: sparse_bytes are in use). */
    bool sparse, no_sparse;
    char sparse_why[96]; /* why not sparse, for messages */
    uint64_t sparse_block; /* bytes of a sparse block (the probe's alignment) */
    uint64_t sparse_space, sparse_bytes;
    uint64_t max_buffer_size; /* maxBufferSize (Vulkan 1.3), else UINT64_MAX */

    /* Memory types: working buffers, and staging when they are not mapped. */
    uint32_t mt_work, mt_upload, mt_download;
    bool work_mapped; /* unified memory: no staging copies */
    uint64_t next_buffer_id;
    uint64_t memory_bytes, memory_peak_bytes; /* VkDeviceMemory held now, at most */
    uint64_t scratch_budget; /* desc->scratch_budget: 0, or vk_scratch_fit after each call */
    uint64_t heap_bytes[VK_MAX_MEMORY_HEAPS];   /* the same per memory heap */
    /* The device has VK_EXT_memory_budget: every allocation also fits what
     * its heap's budget leaves (vk_memory.c's allocate). */
    bool memory_budget;
    /* vkAllocateMemory calls so far, and vkmha_debug_options' failures:
     * calls number fail_alloc_first .. fail_alloc_last fail (0: none). */
    uint64_t alloc_calls, fail_alloc_first, fail_alloc_last;

    /* VKMHA_CONTEXT_PROFILE: 2 timestamps per call (null: off or no
     * timestamps on this queue). */
    VkQueryPool timestamps;
    uint64_t timestamp_mask; /* timestampValidBits ones */
    uint64_t last_gpu_time_ns;

    /* Tuning, from the device limits (src/vk_pipeline.c). */
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
    uint32_t max_texel_elements; /* maxTexelBufferElements */
    uint32_t reduce_wg, elementwise_wg;
    /* CPU devices: the row kernels (softmax, LayerNorm, heads) take one row
     * per invocation, cpu_rows_wg rows per workgroup, for rows of at most
     * VK_CPU_ROW_MAX elements (src/vk_pipeline.c). 0 on GPUs. */
    uint32_t cpu_rows_wg;
    bool row_texel; /* they read their inputs' texel views where they have them */
    /* 16-bit data: read and written as 16-bit elements (storageBuffer16BitAccess
     * enabled; the shaders' NATIVE16 variants), else packed in uint words.
     * no_native16: desc->debug->no_native_16bit. */
    bool native16, no_native16;
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

    VkDescriptorSetLayout set_layouts[KIND_COUNT];
    VkPipelineLayout pipe_layouts[KIND_COUNT];
    /* All-F32 pipelines by vk_pipe_index (n_pipes: vk_pipe_count), created
     * on first use. */
    VkPipeline *pipes;
    uint32_t n_pipes;
    /* Pipelines specialized for other dtypes, created on first use. */
    struct vk_typed_pipe {
        vk_pipe pipe;
        uint32_t dtypes;
        VkPipeline pipeline;
    } *typed_pipes;
    uint32_t n_typed_pipes, cap_typed_pipes;
    /* Pipelines the plans since the last vk_pipelines_build dispatch and
     * that do not exist yet (vk_pipeline_want): created together, on
     * several threads, before a plan is recorded (vk_exec_end). */
    vk_pipe_key *want;
    uint32_t n_want, cap_want;
    /* The self-check's first pass: plans are made (their pipelines wanted)
     * and dropped, nothing runs (vk_exec_end). */
    bool gather;
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

    vk_buffer slots[SLOT_COUNT];
    vk_buffer dummy; /* bound where an optional tensor is absent */
    vk_buffer upload, download; /* staging, grown on demand */

    VkDeviceSize min_storage_offset_align; /* minStorageBufferOffsetAlignment */

    /* Where the call being recorded goes (src/vk_command.c). */
    vk_mode mode;
    /* Work was recorded into the application's command buffers since the
     * last trim: scratch buffers being replaced are retired, not freed. */
    bool recorded;
    vk_buffer *retired;
    uint32_t n_retired, cap_retired;
    /* Without push descriptors, the descriptor sets of dispatches recorded
     * into the application's command buffers: a set each, from these pools,
     * kept until vkmha_context_trim (the same contract as the retired
     * scratch). The last pool is the one that still has room. */
    VkDescriptorPool *rec_pools;
    uint32_t n_rec_pools;
    /* desc->debug->no_push_descriptors or its profile's. */
    bool debug_no_push;
    /* vkmha_path bits not used (src/vk_selfcheck.c), and the check's time. */
    uint32_t disabled_paths, self_check_us;
    /* vkmha_mha_submit's submissions not yet known to be complete. */
    struct vkmha_submission **subs;
    uint32_t n_subs, cap_subs;

    /* The call being planned (vk_exec_begin .. vk_exec_end): its mode,
     * planning (between the two), and its steps. */
    bool planning;
    vk_plan plan;
    bool dirty_transfer, dirty_compute; /* writes not yet covered by a barrier */
};

/* ---- compile-only contexts (src/context.c), for tools/vkmha-occupancy ---- */
/* vkmha__context_create_compile_only (src/internal.h): like
 * vkmha_context_create (desc->vulkan must be NULL), for a device that
 * compiles pipelines but cannot run them: Mesa's RADV with RADV_FORCE_FAMILY
 * and no GPU, a null device without memory types or fences whose queue must
 * never be used. The device, tiles and specialization constants are chosen
 * exactly as vkmha_context_create chooses them on that device; the device
 * also enables VK_KHR_pipeline_executable_properties (UNSUPPORTED without it)
 * and every pipeline is created with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR
 * (vk_pipeline_statistics). The context has no memory, command buffer,
 * fence or pipeline cache and never waits on the device: only
 * vk_pipe_info_get, vk_pipeline_get, vk_pipeline_statistics,
 * vkmha_context_get_info and vkmha_context_destroy may be used on it. */

/* ---- src/vk_loader.c ----------------------------------------------------- */
/* Loads the Vulkan loader once per process (thread-safe, idempotent). */
VkResult vk_loader_init(void);
/* The global functions through `gipa` (NULL: the system loader, which
 * vk_loader_init must have loaded). */
void vk_load_global_table(PFN_vkGetInstanceProcAddr gipa, vk_global_table *t);
void vk_load_instance_table(PFN_vkGetInstanceProcAddr gipa, VkInstance instance,
                            vk_instance_table *t);
void vk_load_device_table(VkDevice device, PFN_vkGetDeviceProcAddr get,
                          struct VolkDeviceTable *table);

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

/* ---- src/vk_context.c ---------------------------------------------------- */
/* The Vulkan backend's table is vk_backend_ops (src/internal.h).
 * compile_only: see vkmha__context_create_compile_only. */
vkmha_status vk_create(vkmha_context *ctx, const vkmha_context_desc *desc, bool compile_only);
void vk_destroy(vk_state *vk);

/* ---- src/vk_result.c ----------------------------------------------------- */
/* Maps a failed VkResult to a status, with a message naming `what`. */
vkmha_status vk_fail(vk_state *vk, VkResult r, const char *what);
const char *vk_result_string(VkResult r);

/* ---- src/vk_pipeline_cache.c ---------------------------------------------- */
/* Checks desc's pipeline cache fields, loads a valid cache (a missing,
 * corrupt or foreign one is logged at INFO and ignored) and creates
 * vk->pipeline_cache. Before vk_pipelines_init. */
vkmha_status vk_pipeline_cache_init(vk_state *vk, const vkmha_context_desc *desc);
/* Destroys the cache (before the device) and frees the copied path. */
void vk_pipeline_cache_destroy(vk_state *vk);
/* The table's pipeline_cache and pipeline_cache_path entries. */
vkmha_status vk_pipeline_cache_get(vkmha_context *ctx, const char *fn, void *data,
                                   size_t *size);
const char *vk_pipeline_cache_path(const vkmha_context *ctx);
/* The table's kernels entry (src/vk_pipeline.c). */
void vk_kernels(const vkmha_context *ctx, uint32_t *count, vkmha_kernel_info *out);


/* ---- the queue (src/vk_queue.c) ------------------------------------------ */
/* Fails with VKMHA_ERROR_DEVICE_LOST once the device was lost. */
vkmha_status vk_check_lost(vk_state *vk);
/* vkQueueSubmit, and vkQueueBindSparse, between the application's queue
 * lock callbacks. */
VkResult vk_queue_submit(vk_state *vk, const VkSubmitInfo *si, VkFence fence);
VkResult vk_queue_bind_sparse(vk_state *vk, const VkBindSparseInfo *bind, VkFence fence);
/* After r, a queue operation that signals vk->fence: r's failure, else
 * waits for the fence and resets it. */
VkResult vk_fence_wait(vk_state *vk, VkResult r);

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
vkmha_status vk_slot_ensure(vk_state *vk, vk_slot slot, VkDeviceSize size);
/* The same for a slot only bound in windows of at most maxStorageBufferRange
 * (a matmul's operands, vk_record_matmul): it may be larger, up to
 * maxMemoryAllocationSize. */
vkmha_status vk_slot_ensure_windowed(vk_state *vk, vk_slot slot, VkDeviceSize size);
/* Bytes of the scratch buffers: slots, staging and retired buffers. */
uint64_t vk_scratch_bytes(const vk_state *vk);
/* Frees scratch buffers, largest first, until at most `budget` bytes are
 * left; none while recorded command buffers may use them (vk->recorded). */
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

/* ---- the executor (src/vk_command.c, src/vk_submission.c) --------------- */
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
/* Adds vkCmdUpdateBuffer of `bytes` (a multiple of 4, at most 65536) from
 * host memory data (read by vk_exec_end) into dst at byte offset (a
 * multiple of 4): small data in the command buffer itself, ordered with the
 * passes, for data that differs between recordings of one buffer. */
vkmha_status vk_update(vk_state *vk, const vk_buffer *dst, VkDeviceSize offset,
                       const void *data, VkDeviceSize bytes);
/* Adds zeros over the whole of buffer dst (vkCmdFillBuffer). */
vkmha_status vk_zero(vk_state *vk, const vk_buffer *dst);
/* Adds a dispatch of groups (x, y, z) of `pipe` with the views bufs[0 ..
 * n_bufs) bound through `site` (an absent view binds the dummy) and
 * push_size bytes of push constants. The pipeline is specialized for the
 * views' dtypes (vk_view_dtypes), the shader's `variant` bits of DTYPES
 * (VK_DT_ACCUMULATE, VK_DT_ADDEND; 0: none) and, where a view starts past an
 * aligned offset, for reading the misalign words. */
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

/* MODE_SUBMIT's part of vk_exec_begin: a new submission (its command buffer
 * and fence), the newest of vk->subs. */
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
/* Frees a submission's Vulkan objects and removes it from the pending list. */
void vk_submission_free(vk_state *vk, struct vkmha_submission *s);

/* ---- views of buffers (src/vk_view.c) ------------------------------------ */
/* Whether `bytes` of view v fit one descriptor, with the bytes its start is
 * past the descriptor's offset (vk_dispatch). */
bool vk_view_fits(const vk_state *vk, const vk_view *v, uint64_t bytes);
/* The most bytes one binding of a buffer of vkmha's holds: maxStorageBufferRange
 * or maxMemoryAllocationSize, the lower. */
uint64_t vk_binding_bytes(const vk_state *vk);
/* The bytes a window bound from any start holds: maxStorageBufferRange less
 * the up to minStorageBufferOffsetAlignment - 1 bytes its start may be past
 * its descriptor's offset (vk_dispatch). */
uint64_t vk_window_bytes(const vk_state *vk);
/* The dtypes word (VK_DT) of views bufs[0 .. n): U8 masks count as 0. */
uint32_t vk_view_dtypes(const vk_view bufs[], uint32_t n);
/* The texel view of v for reading its data as vec4s in a shader's float
 * variant (fp32: view4, fp16: view4h) or its TEXEL_U16 variant (16-bit
 * data: view4u); null where there is none (bf16 in the float variant, fp32
 * in the u16 one, wrapped tensors, views past a buffer's start, buffers
 * under 16 bytes, no texel16). */
VkBufferView vk_texel_view(const vk_view *v, bool u16);
/* Whether views v[0..n) can all be read as texels by one variant of a
 * shader (u16_variant: it has a TEXEL_U16 one): each has the texel view that
 * variant reads. */
bool vk_texel_ok(const vk_view *const v[], uint32_t n, bool u16_variant);

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

/* ---- src/vk_tuning.c -------------------------------------------------------- */
/* Chooses the tiles (override: desc->matmul_tile, may be NULL), the fused
 * attention's blocks, workgroup sizes and the CPU-shaped kernels from the
 * device's limits. */
vkmha_status vk_tuning_init(vk_state *vk, const vkmha_tile_config *override);
/* Takes the fallback of vkmha_path bit `path` (the self-check, or
 * VKMHA_DISABLE_PATHS): the kernel table's pipelines of that path become
 * unavailable (vk_pipe_available), a feature path (subgroup arithmetic,
 * 16-bit storage, sparse binding) is turned off. */
void vk_tuning_disable(vk_state *vk, uint32_t path);

/* ---- src/vk_descriptors.c --------------------------------------------------- */
/* Creates each kind's layouts and the context's sites (vk->op_sites). */
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
/* Reserves n more sites of vk->window_sites[kind] for the next plan (the
 * windows after each matmul's or attention pass's first, ...: each part of
 * the plan reserves its own), growing the pool; outside a plan. */
vkmha_status vk_window_sites_reserve(vk_state *vk, vk_kind kind, uint64_t n);
/* The next `n` (>= 1) sites of vk->window_sites[kind] for the plan being
 * made; NULL (an internal error reported) when fewer were reserved. */
vk_site *vk_window_sites_take(vk_state *vk, vk_kind kind, uint64_t n);

/* ---- src/vk_pipeline.c ------------------------------------------------------ */
/* Tuning (vk_tuning_init), layouts and sites (vk_descriptors_init), and the
 * store of the kernel table's pipelines. */
vkmha_status vk_pipelines_init(vk_state *vk, const vkmha_tile_config *override);
void vk_pipelines_destroy(vk_state *vk);
/* The pipeline of `pipe` specialized for `dtypes` (VK_DT), created on first use. */
vkmha_status vk_pipeline_get(vk_state *vk, vk_pipe pipe, uint32_t dtypes, VkPipeline *out);
/* The pipeline of (pipe, dtypes) if it exists, else null. */
VkPipeline vk_pipeline_find(const vk_state *vk, vk_pipe pipe, uint32_t dtypes);
/* Adds (pipe, dtypes) to vk->want (once). */
vkmha_status vk_pipeline_want(vk_state *vk, vk_pipe pipe, uint32_t dtypes);
/* Creates the pipelines of vk->want that do not exist, on up to
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
                                    uint32_t *subgroup_size,
                                    VkPipelineExecutableStatisticKHR *out, uint32_t *count);
/* src/vk_selfcheck.c: VKMHA_DISABLE_PATHS, then (run) the canaries of every
 * path the context would use; breaks: desc->debug->self_check_break. */
vkmha_status vk_self_check(vk_state *vk, bool run, uint32_t breaks);

/* ---- recording of each op (no uploads, no submit), one file per op ------- */
/* C[z] = alpha A[z] op(B[z]) + bias for z in [0, batch_outer * batch_inner),
 * z = zo * batch_inner + zi: A[z] is view a at (zo, zi) (stride[0] and
 * stride[1]) with rows stride[2] apart; B[z] is b at (zo, zi / b_div); C
 * likewise. bias: [n], absent (buf NULL) or not. */
typedef struct vk_matmul_args {
    vk_view a, b, bias, c;
    uint32_t m, n, k;
    bool trans_b;
    float alpha;
    uint32_t batch_outer, batch_inner, b_div;
    bool accumulate; /* C += alpha A op(B) (+ bias) */
    bool addend;     /* bias is an fp32 [m][n] at its stride[2] (vk_record_matmul) */
} vk_matmul_args;
/* Records C = alpha A op(B) + bias. Operands past maxStorageBufferRange
 * (one product only) are bound in windows: B over its rows with op T (the
 * output's columns), over its rows with op N (ranges of k, accumulated into
 * C, or for a 16-bit C into fp32 sums in SLOT_MM_ACC that the last range
 * adds: one rounding), A and C over rows; each window after the first takes
 * the next site of vk->window_sites[KIND_MATMUL] (vk_matmul_prepare before the plan, for
 * all of its matmuls, sizes SLOT_MM_ACC). A batched operand past it:
 * UNSUPPORTED. */
vkmha_status vk_record_matmul(vk_state *vk, vk_site *site, const vk_matmul_args *a);
/* Before a plan that records the n matmuls a[0 .. n - 1]: the window sites
 * their windows take (vk_window_sites_reserve); UNSUPPORTED naming the
 * operand of one that cannot be windowed. */
vkmha_status vk_matmul_prepare(vk_state *vk, const vk_matmul_args *a, uint32_t n);
/* The args of a public matmul (s) on dense views a, b, bias (absent or not)
 * and c: s's strides go into them. */
vk_matmul_args vk_matmul_args_of(const mm_shape *s, vk_view a, vk_view b, vk_view bias,
                                 vk_view c);

typedef struct vk_softmax_args {
    vk_view scores; /* the output; also the input when input is absent */
    vk_view input;
    vk_view masks[3]; /* key padding, full, bias (absent where the kind is) */
    vk_view lengths;  /* uint32 key length per batch entry, or absent */
    uint32_t batch, heads, len_q, len_k;
    float scale;
    const mask_r *mask; /* kinds and bias broadcast */
} vk_softmax_args;
vkmha_status vk_record_softmax(vk_state *vk, vk_site *site, const vk_softmax_args *a);

/* x [batch][len][heads * head_dim] -> y [batch][heads][len][head_dim]
 * (split), or back; dense views, except that a split's y may have strides
 * per batch entry and head (stride[0], stride[1]; 0: dense) with each
 * head's rows contiguous (a KV cache's entries). */
vkmha_status vk_record_heads(vk_state *vk, vk_site *site, const heads_shape *s, bool split,
                             vk_view x, vk_view y);
/* vk_record_heads in blocks (whole entries, heads of one entry, rows of one
 * head) whose spans of x and y each fit one binding, when they do not as a
 * whole; the blocks after the first take sites of vk->window_sites[KIND_HEADS]
 * (vk_heads_blocks - 1 of them, ensured before the plan). */
vkmha_status vk_record_heads_blocks(vk_state *vk, vk_site *site, const heads_shape *s,
                                    bool split, vk_view x, vk_view y);
/* The blocks it records (1: whole; 0: not one row fits). */
uint64_t vk_heads_blocks(const vk_state *vk, const heads_shape *s, bool split, const vk_view *x,
                         const vk_view *y);

/* y = LayerNorm(y + residual) over rows of cols, in place (residual absent
 * or not); dense views. */
vkmha_status vk_record_layernorm(vk_state *vk, vk_site *site, uint32_t rows, uint32_t cols,
                                 float eps, vk_view residual, vk_view gamma, vk_view beta,
                                 vk_view y);

/* Views of heads: element (b, h, i, c) at b stride[0] + h stride[1] + i
 * stride[2] + c. Split heads [batch][heads][len][dim]: */
vk_view vk_view_split(const vk_buffer *buf, uint32_t heads, uint32_t len, uint32_t dim,
                      uint32_t dtype);
/* Merged heads [batch][len][heads * dim] (projections, the layer's concat). */
vk_view vk_view_merged(const vk_buffer *buf, uint32_t heads, uint32_t len, uint32_t dim,
                       uint32_t dtype);

/* How one attention call runs: decided once, before anything is recorded. */
typedef struct vk_attn_plan {
    attn_shape s;
    bool fused;
    bool cpu_kernel; /* fused: shaders/flash_cpu.comp, else flash.comp */
    bool weights;    /* the caller wants the weights (in SLOT_SCORES) */
    uint32_t cls;    /* fused: head-dim class, index into vk->flash */
    uint32_t q_blocks, splits, split_len;
    uint32_t chunk, chunks; /* keys per dispatch and dispatches, per range */
    /* fused, k or v past maxStorageBufferRange: they are bound in windows of
     * `window` keys (a multiple of chunk, or one chunk) of one batch entry
     * and key/value head at a time, one key range (splits 1); 0: whole */
    uint32_t window;
    /* unfused, k or v past maxStorageBufferRange: the matmuls one product
     * (batch entry, query head) at a time, each bound in windows */
    bool products;
    /* fused, CPU-shaped kernel, at most its tm queries: lanes over keys
     * (each range's partial state is lanes ranges: partial_splits) */
    bool lane_keys;
    uint32_t partial_splits; /* ranges of partial state: splits (x lanes) */
    vk_view scores;   /* scores / weights: the caller's tensor or SLOT_SCORES */
    vk_view masks[3]; /* key padding, full, bias: the mask slots or tensors */
    /* A KV cache's (absent otherwise): each batch entry's key length
     * (uint32 [batch], at a descriptor boundary), and the cache entry of
     * batch entry 0: k and v are views of the whole cache. */
    vk_view lengths;
    uint32_t kv_b0;
} vk_attn_plan;
/* Predicted microseconds of a call of shape s on the fused path (one kernel,
 * with block_q query rows per workgroup, plus the weights pass if asked)
 * and on the unfused path: the coefficients of src/vk_cost.c's table times
 * these features (bench/vkmha-bench-cost fits the coefficients). */
#define VK_COST_FUSED_FEATURES 5
#define VK_COST_UNFUSED_FEATURES 5
void vk_cost_fused_features(const attn_shape *s, uint32_t block_q, bool weights,
                            double f[VK_COST_FUSED_FEATURES]);
void vk_cost_unfused_features(const attn_shape *s, const vkmha_tile_config *t,
                              double f[VK_COST_UNFUSED_FEATURES]);
double vk_cost_fused(const vk_state *vk, const attn_shape *s, bool cpu_kernel, bool weights,
                     uint32_t block_q);
double vk_cost_unfused(const vk_state *vk, const attn_shape *s);
/* Chooses the path, blocks and key splits for shape s (fn names the public
 * call in messages) and ensures the slots it needs besides q, k, v, out and
 * the masks: SLOT_SCORES when unfused or weights (unless weights_view, the
 * caller's weights tensor, takes its place), SLOT_STATS, and the split-K
 * partials. plan->masks are the mask slots: a caller with mask tensors
 * replaces them. UNSUPPORTED if the fused path was forced for head dims
 * above 256. qkvo: the views q, k, v and out will be read from and written
 * to (out's buf NULL: a slot, in out's dtype), which decide whether the CPU-shaped kernel can
 * read them as vec4 texels, and whether k and v (from entry kv_b0, the
 * plan's) fit one binding or are bound in windows (plan->window: the fused
 * path's, or one product's matmul windows on the unfused path; the window
 * sites are ensured here). */
vkmha_status vk_attention_prepare(vk_state *vk, const attn_shape *s, bool weights,
                                  const vk_view *weights_view, const vk_view qkvo[4],
                                  uint32_t kv_b0, vk_attn_plan *plan);
/* The unfused path's matmuls of `plan`: scores = scale q k^T (mm[0]) and
 * out = p v (mm[1]), from the plan's first cache entry, in fp32 `scores`. */
void vk_attention_unfused_matmuls(const vk_attn_plan *plan, const vk_view *q,
                                  const vk_view *k_all, const vk_view *v_all, const vk_view *out,
                                  const vk_view *scores, vk_matmul_args mm[2]);
/* Product (entry b, query head h) of one of those batched matmuls, alone. */
vk_matmul_args vk_attention_product(const vk_matmul_args *m, uint64_t b, uint64_t h);
/* Where the unfused path keeps its fp32 scores: the caller's fp32 weights,
 * else SLOT_SCORES. */
vk_view vk_attention_unfused_scores(vk_state *vk, const vk_attn_plan *plan);
/* Records the attention of `plan` from q, k, v (+ masks in the mask slots)
 * into out, and the weights into SLOT_SCORES if planned. out may share q's
 * buffer when d_k == d_v and the views match (q is read before out is
 * written), as the layer's concat does. Uses VK_ATTENTION_SITES sites. */
vkmha_status vk_record_attention(vk_state *vk, vk_site sites[], const vk_attn_plan *plan,
                                 const mask_r *mask, const vk_view *q, const vk_view *k,
                                 const vk_view *v, const vk_view *out);
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
/* Views of the context's mask slots (key padding, full, bias). */
void vk_mask_slots(vk_state *vk, vk_view views[3]);
/* Points a->mask and a->masks at `mask` and views (key padding, full,
 * bias), absent where a kind is. */
void vk_mask_args(const vk_view views[3], const mask_r *mask, vk_softmax_args *a);

/* Public ops on the Vulkan backend, on host arrays. */
vkmha_status vk_matmul(vk_state *vk, const mm_shape *s, const void *a, const void *b,
                       const void *bias, void *c);
vkmha_status vk_softmax(vk_state *vk, const sm_shape *s, const void *x, const mask_r *mask,
                        void *y);
vkmha_status vk_heads(vk_state *vk, const heads_shape *s, bool split, const void *x,
                      void *y);
/* Residual add + LayerNorm on host arrays (ref_layernorm's arguments; res may
 * be NULL): no public op, for the kernel benchmark and the layernorm test,
 * which link the library's objects. */
vkmha_status vk_layernorm(vk_state *vk, uint32_t rows, uint32_t cols, float eps,
                          const float *x, const float *res, const float *gamma,
                          const float *beta, float *y);
vkmha_status vk_attention(vk_state *vk, const attn_shape *s, const void *q, const void *k,
                          const void *v, const mask_r *mask, void *out, void *weights);

/* ---- the backend table's entries (vk_backend_ops, src/vk_context.c) ------ */

/* src/vk_tensor.c: a tensor is a device buffer. */
typedef struct vk_tensor {
    vkmha_tensor t;
    bool wrapped;  /* buf.buf is the application's */
    vk_buffer buf;
} vk_tensor;
/* The buffer of a tensor of the Vulkan backend (NULL: NULL). */
vk_buffer *vk_tensor_buf(const vkmha_tensor *t);
/* The dense view of a tensor argument (absent: no tensor). */
vk_view vk_tensor_view(const vkmha_arg *a);
/* Views of a mask's tensors (absent where a kind has none). */
void vk_tensor_masks(const vkmha_mask_arg *m, vk_view views[3]);
/* vk_exec_begin / vk_exec_end in a tensor form (FORM_TENSOR: MODE_SYNC,
 * FORM_RECORD: into run->cmd, FORM_SUBMIT: *run->sub). */
vkmha_status vk_run_begin(vk_state *vk, const vkmha_run *run);
vkmha_status vk_run_end(vk_state *vk, const vkmha_run *run, vkmha_status st);
vkmha_status vk_tensor_alloc(vkmha_tensor *t);
vkmha_status vk_tensor_wrap(vkmha_context *ctx, const vkmha_tensor_desc *desc, uint64_t handle,
                            uint64_t offset, uint64_t size, vkmha_tensor **out);
void vk_tensor_free(vkmha_tensor *t);
vkmha_status vk_tensor_copy(const vkmha_tensor *t, uint64_t offset, void *host, uint64_t bytes,
                            bool up);
vkmha_status vk_op_matmul(vkmha_context *ctx, const vkmha_run *run, const mm_shape *s,
                          const vkmha_arg *a, const vkmha_arg *b, const vkmha_arg *bias,
                          const vkmha_arg *c);
vkmha_status vk_op_softmax(vkmha_context *ctx, const vkmha_run *run, const sm_shape *s,
                           const vkmha_arg *x, const vkmha_mask_arg *mask, const vkmha_arg *y);
vkmha_status vk_op_heads(vkmha_context *ctx, const vkmha_run *run, const heads_shape *s,
                         bool split, const vkmha_arg *x, const vkmha_arg *y);
vkmha_status vk_op_attention(vkmha_context *ctx, const vkmha_run *run, const attn_shape *s,
                             const vkmha_arg *q, const vkmha_arg *k, const vkmha_arg *v,
                             const vkmha_mask_arg *mask, const vkmha_arg *out,
                             const vkmha_arg *weights);

/* src/vk_mha.c: the layer's weights on the device. */
typedef struct vk_mha {
    vkmha_mha m;
    vk_buffer dev[WEIGHT_COUNT]; /* in m.d.storage_dtype; buf null where absent */
    /* A projection weight (W_Q + i) [out][in] past maxMemoryAllocationSize
     * is kept in n_blocks[i] blocks of block_rows[i] rows, one allocation
     * each: dev[W_Q + i], then more[i][0 ..]; 1 block: whole. */
    uint32_t n_blocks[4], block_rows[4];
    vk_buffer *more[4];
    vk_site_pool sites;
} vk_mha;
/* A KV cache on the Vulkan backend (src/vk_kv_cache.c): the key lengths a
 * forward's attention reads (written into the command buffer by each
 * forward: vk_update), a buffer of zeros as long as one (entry, head) run
 * of the longer head dim (what kv_clear copies from: copies take any
 * alignment), and two heads sites per entry for the appends (one dispatch
 * per run of entries of equal length). */
typedef struct vk_kv {
    vkmha_kv_cache c;
    vk_buffer lens, zeros;
    vk_site_pool sites;
} vk_kv;
vkmha_status vk_kv_create(vkmha_kv_cache *c);
void vk_kv_free(vkmha_kv_cache *c);
vkmha_status vk_kv_clear(vkmha_kv_cache *c, uint32_t first, uint32_t count, uint32_t from);
vkmha_status vk_kv_reorder(vkmha_kv_cache *c, const uint32_t *src);
/* A cache tensor (keys, or values with v) as split heads of every entry. */
vk_view vk_kv_view(const vkmha_kv_cache *c, bool v);

vkmha_status vk_mha_weights(vkmha_mha *mha, const void *const src[WEIGHT_COUNT],
                            const uint32_t dt[WEIGHT_COUNT], const uint64_t n[WEIGHT_COUNT]);
void vk_mha_free(vkmha_mha *mha);
vkmha_status vk_mha_forward(vkmha_mha *mha, const vkmha_run *run, const mha_fwd *f,
                            const vkmha_arg io[5]);

/* src/vk_submission.c: on submissions not yet done. */
vkmha_status vk_submission_wait_op(vkmha_submission *s, uint64_t timeout_ns);
vkmha_status vk_submission_poll_op(vkmha_submission *s);
void vk_submission_free_op(vkmha_submission *s);

#endif /* VKMHA_VK_INTERNAL_H */
