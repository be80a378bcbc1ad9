/*
 * vkmha: the Transformer's multi-head attention forward pass on any Vulkan GPU.
 *
 * Conventions (the same for every function below):
 *   - Every fallible call returns a vkmha_status: 0 is success, errors are
 *     negative. vkmha_status_string() names them.
 *   - A create function takes a `const *_desc`, writes the new handle last and
 *     writes NULL on failure. Every destroy function accepts NULL.
 *   - A zero field in a desc means its documented default, so `{0}` plus the
 *     required sizes is a valid desc.
 *   - Descs and the arrays they point to only need to live until the call
 *     returns, unless a field says otherwise. vkmha copies what it keeps.
 *   - Tensors are dense, row-major host arrays of the call's dtype
 *     (vkmha_dtype: fp32 by default, or fp16 / bf16 where a desc's `dtype`
 *     field says so). Shapes are written outermost first:
 *     `[batch][len_q][d_model]` means element (b, i, c) is at index
 *     (b * len_q + i) * d_model + c. Layout is batch-first.
 *   - Precision: 16-bit values are only stored in 16 bits. Every dot
 *     product, softmax statistic and LayerNorm moment is computed in fp32
 *     (scores are never stored in 16 bits, so fp16 inputs whose logits
 *     exceed 65504 still give finite, correct results). A 16-bit output is
 *     rounded to nearest even when stored; a finite value beyond the
 *     format's largest saturates to it (+-65504 for fp16) instead of
 *     becoming Inf, while Inf and NaN stay Inf and NaN. No device feature is
 *     needed for 16-bit data: where the device has storageBuffer16BitAccess
 *     vkmha reads and writes 16-bit elements directly, elsewhere it packs two
 *     in a 32-bit word (vkmha_context_info.native_16bit_storage tells).
 *   - Weights use the layout of torch.nn.Linear.weight: `[out][in]`, so a
 *     projection is y = x * W^T + b.
 *   - When a call fails, vkmha_context_last_error() holds a message that names
 *     the offending argument, and the context stays usable (except after
 *     VKMHA_ERROR_DEVICE_LOST, after which only destroy is meaningful). A
 *     failed vkmha_context_create or vkmha_enumerate_devices has no context:
 *     vkmha_context_last_error(NULL) gives its message.
 *
 * Thread safety: vkmha keeps no global state except the process-wide Vulkan
 * loader initialization, which is done once, safely, by the first
 * vkmha_context_create(), and each thread's last creation error
 * (thread-local). Separate contexts (and the objects created from them)
 * are independent and may be used from different threads at the same time. One
 * context and its objects must be used by one thread at a time (external
 * synchronization); vkmha_status_string() and vkmha_version() may be called from
 * any thread at any time.
 */
#ifndef VKMHA_H
#define VKMHA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(VKMHA_SHARED_BUILD)
#define VKMHA_API __declspec(dllexport)
#elif defined(_WIN32) && !defined(VKMHA_STATIC)
#define VKMHA_API __declspec(dllimport)
#elif defined(__GNUC__)
#define VKMHA_API __attribute__((visibility("default")))
#else
#define VKMHA_API
#endif

/* Every field of every struct below is declared with VKMHA_ZERO. In C it is
 * nothing. In C++14 and later it is a default member initializer `= {}`, so
 * a vkmha struct is all zeros (all defaults) even without an initializer, and
 * the C idiom `vkmha_mha_desc md = {0};` compiles without
 * -Wmissing-field-initializers warnings (as does `= {}`). The layout is the
 * same in C and C++. Enum-valued fields are uint32_t (the comment names the
 * enum) so that `{0}` and positional initializers compile in C++ too. */
#if defined(__cplusplus) && \
    (__cplusplus >= 201402L || (defined(_MSVC_LANG) && _MSVC_LANG >= 201402L))
#define VKMHA_ZERO = {}
#else
#define VKMHA_ZERO
#endif

#define VKMHA_VERSION_MAJOR 0
#define VKMHA_VERSION_MINOR 5
#define VKMHA_VERSION_PATCH 0
#define VKMHA_VERSION_NUMBER \
    (VKMHA_VERSION_MAJOR * 10000 + VKMHA_VERSION_MINOR * 100 + VKMHA_VERSION_PATCH)

/* The version of the library actually loaded, as VKMHA_VERSION_NUMBER. */
VKMHA_API uint32_t vkmha_version(void);

/* ------------------------------------------------------------------------ */
/* Status                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum vkmha_status {
    /* Not an error: vkmha_submission_poll / _wait found the work still
     * running. */
    VKMHA_NOT_READY = 1,
    VKMHA_SUCCESS = 0,
    /* An argument is NULL, zero, out of range or inconsistent with another;
     * the last-error message names it. Nothing was computed. */
    VKMHA_ERROR_INVALID_ARGUMENT = -1,
    /* Valid, but beyond what this device or build can do (a tensor larger than
     * maxStorageBufferRange, a missing Vulkan feature, ...). */
    VKMHA_ERROR_UNSUPPORTED = -2,
    /* No Vulkan loader, no Vulkan device, or no device matching the desc. */
    VKMHA_ERROR_NO_DEVICE = -3,
    VKMHA_ERROR_OUT_OF_HOST_MEMORY = -4,
    /* A device-memory allocation failed, or would have made the context hold
     * more than its memory heap's size, or asked for more than the heap's
     * budget leaves (VK_EXT_memory_budget, where the device has it: on
     * lavapipe and integrated GPUs the host's available memory); nothing
     * was computed. */
    VKMHA_ERROR_OUT_OF_DEVICE_MEMORY = -5,
    /* VK_ERROR_DEVICE_LOST: the context can only be destroyed. */
    VKMHA_ERROR_DEVICE_LOST = -6,
    /* Any other VkResult error; the message gives the VkResult. */
    VKMHA_ERROR_VULKAN = -7,
} vkmha_status;

/* A static string naming the status ("VKMHA_ERROR_INVALID_ARGUMENT"); never
 * NULL, also for values that are not a vkmha_status. */
VKMHA_API const char *vkmha_status_string(vkmha_status status);

/* ------------------------------------------------------------------------ */
/* Context                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct vkmha_context vkmha_context;

typedef enum vkmha_backend {
    VKMHA_BACKEND_DEFAULT = 0, /* VKMHA_BACKEND_VULKAN */
    /* Vulkan compute shaders. Fails with VKMHA_ERROR_NO_DEVICE when there is
     * no usable device: it never falls back silently. */
    VKMHA_BACKEND_VULKAN = 1,
    /* Scalar C with double accumulation: the oracle the Vulkan backend is
     * tested against. Needs no Vulkan driver at all. Slow. */
    VKMHA_BACKEND_REFERENCE = 2,
} vkmha_backend;

typedef enum vkmha_device_type {
    VKMHA_DEVICE_TYPE_OTHER = 0,
    VKMHA_DEVICE_TYPE_INTEGRATED_GPU = 1,
    VKMHA_DEVICE_TYPE_DISCRETE_GPU = 2,
    VKMHA_DEVICE_TYPE_VIRTUAL_GPU = 3,
    VKMHA_DEVICE_TYPE_CPU = 4, /* e.g. Mesa's lavapipe */
} vkmha_device_type;

typedef enum vkmha_log_level {
    /* In vkmha_context_desc.log_level: the default threshold, WARN. Never
     * passed to a logger. */
    VKMHA_LOG_DEFAULT = 0,
    /* How each call is computed: one line per attention (also each one of a
     * layer's forward) with its plan: fused (which kernel, query and key
     * blocks, workgroups, key ranges, dispatches) or unfused (bytes of
     * scores), and why (the cost model's estimates when it chose); and one
     * line whenever a grid beyond maxComputeWorkGroupCount is split into
     * several dispatches. Lines on every forward: for tuning and tests. */
    VKMHA_LOG_DEBUG = 1,
    /* Once per context: what became of the pipeline cache at creation
     * (loaded, not there yet, or ignored and why). */
    VKMHA_LOG_INFO = 2,
    /* Warnings of the validation layer (desc->enable_validation). */
    VKMHA_LOG_WARN = 3,
    /* Every failed call's message (the text vkmha_context_last_error
     * returns), and errors of the validation layer. */
    VKMHA_LOG_ERROR = 4,
} vkmha_log_level;

/* Receives the messages at or above vkmha_context_desc.log_level (default:
 * WARN and ERROR): every error message and, when validation is enabled,
 * every message of the validation layer (status VKMHA_ERROR_VULKAN, level
 * WARN or ERROR); DEBUG and INFO only when asked for. `status` is the error
 * a message reports, VKMHA_SUCCESS for DEBUG and INFO. Called on the thread
 * that made the vkmha call. The message is only valid during the call. */
typedef void (*vkmha_log_fn)(void *user, vkmha_log_level level, vkmha_status status,
                             const char *message);

/* Host memory for a context and everything made from it. alloc and free are
 * both set or both NULL (NULL: the C library's malloc / free). realloc may be
 * NULL: vkmha then allocates, copies and frees. alloc and realloc return
 * memory aligned to at least `alignment` bytes, or NULL when out of memory
 * (vkmha then returns VKMHA_ERROR_OUT_OF_HOST_MEMORY and frees what it took).
 * Called on the thread of the vkmha call that allocates; vkmha frees
 * everything it allocated by the time the context is destroyed. Vulkan's own
 * host allocations are separate: see vkmha_vulkan_desc.allocation_callbacks
 * (include/vkmha_vulkan.h). */
typedef struct vkmha_allocator {
    void *(*alloc)(void *user, size_t size, size_t alignment) VKMHA_ZERO;
    void *(*realloc)(void *user, void *ptr, size_t size, size_t alignment) VKMHA_ZERO;
    void (*free)(void *user, void *ptr) VKMHA_ZERO;
    void *user VKMHA_ZERO;
} vkmha_allocator;

struct vkmha_vulkan_desc; /* include/vkmha_vulkan.h */

typedef enum vkmha_context_flags {
    /* Use only shared-memory reductions even where the device supports
     * subgroup arithmetic (for driver workarounds and for testing both). */
    VKMHA_CONTEXT_NO_SUBGROUP_OPS = 1u << 0,
    /* Vulkan: time every call on the device with timestamp queries (written
     * at the start and the end of the call's one command buffer) and report
     * the last call's time in vkmha_context_info.last_gpu_time_ns, and the
     * time of each of its steps (kernels and copies) through
     * vkmha_context_get_profile (and, with a logger at VKMHA_LOG_DEBUG, a
     * "profile:" line per step). Costs a timestamp write per step. Devices
     * whose queue has no timestamps (timestampValidBits 0) report gpu_timing
     * false, never a made-up time. */
    VKMHA_CONTEXT_PROFILE = 1u << 1,
    /* Vulkan: create every compute pipeline in vkmha_context_create instead
     * of on first use, and run the whole self-check there (vkmha_path), so
     * that no later call pays for shader compilation or checks (an engine
     * does this at load time, not in the middle of a frame). */
    VKMHA_CONTEXT_EAGER_PIPELINES = 1u << 2,
    /* Vulkan: skip the self-check (vkmha_path): no path is checked. */
    VKMHA_CONTEXT_NO_SELF_CHECK = 1u << 3,
    /* Vulkan: create pipelines on the calling thread only. By default the
     * pipelines a call needs that do not exist yet (the self-check's, a
     * first forward's, EAGER_PIPELINES's) are created together on up to 16
     * threads that vkmha starts and joins within that call (one per CPU;
     * the environment variable VKMHA_PIPELINE_THREADS=N lowers it for a
     * process). They call only vkCreateShaderModule,
     * vkCreateComputePipelines and vkDestroyShaderModule, which Vulkan lets
     * threads call at once on one device and pipeline cache. A context
     * whose vkmha_vulkan_desc has allocation_callbacks creates on the
     * calling thread only, as with this flag. */
    VKMHA_CONTEXT_SINGLE_THREAD = 1u << 4,
} vkmha_context_flags;

/* The code paths a Vulkan context checks (its self-check): each runs once
 * on a small canary input (the fused attention of each head-dim class with
 * its key splits on each of its kernels, the reductions with subgroup
 * arithmetic, 16-bit storage, sparse binding, the matmul for few rows and
 * on matrix units) and is compared with the reference backend, right before
 * the first call that may take it: context creation compiles and runs none
 * of them (VKMHA_CONTEXT_EAGER_PIPELINES checks them all there instead).
 * The first call of any op checks 16-bit storage, the reductions and sparse
 * binding (they change every pipeline or tensor); the first matmul the
 * matmul paths; the first attention or layer forward of a head-dim class
 * also the unfused attention and that class's fused kernels (a layer's
 * first forward checks only what it may use). A path that disagrees is
 * disabled for that context with a VKMHA_LOG_WARN message naming it, the
 * call and the error, and the context takes the path's fallback (in
 * parentheses) from that call on; vkmha_context_info.disabled_paths tells
 * (the paths checked so far). An unfused attention that disagrees leaves
 * no attention path: that call and every later attention and layer forward
 * fail with VKMHA_ERROR_UNSUPPORTED saying so; the other ops still work. A
 * check that cannot finish (out of memory) fails its call; the next call
 * needing those paths checks them again. The environment variable
 * VKMHA_DISABLE_PATHS (a comma-separated list of the names below, e.g.
 * "fused_d64,subgroup") disables paths without checking, to work around a
 * driver. */
