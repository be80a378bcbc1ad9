/* Tuning from the device's limits: the matmul tiles (VKMHA_MATMUL_TILE and
 * desc->matmul_tile override them), the fused attention's blocks per
 * head-dim class, workgroup sizes, which CPU-shaped kernels run and whether
 * they read texel views. The kernel table (src/vk_kernels.c) specializes
 * its pipelines from what is chosen here; the self-check turns a path off
 * through vk_tuning_disable, the one writer of these fields after
 * creation. */
#include "vk_base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        if (vk_matmul_shared_bytes(t->bm, t->bn, t->bk) > d->max_shared_memory)
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

/* Completes a cooperative tile (its workgroup size; all zero: the automatic
 * one, 2 x 2 matrices per subgroup on 2 x 2 subgroups, 32 deep: 64 x 64 with
 * 16 x 16 shapes) for the context's matrix shape and checks it like
 * tile_check. On an H200 (docs/PERFORMANCE.md) five tiles from 64 x 64 to
 * 256 x 128 ran 4096^3 in 3.9-4.8 ms (64 x 64: 4.2, 8% behind the best) and
 * 64 x 64 ran the layer of L 1024, d_model 512 fastest (its grid fills the
 * GPU). */
static const char *coop_tile_check(const vk_state *vk, vkmha_tile_config *t, bool *limits)
{
    const uint32_t cm = vk->coop_shape.m, cn = vk->coop_shape.n, ck = vk->coop_shape.k;
    *limits = true;
    if (!vk->coopmat)
        return vk_spirv[SPV_MATMUL_COOP].code
                   ? "the device has no fp16 cooperative matrices (VK_KHR_cooperative_matrix "
                     "with vulkanMemoryModel and shaderFloat16)"
                   : "this build of vkmha has no cooperative-matrix shaders (its glslang could "
                     "not compile them: tools/mesa26)";
    if (cn % 4 || ck % 4) /* its tiles are staged in f16vec4s */
        return "the cooperative variant needs a matrix shape whose n and k are multiples of "
               "4 (the device's are not)";
    *limits = false;
    if (!t->bm && !t->bn && !t->bk && !t->tm && !t->tn) {
        t->tm = t->tn = 2;
        t->bm = 2 * t->tm * cm, t->bn = 2 * t->tn * cn;
        for (t->bk = ck; t->bk < 32 || t->bk % 8; t->bk += ck) {
        }
    }
    if (!t->tm || !t->tn || !t->bm || !t->bn || !t->bk || t->bm % (t->tm * cm) ||
        t->bn % (t->tn * cn) || t->bk % ck || t->bk % 8)
        return "the cooperative variant needs bm, bn nonzero multiples of tm, tn times the "
               "device's matrix shape, and bk of its depth and of 8";
    if (t->tm * t->tn > 16)
        return "the cooperative variant needs tm * tn <= 16";
    const uint64_t groups = (uint64_t)(t->bm / (t->tm * cm)) * (t->bn / (t->tn * cn));
    if (groups * vk->max_subgroup_size > 4096)
        return "the cooperative variant's workgroup exceeds 4096 invocations";
    t->workgroup_size = (uint32_t)groups * vk->max_subgroup_size;
    *limits = true;
    if (vk_matmul_coop_shared_bytes(t, false) > vk->info.max_shared_memory)
        return "its tiles need more shared memory than the device has";
    if (t->workgroup_size > vk->info.max_workgroup_invocations ||
        t->workgroup_size > vk->info.max_workgroup_size[0])
        return "its workgroup is larger than the device allows";
    return NULL;
}

/* Completes a VK_NV_cooperative_matrix2 tile: its workgroup size (0: 128
 * where the device lists it, else the largest it lists up to 256) and, all
 * sizes zero, 64 x 64 x 32 (32 x 32 x 32 for workgroups under 128; rounded
 * up to the entry's granularities). Checked against the entry of that
 * workgroup size, and at most 64 accumulator elements per invocation. On
 * an H200 (docs/PERFORMANCE.md) 64 x 64 x 32 on 128 invocations ran
 * 4096^3 in 1.37 ms (64 deep: 1.28) and the layer of L 1024, d_model 512
 * fastest; 128 x 128 (256 invocations) 1.6 ms, and every larger tile 3-4x
 * slower. */
