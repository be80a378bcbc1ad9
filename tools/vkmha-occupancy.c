/* vkmha-occupancy: every compute pipeline vkmha builds, compiled for AMD GPUs
 * without the hardware, with its registers, shared memory (LDS), scratch,
 * spills and an estimate of its occupancy.
 *
 * Mesa's RADV driver with RADV_FORCE_FAMILY=<family> exposes a "null"
 * device of that family when no AMD GPU is present: it compiles pipelines
 * (ACO, the same compiler as on the hardware) but has no memory types and no
 * fences, and it crashes on vkDeviceWaitIdle and queue submissions. The tool
 * therefore points the Vulkan loader at RADV alone (VK_ICD_FILENAMES), sets
 * RADV_FORCE_FAMILY per family, and uses a compile-only context
 * (vkmha__context_create_compile_only, src/internal.h): the library's own
 * device setup, tile and block choice and vk_pipeline_get, with
 * VK_KHR_pipeline_executable_properties statistics, and nothing that runs.
 * It is linked with the library's objects for that internal entry point, so
 * the pipelines and specialization constants are exactly the library's.
 *
 * Mesa 26 (tools/mesa26's root) has no null device any more: there Mesa's
 * amdgpu drm-shim, preloaded, poses as one GPU (AMDGPU_GPU_ID: navi21 or
 * navi31, which is gfx1100), and this tool compiles for that family only;
 * tools/mesa26's `bin/run-radv GPU PROGRAM` sets it all up. Its RADV has
 * VK_KHR_cooperative_matrix on gfx1100, so the cooperative-matrix kernels
 * are compiled there (the default on GPUs).
 *
 * Contexts: the default one (subgroup reductions where the device has them)
 * and one with VKMHA_CONTEXT_NO_SUBGROUP_OPS; a pipeline identical in both
 * (same SPIR-V variant and specialization constants) is listed once. Each
 * pipeline is compiled in fp32 and with its typed buffers in fp16 and bf16
 * ("DT=f16", "DT=bf16": RADV has 16-bit storage, so the NATIVE16 shaders).
 *
 * Occupancy model (per family, the numbers in `families` below). A workgroup
 * runs on one "block" of SIMDs that share an LDS:
 *   - GCN (vega20, gfx9): the compute unit (CU): 4 SIMD16 running wave64,
 *     64 KiB of LDS.
 *   - RDNA (navi21 gfx10.3, gfx1100 gfx11): the workgroup processor (WGP) in
 *     WGP mode, which RADV uses for compute shaders: 2 CUs, 4 SIMD32 (a wave64
 *     takes two passes), 128 KiB of LDS (at most 64 KiB per workgroup). A
 *     "per CU" figure is half the WGP's, so it can end in .5.
 * Per SIMD: at most max_waves waves; a VGPR budget per lane counted in the
 * wave size's registers (gfx9: 256 for wave64; gfx10.3: 1024 for wave32, 512
 * for wave64; gfx1100, which has 1.5x the VGPRs of gfx10.3: 1536 / 768),
 * allocated in granules (gfx9: 4; gfx10.3: 16 / 8; gfx1100: 24 / 12); on gfx9
 * also 800 SGPRs in granules of 16 (RDNA gives every wave a fixed SGPR set).
 * LDS is allocated in granules of 512 bytes (gfx9) or 1024 (gfx10.3 and
 * later). A block holds at most 16 (CU) or 32 (WGP) workgroups of more than
 * one wave (barrier resources). Then, for a workgroup of n waves:
 *   waves/SIMD by registers  r = min(max_waves,
 *                                    floor(VGPR budget / align(VGPRs, granule)),
 *                                    floor(800 / align(SGPRs, 16))   [gfx9])
 *   workgroups per block     g = min(floor(SIMDs * r / n),
 *                                    floor(block LDS / align(LDS, granule)),
 *                                    barrier limit                  [n > 1])
 *   waves per SIMD = g * n / SIMDs;  workgroups per CU = g / CUs per block.
 * The register bound assumes the waves of resident workgroups can fill every
 * SIMD of the block (the hardware places them round-robin), so it is an
 * upper bound; "limit" names the bound that decides g. Scratch and spills
 * are reported, not modelled: any spill is a bug to fix (tests/meson.build's
 * test 'occupancy' fails on one). The test also fails where fused attention
 * at d64 or d128 fits fewer than two workgroups per CU on navi21 or vega20
 * (the blocks in src/vk_tuning.c are chosen for that; docs/PERFORMANCE.md),
 * and where a pipeline's LDS is not the shared_bytes that
 * vkmha_context_get_kernels reports for it, up to the family's LDS granule.
 * Sources: LLVM's AMDGPU target, llvm/lib/Target/AMDGPU/Utils/AMDGPUBaseInfo.cpp
 * (getMaxWavesPerEU, getTotalNumVGPRs, getVGPRAllocGranule, getTotalNumSGPRs,
 * getSGPRAllocGranule, getLocalMemorySize, getEUsPerCU, getMaxWorkGroupsPerCU;
 * gfx1100's 1.5x VGPRs: FeatureGFX11FullVGPRs in AMDGPU.td), and Mesa's
 * src/amd/common/ac_gpu_info.c (lds_size_per_workgroup "128KB in WGP mode",
 * lds_encode_granularity 512, lds_alloc_granularity 1024 from gfx10.3). The
 * statistics are RADV's (Mesa 22.3, or 26.2 through the shim): "VGPRs" and "SGPRs" allocated per
 * wave, "LDS size" per workgroup and "Scratch size" per wave in bytes. */