typedef enum vkmha_path {
    VKMHA_PATH_FUSED_D32 = 1u << 0,  /* "fused_d32": workgroup-shared fused attention,
                                        head dims <= 32 (the CPU-shaped kernel, or unfused) */
    VKMHA_PATH_FUSED_D64 = 1u << 1,  /* "fused_d64" */
    VKMHA_PATH_FUSED_D128 = 1u << 2, /* "fused_d128" */
    VKMHA_PATH_FUSED_D256 = 1u << 3, /* "fused_d256" */
    VKMHA_PATH_FUSED_CPU_D32 = 1u << 4, /* "fused_cpu_d32": the CPU-shaped fused kernel
                                           (the workgroup-shared one, or unfused) */
    VKMHA_PATH_FUSED_CPU_D64 = 1u << 5,  /* "fused_cpu_d64" */
    VKMHA_PATH_FUSED_CPU_D128 = 1u << 6, /* "fused_cpu_d128" */
    VKMHA_PATH_FUSED_CPU_D256 = 1u << 7, /* "fused_cpu_d256" */
    VKMHA_PATH_SUBGROUP = 1u << 8,       /* "subgroup": reductions with subgroup
                                            arithmetic (shared memory only) */
    VKMHA_PATH_NATIVE_16BIT = 1u << 9,   /* "native16": 16-bit storage (two values
                                            packed per 32-bit word) */
    VKMHA_PATH_MATMUL_GEMV = 1u << 10,   /* "gemv": the matmul for A of a few rows,
                                            CPU devices' and GPUs' (the tiled matmul) */
    VKMHA_PATH_SPARSE = 1u << 11,        /* "sparse": tensors past
                                            maxMemoryAllocationSize as sparse buffers
                                            (refused: vkmha_context_info.sparse_tensors
                                            false) */
    VKMHA_PATH_COOPMAT_MATMUL = 1u << 12, /* "coopmat_matmul": the matmul of fp16
                                             operands on the matrix units
                                             (VKMHA_MATMUL_VARIANT_COOPERATIVE; the
                                             device type's matmul) */
    VKMHA_PATH_COOPMAT_FUSED_D32 = 1u << 13, /* "coopmat_fused_d32": the fused attention
                                                of fp16 q, k, v (or fp16 q over an
                                                8-bit KV cache) on the matrix units,
                                                head dims <= 32
                                                (VKMHA_FUSED_KERNEL_COOPERATIVE; the
                                                workgroup-shared kernel) */
    VKMHA_PATH_COOPMAT_FUSED_D64 = 1u << 14,  /* "coopmat_fused_d64" */
    VKMHA_PATH_COOPMAT_FUSED_D128 = 1u << 15, /* "coopmat_fused_d128" */
    VKMHA_PATH_COOPMAT_FUSED_D256 = 1u << 16, /* "coopmat_fused_d256" */
    VKMHA_PATH_COOPMAT2_MATMUL = 1u << 17, /* "coopmat2_matmul": the matmul of fp16
                                              operands through
                                              VK_NV_cooperative_matrix2
                                              (VKMHA_MATMUL_VARIANT_COOPERATIVE2;
                                              the cooperative-matrix matmul, else
                                              the device type's) */
    VKMHA_PATH_FUSED_D576 = 1u << 18, /* "fused_d576": head dims 257 to 576 (MLA's
                                         d_k 576, d_v 512) on the workgroup-shared
                                         kernel */
    VKMHA_PATH_FUSED_CPU_D576 = 1u << 19,     /* "fused_cpu_d576" */
    VKMHA_PATH_COOPMAT_FUSED_D576 = 1u << 20, /* "coopmat_fused_d576" */
} vkmha_path;

/* The name of one vkmha_path bit ("fused_d64"), as VKMHA_DISABLE_PATHS and
 * the self-check's warnings spell it; NULL for anything but a single bit of
 * the enum. E.g. to list vkmha_context_info.disabled_paths. */
VKMHA_API const char *vkmha_path_name(uint32_t path);

/* How a matmul is computed on the device: an input only, for
 * vkmha_context_desc.matmul_tile (and the environment variable
 * VKMHA_MATMUL_TILE). What a context chose is information:
 * vkmha_context_get_kernels lists its kernels ("matmul_large",
 * "matmul_small", ...) with their shader and parameters. */
typedef enum vkmha_matmul_variant {
    VKMHA_MATMUL_VARIANT_AUTO = 0, /* in a desc: chosen from the device type */
    /* GPU-shaped: a workgroup stages BM x BK and BK x BN tiles through shared
     * memory with barriers; each invocation computes tm x tn outputs strided
     * by the workgroup's shape (coalesced loads, conflict-free shared reads). */
    VKMHA_MATMUL_VARIANT_SHARED = 1,
    /* CPU-shaped (lavapipe): no shared memory and no barrier; each invocation
     * computes tm rows (strided by workgroup_size) x tn consecutive columns,
     * reading vec4s straight from the buffers. bm = workgroup_size * tm,
     * bn = tn, bk = 4 (the vec4 step along K). */
    VKMHA_MATMUL_VARIANT_REGISTER = 2,
    /* Matrix units (tensor cores) through VK_KHR_cooperative_matrix, for
     * products of fp16 A and B (fp32 sums; any output dtype, bias, op T,
     * any M, N, K); products of other dtypes keep the device type's
     * variant. A workgroup computes bm x bn outputs, bk deep per step,
     * through (bm / (tm * CM)) x (bn / (tn * CN)) subgroups of tm x tn
     * matrices each, where CM x CN x CK is the device's fp16 shape
     * (vkmha_context_info.matrix_shapes): bm, bn multiples of tm * CM,
     * tn * CN, and bk of CK and of 8; CN and CK must be multiples of 4
     * (the tiles are staged in vec4s; VKMHA_ERROR_UNSUPPORTED else).
     * All zero: the automatic tile (2 x 2 subgroups of 2 x 2). GPUs
     * use it by default for fp16 products where the device has the
     * extension and this build its shaders
     * (vkmha_context_info.cooperative_matrix); a CPU device (lavapipe's
     * emulation) only when forced, which a device without them fails with
     * VKMHA_ERROR_UNSUPPORTED. */
    VKMHA_MATMUL_VARIANT_COOPERATIVE = 3,
    /* Matrix units through VK_NV_cooperative_matrix2 with workgroup scope
     * and tensor addressing (NVIDIA's drivers; Mesa's lavapipe lists the
     * extension without either), for the same products as COOPERATIVE but
     * those split in ranges of k past maxStorageBufferRange: the workgroup
     * owns one bm x bn accumulator of workgroup scope and loads A's and
     * op(B)'s slices, bk deep, straight from the buffers (the driver
     * stages them); edges read zeros, nothing past M x N is written.
     * workgroup_size: one the device lists for fp16 x fp16 -> fp32
     * matrices of workgroup scope (0: 128 where listed, else the largest
     * of them up to 256); bm, bn, bk: multiples of that entry's
     * granularities, at most 256, bm x bn at most 64 per invocation; tm,
     * tn: 0. All zero: the automatic tile (64 x 64 x 32, or 32 x 32 x 32
     * for workgroups under 128, where the granularities allow). GPUs use
     * it by default, before COOPERATIVE, where the device has the
     * extension (vkmha_context_info.cooperative_matrix2); a CPU device
     * only when forced, which a device without it fails with
     * VKMHA_ERROR_UNSUPPORTED. The environment variable: "coopmat2" or
     * "coopmat2:bm,bn,bk,workgroup_size". */
    VKMHA_MATMUL_VARIANT_COOPERATIVE2 = 4,
} vkmha_matmul_variant;

/* A matmul tile to force (vkmha_context_desc.matmul_tile); an input only. */
typedef struct vkmha_tile_config {
    /* Output rows, columns, and K step of a workgroup. */
    uint32_t bm VKMHA_ZERO, bn VKMHA_ZERO, bk VKMHA_ZERO;
    /* Outputs per invocation: tm rows x tn columns. */
    uint32_t tm VKMHA_ZERO, tn VKMHA_ZERO;
    uint32_t workgroup_size VKMHA_ZERO;
    uint32_t variant VKMHA_ZERO; /* vkmha_matmul_variant */
} vkmha_tile_config;

/* The kernel the fused attention path runs (vkmha_debug_options). */
typedef enum vkmha_fused_kernel {
    /* The device type's: CPU-shaped on CPU devices, workgroup-shared
     * elsewhere. */
    VKMHA_FUSED_KERNEL_AUTO = 0,
    /* Workgroup-shared (shaders/flash.comp): queries, keys and values staged
     * through shared memory, scores spread over the workgroup; the GPU shape. */
    VKMHA_FUSED_KERNEL_SHARED = 1,
    /* CPU-shaped (shaders/flash_cpu.comp): each invocation owns a few query
     * rows in registers, no shared memory and no barrier. CPU devices only. */
    VKMHA_FUSED_KERNEL_REGISTER = 2,
    /* For tests: workgroup-shared with the blocks chosen for GPUs (the BR,
     * BC, SR, SC parameters of the "flash_d*" kernels,
     * vkmha_context_get_kernels) also on a CPU device,
     * which otherwise gets its own, so that a CPU device runs the GPU
     * configurations (those that fit its limits). The same as SHARED on a
     * GPU. */
    VKMHA_FUSED_KERNEL_SHARED_GPU_BLOCKS = 3,
    /* The workgroup-shared kernel's cooperative-matrix variant
     * (shaders/flash.comp built with COOP, the "flash_coop_d*" kernels):
     * Q K^T and P V on the matrix units, for calls whose q, k and v are all
     * fp16 (others take the workgroup-shared kernel). GPUs with matrix units
     * use it by default for such calls (vkmha_context_info.
     * cooperative_matrix); forcing it is how a CPU device runs it. A device
     * without them: VKMHA_ERROR_UNSUPPORTED at creation. The environment
     * variable VKMHA_FUSED_KERNEL=cooperative does the same for contexts
     * whose desc leaves this AUTO (the test suite's mesa26 setup). */
    VKMHA_FUSED_KERNEL_COOPERATIVE = 4,
} vkmha_fused_kernel;

/* For tests: never needed in production. Makes the Vulkan backend believe
 * lower device limits, fail device-memory allocations on purpose and run a
 * chosen fused attention kernel, so that the paths for shapes beyond the
 * limits (split dispatches, UNSUPPORTED errors), for a device out of memory
 * and for other device types' kernels run on any device. Read once by
 * vkmha_context_create; the reference backend ignores it. */
typedef struct vkmha_debug_options {
    /* Lower the device limits vkmha believes (0 = the device's own; see
     * vkmha_device_info, which vkmha_context_get_info then reports lowered).
     * A value above the device's is VKMHA_ERROR_INVALID_ARGUMENT naming
     * desc->debug->... */
    uint32_t max_workgroup_count[3] VKMHA_ZERO;
    uint64_t max_storage_buffer_range VKMHA_ZERO; /* bytes */
    uint64_t max_allocation_size VKMHA_ZERO;      /* bytes */
    /* Fail device-memory allocations (vkAllocateMemory) number
     * fail_device_allocation_at, counted from 1 over the context's life
     * (context creation included), and the following ones up to
     * fail_device_allocation_count of them in all, as if the device had
     * returned VK_ERROR_OUT_OF_DEVICE_MEMORY: the call gets
     * VKMHA_ERROR_OUT_OF_DEVICE_MEMORY. 0 = never fail. */
    uint64_t fail_device_allocation_at VKMHA_ZERO;
    uint64_t fail_device_allocation_count VKMHA_ZERO; /* 0 means 1 */
    /* The fused attention kernel to run instead of the automatic choice, so
     * that tests reach both on one device. REGISTER on a device that lacks
     * it is VKMHA_ERROR_UNSUPPORTED at creation. */
    uint32_t fused_kernel VKMHA_ZERO; /* vkmha_fused_kernel */
    /* Treat the device as lacking storageBuffer16BitAccess: 16-bit data then
     * goes through the packed path (two values per 32-bit word) that devices
     * without the feature run. */
    bool no_native_16bit VKMHA_ZERO;
    /* Lower maxComputeSharedMemorySize (bytes; 0 = the device's own), like
     * the limits above: kernels whose shared memory no longer fits are
     * chosen smaller or, for a fused attention head-dim class, not at all
     * (vkmha_context_get_kernels lists it as not available; those heads run
     * unfused). */
    uint32_t max_shared_memory VKMHA_ZERO;
    /* Lower maxComputeWorkGroupInvocations and maxComputeWorkGroupSize
     * (0 = the device's own), like the limits above: every workgroup vkmha
     * dispatches is chosen within them. */
    uint32_t max_workgroup_invocations VKMHA_ZERO;
    uint32_t max_workgroup_size[3] VKMHA_ZERO;
    /* Record descriptors into sets even where the device has
     * VK_KHR_push_descriptor (as the environment variable
     * VKMHA_NO_PUSH_DESCRIPTORS=1 does). */
    bool no_push_descriptors VKMHA_ZERO;
    /* A named profile of lowered limits, applied before the fields above
     * (vkmha_debug_profile); the environment variable VKMHA_PROFILE=mobile
     * applies VKMHA_DEBUG_PROFILE_MOBILE to every context the process
     * creates, which is how the test suite runs whole under it. */
    uint32_t profile VKMHA_ZERO;
    /* vkmha_path bits the self-check finds wrong as if their results were
     * off (it adds 1 to an element of each such path's canary output), so
     * that tests see each fallback taken; bit 31: the unfused attention,
     * which has no fallback (the creation fails). */
    uint32_t self_check_break VKMHA_ZERO;
    /* Treat the device as lacking sparseBinding: tensors past
     * maxMemoryAllocationSize are then refused, as on such devices (as
     * VKMHA_DISABLE_PATHS=sparse does, unchecked). */
    bool no_sparse_binding VKMHA_ZERO;
    /* Lower the size of every device-local memory heap vkmha believes
     * (bytes; 0 = the device's own), like the limits above: the context
     * allocates at most this from each, and vkmha_device_info's
     * device_local_memory reports it. For tests that fill the device's
     * memory where it is the host's (lavapipe, integrated GPUs). */
    uint64_t max_device_local_memory VKMHA_ZERO;
    /* Lower maxPerStageDescriptorStorageBuffers (0 = the device's own),
     * like the limits above: kernels that bind more storage buffers are not
     * used, or the context is refused (vkmha_device_info.
     * max_storage_buffers_per_stage). */
    uint32_t max_storage_buffers_per_stage VKMHA_ZERO;
} vkmha_debug_options;

typedef enum vkmha_debug_profile {
    VKMHA_DEBUG_PROFILE_NONE = 0,
    /* A typical phone GPU, each limit lowered to it where the device's is
     * higher: 16 KiB of shared memory, 128 invocations per workgroup (128 in
     * each dimension), no subgroup arithmetic (as
     * VKMHA_CONTEXT_NO_SUBGROUP_OPS), no 16-bit storage (no_native_16bit),
     * no push descriptors, no cooperative matrices, maxStorageBufferRange
     * 128 MiB and maxMemoryAllocationSize 256 MiB. vkmha_context_get_info
     * reports the lowered limits. */
    VKMHA_DEBUG_PROFILE_MOBILE = 1,
} vkmha_debug_profile;

