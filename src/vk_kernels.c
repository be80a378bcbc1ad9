/* The kernel table: a row per kernel (shader variants, bindings, push
 * block, axes of its pipelines, availability, specialization, public path),
 * and the descriptor interfaces the kernels of each op share. Everything
 * else finds a kernel's facts here: the pipeline store (src/vk_pipeline.c)
 * builds from a row's spec, vk_dispatch checks a dispatch against its row,
 * the self-check disables a row's pipelines through its path bit. */
#include "vk_base.h"

#include <stdio.h>
#include <string.h>

/* ---- descriptor interfaces ------------------------------------------------ */

/* The bindings of each kind: its storage buffers (see VK_MAX_BINDINGS),
 * and with matmul_texel the vec4 texel views that follow them, as indices
 * of the buffers a dispatch passes (the CPU-shaped shaders read them as
 * samplerBuffers): heads x (binding 2: the append's RoPE table); softmax
 * input, bias; LayerNorm y, residual, gamma, beta; the split-K combine's
 * partial outputs and statistics.
 * texel_front: with matmul_texel the texel views take the first n_texel
 * bindings (of buffers 0 .. n_texel - 1), and those buffers' storage
 * bindings follow the others (the matmul: texel A, B, then bias, C, then
 * storage A, B). fixed_texel: bindings that are texel buffers on every
 * device (the CPU-shaped fused shader's q, k, v). */
static const struct kind_def {
    uint32_t bindings, n_texel, texel[VK_MAX_TEXEL_BINDINGS];
    bool texel_front;
    uint32_t fixed_texel; /* a bit per binding */
} kind_defs[KIND_COUNT] = {
    [KIND_MATMUL] = {.bindings = 4, .n_texel = 2, .texel = {0, 1}, .texel_front = true},
    [KIND_SOFTMAX] = {.bindings = 7, .n_texel = 2, .texel = {4, 2}},
    [KIND_HEADS] = {.bindings = 3, .n_texel = 1, .texel = {0}},
    [KIND_LAYERNORM] = {.bindings = 4, .n_texel = 4, .texel = {3, 0, 1, 2}},
    [KIND_FLASH] = {.bindings = 11}, /* 10: a layer's RoPE table */
    [KIND_FLASH_COMBINE] = {.bindings = 4, .n_texel = 2, .texel = {0, 1}},
    [KIND_FLASH_CPU] = {.bindings = 10, .fixed_texel = 0x7},
};

uint32_t vk_kind_bindings(const vk_state *vk, vk_kind kind)
{
    const struct kind_def *k = &kind_defs[kind];
    return k->bindings + (vk->tuning.matmul_texel ? k->n_texel : 0);
}

VkDescriptorType vk_binding_type(const vk_state *vk, vk_kind kind, uint32_t binding)
{
    const struct kind_def *k = &kind_defs[kind];
    const bool texel = (k->fixed_texel >> binding & 1) ||
                       (vk->tuning.matmul_texel && (k->texel_front ? binding < k->n_texel
                                                            : binding >= k->bindings));
    return texel ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
}

uint32_t vk_kind_storage_buffers(const vk_state *vk, vk_kind kind)
{
    uint32_t n = 0;
    for (uint32_t b = 0; b < vk_kind_bindings(vk, kind); b++)
        n += vk_binding_type(vk, kind, b) == VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    return n;
}

uint32_t vk_binding_source(const vk_state *vk, vk_kind kind, uint32_t binding)
{
    const struct kind_def *k = &kind_defs[kind];
    if (!vk->tuning.matmul_texel || binding < k->bindings)
        return binding;
    if (k->texel_front) /* storage A, B again past the others */
        return binding - k->bindings;
    return k->texel[binding - k->bindings];
}

/* The kinds of vk_record_attention's sites. */
const vk_kind vk_attention_site_kinds[VK_ATTENTION_SITES] = {
    [ASITE_SCORES] = KIND_MATMUL,        [ASITE_SOFTMAX] = KIND_SOFTMAX,
    [ASITE_PV] = KIND_MATMUL,            [ASITE_WEIGHTS_COPY] = KIND_HEADS,
    [ASITE_FLASH] = KIND_FLASH,          [ASITE_FLASH_WEIGHTS] = KIND_FLASH,
    [ASITE_FLASH_CPU] = KIND_FLASH_CPU,  [ASITE_FLASH_CPU_WEIGHTS] = KIND_FLASH_CPU,
    [ASITE_COMBINE] = KIND_FLASH_COMBINE, [ASITE_VSCAN] = KIND_HEADS,
    [ASITE_VSCAN_KEYS] = KIND_HEADS};