#include "vk_internal.h"

/* --tap is the test suite's test 'occupancy': the suite's TAP helpers, and
 * t_pin_libraries so that sanitizer reports name the driver's frames. */
#include "util.h"
#include "cli.h"
#include "kernel_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

typedef struct family {
    const char *name; /* RADV_FORCE_FAMILY */
    const char *shim; /* the amdgpu drm-shim's AMDGPU_GPU_ID for it (NULL: none) */
    const char *gfx;  /* ISA generation, for the table */
    bool rdna;        /* block = WGP (2 CUs, 4 SIMD32), else CU (4 SIMD16) */
    uint32_t max_waves;           /* per SIMD */
    uint32_t vgprs_wave32;        /* VGPR budget per SIMD in wave32 registers (0: no wave32) */
    uint32_t vgprs_wave64;        /* ... in wave64 registers */
    uint32_t vgpr_granule32, vgpr_granule64;
    uint32_t sgprs, sgpr_granule; /* 0: SGPRs do not limit occupancy */
    uint32_t lds_bytes;           /* per block */
    uint32_t lds_granule;
    uint32_t max_groups;          /* workgroups of more than one wave per block */
} family;

static const family families[] = {
    {"navi21", "navi21", "gfx10.3", true, 16, 1024, 512, 16, 8, 0, 0, 128 * 1024, 1024, 32},
    {"gfx1100", "navi31", "gfx11", true, 16, 1536, 768, 24, 12, 0, 0, 128 * 1024, 1024, 32},
    {"vega20", NULL, "gfx9", false, 10, 0, 256, 0, 4, 800, 16, 64 * 1024, 512, 16},
};

typedef struct row {
    const family *fam;
    char name[32], shader[32], spec[96];
    uint32_t workgroup_size, wave, vgprs, sgprs, spilled_vgprs, spilled_sgprs;
    uint64_t lds, scratch, code;
    uint32_t shared_bytes; /* the kernel's, as vkmha_context_get_kernels lists it */
    double waves_per_simd, groups_per_cu;
    const char *limit;
} row;

static uint32_t align_up(uint64_t v, uint32_t g)
{
    return g ? (uint32_t)((v + g - 1) / g * g) : (uint32_t)v;
}