typedef struct vkmha_context_desc {
    uint32_t backend VKMHA_ZERO; /* vkmha_backend; 0: VKMHA_BACKEND_VULKAN */
    /* Vulkan: which physical device. false (default): automatic, the first
     * discrete GPU, else integrated, else virtual, else CPU, else any, that has
     * a compute queue. true: the device at `device_index` in
     * vkEnumeratePhysicalDevices order (vkmha_enumerate_devices lists them). */
    bool use_device_index VKMHA_ZERO;
    uint32_t device_index VKMHA_ZERO;
    /* Vulkan: enable VK_LAYER_KHRONOS_validation with synchronization
     * validation, and report its messages through `log` and the count in
     * vkmha_context_info.validation_messages. Fails with
     * VKMHA_ERROR_UNSUPPORTED when the layer is not installed. */
    bool enable_validation VKMHA_ZERO;
    uint32_t flags VKMHA_ZERO; /* vkmha_context_flags */
    /* Optional logger; NULL: vkmha prints nothing anywhere. */
    vkmha_log_fn log VKMHA_ZERO;
    void *log_user VKMHA_ZERO;
    /* vkmha_log_level: the least severe level passed to `log`.
     * 0 (VKMHA_LOG_DEFAULT): VKMHA_LOG_WARN, so warnings and errors only;
     * VKMHA_LOG_DEBUG or VKMHA_LOG_INFO on request. Above VKMHA_LOG_ERROR:
     * VKMHA_ERROR_INVALID_ARGUMENT. */
    uint32_t log_level VKMHA_ZERO;
    /* Vulkan, for experiments and tuning: the matmul tile to use for every
     * matmul instead of the automatic choice (vkmha_context_get_kernels
     * shows what was chosen: the "matmul_*" kernels). NULL (default):
     * automatic, from the device type and limits. workgroup_size is
     * computed (the value passed is ignored); variant AUTO means the device
     * type's variant (REGISTER on CPU devices, SHARED elsewhere). A malformed tile fails with
     * VKMHA_ERROR_INVALID_ARGUMENT, one beyond the device's limits with
     * VKMHA_ERROR_UNSUPPORTED; the message names desc->matmul_tile. The
     * environment variable VKMHA_MATMUL_TILE="register:32,8,4,4,8"
     * (variant:bm,bn,bk,tm,tn) does the same when this is NULL. */
    const vkmha_tile_config *matmul_tile VKMHA_ZERO;
    /* Optional host allocator (copied); NULL: malloc / free. */
    const vkmha_allocator *allocator VKMHA_ZERO;
    /* Vulkan: the application's instance, device and queue to borrow, its
     * loader, and its VkAllocationCallbacks (include/vkmha_vulkan.h). NULL:
     * vkmha creates and owns its own instance and device. */
    const struct vkmha_vulkan_desc *vulkan VKMHA_ZERO;
    /* Vulkan pipeline cache, so that a second start skips shader
     * compilation (on drivers whose VkPipelineCache keeps compiled code).
     * pipeline_cache_path: a file read at creation if it exists, and written
     * by vkmha_context_save_pipeline_cache(ctx, NULL). Or bytes in:
     * pipeline_cache_data / _size (from vkmha_context_get_pipeline_cache; both
     * or neither, not with a path). Either is validated before use: vkmha's
     * own header (magic, format version, size, checksum) and the device's
     * vendor ID, device ID, driver version, pipelineCacheUUID and deviceUUID
     * must match; a truncated, corrupt or foreign cache is ignored with an
     * INFO log message, never passed to the driver. */
    const char *pipeline_cache_path VKMHA_ZERO;
    const void *pipeline_cache_data VKMHA_ZERO;
    size_t pipeline_cache_size VKMHA_ZERO;
    /* For tests: never needed in production. NULL (default): none. See
     * vkmha_debug_options. */
    const vkmha_debug_options *debug VKMHA_ZERO;
    /* Vulkan: the most bytes of scratch (the device buffers a call needs
     * besides its inputs, outputs and the layers' weights, staging included;
     * vkmha_context_info.scratch_bytes) the context keeps between calls.
     * Scratch grows to what a call needs and is kept for the next call; when
     * a call computed on the context's queue ends above the budget, its
     * largest scratch buffers are freed until it is within it (the next call
     * that needs them allocates them again). 0 (default): no budget, scratch
     * is kept until vkmha_context_trim. Scratch referenced by command
     * buffers the application recorded (vkmha_*_record) is kept until
     * vkmha_context_trim either way. */
    uint64_t scratch_budget VKMHA_ZERO;
} vkmha_context_desc;

typedef struct vkmha_device_info {
    char name[256] VKMHA_ZERO;
    uint32_t type VKMHA_ZERO; /* vkmha_device_type */
    uint32_t vendor_id VKMHA_ZERO, device_id VKMHA_ZERO;
    uint32_t api_version VKMHA_ZERO;    /* VK_MAKE_API_VERSION encoding */
    uint32_t driver_version VKMHA_ZERO; /* vendor-specific encoding */
    char driver_name[256] VKMHA_ZERO;   /* VkPhysicalDeviceDriverProperties, "" if unknown */
    char driver_info[256] VKMHA_ZERO;
    uint8_t device_uuid[16] VKMHA_ZERO;
    bool has_compute_queue VKMHA_ZERO;
    /* Subgroup size reported by the device (informational: no shader assumes
     * it) and whether subgroup arithmetic is usable in compute shaders. */
    uint32_t subgroup_size VKMHA_ZERO;
    bool subgroup_arithmetic VKMHA_ZERO;
    /* The limits vkmha checks shapes against. */
    uint32_t max_workgroup_count[3] VKMHA_ZERO;
    uint32_t max_workgroup_size[3] VKMHA_ZERO;
    uint32_t max_workgroup_invocations VKMHA_ZERO;
    uint32_t max_shared_memory VKMHA_ZERO;        /* bytes */
    uint64_t max_storage_buffer_range VKMHA_ZERO; /* bytes */
    uint64_t max_allocation_size VKMHA_ZERO;      /* bytes */
    uint64_t device_local_memory VKMHA_ZERO;      /* bytes, largest device-local heap */
    bool unified_memory VKMHA_ZERO; /* device-local memory is host-visible and cached */
    float timestamp_period VKMHA_ZERO; /* ns per timestamp tick */
    /* maxPerStageDescriptorStorageBuffers: the storage buffers one kernel
     * may bind (Vulkan guarantees 4; desktop GPUs have thousands, some
     * phones' drivers report 4). A kernel that binds more is not used (the
     * workgroup-shared fused attention binds 11: its heads then run
     * unfused or on the CPU-shaped fused kernel, 7); below 7, the
     * softmax's, the device is refused (VKMHA_ERROR_UNSUPPORTED at
     * vkmha_context_create). vkmha_context_get_kernels lists what is used. */
    uint32_t max_storage_buffers_per_stage VKMHA_ZERO;
} vkmha_device_info;


/* A matrix shape the device's matrix units multiply (one
 * VkCooperativeMatrixPropertiesKHR of subgroup scope): an m x k A times a
 * k x n B plus an m x n C. Types: vkmha_matrix_type_name. */
typedef struct vkmha_matrix_shape {
    uint32_t m VKMHA_ZERO, n VKMHA_ZERO, k VKMHA_ZERO;
    uint32_t a_type VKMHA_ZERO, b_type VKMHA_ZERO, c_type VKMHA_ZERO, result_type VKMHA_ZERO;
    bool saturating VKMHA_ZERO;
} vkmha_matrix_shape;
#define VKMHA_MAX_MATRIX_SHAPES 16 /* capacity of vkmha_context_info.matrix_shapes */

/* The name of a VkComponentTypeKHR value of a vkmha_matrix_shape: "f16",
 * "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
 * "bf16", "e4m3", "e5m2"; "?" for others. */
VKMHA_API const char *vkmha_matrix_type_name(uint32_t type);

typedef struct vkmha_context_info {
    uint32_t backend VKMHA_ZERO; /* vkmha_backend */
    /* Vulkan only (zeroed for the reference backend, whose name is "reference"). */
    vkmha_device_info device VKMHA_ZERO;
    uint32_t device_index VKMHA_ZERO;
    bool validation_enabled VKMHA_ZERO;
    /* Messages the validation layer sent so far; a correct program has 0. */
    uint64_t validation_messages VKMHA_ZERO;
    bool subgroup_ops_used VKMHA_ZERO; /* reductions use subgroup arithmetic */
    /* The kernels the context chose for this device (tiles, blocks,
     * workgroup sizes) are listed by vkmha_context_get_kernels. */
    /* Bytes of VkDeviceMemory the context (and its layers) hold now, and the
     * most they held at any time since the context was created (staging
     * included). 0 for the reference backend. */
    uint64_t device_memory_bytes VKMHA_ZERO, device_memory_peak_bytes VKMHA_ZERO;
    /* With VKMHA_CONTEXT_PROFILE: gpu_timing is true when the device's queue
     * has timestamps; last_gpu_time_ns is then the device time of the last
     * successful call that submitted work (first to last command of its
     * command buffer, timestamp ticks scaled by timestampPeriod), 0 before
     * the first. Without the flag, or without timestamps: false and 0. */
    bool gpu_timing VKMHA_ZERO;
    uint64_t last_gpu_time_ns VKMHA_ZERO;
    /* The context borrows the application's Vulkan objects (desc->vulkan). */
    bool external_device VKMHA_ZERO;
    /* Descriptors are pushed into command buffers (VK_KHR_push_descriptor),
     * which vkmha_*_record needs. */
    bool push_descriptors VKMHA_ZERO;
    /* A pipeline cache was given, valid for this device, and loaded (its
     * driver data had pipeline_cache_bytes bytes). */
    bool pipeline_cache_loaded VKMHA_ZERO;
    uint64_t pipeline_cache_bytes VKMHA_ZERO;
    uint32_t pipelines_created VKMHA_ZERO; /* compute pipelines created so far */
    /* Command buffer and fence pairs vkmha_mha_submit created so far: a
     * destroyed submission's pair serves the next one (up to 8 kept), so a
     * loop of submit, wait, destroy creates none after its first call. */
    uint64_t submissions_created VKMHA_ZERO;
    /* Bytes of device memory in scratch buffers now (part of
     * device_memory_bytes; see vkmha_context_desc.scratch_budget), and the
     * budget (0: none). 0 for the reference backend. */
    uint64_t scratch_bytes VKMHA_ZERO, scratch_budget VKMHA_ZERO;
    /* 16-bit data (fp16, bf16) is read and written as 16-bit elements
     * (the device has storageBuffer16BitAccess, enabled by vkmha or, for a
     * borrowed device, declared in vkmha_vulkan_desc), else packed two per
     * 32-bit word. Both compute the same results. false for the reference
     * backend. */
    bool native_16bit_storage VKMHA_ZERO;
    /* Vulkan: the vkmha_path bits this context does not use (its
     * self-check found them wrong, or VKMHA_DISABLE_PATHS named them), and
     * what the self-check took so far, in microseconds (0: skipped, or no
     * call needed a check yet; paths are checked before their first use). */
    uint32_t disabled_paths VKMHA_ZERO;
    uint32_t self_check_us VKMHA_ZERO;
    /* Vulkan: the largest tensor vkmha_tensor_create makes (and a KV
     * cache's own keys or values), in bytes. maxMemoryAllocationSize,
     * unless sparse_tensors: then a tensor past it is one sparse VkBuffer
     * bound to several allocations of at most that size, up to
     * sparseAddressSpaceSize (shared by all such tensors of the context)
     * and maxBufferSize. sparse_tensors: the device has sparseBinding (for
     * a borrowed device: declared in vkmha_vulkan_desc), the queue's family
     * VK_QUEUE_SPARSE_BINDING_BIT, and desc->debug->no_sparse_binding is
     * false. 0 and false for the reference backend. */
    bool sparse_tensors VKMHA_ZERO;
    uint64_t max_tensor_bytes VKMHA_ZERO;
    /* Vulkan: matrix units. matrix_shapes: what the device offers through
     * VK_KHR_cooperative_matrix at subgroup scope (none without it; at most
     * VKMHA_MAX_MATRIX_SHAPES listed, matrix_shape_count counts them all).
     * cooperative_matrix: the context uses them (the extension and its
     * features enabled, an fp16 x fp16 -> fp32 shape, this build has the
     * shaders: vkmha_cooperative_matrix_built); which kernels do is in
     * vkmha_context_get_kernels ("matmul_coop"). Not for a borrowed device
     * (desc->vulkan), whose enabled features vkmha cannot see. */
    uint32_t matrix_shape_count VKMHA_ZERO;
    vkmha_matrix_shape matrix_shapes[VKMHA_MAX_MATRIX_SHAPES] VKMHA_ZERO;
    bool cooperative_matrix VKMHA_ZERO;
    /* Vulkan: VK_NV_cooperative_matrix2 enabled besides
     * (cooperative_matrix, Vulkan 1.3, 16-bit storage, fp16 x fp16 -> fp32
     * matrices of workgroup scope, and this build's glslang compiled its
     * kernel): the "matmul_cm2" kernel (VKMHA_MATMUL_VARIANT_COOPERATIVE2).
     * matrix2_workgroup_sizes: with it, the workgroup sizes the device
     * lists for those matrices (the first four; 0: none). */
    bool cooperative_matrix2 VKMHA_ZERO;
    uint32_t matrix2_workgroup_sizes[4] VKMHA_ZERO;
} vkmha_context_info;

/* Whether this build of vkmha has the cooperative-matrix kernels (its
 * glslang compiled them: meson's -Dcooperative_matrix, tools/mesa26). */
VKMHA_API bool vkmha_cooperative_matrix_built(void);

/* Creates a context. On failure *out is NULL, and the reason is both sent to
 * the desc's logger (if any) and kept for vkmha_context_last_error(NULL).
 * desc may be NULL: all defaults. */
VKMHA_API vkmha_status vkmha_context_create(const vkmha_context_desc *desc,
                                            vkmha_context **out);
/* Waits for the context's work, frees everything; NULL is a no-op. Every
 * vkmha_mha created from it must have been destroyed first. Tensors and
 * submissions still alive are freed with it (their handles become invalid).
 * With a borrowed device it waits only for vkmha's own submissions: command
 * buffers the application recorded vkmha work into must have completed. */
VKMHA_API void vkmha_context_destroy(vkmha_context *ctx);
VKMHA_API vkmha_status vkmha_context_get_info(const vkmha_context *ctx,
                                              vkmha_context_info *out);
/* The message of the last failed call on this context ("" if none). Valid
 * until the next call on the context.
 * ctx NULL: the message of the calling thread's last vkmha_context_create
 * or vkmha_enumerate_devices ("" if it succeeded), which have no context to
 * keep it in: e.g. "vkmha_context_create: desc->enable_validation is set but
 * VK_LAYER_KHRONOS_validation is not installed (Debian:
 * vulkan-validationlayers)". Kept in thread-local storage, so a failure on
 * one thread never overwrites another's; valid until the thread's next
 * vkmha_context_create or vkmha_enumerate_devices. */
VKMHA_API const char *vkmha_context_last_error(const vkmha_context *ctx);

/* Lists the Vulkan physical devices without creating a context: on entry
 * *count is the capacity of `out` (which may be NULL when *count is 0), on
 * return the number of devices; fills min(capacity, devices) entries.
 * Returns VKMHA_ERROR_NO_DEVICE when no Vulkan loader, driver or device
 * exists; vkmha_context_last_error(NULL) then says what to install. */
VKMHA_API vkmha_status vkmha_enumerate_devices(uint32_t *count, vkmha_device_info *out);

/* ------------------------------------------------------------------------ */
/* Kernels                                                                  */
/* ------------------------------------------------------------------------ */