/* ---- specialization of each kernel ---------------------------------------- */

uint64_t vk_matmul_shared_bytes(uint64_t bm, uint64_t bn, uint64_t bk)
{
    return (bm + bn) * bk * sizeof(float);
}

uint64_t vk_matmul_coop_shared_bytes(const vkmha_tile_config *t, bool quant_n)
{
    /* shaders/matmul_coop.comp: A [bm][bk + 8] halves; op(B) [bk][bn + 8]
     * (op N) or [bn][bk + 8] (op T) in one array; a float staging area of
     * cm x cn per subgroup; for a quantized B with op N, Bl, [bk][bn + 8]
     * halves, and q_max. Other pipelines never touch those two (one f16vec4
     * and a word declared): the compilers measured drop them (RADV: tools/
     * vkmha-occupancy), and this is what they allocate. */
    const uint64_t bm = t->bm, bn = t->bn, bk = t->bk;
    const uint64_t b_n = bk * (bn + 8), b_t = bn * (bk + 8);
    return 2 * (bm * (bk + 8) + (b_n > b_t ? b_n : b_t)) + 4 * (bm / t->tm) * (bn / t->tn) +
           (quant_n ? 2 * b_n + 4 : 0);
}

uint64_t vk_flash_shared_bytes(uint64_t br, uint64_t bc, uint64_t d4)
{
    return 16 * (br * d4 + bc * (d4 + 1) + d4) + 4 * (br * bc + 3 * br) + 12;
}

uint64_t vk_flash_coop_shared_bytes(uint64_t br, uint64_t bc, uint64_t d4)
{
    const uint64_t ds = 4 * d4 + 8, wide = bc > 4 * d4 ? bc : 4 * d4;
    return 2 * ((br + bc) * ds + br * (bc + 8)) + 4 * (br * wide + 3 * br) + 16 * d4 + 12;
}

static const vkmha_tile_config *tile_of(const vk_state *vk, vk_pipe pipe)
{
    return pipe.tile == TILE_GEMV ? &vk->tuning.tile_gemv
           : pipe.tile == TILE_LARGE ? &vk->tuning.tile_large
                                     : &vk->tuning.tile_small;
}

/* The register variant (matmul_cpu.comp) or the shared-memory one, by the
 * tile's variant. */
static void matmul_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    const vkmha_tile_config *t = tile_of(vk, pipe);
    if (t->variant == VKMHA_MATMUL_VARIANT_REGISTER) {
        *o = (vk_spec){.spv = u16 ? SPV_MATMUL_CPU_U16 : SPV_MATMUL_CPU, .n = 5,
                       .value = {t->workgroup_size, /* 0 WG */
                                 t->tm,             /* 1 TM */
                                 t->tn,             /* 2 TN */
                                 pipe.vec,          /* 3 VEC */
                                 pipe.tile == TILE_GEMV /* 4 LANE_COLS */}};
        return;
    }
    *o = (vk_spec){.spv = SPV_MATMUL, .n = 7,
                   .value = {t->workgroup_size, /* 0 WG */
                             t->bm, t->bn, t->bk, /* 1 BM, 2 BN, 3 BK */
                             t->tm, t->tn,        /* 4 TM, 5 TN */
                             pipe.vec /* 6 VEC */},
                   .shared_bytes = vk_matmul_shared_bytes(t->bm, t->bn, t->bk)};
}

static bool matmul_available(const vk_state *vk, vk_pipe pipe)
{
    return pipe.tile != TILE_GEMV || vk->tuning.tile_gemv.workgroup_size != 0;
}

/* The cooperative-matrix matmul: the layout's storage A and B at bindings
 * 4 and 5 where the register variant's texel views come first. */