/* The model above, for one pipeline. */
static void estimate(row *r)
{
    const family *f = r->fam;
    const uint32_t simds = 4, cus = f->rdna ? 2 : 1;
    const bool w32 = r->wave == 32;
    const uint32_t budget = w32 ? f->vgprs_wave32 : f->vgprs_wave64;
    const uint32_t granule = w32 ? f->vgpr_granule32 : f->vgpr_granule64;
    const uint32_t n = (r->workgroup_size + r->wave - 1) / r->wave;
    uint32_t waves = f->max_waves;
    r->limit = "waves";
    if (r->vgprs && budget / align_up(r->vgprs, granule) < waves) {
        waves = budget / align_up(r->vgprs, granule);
        r->limit = "VGPRs";
    }
    if (f->sgprs && r->sgprs && f->sgprs / align_up(r->sgprs, f->sgpr_granule) < waves) {
        waves = f->sgprs / align_up(r->sgprs, f->sgpr_granule);
        r->limit = "SGPRs";
    }
    uint32_t groups = simds * waves / n;
    if (r->lds && f->lds_bytes / align_up(r->lds, f->lds_granule) < groups) {
        groups = f->lds_bytes / align_up(r->lds, f->lds_granule);
        r->limit = "LDS";
    }
    if (n > 1 && f->max_groups < groups) {
        groups = f->max_groups;
        r->limit = "barriers";
    }
    r->waves_per_simd = (double)groups * n / simds;
    r->groups_per_cu = (double)groups / cus;
}

static uint64_t stat(const VkPipelineExecutableStatisticKHR *s, uint32_t n, const char *name,
                     bool *missing)
{
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(s[i].name, name) != 0)
            continue;
        switch (s[i].format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
            return s[i].value.u64;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
            return s[i].value.i64 < 0 ? 0 : (uint64_t)s[i].value.i64;
        default:
            break;
        }
    }
    *missing = true;
    return 0;
}

typedef struct rows {
    row *v;
    size_t n, cap;
} rows;

static row *push_row(rows *rs)
{
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? 2 * rs->cap : 64;
        row *v = realloc(rs->v, cap * sizeof *v);
        if (!v)
            return NULL;
        rs->v = v;
        rs->cap = cap;
    }
    memset(&rs->v[rs->n], 0, sizeof rs->v[0]);
    return &rs->v[rs->n++];
}

/* The validation layer's messages (and errors) on stderr. */
static void log_stderr(void *user, vkmha_log_level level, vkmha_status status,
                       const char *message)
{
    (void)user;
    (void)status;
    if (level >= VKMHA_LOG_WARN)
        fprintf(stderr, "vkmha-occupancy: %s\n", message);
}

/* Appends the pipelines of one context of family f not already listed
 * (from `first` on). false with a message on stderr on failure. */