/* What a context chose for its device, one row per device kernel: the
 * compute shaders, their tiles and blocks, workgroups and shared memory.
 * Information for tools, tuning and tests (vkmha-info prints it); a
 * program never needs it to compute. A new kernel, head-dim class or
 * shader variant adds rows or parameters, never fields, so this struct
 * keeps its layout. */
#define VKMHA_KERNEL_MAX_PARAMS 12 /* capacity of vkmha_kernel_info.params */

/* One parameter of a kernel: a specialization constant of its shader. */
typedef struct vkmha_kernel_param {
    /* The constant's name in the shader: "WG" workgroup invocations; the
     * matmul's "BM", "BN", "BK" (output rows, columns and K step of a
     * workgroup), "TM", "TN" (outputs per invocation), "VEC" (1: vec4 loads
     * of A and B), where the register variant ("matmul_cpu") has WG, TM, TN
     * and VEC only (its BM = WG * TM, BN = TN, BK = 4); the fused
     * attention's "BR" (query rows per workgroup), "BC" (keys per step),
     * "D4" (the head-dim class / 4), "SR", "SC" (scores per invocation);
     * "TM" query rows per invocation of the CPU-shaped one; the split-K
     * combine's "EPI" (outputs per invocation); the cooperative-matrix
     * matmul's "TM", "TN" (matrices per subgroup) and "CM", "CN", "CK"
     * (the device's matrix shape). */
    char name[16] VKMHA_ZERO;
    uint32_t value VKMHA_ZERO;
} vkmha_kernel_param;

typedef struct vkmha_kernel_info {
    /* Its role, unique in the list: "matmul_large", "matmul_large_vec",
     * "matmul_small", "matmul_small_vec" (the vec ones read A and B as
     * vec4s), "matmul_gemv" (CPU devices) and "matmul_gemv_gpu" (GPUs; op
     * T), the matmuls of a few rows, "matmul_coop", "matmul_coop_vec" (the
     * cooperative-matrix matmul of fp16 products), "softmax", "heads", "layernorm", "flash_d32",
     * "flash_d64", "flash_d128", "flash_d256", "flash_d576" (the fused
     * attention of heads up to 32 .. 576 wide, workgroup-shared kernel),
     * "flash_combine" (its split-K combine), "flash_cpu_d32" ..
     * "flash_cpu_d576" (the CPU-shaped fused kernel), "flash_coop_d32" ..
     * "flash_coop_d576" (the cooperative-matrix one), "softmax_cpu",
     * "heads_cpu", "layernorm_cpu" (CPU-shaped row kernels, one row per
     * invocation, for rows of up to 16384 elements on CPU devices; longer
     * rows take "softmax" / "layernorm", a workgroup per row). */
    char name[32] VKMHA_ZERO;
    /* The op it serves: "matmul", "softmax", "heads", "layernorm" or
     * "attention". */
    char op[16] VKMHA_ZERO;
    /* Whether the device runs it. false: a fused attention class whose
     * blocks do not fit the device's limits (heads of that class run
     * unfused), or a CPU-shaped kernel on a device that does not use it;
     * the fields below are then zero and "". */
    bool available VKMHA_ZERO;
    /* The shader variant built from shaders/ (meson.build): "matmul" (the
     * workgroup-shared matmul) or "matmul_cpu" (the register one, see
     * vkmha_matmul_variant), "softmax_sg" (subgroup reductions), "flash",
     * ... Its fp32 form; 16-bit data runs the same kernel with other
     * element types. */
    char shader[32] VKMHA_ZERO;
    uint32_t workgroup_size VKMHA_ZERO; /* invocations, the parameter "WG" */
    uint32_t shared_bytes VKMHA_ZERO;   /* workgroup shared memory it declares */
    uint32_t param_count VKMHA_ZERO;    /* at most VKMHA_KERNEL_MAX_PARAMS */
    vkmha_kernel_param params[VKMHA_KERNEL_MAX_PARAMS] VKMHA_ZERO;
} vkmha_kernel_info;

/* Lists the context's kernels, like vkmha_enumerate_devices: on entry
 * *count is the capacity of `out` (which may be NULL when *count is 0), on
 * return the number of kernels; fills min(capacity, kernels) entries, in an
 * order that stays the same for the context's life. The reference backend
 * has none (*count 0). A NULL ctx or count, or a NULL out with a nonzero
 * *count, is VKMHA_ERROR_INVALID_ARGUMENT. */
VKMHA_API vkmha_status vkmha_context_get_kernels(const vkmha_context *ctx, uint32_t *count,
                                                 vkmha_kernel_info *out);

#define VKMHA_MAX_PROFILE_STEPS 256 /* steps vkmha_context_get_profile keeps */

/* One step of a profiled call (vkmha_context_get_profile). */
typedef struct vkmha_profile_step {
    /* The kernel, as vkmha_context_get_kernels names it ("matmul_coop_vec",
     * "flash_coop_d64", ...), or "copy", "fill" or "update" for a transfer
     * between buffers. */
    char name[32] VKMHA_ZERO;
    uint32_t workgroups[3] VKMHA_ZERO; /* a kernel's grid; zeros for a transfer */
    uint64_t bytes VKMHA_ZERO;         /* a transfer's bytes; 0 for a kernel */
    /* Device time from the end of the step before it (the first step: from
     * the end of the call's uploads) to its own end, so the wait at its
     * barrier is included; timestamp ticks scaled by timestampPeriod. */
    uint64_t time_ns VKMHA_ZERO;
} vkmha_profile_step;

/* The steps of the last call on a VKMHA_CONTEXT_PROFILE context that vkmha
 * submitted and waited for (host arrays and tensors; not the application's
 * command buffers of vkmha_*_record, nor vkmha_mha_submit), in the order
 * they ran, the first VKMHA_MAX_PROFILE_STEPS of them (of a call that runs
 * as several submissions, windows of very large tensors, its last); where
 * the time of the call (last_gpu_time_ns) goes. Like vkmha_context_get_kernels: on entry
 * *count is the capacity of `out` (which may be NULL when *count is 0), on
 * return the number of steps; fills min(capacity, steps) entries. *count 0:
 * no profiled call yet, no flag, no timestamps on the device's queue, or
 * the reference backend. A NULL ctx or count, or a NULL out with a nonzero
 * *count, is VKMHA_ERROR_INVALID_ARGUMENT. */
VKMHA_API vkmha_status vkmha_context_get_profile(const vkmha_context *ctx, uint32_t *count,
                                                 vkmha_profile_step *out);

/* ------------------------------------------------------------------------ */
/* Masks                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * A mask removes (query i, key j) pairs from the softmax. All kinds combine:
 * a score is masked when any mask kind masks it. Masks broadcast over heads.
 *
 * Semantics, exactly those of the PyTorch reference code
 * `scores.masked_fill(mask == 0, -1e9)`:
 *     s[i][j] = scale * dot(q_i, k_j) + bias[i][j]        (bias if given)
 *     s[i][j] = -1e9  if (i, j) is masked                 (SET, not added)
 *     p[i][:] = softmax(s[i][:])                          (max-subtracted)
 * so a fully masked row gets uniform weights 1 / len_k (not NaN, not zeros),
 * and a masked position in a row with an unmasked one gets weight exactly 0
 * unless the unmasked scores are themselves below -1e9.
 *
 * Non-finite scores (PyTorch float masks hold -inf; inputs can hold Inf or
 * NaN), the same on every path and both backends:
 *   - a -inf bias gives its key weight exactly 0, wherever it stands in the
 *     row (a masked key still scores -1e9: the mask is set over the bias);
 *   - a row whose every score is -inf (each key -inf by bias, none masked by
 *     a mask kind) has no key to attend to: its weights are 0 and its
 *     attention output is 0 (as PyTorch >= 2.5's scaled_dot_product_attention
 *     and FlashAttention give, where PyTorch 1.x gives NaN);
 *   - a +Inf or NaN score makes its whole row NaN, and so does a NaN or Inf
 *     value even behind a weight of 0 (0 * NaN is NaN).
 *
 * The score rules of today's decoders are mask kinds too, and combine with
 * every other kind. Query i of a call stands at key position
 *     pos_i = i + causal_offset (+ L - len_k for a KV cache entry of L keys)
 * (bottom-right aligned by causal_offset = len_k - len_q; a layer with a KV
 * cache aligns it itself), and the score of (b, h, i, j) becomes:
 *     s = scale * dot(q_i, k_j)
 *     s = softcap * tanh(s / softcap)                   (VKMHA_MASK_SOFTCAP)
 *     s = s + bias[b][h][i][j]                          (VKMHA_MASK_BIAS)
 *     s = s - alibi[h] * (pos_i - j)                    (VKMHA_MASK_ALIBI)
 *     s = -1e9 if masked by any kind, VKMHA_MASK_WINDOW included
 *     p = softmax over the keys and, with VKMHA_MASK_SINKS, sinks[h]:
 *         p_j = exp(s_j - m) / (exp(sinks[h] - m) + sum_j' exp(s_j' - m))
 *         with m = max(sinks[h], max_j s_j): the sink takes weight and gives
 *         no value, so a row's weights sum to less than 1 (gpt-oss).
 * With a sink, a row whose every key is masked (all -1e9) or -inf puts all
 * its weight on the sink: weights 0, output 0 (a sink below -1e9 aside).
 * A soft cap makes a +Inf score finite (softcap); NaN stays NaN.
 */
typedef enum vkmha_mask_kind {
    VKMHA_MASK_NONE = 0,
    VKMHA_MASK_KEY_PADDING = 1u << 0, /* key_padding: [batch][len_k] uint8 */
    VKMHA_MASK_FULL = 1u << 1,        /* full: [batch][len_q][len_k] uint8 */
    /* Key j > query i + causal_offset is masked; no memory. Offset 0 is
     * top-left aligned (torch's is_causal, torch.tril(ones(len_q, len_k)));
     * len_k - len_q is bottom-right aligned (the queries are the last
     * positions of the keys' sequence: chunked prefill, several new tokens
     * at once; torch's causal_lower_right). */
    VKMHA_MASK_CAUSAL = 1u << 2,
    VKMHA_MASK_BIAS = 1u << 3, /* bias: [bias_batch][bias_heads][len_q][len_k] fp32 */
    /* Sliding window of `window` keys: with VKMHA_MASK_CAUSAL key j is seen
     * iff 0 <= pos_i - j < window (Mistral, Gemma 2/3, gpt-oss), without it
     * iff |pos_i - j| < window (symmetric local attention). */
    VKMHA_MASK_WINDOW = 1u << 4,
    /* ALiBi: alibi: [heads] fp32 slopes (vkmha_alibi_slopes gives the
     * standard ones); the score of key j falls by slope * (pos_i - j). */
    VKMHA_MASK_ALIBI = 1u << 5,
    VKMHA_MASK_SOFTCAP = 1u << 6, /* softcap * tanh(s / softcap) (Gemma 2) */
    VKMHA_MASK_SINKS = 1u << 7,   /* sinks: [heads] fp32 sink logits (gpt-oss) */
} vkmha_mask_kind;

typedef struct vkmha_mask {
    /* OR of vkmha_mask_kind. A pointer is used if and only if its kind is set:
     * a kind without its pointer, or a pointer without its kind, is
     * VKMHA_ERROR_INVALID_ARGUMENT (it is almost always a mistake). */
    uint32_t kinds VKMHA_ZERO;
    const uint8_t *key_padding VKMHA_ZERO; /* [batch][len_k], 0 = masked, else kept */
    const uint8_t *full VKMHA_ZERO;        /* [batch][len_q][len_k], 0 = masked, else kept */
    /* Added to the scaled score before masking. bias_batch is 1 or batch,
     * bias_heads is 1 or the number of (query) heads; 0 means batch / heads. */
    const float *bias VKMHA_ZERO;
    uint32_t bias_batch VKMHA_ZERO, bias_heads VKMHA_ZERO;
    /* VKMHA_MASK_CAUSAL: query i sees keys j <= i + causal_offset. Non-zero
     * without the kind is VKMHA_ERROR_INVALID_ARGUMENT. With a KV cache
     * (vkmha_mha_io.kv_cache) the layer aligns the mask to each entry's end
     * itself: query i of an entry holding L keys sees keys
     * j <= L - len_q + i + causal_offset (0: the usual decoder mask).
     * It positions the queries for VKMHA_MASK_WINDOW and VKMHA_MASK_ALIBI
     * too (pos_i above), which then allow it without VKMHA_MASK_CAUSAL;
     * with either of them |pos_i| + len_k must stay below 2^31. */
    uint32_t causal_offset VKMHA_ZERO;
    /* VKMHA_MASK_WINDOW: the window, >= 1 (larger than every distance:
     * no key hidden). */
    uint32_t window VKMHA_ZERO;
    /* VKMHA_MASK_SOFTCAP: the cap, finite and > 0 (Gemma 2: 50). */
    float softcap VKMHA_ZERO;
    /* VKMHA_MASK_ALIBI and VKMHA_MASK_SINKS: [heads] fp32 each, finite, one
     * per query head of the call (a head shard's own heads). Host arrays in
     * every form, the tensor forms included (vkmha_tensor_mask): read while
     * the call is made, recorded into its commands. */
    const float *alibi VKMHA_ZERO;
    const float *sinks VKMHA_ZERO;
} vkmha_mask;

/* The standard ALiBi slopes of `heads` heads into slopes[0 .. heads)
 * ("Train Short, Test Long", as BLOOM computes them): for n = heads a power of two,
 * slope h = 2^(-8 (h + 1) / n); otherwise with m the largest power of two
 * not above n, the m slopes of m heads, then slopes 0, 2, 4, ... of 2m heads'
 * until n. A head shard passes slopes + its first head. Returns
 * VKMHA_ERROR_INVALID_ARGUMENT for heads 0 or slopes NULL. */
VKMHA_API vkmha_status vkmha_alibi_slopes(uint32_t heads, float *slopes);

/* ------------------------------------------------------------------------ */
/* Ops on host arrays (both backends)                                       */
/* ------------------------------------------------------------------------ */
/* Vulkan: host arrays larger than one call can bind (maxStorageBufferRange
 * or maxMemoryAllocationSize) are split: vkmha_softmax and vkmha_attention
 * run as several calls of whole batch entries, else of heads (whole groups
 * of query heads sharing a key/value head, else one), else of query rows of
 * one head; a batched vkmha_matmul as calls of fewer products, one product
 * in windows (below); vkmha_split_heads / vkmha_merge_heads as calls of
 * whole batch entries, or of blocks of rows and heads of one entry (each
 * block few rows of one layout and few heads of the other);
 * vkmha_mha_forward as calls of whole batch entries, and the layer's entry
 * that does not fit as calls of its query rows, each with all of the
 * entry's keys (with a KV cache the first rows' call appends them, the
 * others attend over the cache; not with attention weights or a per-head
 * bias, whose heads interleave the rows; the key and value inputs are bound
 * in windows by their projections and may exceed the range). The tensor
 * forms do the same with tensors larger than maxStorageBufferRange (each
 * part bound from where it starts), mask tensors moved with their parts
 * (vkmha_mha_submit records a layer's parts into its one submission). The
 * parts are sized so that the unfused path's scores fit too when that path
 * is asked for. Results are those of one call.
 * Keys and values past the range (one head's, the layer's key projections,
 * a KV cache's entries) need no parts on the fused path: it reads them in
 * windows of keys, one batch entry and key/value head at a time (on CPU
 * devices its CPU-shaped kernel through texel views of whole buffers; host
 * arrays of them must fit maxMemoryAllocationSize); the unfused path runs
 * its matmuls one product (batch entry, query head) at a time, each bound
 * in windows. Split / merge heads of one head's rows past the range run in
 * blocks of rows of that head. What does not fit even so (one row of a
 * softmax, of keys or of the unfused path's scores, an entry of split /
 * merge heads of 2^32 elements or more) is VKMHA_ERROR_UNSUPPORTED naming
 * the array. */

