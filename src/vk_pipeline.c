/* Shader modules, pipeline layouts, pipelines with their specialization
 * constants (tile and workgroup sizes chosen from the device's limits), and
 * descriptor-set pools. The SPIR-V is embedded at build time. */
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flash.spv.h"
#include "flash_n16.spv.h"
#include "flash_combine.spv.h"
#include "flash_combine_n16.spv.h"
#include "flash_cpu.spv.h"
#include "flash_cpu_n16.spv.h"
#include "flash_cpu_u16.spv.h"
#include "flash_cpu_u16_n16.spv.h"
#include "flash_combine_cpu.spv.h"
#include "flash_combine_cpu_n16.spv.h"
#include "heads.spv.h"
#include "heads_n16.spv.h"
#include "heads_cpu.spv.h"
#include "heads_cpu_n16.spv.h"
#include "heads_cpu_u16.spv.h"
#include "heads_cpu_u16_n16.spv.h"
#include "layernorm.spv.h"
#include "layernorm_n16.spv.h"
#include "layernorm_cpu.spv.h"
#include "layernorm_cpu_n16.spv.h"
#include "layernorm_sg.spv.h"
#include "layernorm_sg_n16.spv.h"
#include "matmul.spv.h"
#include "matmul_n16.spv.h"
#include "matmul_cpu.spv.h"
#include "matmul_cpu_n16.spv.h"
#include "matmul_cpu_u16.spv.h"
#include "matmul_cpu_u16_n16.spv.h"
#include "softmax.spv.h"
#include "softmax_n16.spv.h"
#include "softmax_cpu.spv.h"
#include "softmax_cpu_n16.spv.h"
#include "softmax_sg.spv.h"
#include "softmax_sg_n16.spv.h"

/* A shader variant, built twice (meson.build): code reads and writes 16-bit
 * data packed in uints, code16 as 16-bit elements (NATIVE16, which needs
 * storageBuffer16BitAccess). Both also take fp32 (shaders/typed.glsl). */
typedef struct spv_code {
    const char *name; /* the variant's name in meson.build */
    const uint32_t *code, *code16;
    size_t size, size16;
    const char *spec_names[VK_MAX_SPEC];
} spv_code;

/* The kinds of shader: one descriptor-set and pipeline layout each.
 * bindings: its storage buffers (see VK_MAX_BINDINGS). texel: with
 * matmul_texel, the vec4 texel views that follow them, as indices of the
 * buffers a dispatch passes (the CPU-shaped shaders read them as
 * samplerBuffers): heads x; softmax input, bias; LayerNorm y, residual,
 * gamma, beta; the split-K combine's partial outputs and statistics. The
 * matmul is laid out apart (vk_binding_source), and the CPU-shaped fused
 * shader's first three bindings are always texel buffers. */
#define MAX_TEXEL_BINDINGS 4
static const struct kind_def {
    const char *op; /* the public op it serves (vkmha_kernel_info.op) */
    uint32_t bindings, n_texel, texel[MAX_TEXEL_BINDINGS];
} kind_defs[KIND_COUNT] = {
    [KIND_MATMUL] = {"matmul", 4, 0, {0}},
    [KIND_SOFTMAX] = {"softmax", 6, 2, {4, 2}},
    [KIND_HEADS] = {"heads", 2, 1, {0}},
    [KIND_LAYERNORM] = {"layernorm", 4, 4, {3, 0, 1, 2}},
    [KIND_FLASH] = {"attention", 9, 0, {0}},
    [KIND_FLASH_COMBINE] = {"attention", 4, 2, {0, 1}},
    [KIND_FLASH_CPU] = {"attention", 9, 0, {0}},
};

/* The pipelines: each with its role's name (vkmha_kernel_info.name), its
 * kind, and for a shader with a TEXEL_U16 variant the dispatch buffers that
 * must all be 16-bit for it (a bit per index; 0: no such variant). Its
 * SPIR-V and specialization constants: pipe_spec. */
#define FLASH_ROWS(pipe, prefix, kind, u16)                                               \
    [pipe] = {prefix "_d32", kind, u16}, [pipe + 1] = {prefix "_d64", kind, u16},           \
    [pipe + 2] = {prefix "_d128", kind, u16}, [pipe + 3] = {prefix "_d256", kind, u16}
static const struct pipe_def {
    const char *name;
    vk_kind kind;
    uint32_t u16_sources;
} pipe_defs[PIPE_COUNT] = {
    [PIPE_MATMUL_LARGE] = {"matmul_large", KIND_MATMUL, 0x3},
    [PIPE_MATMUL_LARGE_VEC] = {"matmul_large_vec", KIND_MATMUL, 0x3},
    [PIPE_MATMUL_SMALL] = {"matmul_small", KIND_MATMUL, 0x3},
    [PIPE_MATMUL_SMALL_VEC] = {"matmul_small_vec", KIND_MATMUL, 0x3},
    [PIPE_MATMUL_GEMV] = {"matmul_gemv", KIND_MATMUL, 0x3},
    [PIPE_MATMUL_GEMV_VEC] = {"matmul_gemv_vec", KIND_MATMUL, 0x3},
    [PIPE_SOFTMAX] = {"softmax", KIND_SOFTMAX, 0},
    [PIPE_HEADS] = {"heads", KIND_HEADS, 0},
    [PIPE_LAYERNORM] = {"layernorm", KIND_LAYERNORM, 0},
    FLASH_ROWS(PIPE_FLASH, "flash", KIND_FLASH, 0),
    [PIPE_FLASH_COMBINE] = {"flash_combine", KIND_FLASH_COMBINE, 0},
    FLASH_ROWS(PIPE_FLASH_CPU, "flash_cpu", KIND_FLASH_CPU, 0x7),
    [PIPE_SOFTMAX_CPU] = {"softmax_cpu", KIND_SOFTMAX, 0},
    [PIPE_HEADS_CPU] = {"heads_cpu", KIND_HEADS, 0x1},
    [PIPE_LAYERNORM_CPU] = {"layernorm_cpu", KIND_LAYERNORM, 0},
};
#undef FLASH_ROWS
_Static_assert(PIPE_FLASH_COMBINE == PIPE_FLASH + VK_FLASH_CLASSES &&
                   PIPE_SOFTMAX_CPU == PIPE_FLASH_CPU + VK_FLASH_CLASSES &&
                   VK_FLASH_CLASSES == 4,
               "pipe_defs has a row per fused attention class");

uint32_t vk_kind_bindings(const vk_state *vk, vk_kind kind)
{
    const struct kind_def *k = &kind_defs[kind];
    if (!vk->matmul_texel)
        return k->bindings;
    return kind == KIND_MATMUL ? 6 : k->bindings + k->n_texel;
}

VkDescriptorType vk_binding_type(const vk_state *vk, vk_kind kind, uint32_t binding)
{
    bool texel = (kind == KIND_FLASH_CPU && binding < 3) ||
                 (vk->matmul_texel && (kind == KIND_MATMUL ? binding < 2
                                                           : binding >= kind_defs[kind].bindings));
    return texel ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
}

uint32_t vk_binding_source(const vk_state *vk, vk_kind kind, uint32_t binding)
{
    const struct kind_def *k = &kind_defs[kind];
    if (!vk->matmul_texel || binding < k->bindings)
        return binding;
    if (kind == KIND_MATMUL) /* texel A, B at 0, 1; storage A, B again at 4, 5 */
        return binding - 4;
    return k->texel[binding - k->bindings];
}


