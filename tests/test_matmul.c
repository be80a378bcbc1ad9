/* vkmha_matmul on Vulkan vs the reference backend, element by element, on
 * sizes that are not tile multiples, both ops, bias, alpha, padded row
 * strides, batch strides and broadcast; in fp32, and in fp16 (the products
 * the cooperative-matrix matmul takes where the context has it: on Mesa 26's
 * lavapipe, tests/meson.build's mesa26 setup, every fp16 case below runs on
 * it), with the cooperative tiles given through matmul_tile.
 *
 * Tolerance: inputs are uniform in [-1, 1]; an fp32 dot product over k terms
 * differs from the double reference by about sqrt(k) * 2^-24 * |terms| in
 * practice, so |gpu - ref| <= ATOL_PER_SQRT_K * sqrt(k) + RTOL * |ref|. In
 * fp16 both backends multiply the same fp16 inputs exactly and sum in fp32
 * (the reference in double), then round C to fp16 once (2^-11 relative
 * each): RTOL16 covers the two roundings of C with a margin. */
#include "util_dtype.h"

#define RTOL 1e-5
#define ATOL_PER_SQRT_K 2e-6
#define RTOL16 2e-3

typedef struct mm_case {
    uint32_t batch, m, n, k;
    vkmha_op op;
    bool bias;
    float alpha;
    uint32_t pad_lda, pad_ldb, pad_ldc; /* row padding, elements */
    int64_t stride_a, stride_b;         /* 0 packed, VKMHA_BROADCAST */
} mm_case;

static size_t extent(uint32_t batch, int64_t stride, uint32_t rows, uint32_t ld)
{
    size_t matrix = (size_t)rows * ld;
    if (stride == VKMHA_BROADCAST)
        return matrix;
    return (size_t)batch * (stride ? (size_t)stride : matrix);
}

/* One case in dtype dt (F32 or F16: the arrays rounded to it on the host). */
static void run_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng, const mm_case *c,
                     const char *tile, uint32_t dt)
{
    char name[280];
    snprintf(name, sizeof name,
             "matmul%s [%s] batch %u m %u n %u k %u op %s bias %d alpha %g pad %u/%u/%u "
             "stride_a %lld stride_b %lld",
             dt == VKMHA_DTYPE_F16 ? " f16" : "", tile, c->batch, c->m, c->n, c->k,
             c->op == VKMHA_OP_T ? "T" : "N", c->bias, (double)c->alpha, c->pad_lda,
             c->pad_ldb, c->pad_ldc, (long long)c->stride_a, (long long)c->stride_b);
    vkmha_matmul_desc d = {0};
    d.dtype = dt;
    d.batch = c->batch;
    d.m = c->m;
    d.n = c->n;
    d.k = c->k;
    d.op_b = c->op;
    d.alpha = c->alpha;
    uint32_t b_rows = c->op == VKMHA_OP_T ? c->n : c->k, b_cols = c->op == VKMHA_OP_T ? c->k : c->n;
    d.lda = c->pad_lda ? c->k + c->pad_lda : 0;
    d.ldb = c->pad_ldb ? b_cols + c->pad_ldb : 0;
    d.ldc = c->pad_ldc ? c->n + c->pad_ldc : 0;
    d.stride_a = c->stride_a;
    d.stride_b = c->stride_b;
    uint32_t lda = c->k + c->pad_lda, ldb = b_cols + c->pad_ldb, ldc = c->n + c->pad_ldc;
    size_t na = extent(c->batch, c->stride_a, c->m, lda);
    size_t nb = extent(c->batch, c->stride_b, b_rows, ldb);
    size_t nc = (size_t)c->batch * c->m * ldc;
    float *a = t_random(rng, na, -1, 1), *b = t_random(rng, nb, -1, 1);
    float *bias = c->bias ? t_random(rng, c->n, -1, 1) : NULL;
    /* C starts with a sentinel (exact in fp16) so untouched padding can be
     * checked. */
    float *want = t_alloc(nc), *got = t_alloc(nc);
    for (size_t i = 0; i < nc; i++)
        want[i] = got[i] = 12288.0f;

    bool ok = true;
    vkmha_status st;
    if (dt == VKMHA_DTYPE_F32) {
        T_EXPECT_STATUS(vkmha_matmul(ref, &d, a, b, bias, want), VKMHA_SUCCESS, ok);
        st = vkmha_matmul(gpu, &d, a, b, bias, got);
    } else { /* the same 16-bit arrays for both, C's sentinel included */
        void *a16 = t_to_dt(dt, a, na), *b16 = t_to_dt(dt, b, nb),
             *bias16 = bias ? t_to_dt(dt, bias, c->n) : NULL, *want16 = t_to_dt(dt, want, nc),
             *got16 = t_to_dt(dt, got, nc);
        T_EXPECT_STATUS(vkmha_matmul(ref, &d, a16, b16, bias16, want16), VKMHA_SUCCESS, ok);
        st = vkmha_matmul(gpu, &d, a16, b16, bias16, got16);
        vkmha__to_f32(dt, want16, nc, want);
        vkmha__to_f32(dt, got16, nc, got);
        free(a16), free(b16), free(bias16), free(want16), free(got16);
    }
    T_EXPECT_STATUS(st, VKMHA_SUCCESS, ok);
    if (st != VKMHA_SUCCESS)
        t_diag("%s", vkmha_context_last_error(gpu));
    double atol = ATOL_PER_SQRT_K * sqrt((double)c->k) * (c->alpha ? fabs(c->alpha) : 1.0);
    if (ok)
        ok = t_close(name, "c", got, want, nc, atol, dt == VKMHA_DTYPE_F32 ? RTOL : RTOL16);
    /* Row padding of C is left untouched by both backends. */
    for (size_t i = 0; ok && i < nc; i++)
        if ((i % ldc) >= c->n && got[i] != 12288.0f) {
            t_diag("%s: padding c[%zu] was overwritten (%g)", name, i, (double)got[i]);
            ok = false;
        }
    t_report(ok, "%s", name);
    free(a);
    free(b);
    free(bias);
    free(want);
    free(got);
}

