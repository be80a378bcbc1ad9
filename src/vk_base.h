/* The Vulkan backend's private headers are one per group of layers, each
 * including the one below (docs/ARCHITECTURE.md), so that a file that
 * includes its own group's header cannot call up:
 *   vk_base.h       types, the state, and layers 0-1: loader, results, views,
 *                   the kernel table, the cost model, the queue, tuning
 *   vk_resources.h  layers 2-4: instance, device, submissions, memory,
 *                   descriptors, pipelines and their cache
 *   vk_exec.h       layers 5-7: the executor, dispatches, masks, host arrays
 *   vk_ops.h        layers 8-10: the ops and the attention
 *   vk_internal.h   layers 11-14: tensors, the self-check, KV caches, the
 *                   layer, the context
 * This one: the types every layer shares, and layers 0-1. */
#ifndef VKMHA_VK_BASE_H
#define VKMHA_VK_BASE_H


#include "internal.h"

/* Generated from volk.h (src/volk_rename.py): volk's globals get vkmha's
 * prefix, so that a static libvkmha.a never exports them. */
#include "vkmha_volk_rename.h"
#include <volk.h>

#include "vkmha_vulkan.h"

/* VK_KHR_cooperative_matrix (Vulkan headers 1.3.255), declared here for
 * headers that predate it (Debian 12 has 1.3.239): the values are the
 * registry's. */