/* Candidate matmul tiles, best first; the first that fits the device's
 * workgroup and shared-memory limits wins. Fields: bm, bn, bk, tm, tn,
 * workgroup size (computed), variant.
 *
 * CPU devices (lavapipe) get the register variant (shaders/matmul_cpu.comp):
 * no shared memory, no barrier, A and B fetched as vec4 texels. Measured at
 * 1024^3, op T, on a 2-core lavapipe: the shared-memory variant with its best
 * CPU tile 2.3 GFLOP/s; the register variant with storage-buffer loads
 * 7.9 GFLOP/s (4x8 per invocation), with texel fetches 11.5-12.5 GFLOP/s
 * (4x8, 8 invocations); 2x8, 1x8, 6x8, 4x16 and 8x8 blocks were slower
 * (fewer FMAs per fetch, or spilled accumulators). GPUs keep the
 * shared-memory variant: coalesced loads, reuse through shared memory. */
#define REG VKMHA_MATMUL_VARIANT_REGISTER
#define SHM VKMHA_MATMUL_VARIANT_SHARED
static const vkmha_tile_config cpu_large_tiles[] = {
    {32, 8, 4, 4, 8, 0, REG}, {16, 8, 4, 2, 8, 0, REG}, {8, 8, 4, 1, 8, 0, REG},
    {1, 4, 4, 1, 4, 0, REG},
};
static const vkmha_tile_config cpu_small_tiles[] = {
    {16, 8, 4, 2, 8, 0, REG}, {8, 8, 4, 1, 8, 0, REG}, {1, 4, 4, 1, 4, 0, REG},
};
static const vkmha_tile_config large_tiles[] = {
    {64, 64, 16, 4, 4, 0, SHM}, {32, 32, 16, 4, 4, 0, SHM}, {16, 16, 8, 4, 4, 0, SHM},
    {8, 8, 8, 2, 2, 0, SHM},    {4, 4, 4, 1, 1, 0, SHM},
};
static const vkmha_tile_config small_tiles[] = {
    {32, 32, 16, 2, 2, 0, SHM}, {32, 32, 16, 4, 4, 0, SHM}, {16, 16, 8, 4, 4, 0, SHM},
    {8, 8, 8, 2, 2, 0, SHM},    {4, 4, 4, 1, 1, 0, SHM},
};
#undef REG
#undef SHM

/* Bytes of shared memory shaders/matmul.comp declares for a BM x BK and a
 * BK x BN tile of floats. */
static uint64_t matmul_shared_bytes(uint64_t bm, uint64_t bn, uint64_t bk)
{
    return (bm + bn) * bk * sizeof(float);
}

/* Bytes of shared memory shaders/flash.comp declares: the q block, the
 * padded K / V block (D4 + 1 vec4s a key), the NaN / Inf bits of skipped
 * values (4 * D4 uints), the scores and 3 row statistics. */
static uint64_t flash_shared_bytes(uint64_t br, uint64_t bc, uint64_t d4)
{
    return 16 * (br * d4 + bc * (d4 + 1) + d4) + 4 * (br * bc + 3 * br);
}

/* Completes `t` (its workgroup size) and checks it against the shaders'
 * constraints and the device's limits. NULL if it fits, else why not, with
 * *limits telling a device limit (UNSUPPORTED) from a malformed tile. */
static const char *tile_check(const vkmha_device_info *d, vkmha_tile_config *t, bool *limits)
{
    *limits = false;
    if (t->variant == VKMHA_MATMUL_VARIANT_REGISTER) {
        if (!t->tm || !t->tn || !t->bm || t->bm % t->tm)
            return "bm must be a nonzero multiple of tm, and tm, tn nonzero";
        if (t->bn != t->tn || t->bk != 4)
            return "the register variant needs bn == tn and bk == 4";
        if (t->tn % 4 || t->tm * t->tn > 64)
            return "the register variant needs tn a multiple of 4 and tm * tn <= 64";
        t->workgroup_size = t->bm / t->tm;
    } else if (t->variant == VKMHA_MATMUL_VARIANT_SHARED) {
        if (!t->tm || !t->tn || !t->bm || !t->bn || !t->bk || t->bm % t->tm ||
            t->bn % t->tn)
            return "bm, bn must be nonzero multiples of tm, tn, and bk nonzero";
        if (t->bk % 4 || t->tm * t->tn > 64)
            return "the shared variant needs bk a multiple of 4 and tm * tn <= 64";
        if ((uint64_t)(t->bm / t->tm) * (t->bn / t->tn) > 4096)
            return "the shared variant's workgroup (bm / tm) * (bn / tn) exceeds 4096";
        t->workgroup_size = (t->bm / t->tm) * (t->bn / t->tn);
        *limits = true;
        if (matmul_shared_bytes(t->bm, t->bn, t->bk) > d->max_shared_memory)
            return "its tiles need more shared memory than the device has";
    } else {
        return "variant is not a vkmha_matmul_variant";
    }
    *limits = true;
    if (t->workgroup_size > d->max_workgroup_invocations ||
        t->workgroup_size > d->max_workgroup_size[0])
        return "its workgroup is larger than the device allows";
    return NULL;
}

static bool pick_tile(const vkmha_device_info *d, const vkmha_tile_config *cands, size_t n,
                      vkmha_tile_config *out)
{
    for (size_t i = 0; i < n; i++) {
        vkmha_tile_config t = cands[i];
        bool limits;
        if (!tile_check(d, &t, &limits)) {
            *out = t;
            return true;
        }
    }
    return false;
}

/* Fused attention blocks (shaders/flash.comp), best first: the largest head
 * dim a row is for, query rows (BR) x keys per step (BC), and the scores
 * each invocation computes (SR rows x SC keys). For each head-dim class the
 * first row for it whose shared memory and workgroup fit wins. Larger blocks
 * reuse each loaded key and value for more queries; larger register blocks
 * need fewer shared-memory loads per multiply-add, which CPU devices (where
 * each load is a gather) reward most.
 * On GPUs occupancy comes first: up to d128 the GPU rows keep a workgroup's
 * shared memory under half of 64 KiB, so that two workgroups share a
 * compute unit (a GCN CU has 64 KiB, an RDNA WGP of two CUs 128 KiB), and
 * SR = 2 keeps the d256 accumulator (SR x D4 / (BC / SC) vec4s per
 * invocation) in registers. tools/vkmha-occupancy measures the result on
 * RADV (docs/PERFORMANCE.md; test 'occupancy' fails on a spill or on fewer
 * than two workgroups per CU at d64 and d128 on navi21 and vega20). */
typedef struct flash_block {
    uint32_t max_dim, br, bc, sr, sc;
} flash_block;
static const flash_block gpu_flash_blocks[] = {
    {32, 64, 32, 4, 4},  {64, 64, 16, 2, 2}, {256, 32, 16, 2, 2}, {256, 16, 16, 2, 2},
    {256, 16, 8, 2, 1},  {256, 8, 8, 1, 1},  {256, 4, 8, 1, 1},   {256, 2, 8, 1, 1},
    {256, 1, 8, 1, 1},
};
static const flash_block cpu_flash_blocks[] = {
    {256, 32, 32, 4, 4}, {256, 32, 16, 4, 2}, {256, 16, 16, 2, 2}, {256, 16, 8, 2, 1},
    {256, 8, 8, 1, 1},   {256, 4, 8, 1, 1},   {256, 2, 8, 1, 1},   {256, 1, 8, 1, 1},
};