static const char *cm2_tile_check(const vk_state *vk, vkmha_tile_config *t, bool *limits)
{
    *limits = true;
    if (!vk->coopmat2)
        return vk_spirv[SPV_MATMUL_CM2].code
                   ? "the device has no VK_NV_cooperative_matrix2 (with workgroup scope, "
                     "flexible dimensions, tensor addressing, per-element operations, "
                     "Vulkan 1.3, 16-bit storage and fp16 x fp16 -> fp32 matrices of "
                     "workgroup scope)"
                   : "this build of vkmha has no VK_NV_cooperative_matrix2 shaders (its "
                     "glslang could not compile them: tools/mesa26)";
    const struct vk_cm2_shape *e = NULL;
    for (uint32_t i = 0; i < vk->n_cm2_shapes; i++) {
        const struct vk_cm2_shape *c = &vk->cm2_shapes[i];
        if (t->workgroup_size ? c->workgroup_size == t->workgroup_size
                              : c->workgroup_size <= 256 &&
                                    (!e || (e->workgroup_size != 128 &&
                                            (c->workgroup_size == 128 ||
                                             c->workgroup_size > e->workgroup_size))))
            e = c;
    }
    *limits = false;
    if (!e)
        return t->workgroup_size ? "the device lists no fp16 matrices of workgroup scope "
                                   "for that workgroup size"
                                 : "the device lists no fp16 matrices of workgroup scope "
                                   "for 256 invocations or fewer";
    if (!t->bm && !t->bn && !t->bk) {
        const uint32_t side = e->workgroup_size >= 128 ? 64 : 32;
        t->bm = (side + e->m - 1) / e->m * e->m;
        t->bn = (side + e->n - 1) / e->n * e->n;
        t->bk = (32 + e->k - 1) / e->k * e->k;
    }
    if (!t->bm || !t->bn || !t->bk || t->bm % e->m || t->bn % e->n || t->bk % e->k ||
        t->tm || t->tn)
        return "the cooperative2 variant needs bm, bn, bk nonzero multiples of the "
               "granularities the device lists for its workgroup size, and tm, tn 0";
    if (t->bm > 256 || t->bn > 256 || t->bk > 256)
        return "the cooperative2 variant's bm, bn and bk are at most 256";
    /* The accumulator lives in the invocations' registers: past 64 fp32
     * each, NVIDIA's compiler spills (a 128 x 128 tile on 32 invocations
     * did not finish compiling in minutes). */
    if ((uint64_t)t->bm * t->bn > 64ull * e->workgroup_size)
        return "the cooperative2 variant's bm x bn is at most 64 elements per invocation "
               "of its workgroup";
    t->workgroup_size = e->workgroup_size;
    *limits = true;
    if (t->workgroup_size > vk->info.max_workgroup_invocations ||
        t->workgroup_size > vk->info.max_workgroup_size[0])
        return "its workgroup is larger than the device allows";
    return NULL;
}

/* Why the environment's request for the cooperative kernels
 * (VKMHA_MATMUL_TILE, VKMHA_FUSED_KERNEL: for every context of the process,
 * how the test suite forces them) does not apply to this context, which
 * cannot have matrix units by its own desc; NULL when it applies. */
static const char *coop_env_ignored(const vk_state *vk)
{
    return vk->external ? "a borrowed device" : vk->no_coopmat ? "the mobile profile" : NULL;
}

/* The same for the cooperative2 matmul, which also needs 16-bit storage:
 * a context without it (desc->debug->no_native_16bit, a driver workaround,
 * or a device without storageBuffer16BitAccess) keeps its matmul. */
