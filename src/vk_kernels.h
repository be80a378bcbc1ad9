/* The kernel table (src/vk_kernels.c): a row per kernel, and the keys that
 * name its pipelines. Included by src/vk_internal.h. */
#ifndef VKMHA_VK_KERNELS_H
#define VKMHA_VK_KERNELS_H

/* The shader variants meson.build builds (its shader_variants list), as
 * SPV_<NAME>; generated from that list, as is their code table. */
#include "vk_spirv.h"

/* A kernel's descriptor interface: one descriptor-set layout and pipeline
 * layout each (vk_kind_bindings). The kernels of one op share one, so that
 * a descriptor site serves whichever of them a call picks. */
typedef enum vk_kind {
    KIND_MATMUL,
    KIND_SOFTMAX,
    KIND_HEADS,
    KIND_LAYERNORM,
    KIND_FLASH,
    KIND_FLASH_COMBINE,
    KIND_FLASH_CPU,
    KIND_COUNT
} vk_kind;

/* The kernels: a row each of vk_kernel_defs. Nothing depends on their
 * order but the order vkmha_context_get_kernels lists them in. */
typedef enum vk_kernel {
    KERNEL_MATMUL,        /* matmul.comp or matmul_cpu.comp by tile */
    KERNEL_SOFTMAX,       /* a workgroup per row */
    KERNEL_HEADS,
    KERNEL_LAYERNORM,
    KERNEL_FLASH,         /* the workgroup-shared fused attention, per class */
    KERNEL_FLASH_COMBINE, /* split-K's merge */
    KERNEL_FLASH_CPU,     /* the CPU-shaped fused attention, per class */
    /* CPU-shaped row kernels (vk_state.cpu_rows_wg): several rows per
     * workgroup, one per invocation, no barrier. */
    KERNEL_SOFTMAX_CPU,
    KERNEL_HEADS_CPU,
    KERNEL_LAYERNORM_CPU,
    /* The cooperative-matrix matmul of fp16 products (vk_state.tile_coop). */
    KERNEL_MATMUL_COOP,
    /* flash.comp's cooperative-matrix variant, per class (fp16 q, k, v). */
    KERNEL_FLASH_COOP,
    /* The GPUs' few-rows matmul, op T (vk_state.tile_gemv_gpu). */
    KERNEL_MATMUL_GEMV_GPU,
    /* The VK_NV_cooperative_matrix2 matmul of fp16 products
     * (vk_state.tile_cm2). */
    KERNEL_MATMUL_CM2,
    /* A Q8 KV cache's rows: the append's quantizing copy and the unfused
     * attention's fp32 copy (the heads kind, a row per invocation). */
    KERNEL_KV_Q8,
    /* The CPU-shaped fused attention over a Q8 KV cache's rows, per class
     * (flash_cpu.comp's KV_Q8 variant: k and v through R32_UINT texels). */
    KERNEL_FLASH_CPU_Q8,
    /* RoPE on the layer's query projections in place, and on the key
     * projections where no KV cache takes them (a cache's append rotates
     * them: KERNEL_HEADS_ROPE and its kin below); the heads kind: binding 0
     * the (cos, sin) table, 1 the projection. */
    KERNEL_ROPE,
    /* Which (entry, key/value head) holds a NaN, an Inf or a magnitude of
     * 2^64 or more among its values (or its keys): the CPU-shaped fused
     * kernel's skipping (the heads kind: binding 0 the values or keys, 1
     * the flags). */
    KERNEL_VSCAN,
    /* The CPU-shaped fused attention that passes over the steps key
     * padding, a full mask or a -inf bias leave idle, per class
     * (flash_cpu.comp's DATA_SKIP variant: lavapipe 22 runs a branch's
     * code under a mask even where no lane takes it, so the plain variant
     * does not carry the look). */
    KERNEL_FLASH_CPU_SKIP,
    /* The KV cache append's copies of KERNEL_HEADS, KERNEL_HEADS_CPU and
     * KERNEL_KV_Q8 that rotate the new keys as they write them (their
     * ROPE variants, shaders/rope.glsl; binding 2 the (cos, sin) table), so
     * that a forward through a cache runs no RoPE pass over its keys. */
    KERNEL_HEADS_ROPE,
    KERNEL_HEADS_CPU_ROPE,
    KERNEL_KV_Q8_ROPE,
    KERNEL_COUNT
} vk_kernel;