typedef enum vkmha_op {
    VKMHA_OP_N = 0, /* use B as given: B is [k][n] */
    VKMHA_OP_T = 1, /* use B^T: B is [n][k] (e.g. a torch.nn.Linear weight) */
} vkmha_op;

/* Broadcast: the same matrix for every batch entry (a batch stride of 0). */
#define VKMHA_BROADCAST (-1)

typedef struct vkmha_matmul_desc {
    uint32_t batch VKMHA_ZERO;   /* number of products; 0 means 1 */
    uint32_t m VKMHA_ZERO, n VKMHA_ZERO, k VKMHA_ZERO; /* required, each >= 1 */
    uint32_t op_b VKMHA_ZERO; /* vkmha_op */
    float alpha VKMHA_ZERO; /* 0 means 1 (a zero alpha would only return the bias) */
    /* Row strides in elements; 0 means packed (k for A; n for op N, k for op T
     * for B; n for C). Otherwise at least the packed value. */
    uint32_t lda VKMHA_ZERO, ldb VKMHA_ZERO, ldc VKMHA_ZERO;
    /* Batch strides in elements. 0 means packed (rows * ld);
     * VKMHA_BROADCAST means every batch entry uses the same matrix (A and B
     * only). Otherwise at least rows * ld, so that matrices do not overlap. */
    int64_t stride_a VKMHA_ZERO, stride_b VKMHA_ZERO, stride_c VKMHA_ZERO;
    /* vkmha_dtype of the host arrays a, b, bias and c: F32 (0, default), F16
     * or BF16. The tensor forms ignore it: each tensor has its own. */
    uint32_t dtype VKMHA_ZERO;
    /* A quantized B: a vkmha_quant_type (0, VKMHA_QUANT_NONE: B is of the
     * float dtype like the others) and its group size (32, 64 or 128). b
     * then holds one quantized matrix in the layout of "Quantized weights"
     * (below): op T [n][k], its groups along k (a torch.nn.Linear weight;
     * k a multiple of the group size), op N [k][n], its groups along n (n
     * a multiple of it); ldb 0; stride_b 0 with batch 1, or VKMHA_BROADCAST
     * (one B for every product). The tensor forms take b as a U8 tensor of
     * at least the layout's bytes. The kernels dequantize B while loading
     * it (scale * q, scale * (q - zero), exact in fp32) and accumulate in
     * fp32; the VK_KHR_cooperative_matrix kernel (fp16 A) multiplies, with
     * op T, the codes minus their zero points (exact in fp16) and scales
     * each group's sums, the same values up to the order of the fp32 sums,
     * and with op N each dequantized value as two fp16 halves (value = hi +
     * lo, exact for every finite scale; a step of k holding values of 2^15
     * or more is scaled by a power of two, exact unless that step also
     * holds values whose bits then fall below 2^-24). They
     * read the bytes as they are (vkmha_dequantize's checks are not
     * repeated): a scale that is not finite makes its group's products
     * non-finite (Inf or NaN, as the kernel's order of operations gives),
     * and Q4Z's zero points are read from their low 4 bits. The
     * reference backend computes from the same values in double. Vulkan:
     * a kernel binds b whole (its planes are one binding). A b past
     * maxStorageBufferRange or maxMemoryAllocationSize runs in blocks of
     * its rows (op T: columns of C; op N: ranges of k, summed in fp32),
     * each a quantized matrix of its own (the same bytes, the same
     * results): host arrays past an allocation are cut on the host into
     * calls (op T) or submissions (op N); a b within one allocation but
     * past the range (host arrays or a tensor) has each block copied on
     * the device in one submission (a wrapped tensor's buffer then needs
     * VK_BUFFER_USAGE_TRANSFER_SRC_BIT). A tensor b past an allocation is
     * a sparse one (vkmha_tensor_create). A and C past them run in
     * windows, or calls, of blocks of rows (a row of C must then fit:
     * with op N and a small k it may not, VKMHA_ERROR_UNSUPPORTED naming
     * c). */
    uint32_t b_quant VKMHA_ZERO;
    uint32_t b_group_size VKMHA_ZERO;
} vkmha_matmul_desc;

/* C[b] = alpha * A[b] * op(B[b]) + bias, for b < batch.
 * a: A[b] is m x k, element (i, p) at a[b * stride_a + i * lda + p]
 * b: op N: B[b] is k x n, (p, j) at b[b * stride_b + p * ldb + j]
 *    op T: B[b] is n x k, (j, p) at b[b * stride_b + j * ldb + p]
 * bias: [n] added to every row, or NULL
 * c: (i, j) at c[b * stride_c + i * ldc + j]; must not overlap a, b or bias.
 * Elements of C between rows (ldc > n) are left untouched.
 * Vulkan: one product (batch 1) whose a, b or c is larger than the device's
 * maxStorageBufferRange runs in windows of it (rows of A and C; with op T,
 * rows of B, i.e. columns of C; with op N, rows of B, i.e. ranges of k whose
 * products are summed: in C when it is F32, else in fp32 sums that the last
 * range adds, so that C is rounded once); host arrays larger than
 * maxMemoryAllocationSize (each is copied into one allocation) run as calls
 * of blocks of rows and, with op T, columns; b past maxMemoryAllocationSize
 * with op N as submissions of blocks of its rows (ranges of k) summed on the
 * device the same way; a batched array past the limits runs as calls of
 * fewer products. The tensor forms take tensors past the range
 * the same way, also those past maxMemoryAllocationSize (sparse tensors,
 * vkmha_tensor_create). */
VKMHA_API vkmha_status vkmha_matmul(vkmha_context *ctx, const vkmha_matmul_desc *desc,
                                    const void *a, const void *b, const void *bias,
                                    void *c);

typedef struct vkmha_softmax_desc {
    uint32_t batch VKMHA_ZERO, heads VKMHA_ZERO; /* 0 means 1 */
    uint32_t len_q VKMHA_ZERO, len_k VKMHA_ZERO; /* rows and columns per (batch, head), >= 1 */
    float scale VKMHA_ZERO;           /* multiplies x before bias and mask; 0 means 1 */
    /* vkmha_dtype of the host arrays x and y (the mask's bias stays fp32);
     * ignored by the tensor forms. */
    uint32_t dtype VKMHA_ZERO;
} vkmha_softmax_desc;

/* y = softmax over the last axis of masked(scale * x + bias), see vkmha_mask
 * (a row whose every element is -inf becomes zeros).
 * x, y: [batch][heads][len_q][len_k]; y may equal x (in place). mask may be
 * NULL. */
VKMHA_API vkmha_status vkmha_softmax(vkmha_context *ctx, const vkmha_softmax_desc *desc,
                                     const void *x, const vkmha_mask *mask, void *y);

typedef struct vkmha_heads_desc {
    uint32_t batch VKMHA_ZERO;    /* 0 means 1 */
    uint32_t len VKMHA_ZERO;      /* >= 1 */
    uint32_t heads VKMHA_ZERO;    /* >= 1 */
    uint32_t head_dim VKMHA_ZERO; /* >= 1 */
    /* vkmha_dtype of the host arrays x and y; ignored by the tensor forms,
     * whose x and y may differ (the copy converts). */
    uint32_t dtype VKMHA_ZERO;
} vkmha_heads_desc;

/* x [batch][len][heads * head_dim] -> y [batch][heads][len][head_dim].
 * x and y must not overlap. */
VKMHA_API vkmha_status vkmha_split_heads(vkmha_context *ctx, const vkmha_heads_desc *desc,
                                         const void *x, void *y);
/* The inverse: x [batch][heads][len][head_dim] -> y [batch][len][heads * head_dim]. */
VKMHA_API vkmha_status vkmha_merge_heads(vkmha_context *ctx, const vkmha_heads_desc *desc,
                                         const void *x, void *y);

/* How attention is computed on the Vulkan backend (the reference backend
 * computes the same math either way and ignores the choice). */
typedef enum vkmha_attention_path {
    /* The path, and for the fused path the kernel, that a cost model of
     * the device type predicts to be fastest for this call's shape (fused
     * only where the head dims allow it, d_k, d_v <= 576; unfused only where
     * its scores fit a buffer). The model's coefficients are measured per
     * device type by bench/vkmha-bench-cost; device types without a
     * measurement take the fused path wherever it runs. */
    VKMHA_ATTENTION_PATH_AUTO = 0,
    /* One shader per block of queries streams keys and values with an
     * online softmax: extra device memory O(len_q) instead of
     * O(len_q * len_k). The kernel (workgroup-shared, or CPU-shaped on CPU
     * devices where q, k, v are 16-byte aligned) is the cheaper by the cost
     * model. Head dims up to 576 (any d_k, d_v, equal or not: MLA's 576 and
     * 512 too; heads of 257 to 576 take the d576 pipelines), where the
     * device's shared memory holds a block of them (lavapipe's 64 KiB and
     * GPUs' 48 KiB do), else VKMHA_ERROR_UNSUPPORTED. It skips the key
     * blocks that the masks hide from a whole block of queries, whose
     * weights are exactly 0 (the causal mask, a window, key padding, a full
     * mask, a -inf bias; not in the weights pass), reading only their
     * values for NaN and Inf (0 * NaN is NaN) and, for a -inf bias, their
     * keys (a NaN key makes its row NaN): the result is that of computing
     * them. */
    VKMHA_ATTENTION_PATH_FUSED = 1,
    /* Materializes the [batch][H][len_q][len_k] scores: matmul, softmax,
     * matmul. For comparison and for head dims above 576. */
    VKMHA_ATTENTION_PATH_UNFUSED = 2,
} vkmha_attention_path;

/* Most key splits the fused path takes (see kv_splits). */
#define VKMHA_MAX_KV_SPLITS 1024u

typedef struct vkmha_attention_desc {
    uint32_t batch VKMHA_ZERO;    /* 0 means 1 */
    uint32_t heads VKMHA_ZERO;    /* query heads H, >= 1 */
    uint32_t kv_heads VKMHA_ZERO; /* key/value heads Hkv; 0 means H. Must divide H: query
                          head h reads key/value head h / (H / Hkv) (grouped-
                          query attention; Hkv = 1 is multi-query). */
    uint32_t len_q VKMHA_ZERO, len_k VKMHA_ZERO; /* >= 1 */
    uint32_t d_k VKMHA_ZERO, d_v VKMHA_ZERO;     /* >= 1 */
    float scale VKMHA_ZERO;           /* 0 means 1 / sqrt(d_k) */
    uint32_t path VKMHA_ZERO; /* vkmha_attention_path; 0: AUTO */
    /* Fused path: the keys are split into this many ranges handled by
     * separate workgroups, whose partial results a second small pass
     * combines (split-K, for few queries and many keys). 0 means automatic:
     * split only when batch * heads * query blocks cannot fill the device.
     * At most VKMHA_MAX_KV_SPLITS; more splits than keys are clamped to
     * len_k. Ignored by the unfused path and the reference backend. */
    uint32_t kv_splits VKMHA_ZERO;
    /* vkmha_dtype of the host arrays q, k, v, out and weights; ignored by
     * the tensor forms (each tensor has its own). */
    uint32_t dtype VKMHA_ZERO;
} vkmha_attention_desc;

/* Scaled dot-product attention on split heads:
 *   q [batch][H][len_q][d_k], k [batch][Hkv][len_k][d_k],
 *   v [batch][Hkv][len_k][d_v] -> out [batch][H][len_q][d_v]
 * out = softmax(masked(scale * q k^T + bias)) v, see vkmha_mask.
 * weights: optional output [batch][H][len_q][len_k], the softmax probabilities.
 * The fused path still computes out without the score matrix and fills
 * weights in a second pass from the per-row max and sum it saved, so only
 * the caller's weights need O(len_q * len_k) memory. That pass recomputes
 * each score with the same instructions as the first, so the weights are the
 * softmax out was computed with (rows sum to 1, out = weights * v to fp32
 * rounding) also at logits of 1e4 and beyond.
 * mask may be NULL. Outputs must not overlap inputs. */
VKMHA_API vkmha_status vkmha_attention(vkmha_context *ctx, const vkmha_attention_desc *desc,
                                       const void *q, const void *k, const void *v,
                                       const vkmha_mask *mask, void *out, void *weights);

/* ------------------------------------------------------------------------ */
/* The multi-head attention layer                                           */
/* ------------------------------------------------------------------------ */

typedef struct vkmha_mha vkmha_mha;
/* A layer's cache of projected keys and values (vkmha_kv_cache_create). */
typedef struct vkmha_kv_cache vkmha_kv_cache;
typedef struct vkmha_tensor vkmha_tensor; /* see "Device-resident tensors" */