static const char *cm2_env_ignored(const vk_state *vk)
{
    const char *why = coop_env_ignored(vk);
    return why ? why : !vk->storage16 ? "this context has no 16-bit storage" : NULL;
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
 * invocation) in registers. The d576 class (MLA's heads) has GPUs take
 * 8 x 8 blocks: 39 KiB of shared memory, under NVIDIA's 48 KiB (one
 * workgroup per 64 KiB compute unit); 16 KiB (phones' least, the mobile
 * profile's) holds 2 x 4. tools/vkmha-occupancy measures the result on
 * RADV (docs/PERFORMANCE.md; test 'occupancy' fails on a spill or on fewer
 * than two workgroups per CU at d64 and d128 on navi21 and vega20). */
typedef struct flash_block {
    uint32_t max_dim, br, bc, sr, sc;
} flash_block;
static const flash_block gpu_flash_blocks[] = {
    {32, 64, 32, 4, 4},  {64, 64, 16, 2, 2}, {256, 32, 16, 2, 2}, {256, 16, 16, 2, 2},
    {256, 16, 8, 2, 1},  {256, 8, 8, 1, 1},  {256, 4, 8, 1, 1},   {256, 2, 8, 1, 1},
    {256, 1, 8, 1, 1},   {576, 8, 8, 1, 1},  {576, 4, 8, 1, 1},   {576, 2, 8, 1, 1},
    {576, 1, 8, 1, 1},   {576, 2, 4, 1, 1},  {576, 1, 4, 1, 1},
};
static const flash_block cpu_flash_blocks[] = {
    {256, 32, 32, 4, 4}, {256, 32, 16, 4, 2}, {256, 16, 16, 2, 2}, {256, 16, 8, 2, 1},
    {256, 8, 8, 1, 1},   {256, 4, 8, 1, 1},   {256, 2, 8, 1, 1},   {256, 1, 8, 1, 1},
    {576, 16, 8, 2, 1},  {576, 8, 8, 1, 1},   {576, 4, 8, 1, 1},   {576, 1, 8, 1, 1},
    {576, 2, 4, 1, 1},   {576, 1, 4, 1, 1},
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
        if (d4 % tx || vk_flash_shared_bytes(br, bc, d4) > d->max_shared_memory ||
            wg > d->max_workgroup_invocations || wg > d->max_workgroup_size[0])
            continue;
        *out = (vk_flash_config){.max_head_dim = max_dim, .block_q = br, .block_k = bc,
                                 .tm = sr, .tn = sc, .workgroup_size = wg};
        return true;
    }
    return false;
}

/* The cooperative-matrix variant of shaders/flash.comp for head dims up to
 * max_dim: the first block (query rows x keys per step), best first, whose
 * shapes are multiples of the device's matrix shape and whose shared memory
 * and workgroup fit, with up to 4 subgroups (one per score tile at least)
 * of maxSubgroupSize. Each invocation then keeps SR rows x D4 / TX vec4
 * columns of the output (BR D4 / WG in all, whatever the split), taken with
 * the most invocations along a row (TX), which read neighbouring columns.
 * On AMD GPUs a block first has to fit half of 64 KiB, so that two
 * workgroups share a compute unit (as the scalar blocks: tools/vkmha-occupancy
 * on gfx1100 measured 1 workgroup per CU at d128 with the 64 KiB block);
 * other GPUs take the largest block the workgroup's shared memory holds
 * (NVIDIA: 48 KiB of a multiprocessor's 100-228, so several still share
 * one; on an H200 the fp16 layer of L 1024, d_model 512 went from 0.40 to
 * 0.28 ms of device time with d64's 64 x 64 blocks instead of 32 x 32 and
 * K, V staged unconverted, docs/PERFORMANCE.md). */