static bool pick_flash(const vkmha_device_info *d, uint32_t max_dim, bool cpu,
                       vk_flash_config *out)
{
    const uint32_t d4 = max_dim / 4;
    const flash_block *blocks = cpu ? cpu_flash_blocks : gpu_flash_blocks;
    size_t n = cpu ? VKMHA_ARRAY_LEN(cpu_flash_blocks) : VKMHA_ARRAY_LEN(gpu_flash_blocks);
    for (size_t i = 0; i < n; i++) {
        uint32_t br = blocks[i].br, bc = blocks[i].bc, sr = blocks[i].sr, sc = blocks[i].sc;
        if (blocks[i].max_dim < max_dim)
            continue;
        uint32_t tx = bc / sc, wg = (br / sr) * tx;
        if (d4 % tx || flash_shared_bytes(br, bc, d4) > d->max_shared_memory ||
            wg > d->max_workgroup_invocations || wg > d->max_workgroup_size[0])
            continue;
        *out = (vk_flash_config){.max_head_dim = max_dim, .block_q = br, .block_k = bc,
                                 .tm = sr, .tn = sc, .workgroup_size = wg};
        return true;
    }
    return false;
}

/* shaders/flash_cpu.comp for CPU devices whose matmul reads texels (the
 * same texel views): 8 invocations (lavapipe's SIMD width at 256 bits) of TM
 * query rows, fewer rows for wider heads, whose q and output accumulator
 * stay in registers (2 x TM x max_dim floats per invocation). */
static vk_flash_config pick_flash_cpu(const vkmha_device_info *d, uint32_t max_dim)
{
    const uint32_t tm = max_dim <= 64 ? 2 : max_dim <= 128 ? 2 : 1;
    uint32_t wg = 8;
    while (wg > 1 && (wg > d->max_workgroup_invocations || wg > d->max_workgroup_size[0]))
        wg /= 2;
    return (vk_flash_config){.max_head_dim = max_dim, .block_q = wg * tm,
                             .block_k = VK_FLASH_CPU_BLOCK_K, .tm = tm, .tn = 1,
                             .workgroup_size = wg};
}

static uint32_t pick_workgroup(const vkmha_device_info *d, uint32_t want)
{
    uint32_t wg = want;
    while (wg > 1 && (wg > d->max_workgroup_invocations || wg > d->max_workgroup_size[0]))
        wg /= 2;
    return wg;
}

/* VKMHA_MATMUL_TILE="register:32,8,4,4,8" (variant:bm,bn,bk,tm,tn), for
 * experiments without recompiling. false if unset; a value that does not
 * parse gives a tile with variant AUTO and zero sizes, which fails the check
 * with a message. */
static bool env_tile(vkmha_tile_config *t)
{
    const char *e = getenv("VKMHA_MATMUL_TILE");
    char name[16] = "";
    unsigned bm = 0, bn = 0, bk = 0, tm = 0, tn = 0;
    if (!e || !*e)
        return false;
    if (sscanf(e, "%15[a-z]:%u,%u,%u,%u,%u", name, &bm, &bn, &bk, &tm, &tn) != 6)
        bm = 0;
    *t = (vkmha_tile_config){bm, bn, bk, tm, tn, 0,
                             !strcmp(name, "register") ? VKMHA_MATMUL_VARIANT_REGISTER
                             : !strcmp(name, "shared") ? VKMHA_MATMUL_VARIANT_SHARED
                                                       : (vkmha_matmul_variant)-1};
    return true;
}