typedef struct vkmha_mha_desc {
    uint32_t d_model VKMHA_ZERO;   /* required */
    uint32_t n_head VKMHA_ZERO;    /* required; H */
    uint32_t n_kv_head VKMHA_ZERO; /* Hkv; 0 means n_head. Must divide n_head. */
    /* Per-head sizes; 0 means d_model / n_head, which then must divide. */
    uint32_t d_k VKMHA_ZERO, d_v VKMHA_ZERO;
    /* Features of the key and value inputs; 0 means d_model. */
    uint32_t kdim VKMHA_ZERO, vdim VKMHA_ZERO;
    float scale VKMHA_ZERO;         /* 0 means 1 / sqrt(d_k) */
    /* Weights, torch.nn.Linear layout, all required:
     *   w_q [H * d_k][d_model], w_k [Hkv * d_k][kdim],
     *   w_v [Hkv * d_v][vdim],  w_o [d_model][H * d_v]
     * Vulkan: each may exceed maxStorageBufferRange (a d_model 8192 layer on
     * a 128 MiB range): the projections bind windows of it (vkmha_matmul);
     * and maxMemoryAllocationSize: it is kept in blocks of rows, one
     * allocation each, and each projection runs block by block (one row
     * must fit an allocation). */
    const void *w_q VKMHA_ZERO, *w_k VKMHA_ZERO, *w_v VKMHA_ZERO, *w_o VKMHA_ZERO;
    /* Optional biases (NULL: none): b_q [H * d_k], b_k [Hkv * d_k],
     * b_v [Hkv * d_v], b_o [d_model]. */
    const void *b_q VKMHA_ZERO, *b_k VKMHA_ZERO, *b_v VKMHA_ZERO, *b_o VKMHA_ZERO;
    /* Post-norm: out = LayerNorm(query + attention_out) over d_model, as in
     * the reference Transformer code (requires nothing else). gamma [d_model]
     * (NULL: ones), beta [d_model] (NULL: zeros), norm_eps 0 means 1e-6. */
    bool post_norm VKMHA_ZERO;
    const void *norm_gamma VKMHA_ZERO, *norm_beta VKMHA_ZERO;
    float norm_eps VKMHA_ZERO;
    /* vkmha_dtype of every weight, bias, gamma and beta array above: F32 (0,
     * default), F16 or BF16. */
    uint32_t weight_dtype VKMHA_ZERO;
    /* vkmha_dtype the layer keeps them in on the device: F32 (0, default),
     * F16 or BF16 (a 16-bit one halves their device memory). Converted once,
     * at creation, rounding to nearest even. The reference backend keeps
     * them as stored the same way. */
    uint32_t storage_dtype VKMHA_ZERO;
    /* A head shard, for tensor parallelism (both 0: the whole layer): the
     * layer computes query heads [head_begin, head_end) of the layer the
     * weights above describe (n_head, n_kv_head and every weight stay the
     * whole layer's, so that every shard loads the same checkpoint), and its
     * part of the output projection,
     *     out = Concat_{h in [head_begin, head_end)}(head_h) W_o[:, head_begin * d_v :
     *                                                         head_end * d_v]^T,
     * without b_o and without the post-norm: an engine sums the shards'
     * outputs (an all-reduce), then adds b_o and applies the LayerNorm to
     * query + the sum. Both must be multiples of n_head / n_kv_head (a shard
     * holds whole key/value heads), head_begin < head_end <= n_head. b_o,
     * post_norm, norm_gamma and norm_beta are accepted and left to the
     * engine. The shard keeps only its rows of w_q, w_k, w_v (and biases)
     * and its columns of w_o; vkmha_mha_get_desc then describes what it
     * computes: n_head head_end - head_begin, its key/value heads, no b_o,
     * no post-norm, head_begin and head_end as given. Its attn_weights are
     * its heads' [batch][head_end - head_begin][len_q][len_k]; a KV cache
     * of the shard holds its key/value heads. */
    uint32_t head_begin VKMHA_ZERO, head_end VKMHA_ZERO;
    /* Quantized projection weights: a vkmha_quant_type (0: none) and its
     * group size (32, 64 or 128). The layer then keeps w_q, w_k, w_v and
     * w_o quantized ("Quantized weights" below), each quantized at creation
     * from the float arrays above (weight_dtype; rounding as
     * vkmha_quantize: a group holding NaN or Inf, or past fp16's scale
     * range, is refused naming the weight, its row and group), its groups
     * along its inputs: d_model, kdim, vdim and (the shard's) heads * d_v
     * must be multiples of the group size. The projections run as
     * vkmha_matmul with that B (b_quant); the biases, gamma and beta stay
     * in storage_dtype. The reference backend computes from the same
     * dequantized values. Vulkan: each quantized weight must fit one
     * allocation (maxMemoryAllocationSize; VKMHA_ERROR_UNSUPPORTED naming
     * it); past maxStorageBufferRange its projections copy blocks of its
     * rows on the device (as vkmha_matmul_desc.b_quant says). */
    uint32_t weight_quant VKMHA_ZERO;
    uint32_t weight_group_size VKMHA_ZERO;
    /* With weight_quant: w_q, w_k, w_v and w_o already hold quantized
     * matrices in that layout (each [out][in] as above, its groups along
     * in; at least vkmha_quant_layout_of's bytes), not float arrays to
     * quantize; weight_dtype then describes the biases, gamma and beta
     * only. Checked at creation: a scale that is not a finite fp16, or a
     * Q4Z zero point above 15, is refused naming the weight, its row and
     * group. A head shard takes its rows and its columns of w_o from them
     * (whole groups: head_begin * d_v must be a multiple of the group size,
     * which a shard of float weights quantized at creation needs too, so
     * that its groups are the whole layer's). */
    bool weights_quantized VKMHA_ZERO;
    /* Rotary position embedding (RoPE, "RoFormer"; Llama, Mistral, Qwen,
     * gpt-oss, GPT-NeoX, GPT-J): after the projections, the first rope_dims
     * dimensions of every query and key head (even, <= d_k; 0: no RoPE; the
     * others pass through: partial rotary as GPT-NeoX / Phi) rotate in
     * pairs (x0, x1) by the angle p * f_i of the token's position p:
     *     f_i = (1 / rope_scale) * rope_theta^(-2 i / rope_dims), i < rope_dims / 2
     *     x0' = x0 cos - x1 sin,  x1' = x1 cos + x0 sin
     * The pairs: VKMHA_ROPE_HALF (Hugging Face's rotate_half, GPT-NeoX)
     * pairs dimension i with i + rope_dims / 2, VKMHA_ROPE_INTERLEAVED
     * (GPT-J) 2i with 2i + 1. The angles are computed in double on the host
     * and applied in fp32. Keys are rotated once, as they are projected (on
     * Vulkan by the KV cache append's copy, which writes them rotated into
     * the cache: no pass of their own; queries by the GPUs' fused kernel as
     * it loads them), and a KV cache keeps them rotated, so a decode step
     * rotates only its new tokens. Positions:
     * vkmha_mha_io.positions. RoPE needs the keys to be the queries'
     * tokens: a forward with RoPE and new keys takes len_k == len_q. */
    uint32_t rope_dims VKMHA_ZERO;
    float rope_theta VKMHA_ZERO; /* the base; 0 means 10000 */
    float rope_scale VKMHA_ZERO; /* linear position scaling (p / rope_scale); 0 means 1 */
    uint32_t rope_layout VKMHA_ZERO; /* vkmha_rope_layout */
} vkmha_mha_desc;

typedef enum vkmha_rope_layout {
    VKMHA_ROPE_HALF = 0,        /* pairs (i, i + rope_dims / 2) */
    VKMHA_ROPE_INTERLEAVED = 1, /* pairs (2i, 2i + 1) */
} vkmha_rope_layout;

/* Creates the layer and copies its weights to the device, once. The context
 * must outlive it. */
VKMHA_API vkmha_status vkmha_mha_create(vkmha_context *ctx, const vkmha_mha_desc *desc,
                                        vkmha_mha **out);
VKMHA_API void vkmha_mha_destroy(vkmha_mha *mha);
/* The desc with its defaults filled in (weight pointers are NULL: the layer
 * keeps its own copies). */
VKMHA_API vkmha_status vkmha_mha_get_desc(const vkmha_mha *mha, vkmha_mha_desc *out);

typedef struct vkmha_mha_io {
    uint32_t batch VKMHA_ZERO;  /* 0 means 1 */
    uint32_t len_q VKMHA_ZERO;  /* >= 1 */
    uint32_t len_k VKMHA_ZERO;  /* 0 means len_q */
    const void *query VKMHA_ZERO; /* [batch][len_q][d_model] */
    const void *key VKMHA_ZERO;   /* [batch][len_k][kdim] */
    const void *value VKMHA_ZERO; /* [batch][len_k][vdim]; self-attention passes one
                           pointer three times (it is uploaded once) */
    const vkmha_mask *mask VKMHA_ZERO; /* optional, see vkmha_mask */
    void *out VKMHA_ZERO;             /* [batch][len_q][d_model], must not overlap inputs */
    void *attn_weights VKMHA_ZERO;    /* optional: [batch][H][len_q][len_k] */
    /* As in vkmha_attention_desc: 0, 0 mean fused with automatic splits. */
    uint32_t attention_path VKMHA_ZERO; /* vkmha_attention_path */
    uint32_t kv_splits VKMHA_ZERO;
    /* vkmha_dtype of query, key, value, out and attn_weights: F32 (0,
     * default), F16 or BF16. The layer's activations on the device (the
     * projections, the attention output) are kept in this dtype too. */
    uint32_t dtype VKMHA_ZERO;
    /* A KV cache of this layer (NULL: none), for entries kv_entry ..
     * kv_entry + batch - 1 of it; see "Decoding with a KV cache" below. */
    vkmha_kv_cache *kv_cache VKMHA_ZERO;
    uint32_t kv_entry VKMHA_ZERO;
    /* With rope_dims: the positions of the tokens, [batch][len_q], each
     * <= 2^31 - 1 (a host array in every form, tensors too, read while the
     * call is made). NULL: token t of batch entry b is at position
     * L_b + t, L_b the positions its KV cache entry held before the call
     * (0 without a cache). The new keys are the same tokens at the same
     * positions; queries of a call without new keys (a cache's later
     * cross-attention steps) are at L_b + t. With entry_tokens: [len_q],
     * packed as the rows. */
    const uint32_t *positions VKMHA_ZERO;
    /* A mixed batch (continuous batching; needs kv_cache): entry b brings
     * entry_tokens[b] >= 1 new tokens (a prompt for one, one token for
     * others), [batch] (a host array in every form). query, key, value
     * and out are then packed: [len_q][d_model] with the entries' rows one
     * after another, len_q the sum of the counts, len_k 0 or len_q. See
     * "Mixed batches" below. NULL: every entry brings len_q tokens. */
    const uint32_t *entry_tokens VKMHA_ZERO;
} vkmha_mha_io;

/* out = (LayerNorm(query + ...) if post_norm)
 *       Concat_h(Attention(query W_q^T + b_q, key W_k^T + b_k, value W_v^T + b_v)) W_o^T + b_o
 * Inference only: dropout is the identity. On the Vulkan backend this is one
 * command buffer and one submit. */
VKMHA_API vkmha_status vkmha_mha_forward(vkmha_mha *mha, const vkmha_mha_io *io);

/* ------------------------------------------------------------------------ */
/* Decoding with a KV cache                                                 */
/* ------------------------------------------------------------------------ */

/*
 * A decoder generates one token per step; each step attends its new
 * queries over every earlier position. A KV cache keeps the projected keys
 * and values of the earlier positions on the device, so a step projects only
 * its new tokens. A cache belongs to one layer (its heads and head dims) and
 * has `batch` entries (sequences) of `capacity` positions each:
 *   keys   [batch][n_kv_head][capacity][d_k]
 *   values [batch][n_kv_head][capacity][d_v]
 * in its own dtype (F32, F16 or BF16, whatever the layer's and the
 * activations' dtypes: stored values are rounded to it; or 8-bit rows:
 * vkmha_kv_cache_desc.quant), and a length per
 * entry (the positions it holds, from 0). Positions past an entry's length
 * hold zeros.
 *
 * A forward with io.kv_cache (every form: host arrays, tensors, recorded,
 * submitted; one command buffer) uses entries e = kv_entry + b for its batch
 * entries b < batch:
 *   - with key and value: their len_k (0: len_q) positions are projected and
 *     appended to every entry used, from its length on (self-attention
 *     decoding: key = value = the new tokens; a cross-attention's first step:
 *     the encoder's output into an empty entry);
 *   - with key and value both NULL: nothing is appended (a cross-attention's
 *     later steps reuse the encoder's keys and values as they are);
 * then the queries attend over each entry's L positions (its length after
 * the append), as if that entry's keys and values were the key and value of
 * an ordinary forward: positions past L do not exist for it (weight exactly
 * 0, not a masked -1e9), so entries of different lengths decode in one call.
 * The attention's key axis is len_kv = the largest L of the entries used:
 * masks are [batch][len_kv] (key_padding), [batch][len_q][len_kv] (full),
 * [..][..][len_q][len_kv] (bias), and attn_weights [batch][H][len_q][len_kv]
 * (0 past each entry's L). VKMHA_MASK_CAUSAL is aligned to each entry's
 * end (vkmha_mask.causal_offset): a prompt prefilled whole or in chunks, or
 * token by token, gives the same outputs as one causal forward over the
 * whole sequence (masked rows aside: a row whose every key is masked gets
 * uniform weights over the keys it has).
 * Mixed batches (vkmha_mha_io.entry_tokens, vkmha_mha_tensors.entry_tokens):
 * one call where entry b brings n_b = entry_tokens[b] new tokens, its rows
 * packed after the previous entries' (row r0_b = n_0 + ... + n_{b-1}, the
 * cumulative offsets of varlen attention): a serving engine's step that
 * prefills one prompt (or a chunk of it) while other entries decode a
 * token each. Entry b appends its n_b keys and values at its length L_b
 * (without key and value: nothing, as above), and its queries attend over
 * its L_b + n_b positions with the causal mask (and window, ALiBi)
 * aligned to its own end: the result is that of one call per entry. RoPE
 * positions are L_b + t (io.positions: [len_q], packed likewise). Masks
 * with arrays per batch entry (key_padding, full, bias) and attn_weights
 * have no packed shape: VKMHA_ERROR_INVALID_ARGUMENT naming them; causal,
 * window, soft cap, ALiBi and sinks apply. Counts of 0, counts that do not
 * add up to len_q, a len_k other than 0 or len_q, or a call without
 * kv_cache are VKMHA_ERROR_INVALID_ARGUMENT naming io->entry_tokens, and
 * nothing is written. The entries run as runs of consecutive entries with
 * equal counts (all the decodes of a run of entries in one pass), every run
 * recorded into the call's one command buffer (one submit, every form:
 * host arrays, tensors, recorded, submitted). Packed queries and outputs
 * past maxStorageBufferRange run as calls of consecutive entries whose
 * rows fit one binding (an entry past it alone, in calls of its query
 * rows as any call is), each its own command buffer (one submission for
 * vkmha_mha_submit), with the same results.
 * An append that would pass an entry's capacity fails with
 * VKMHA_ERROR_INVALID_ARGUMENT naming the cache, the entry and the lengths,
 * and writes nothing. The lengths change when the call is made (recorded or
 * submitted work must then run, once, before the cache is read again).
 * Thread safety: as its layer's context. The layer and the context must
 * outlive the cache.
 */