/* A matmul's tile (vk_state.tile_large, tile_small, tile_gemv). */
typedef enum vk_tile { TILE_LARGE, TILE_SMALL, TILE_GEMV, TILE_COUNT } vk_tile;

/* A pipeline's role: its kernel and where it lies on the row's axes (each
 * 0 on an axis the row does not have). With a dispatch's dtypes word it
 * is the key a pipeline is created and found by (vk_pipe_key). */
typedef struct vk_pipe {
    uint8_t kernel; /* vk_kernel */
    uint8_t tile;   /* vk_tile */
    uint8_t vec;    /* 1: vec4 loads */
    uint8_t cls;    /* head-dim class: head dims up to 32 << cls */
} vk_pipe;

/* The pipeline of a kernel with one variant. */
#define VK_PIPE(k) ((vk_pipe){.kernel = (k)})

/* A pipeline by role and specialization (vk_state.want). */
typedef struct vk_pipe_key {
    vk_pipe pipe;
    uint32_t dtypes;  /* VK_DT per dispatch buffer (shaders' DTYPES) */
    uint32_t variant; /* VK_VARIANT_* (shaders' VARIANT) */
} vk_pipe_key;

/* What a pipeline is built from: a shader variant and its specialization
 * constants by constant_id (value[0] is always the workgroup size), with
 * the shared memory the shader declares with them. */
typedef struct vk_spec {
    vk_spv spv;
    uint32_t n;
    uint32_t value[VK_MAX_SPEC];
    uint64_t shared_bytes;
    /* Created with VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT
     * (the cooperative-matrix kernels). */
    bool full_subgroups;
} vk_spec;

/* A kernel: everything vkmha knows of it in one row. */
typedef struct vk_kernel_def {
    const char *name; /* its pipelines' names: name[_tile][_vec][_dN] */
    const char *op;   /* the public op it serves (vkmha_kernel_info.op) */
    vk_kind kind;     /* its bindings (descriptor interface) */
    /* Its axes: pipelines per tile, vec and head-dim class (1: no axis). */
    uint8_t tiles, vecs, classes;
    uint32_t bufs;      /* views a dispatch passes (checked by vk_dispatch) */
    uint32_t push_size; /* bytes of its push block (src/vk_push.h; checked) */
    /* The dispatch buffers (a bit per index) that must all be 16-bit for
     * its TEXEL_U16 shader variant; 0: it has none (vk_texel_u16). */
    uint32_t u16_sources;
    /* The vkmha_path bit that disables it (src/vk_selfcheck.c's canary
     * judges it): class 0's for a row with classes, class c's is path << c;
     * for a row with tiles only tile path_tile's pipelines. 0: none. */
    uint32_t path;
    uint8_t path_tile;
    /* Whether this device runs the pipeline (false: it is never created
     * and its callers take another kernel). NULL: always. */
    bool (*available)(const vk_state *vk, vk_pipe pipe);
    /* Its shader variant and constants on this context; u16: the
     * TEXEL_U16 variant (vk_texel_u16). */
    void (*spec)(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *out);
} vk_kernel_def;

extern const vk_kernel_def vk_kernel_defs[KERNEL_COUNT];

/* The pipelines of every row, each row's axes in order (tile, vec, class):
 * vk_pipe_count of them, numbered by vk_pipe_index (UINT32_MAX: a pipe off
 * its row's axes), vk_pipe_at the inverse. */