vkmha_status vk_pipelines_init(vk_state *vk, const vkmha_tile_config *override)
{
    VkResult r;
    vkmha_status st;
    bool cpu = vk->info.type == VKMHA_DEVICE_TYPE_CPU;
    vkmha_tile_config et;
    const char *what = "desc->matmul_tile";
    bool have = override != NULL;
    if (override) {
        et = *override;
    } else if (env_tile(&et)) {
        have = true;
        what = "the environment variable VKMHA_MATMUL_TILE";
    }
    if (have) {
        if (et.variant == VKMHA_MATMUL_VARIANT_AUTO)
            et.variant = cpu ? VKMHA_MATMUL_VARIANT_REGISTER : VKMHA_MATMUL_VARIANT_SHARED;
        bool limits;
        const char *why = tile_check(&vk->info, &et, &limits);
        if (why)
            return vkmha__fail(vk->ctx,
                               limits ? VKMHA_ERROR_UNSUPPORTED : VKMHA_ERROR_INVALID_ARGUMENT,
                               "vkmha_context_create: %s (%s %u,%u,%u,%u,%u): %s", what,
                               et.variant == VKMHA_MATMUL_VARIANT_REGISTER ? "register"
                               : et.variant == VKMHA_MATMUL_VARIANT_SHARED ? "shared"
                                                                          : "?",
                               et.bm, et.bn, et.bk, et.tm, et.tn, why);
        vk->tile_large = vk->tile_small = et;
    } else if (!pick_tile(&vk->info, cpu ? cpu_large_tiles : large_tiles,
                   cpu ? VKMHA_ARRAY_LEN(cpu_large_tiles) : VKMHA_ARRAY_LEN(large_tiles),
                   &vk->tile_large) ||
        !pick_tile(&vk->info, cpu ? cpu_small_tiles : small_tiles,
                   cpu ? VKMHA_ARRAY_LEN(cpu_small_tiles) : VKMHA_ARRAY_LEN(small_tiles),
                   &vk->tile_small))
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_context_create: no matmul tile fits this device's limits");
    /* CPU devices, unless a tile was forced: lanes over columns for A of a
     * few rows. A workgroup of 8 lanes of 4 columns each, one row: measured
     * on lavapipe at 1 x 4096 x 4096 (a decode step's projection) against
     * the small tile's lanes over rows, which then all repeat row 0. */
    vk->tile_gemv = (vkmha_tile_config){0};
    if (cpu && !have &&
        vk->tile_small.variant == VKMHA_MATMUL_VARIANT_REGISTER &&
        vk->info.max_workgroup_invocations >= 8 && vk->info.max_workgroup_size[0] >= 8)
        vk->tile_gemv = (vkmha_tile_config){.bm = 1, .bn = 32, .bk = 4, .tm = 1, .tn = 4,
                                            .workgroup_size = 8,
                                            .variant = VKMHA_MATMUL_VARIANT_REGISTER};
    /* The register variant reads A and B as vec4 texel buffers where it can
     * (every device supports R32G32B32A32_SFLOAT uniform texel buffers):
     * buffers get their views when they fit maxTexelBufferElements texels
     * (vk_buffer_create), and operands without a view (wrapped tensors,
     * bf16, buffers past the limit: NVIDIA's 2^27 texels are 2 GiB of vec4s
     * against a 4 GiB maxStorageBufferRange) take the storage-buffer reads. */
    if (vk->tile_large.variant == VKMHA_MATMUL_VARIANT_REGISTER) {
        vk->matmul_texel = true;
        /* fp16 as vec4 texels (R16G16B16A16_SFLOAT, required of every
         * device for uniform texel buffers; checked anyway). */
        VkFormatProperties fh, fu;
        vk->vki.GetPhysicalDeviceFormatProperties(vk->phys, VK_FORMAT_R16G16B16A16_SFLOAT, &fh);
        vk->vki.GetPhysicalDeviceFormatProperties(vk->phys, VK_FORMAT_R32G32_UINT, &fu);
        vk->texel16 = (fh.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) &&
                      (fu.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT);
    }
    vk->reduce_wg = pick_workgroup(&vk->info, 128);
    vk->elementwise_wg = pick_workgroup(&vk->info, 256);
    /* CPU-shaped row kernels (shaders/softmax_cpu.comp, heads_cpu.comp,
     * layernorm_cpu.comp) on CPU devices, with texel reads: measured on a
     * 2-core lavapipe (docs/PERFORMANCE.md, "Small kernels"); 16 rows per
     * workgroup was as fast as 8, 32 or 64 within the noise. Their layouts
     * need the texel views, so they go with the register matmul. The
     * environment variable VKMHA_ROW_KERNELS, for tests and experiments:
     * "gpu" keeps the workgroup-per-row kernels, "storage" the CPU-shaped
     * ones with storage-buffer reads only (as with wrapped tensors). */
    const char *rk = getenv("VKMHA_ROW_KERNELS");
    bool rows_cpu = cpu && vk->matmul_texel && !(rk && !strcmp(rk, "gpu"));
    vk->cpu_rows_wg = rows_cpu ? pick_workgroup(&vk->info, 16) : 0;
    vk->row_texel = rows_cpu && !(rk && !strcmp(rk, "storage"));
    for (uint32_t c = 0; c < VK_FLASH_CLASSES; c++) {
        if (!pick_flash(&vk->info, 32u << c, cpu && !vk->flash_gpu_blocks, &vk->flash[c]))
            vk->flash[c] = (vk_flash_config){0}; /* that class runs unfused */
        vk->flash_cpu[c] = cpu && vk->matmul_texel ? pick_flash_cpu(&vk->info, 32u << c)
                                                   : (vk_flash_config){0};
    }
    if (vk->fused_kernel == VKMHA_FUSED_KERNEL_REGISTER && !vk->flash_cpu[0].workgroup_size)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_context_create: desc->debug->fused_kernel: the CPU-shaped "
                           "fused kernel runs on CPU devices only");
    /* Split-K below this many workgroups; Vulkan does not report the number
     * of cores, so this is per device type: enough for large GPUs, and a few
     * per thread for CPU devices. */
    vk->flash_fill_groups = cpu ? 32 : 256;
    if ((uint64_t)vk->reduce_wg * sizeof(float) > vk->info.max_shared_memory)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_context_create: too little shared memory");

    for (int k = 0; k < KIND_COUNT; k++) {
        VkDescriptorSetLayoutBinding b[VK_MAX_BINDINGS];
        const uint32_t nb = vk_kind_bindings(vk, (vk_kind)k);
        for (uint32_t i = 0; i < nb; i++)
            b[i] = (VkDescriptorSetLayoutBinding){i, vk_binding_type(vk, (vk_kind)k, i), 1,
                                                  VK_SHADER_STAGE_COMPUTE_BIT, NULL};
        VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
        li.flags = vk->push_descriptors ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0;
        li.bindingCount = nb;
        li.pBindings = b;
        if ((r = vk->vkd.vkCreateDescriptorSetLayout(vk->device, &li, vk->vkalloc,
                                                     &vk->set_layouts[k])) != VK_SUCCESS)
            return vk_fail(vk, r, "vkCreateDescriptorSetLayout");
        VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_BYTES};
        VkPipelineLayoutCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
        pi.setLayoutCount = 1;
        pi.pSetLayouts = &vk->set_layouts[k];
        pi.pushConstantRangeCount = 1;
        pi.pPushConstantRanges = &range;
        if ((r = vk->vkd.vkCreatePipelineLayout(vk->device, &pi, vk->vkalloc, &vk->pipe_layouts[k])) !=
            VK_SUCCESS)
            return vk_fail(vk, r, "vkCreatePipelineLayout");
    }
    static const vk_kind op_kinds[OPSITE_COUNT] = {
        [OPSITE_MATMUL] = KIND_MATMUL, [OPSITE_SOFTMAX] = KIND_SOFTMAX,
        [OPSITE_HEADS] = KIND_HEADS,   [OPSITE_ATTENTION] = VK_ATTENTION_SITE_KINDS,
        [OPSITE_LAYERNORM] = KIND_LAYERNORM};
    if ((st = vk_site_pool_create(vk, op_kinds, OPSITE_COUNT, &vk->op_sites)))
        return st;
    return VKMHA_SUCCESS;
}

void vk_pipelines_forget(vk_state *vk)
{
    for (int i = 0; i < PIPE_COUNT; i++)
        if (vk->pipes[i]) {
            vk->vkd.vkDestroyPipeline(vk->device, vk->pipes[i], vk->vkalloc);
            vk->pipes[i] = VK_NULL_HANDLE;
        }
    for (uint32_t i = 0; i < vk->n_typed_pipes; i++)
        if (vk->typed_pipes[i].pipeline)
            vk->vkd.vkDestroyPipeline(vk->device, vk->typed_pipes[i].pipeline, vk->vkalloc);
    vk->n_typed_pipes = 0;
}

vkmha_status vk_window_sites_reserve(vk_state *vk, vk_kind kind, uint64_t n)
{
    vk_site_pool *pool = &vk->window_sites[kind];
    const uint64_t extra = vk->window_reserved[kind] += n;
    if (extra <= pool->count)
        return VKMHA_SUCCESS;
    if (extra > 4096)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: %llu windows of maxStorageBufferRange in one call (at most 4097)",
                           vk->ctx->call, (unsigned long long)extra + 1);
    vk_kind *kinds = vkmha__alloc(vk->ctx, (size_t)extra * sizeof *kinds);
    if (!kinds)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk->ctx->call);
    for (uint64_t i = 0; i < extra; i++)
        kinds[i] = kind;
    vk_site_pool grown;
    vkmha_status st = vk_site_pool_create(vk, kinds, (uint32_t)extra, &grown);
    vkmha__free(vk->ctx, kinds);
    /* No plan refers to the old sets (outside plans); a pending submission
     * may, without push descriptors (as vk_exec_begin waits for). */
    if (!st && !vk->push_descriptors && pool->count && (st = vk_wait_submissions(vk)))
        vk_site_pool_destroy(vk, &grown);
    if (st)
        return st;
    vk_site_pool_destroy(vk, pool);
    *pool = grown;
    return VKMHA_SUCCESS;
}

vk_site *vk_window_sites_take(vk_state *vk, vk_kind kind, uint64_t n)
{
    /* n >= 1: the caller has sites after a first one to take. */
    const uint64_t first = vk->window_next[kind];
    if (first + n > vk->window_sites[kind].count) {
        vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                    "%s: internal error: %llu window sites wanted from %llu, %u ensured",
                    vk->ctx->call, (unsigned long long)n, (unsigned long long)first,
                    vk->window_sites[kind].count);
        return NULL;
    }
    vk->window_next[kind] += (uint32_t)n;
    return vk->window_sites[kind].sites + first;
}