static bool pick_flash_coop_within(const vk_state *vk, uint32_t max_dim, uint64_t shared,
                                   vk_flash_config *out)
{
    static const uint32_t blocks[][2] = {{64, 64}, {64, 32}, {32, 32}, {32, 16},
                                         {16, 16}, {16, 8},  {8, 8}};
    const uint32_t d4 = max_dim / 4, cm = vk->coop_shape.m, cn = vk->coop_shape.n,
                   ck = vk->coop_shape.k;
    const vkmha_device_info *d = &vk->info;
    if (!cm || (4 * d4) % cn || (4 * d4) % ck)
        return false;
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(blocks); i++) {
        const uint32_t br = blocks[i][0], bc = blocks[i][1];
        if (br % cm || bc % cn || bc % ck || vk_flash_coop_shared_bytes(br, bc, d4) > shared)
            continue;
        const uint32_t tiles = (br / cm) * (bc / cn), groups = tiles < 4 ? tiles : 4;
        const uint32_t wg = groups * vk->max_subgroup_size;
        if (wg > d->max_workgroup_invocations || wg > d->max_workgroup_size[0])
            continue;
        uint32_t best_sr = 0, best_sc = 0;
        for (uint32_t sr = 1; sr <= br; sr++)
            for (uint32_t sc = 1; sc <= bc; sc++)
                if (!(br % sr || bc % sc || (br / sr) * (bc / sc) != wg || d4 % (bc / sc)) &&
                    (!best_sc || sc < best_sc))
                    best_sr = sr, best_sc = sc;
        if (!best_sr)
            continue;
        *out = (vk_flash_config){.max_head_dim = max_dim, .block_q = br, .block_k = bc,
                                 .tm = best_sr, .tn = best_sc, .workgroup_size = wg};
        return true;
    }
    return false;
}

static bool pick_flash_coop(const vk_state *vk, uint32_t max_dim, vk_flash_config *out)
{
    const uint64_t most = vk->info.max_shared_memory;
    const bool amd = vk->info.vendor_id == 0x1002;
    return (amd && vk->info.type != VKMHA_DEVICE_TYPE_CPU && most > 32768 &&
            pick_flash_coop_within(vk, max_dim, 32768, out)) ||
           pick_flash_coop_within(vk, max_dim, most, out);
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

/* VKMHA_MATMUL_TILE="register:32,8,4,4,8" (variant:bm,bn,bk,tm,tn), or
 * "cooperative" for its automatic tile, for experiments without
 * recompiling. false if unset; a value that does not
 * parse gives a tile with variant AUTO and zero sizes, which fails the check
 * with a message. */
static bool env_tile(vkmha_tile_config *t)
{
    const char *e = getenv("VKMHA_MATMUL_TILE");
    char name[16] = "";
    unsigned bm = 0, bn = 0, bk = 0, tm = 0, tn = 0, wg = 0;
    if (!e || !*e)
        return false;
    /* "coopmat2" (automatic) or "coopmat2:bm,bn,bk,workgroup_size". */
    if (!strncmp(e, "coopmat2", 8)) {
        const bool ok = !e[8] || sscanf(e + 8, ":%u,%u,%u,%u%15s", &bm, &bn, &bk, &wg, name) == 4;
        *t = (vkmha_tile_config){ok ? bm : 1, bn, bk, 0, 0, wg,
                                 ok ? VKMHA_MATMUL_VARIANT_COOPERATIVE2
                                    : (vkmha_matmul_variant)-1};
        return true;
    }
    const int got = sscanf(e, "%15[a-z]:%u,%u,%u,%u,%u", name, &bm, &bn, &bk, &tm, &tn);
    /* "cooperative" alone: its automatic tile. */
    if (got != 6 && !(got == 1 && !strcmp(e, "cooperative")))
        bm = 0, name[0] = '\0';
    *t = (vkmha_tile_config){bm, bn, bk, tm, tn, 0,
                             !strcmp(name, "register")      ? VKMHA_MATMUL_VARIANT_REGISTER
                             : !strcmp(name, "shared")      ? VKMHA_MATMUL_VARIANT_SHARED
                             : !strcmp(name, "cooperative") ? VKMHA_MATMUL_VARIANT_COOPERATIVE
                                                            : (vkmha_matmul_variant)-1};
    return true;
}

/* The descriptor interfaces that bind more storage buffers than one stage
 * may (maxPerStageDescriptorStorageBuffers: 4 in Vulkan, and on some
 * phones' drivers, where the workgroup-shared fused kernel's 11 are too
 * many): the fused kernels' are not used (vk_pipe_available; their heads
 * run unfused, or on the CPU-shaped kernel); the others have nothing to
 * replace them, so the device is refused, naming the kernel that binds the
 * most of them. */
static vkmha_status fit_storage_buffers(vk_state *vk)
{
    const uint32_t most = vk->info.max_storage_buffers_per_stage;
    vk_tuning *t = &vk->tuning;
    uint32_t need = 0;
    vk_kind worst = KIND_COUNT;
    t->unfit_kinds = 0;
    for (uint32_t k = 0; k < KIND_COUNT; k++) {
        const uint32_t n = vk_kind_storage_buffers(vk, (vk_kind)k);
        if (n <= most)
            continue;
        t->unfit_kinds |= 1u << k;
        if (k != KIND_FLASH && k != KIND_FLASH_CPU && n > need)
            need = n, worst = (vk_kind)k;
    }
    if (worst != KIND_COUNT) {
        uint32_t i = 0; /* the first kernel of that kind names it */
        while (vk_kernel_defs[i].kind != worst)
            i++;
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_context_create: the device's "
                           "maxPerStageDescriptorStorageBuffers is %u: the %s kernel binds %u "
                           "storage buffers (vkmha needs %u)",
                           most, vk_kernel_defs[i].name, need, need);
    }
    return VKMHA_SUCCESS;
}