/* Tiles every case also runs with, through vkmha_context_desc.matmul_tile:
 * both variants on whatever device this is (the register variant with a row
 * count that is not a power of two; the shared variant as a GPU gets it). */
static const struct {
    const char *name;
    vkmha_tile_config tile;
} overrides[] = {
    {"register 12x4, 3x4", {12, 4, 4, 3, 4, 0, VKMHA_MATMUL_VARIANT_REGISTER}},
    {"register 32x8, 4x8", {32, 8, 4, 4, 8, 0, VKMHA_MATMUL_VARIANT_REGISTER}},
    {"shared 16x16x8, 4x4", {16, 16, 8, 4, 4, 0, VKMHA_MATMUL_VARIANT_SHARED}},
};

/* A context forcing `tile` (called `name` in the cases): where the device
 * has its kernel (have), the context, or NULL after a failed case;
 * elsewhere (a device without `lacks`) NULL after a case that the creation
 * was refused with UNSUPPORTED naming desc->matmul_tile and `word`. */
static vkmha_context *forced_tile_context(const vkmha_tile_config *tile, const char *name,
                                          bool have, const char *lacks, const char *word)
{
    vkmha_context_desc desc = {0};
    desc.enable_validation = t_validation();
    desc.log = t_log;
    desc.matmul_tile = tile;
    vkmha_context *ctx = NULL;
    const vkmha_status st = vkmha_context_create(&desc, &ctx);
    if (!have) {
        const char *msg = vkmha_context_last_error(NULL);
        t_report(st == VKMHA_ERROR_UNSUPPORTED && strstr(msg, "desc->matmul_tile") &&
                     strstr(msg, word),
                 "a device without %s: matmul_tile %s is UNSUPPORTED naming "
                 "desc->matmul_tile and what it lacks (%s: %s)",
                 lacks, name, vkmha_status_string(st), msg);
        vkmha_context_destroy(ctx);
        return NULL;
    }
    t_report(st == VKMHA_SUCCESS, "context with matmul_tile %s: %s %s", name,
             vkmha_status_string(st), vkmha_context_last_error(NULL));
    return ctx;
}

/* The cooperative matmul through desc->matmul_tile: tiles of several
 * subgroups each way and several matrices per subgroup, in units of the
 * device's shape. Where the context has matrix units, every fp16 case runs
 * on each (the kernels list the tile); elsewhere the creation fails with
 * UNSUPPORTED naming desc->matmul_tile. A malformed tile is
 * INVALID_ARGUMENT where the shape is known. */