void vk_pipelines_destroy(vk_state *vk)
{
    vk_site_pool_destroy(vk, &vk->op_sites);
    for (int k = 0; k < KIND_COUNT; k++)
        vk_site_pool_destroy(vk, &vk->window_sites[k]);
    for (int i = 0; i < PIPE_COUNT; i++)
        if (vk->pipes[i])
            vk->vkd.vkDestroyPipeline(vk->device, vk->pipes[i], vk->vkalloc);
    for (uint32_t i = 0; i < vk->n_typed_pipes; i++)
        if (vk->typed_pipes[i].pipeline)
            vk->vkd.vkDestroyPipeline(vk->device, vk->typed_pipes[i].pipeline, vk->vkalloc);
    vkmha__free(vk->ctx, vk->typed_pipes);
    vk->typed_pipes = NULL;
    vk->n_typed_pipes = vk->cap_typed_pipes = 0;
    vkmha__free(vk->ctx, vk->want);
    vk->want = NULL;
    vk->n_want = vk->cap_want = 0;
    for (int k = 0; k < KIND_COUNT; k++) {
        if (vk->pipe_layouts[k])
            vk->vkd.vkDestroyPipelineLayout(vk->device, vk->pipe_layouts[k], vk->vkalloc);
        if (vk->set_layouts[k])
            vk->vkd.vkDestroyDescriptorSetLayout(vk->device, vk->set_layouts[k], vk->vkalloc);
    }
}

vk_kind vk_pipe_kind(vk_pipe pipe)
{
    return pipe_defs[pipe].kind;
}

/* The SPIR-V of each shader variant (meson.build's shader_variants) with the
 * names of its specialization constants, in constant_id order. */