typedef struct vkmha_kv_cache_desc {
    uint32_t batch VKMHA_ZERO;    /* entries; 0 means 1 */
    uint32_t capacity VKMHA_ZERO; /* positions per entry, >= 1 */
    uint32_t dtype VKMHA_ZERO;    /* vkmha_dtype of keys and values: F32 (0), F16, BF16 */
    /* Optional: tensors of the application's to hold the keys and the
     * values (both or neither; e.g. its own VkBuffers through
     * vkmha_tensor_wrap), of the dtype above and at least the elements of
     * the shapes above, of the layer's context (with quant: U8 tensors of
     * at least the bytes below). They must outlive the cache; creation
     * zeroes them. NULL: the cache allocates its own. */
    vkmha_tensor *keys VKMHA_ZERO, *values VKMHA_ZERO;
    /* A vkmha_quant_type: VKMHA_QUANT_NONE (0), or VKMHA_QUANT_Q8, an 8-bit
     * cache (dtype must then be 0). Each row of d = d_k (keys) or d_v
     * (values) elements of one (entry, kv head, position) is stored as
     * R = 4 + d rounded up to a multiple of 4 bytes:
     *   bytes 0-1: the row's scale s, an fp16 (little-endian); bytes 2-3: 0
     *   bytes 4 .. 4 + d - 1: the codes q, int8 (two's complement); then 0s
     * standing for the values s * q; the tensors are U8
     * [batch][n_kv_head][capacity][R] (R = 68 for d = 64: 0.53x an F16
     * cache's bytes). The append quantizes each new row x (its fp32 values,
     * rounded from the projection's fp32 sums as an F32 cache stores them)
     * as vkmha_quantize's Q8 does a group: s = fp16(max|x| / 127),
     * q = clamp(round(x / s), -127, 127) (round to nearest even; the
     * device's fp32 divisions, which Vulkan lets be within 2.5 ulp, can
     * put a code one step from the host's where x / s lies at a rounding
     * boundary), with these rules for what cannot be refused at run time:
     * a row of zeros, or one whose s underflows fp16, stores s = 0 and
     * q = 0 (it reads as zeros); a scale past 65504 saturates there (the
     * codes then clamp: |x| above about 8.3e6 is clipped); a row holding
     * NaN or +-Inf stores the fp16 NaN 0x7e00 as its scale and q = 0 (it
     * reads as NaN: a NaN value row makes every output of its entry NaN,
     * masked keys too, as an F32 cache's NaN would). Every attention path
     * reads s * q (exact in fp32); the fused kernels dequantize while
     * loading the keys and values, the unfused path converts the call's
     * rows to fp32 first. Tensors of the application's must start on a
     * multiple of 4 bytes. Vulkan: the tensors must each fit one binding
     * (maxStorageBufferRange), and d_k, d_v be at most 16384
     * (VKMHA_ERROR_UNSUPPORTED naming desc->capacity or the head dim). */
    uint32_t quant VKMHA_ZERO;
} vkmha_kv_cache_desc;

/* A cache for `mha` with every entry empty (length 0).
 * Vulkan: the keys and values may each exceed maxStorageBufferRange, and so
 * may one entry's, or one head's of an entry (n_kv_head * capacity * head
 * dim * the dtype's size): a forward appends to them in blocks that fit,
 * and the attention reads them in windows (the fused path's windows of
 * keys; the unfused path's matmuls one product at a time). Its own keys and
 * values are vkmha_tensor_create's: past maxMemoryAllocationSize they are
 * sparse where the context makes sparse tensors; past
 * vkmha_context_info.max_tensor_bytes, VKMHA_ERROR_UNSUPPORTED naming
 * desc->batch and desc->capacity (several caches of fewer entries hold what
 * one cannot). */
VKMHA_API vkmha_status vkmha_kv_cache_create(vkmha_mha *mha, const vkmha_kv_cache_desc *desc,
                                             vkmha_kv_cache **out);
/* NULL is a no-op. Work recorded or submitted that uses it must have completed. */
VKMHA_API void vkmha_kv_cache_destroy(vkmha_kv_cache *cache);
/* The desc with its defaults filled in (keys and values: the tensors in use). */
VKMHA_API vkmha_status vkmha_kv_cache_get_desc(const vkmha_kv_cache *cache,
                                               vkmha_kv_cache_desc *out);
/* Device bytes of the keys and values: batch * n_kv_head * capacity *
 * (d_k + d_v) * the dtype's size (Q8: the rows' bytes, 4 + d rounded up to
 * 4, for d_k and d_v), plus 4 bytes per entry for the lengths
 * (and, on the Vulkan backend, a buffer of at most 64 KiB of zeros). */
VKMHA_API uint64_t vkmha_kv_cache_bytes(const vkmha_kv_cache *cache);
/* The lengths of entries first .. first + count - 1 into lengths[count]. */
VKMHA_API vkmha_status vkmha_kv_cache_get_lengths(const vkmha_kv_cache *cache, uint32_t first,
                                                  uint32_t count, uint32_t *lengths);
/* Every entry empty (length 0, zeros). */
VKMHA_API vkmha_status vkmha_kv_cache_reset(vkmha_kv_cache *cache);
/* Entry `entry` (VKMHA_ALL_ENTRIES: every entry) keeps its first `length`
 * positions: rolls back rejected speculative tokens. A length above an
 * entry's current one is VKMHA_ERROR_INVALID_ARGUMENT (nothing changes). */
#define VKMHA_ALL_ENTRIES UINT32_MAX
VKMHA_API vkmha_status vkmha_kv_cache_truncate(vkmha_kv_cache *cache, uint32_t entry,
                                               uint32_t length);
/* Entry `entry` (VKMHA_ALL_ENTRIES: every entry) holds `length` positions
 * (at most the capacity) from now on: shorter as vkmha_kv_cache_truncate,
 * longer taking the keys and values the cache's tensors hold at the added
 * positions, e.g. a prefix the application computed or saved and wrote
 * into them itself (zeros unless written). */
VKMHA_API vkmha_status vkmha_kv_cache_set_length(vkmha_kv_cache *cache, uint32_t entry,
                                                 uint32_t length);
/* Entry e takes what entry src[e] held before the call (keys, values and
 * length), for every e < batch: a permutation, or copies of one entry into
 * several (beam search). */
VKMHA_API vkmha_status vkmha_kv_cache_reorder(vkmha_kv_cache *cache, const uint32_t *src);
/* The keys and values as tensors of the cache's dtype and shape (above; a
 * Q8 cache's: U8 rows of scale and codes): read them
 * (vkmha_tensor_download) or pass them to the ops; writing them changes
 * what the cache holds. Either pointer may be NULL. */
VKMHA_API vkmha_status vkmha_kv_cache_get_tensors(vkmha_kv_cache *cache, vkmha_tensor **keys,
                                                  vkmha_tensor **values);

/* ------------------------------------------------------------------------ */
/* A layer from a PyTorch checkpoint (.safetensors)                         */
/* ------------------------------------------------------------------------ */

/*
 * The safetensors format (what PyTorch and Hugging Face checkpoints ship in):
 * an 8-byte little-endian header length, a JSON header mapping each tensor's
 * name to its dtype, shape and byte offsets, then the raw data. vkmha finds
 * the layer's weights by name under `prefix` (prepended verbatim, e.g.
 * "encoder.layers.0.self_attn."), in one of these layouts:
 *
 *   torch.nn.MultiheadAttention:
 *     in_proj_weight [3 * d_model][d_model], in_proj_bias [3 * d_model]
 *     or, when kdim / vdim differ from d_model:
 *     q_proj_weight [d_model][d_model], k_proj_weight [d_model][kdim],
 *     v_proj_weight [d_model][vdim], in_proj_bias [3 * d_model]
 *     out_proj.weight [d_model][d_model], out_proj.bias [d_model]
 *   separate Linear layers (Hugging Face style; grouped-query allowed):
 *     q_proj.weight [H * d_k][d_model], k_proj.weight [Hkv * d_k][kdim],
 *     v_proj.weight [Hkv * d_v][vdim], o_proj.weight or out_proj.weight
 *     [d_model][H * d_v], each with an optional .bias [rows]
 *   GPTQ-packed 4-bit Linear layers (AutoGPTQ's "gptq" checkpoint format),
 *   the same four names with .qweight, .qzeros, .scales and an optional
 *   .g_idx in place of .weight (a layer of K inputs and N outputs in groups
 *   of G inputs):
 *     qweight I32 [K / 8][N]: input k of output n in bits 4 (k % 8) .. + 3
 *     of element [k / 8][n];
 *     qzeros I32 [K / G][N / 8]: the zero point of group g of output n,
 *     minus one, in bits 4 (n % 8) .. + 3 of element [g][n / 8];
 *     scales F16 [K / G][N]; g_idx I32 [K], if present, k / G for each k;
 *     weight (n, k) = scales[k / G][n] * (q - (stored zero + 1)).
 *   The layer then keeps them as VKMHA_QUANT_Q4Z in groups of G
 *   (vkmha_mha_desc.weight_quant, weights_quantized), the values exactly
 *   those above. Refused, naming the tensor: other bit widths (told by
 *   qzeros' columns), G other than 32, 64 or 128, projections of different
 *   group sizes, GPTQ mixed with float projections, act-order (a permuted
 *   g_idx), a stored zero of 15 (a zero point of 16: Q4Z's hold 0 .. 15).
 *   vkmha's own layout ("Quantized weights" below), a tensor per plane, the
 *   same four names with .qvalues (I8 [N][K]: Q8; U8 [N][K / 2]: Q4 and
 *   Q4Z, two codes per byte, the low nibble first), .qscales (F16
 *   [N][K / G]) and, for Q4Z, .qzero_points (U8 [N][K / G], each at most
 *   15), one type and group size for the four; taken as they are
 *   (weights_quantized). A scale that is not finite or a zero point above 15
 *   is refused naming the tensor, row and group.
 *
 * Every bias is optional. d_model, d_k, d_v, kdim and vdim come from the
 * shapes; the number of heads is not in the file and must be given. Tensors
 * may be F32, F16 or BF16 (stored as storage_dtype says; F16 and BF16 tensors
 * stored in their own dtype are copied as they are). Other
 * tensors in the file are ignored (a whole model's checkpoint is fine), but
 * the whole header is validated. The file is mapped read-only (F32 tensors
 * are then read in place; nothing is read into an intermediate copy) and
 * unmapped before the call returns; the layer keeps no reference to it.
 *
 * A file is untrusted input: a malformed one (truncated, a header length
 * beyond the file or above 100,000,000 bytes, a header that is not UTF-8 or
 * not JSON, an entry without dtype, shape or data_offsets, an unknown dtype,
 * offsets out of range, overlapping or leaving bytes unused, bytes that do
 * not match shape and dtype, a name twice, a missing or misshapen weight, a
 * dtype other than F32 / F16 / BF16 for a weight) gets
 * VKMHA_ERROR_INVALID_ARGUMENT with a message naming the path and the tensor
 * or field; nothing else happens. A file that cannot be opened gets the same
 * with the system's reason. nn.MultiheadAttention's add_bias_kv (tensors
 * bias_k, bias_v) gets VKMHA_ERROR_UNSUPPORTED. The file must not be
 * truncated by another process during the call (a mapped file then faults).
 */
typedef struct vkmha_safetensors_desc {
    /* The file: a path (opened and mapped during the call), or its bytes in
     * memory (data, size: e.g. a checkpoint the application read itself).
     * Exactly one of path and data. */
    const char *path VKMHA_ZERO;
    const void *data VKMHA_ZERO;
    size_t size VKMHA_ZERO;
    /* Prepended to every name; NULL or "": none. */
    const char *prefix VKMHA_ZERO;
    /* As in vkmha_mha_desc: n_head required, n_kv_head 0 means n_head (a
     * packed in_proj_weight requires n_kv_head 0 or n_head), scale 0 means
     * 1 / sqrt(d_k). */
    uint32_t n_head VKMHA_ZERO;
    uint32_t n_kv_head VKMHA_ZERO;
    float scale VKMHA_ZERO;
    /* As in vkmha_mha_desc. With post_norm, norm_prefix (NULL: gamma ones,
     * beta zeros) names the LayerNorm's tensors: norm_prefix + "weight"
     * [d_model] (required) and norm_prefix + "bias" [d_model] (optional),
     * e.g. "encoder.layers.0.norm1.". norm_prefix without post_norm is
     * VKMHA_ERROR_INVALID_ARGUMENT. norm_eps 0 means 1e-6 (torch.nn.LayerNorm's
     * default is 1e-5: pass it). */
    bool post_norm VKMHA_ZERO;
    const char *norm_prefix VKMHA_ZERO;
    float norm_eps VKMHA_ZERO;
    /* As vkmha_mha_desc.storage_dtype: how the layer keeps the weights on
     * the device, F32 (0, default), F16 or BF16, whatever the file's dtypes. */
    uint32_t storage_dtype VKMHA_ZERO;
    /* As vkmha_mha_desc: a head shard of the file's layer (both 0: all). */
    uint32_t head_begin VKMHA_ZERO, head_end VKMHA_ZERO;
    /* As vkmha_mha_desc.weight_quant and weight_group_size: a file's float
     * projections quantized as the layer is created (0: kept in
     * storage_dtype). A file holding quantized projections (GPTQ's or
     * vkmha's layout) keeps its own quantization: these must then be 0 or
     * the same (VKMHA_ERROR_INVALID_ARGUMENT naming them otherwise). */
    uint32_t weight_quant VKMHA_ZERO;
    uint32_t weight_group_size VKMHA_ZERO;
} vkmha_safetensors_desc;

/* Creates a layer (as vkmha_mha_create) from the tensors of a safetensors
 * file; vkmha_mha_get_desc then tells the sizes found. */
VKMHA_API vkmha_status vkmha_mha_create_from_safetensors(vkmha_context *ctx,
                                                         const vkmha_safetensors_desc *desc,
                                                         vkmha_mha **out);

/* ------------------------------------------------------------------------ */
/* Device-resident tensors                                                  */
/* ------------------------------------------------------------------------ */

/*
 * A vkmha_tensor is an array that lives where the context computes (device
 * memory for Vulkan, host memory for the reference backend), so a sequence of
 * calls runs with no host round trip. Create one with a shape, or wrap an
 * application's VkBuffer (vkmha_tensor_wrap, include/vkmha_vulkan.h). The
 * calls taking tensors check each tensor's context, dtype and element count
 * (it must hold at least the elements the call reads or writes); the dims
 * describe the shape for the application and for vkmha_tensor_get_desc.
 * A tensor belongs to its context: passing it to another context's call, or
 * after it was destroyed, is VKMHA_ERROR_INVALID_ARGUMENT (vkmha checks the
 * pointer against its context's live tensors without dereferencing it).
 * Thread safety: as its context.
 */
typedef struct vkmha_tensor vkmha_tensor;

typedef enum vkmha_dtype {
    VKMHA_DTYPE_F32 = 0, /* float, the default */
    VKMHA_DTYPE_U8 = 1,  /* uint8_t: key-padding and full masks */
    /* IEEE 754 binary16 (numpy.float16, torch.float16, _Float16), as
     * uint16_t bits in host memory. */
    VKMHA_DTYPE_F16 = 2,
    /* bfloat16 (torch.bfloat16): the high 16 bits of an fp32, as uint16_t
     * bits in host memory. */
    VKMHA_DTYPE_BF16 = 3,
} vkmha_dtype;