static void coop_tile_cases(vkmha_context *ref, t_rng *rng, const mm_case *cases, size_t n,
                            bool have)
{
    static const struct {
        uint32_t bm, bn, bk, tm, tn; /* bm, bn, bk in matrices (CM, CN, CK) */
    } tiles[] = {{6, 5, 3, 3, 5}, {2, 4, 1, 1, 2}};
    uint32_t cm = 0, cn = 0, ck = 0;
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        vkmha_context_desc desc = {0};
        desc.enable_validation = t_validation();
        desc.log = t_log;
        vkmha_tile_config tile = {0, 0, 0, 0, 0, 0, VKMHA_MATMUL_VARIANT_COOPERATIVE};
        vkmha_context *ctx = NULL;
        if (have && !cm) { /* the device's shape, from its automatic tile */
            desc.matmul_tile = &tile;
            if (vkmha_context_create(&desc, &ctx) == VKMHA_SUCCESS) {
                vkmha_kernel_info k;
                if (kernel_find(ctx, "matmul_coop", &k) && k.available)
                    cm = kernel_param(&k, "CM"), cn = kernel_param(&k, "CN"),
                    ck = kernel_param(&k, "CK");
                vkmha_context_destroy(ctx);
                ctx = NULL;
            }
            if (!t_report(cm && cn && ck, "cooperative tile: the device's matrix shape %ux%ux%u",
                          cm, cn, ck))
                return;
        }
        const uint32_t sm = have ? cm : 8, sn = have ? cn : 8, sk = have ? ck : 8;
        tile = (vkmha_tile_config){tiles[t].bm * sm, tiles[t].bn * sn, tiles[t].bk * sk,
                                   tiles[t].tm, tiles[t].tn, 0, VKMHA_MATMUL_VARIANT_COOPERATIVE};
        tile.bk += tile.bk % 8 ? 8 - tile.bk % 8 : 0;
        while (tile.bk % sk)
            tile.bk += 8;
        char name[96];
        snprintf(name, sizeof name, "cooperative %ux%ux%u, %ux%u", tile.bm, tile.bn, tile.bk,
                 tile.tm, tile.tn);
        if (!(ctx = forced_tile_context(&tile, name, have, "cooperative matrices",
                                        "cooperative")))
            continue;
        vkmha_kernel_info k;
        t_report(kernel_find(ctx, "matmul_coop", &k) && k.available &&
                     kernel_param(&k, "BM") == tile.bm && kernel_param(&k, "BN") == tile.bn &&
                     kernel_param(&k, "BK") == tile.bk && kernel_param(&k, "TM") == tile.tm &&
                     kernel_param(&k, "TN") == tile.tn,
                 "vkmha_context_get_kernels: matmul_coop runs the override %s", name);
        for (size_t i = 0; i < n; i++)
            run_case(ref, ctx, rng, &cases[i], name, VKMHA_DTYPE_F16);
        t_report_validation(ctx);
        vkmha_context_destroy(ctx);
    }
    /* The cooperative fused kernel forced: its kernels listed where the
     * device has matrix units, else UNSUPPORTED naming the option. */
    {
        vkmha_debug_options dbg = {.fused_kernel = VKMHA_FUSED_KERNEL_COOPERATIVE};
        vkmha_context_desc desc = {0};
        desc.enable_validation = t_validation();
        desc.log = t_log;
        desc.debug = &dbg;
        vkmha_context *ctx = NULL;
        const vkmha_status st = vkmha_context_create(&desc, &ctx);
        vkmha_kernel_info k = {0};
        const bool listed = ctx && kernel_find(ctx, "flash_coop_d64", &k) && k.available;
        if (have)
            t_report(st == VKMHA_SUCCESS && listed,
                     "fused_kernel COOPERATIVE: flash_coop_d64 available (%s)",
                     vkmha_status_string(st));
        else
            t_report(st == VKMHA_ERROR_UNSUPPORTED &&
                         strstr(vkmha_context_last_error(NULL), "desc->debug->fused_kernel"),
                     "a device without cooperative matrices: fused_kernel COOPERATIVE is "
                     "UNSUPPORTED naming desc->debug->fused_kernel (%s: %s)",
                     vkmha_status_string(st), vkmha_context_last_error(NULL));
        vkmha_context_destroy(ctx);
    }
    /* The environment's forms: a value that names no kernel is refused
     * naming the variable; "cooperative" on a device without matrix units
     * is UNSUPPORTED naming it (with them: the kernels run; under the mobile
     * profile, which has none by definition, it is ignored). */
    const char *profile = getenv("VKMHA_PROFILE");
    const bool mobile = profile && !strcmp(profile, "mobile");
    static const struct {
        const char *var, *value;
    } envs[] = {{"VKMHA_FUSED_KERNEL", "tensorcores"}, {"VKMHA_FUSED_KERNEL", "cooperative"},
                {"VKMHA_MATMUL_TILE", "cooperative"}};
    for (size_t e = 0; e < sizeof envs / sizeof envs[0]; e++) {
        const char *saved = getenv(envs[e].var);
        char *keep = saved ? strdup(saved) : NULL;
        setenv(envs[e].var, envs[e].value, 1);
        vkmha_context_desc desc = {0};
        desc.log = t_log;
        desc.flags = VKMHA_CONTEXT_NO_SELF_CHECK;
        vkmha_context *ctx = NULL;
        const vkmha_status st = vkmha_context_create(&desc, &ctx);
        const bool bad = strcmp(envs[e].value, "cooperative") != 0;
        const vkmha_status want = bad              ? VKMHA_ERROR_INVALID_ARGUMENT
                                  : have || mobile ? VKMHA_SUCCESS
                                                   : VKMHA_ERROR_UNSUPPORTED;
        t_report(st == want && (st == VKMHA_SUCCESS ||
                                strstr(vkmha_context_last_error(NULL), envs[e].var)),
                 "%s=%s: %s (%s)", envs[e].var, envs[e].value, vkmha_status_string(st),
                 st ? vkmha_context_last_error(NULL) : "created");
        vkmha_context_destroy(ctx);
        if (keep)
            setenv(envs[e].var, keep, 1);
        else
            unsetenv(envs[e].var);
        free(keep);
    }
    if (!have)
        return;
    /* Malformed: bm not a multiple of tm matrices. */
    vkmha_context_desc desc = {0};
    desc.log = t_log;
    const vkmha_tile_config bad = {3 * cm, 2 * cn, 2 * ck, 2, 1, 0,
                                   VKMHA_MATMUL_VARIANT_COOPERATIVE};
    desc.matmul_tile = &bad;
    vkmha_context *ctx = NULL;
    const vkmha_status st = vkmha_context_create(&desc, &ctx);
    t_report(st == VKMHA_ERROR_INVALID_ARGUMENT &&
                 strstr(vkmha_context_last_error(NULL), "desc->matmul_tile"),
             "matmul_tile cooperative with bm not a multiple of tm matrices: "
             "INVALID_ARGUMENT naming desc->matmul_tile (%s)",
             vkmha_context_last_error(NULL));
    vkmha_context_destroy(ctx);
}