#define SPV(name, ...)                                                                      \
    {#name, vkmha_spv_##name, vkmha_spv_##name##_n16, sizeof(vkmha_spv_##name),              \
     sizeof(vkmha_spv_##name##_n16), {__VA_ARGS__}}
static const spv_code matmul = SPV(matmul, "WG", "BM", "BN", "BK", "TM", "TN", "VEC");
static const spv_code matmul_cpu[2] = {
    SPV(matmul_cpu, "WG", "TM", "TN", "VEC", "LANE_COLS"),
    SPV(matmul_cpu_u16, "WG", "TM", "TN", "VEC", "LANE_COLS")};
static const spv_code heads = SPV(heads, "WG");
static const spv_code flash = SPV(flash, "WG", "BR", "BC", "D4", "SR", "SC");
static const spv_code flash_combine[2] = {SPV(flash_combine, "WG", "EPI"),
                                          SPV(flash_combine_cpu, "WG", "EPI")};
static const spv_code flash_cpu[2] = {SPV(flash_cpu, "WG", "TM", "D4"),
                                      SPV(flash_cpu_u16, "WG", "TM", "D4")};
static const spv_code softmax_cpu = SPV(softmax_cpu, "WG");
static const spv_code heads_cpu[2] = {SPV(heads_cpu, "WG"), SPV(heads_cpu_u16, "WG")};
static const spv_code layernorm_cpu = SPV(layernorm_cpu, "WG");
static const spv_code softmax[2] = {SPV(softmax, "WG"), SPV(softmax_sg, "WG")};
static const spv_code layernorm[2] = {SPV(layernorm, "WG"), SPV(layernorm_sg, "WG")};
#undef SPV

/* Bytes of shared memory `code`, specialized with `spec`, declares. */
static uint64_t spv_shared_bytes(const spv_code *code, const uint32_t *spec)
{
    if (code == &matmul) /* WG BM BN BK ... */
        return matmul_shared_bytes(spec[1], spec[2], spec[3]);
    if (code == &flash) /* WG BR BC D4 ... */
        return flash_shared_bytes(spec[1], spec[2], spec[3]);
    for (int i = 0; i < 2; i++) /* shaders/reduce.glsl: WG floats */
        if (code == &softmax[i] || code == &layernorm[i])
            return (uint64_t)spec[0] * sizeof(float);
    return 0; /* the CPU-shaped kernels, heads and the combine share nothing */
}

bool vk_texel_u16(const vk_state *vk, vk_pipe pipe, uint32_t dtypes)
{
    const uint32_t sources = pipe_defs[pipe].u16_sources;
    if (!vk->matmul_texel || !vk->texel16 || !sources)
        return false;
    for (uint32_t i = 0; i < VK_MAX_BINDINGS; i++) {
        const uint32_t dt = VK_DT_OF(dtypes, i);
        if ((sources >> i & 1) && dt != VKMHA_DTYPE_F16 && dt != VKMHA_DTYPE_BF16)
            return false;
    }
    return true;
}

bool vk_texel_ok(const vk_view *const v[], uint32_t n, bool u16_variant)
{
    uint32_t n16 = 0, bf16 = 0;
    for (uint32_t i = 0; i < n; i++) {
        n16 += v[i]->dtype == VKMHA_DTYPE_F16 || v[i]->dtype == VKMHA_DTYPE_BF16;
        bf16 += v[i]->dtype == VKMHA_DTYPE_BF16;
    }
    /* A shader with the TEXEL_U16 variant reads all-fp32 or all-16-bit
     * sources; one without, fp32 and fp16 (R16G16B16A16_SFLOAT). */
    const bool u16 = u16_variant && n16 == n && n16 > 0;
    if (u16_variant ? n16 != 0 && n16 != n : bf16 != 0)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!vk_texel_view(v[i], u16))
            return false;
    return true;
}

/* The shader and specialization constants (spec[0] is always the workgroup
 * size) of `pipe` with `dtypes` on this context. */
static const spv_code *pipe_spec(const vk_state *vk, vk_pipe pipe, uint32_t dtypes,
                                 uint32_t spec[VK_MAX_SPEC], uint32_t *n_spec)
{
    const bool u16 = vk_texel_u16(vk, pipe, dtypes);
    *n_spec = 1;
    switch (pipe) {
    case PIPE_MATMUL_LARGE:
    case PIPE_MATMUL_LARGE_VEC:
    case PIPE_MATMUL_SMALL:
    case PIPE_MATMUL_SMALL_VEC:
    case PIPE_MATMUL_GEMV:
    case PIPE_MATMUL_GEMV_VEC: {
        bool large = pipe == PIPE_MATMUL_LARGE || pipe == PIPE_MATMUL_LARGE_VEC;
        bool gemv = pipe == PIPE_MATMUL_GEMV || pipe == PIPE_MATMUL_GEMV_VEC;
        bool vec = pipe == PIPE_MATMUL_LARGE_VEC || pipe == PIPE_MATMUL_SMALL_VEC ||
                   pipe == PIPE_MATMUL_GEMV_VEC;
        const vkmha_tile_config *t = gemv ? &vk->tile_gemv
                                     : large ? &vk->tile_large
                                             : &vk->tile_small;
        if (t->variant == VKMHA_MATMUL_VARIANT_REGISTER) {
            spec[0] = t->workgroup_size; /* 0 WG */
            spec[1] = t->tm;             /* 1 TM */
            spec[2] = t->tn;             /* 2 TN */
            spec[3] = vec;               /* 3 VEC */
            spec[4] = gemv;              /* 4 LANE_COLS */
            *n_spec = 5;
            return &matmul_cpu[u16];
        }
        spec[0] = t->workgroup_size; /* 0 WG */
        spec[1] = t->bm;             /* 1 BM */
        spec[2] = t->bn;             /* 2 BN */
        spec[3] = t->bk;             /* 3 BK */
        spec[4] = t->tm;             /* 4 TM */
        spec[5] = t->tn;             /* 5 TN */
        spec[6] = vec;               /* 6 VEC */
        *n_spec = 7;
        return &matmul;
    }
    case PIPE_SOFTMAX:
        spec[0] = vk->reduce_wg; /* 0 WG */
        return &softmax[vk->use_subgroup];
    case PIPE_SOFTMAX_CPU:
    case PIPE_HEADS_CPU:
    case PIPE_LAYERNORM_CPU: {
        static const spv_code *const row_kernels[] = {&softmax_cpu, &heads_cpu[0],
                                                      &layernorm_cpu};
        spec[0] = vk->cpu_rows_wg; /* 0 WG: rows per workgroup */
        return pipe == PIPE_HEADS_CPU ? &heads_cpu[u16] : row_kernels[pipe - PIPE_SOFTMAX_CPU];
    }
    case PIPE_LAYERNORM:
        spec[0] = vk->reduce_wg; /* 0 WG */
        return &layernorm[vk->use_subgroup];
    case PIPE_FLASH_COMBINE: {
        /* The grid has elementwise_wg output elements per workgroup
         * (src/vk_attention.c); CPU devices take 16 per invocation, with
         * texel reads (the variant with the texel bindings). */
        bool cpu_shape = vk->cpu_rows_wg && vk->elementwise_wg % 16 == 0;
        uint32_t epi = cpu_shape ? 16 : 1;
        spec[0] = vk->elementwise_wg / epi; /* 0 WG */
        spec[1] = epi;                      /* 1 EPI */
        *n_spec = 2;
        return &flash_combine[cpu_shape];
    }
    case PIPE_HEADS:
        spec[0] = vk->elementwise_wg; /* 0 WG */
        return &heads;
    default: /* PIPE_FLASH + class, or PIPE_FLASH_CPU + class */
        if (pipe >= PIPE_FLASH_CPU) {
            const vk_flash_config *f = &vk->flash_cpu[pipe - PIPE_FLASH_CPU];
            spec[0] = f->workgroup_size;   /* 0 WG */
            spec[1] = f->tm;               /* 1 TM */
            spec[2] = f->max_head_dim / 4; /* 2 D4 */
            *n_spec = 3;
            return &flash_cpu[u16];
        }
        const vk_flash_config *f = &vk->flash[pipe - PIPE_FLASH];
        spec[0] = f->workgroup_size;   /* 0 WG */
        spec[1] = f->block_q;          /* 1 BR */
        spec[2] = f->block_k;          /* 2 BC */
        spec[3] = f->max_head_dim / 4; /* 3 D4 */
        spec[4] = f->tm;               /* 4 SR */
        spec[5] = f->tn;               /* 5 SC */
        *n_spec = 6;
        return &flash;
    }
}

/* Where the pipeline of (pipe, dtypes) is kept, if anywhere: vk->pipes for
 * all-F32, else its entry of vk->typed_pipes (NULL: none yet). */
static VkPipeline *slot_of(const vk_state *vk, vk_pipe pipe, uint32_t dtypes)
{
    if (dtypes == 0)
        return (VkPipeline *)&vk->pipes[pipe];
    for (uint32_t i = 0; i < vk->n_typed_pipes; i++)
        if (vk->typed_pipes[i].pipe == pipe && vk->typed_pipes[i].dtypes == dtypes)
            return &vk->typed_pipes[i].pipeline;
    return NULL;
}

/* slot_of, adding a null entry of vk->typed_pipes when absent. NULL when out
 * of host memory. */
static VkPipeline *pipe_slot(vk_state *vk, vk_pipe pipe, uint32_t dtypes)
{
    VkPipeline *slot = slot_of(vk, pipe, dtypes);
    if (slot)
        return slot;
    if (vk->n_typed_pipes == vk->cap_typed_pipes) {
        uint32_t cap = vk->cap_typed_pipes ? 2 * vk->cap_typed_pipes : 16;
        void *p = vkmha__realloc(vk->ctx, vk->typed_pipes,
                                 vk->n_typed_pipes * sizeof *vk->typed_pipes,
                                 cap * sizeof *vk->typed_pipes);
        if (!p)
            return NULL;
        vk->typed_pipes = p;
        vk->cap_typed_pipes = cap;
    }
    struct vk_typed_pipe *t = &vk->typed_pipes[vk->n_typed_pipes++];
    *t = (struct vk_typed_pipe){.pipe = pipe, .dtypes = dtypes, .pipeline = VK_NULL_HANDLE};
    return &t->pipeline;
}

/* Creates the pipeline of (pipe, dtypes) into *out; touches nothing of vk
 * but the device, so that several threads may run it at once
 * (vk_pipelines_build). *what: the call that failed. */
static VkResult create_pipeline(const vk_state *vk, vk_pipe pipe, uint32_t dtypes,
                                VkPipeline *out, const char **what)
{
    uint32_t spec[VK_MAX_SPEC + 1];
    uint32_t n_spec;
    const spv_code *code = pipe_spec(vk, pipe, dtypes, spec, &n_spec);

    /* The shape constants by constant_id, then the dtypes (VK_SPEC_DTYPES). */
    VkSpecializationMapEntry entries[VK_MAX_SPEC + 1];
    for (uint32_t i = 0; i < n_spec; i++)
        entries[i] = (VkSpecializationMapEntry){i, i * 4, 4};
    entries[n_spec] = (VkSpecializationMapEntry){VK_SPEC_DTYPES, n_spec * 4, 4};
    spec[n_spec] = dtypes;
    VkSpecializationInfo si = {n_spec + 1, entries, (n_spec + 1) * 4, spec};

    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    mi.codeSize = vk->native16 ? code->size16 : code->size;
    mi.pCode = vk->native16 ? code->code16 : code->code;
    VkShaderModule module;
    *what = "vkCreateShaderModule";
    VkResult r = vk->vkd.vkCreateShaderModule(vk->device, &mi, vk->vkalloc, &module);
    if (r != VK_SUCCESS)
        return r;
    VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage = (VkPipelineShaderStageCreateInfo){.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = &si;
    /* A compile-only context reads each pipeline's register and memory use
     * back (vk_pipeline_statistics). */
    ci.flags = vk->compile_only ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0;
    ci.layout = vk->pipe_layouts[vk_pipe_kind(pipe)];
    *what = "vkCreateComputePipelines";
    r = vk->vkd.vkCreateComputePipelines(vk->device, vk->pipeline_cache, 1, &ci, vk->vkalloc,
                                         out);
    vk->vkd.vkDestroyShaderModule(vk->device, module, vk->vkalloc);
    if (r != VK_SUCCESS)
        *out = VK_NULL_HANDLE;
    return r;
}

vkmha_status vk_pipeline_get(vk_state *vk, vk_pipe pipe, uint32_t dtypes, VkPipeline *out)
{
    VkPipeline *slot = pipe_slot(vk, pipe, dtypes);
    if (!slot)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk->ctx->call);
    if (!*slot) {
        const char *what;
        const VkResult r = create_pipeline(vk, pipe, dtypes, slot, &what);
        if (r != VK_SUCCESS)
            return vk_fail(vk, r, what);
        vk->pipelines_created++;
    }
    *out = *slot;
    return VKMHA_SUCCESS;
}

VkPipeline vk_pipeline_find(const vk_state *vk, vk_pipe pipe, uint32_t dtypes)
{
    const VkPipeline *slot = slot_of(vk, pipe, dtypes);
    return slot ? *slot : VK_NULL_HANDLE;
}

vkmha_status vk_pipeline_want(vk_state *vk, vk_pipe pipe, uint32_t dtypes)
{
    for (uint32_t i = 0; i < vk->n_want; i++)
        if (vk->want[i].pipe == pipe && vk->want[i].dtypes == dtypes)
            return VKMHA_SUCCESS;
    if (vk->n_want == vk->cap_want) {
        const uint32_t cap = vk->cap_want ? 2 * vk->cap_want : 16;
        void *p = vkmha__realloc(vk->ctx, vk->want, vk->n_want * sizeof *vk->want,
                                 cap * sizeof *vk->want);
        if (!p)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               "%s: out of host memory", vk->ctx->call);
        vk->want = p;
        vk->cap_want = cap;
    }
    vk->want[vk->n_want++] = (vk_pipe_key){pipe, dtypes};
    return VKMHA_SUCCESS;
}