static void matmul_coop_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)u16;
    const vkmha_tile_config *t = &vk->tuning.tile_coop;
    *o = (vk_spec){.spv = vk->tuning.matmul_texel ? SPV_MATMUL_COOP_TEXEL : SPV_MATMUL_COOP,
                   .n = 10,
                   .value = {t->workgroup_size,     /* 0 WG */
                             t->bm, t->bn, t->bk,   /* 1 BM, 2 BN, 3 BK */
                             t->tm, t->tn,          /* 4 TM, 5 TN */
                             pipe.vec,              /* 6 VEC */
                             vk->coop_shape.m, vk->coop_shape.n,
                             vk->coop_shape.k /* 7 CM, 8 CN, 9 CK */},
                   .shared_bytes = vk_matmul_coop_shared_bytes(t, false),
                   .full_subgroups = true};
}

static bool matmul_coop_available(const vk_state *vk, vk_pipe pipe)
{
    (void)pipe;
    return vk->tuning.tile_coop.workgroup_size != 0;
}

/* The VK_NV_cooperative_matrix2 matmul (its fp16 views need 16-bit
 * storage: without it, or with native16 found wrong, none). */
static void matmul_cm2_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)u16, (void)pipe;
    const vkmha_tile_config *t = &vk->tuning.tile_cm2;
    *o = (vk_spec){.spv = vk->tuning.matmul_texel ? SPV_MATMUL_CM2_TEXEL : SPV_MATMUL_CM2, .n = 4,
                   .value = {t->workgroup_size, /* 0 WG */
                             t->bm, t->bn, t->bk /* 1 BM, 2 BN, 3 BK */}};
}

static bool matmul_cm2_available(const vk_state *vk, vk_pipe pipe)
{
    (void)pipe;
    return vk->tuning.cm2_matmul && vk->tuning.native16;
}

/* The GPUs' GEMV: tile_gemv_gpu's bn columns per workgroup. */
static void matmul_gemv_gpu_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)u16;
    const vkmha_tile_config *t = &vk->tuning.tile_gemv_gpu;
    *o = (vk_spec){.spv = vk->tuning.matmul_texel ? SPV_MATMUL_GEMV_TEXEL : SPV_MATMUL_GEMV,
                   .n = 3, .value = {t->workgroup_size, /* 0 WG */ t->bn, /* 1 CW */
                                     pipe.vec /* 2 VEC */}};
}

static bool matmul_gemv_gpu_available(const vk_state *vk, vk_pipe pipe)
{
    (void)pipe;
    return vk->tuning.tile_gemv_gpu.workgroup_size != 0;
}

/* The workgroup-per-row reductions: WG floats of shared memory
 * (shaders/reduce.glsl); the subgroup variant where the context uses it. */
static void softmax_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)pipe, (void)u16;
    *o = (vk_spec){.spv = vk->tuning.use_subgroup ? SPV_SOFTMAX_SG : SPV_SOFTMAX, .n = 1,
                   .value = {vk->tuning.reduce_wg}, .shared_bytes = vk->tuning.reduce_wg * sizeof(float)};
}

static void layernorm_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)pipe, (void)u16;
    *o = (vk_spec){.spv = vk->tuning.use_subgroup ? SPV_LAYERNORM_SG : SPV_LAYERNORM, .n = 1,
                   .value = {vk->tuning.reduce_wg}, .shared_bytes = vk->tuning.reduce_wg * sizeof(float)};
}

static void heads_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)pipe, (void)u16;
    *o = (vk_spec){.spv = SPV_HEADS, .n = 1, .value = {vk->tuning.elementwise_wg}};
}

static void flash_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)u16;
    const vk_flash_config *f = &vk->tuning.flash[pipe.cls];
    *o = (vk_spec){.spv = SPV_FLASH, .n = 6,
                   .value = {f->workgroup_size, /* 0 WG */
                             f->block_q,        /* 1 BR */
                             f->block_k,        /* 2 BC */
                             f->max_head_dim / 4, /* 3 D4 */
                             f->tm, f->tn /* 4 SR, 5 SC */},
                   .shared_bytes = vk_flash_shared_bytes(f->block_q, f->block_k,
                                                         f->max_head_dim / 4)};
}

static void flash_coop_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)u16;
    const vk_flash_config *f = &vk->tuning.flash_coop[pipe.cls];
    *o = (vk_spec){.spv = SPV_FLASH_COOP, .n = 9,
                   .value = {f->workgroup_size, /* 0 WG */
                             f->block_q,        /* 1 BR */
                             f->block_k,        /* 2 BC */
                             f->max_head_dim / 4, /* 3 D4 */
                             f->tm, f->tn,      /* 4 SR, 5 SC */
                             vk->coop_shape.m, vk->coop_shape.n,
                             vk->coop_shape.k /* 6 CM, 7 CN, 8 CK */},
                   .shared_bytes = vk_flash_coop_shared_bytes(f->block_q, f->block_k,
                                                              f->max_head_dim / 4),
                   .full_subgroups = true};
}