uint32_t vk_pipe_count(void);
uint32_t vk_pipe_index(vk_pipe pipe);
vk_pipe vk_pipe_at(uint32_t index);
/* The pipeline's name: "matmul_large_vec", "flash_d64", ... */
void vk_pipe_name(vk_pipe pipe, char *out, size_t cap);
/* The vkmha_path bit that disables the pipeline, or 0. */
uint32_t vk_pipe_path(vk_pipe pipe);
/* Whether this context runs the pipeline: its row's predicate, and its
 * path not disabled. */
bool vk_pipe_available(const vk_state *vk, vk_pipe pipe);
/* The shader kind (descriptor and pipeline layout) a pipeline belongs to. */
vk_kind vk_pipe_kind(vk_pipe pipe);
/* The specialization of `pipe` with `dtypes` on this context. */
void vk_pipe_spec(const vk_state *vk, vk_pipe pipe, uint32_t dtypes, vk_spec *out);
/* Whether a dispatch of `pipe` with `dtypes` runs the TEXEL_U16 variant:
 * the pipe has one and every texel source of it is 16-bit. */
bool vk_texel_u16(const vk_state *vk, vk_pipe pipe, uint32_t dtypes);

/* Bindings of a kind's descriptor set, and the type of each. */
uint32_t vk_kind_bindings(const vk_state *vk, vk_kind kind);
VkDescriptorType vk_binding_type(const vk_state *vk, vk_kind kind, uint32_t binding);
/* The storage buffers among them (maxPerStageDescriptorStorageBuffers
 * bounds them; vk_tuning.unfit_kinds). */
uint32_t vk_kind_storage_buffers(const vk_state *vk, vk_kind kind);
/* The index, in the buffers a dispatch passes, of the buffer bound at
 * `binding` (texel views repeat a storage binding's buffer). */
uint32_t vk_binding_source(const vk_state *vk, vk_kind kind, uint32_t binding);
/* Bytes of shared memory shaders/matmul.comp declares for a BM x BK and a
 * BK x BN tile of floats. */
uint64_t vk_matmul_shared_bytes(uint64_t bm, uint64_t bn, uint64_t bk);
/* Bytes of shared memory shaders/matmul_coop.comp declares for tile t: the
 * fp16 tiles (rows padded by 8 halves) and its subgroups' staging, a
 * CM x CN matrix each of (bm / (tm CM)) x (bn / (tn CN)) subgroups:
 * (bm / tm) x (bn / tn) floats; for a quantized B with op N (quant_n,
 * VK_VARIANT_QUANT_N) also its lo halves, bk x (bn + 8), and a word (which
 * the other pipelines' compilers drop). */
uint64_t vk_matmul_coop_shared_bytes(const vkmha_tile_config *t, bool quant_n);
/* Bytes of shared memory shaders/flash.comp declares: the q block, the
 * padded K / V block (D4 + 1 vec4s a key), the NaN / Inf bits of skipped
 * values (4 * D4 uints), the scores, 3 row statistics and 3 uints (a
 * block's class, the max |q| and |k| of its skipping). */
uint64_t vk_flash_shared_bytes(uint64_t br, uint64_t bc, uint64_t d4);
/* The same for its cooperative-matrix variant: fp16 q, K / V and weight
 * blocks (rows padded by 8 halves), the fp32 scores or P V, the NaN / Inf
 * bits, 3 row statistics and the 3 uints. */
uint64_t vk_flash_coop_shared_bytes(uint64_t br, uint64_t bc, uint64_t d4);

/* Texel bindings of any kind, at most (descriptor pools' sizes). */
#define VK_MAX_TEXEL_BINDINGS 4

/* A shader variant's SPIR-V: packed (16-bit data in uints) and NATIVE16. */
typedef struct vk_spirv_code {
    const char *name; /* its name in meson.build */
    const uint32_t *code, *code16;
    size_t size, size16;
    const char *spec_names[VK_MAX_SPEC]; /* by constant_id */
} vk_spirv_code;
extern const vk_spirv_code vk_spirv[SPV_COUNT];

#endif