#define VKMHA_MAX_DIMS 4

typedef struct vkmha_tensor_desc {
    uint32_t dtype VKMHA_ZERO; /* vkmha_dtype */
    uint32_t rank VKMHA_ZERO;                 /* 1 to VKMHA_MAX_DIMS */
    uint32_t dims[VKMHA_MAX_DIMS] VKMHA_ZERO; /* outermost first, each >= 1 */
} vkmha_tensor_desc;

/* A new tensor of desc's shape; its contents are undefined until written.
 * Vulkan: up to maxMemoryAllocationSize, and past it on a device with sparse
 * binding (a sparse VkBuffer on several allocations; the bound is
 * vkmha_context_info.max_tensor_bytes), else VKMHA_ERROR_UNSUPPORTED naming
 * desc->dims and why. One larger than maxStorageBufferRange
 * is taken by every op, the layer and a KV cache, which run in parts that
 * fit or bind it in windows (see "Ops on host arrays" above; a KV cache's
 * entries: vkmha_kv_cache_create). */
VKMHA_API vkmha_status vkmha_tensor_create(vkmha_context *ctx, const vkmha_tensor_desc *desc,
                                           vkmha_tensor **out);
/* Frees the tensor's memory (a wrapped VkBuffer is left alone); NULL is a
 * no-op. Work recorded or submitted that uses it must have completed. */
VKMHA_API void vkmha_tensor_destroy(vkmha_tensor *t);
VKMHA_API vkmha_status vkmha_tensor_get_desc(const vkmha_tensor *t, vkmha_tensor_desc *out);
/* Bytes of the tensor: elements times the dtype's size. */
VKMHA_API uint64_t vkmha_tensor_bytes(const vkmha_tensor *t);
/* Copies `bytes` bytes from host memory into the tensor from byte `offset`
 * (multiples of 4, or of 2 for F16 and BF16 tensors, and offset + bytes at
 * most the tensor's bytes), and waits.
 * Work submitted earlier on the context's queue that uses the tensor is
 * ordered before the copy. */
VKMHA_API vkmha_status vkmha_tensor_upload(vkmha_tensor *t, uint64_t offset, const void *src,
                                           uint64_t bytes);
/* Copies bytes of the tensor from byte `offset` to host memory, and waits. */
VKMHA_API vkmha_status vkmha_tensor_download(const vkmha_tensor *t, uint64_t offset, void *dst,
                                             uint64_t bytes);

/* A mask made of tensors: as vkmha_mask, key_padding and full of dtype U8,
 * bias of dtype F32. */
typedef struct vkmha_tensor_mask {
    uint32_t kinds VKMHA_ZERO;
    const vkmha_tensor *key_padding VKMHA_ZERO, *full VKMHA_ZERO, *bias VKMHA_ZERO;
    uint32_t bias_batch VKMHA_ZERO, bias_heads VKMHA_ZERO;
    uint32_t causal_offset VKMHA_ZERO; /* as vkmha_mask.causal_offset */
    /* As vkmha_mask's: the window, the cap, and host arrays of [heads] fp32
     * (recorded into the call's commands). */
    uint32_t window VKMHA_ZERO;
    float softcap VKMHA_ZERO;
    const float *alibi VKMHA_ZERO;
    const float *sinks VKMHA_ZERO;
} vkmha_tensor_mask;

/* The ops on tensors, computed on the context's queue before returning: the
 * same math, descs and layouts as the ops on host arrays above (a tensor
 * stands for the array of the same name). Each float tensor may be F32, F16
 * or BF16, independently of the others (say, fp16 weights times fp32
 * activations); the desc's dtype field is ignored. Outputs must be other tensors than
 * the inputs (softmax may run in place: y == x). */
VKMHA_API vkmha_status vkmha_matmul_tensor(vkmha_context *ctx, const vkmha_matmul_desc *desc,
                                           const vkmha_tensor *a, const vkmha_tensor *b,
                                           const vkmha_tensor *bias, vkmha_tensor *c);
VKMHA_API vkmha_status vkmha_softmax_tensor(vkmha_context *ctx, const vkmha_softmax_desc *desc,
                                            const vkmha_tensor *x,
                                            const vkmha_tensor_mask *mask, vkmha_tensor *y);
VKMHA_API vkmha_status vkmha_split_heads_tensor(vkmha_context *ctx,
                                                const vkmha_heads_desc *desc,
                                                const vkmha_tensor *x, vkmha_tensor *y);
VKMHA_API vkmha_status vkmha_merge_heads_tensor(vkmha_context *ctx,
                                                const vkmha_heads_desc *desc,
                                                const vkmha_tensor *x, vkmha_tensor *y);
VKMHA_API vkmha_status vkmha_attention_tensor(vkmha_context *ctx,
                                              const vkmha_attention_desc *desc,
                                              const vkmha_tensor *q, const vkmha_tensor *k,
                                              const vkmha_tensor *v,
                                              const vkmha_tensor_mask *mask,
                                              vkmha_tensor *out, vkmha_tensor *weights);

/* vkmha_mha_io with tensors: query, key, value, out and attn_weights of one
 * float dtype (F32, F16 or BF16), which the layer's activations then use. */
typedef struct vkmha_mha_tensors {
    uint32_t batch VKMHA_ZERO, len_q VKMHA_ZERO, len_k VKMHA_ZERO; /* as vkmha_mha_io */
    const vkmha_tensor *query VKMHA_ZERO, *key VKMHA_ZERO, *value VKMHA_ZERO;
    const vkmha_tensor_mask *mask VKMHA_ZERO; /* optional */
    vkmha_tensor *out VKMHA_ZERO;
    vkmha_tensor *attn_weights VKMHA_ZERO; /* optional */
    uint32_t attention_path VKMHA_ZERO; /* vkmha_attention_path */
    uint32_t kv_splits VKMHA_ZERO;
    vkmha_kv_cache *kv_cache VKMHA_ZERO; /* as vkmha_mha_io */
    uint32_t kv_entry VKMHA_ZERO;
    const uint32_t *positions VKMHA_ZERO; /* as vkmha_mha_io: a host array */
    const uint32_t *entry_tokens VKMHA_ZERO; /* as vkmha_mha_io: a host array */
} vkmha_mha_tensors;

/* vkmha_mha_forward on tensors, computed before returning. */
VKMHA_API vkmha_status vkmha_mha_forward_tensor(vkmha_mha *mha, const vkmha_mha_tensors *io);

/* ------------------------------------------------------------------------ */
/* Asynchronous work on the context's queue                                 */
/* ------------------------------------------------------------------------ */

typedef struct vkmha_submission vkmha_submission;

/* Records the forward into a command buffer of vkmha's, submits it to the
 * context's queue and returns without waiting; *out is the handle to wait
 * for. The tensors and the layer must stay alive, and the inputs unchanged,
 * until the submission completed. Later calls on the context are ordered
 * after it on the queue. A layer that runs in parts (arrays past
 * maxStorageBufferRange, see "Ops on host arrays") records them all into
 * the one submission; scratch buffers it replaces meanwhile are then kept
 * until vkmha_context_trim, as after vkmha_mha_record. The reference
 * backend computes it at once and returns a completed submission. */
VKMHA_API vkmha_status vkmha_mha_submit(vkmha_mha *mha, const vkmha_mha_tensors *io,
                                        vkmha_submission **out);
/* VKMHA_SUCCESS when the work completed, VKMHA_NOT_READY when it still
 * runs, or the error that ended it (VKMHA_ERROR_DEVICE_LOST). Never blocks. */
VKMHA_API vkmha_status vkmha_submission_poll(vkmha_submission *s);
/* Waits at most timeout_ns nanoseconds (UINT64_MAX: no limit): VKMHA_SUCCESS,
 * VKMHA_NOT_READY on timeout, or an error. */
VKMHA_API vkmha_status vkmha_submission_wait(vkmha_submission *s, uint64_t timeout_ns);
/* Waits for the work, then frees the handle; NULL is a no-op. */
VKMHA_API void vkmha_submission_destroy(vkmha_submission *s);

/* ------------------------------------------------------------------------ */
/* Context maintenance                                                      */
/* ------------------------------------------------------------------------ */

/* Frees the context's scratch buffers (they are allocated again, as large as
 * needed, by the next call that needs them), including the ones retired
 * while work recorded into the application's command buffers could still
 * use them. Call it only when no such command buffer is pending; waits for
 * vkmha's own submissions. */
VKMHA_API vkmha_status vkmha_context_trim(vkmha_context *ctx);

/* The context's pipeline cache in vkmha's validated format: on entry *size
 * is the capacity of data (data may be NULL to ask the size), on return the
 * bytes needed; VKMHA_ERROR_INVALID_ARGUMENT naming size when it is too
 * small. VKMHA_ERROR_UNSUPPORTED for the reference backend. */
VKMHA_API vkmha_status vkmha_context_get_pipeline_cache(vkmha_context *ctx, void *data,
                                                        size_t *size);
/* Writes the pipeline cache to `path` (NULL: desc->pipeline_cache_path),
 * through a temporary file renamed over it, so a crash never leaves a torn
 * file behind. */
VKMHA_API vkmha_status vkmha_context_save_pipeline_cache(vkmha_context *ctx, const char *path);

/* ------------------------------------------------------------------------ */
/* Quantized weights: 8 and 4 bits, group-wise                               */
/* ------------------------------------------------------------------------ */

/* A weight matrix W [rows][cols] in torch.nn.Linear layout ([out][in]: cols
 * is the input dimension K of the product) kept in 8 or 4 bits per value,
 * with a scale per group of group_size consecutive values of a row (and, for
 * Q4Z, a zero point per group). The host functions below write and read
 * it (vkmha_quantize, vkmha_dequantize); vkmha_matmul and
 * vkmha_matmul_tensor take B in it (vkmha_matmul_desc.b_quant), every
 * matmul kernel dequantizing while it loads; the layer keeps its
 * projection weights in it when asked (vkmha_mha_desc.weight_quant).
 *
 *   Q8    value = scale * q, q an int8 in -127..127 (symmetric);
 *   Q4    value = scale * q, q in -8..7 (symmetric; the 4-bit code is q + 8);
 *   Q4Z   value = scale * (q - zero), q and zero in 0..15 (asymmetric: the
 *         GPTQ / AWQ convention).
 *
 * The bytes of one quantized matrix, in this order (offsets in bytes from
 * its start; vkmha_quant_layout computes them; G = cols / group_size groups
 * per row):
 *   values  at 0: Q8: rows * cols int8_t, row after row; Q4, Q4Z: rows *
 *           cols / 2 bytes, row after row, byte j of a row holding the codes
 *           of elements 2j (bits 0-3) and 2j + 1 (bits 4-7);
 *   scales  at scales_offset (the values' size; a multiple of 16): rows * G
 *           fp16 bit patterns (uint16_t, little-endian), [rows][G];
 *   zeros   (Q4Z only) at zeros_offset (the scales' end rounded up to 16):
 *           rows * G bytes, [rows][G], each 0..15;
 *   bytes   the end rounded up to 16 (padding bytes are zero).
 *
 * Quantizing one group x (its values in fp32, exact for F32, F16 and BF16
 * sources; every operation below in fp32 with rounding to nearest even,
 * rint() for "round"):
 *   Q8:  d = fp16(max|x| / 127); q = clamp(round(x / d), -127, 127)
 *   Q4:  d = fp16(max|x| / 7);   q = clamp(round(x / d), -8, 7)
 *   Q4Z: lo = min(min x, 0), hi = max(max x, 0) (lo = -1, hi = 1 when both
 *        are 0); d = fp16((hi - lo) / 15); zero = clamp(round(-lo / d), 0,
 *        15); q = clamp(round(x / d) + zero, 0, 15)
 * where fp16() rounds to nearest even (subnormals included). A group whose d
 * is 0 (all zeros, or values so small that the scale underflows fp16:
 * below about 2^-24 times 7 to 127) keeps d = 0 and every q (and zero) 0:
 * it decodes to zeros. A group holding NaN or +-Inf, or whose scale's
 * quotient exceeds 65504 (the largest fp16; |x| above about 8.3e6 for Q8),
 * cannot be quantized: VKMHA_ERROR_INVALID_ARGUMENT naming the row, the
 * group and why. */
typedef enum vkmha_quant_type {
    VKMHA_QUANT_NONE = 0, /* not quantized */
    VKMHA_QUANT_Q8 = 1,
    VKMHA_QUANT_Q4 = 2,
    VKMHA_QUANT_Q4Z = 3,
} vkmha_quant_type;

typedef struct vkmha_quant_desc {
    uint32_t type VKMHA_ZERO;       /* vkmha_quant_type: Q8, Q4 or Q4Z */
    uint32_t group_size VKMHA_ZERO; /* 32, 64 or 128 */
    /* The matrix [rows][cols], each >= 1; cols a multiple of group_size. */
    uint32_t rows VKMHA_ZERO, cols VKMHA_ZERO;
} vkmha_quant_desc;

typedef struct vkmha_quant_layout {
    uint64_t scales_offset VKMHA_ZERO, zeros_offset VKMHA_ZERO; /* zeros: 0 unless Q4Z */
    uint64_t bytes VKMHA_ZERO;                                /* the whole matrix */
} vkmha_quant_layout;

/* The layout above for desc (VKMHA_ERROR_INVALID_ARGUMENT naming the field
 * of a bad desc). Any backend. */
VKMHA_API vkmha_status vkmha_quant_layout_of(vkmha_context *ctx, const vkmha_quant_desc *desc,
                                             vkmha_quant_layout *out);
/* Quantizes src, [rows][cols] values of src_dtype (F32, F16 or BF16), into
 * dst (dst_bytes >= the layout's bytes), on the host, as above. On an error
 * dst's contents are undefined. Any backend. */
VKMHA_API vkmha_status vkmha_quantize(vkmha_context *ctx, const vkmha_quant_desc *desc,
                                      uint32_t src_dtype, const void *src, void *dst,
                                      uint64_t dst_bytes);
/* The values a quantized matrix stands for (scale * q, scale * (q - zero)),
 * exact in fp32, into dst [rows][cols] of dst_dtype (F32; F16 and BF16 round
 * to nearest even, saturating at the largest finite value, as every vkmha
 * conversion does). src holds src_bytes >= the layout's bytes; a zero point
 * above 15 or a scale that is not a finite fp16 is refused naming its row
 * and group. Any backend. */
VKMHA_API vkmha_status vkmha_dequantize(vkmha_context *ctx, const vkmha_quant_desc *desc,
                                        const void *src, uint64_t src_bytes, uint32_t dst_dtype,
                                        void *dst);

#ifdef __cplusplus
}
#endif

#endif /* VKMHA_H */