static bool flash_coop_available(const vk_state *vk, vk_pipe pipe)
{
    return vk->tuning.flash_coop[pipe.cls].workgroup_size != 0;
}

static bool flash_available(const vk_state *vk, vk_pipe pipe)
{
    return vk->tuning.flash[pipe.cls].workgroup_size != 0; /* else that class runs unfused */
}

/* The grid has elementwise_wg output elements per workgroup
 * (src/vk_attention.c); CPU devices take 16 per invocation, with texel
 * reads (the variant with the texel bindings). */
static void combine_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)pipe, (void)u16;
    const bool cpu_shape = vk->tuning.cpu_rows_wg && vk->tuning.elementwise_wg % 16 == 0;
    const uint32_t epi = cpu_shape ? 16 : 1;
    *o = (vk_spec){.spv = cpu_shape ? SPV_FLASH_COMBINE_CPU : SPV_FLASH_COMBINE, .n = 2,
                   .value = {vk->tuning.elementwise_wg / epi, /* 0 WG */ epi /* 1 EPI */}};
}

static void flash_cpu_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    const vk_flash_config *f = &vk->tuning.flash_cpu[pipe.cls];
    *o = (vk_spec){.spv = u16 ? SPV_FLASH_CPU_U16 : SPV_FLASH_CPU, .n = 3,
                   .value = {f->workgroup_size, /* 0 WG */
                             f->tm,             /* 1 TM */
                             f->max_head_dim / 4 /* 2 D4 */}};
}

static void flash_cpu_q8_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    flash_cpu_spec(vk, pipe, u16, o);
    o->spv = u16 ? SPV_FLASH_CPU_Q8_U16 : SPV_FLASH_CPU_Q8;
}

static void flash_cpu_skip_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    flash_cpu_spec(vk, pipe, u16, o);
    o->spv = u16 ? SPV_FLASH_CPU_SKIP_U16 : SPV_FLASH_CPU_SKIP;
}

static bool flash_cpu_available(const vk_state *vk, vk_pipe pipe)
{
    return vk->tuning.flash_cpu[pipe.cls].workgroup_size != 0;
}

/* The CPU-shaped row kernels: WG rows per workgroup. */
static void softmax_cpu_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)pipe, (void)u16;
    *o = (vk_spec){.spv = SPV_SOFTMAX_CPU, .n = 1, .value = {vk->tuning.cpu_rows_wg}};
}

static void heads_cpu_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)pipe;
    *o = (vk_spec){.spv = u16 ? SPV_HEADS_CPU_U16 : SPV_HEADS_CPU, .n = 1,
                   .value = {vk->tuning.cpu_rows_wg}};
}

static void layernorm_cpu_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)pipe, (void)u16;
    *o = (vk_spec){.spv = SPV_LAYERNORM_CPU, .n = 1, .value = {vk->tuning.cpu_rows_wg}};
}

static void kv_q8_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)vk, (void)pipe, (void)u16;
    *o = (vk_spec){.spv = SPV_KV_Q8, .n = 1, .value = {VK_KV_Q8_WG}};
}

static void heads_rope_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    heads_spec(vk, pipe, u16, o);
    o->spv = SPV_HEADS_ROPE;
}

static void heads_cpu_rope_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    heads_cpu_spec(vk, pipe, u16, o);
    o->spv = SPV_HEADS_CPU_ROPE;
}

static void kv_q8_rope_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    kv_q8_spec(vk, pipe, u16, o);
    o->spv = SPV_KV_Q8_ROPE;
}

static void rope_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)vk, (void)pipe, (void)u16;
    *o = (vk_spec){.spv = SPV_ROPE, .n = 1, .value = {VK_PASS_WG}};
}

static void vscan_spec(const vk_state *vk, vk_pipe pipe, bool u16, vk_spec *o)
{
    (void)vk, (void)pipe;
    *o = (vk_spec){.spv = u16 ? SPV_VSCAN_U16 : SPV_VSCAN, .n = 1, .value = {VK_PASS_WG}};
}

/* With the CPU-shaped fused kernel, whose skipping it serves: its heads
 * kind then has the texel views (binding 3) that it reads by runs. */