/* The VK_NV_cooperative_matrix2 matmul through desc->matmul_tile. Where
 * the context has it (vkmha_context_info.cooperative_matrix2: NVIDIA's
 * drivers; no lavapipe has workgroup scope or tensor addressing): the
 * automatic tile at each workgroup size the device lists, and one twice as
 * deep, run every fp16 case (tiles wholly inside M x N, which take the
 * unchecked loads, and edge tiles); a tile off the device's granularity or
 * with tm set is INVALID_ARGUMENT naming desc->matmul_tile. Elsewhere the
 * forced variant is UNSUPPORTED naming desc->matmul_tile, and the
 * environment's "coopmat2" UNSUPPORTED naming VKMHA_MATMUL_TILE (ignored
 * under the mobile profile); a malformed value is INVALID_ARGUMENT. */
static void cm2_tile_cases(vkmha_context *ref, t_rng *rng, const mm_case *cases, size_t n,
                           const vkmha_context_info *info)
{
    const bool have = info->cooperative_matrix2;
    vkmha_tile_config tiles[5];
    size_t n_tiles = 0;
    for (size_t i = 0; i < 4 && info->matrix2_workgroup_sizes[i]; i++)
        tiles[n_tiles++] = (vkmha_tile_config){0, 0, 0, 0, 0, info->matrix2_workgroup_sizes[i],
                                               VKMHA_MATMUL_VARIANT_COOPERATIVE2};
    if (!have)
        tiles[n_tiles++] = (vkmha_tile_config){0, 0, 0, 0, 0, 0,
                                               VKMHA_MATMUL_VARIANT_COOPERATIVE2};
    uint32_t bm = 0, bn = 0, bk = 0, wg = 0;
    for (size_t t = 0; t <= n_tiles; t++) {
        vkmha_tile_config tile;
        if (t < n_tiles)
            tile = tiles[t];
        else if (have && bk && 2 * bk <= 256) /* the first automatic tile, twice as deep */
            tile = (vkmha_tile_config){bm, bn, 2 * bk, 0, 0, wg,
                                       VKMHA_MATMUL_VARIANT_COOPERATIVE2};
        else
            break;
        char name[96];
        snprintf(name, sizeof name, "coopmat2 %ux%ux%u, workgroup %u", tile.bm, tile.bn, tile.bk,
                 tile.workgroup_size);
        vkmha_context *ctx = forced_tile_context(&tile, name, have, "VK_NV_cooperative_matrix2",
                                                 "VK_NV_cooperative_matrix2");
        if (!ctx)
            continue;
        vkmha_kernel_info k;
        const bool listed = kernel_find(ctx, "matmul_cm2", &k) && k.available &&
                            (!tile.bm || (kernel_param(&k, "BM") == tile.bm &&
                                          kernel_param(&k, "BN") == tile.bn &&
                                          kernel_param(&k, "BK") == tile.bk)) &&
                            kernel_param(&k, "WG") == tile.workgroup_size;
        t_report(listed, "vkmha_context_get_kernels: matmul_cm2 runs %s", name);
        if (listed && !bm)
            bm = kernel_param(&k, "BM"), bn = kernel_param(&k, "BN"),
            bk = kernel_param(&k, "BK"), wg = kernel_param(&k, "WG");
        for (size_t i = 0; i < n; i++)
            run_case(ref, ctx, rng, &cases[i], name, VKMHA_DTYPE_F16);
        t_report_validation(ctx);
        vkmha_context_destroy(ctx);
    }
    if (have && bm) { /* off the granularity (bm 1), tm set, too large for the workgroup */
        static const char *const why[3] = {"with bm 1", "with tm 1",
                                           "past 64 accumulators per invocation"};
        const vkmha_tile_config bad[3] = {
            {1, bn, bk, 0, 0, wg, VKMHA_MATMUL_VARIANT_COOPERATIVE2},
            {bm, bn, bk, 1, 0, wg, VKMHA_MATMUL_VARIANT_COOPERATIVE2},
            {256, 256, bk, 0, 0, wg, VKMHA_MATMUL_VARIANT_COOPERATIVE2}};
        for (int i = 0; i < 3; i++) {
            vkmha_context_desc desc = {0};
            desc.log = t_log;
            desc.matmul_tile = &bad[i];
            vkmha_context *ctx = NULL;
            const vkmha_status st = vkmha_context_create(&desc, &ctx);
            t_report(st == VKMHA_ERROR_INVALID_ARGUMENT &&
                         strstr(vkmha_context_last_error(NULL), "desc->matmul_tile"),
                     "matmul_tile coopmat2 %s: INVALID_ARGUMENT naming desc->matmul_tile (%s)",
                     why[i], vkmha_context_last_error(NULL));
            vkmha_context_destroy(ctx);
        }
    }
    const char *profile = getenv("VKMHA_PROFILE");
    const bool mobile = profile && !strcmp(profile, "mobile");
    static const char *const values[] = {"coopmat2", "coopmat2:64,64", "coopmat2:x"};
    for (size_t e = 0; e < sizeof values / sizeof values[0]; e++) {
        const char *saved = getenv("VKMHA_MATMUL_TILE");
        char *keep = saved ? strdup(saved) : NULL;
        setenv("VKMHA_MATMUL_TILE", values[e], 1);
        vkmha_context_desc desc = {0};
        desc.log = t_log;
        desc.flags = VKMHA_CONTEXT_NO_SELF_CHECK;
        vkmha_context *ctx = NULL;
        const vkmha_status st = vkmha_context_create(&desc, &ctx);
        /* Ignored too by a context without 16-bit storage (arm64 LLVM 15's
         * workaround turns it off). */
        const vkmha_status want = e ? VKMHA_ERROR_INVALID_ARGUMENT
                                  : have || mobile || !info->native_16bit_storage
                                      ? VKMHA_SUCCESS
                                      : VKMHA_ERROR_UNSUPPORTED;
        t_report(st == want && (st == VKMHA_SUCCESS ||
                                strstr(vkmha_context_last_error(NULL), "VKMHA_MATMUL_TILE")),
                 "VKMHA_MATMUL_TILE=%s: %s (%s)", values[e], vkmha_status_string(st),
                 st ? vkmha_context_last_error(NULL) : "created");
        vkmha_context_destroy(ctx);
        if (!e) { /* a context with 16-bit storage off cannot have it: ignored */
            vkmha_debug_options dbg = {.no_native_16bit = true};
            desc.debug = &dbg;
            ctx = NULL;
            const vkmha_status s16 = vkmha_context_create(&desc, &ctx);
            vkmha_kernel_info k = {0};
            const bool used = ctx && kernel_find(ctx, "matmul_cm2", &k) && k.available;
            t_report(s16 == VKMHA_SUCCESS && !used,
                     "VKMHA_MATMUL_TILE=coopmat2 with no_native_16bit: ignored (%s%s)",
                     vkmha_status_string(s16), used ? ", matmul_cm2 available" : "");
            vkmha_context_destroy(ctx);
        }
        if (keep)
            setenv("VKMHA_MATMUL_TILE", keep, 1);
        else
            unsetenv("VKMHA_MATMUL_TILE");
        free(keep);
    }
}