#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR ((VkStructureType)1000506000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506001)
typedef enum VkComponentTypeKHR {
    VK_COMPONENT_TYPE_FLOAT16_KHR = 0,
    VK_COMPONENT_TYPE_FLOAT32_KHR = 1,
    VK_COMPONENT_TYPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkComponentTypeKHR;
typedef enum VkScopeKHR {
    VK_SCOPE_SUBGROUP_KHR = 3,
    VK_SCOPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkScopeKHR;
typedef struct VkCooperativeMatrixPropertiesKHR {
    VkStructureType sType;
    void *pNext;
    uint32_t MSize, NSize, KSize;
    VkComponentTypeKHR AType, BType, CType, ResultType;
    VkBool32 saturatingAccumulation;
    VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix;
    VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef VkResult(VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice, uint32_t *, VkCooperativeMatrixPropertiesKHR *);
#endif

/* VK_NV_cooperative_matrix2 (Vulkan headers 1.4.303), likewise. */
#ifndef VK_NV_cooperative_matrix2
#define VK_NV_cooperative_matrix2 1
#define VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME "VK_NV_cooperative_matrix2"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV \
    ((VkStructureType)1000593000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV \
    ((VkStructureType)1000593001)
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV \
    ((VkStructureType)1000593002)
typedef struct VkCooperativeMatrixFlexibleDimensionsPropertiesNV {
    VkStructureType sType;
    void *pNext;
    uint32_t MGranularity, NGranularity, KGranularity;
    VkComponentTypeKHR AType, BType, CType, ResultType;
    VkBool32 saturatingAccumulation;
    VkScopeKHR scope;
    uint32_t workgroupInvocations;
} VkCooperativeMatrixFlexibleDimensionsPropertiesNV;
typedef struct VkPhysicalDeviceCooperativeMatrix2FeaturesNV {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrixWorkgroupScope;
    VkBool32 cooperativeMatrixFlexibleDimensions;
    VkBool32 cooperativeMatrixReductions;
    VkBool32 cooperativeMatrixConversions;
    VkBool32 cooperativeMatrixPerElementOperations;
    VkBool32 cooperativeMatrixTensorAddressing;
    VkBool32 cooperativeMatrixBlockLoads;
} VkPhysicalDeviceCooperativeMatrix2FeaturesNV;
typedef struct VkPhysicalDeviceCooperativeMatrix2PropertiesNV {
    VkStructureType sType;
    void *pNext;
    uint32_t cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
    uint32_t cooperativeMatrixFlexibleDimensionsMaxDimension;
    uint32_t cooperativeMatrixWorkgroupScopeReservedSharedMemory;
} VkPhysicalDeviceCooperativeMatrix2PropertiesNV;
typedef VkResult(VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV)(
    VkPhysicalDevice, uint32_t *, VkCooperativeMatrixFlexibleDimensionsPropertiesNV *);
#endif

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
    /* An R32_UINT view of a Q8 KV cache's tensors (vk_buffer_view_words,
     * with view4): its rows, read a word at a time by
     * shaders/flash_cpu.comp's KV_Q8 variant; else null. */
    VkBufferView view1u;
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
    /* U8: a Q8 KV cache's rows (vkmha_kv_cache_desc.quant; vk_kv_view),
     * which keep their dtype in the dispatch's word (vk_view_dtypes). */
    bool q8_rows;
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
    SLOT_MASK_HEADS, /* per-head rules: ALiBi slopes, sinks (vk_head_rules) */
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
    SLOT_MM_QB,   /* a window of a quantized B's rows as a matrix of its own (the same) */
    SLOT_ROPE,    /* RoPE's (cos, sin) table of a layer's forward (src/vk_mha.c) */
    SLOT_COUNT
} vk_slot;

/* ---- kernels and pipelines (src/vk_kernels.c, vk_tuning.c, vk_pipeline.c) -- */

/* The most threads that create pipelines at once (vk_pipelines_build). */
#define VK_BUILD_THREADS_MAX 16

/* The most rows of A that take the matmul's TILE_GEMV (a decode step's batch). */
#define VK_GEMV_ROWS 4u
/* A with at most this many rows and op T takes the GPUs' GEMV
 * (shaders/matmul_gemv.comp's RM). */
#define VK_GPU_GEMV_ROWS 8u

/* The longest row a CPU-shaped row kernel walks in one invocation: llvmpipe
 * ends any loop after 65535 iterations, and longer rows have work enough for
 * the workgroup-per-row kernels. */
#define VK_CPU_ROW_MAX 16384u

/* Invocations of a workgroup of shaders/kv_q8.comp (a row each; its rows
 * are at most VK_CPU_ROW_MAX elements: src/vk_kv_cache.c). */
#define VK_KV_Q8_WG 64u
/* Invocations of a workgroup of the layer's small passes: shaders/rope.comp
 * (a pair each) and vscan.comp (a value row each). */
#define VK_PASS_WG 64u

/* The most VK_NV_cooperative_matrix2 workgroup shapes kept (vk_state). */
#define VK_CM2_SHAPES 8

/* Fused attention pipelines by largest head dim: 32, 64, 128, 256 and 576
 * (DeepSeek's MLA: d_k 576, d_v 512); a head dim below a class's largest is
 * padded to it in registers and shared memory, not in memory. */
#define VK_FLASH_CLASSES 5
#define VK_FLASH_DIM_MAX 576u

/* The largest head dim of class cls. */
static inline uint32_t vk_flash_dim(uint32_t cls)
{
    return cls + 1 < VK_FLASH_CLASSES ? 32u << cls : VK_FLASH_DIM_MAX;
}

/* The class of an attention of head dims d_k, d_v: the first whose largest
 * head dim holds both; VK_FLASH_CLASSES when none does (unfused only). */
static inline uint32_t vk_flash_class(uint32_t d_k, uint32_t d_v)
{
    const uint32_t dim = d_k > d_v ? d_k : d_v;
    uint32_t cls = 0;
    while (cls < VK_FLASH_CLASSES && vk_flash_dim(cls) < dim)
        cls++;
    return cls;
}

/* The vkmha_path bit of a fused kernel's class cls, from its class-0 bit
 * (VKMHA_PATH_FUSED_D32, _FUSED_CPU_D32 or _COOPMAT_FUSED_D32): the bits of
 * classes 0-3 are consecutive, class 4's came later. */
static inline uint32_t vk_flash_path(uint32_t d32, uint32_t cls)
{
    if (cls + 1 < VK_FLASH_CLASSES)
        return d32 << cls;
    return d32 == VKMHA_PATH_FUSED_D32       ? VKMHA_PATH_FUSED_D576
           : d32 == VKMHA_PATH_FUSED_CPU_D32 ? VKMHA_PATH_FUSED_CPU_D576
                                             : VKMHA_PATH_COOPMAT_FUSED_D576;
}

/* Keys per online-softmax step of shaders/flash_cpu.comp (its BK). */
#define VK_FLASH_CPU_BLOCK_K 4

/* The fused attention shader's blocking for one head-dim class, chosen from
 * the device's limits (src/vk_tuning.c; all zero: the class runs
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

/* Specialization constants of a pipeline, at most (the cooperative-matrix
 * matmul's). */
#define VK_MAX_SPEC 10
/* The dtypes of a dispatch's buffers: 4 bits per index in the buffers it
 * passes, for the first VK_DT_SLOTS, the specialization constant DTYPES of
 * shaders/typed.glsl (constant_id VK_SPEC_DTYPES). 0: all F32. The values:
 * a vkmha_dtype (F32 0, U8 1, F16 2, BF16 3), or an element type with no
 * public dtype yet (VK_DTYPE_I8, VK_DTYPE_U4), up to 15. */
#define VK_DT_BITS 4
#define VK_DT_SLOTS 8
#define VK_DT(index, dtype) ((uint32_t)(dtype) << (VK_DT_BITS * (index)))
#define VK_DT_OF(dtypes, index) (((dtypes) >> (VK_DT_BITS * (index))) & 15u)
#define VK_SPEC_DTYPES 16
_Static_assert(VK_DT_BITS * VK_DT_SLOTS <= 32, "the dtypes of the typed slots fit one word");
/* Element types the shaders read and store (shaders/typed.glsl's DT_I8,
 * DT_U4) that no public call takes yet: int8 (two's complement), and
 * unsigned 4-bit, two per byte, the low nibble first; each reads as its
 * integer value. tests/test_typed.c round-trips them. */
#define VK_DTYPE_I8 4u
#define VK_DTYPE_U4 5u
/* Bits of an element of dtype dt (a vkmha_dtype or VK_DTYPE_*; 0 unknown). */
static inline uint32_t vk_dtype_bits(uint32_t dt)
{
    return dt == VKMHA_DTYPE_F32                             ? 32
           : dt == VKMHA_DTYPE_F16 || dt == VKMHA_DTYPE_BF16 ? 16
           : dt == VKMHA_DTYPE_U8 || dt == VK_DTYPE_I8       ? 8
           : dt == VK_DTYPE_U4                               ? 4
                                                             : 0;
}
/* A pipeline's variant bits, the specialization constant VARIANT of
 * shaders/typed.glsl (constant_id VK_SPEC_VARIANT); 0: the plain shader.
 * MISALIGNED, set by vk_dispatch: a buffer starts past its descriptor's
 * aligned offset (a tensor wrapped at such an offset), so the pipeline
 * reads the misalign push words. ACCUMULATE and ADDEND: the matmul variants
 * for ranges of k past maxStorageBufferRange (vk_record_matmul;
 * shaders/matmul.comp): C += ..., or the bias binding is an fp32 [m][n]
 * addend. EXACT_F16, set by vk_dispatch where the context asks
 * (vk_state.exact_f16_texels): the CPU kernels' packed fp16 texels are
 * widened with integer operations, not unpackHalf2x16 (a driver whose
 * compiler aborts on it). QUANT_N, set by vk_record_matmul: a quantized B
 * with op N on the cooperative matmul, whose staging of dequantized halves
 * (shaders/matmul_coop.comp) op T's pipelines then leave out (on RADV's
 * gfx1100, 120 VGPRs with it against 84). Specialized, so that the plain
 * shaders' code is untouched by them. */
#define VK_SPEC_VARIANT 17
#define VK_VARIANT_MISALIGNED 1u
#define VK_VARIANT_ACCUMULATE 2u
#define VK_VARIANT_ADDEND 4u
#define VK_VARIANT_EXACT_F16 8u
#define VK_VARIANT_QUANT_N 16u

/* Bindings of a site, at most: KIND_FLASH has 11 (q, k, v, 3 masks, out,
 * statistics, key lengths, per-head rules, a layer's RoPE table),
 * KIND_FLASH_CPU the first 10 (q, k, v as vec4 texel buffers).
 * KIND_MATMUL has 4 (A, B, bias, C), or 6 with matmul_texel: A and B as vec4
 * texel buffers, bias, C, then A and B again as storage buffers (for shapes
 * whose strides rule out vec4 reads). With matmul_texel the softmax (9),
 * heads (3), LayerNorm (8) and the split-K combine (6) add texel views of
 * their inputs. */
#define VK_MAX_BINDINGS 11
/* vk_dispatch's misalign words hold a byte for each of the first
 * VK_MISALIGN_SLOTS buffers; later ones (a shader's key lengths) must start
 * on a descriptor boundary. */
#define VK_MISALIGN_SLOTS 8

/* The kernel table and the pipelines' keys; the push blocks' C mirrors. */
#include "vk_kernels.h"
#include "vk_push.h"

/* Not a vkmha_mask_kind: shaders/mask.glsl's MASK_LENGTHS (the dispatch
 * binds each batch entry's key length). */
#define VK_MASK_LENGTHS 0x4000u

/* The mask kinds that are data, whose hidden keys a kernel finds by
 * looking (shaders/mask.glsl's MASK_DATA). */
#define VK_MASK_DATA (VKMHA_MASK_KEY_PADDING | VKMHA_MASK_FULL | VKMHA_MASK_BIAS)

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
    ASITE_VSCAN,        /* the CPU-shaped kernel's flags of the values (shaders/vscan.comp) */
    ASITE_VSCAN_KEYS,   /* and of the keys */
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

/* Steps of a waited-for call timed one by one (VKMHA_CONTEXT_PROFILE); the
 * timestamp pool holds 3 more. */
#define VK_PROFILE_PASSES VKMHA_MAX_PROFILE_STEPS

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
    vk_pipe_key key;
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
    /* NULL where the loader has no VK_KHR_cooperative_matrix. */
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR
        GetPhysicalDeviceCooperativeMatrixPropertiesKHR;
    /* NULL where it has no VK_NV_cooperative_matrix2. */
    PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV
        GetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV;
} vk_instance_table;

/* Where a call's commands go. */
typedef enum vk_mode {
    MODE_SYNC,   /* the context's command buffer, submitted and waited for */
    MODE_RECORD, /* the application's command buffer, not submitted */
    MODE_SUBMIT, /* a submission's command buffer, submitted, not waited for */
} vk_mode;

/* The backend state of a context. */
#include "vk_state.h"

/* The public function being called, for messages ("vkmha" outside one). */
static inline const char *vk_call_name(const vk_state *vk)
{
    return vk->ctx->call ? vk->ctx->call : "vkmha";
}

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

/* ---- src/vk_result.c ----------------------------------------------------- */
/* Maps a failed VkResult to a status, with a message naming `what`. */
vkmha_status vk_fail(vk_state *vk, VkResult r, const char *what);
const char *vk_result_string(VkResult r);

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
/* The dtypes word (VK_DT) of views bufs[0 .. n) (the first VK_DT_SLOTS; U8
 * masks count as 0, a Q8 cache's U8 rows as U8: shaders/kv_q8.glsl). */
uint32_t vk_view_dtypes(const vk_view bufs[], uint32_t n);
/* The texel view of v for reading its data as vec4s in a shader's float
 * variant (fp32: view4, fp16: view4h) or its TEXEL_U16 variant (16-bit
 * data: view4u); null where there is none (bf16 in the float variant, fp32
 * in the u16 one, wrapped tensors, views past a buffer's start, buffers
 * under 16 bytes, no texel16); a Q8 cache's rows: view1u in either. */
VkBufferView vk_texel_view(const vk_view *v, bool u16);
/* Whether views v[0..n) can all be read as texels by one variant of a
 * shader (u16_variant: it has a TEXEL_U16 one): each has the texel view that
 * variant reads. */
bool vk_texel_ok(const vk_view *const v[], uint32_t n, bool u16_variant);

/* ---- src/vk_tuning.c -------------------------------------------------------- */
/* Chooses the tiles (desc->tile: desc->matmul_tile, may be NULL), the fused
 * attention's blocks, workgroup sizes, the CPU-shaped kernels, subgroup
 * arithmetic and 16-bit storage from the device's limits and features and
 * the context's desc. */
typedef struct vk_tuning_desc {
    const vkmha_tile_config *tile;   /* desc->matmul_tile, or NULL */
    bool no_subgroup_ops;            /* VKMHA_CONTEXT_NO_SUBGROUP_OPS (or the profile's) */
    vkmha_fused_kernel fused_kernel; /* desc->debug->fused_kernel (checked) */
} vk_tuning_desc;
vkmha_status vk_tuning_init(vk_state *vk, const vk_tuning_desc *desc);
/* Takes the fallback of vkmha_path bit `path` (the self-check, or
 * VKMHA_DISABLE_PATHS): the kernel table's pipelines of that path become
 * unavailable (vk_pipe_available), a feature path (subgroup arithmetic,
 * 16-bit storage, sparse binding) is turned off. */
void vk_tuning_disable(vk_state *vk, uint32_t path);
/* The self-check's canaries: forces the fused kernel (AUTO: the cost
 * model's choice again); returns the one before. */
vkmha_fused_kernel vk_tuning_force_kernel(vk_state *vk, vkmha_fused_kernel kernel);


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
    bool coop;       /* fused, not cpu_kernel: flash.comp's cooperative-matrix variant */
    bool weights;    /* the caller wants the weights (in SLOT_SCORES) */
    uint32_t cls;    /* fused: head-dim class, index into vk->tuning.flash */
    uint32_t q_blocks, splits, split_len;
    uint32_t chunk, chunks; /* keys per dispatch and dispatches, per range */
    /* fused, k or v past maxStorageBufferRange: they are bound in windows of
     * `window` keys (a multiple of chunk, or one chunk) of one batch entry
     * and key/value head at a time, one key range (splits 1); 0: whole */
    uint32_t window;
    /* k and v each fit one binding from the plan's first entry (kv_b0) */
    bool kv_whole;
    /* unfused, k or v past maxStorageBufferRange: the matmuls one product
     * (batch entry, query head) at a time, each bound in windows */
    bool products;
    /* fused, CPU-shaped kernel, at most its tm queries: lanes over keys
     * (each range's partial state is lanes ranges: partial_splits) */
    bool lane_keys;
    /* lane_keys under a window that hides at least 3/4 of the keys: the
     * lanes skip the keys it hides (the values scanned; splits as for the
     * visible keys) */
    bool lane_skip;
    uint32_t partial_splits; /* ranges of partial state: splits (x lanes) */
    vk_view scores;   /* scores / weights: the caller's tensor or SLOT_SCORES */
    vk_view masks[3]; /* key padding, full, bias: the mask slots or tensors */
    /* A KV cache's (absent otherwise): each batch entry's key length
     * (uint32 [batch], at a descriptor boundary), and the cache entry of
     * batch entry 0: k and v are views of the whole cache. */
    vk_view lengths;
    uint32_t kv_b0;
    /* k and v are a Q8 KV cache's rows (U8 views; the fused kernels
     * dequantize them while loading) and the path is unfused: the plan is
     * only this flag; the caller copies the call's rows to fp32 split heads
     * (shaders/kv_q8.comp) and plans again on them (src/vk_mha.c). */
    bool dequant;
    /* fused, a decode step of grouped-query attention whose mask does not
     * tell a group's query heads apart: the group's fold queries are the
     * rows of one head (s is the folded shape: heads = kv_heads, len_q =
     * fold; vk_fold_view), so that each key and value row is read once per
     * group; 0 otherwise */
    uint32_t fold;
    /* fused on flash.comp, a layer's RoPE (src/vk_mha.c sets it after
     * planning): flash_push.rope, the queries rotated as the kernel loads
     * them with SLOT_ROPE's table (no pass over them); 0 otherwise */
    uint32_t rope;
} vk_attn_plan;

/* The view of [batch][heads][1][d] as [batch][heads / g][g][d]: the same
 * elements, g heads' rows a head. */
static inline vk_view vk_fold_view(const vk_view *v, uint32_t g)
{
    vk_view f = *v;
    f.stride[2] = v->stride[1];
    f.stride[1] = v->stride[1] * g;
    return f;
}
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

#endif