/* ---- creating pipelines on several threads -------------------------------- */

/* One thread's share of vk_pipelines_build: jobs first, first + step, ... */
typedef struct build_share {
    const vk_state *vk;
    const vk_pipe_key *keys;
    VkPipeline *const *slots;
    VkResult *results;
    const char **whats;
    uint32_t n, first, step;
} build_share;

static void build_jobs(const build_share *b)
{
    for (uint32_t i = b->first; i < b->n; i += b->step)
        b->results[i] =
            create_pipeline(b->vk, b->keys[i].pipe, b->keys[i].dtypes, b->slots[i], &b->whats[i]);
}

#if defined(_WIN32)
#include <windows.h>
typedef HANDLE build_thread;
static DWORD WINAPI build_main(LPVOID arg)
{
    build_jobs(arg);
    return 0;
}
static bool build_start(build_thread *t, build_share *b)
{
    *t = CreateThread(NULL, 0, build_main, b, 0, NULL);
    return *t != NULL;
}
static void build_join(build_thread t)
{
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
}
static uint32_t cpu_count(void)
{
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwNumberOfProcessors;
}
#else
#include <pthread.h>
#include <unistd.h>
typedef pthread_t build_thread;
static void *build_main(void *arg)
{
    build_jobs(arg);
    return NULL;
}
static bool build_start(build_thread *t, build_share *b)
{
    return pthread_create(t, NULL, build_main, b) == 0;
}
static void build_join(build_thread t)
{
    pthread_join(t, NULL);
}
static uint32_t cpu_count(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
}
#endif

/* Threads for creating n pipelines: one per CPU up to VK_BUILD_THREADS_MAX
 * (VKMHA_PIPELINE_THREADS lowers it; 1: the calling thread only); the
 * calling thread alone with VKMHA_CONTEXT_SINGLE_THREAD or when the
 * application passed VkAllocationCallbacks (vkmha calls them on the thread
 * of the vkmha call only). */
static uint32_t build_threads(const vk_state *vk, uint32_t n)
{
    if (vk->single_thread || vk->vkalloc || n < 2)
        return 1;
    uint32_t t = cpu_count();
    const char *env = getenv("VKMHA_PIPELINE_THREADS");
    if (env && *env) {
        const long e = strtol(env, NULL, 10);
        t = e >= 1 && (uint64_t)e < t ? (uint32_t)e : t;
    }
    t = t < VK_BUILD_THREADS_MAX ? t : VK_BUILD_THREADS_MAX;
    return t < n ? t : n;
}

vkmha_status vk_pipelines_build(vk_state *vk)
{
    const uint32_t n_want = vk->n_want;
    vk->n_want = 0;
    /* The slots first (adding typed ones may move the others), then the
     * missing ones' pointers. */
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_want; i++) {
        const VkPipeline *slot = pipe_slot(vk, vk->want[i].pipe, vk->want[i].dtypes);
        if (!slot)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               "%s: out of host memory", vk->ctx->call);
        if (!*slot)
            vk->want[n++] = vk->want[i];
    }
    if (!n)
        return VKMHA_SUCCESS;
    VkPipeline **slots = vkmha__alloc(vk->ctx, n * (sizeof *slots + sizeof(VkResult) +
                                                    sizeof(const char *)));
    if (!slots)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk->ctx->call);
    const char **whats = (const char **)(slots + n);
    VkResult *results = (VkResult *)(whats + n);
    for (uint32_t i = 0; i < n; i++)
        slots[i] = pipe_slot(vk, vk->want[i].pipe, vk->want[i].dtypes);
    const uint32_t threads = build_threads(vk, n);
    build_share shares[VK_BUILD_THREADS_MAX];
    build_thread ids[VK_BUILD_THREADS_MAX];
    bool started[VK_BUILD_THREADS_MAX] = {false};
    for (uint32_t t = 0; t < threads; t++)
        shares[t] = (build_share){vk, vk->want, slots, results, whats, n, t, threads};
    /* Shares 1.. on threads of their own, share 0 (and any share whose
     * thread did not start) here. */
    for (uint32_t t = 1; t < threads; t++)
        started[t] = build_start(&ids[t], &shares[t]);
    build_jobs(&shares[0]);
    for (uint32_t t = 1; t < threads; t++) {
        if (started[t])
            build_join(ids[t]);
        else
            build_jobs(&shares[t]);
    }
    vkmha_status st = VKMHA_SUCCESS;
    for (uint32_t i = 0; i < n; i++) {
        if (results[i] == VK_SUCCESS)
            vk->pipelines_created++;
        else if (!st)
            st = vk_fail(vk, results[i], whats[i]);
    }
    vkmha__free(vk->ctx, slots);
    return st;
}

/* false for a fused attention class that did not fit the device's limits
 * (that head-dim class runs unfused there), and for the CPU-shaped kernel
 * on other devices. */
static bool pipe_available(const vk_state *vk, vk_pipe pipe)
{
    if (pipe == PIPE_MATMUL_GEMV || pipe == PIPE_MATMUL_GEMV_VEC)
        return vk->tile_gemv.workgroup_size != 0;
    if (pipe >= PIPE_SOFTMAX_CPU)
        return vk->cpu_rows_wg != 0; /* CPU-shaped row kernels: CPU devices only */
    if (pipe >= PIPE_FLASH_CPU)
        return vk->flash_cpu[pipe - PIPE_FLASH_CPU].workgroup_size != 0;
    bool flash = pipe >= PIPE_FLASH && pipe < PIPE_FLASH + VK_FLASH_CLASSES;
    return !flash || vk->flash[pipe - PIPE_FLASH].workgroup_size;
}

vkmha_status vk_pipelines_create_all(vk_state *vk)
{
    vkmha_status st;
    for (int p = 0; p < PIPE_COUNT; p++)
        if (pipe_available(vk, (vk_pipe)p) && (st = vk_pipeline_want(vk, (vk_pipe)p, 0)))
            return st;
    return vk_pipelines_build(vk);
}

void vk_pipe_info_get(const vk_state *vk, vk_pipe pipe, vk_pipe_info *out)
{
    memset(out, 0, sizeof *out);
    out->name = pipe_defs[pipe].name;
    out->op = kind_defs[pipe_defs[pipe].kind].op;
    out->available = pipe_available(vk, pipe);
    if (!out->available)
        return;
    const spv_code *code = pipe_spec(vk, pipe, 0, out->spec, &out->n_spec);
    out->shader = code->name;
    for (uint32_t i = 0; i < out->n_spec; i++)
        out->spec_names[i] = code->spec_names[i];
    out->workgroup_size = out->spec[0];
    /* Within the device's maxComputeSharedMemorySize, which is 32 bits. */
    out->shared_bytes = (uint32_t)spv_shared_bytes(code, out->spec);
}