int main(void)
{
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    vkmha_context *gpu = t_context(VKMHA_BACKEND_VULKAN, 0);
    t_rng rng = {42};
    const vkmha_op N = VKMHA_OP_N, T = VKMHA_OP_T;
    const int64_t BC = VKMHA_BROADCAST;
    static const mm_case cases[] = {
        /* batch m n k op bias alpha pads strides */
        {1, 1, 1, 1, N, false, 0, 0, 0, 0, 0, 0},
        {1, 3, 5, 7, N, true, 0, 0, 0, 0, 0, 0},
        {1, 3, 5, 7, T, true, 0, 0, 0, 0, 0, 0},
        {1, 17, 33, 9, T, false, 0.5f, 0, 0, 0, 0, 0},
        {1, 75, 129, 300, N, true, 0, 0, 0, 0, 0, 0},
        {1, 129, 75, 300, T, true, 0, 0, 0, 0, 0, 0},
        {1, 300, 17, 3, N, false, 0, 0, 0, 0, 0, 0},
        {1, 1, 300, 129, T, true, 0, 0, 0, 0, 0, 0},   /* a single row (decode) */
        /* A few rows (lanes over columns on CPU devices: matmul_gemv): vec4
         * and scalar loads, N not a multiple of the 32 columns of a tile. */
        {1, 1, 100, 64, T, true, 0, 0, 0, 0, 0, 0},
        {1, 3, 37, 64, T, true, 0, 0, 0, 0, 0, 0},
        {1, 4, 70, 32, N, true, 0, 0, 0, 0, 0, 0},
        {1, 2, 45, 13, T, true, 0, 0, 0, 0, 0, 0},
        {1, 3, 70, 1028, T, true, 0, 0, 0, 0, 0, 0},   /* long K: the GEMV's unrolled vec4s + tail */
        {3, 4, 33, 20, T, false, 0, 0, 0, 0, 0, BC},   /* batched rows over shared weights */
        {2, 1, 9, 11, N, true, 0, 3, 5, 7, 0, 0},      /* padded rows */
        {1, 300, 1, 75, N, false, 0, 0, 0, 0, 0, 0},   /* a single column */
        {1, 64, 64, 64, N, true, 0, 0, 0, 0, 0, 0},    /* aligned: vec4 loads */
        {1, 64, 64, 64, T, true, 2.0f, 0, 0, 0, 0, 0}, /* aligned, transposed */
        {1, 200, 256, 512, T, true, 0, 0, 0, 0, 0, 0}, /* large tiles, vec4 */
        {3, 17, 20, 12, N, true, 0, 0, 0, 0, 0, 0},    /* batched */
        {4, 33, 16, 8, T, false, 0, 0, 0, 0, 0, BC},   /* broadcast B (weights) */
        {3, 5, 9, 11, N, false, 0, 0, 0, 0, BC, 0},    /* broadcast A */
        {2, 9, 10, 11, N, true, 0, 3, 5, 7, 0, 0},     /* padded rows everywhere */
        {2, 9, 8, 12, T, true, 0, 4, 4, 3, 0, 0},      /* padded, vec4-aligned A and B */
        {2, 7, 6, 5, N, false, 0, 0, 0, 0, 50, 40},    /* gaps between batch entries */
        /* Whole 128 x 128 tiles and edge ones, K a multiple of 32 and 64
         * (past 256: an unrolled run of steps and single steps after it),
         * 8-aligned rows: the cooperative2 kernel's unchecked and clamped
         * loads and stores. */
        {1, 260, 264, 320, N, true, 0, 0, 0, 0, 0, 0},
        {2, 260, 264, 320, T, false, 0.5f, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(ref, gpu, &rng, &cases[i], "auto", VKMHA_DTYPE_F32);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(ref, gpu, &rng, &cases[i], "auto", VKMHA_DTYPE_F16);
    /* The mesa26 setup forces the cooperative matmul for every context of
     * the process: its default context must then run it, or that setup
     * would test nothing of it. */
    vkmha_context_info info = {0};
    vkmha_context_get_info(gpu, &info);
    /* Likewise "coopmat2" (how a GPU run forces that kernel on the suite). */
    const char *env = getenv("VKMHA_MATMUL_TILE");
    static const char *const forms[2] = {"cooperative", "coopmat2"},
                             *const kernels[2] = {"matmul_coop", "matmul_cm2"};
    const bool device_has[2] = {info.cooperative_matrix, info.cooperative_matrix2};
    for (int i = 0; i < 2; i++) {
        const bool forced = env && !strcmp(env, forms[i]);
        vkmha_kernel_info k;
        const bool on = kernel_find(gpu, kernels[i], &k) && k.available;
        t_report(!forced || (device_has[i] && on),
                 "VKMHA_MATMUL_TILE %s: the default context %s %s (the device's %d, %s)",
                 env ? env : "unset", forced ? "runs" : "may run", kernels[i], device_has[i],
                 on ? "available" : "unavailable");
    }
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);

    coop_tile_cases(ref, &rng, cases, sizeof cases / sizeof cases[0], info.cooperative_matrix);
    cm2_tile_cases(ref, &rng, cases, sizeof cases / sizeof cases[0], &info);

    for (size_t o = 0; o < sizeof overrides / sizeof overrides[0]; o++) {
        vkmha_context_desc desc = {0};
        desc.enable_validation = t_validation();
        desc.log = t_log;
        desc.matmul_tile = &overrides[o].tile;
        /* As the suite's contexts: the cases, not the self-check's
         * fallbacks, meet every kernel. */
        desc.flags = VKMHA_CONTEXT_NO_SELF_CHECK;
        vkmha_context *ctx = NULL;
        vkmha_status st = vkmha_context_create(&desc, &ctx);
        if (!t_report(st == VKMHA_SUCCESS, "context with matmul_tile %s: %s %s", overrides[o].name,
                      vkmha_status_string(st), vkmha_context_last_error(NULL)))
            continue;
        t_report(t_matmul_kernels_have_tile(ctx, &overrides[o].tile),
                 "vkmha_context_get_kernels: every matmul kernel runs the override %s",
                 overrides[o].name);
        /* A shared tile on a CPU device also brings the GPUs' few-rows
         * matmul, which the op T cases of a few rows run, where the context
         * has subgroup arithmetic (its reduction; not the mobile profile). */
        if (overrides[o].tile.variant == VKMHA_MATMUL_VARIANT_SHARED) {
            vkmha_kernel_info g = {0};
            vkmha_context_info ci = {0};
            vkmha_context_get_info(ctx, &ci);
            kernel_find(ctx, "matmul_gemv_gpu", &g);
            t_report(g.available == ci.subgroup_ops_used,
                     "matmul_tile %s: matmul_gemv_gpu %s (subgroup arithmetic %s)",
                     overrides[o].name, g.available ? "available" : "not available",
                     ci.subgroup_ops_used ? "used" : "not used");
        }
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            run_case(ref, ctx, &rng, &cases[i], overrides[o].name, VKMHA_DTYPE_F32);
            run_case(ref, ctx, &rng, &cases[i], overrides[o].name, VKMHA_DTYPE_F16);
        }
        t_report_validation(ctx);
        vkmha_context_destroy(ctx);
    }
    vkmha_context_destroy(ref);
    return t_finish();
}