vkmha_status vk_tuning_init(vk_state *vk, const vk_tuning_desc *desc)
{
    vk_tuning *t = &vk->tuning;
    const vkmha_tile_config *override = desc->tile;
    t->use_subgroup = vk->info.subgroup_arithmetic && !desc->no_subgroup_ops;
    t->native16 = vk->storage16;
    t->flash_gpu_blocks = desc->fused_kernel == VKMHA_FUSED_KERNEL_SHARED_GPU_BLOCKS;
    t->fused_kernel = t->flash_gpu_blocks ? VKMHA_FUSED_KERNEL_SHARED : desc->fused_kernel;
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
    /* The cooperative matmul: forced, or by default on GPUs (CPU devices
     * emulate the matrix units). */
    const bool cm2_forced = have && et.variant == VKMHA_MATMUL_VARIANT_COOPERATIVE2;
    vk->tuning.tile_cm2 = cm2_forced ? et : (vkmha_tile_config){0};
    vk->tuning.tile_cm2.variant = VKMHA_MATMUL_VARIANT_COOPERATIVE2;
    bool cm2_limits;
    const char *cm2_why = cm2_tile_check(vk, &vk->tuning.tile_cm2, &cm2_limits);
    vk->tuning.cm2_matmul = !cm2_why && (cm2_forced || !cpu);
    if (!vk->tuning.cm2_matmul)
        vk->tuning.tile_cm2 = (vkmha_tile_config){0};
    if (cm2_why && cm2_forced && !override && cm2_env_ignored(vk))
        vkmha__log(vk->ctx, VKMHA_LOG_INFO, VKMHA_SUCCESS,
                   "vkmha_context_create: VKMHA_MATMUL_TILE=coopmat2 ignored: %s",
                   cm2_env_ignored(vk));
    else if (cm2_why && cm2_forced)
        return vkmha__fail(vk->ctx,
                           cm2_limits ? VKMHA_ERROR_UNSUPPORTED : VKMHA_ERROR_INVALID_ARGUMENT,
                           "vkmha_context_create: %s (coopmat2 %u,%u,%u, workgroup %u): %s",
                           what, et.bm, et.bn, et.bk, et.workgroup_size, cm2_why);
    /* Forcing either cooperative kernel forces that one: the other is off
     * (on GPUs both are on, the cooperative2 one first). */
    const bool coop_forced = have && et.variant == VKMHA_MATMUL_VARIANT_COOPERATIVE;
    vk->tuning.tile_coop = coop_forced ? et : (vkmha_tile_config){0};
    vk->tuning.tile_coop.variant = VKMHA_MATMUL_VARIANT_COOPERATIVE;
    bool limits;
    const char *coop_why = coop_tile_check(vk, &vk->tuning.tile_coop, &limits);
    vk->tuning.coop_matmul = !coop_why && (coop_forced || (!cpu && !cm2_forced));
    vk->tuning.coop_forced = (coop_forced && vk->tuning.coop_matmul) ||
                             (cm2_forced && vk->tuning.cm2_matmul);
    if (!vk->tuning.coop_matmul) /* its kernel unavailable */
        vk->tuning.tile_coop = (vkmha_tile_config){0};
    /* The environment's request skips contexts that cannot have matrix
     * units (coop_env_ignored): they keep their matmul. */
    const char *ignored = override ? NULL : coop_env_ignored(vk);
    if (coop_why && coop_forced && ignored)
        vkmha__log(vk->ctx, VKMHA_LOG_INFO, VKMHA_SUCCESS,
                   "vkmha_context_create: VKMHA_MATMUL_TILE=cooperative ignored: %s", ignored);
    else if (coop_why && coop_forced)
        return vkmha__fail(vk->ctx,
                           limits ? VKMHA_ERROR_UNSUPPORTED : VKMHA_ERROR_INVALID_ARGUMENT,
                           "vkmha_context_create: %s (cooperative %u,%u,%u,%u,%u): %s", what,
                           et.bm, et.bn, et.bk, et.tm, et.tn, coop_why);
    if (have && !coop_forced && !cm2_forced) {
        if (et.variant == VKMHA_MATMUL_VARIANT_AUTO)
            et.variant = cpu ? VKMHA_MATMUL_VARIANT_REGISTER : VKMHA_MATMUL_VARIANT_SHARED;
        const char *why = tile_check(&vk->info, &et, &limits);
        if (why)
            return vkmha__fail(vk->ctx,
                               limits ? VKMHA_ERROR_UNSUPPORTED : VKMHA_ERROR_INVALID_ARGUMENT,
                               "vkmha_context_create: %s (%s %u,%u,%u,%u,%u): %s", what,
                               et.variant == VKMHA_MATMUL_VARIANT_REGISTER ? "register"
                               : et.variant == VKMHA_MATMUL_VARIANT_SHARED ? "shared"
                                                                          : "?",
                               et.bm, et.bn, et.bk, et.tm, et.tn, why);
        vk->tuning.tile_large = vk->tuning.tile_small = et;
    } else if (!pick_tile(&vk->info, cpu ? cpu_large_tiles : large_tiles,
                   cpu ? VKMHA_ARRAY_LEN(cpu_large_tiles) : VKMHA_ARRAY_LEN(large_tiles),
                   &vk->tuning.tile_large) ||
        !pick_tile(&vk->info, cpu ? cpu_small_tiles : small_tiles,
                   cpu ? VKMHA_ARRAY_LEN(cpu_small_tiles) : VKMHA_ARRAY_LEN(small_tiles),
                   &vk->tuning.tile_small))
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_context_create: no matmul tile fits this device's limits");
    /* CPU devices, unless a tile was forced (other than the cooperative
     * one, which fp16 products take): lanes over columns for A of a
     * few rows. A workgroup of 8 lanes of 4 columns each, one row: measured
     * on lavapipe at 1 x 4096 x 4096 (a decode step's projection) against
     * the small tile's lanes over rows, which then all repeat row 0. */
    vk->tuning.tile_gemv = (vkmha_tile_config){0};
    if (cpu && (!have || coop_forced || cm2_forced) &&
        vk->tuning.tile_small.variant == VKMHA_MATMUL_VARIANT_REGISTER &&
        vk->info.max_workgroup_invocations >= 8 && vk->info.max_workgroup_size[0] >= 8)
        vk->tuning.tile_gemv = (vkmha_tile_config){.bm = 1, .bn = 32, .bk = 4, .tm = 1, .tn = 4,
                                            .workgroup_size = 8,
                                            .variant = VKMHA_MATMUL_VARIANT_REGISTER};
    /* GPUs: the few-rows matmul of op T (a decode step's projections) reads
     * each weight once: 8 output columns per workgroup of 128 (4096 columns:
     * 512 workgroups), a subgroup reduction along K. It needs subgroup
     * arithmetic. CPU devices keep their own (tile_gemv) unless a
     * shared-variant tile is forced, which gives them the GPU's choices. */
    const bool gpu_shapes = !cpu || (have && et.variant == VKMHA_MATMUL_VARIANT_SHARED);
    vk->tuning.tile_gemv_gpu = (vkmha_tile_config){0};
    if (gpu_shapes && vk->tuning.use_subgroup)
        vk->tuning.tile_gemv_gpu = (vkmha_tile_config){
            .bm = VK_GPU_GEMV_ROWS, .bn = 8, .bk = 4, .tm = 1, .tn = 1,
            .workgroup_size = pick_workgroup(&vk->info, 128),
            .variant = VKMHA_MATMUL_VARIANT_SHARED};
    /* The register variant reads A and B as vec4 texel buffers where it can
     * (every device supports R32G32B32A32_SFLOAT uniform texel buffers):
     * buffers get their views when they fit maxTexelBufferElements texels
     * (vk_buffer_create), and operands without a view (wrapped tensors,
     * bf16, buffers past the limit: NVIDIA's 2^27 texels are 2 GiB of vec4s
     * against a 4 GiB maxStorageBufferRange) take the storage-buffer reads. */
    if (vk->tuning.tile_large.variant == VKMHA_MATMUL_VARIANT_REGISTER) {
        vk->tuning.matmul_texel = true;
        /* fp16 as vec4 texels (R16G16B16A16_SFLOAT, required of every
         * device for uniform texel buffers; checked anyway). */
        VkFormatProperties fh, fu;
        vk->vki.GetPhysicalDeviceFormatProperties(vk->phys, VK_FORMAT_R16G16B16A16_SFLOAT, &fh);
        vk->vki.GetPhysicalDeviceFormatProperties(vk->phys, VK_FORMAT_R32G32_UINT, &fu);
        vk->tuning.texel16 = (fh.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) &&
                      (fu.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT);
    }
    vk->tuning.reduce_wg = pick_workgroup(&vk->info, 128);
    vk->tuning.elementwise_wg = pick_workgroup(&vk->info, 256);
    /* CPU-shaped row kernels (shaders/softmax_cpu.comp, heads_cpu.comp,
     * layernorm_cpu.comp) on CPU devices, with texel reads: measured on a
     * 2-core lavapipe (docs/PERFORMANCE.md, "Small kernels"); 16 rows per
     * workgroup was as fast as 8, 32 or 64 within the noise. Their layouts
     * need the texel views, so they go with the register matmul. The
     * environment variable VKMHA_ROW_KERNELS, for tests and experiments:
     * "gpu" keeps the workgroup-per-row kernels, "storage" the CPU-shaped
     * ones with storage-buffer reads only (as with wrapped tensors). */
    const char *rk = getenv("VKMHA_ROW_KERNELS");
    bool rows_cpu = cpu && vk->tuning.matmul_texel && !(rk && !strcmp(rk, "gpu"));
    vk->tuning.cpu_rows_wg = rows_cpu ? pick_workgroup(&vk->info, 16) : 0;
    vk->tuning.row_texel = rows_cpu && !(rk && !strcmp(rk, "storage"));
    for (uint32_t c = 0; c < VK_FLASH_CLASSES; c++) {
        if (!pick_flash(&vk->info, vk_flash_dim(c), cpu && !vk->tuning.flash_gpu_blocks, &vk->tuning.flash[c]))
            vk->tuning.flash[c] = (vk_flash_config){0}; /* that class runs unfused */
        vk->tuning.flash_cpu[c] = cpu && vk->tuning.matmul_texel ? pick_flash_cpu(&vk->info, vk_flash_dim(c))
                                                   : (vk_flash_config){0};
    }
    const vkmha_status fit = fit_storage_buffers(vk);
    if (fit)
        return fit;
    if (vk->tuning.fused_kernel == VKMHA_FUSED_KERNEL_REGISTER && !vk->tuning.flash_cpu[0].workgroup_size)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_context_create: desc->debug->fused_kernel: the CPU-shaped "
                           "fused kernel runs on CPU devices only");
    /* The cooperative fused kernel: on GPUs with matrix units, and where
     * desc->debug->fused_kernel or VKMHA_FUSED_KERNEL forces it. */
    const char *fk = getenv("VKMHA_FUSED_KERNEL");
    const bool fk_env = desc->fused_kernel == VKMHA_FUSED_KERNEL_AUTO && fk && *fk;
    if (fk_env && strcmp(fk, "cooperative") != 0)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                           "vkmha_context_create: the environment variable VKMHA_FUSED_KERNEL "
                           "is \"%s\": cooperative or unset",
                           fk);
    const bool flash_coop_forced =
        desc->fused_kernel == VKMHA_FUSED_KERNEL_COOPERATIVE || fk_env;
    const bool flash_coop = vk->coopmat && (flash_coop_forced || !cpu);
    for (uint32_t c = 0; c < VK_FLASH_CLASSES; c++)
        if (!flash_coop || !pick_flash_coop(vk, vk_flash_dim(c), &vk->tuning.flash_coop[c]))
            vk->tuning.flash_coop[c] = (vk_flash_config){0}; /* that class: flash.comp */
    if (flash_coop_forced && !vk->coopmat) {
        if (fk_env && coop_env_ignored(vk))
            vkmha__log(vk->ctx, VKMHA_LOG_INFO, VKMHA_SUCCESS,
                       "vkmha_context_create: VKMHA_FUSED_KERNEL=cooperative ignored: %s",
                       coop_env_ignored(vk));
        else
            return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                               "vkmha_context_create: %s: the cooperative-matrix fused kernel "
                               "needs matrix units (VK_KHR_cooperative_matrix with fp16 "
                               "shapes) and a build with their shaders",
                               fk_env ? "the environment variable VKMHA_FUSED_KERNEL"
                                      : "desc->debug->fused_kernel");
    }
    if (fk_env && vk->coopmat)
        vk->tuning.fused_kernel = VKMHA_FUSED_KERNEL_COOPERATIVE;
    /* Split-K below this many workgroups; Vulkan does not report the number
     * of cores, so this is per device type: enough for large GPUs, and a few
     * per thread for CPU devices. */
    vk->tuning.flash_fill_groups = cpu ? 32 : 256;
    if ((uint64_t)vk->tuning.reduce_wg * sizeof(float) > vk->info.max_shared_memory)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "vkmha_context_create: too little shared memory");
    return VKMHA_SUCCESS;
}

void vk_tuning_disable(vk_state *vk, uint32_t path)
{
    /* A kernel's path (a row of src/vk_kernels.c) needs nothing more than
     * its bit: vk_pipe_available reads it. */
    if (path == VKMHA_PATH_SUBGROUP) { /* the GPUs' GEMV reduces through subgroups */
        vk->tuning.use_subgroup = false;
        vk->tuning.tile_gemv_gpu.workgroup_size = 0;
    }
    if (path == VKMHA_PATH_NATIVE_16BIT)
        vk->tuning.native16 = false;
    /* Sparse binding: vk_sparse_tensors reads the bit. */
    vk->tuning.disabled_paths |= path;
}

vkmha_fused_kernel vk_tuning_force_kernel(vk_state *vk, vkmha_fused_kernel kernel)
{
    const vkmha_fused_kernel before = vk->tuning.fused_kernel;
    vk->tuning.fused_kernel = kernel;
    return before;
}