_Static_assert(VK_MAX_SPEC <= VKMHA_KERNEL_MAX_PARAMS,
               "vkmha_kernel_info.params holds every specialization constant");

/* Copies a string into a fixed-size field, NUL-terminated (NULL: ""). */
static void copy_name(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

void vk_kernels(const vkmha_context *ctx, uint32_t *count, vkmha_kernel_info *out)
{
    const uint32_t n = PIPE_COUNT;
    for (uint32_t i = 0; i < n && i < *count; i++) {
        vk_pipe_info pi;
        vk_pipe_info_get(ctx->vk, (vk_pipe)i, &pi);
        vkmha_kernel_info *k = &out[i];
        memset(k, 0, sizeof *k);
        copy_name(k->name, sizeof k->name, pi.name);
        copy_name(k->op, sizeof k->op, pi.op);
        k->available = pi.available;
        copy_name(k->shader, sizeof k->shader, pi.shader);
        k->workgroup_size = pi.workgroup_size;
        k->shared_bytes = pi.shared_bytes;
        k->param_count = pi.n_spec;
        for (uint32_t j = 0; j < pi.n_spec; j++) {
            copy_name(k->params[j].name, sizeof k->params[j].name, pi.spec_names[j]);
            k->params[j].value = pi.spec[j];
        }
    }
    *count = n;
}

vkmha_status vk_pipeline_statistics(vk_state *vk, vk_pipe pipe, uint32_t dtypes,
                                    uint32_t *subgroup_size,
                                    VkPipelineExecutableStatisticKHR *out, uint32_t *count)
{
    VkPipeline p;
    vkmha_status st;
    if (!vk->compile_only || !vk->vkd.vkGetPipelineExecutablePropertiesKHR ||
        !vk->vkd.vkGetPipelineExecutableStatisticsKHR)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "pipeline statistics need a compile-only context");
    if (!pipe_available(vk, pipe))
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "pipeline %d is not used on this device", (int)pipe);
    if ((st = vk_pipeline_get(vk, pipe, dtypes, &p)))
        return st;
    /* A compute pipeline has one executable: its compute shader. */
    VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
    pi.pipeline = p;
    VkPipelineExecutablePropertiesKHR props = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
    uint32_t n = 1;
    VkResult r = vk->vkd.vkGetPipelineExecutablePropertiesKHR(vk->device, &pi, &n, &props);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0)
        return vk_fail(vk, r == VK_SUCCESS ? VK_ERROR_UNKNOWN : r,
                       "vkGetPipelineExecutablePropertiesKHR");
    *subgroup_size = props.subgroupSize;
    VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = p;
    ei.executableIndex = 0;
    for (uint32_t i = 0; i < *count; i++)
        out[i] = (VkPipelineExecutableStatisticKHR){
            .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
    r = vk->vkd.vkGetPipelineExecutableStatisticsKHR(vk->device, &ei, count, out);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return vk_fail(vk, r, "vkGetPipelineExecutableStatisticsKHR");
    return VKMHA_SUCCESS;
}

/* Sets per pool of recorded dispatches' descriptor sets. */
#define RECORDED_SETS_PER_POOL 64

/* A descriptor pool for `count` sets of any kind. */
static VkResult create_set_pool(vk_state *vk, uint32_t count, VkDescriptorPool *out)
{
    VkDescriptorPoolSize sizes[2] = {
        {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, count * VK_MAX_BINDINGS},
        {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, count * MAX_TEXEL_BINDINGS}};
    VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pi.maxSets = count;
    pi.poolSizeCount = 2; /* texel buffers: the register matmul and flash_cpu.comp */
    pi.pPoolSizes = sizes;
    return vk->vkd.vkCreateDescriptorPool(vk->device, &pi, vk->vkalloc, out);
}

vkmha_status vk_recorded_site(vk_state *vk, vk_kind kind, vk_site *out)
{
    memset(out, 0xff, sizeof *out); /* no binding cached: every one is written */
    out->kind = kind;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &vk->set_layouts[kind];
    VkResult r = VK_ERROR_OUT_OF_POOL_MEMORY;
    if (vk->n_rec_pools) {
        ai.descriptorPool = vk->rec_pools[vk->n_rec_pools - 1];
        r = vk->vkd.vkAllocateDescriptorSets(vk->device, &ai, &out->set);
    }
    if (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL) {
        /* The last pool is full: a new one. */
        VkDescriptorPool *p = vkmha__realloc(vk->ctx, vk->rec_pools,
                                             vk->n_rec_pools * sizeof *p,
                                             (vk->n_rec_pools + 1) * sizeof *p);
        if (!p)
            return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                               "%s: out of host memory", vk->ctx->call);
        vk->rec_pools = p;
        if ((r = create_set_pool(vk, RECORDED_SETS_PER_POOL, &p[vk->n_rec_pools])) !=
            VK_SUCCESS)
            return vk_fail(vk, r, "vkCreateDescriptorPool");
        ai.descriptorPool = p[vk->n_rec_pools++];
        r = vk->vkd.vkAllocateDescriptorSets(vk->device, &ai, &out->set);
    }
    return r == VK_SUCCESS ? VKMHA_SUCCESS : vk_fail(vk, r, "vkAllocateDescriptorSets");
}

void vk_release_recorded_sets(vk_state *vk)
{
    for (uint32_t i = 0; i < vk->n_rec_pools; i++)
        vk->vkd.vkDestroyDescriptorPool(vk->device, vk->rec_pools[i], vk->vkalloc);
    vkmha__free(vk->ctx, vk->rec_pools);
    vk->rec_pools = NULL;
    vk->n_rec_pools = 0;
}

vkmha_status vk_site_pool_create(vk_state *vk, const vk_kind *kinds, uint32_t count,
                                 vk_site_pool *out)
{
    VkResult r;
    vk_site_pool p = {0};
    p.sites = vkmha__calloc(vk->ctx, count, sizeof *p.sites);
    if (!p.sites)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           vk->ctx->call);
    p.count = count;
    for (uint32_t i = 0; i < count; i++)
        p.sites[i].kind = kinds[i];
    if (vk->push_descriptors) { /* no sets: descriptors go into the command buffer */
        *out = p;
        return VKMHA_SUCCESS;
    }
    if ((r = create_set_pool(vk, count, &p.pool)) != VK_SUCCESS) {
        vkmha__free(vk->ctx, p.sites);
        return vk_fail(vk, r, "vkCreateDescriptorPool");
    }
    for (uint32_t i = 0; i < count; i++) {
        VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
        ai.descriptorPool = p.pool;
        ai.descriptorSetCount = 1;
        ai.pSetLayouts = &vk->set_layouts[kinds[i]];
        if ((r = vk->vkd.vkAllocateDescriptorSets(vk->device, &ai, &p.sites[i].set)) !=
            VK_SUCCESS) {
            vk_site_pool_destroy(vk, &p);
            return vk_fail(vk, r, "vkAllocateDescriptorSets");
        }
    }
    *out = p;
    return VKMHA_SUCCESS;
}

void vk_site_pool_destroy(vk_state *vk, vk_site_pool *p)
{
    if (p->pool)
        vk->vkd.vkDestroyDescriptorPool(vk->device, p->pool, vk->vkalloc); /* frees the sets */
    vkmha__free(vk->ctx, p->sites);
    memset(p, 0, sizeof *p);
}