static bool vscan_available(const vk_state *vk, vk_pipe pipe)
{
    (void)pipe;
    return vk->tuning.flash_cpu[0].workgroup_size != 0;
}

static bool rows_cpu_available(const vk_state *vk, vk_pipe pipe)
{
    (void)pipe;
    return vk->tuning.cpu_rows_wg != 0; /* CPU devices only */
}

/* ---- the table ------------------------------------------------------------- */

const vk_kernel_def vk_kernel_defs[KERNEL_COUNT] = {
    [KERNEL_MATMUL] = {.name = "matmul", .op = "matmul", .kind = KIND_MATMUL,
                       .tiles = TILE_COUNT, .vecs = 2, .classes = 1, .bufs = 4,
                       .push_size = sizeof(struct matmul_push), .u16_sources = 0x3,
                       .path = VKMHA_PATH_MATMUL_GEMV, .path_tile = TILE_GEMV,
                       .available = matmul_available, .spec = matmul_spec},
    [KERNEL_SOFTMAX] = {.name = "softmax", .op = "softmax", .kind = KIND_SOFTMAX, .tiles = 1,
                        .vecs = 1, .classes = 1, .bufs = 7,
                        .push_size = sizeof(struct softmax_push), .spec = softmax_spec},
    [KERNEL_HEADS] = {.name = "heads", .op = "heads", .kind = KIND_HEADS, .tiles = 1,
                      .vecs = 1, .classes = 1, .bufs = 2,
                      .push_size = sizeof(struct heads_push), .spec = heads_spec},
    [KERNEL_LAYERNORM] = {.name = "layernorm", .op = "layernorm", .kind = KIND_LAYERNORM,
                          .tiles = 1, .vecs = 1, .classes = 1, .bufs = 4,
                          .push_size = sizeof(struct layernorm_push), .spec = layernorm_spec},
    [KERNEL_FLASH] = {.name = "flash", .op = "attention", .kind = KIND_FLASH, .tiles = 1,
                      .vecs = 1, .classes = VK_FLASH_CLASSES, .bufs = 11,
                      .push_size = sizeof(struct flash_push), .path = VKMHA_PATH_FUSED_D32,
                      .available = flash_available, .spec = flash_spec},
    [KERNEL_FLASH_COMBINE] = {.name = "flash_combine", .op = "attention",
                              .kind = KIND_FLASH_COMBINE, .tiles = 1, .vecs = 1, .classes = 1,
                              .bufs = 4, .push_size = sizeof(struct combine_push),
                              .spec = combine_spec},
    [KERNEL_FLASH_CPU] = {.name = "flash_cpu", .op = "attention", .kind = KIND_FLASH_CPU,
                          .tiles = 1, .vecs = 1, .classes = VK_FLASH_CLASSES, .bufs = 10,
                          .push_size = sizeof(struct flash_push), .u16_sources = 0x7,
                          .path = VKMHA_PATH_FUSED_CPU_D32, .available = flash_cpu_available,
                          .spec = flash_cpu_spec},
    [KERNEL_SOFTMAX_CPU] = {.name = "softmax_cpu", .op = "softmax", .kind = KIND_SOFTMAX,
                            .tiles = 1, .vecs = 1, .classes = 1, .bufs = 7,
                            .push_size = sizeof(struct softmax_push),
                            .available = rows_cpu_available, .spec = softmax_cpu_spec},
    [KERNEL_HEADS_CPU] = {.name = "heads_cpu", .op = "heads", .kind = KIND_HEADS, .tiles = 1,
                          .vecs = 1, .classes = 1, .bufs = 2,
                          .push_size = sizeof(struct heads_push), .u16_sources = 0x1,
                          .available = rows_cpu_available, .spec = heads_cpu_spec},
    [KERNEL_LAYERNORM_CPU] = {.name = "layernorm_cpu", .op = "layernorm",
                              .kind = KIND_LAYERNORM, .tiles = 1, .vecs = 1, .classes = 1,
                              .bufs = 4, .push_size = sizeof(struct layernorm_push),
                              .available = rows_cpu_available, .spec = layernorm_cpu_spec},
    [KERNEL_MATMUL_COOP] = {.name = "matmul_coop", .op = "matmul", .kind = KIND_MATMUL,
                            .tiles = 1, .vecs = 2, .classes = 1, .bufs = 4,
                            .push_size = sizeof(struct matmul_push),
                            .path = VKMHA_PATH_COOPMAT_MATMUL,
                            .available = matmul_coop_available, .spec = matmul_coop_spec},
    [KERNEL_MATMUL_GEMV_GPU] = {.name = "matmul_gemv_gpu", .op = "matmul", .kind = KIND_MATMUL,
                                .tiles = 1, .vecs = 2, .classes = 1, .bufs = 4,
                                .push_size = sizeof(struct matmul_push),
                                .path = VKMHA_PATH_MATMUL_GEMV,
                                .available = matmul_gemv_gpu_available,
                                .spec = matmul_gemv_gpu_spec},
    [KERNEL_FLASH_COOP] = {.name = "flash_coop", .op = "attention", .kind = KIND_FLASH,
                           .tiles = 1, .vecs = 1, .classes = VK_FLASH_CLASSES, .bufs = 11,
                           .push_size = sizeof(struct flash_push),
                           .path = VKMHA_PATH_COOPMAT_FUSED_D32,
                           .available = flash_coop_available, .spec = flash_coop_spec},
    [KERNEL_MATMUL_CM2] = {.name = "matmul_cm2", .op = "matmul", .kind = KIND_MATMUL,
                           .tiles = 1, .vecs = 1, .classes = 1, .bufs = 4,
                           .push_size = sizeof(struct matmul_push),
                           .path = VKMHA_PATH_COOPMAT2_MATMUL,
                           .available = matmul_cm2_available, .spec = matmul_cm2_spec},
    [KERNEL_FLASH_CPU_Q8] = {.name = "flash_cpu_q8", .op = "attention", .kind = KIND_FLASH_CPU,
                             .tiles = 1, .vecs = 1, .classes = VK_FLASH_CLASSES, .bufs = 10,
                             .push_size = sizeof(struct flash_push), .u16_sources = 0x1,
                             .path = VKMHA_PATH_FUSED_CPU_D32,
                             .available = flash_cpu_available, .spec = flash_cpu_q8_spec},
    [KERNEL_KV_Q8] = {.name = "kv_q8", .op = "heads", .kind = KIND_HEADS, .tiles = 1, .vecs = 1,
                      .classes = 1, .bufs = 2, .push_size = sizeof(struct heads_push),
                      .spec = kv_q8_spec},
    [KERNEL_ROPE] = {.name = "rope", .op = "heads", .kind = KIND_HEADS, .tiles = 1, .vecs = 1,
                     .classes = 1, .bufs = 2, .push_size = sizeof(struct rope_push),
                     .spec = rope_spec},
    [KERNEL_VSCAN] = {.name = "vscan", .op = "attention", .kind = KIND_HEADS, .tiles = 1,
                      .vecs = 1, .classes = 1, .bufs = 2,
                      .push_size = sizeof(struct heads_push), .u16_sources = 0x1,
                      .available = vscan_available, .spec = vscan_spec},
    [KERNEL_FLASH_CPU_SKIP] = {.name = "flash_cpu_skip", .op = "attention",
                               .kind = KIND_FLASH_CPU, .tiles = 1, .vecs = 1,
                               .classes = VK_FLASH_CLASSES, .bufs = 10,
                               .push_size = sizeof(struct flash_push), .u16_sources = 0x7,
                               .path = VKMHA_PATH_FUSED_CPU_D32,
                               .available = flash_cpu_available, .spec = flash_cpu_skip_spec},
    [KERNEL_HEADS_ROPE] = {.name = "heads_rope", .op = "heads", .kind = KIND_HEADS, .tiles = 1,
                           .vecs = 1, .classes = 1, .bufs = 3,
                           .push_size = sizeof(struct heads_push), .spec = heads_rope_spec},
    [KERNEL_HEADS_CPU_ROPE] = {.name = "heads_cpu_rope", .op = "heads", .kind = KIND_HEADS,
                               .tiles = 1, .vecs = 1, .classes = 1, .bufs = 3,
                               .push_size = sizeof(struct heads_push),
                               .available = rows_cpu_available, .spec = heads_cpu_rope_spec},
    [KERNEL_KV_Q8_ROPE] = {.name = "kv_q8_rope", .op = "heads", .kind = KIND_HEADS, .tiles = 1,
                           .vecs = 1, .classes = 1, .bufs = 3,
                           .push_size = sizeof(struct heads_push), .spec = kv_q8_rope_spec},
};