static bool add_context(const family *f, uint32_t flags, bool validate, rows *rs,
                        size_t first, bool *validation_clean)
{
    vkmha_context_desc cd = {0};
    cd.flags = flags;
    cd.enable_validation = validate;
    cd.log = log_stderr;
    vkmha_context *ctx;
    vkmha_status st = vkmha__context_create_compile_only(&cd, &ctx);
    if (st) {
        fprintf(stderr, "vkmha-occupancy: %s: no compile-only context: %s\n", f->name,
                vkmha_status_string(st));
        return false;
    }
    vkmha_context_info info;
    vkmha_context_get_info(ctx, &info);
    t_pin_libraries();
    /* RADV names its null device "Null hardware (RADV NAVI21)" (Mesa 22.3),
     * the drm-shim's GPU "AMD Radeon Graphics (RADV NAVI31)"; anything else
     * means the loader picked another driver. */
    char want[64];
    snprintf(want, sizeof want, "RADV %s", getenv("AMDGPU_GPU_ID") ? f->shim : f->name);
    bool ok = false;
    for (char *c = want; *c; c++)
        *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
    if (!strstr(info.device.name, want)) {
        fprintf(stderr, "vkmha-occupancy: %s: the Vulkan device is \"%s\", not RADV's null "
                        "device for %s\n", f->name, info.device.name, f->name);
        goto done;
    }
    /* Every pipeline in fp32, and with every typed buffer fp16 and bf16
     * (VK_DT per buffer index, shaders/typed.glsl; the 16-bit elements of
     * RADV's native 16-bit storage); the matmuls also with a quantized B
     * (buffer 1: 4-bit codes with fp32 A, int8 codes with fp16 A;
     * shaders/quant.glsl), but the cooperative2 kernel, which takes none,
     * and the cooperative one's op N pipeline of int8 codes
     * (VK_VARIANT_QUANT_N: its dequantized halves); the workgroup-shared
     * fused attention over an 8-bit KV cache's rows (k and v U8:
     * shaders/kv_q8.glsl; its cooperative variant with fp16 q), and the
     * append's quantizing copy into them (kv_q8 with a U8 y:
     * shaders/kv_q8.comp), only so. */
    enum { N_DTS = 8 };
    struct {
        uint32_t dtypes;
        const char *name;
        uint32_t variant;
    } dts[N_DTS] = {{0, "", 0}, {0, " DT=f16", 0}, {0, " DT=bf16", 0},
                    {VK_DT(1, VK_DTYPE_U4), " DT=f32,b=q4", 0}, {0, " DT=f16,b=q8", 0},
                    {VK_DT(1, VKMHA_DTYPE_U8) | VK_DT(2, VKMHA_DTYPE_U8), " DT=f32,kv=q8", 0},
                    {0, " DT=f16,kv=q8", 0}, {0, " DT=f16,b=q8,op N", VK_VARIANT_QUANT_N}};
    for (uint32_t i = 0; i < VK_DT_SLOTS; i++) {
        dts[1].dtypes |= VK_DT(i, VKMHA_DTYPE_F16);
        dts[2].dtypes |= VK_DT(i, VKMHA_DTYPE_BF16);
        dts[4].dtypes |= VK_DT(i, i == 1 ? VK_DTYPE_I8 : VKMHA_DTYPE_F16);
        dts[6].dtypes |= VK_DT(i, i == 1 || i == 2 ? VKMHA_DTYPE_U8 : VKMHA_DTYPE_F16);
    }
    dts[7].dtypes = dts[4].dtypes; /* the same buffers, op N's variant */
    const uint32_t n_pipes = vk_pipe_count();
    for (uint32_t q = 0; q < N_DTS * n_pipes; q++) {
        const vk_pipe p = vk_pipe_at(q % n_pipes);
        const uint32_t d = q / n_pipes;
        vk_pipe_info pi;
        vk_pipe_info_get(ctx->vk, p, &pi);
        const bool q8_rows = p.kernel == KERNEL_FLASH || p.kernel == KERNEL_KV_Q8;
        if (!pi.available || (p.kernel == KERNEL_KV_Q8 && d != 5) ||
            (d == 5 && !q8_rows) || (d == 6 && p.kernel != KERNEL_FLASH_COOP) ||
            (d >= 3 && d < 5 &&
             (vk_pipe_kind(p) != KIND_MATMUL || p.kernel == KERNEL_MATMUL_CM2)) ||
            (d == 7 && p.kernel != KERNEL_MATMUL_COOP))
            continue;
        char spec[96] = "";
        size_t len = 0;
        for (uint32_t i = 0; i < pi.n_spec && len < sizeof spec; i++)
            len += (size_t)snprintf(spec + len, sizeof spec - len, "%s%s=%u", i ? " " : "",
                                    pi.spec_names[i], pi.spec[i]);
        if (len < sizeof spec)
            snprintf(spec + len, sizeof spec - len, "%s", dts[d].name);
        bool seen = false;
        for (size_t i = first; i < rs->n && !seen; i++)
            seen = !strcmp(rs->v[i].shader, pi.shader) && !strcmp(rs->v[i].spec, spec);
        if (seen)
            continue;
        VkPipelineExecutableStatisticKHR s[64];
        uint32_t n = VKMHA_ARRAY_LEN(s), wave = 0;
        if ((st = vk_pipeline_statistics(ctx->vk, p, dts[d].dtypes, dts[d].variant, &wave, s,
                                         &n))) {
            fprintf(stderr, "vkmha-occupancy: %s %s: %s\n", f->name, pi.name,
                    vkmha_context_last_error(ctx));
            goto done;
        }
        row *r = push_row(rs);
        if (!r) {
            fprintf(stderr, "vkmha-occupancy: out of memory\n");
            goto done;
        }
        bool missing = false;
        r->fam = f;
        snprintf(r->name, sizeof r->name, "%s", pi.name);
        snprintf(r->shader, sizeof r->shader, "%s", pi.shader);
        snprintf(r->spec, sizeof r->spec, "%s", spec);
        r->workgroup_size = pi.workgroup_size;
        vkmha_kernel_info k;
        if (!kernel_find(ctx, pi.name, &k) || !k.available) {
            fprintf(stderr, "vkmha-occupancy: %s %s: not in vkmha_context_get_kernels\n",
                    f->name, pi.name);
            goto done;
        }
        /* The cooperative matmul of a quantized op N declares its lo halves
         * too. */
        r->shared_bytes = d == 7 ? (uint32_t)vk_matmul_coop_shared_bytes(
                                       &ctx->vk->tuning.tile_coop, true)
                                 : k.shared_bytes;
        r->wave = wave;
        r->vgprs = (uint32_t)stat(s, n, "VGPRs", &missing);
        r->sgprs = (uint32_t)stat(s, n, "SGPRs", &missing);
        r->spilled_vgprs = (uint32_t)stat(s, n, "Spilled VGPRs", &missing);
        r->spilled_sgprs = (uint32_t)stat(s, n, "Spilled SGPRs", &missing);
        r->lds = stat(s, n, "LDS size", &missing);
        r->scratch = stat(s, n, "Scratch size", &missing);
        r->code = stat(s, n, "Code size", &missing);
        if (missing || (wave != 32 && wave != 64)) {
            fprintf(stderr, "vkmha-occupancy: %s %s: the driver's statistics lack VGPRs, "
                            "SGPRs, spills, LDS, scratch or code size, or its wave size (%u) "
                            "is neither 32 nor 64\n", f->name, pi.name, wave);
            goto done;
        }
        estimate(r);
    }
    ok = true;
done:
    vkmha_context_get_info(ctx, &info);
    if (info.validation_messages)
        *validation_clean = false;
    vkmha_context_destroy(ctx);
    return ok;
}