static const char *const tile_names[TILE_COUNT] = {"large", "small", "gemv"};

/* ---- pipelines of the rows ------------------------------------------------- */

static uint32_t row_pipes(const vk_kernel_def *k)
{
    return (uint32_t)k->tiles * k->vecs * k->classes;
}

uint32_t vk_pipe_count(void)
{
    uint32_t n = 0;
    for (int k = 0; k < KERNEL_COUNT; k++)
        n += row_pipes(&vk_kernel_defs[k]);
    return n;
}

uint32_t vk_pipe_index(vk_pipe pipe)
{
    if (pipe.kernel >= KERNEL_COUNT)
        return UINT32_MAX;
    const vk_kernel_def *k = &vk_kernel_defs[pipe.kernel];
    if (pipe.tile >= k->tiles || pipe.vec >= k->vecs || pipe.cls >= k->classes)
        return UINT32_MAX;
    uint32_t base = 0;
    for (uint32_t r = 0; r < pipe.kernel; r++)
        base += row_pipes(&vk_kernel_defs[r]);
    return base + ((uint32_t)pipe.tile * k->vecs + pipe.vec) * k->classes + pipe.cls;
}

vk_pipe vk_pipe_at(uint32_t index)
{
    for (uint8_t r = 0; r < KERNEL_COUNT; r++) {
        const vk_kernel_def *k = &vk_kernel_defs[r];
        const uint32_t n = row_pipes(k);
        if (index < n)
            return (vk_pipe){.kernel = r, .tile = (uint8_t)(index / k->classes / k->vecs),
                             .vec = (uint8_t)(index / k->classes % k->vecs),
                             .cls = (uint8_t)(index % k->classes)};
        index -= n;
    }
    return (vk_pipe){.kernel = KERNEL_COUNT};
}