/* RADV's ICD manifest: radeon_icd.<machine>.json in the usual directories. */
static bool find_icd(char *out, size_t cap)
{
    static const char *const dirs[] = {"/usr/share/vulkan/icd.d", "/usr/local/share/vulkan/icd.d",
                                       "/etc/vulkan/icd.d"};
    struct utsname u;
    if (uname(&u) != 0)
        return false;
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(dirs); i++) {
        snprintf(out, cap, "%s/radeon_icd.%s.json", dirs[i], u.machine);
        if (access(out, R_OK) == 0)
            return true;
    }
    return false;
}

static void print_table(const rows *rs, bool csv)
{
    if (csv)
        printf("family,gfx,pipeline,shader,specialization,workgroup,wave,vgprs,sgprs,"
               "lds_bytes,scratch_bytes,spilled_vgprs,spilled_sgprs,code_bytes,"
               "waves_per_simd,workgroups_per_cu,limit\n");
    else
        printf("%-8s %-17s %-14s %-41s %4s %4s %5s %5s %6s %7s %9s %6s %6s %s\n", "family",
               "pipeline", "shader", "specialization", "wg", "wave", "VGPRs", "SGPRs",
               "LDS B", "scratch", "spill V/S", "w/SIMD", "WG/CU", "limit");
    for (size_t i = 0; i < rs->n; i++) {
        const row *r = &rs->v[i];
        if (csv) {
            printf("%s,%s,%s,%s,%s,%u,%u,%u,%u,%llu,%llu,%u,%u,%llu,%.2f,%.2f,%s\n",
                   r->fam->name, r->fam->gfx, r->name, r->shader, r->spec, r->workgroup_size,
                   r->wave, r->vgprs, r->sgprs, (unsigned long long)r->lds,
                   (unsigned long long)r->scratch, r->spilled_vgprs, r->spilled_sgprs,
                   (unsigned long long)r->code, r->waves_per_simd, r->groups_per_cu, r->limit);
            continue;
        }
        char spills[24];
        snprintf(spills, sizeof spills, "%u/%u", r->spilled_vgprs, r->spilled_sgprs);
        printf("%-8s %-17s %-14s %-41s %4u %4u %5u %5u %6llu %7llu %9s %6.2f %6.1f %s\n",
               r->fam->name, r->name, r->shader, r->spec, r->workgroup_size, r->wave, r->vgprs,
               r->sgprs, (unsigned long long)r->lds, (unsigned long long)r->scratch, spills,
               r->waves_per_simd, r->groups_per_cu, r->limit);
    }
}

int main(int argc, char **argv)
{
    const family *chosen[VKMHA_ARRAY_LEN(families)];
    size_t n_chosen = 0, n_names = 0;
    const char *icd = NULL, *names[16];
    bool csv = false, tap = false, validate = false;
    static const char *const family_names[] = {"navi21", "gfx1100", "vega20", NULL};
    const cli_opt opts[] = {
        CLI_CHOICES("--family", "NAME", names, n_names, family_names,
                    "the GPU families to compile for (default: all three)"),
        CLI_STR("--icd", "PATH",
                icd, "RADV's ICD manifest (default: radeon_icd.<machine>.json under "
                     "/usr/share/vulkan/icd.d, /usr/local/share/..., /etc/vulkan/...)"),
        CLI_FLAG("--csv", csv, "comma-separated values instead of the table"),
        CLI_FLAG("--tap", tap,
                 "TAP: one case per pipeline, failing on any spill or scratch (and fused "
                 "attention at d64 / d128 below 2 workgroups per CU on navi21 or vega20)"),
        CLI_FLAG("--validate", validate,
                 "enable the Vulkan validation layer; any message fails"),
    };
    CLI_PARSE("vkmha-occupancy",
              "Compiles every compute pipeline vkmha builds for AMD GPUs on Mesa's RADV\n"
              "without the hardware (RADV_FORCE_FAMILY) and prints registers, LDS, scratch,\n"
              "spills and estimated occupancy (the model is in tools/vkmha-occupancy.c).\n"
              "Exit status: 0 on success, 1 when a family cannot be compiled for (or, with\n"
              "--tap, a case fails), 2 on bad usage.",
              opts, argc, argv);
    for (size_t i = 0; i < n_names; i++) {
        const family *f = NULL;
        for (size_t k = 0; k < VKMHA_ARRAY_LEN(families); k++)
            if (!strcmp(families[k].name, names[i]))
                f = &families[k];
        bool dup = false;
        for (size_t k = 0; k < n_chosen; k++)
            dup |= chosen[k] == f;
        if (f && !dup)
            chosen[n_chosen++] = f;
    }
    if (csv && tap) {
        fprintf(stderr, "vkmha-occupancy: --csv and --tap exclude each other\n");
        return 2;
    }
    if (!n_chosen)
        for (size_t k = 0; k < VKMHA_ARRAY_LEN(families); k++)
            chosen[n_chosen++] = &families[k];

    /* Mesa 26 has no null device: its amdgpu drm-shim (LD_PRELOAD, set by
     * the caller: tools/mesa26's bin/run-radv) poses as the one GPU that
     * AMDGPU_GPU_ID names, and the caller's VK_ICD_FILENAMES is RADV's. */
    const char *shim = getenv("AMDGPU_GPU_ID");
    if (shim) {
        const family *f = NULL;
        for (size_t k = 0; k < VKMHA_ARRAY_LEN(families); k++)
            if (families[k].shim && !strcmp(families[k].shim, shim))
                f = &families[k];
        if (!f || (n_names && (n_chosen != 1 || chosen[0] != f))) {
            fprintf(stderr, "vkmha-occupancy: AMDGPU_GPU_ID=%s (the drm-shim's GPU) is none of "
                            "the families, or not the one --family names\n", shim);
            return 2;
        }
        chosen[0] = f, n_chosen = 1;
        if (!icd)
            icd = getenv("VK_ICD_FILENAMES");
    }
    /* RADV alone, whatever else is installed: never a silent fallback to
     * another driver (add_context checks the device's name too). */
    char found[512];
    if (!icd && find_icd(found, sizeof found))
        icd = found;
    if (!icd || access(icd, R_OK) != 0) {
        const char *why = icd ? icd : "radeon_icd.<machine>.json not found";
        if (tap) {
            t_report(false, "RADV's ICD manifest (%s): install Debian's mesa-vulkan-drivers "
                            "(tools/install-deps)", why);
            t_finish();
        }
        fprintf(stderr, "vkmha-occupancy: no RADV ICD manifest (%s): install Debian's "
                        "mesa-vulkan-drivers, or pass --icd\n", why);
        return 1;
    }
    setenv("VK_ICD_FILENAMES", icd, 1);
    unsetenv("VK_DRIVER_FILES"); /* newer loaders prefer it over VK_ICD_FILENAMES */

    rows rs = {0};
    bool ok = true, clean = true;
    size_t first_of[VKMHA_ARRAY_LEN(families)], end_of[VKMHA_ARRAY_LEN(families)];
    bool fam_ok[VKMHA_ARRAY_LEN(families)];
    for (size_t k = 0; k < n_chosen; k++) {
        const family *f = chosen[k];
        if (!shim)
            setenv("RADV_FORCE_FAMILY", f->name, 1);
        first_of[k] = rs.n;
        fam_ok[k] = add_context(f, 0, validate, &rs, first_of[k], &clean) &&
                    add_context(f, VKMHA_CONTEXT_NO_SUBGROUP_OPS, validate, &rs, first_of[k],
                                &clean);
        end_of[k] = rs.n;
        ok &= fam_ok[k];
    }

    int status = ok ? 0 : 1;
    if (!tap) {
        print_table(&rs, csv);
    } else {
        /* One case per family that failed to compile, per pipeline, and for
         * the validation layer. */
        for (size_t k = 0; k < n_chosen; k++) {
            if (!fam_ok[k])
                t_report(false, "%s: compile every pipeline on RADV's null device (see "
                                "stderr)", chosen[k]->name);
            for (size_t i = first_of[k]; i < end_of[k]; i++) {
                const row *r = &rs.v[i];
                t_report(!r->spilled_vgprs && !r->spilled_sgprs && !r->scratch,
                         "%s %s/%s (%s): %u VGPRs, %u SGPRs, %u VGPRs and %u SGPRs spilled, "
                         "%llu bytes of scratch, %.2f waves/SIMD",
                         r->fam->name, r->name, r->shader, r->spec, r->vgprs, r->sgprs,
                         r->spilled_vgprs, r->spilled_sgprs, (unsigned long long)r->scratch,
                         r->waves_per_simd);
                /* The shared memory the kernel list reports is what the
                 * compiler allocates, up to the family's granule (Mesa 22.3
                 * reports it in 512-byte steps, 26.2 in the allocation's). */
                t_report(r->shared_bytes <= r->lds &&
                             r->lds - r->shared_bytes < r->fam->lds_granule,
                         "%s %s/%s (%s): LDS %llu bytes, vkmha_context_get_kernels' "
                         "shared_bytes %u", r->fam->name, r->name, r->shader, r->spec,
                         (unsigned long long)r->lds, r->shared_bytes);
                if ((!strcmp(r->name, "flash_d64") || !strcmp(r->name, "flash_d128")) &&
                    (!strcmp(r->fam->name, "navi21") || !strcmp(r->fam->name, "vega20")))
                    t_report(r->groups_per_cu >= 2.0,
                             "%s %s: %.1f workgroups per CU (at least 2), %.2f waves/SIMD",
                             r->fam->name, r->name, r->groups_per_cu, r->waves_per_simd);
            }
        }
        if (validate)
            t_report(clean, "no validation layer message");
        status = t_finish();
    }
    if (validate && !clean) {
        fprintf(stderr, "vkmha-occupancy: the validation layer sent messages\n");
        status = 1;
    }
    free(rs.v);
    return status;
}