void vk_pipe_name(vk_pipe pipe, char *out, size_t cap)
{
    const vk_kernel_def *k = &vk_kernel_defs[pipe.kernel];
    snprintf(out, cap, "%s%s%s%s", k->name, k->tiles > 1 ? "_" : "",
             k->tiles > 1 ? tile_names[pipe.tile] : "", pipe.vec ? "_vec" : "");
    if (k->classes > 1) {
        const size_t len = strlen(out);
        snprintf(out + len, cap - len, "_d%u", vk_flash_dim(pipe.cls));
    }
}

uint32_t vk_pipe_path(vk_pipe pipe)
{
    const vk_kernel_def *k = &vk_kernel_defs[pipe.kernel];
    if (k->classes > 1)
        return vk_flash_path(k->path, pipe.cls);
    return k->tiles > 1 && pipe.tile != k->path_tile ? 0 : k->path;
}

bool vk_pipe_available(const vk_state *vk, vk_pipe pipe)
{
    const vk_kernel_def *k = &vk_kernel_defs[pipe.kernel];
    return !(vk->tuning.disabled_paths & vk_pipe_path(pipe)) &&
           !(vk->tuning.unfit_kinds >> k->kind & 1) && (!k->available || k->available(vk, pipe));
}

vk_kind vk_pipe_kind(vk_pipe pipe)
{
    return vk_kernel_defs[pipe.kernel].kind;
}

bool vk_texel_u16(const vk_state *vk, vk_pipe pipe, uint32_t dtypes)
{
    const uint32_t sources = vk_kernel_defs[pipe.kernel].u16_sources;
    if (!vk->tuning.matmul_texel || !vk->tuning.texel16 || !sources)
        return false;
    for (uint32_t i = 0; i < VK_DT_SLOTS; i++) {
        const uint32_t dt = VK_DT_OF(dtypes, i);
        /* a quantized B (VK_DTYPE_I8, U4) is read through its storage binding */
        if ((sources >> i & 1) && dt != VKMHA_DTYPE_F16 && dt != VKMHA_DTYPE_BF16 &&
            dt != VK_DTYPE_I8 && dt != VK_DTYPE_U4)
            return false;
    }
    return true;
}

void vk_pipe_spec(const vk_state *vk, vk_pipe pipe, uint32_t dtypes, vk_spec *out)
{
    vk_kernel_defs[pipe.kernel].spec(vk, pipe, vk_texel_u16(vk, pipe, dtypes), out);
}
