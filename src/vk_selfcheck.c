/* The self-check (vkmha_path): each code path the context uses runs once on
 * a small canary input, through the same host-array entry points as the
 * public ops, and is compared with the reference backend's functions
 * (src/reference.c), right before the first call that may take it (or all
 * at context creation with VKMHA_CONTEXT_EAGER_PIPELINES). A path that
 * disagrees is disabled (its fallback taken: another fused kernel or the
 * unfused path, shared-memory reductions, packed 16-bit data, the
 * small-tile matmul) with a warning; a wrong unfused attention, for which
 * nothing is left, fails that call and every later attention.
 * VKMHA_DISABLE_PATHS disables paths unchecked. */
#include "vk_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct path_info {
    uint32_t bit;
    const char *name, *what, *fallback;
} paths[] = {
    {VKMHA_PATH_FUSED_D32, "fused_d32", "the workgroup-shared fused attention for head dims up to 32",
     "those heads take the other fused kernel or the unfused path"},
    {VKMHA_PATH_FUSED_D64, "fused_d64", "the workgroup-shared fused attention for head dims up to 64",
     "those heads take the other fused kernel or the unfused path"},
    {VKMHA_PATH_FUSED_D128, "fused_d128",
     "the workgroup-shared fused attention for head dims up to 128",
     "those heads take the other fused kernel or the unfused path"},
    {VKMHA_PATH_FUSED_D256, "fused_d256",
     "the workgroup-shared fused attention for head dims up to 256",
     "those heads take the other fused kernel or the unfused path"},
    {VKMHA_PATH_FUSED_CPU_D32, "fused_cpu_d32", "the CPU-shaped fused attention for head dims up to 32",
     "those heads take the other fused kernel or the unfused path"},
    {VKMHA_PATH_FUSED_CPU_D64, "fused_cpu_d64", "the CPU-shaped fused attention for head dims up to 64",
     "those heads take the other fused kernel or the unfused path"},
    {VKMHA_PATH_FUSED_CPU_D128, "fused_cpu_d128",
     "the CPU-shaped fused attention for head dims up to 128",
     "those heads take the other fused kernel or the unfused path"},
    {VKMHA_PATH_FUSED_CPU_D256, "fused_cpu_d256",
     "the CPU-shaped fused attention for head dims up to 256",
     "those heads take the other fused kernel or the unfused path"},
    {VKMHA_PATH_SUBGROUP, "subgroup", "the reductions with subgroup arithmetic",
     "they reduce through shared memory only"},
    {VKMHA_PATH_NATIVE_16BIT, "native16", "16-bit storage", "16-bit data is packed two per word"},
    {VKMHA_PATH_MATMUL_GEMV, "gemv", "the matmul for a few rows", "it takes the small tiles"},
    {VKMHA_PATH_SPARSE, "sparse", "sparse binding",
     "tensors past maxMemoryAllocationSize are refused"},
    {VKMHA_PATH_COOPMAT_MATMUL, "coopmat_matmul",
     "the cooperative-matrix matmul (fp16 products on the matrix units)",
     "fp16 products take the device type's matmul"},
    {VKMHA_PATH_COOPMAT_FUSED_D32, "coopmat_fused_d32",
     "the cooperative-matrix fused attention for head dims up to 32",
     "those heads take the workgroup-shared kernel"},
    {VKMHA_PATH_COOPMAT_FUSED_D64, "coopmat_fused_d64",
     "the cooperative-matrix fused attention for head dims up to 64",
     "those heads take the workgroup-shared kernel"},
    {VKMHA_PATH_COOPMAT_FUSED_D128, "coopmat_fused_d128",
     "the cooperative-matrix fused attention for head dims up to 128",
     "those heads take the workgroup-shared kernel"},
    {VKMHA_PATH_COOPMAT_FUSED_D256, "coopmat_fused_d256",
     "the cooperative-matrix fused attention for head dims up to 256",
     "those heads take the workgroup-shared kernel"},
    {VKMHA_PATH_FUSED_D576, "fused_d576",
     "the workgroup-shared fused attention for head dims up to 576",
     "those heads take the other fused kernel or the unfused path"},
    {VKMHA_PATH_FUSED_CPU_D576, "fused_cpu_d576",
     "the CPU-shaped fused attention for head dims up to 576",
     "those heads take the other fused kernel or the unfused path"},
    {VKMHA_PATH_COOPMAT_FUSED_D576, "coopmat_fused_d576",
     "the cooperative-matrix fused attention for head dims up to 576",
     "those heads take the workgroup-shared kernel"},
    {VKMHA_PATH_COOPMAT2_MATMUL, "coopmat2_matmul",
     "the VK_NV_cooperative_matrix2 matmul (fp16 products on the matrix units)",
     "fp16 products take the cooperative-matrix matmul or the device type's"},
};

/* The entry of path `bit`, or NULL. */
static const struct path_info *path_of_bit(uint32_t bit)
{
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(paths); i++)
        if (paths[i].bit == bit)
            return &paths[i];
    return NULL;
}

VKMHA_API const char *vkmha_path_name(uint32_t path)
{
    const struct path_info *p = path_of_bit(path);
    return p ? p->name : NULL;
}

/* The entry named by the `n` characters at `s`, or NULL. */
static const struct path_info *path_named(const char *s, size_t n)
{
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(paths); i++)
        if (strlen(paths[i].name) == n && strncmp(paths[i].name, s, n) == 0)
            return &paths[i];
    return NULL;
}

/* The names of every path, from paths[], as "a, b, ...". */
static void path_names(char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(paths) && len < cap; i++) {
        const int w = snprintf(out + len, cap - len, "%s%s", i ? ", " : "", paths[i].name);
        len += w > 0 ? (size_t)w : 0;
    }
}

/* Deterministic canary values in [-1, 1], multiples of 1/8 (exact in fp16). */
static void fill(float *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)((int)(seed >> 24) % 17 - 8) / 8.0f;
    }
}

/* Compares a path's result with the reference: true if every element is
 * within 1e-3 + 1e-3 |ref| (tol scales it); the worst in *diff, *at. */
static bool agrees(const float *got, const float *want, size_t n, double tol, double *diff,
                   size_t *at)
{
    *diff = 0;
    *at = 0;
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= tol * (1e-3 + 1e-3 * fabs((double)want[i])))) {
            ok = false;
            if (!(d <= *diff)) {
                *diff = d;
                *at = i;
            }
        }
    }
    return ok;
}

/* The verdict on path `bit` (0: the unfused attention, which has no
 * fallback): disables it with a warning, or fails. */
static vkmha_status judge(vk_state *vk, uint32_t bit, float *got, const float *want, size_t n,
                          double tol, uint32_t breaks)
{
    double diff;
    size_t at;
    if (vk->exec.gather) /* the first pass: nothing ran */
        return VKMHA_SUCCESS;
    const uint32_t check = bit ? bit : VK_CHECK_UNFUSED;
    vk->check.pending &= ~check; /* judged, whatever the verdict */
    if (check & breaks)
        got[0] += 1.0f; /* desc->debug->self_check_break (bit 31: the unfused path) */
    if (agrees(got, want, n, tol, &diff, &at))
        return VKMHA_SUCCESS;
    const char *fn = vk->ctx->call;
    if (!bit) {
        vk->check.unfused_wrong = true;
        return vkmha__fail(vk->ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: self-check: the unfused attention (matmul, softmax, matmul) "
                           "disagrees with the reference backend (|diff| %g at element %zu): "
                           "no attention path is left on this device",
                           fn, diff, at);
    }
    const struct path_info *p = path_of_bit(bit);
    if (!p)
        return vkmha__fail(vk->ctx, VKMHA_ERROR_VULKAN,
                           "%s: internal error: self-check path bit 0x%x", fn, bit);
    vkmha__log(vk->ctx, VKMHA_LOG_WARN, VKMHA_SUCCESS,
               "%s: self-check: %s (\"%s\") disagrees with the reference backend (|diff| %g "
               "at element %zu): disabled for this context; %s",
               fn, p->what, p->name, diff, at, p->fallback);
    vk_tuning_disable(vk, bit);
    return VKMHA_SUCCESS;
}

enum { B = 1, H = 2, HKV = 1, LQ = 3, LK = 21, DMAX = VK_FLASH_DIM_MAX - 4 };

/* One attention canary: head dims d, the given path and kernel; dtype F16
 * (the cooperative kernel's): q, k, v and the output in fp16 on both sides
 * (the canary's values are exact in fp16), judged 10 times as loosely. */
static vkmha_status attention_canary(vk_state *vk, uint32_t d, vkmha_attention_path path,
                                     vkmha_fused_kernel kernel, uint32_t bit, uint32_t dtype,
                                     float *mem, uint32_t breaks)
{
    float *q = mem, *k = q + H * LQ * DMAX, *v = k + HKV * LK * DMAX, *o = v + HKV * LK * DMAX,
          *r = o + H * LQ * DMAX;
    uint16_t *h = (uint16_t *)(r + H * LQ * DMAX); /* q, k, v, o in fp16 */
    const size_t nq = (size_t)H * LQ * d, nkv = (size_t)HKV * LK * d;
    fill(q, nq, 1 + d), fill(k, nkv, 2 + d), fill(v, nkv, 3 + d);
    attn_shape s = {.batch = B, .heads = H, .kv_heads = HKV, .len_q = LQ, .len_k = LK,
                    .d_k = d, .d_v = d, .scale = 1.0f / sqrtf((float)d), .path = path,
                    .kv_splits = path == VKMHA_ATTENTION_PATH_FUSED ? 3 : 0, .dtype = dtype};
    const mask_r mask = {.kinds = VKMHA_MASK_CAUSAL, .causal_offset = LK - LQ};
    const bool half = dtype == VKMHA_DTYPE_F16;
    if (half) {
        vkmha__from_f32(dtype, q, nq, h), vkmha__from_f32(dtype, k, nkv, h + nq);
        vkmha__from_f32(dtype, v, nkv, h + nq + nkv);
    }
    const vkmha_fused_kernel saved = vk_tuning_force_kernel(vk, kernel);
    vkmha_status st = half ? vk_attention(vk, &s, h, h + nq, h + nq + nkv, &mask,
                                          h + nq + 2 * nkv, NULL)
                           : vk_attention(vk, &s, q, k, v, &mask, o, NULL);
    vk_tuning_force_kernel(vk, saved);
    if (st || vk->exec.gather)
        return st;
    if (half)
        vkmha__to_f32(dtype, h + nq + 2 * nkv, nq, o);
    s.dtype = VKMHA_DTYPE_F32; /* the reference on the same (exact) values */
    if ((st = ref_attention(vk->ctx, &s, q, k, v, &mask, r, NULL)))
        return vkmha__fail(vk->ctx, st, "%s: out of host memory", vk->ctx->call);
    return judge(vk, bit, o, r, nq, half ? 10.0 : 1.0, breaks);
}

/* Sparse binding: split heads of x [1][len][4 x 16] (an ordinary buffer)
 * into y [1][4][len][16] in a sparse buffer of pages of one sparse block
 * each (3 blocks and a bit), then y downloaded and merged back into z (the
 * ordinary buffer past x): y must be x's heads and z x, exactly. */
static vkmha_status sparse_canary(vk_state *vk, uint32_t breaks)
{
    vkmha_context *ctx = vk->ctx;
    if (!vk_sparse_tensors(vk))
        return VKMHA_SUCCESS;
    const heads_shape hs = {.batch = 1, .heads = 4, .head_dim = 16,
                            .len = (uint32_t)((3 * vk->sparse_block + 256) / 256)};
    const size_t n = (size_t)hs.len * 64, bytes = n * sizeof(float);
    /* x, y and z of n floats each; want: y's and z's, 2n. */
    float *x = vkmha__alloc(ctx, 5 * bytes), *y = x + n, *z = y + n, *want = z + n;
    vk_buffer plain = {0}, sparse = {0};
    vkmha_status st = x ? VKMHA_SUCCESS
                        : vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY,
                                      "%s: out of host memory", ctx->call);
    if (!st && !(st = vk_buffer_create(vk, 2 * bytes, false, false, "self-check", &plain)))
        st = vk_buffer_create_sparse(vk, bytes, 1, "self-check", &sparse);
    const vk_view xv = {.buf = &plain, .dtype = VKMHA_DTYPE_F32},
                  yv = {.buf = &sparse, .dtype = VKMHA_DTYPE_F32},
                  zv = {.buf = &plain, .offset = bytes, .dtype = VKMHA_DTYPE_F32};
    vk_site *site = &vk->desc.op_sites.sites[OPSITE_HEADS];
    if (!st) {
        fill(x, n, 99);
        for (size_t r = 0; r < hs.len; r++) /* x's heads, [4][len][16] */
            for (size_t h = 0; h < 4; h++)
                memcpy(want + (h * hs.len + r) * 16, x + r * 64 + h * 16, 16 * sizeof(float));
        memcpy(want + n, x, bytes); /* z */
    }
    /* Two calls: one site, one dispatch each. */
    if (!st && !(st = vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL))) {
        st = vk_upload(vk, &plain, 0, x, bytes);
        if (!st)
            st = vk_record_heads(vk, site, &hs, true, xv, yv);
        st = vk_exec_end(vk, st, NULL);
    }
    if (!st && !(st = vk_exec_begin(vk, MODE_SYNC, VK_NULL_HANDLE, NULL))) {
        st = vk_record_heads(vk, site, &hs, false, yv, zv);
        if (!st)
            st = vk_download(vk, &sparse, y, bytes, 1, bytes, 1, bytes);
        vk_buffer zb = plain; /* the executor adds zb.offset */
        zb.offset += bytes;
        if (!st)
            st = vk_download(vk, &zb, z, bytes, 1, bytes, 1, bytes);
        st = vk_exec_end(vk, st, NULL);
    }
    if (!st)
        st = judge(vk, VKMHA_PATH_SPARSE, y, want, 2 * n, 0.0, breaks);
    vk_buffer_destroy(vk, &sparse);
    vk_buffer_destroy(vk, &plain);
    vkmha__free(ctx, x);
    return st;
}

/* A cooperative kernel's canary product m x n x k for its tile t: past one
 * tile each way, with edges; k past one step with a tail (KHR), or (cm2,
 * the cooperative2 kernel) one unrolled run of steps of shaders/
 * matmul_cm2.comp's UNROLL and one step after it, a multiple of bk. */
static void coop_canary_dims(const vkmha_tile_config *t, bool cm2, uint32_t d[3])
{
    d[0] = t->bm + 3, d[1] = t->bn + 5;
    d[2] = !cm2 ? t->bk + 7 : t->bk ? ((t->bk >= 128 ? 2 : 256 / t->bk) + 1) * t->bk : 0;
}

/* The matmul paths, before the attention canaries (whose products take
 * them: a wrong few-rows matmul would otherwise fail the unfused path,
 * which has no fallback): 16-bit storage (on the device type's matmul), the
 * cooperative-matrix matmul (through more than one tile each way and step
 * of k, edges included), the few-rows matmul, and the cooperative-matrix 2
 * matmul (a tile wholly inside, which takes its loads without bounds
 * checks, and edge tiles): C = A B^T, fp16 or fp32. */
static vkmha_status matmul_canaries(vk_state *vk, float *mem, uint32_t todo, uint32_t breaks)
{
    vkmha_status st = VKMHA_SUCCESS;
    const bool check16 = (todo & VKMHA_PATH_NATIVE_16BIT) && vk->tuning.native16,
               coop = (todo & VKMHA_PATH_COOPMAT_MATMUL) && vk->tuning.coop_matmul &&
                      vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_MATMUL_COOP}),
               gemv = (todo & VKMHA_PATH_MATMUL_GEMV) &&
                      (vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_MATMUL,
                                                       .tile = TILE_GEMV}) ||
                       vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_MATMUL_GEMV_GPU})),
               cm2 = (todo & VKMHA_PATH_COOPMAT2_MATMUL) &&
                     vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_MATMUL_CM2});
    static const uint32_t pass_bit[4] = {VKMHA_PATH_NATIVE_16BIT, VKMHA_PATH_COOPMAT_MATMUL,
                                         VKMHA_PATH_MATMUL_GEMV, VKMHA_PATH_COOPMAT2_MATMUL};
    for (int pass = 0; pass < 4 && !st; pass++) {
        if (!(pass == 0 ? check16 : pass == 1 ? coop : pass == 2 ? gemv : cm2))
            continue;
        uint32_t d[3] = {pass == 0 ? 9 : 2, 37, 20};
        if (pass == 1 || pass == 3)
            coop_canary_dims(pass == 1 ? &vk->tuning.tile_coop : &vk->tuning.tile_cm2, pass == 3,
                             d);
        const uint32_t m = d[0], n = d[1], k = d[2];
        const uint32_t dt = pass == 2 ? VKMHA_DTYPE_F32 : VKMHA_DTYPE_F16;
        float *a = mem, *b = a + m * k, *c = b + n * k, *r = c + m * n;
        uint16_t *h = (uint16_t *)(r + m * n);
        fill(a, m * k, 5), fill(b, n * k, 6);
        mm_shape s = vkmha__projection(m, n, k);
        s.extent_a = (uint64_t)m * k, s.extent_b = (uint64_t)n * k, s.extent_c = (uint64_t)m * n;
        s.dtype = dt;
        ref_matmul(&s, a, b, NULL, r);
        /* 16-bit storage is judged on the device type's matmul. */
        const bool coop_before = vk->tuning.coop_matmul, cm2_before = vk->tuning.cm2_matmul;
        vk->tuning.coop_matmul = pass == 1;
        vk->tuning.cm2_matmul = pass == 3;
        if (dt == VKMHA_DTYPE_F16) { /* inputs and output in fp16 (exact values) */
            uint16_t *ha = h, *hb = ha + m * k, *hc = hb + n * k;
            vkmha__from_f32(dt, a, m * k, ha), vkmha__from_f32(dt, b, n * k, hb);
            if (!(st = vk_matmul(vk, &s, ha, hb, NULL, hc)))
                vkmha__to_f32(dt, hc, m * n, c);
        } else {
            st = vk_matmul(vk, &s, a, b, NULL, c);
        }
        vk->tuning.coop_matmul = coop_before;
        vk->tuning.cm2_matmul = cm2_before;
        if (!st)
            st = judge(vk, pass_bit[pass], c, r, m * n, pass == 2 ? 1.0 : 10.0, breaks);
    }
    return st;
}

/* The reductions' subgroup variant: a row too long for CPU devices'
 * row-per-invocation kernel takes the workgroup-per-row one. */
static vkmha_status subgroup_canary(vk_state *vk, float *mem, uint32_t breaks)
{
    vkmha_context *ctx = vk->ctx;
    const uint32_t n = VK_CPU_ROW_MAX + 7;
    if ((uint64_t)n * sizeof(float) > vk->info.max_storage_buffer_range) {
        /* Only a debug limit (vkmha_debug_options) is this low: Vulkan
         * guarantees 2^27 bytes. */
        if (!vk->exec.gather)
            vkmha__log(ctx, VKMHA_LOG_INFO, VKMHA_SUCCESS,
                       "%s: self-check: the subgroup reductions' canary row (%u floats) is "
                       "past maxStorageBufferRange (%llu bytes): not checked",
                       ctx->call, n, (unsigned long long)vk->info.max_storage_buffer_range);
        return VKMHA_SUCCESS;
    }
    float *x = mem, *y = x + n, *r = y + n;
    fill(x, n, 77);
    const sm_shape s = {.batch = 1, .heads = 1, .len_q = 1, .len_k = n, .scale = 1.0f};
    const mask_r none = {0};
    vkmha_status st = vk_softmax(vk, &s, x, &none, y);
    if (st || vk->exec.gather)
        return st;
    if (ref_softmax(ctx, &s, x, &none, r))
        return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           ctx->call);
    return judge(vk, VKMHA_PATH_SUBGROUP, y, r, n, 1.0, breaks);
}

/* Runs the canaries of the paths in todo once, judging each path
 * (vk->exec.gather: plans only, so that their pipelines are created together
 * before the judged pass), in an order where each canary's own ops take
 * only paths judged before it: the matmuls, the reductions and sparse
 * binding, then the unfused attention (what every fused kernel falls back
 * to), then the fused kernels. mem: scratch for the canaries' arrays. */
static vkmha_status run_canaries(vk_state *vk, float *mem, uint32_t todo, uint32_t breaks)
{
    vkmha_status st = matmul_canaries(vk, mem, todo, breaks);
    if (!st && (todo & VKMHA_PATH_SUBGROUP) && vk->tuning.use_subgroup)
        st = subgroup_canary(vk, mem, breaks);
    if (!st && (todo & VKMHA_PATH_SPARSE))
        st = sparse_canary(vk, breaks);
    if (!st && (todo & VK_CHECK_UNFUSED))
        st = attention_canary(vk, 28, VKMHA_ATTENTION_PATH_UNFUSED, VKMHA_FUSED_KERNEL_AUTO, 0,
                              VKMHA_DTYPE_F32, mem, breaks);
    /* Each fused head-dim class on each of its kernels, with key splits. */
    for (uint32_t c = 0; c < VK_FLASH_CLASSES && !st; c++) {
        const uint32_t d = vk_flash_dim(c) - 4, shared = vk_flash_path(VKMHA_PATH_FUSED_D32, c),
                       cpu = vk_flash_path(VKMHA_PATH_FUSED_CPU_D32, c),
                       coop = vk_flash_path(VKMHA_PATH_COOPMAT_FUSED_D32, c);
        if ((todo & shared) &&
            vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_FLASH, .cls = (uint8_t)c}))
            st = attention_canary(vk, d, VKMHA_ATTENTION_PATH_FUSED, VKMHA_FUSED_KERNEL_SHARED,
                                  shared, VKMHA_DTYPE_F32, mem, breaks);
        if (!st && (todo & cpu) &&
            vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_FLASH_CPU, .cls = (uint8_t)c}))
            st = attention_canary(vk, d, VKMHA_ATTENTION_PATH_FUSED, VKMHA_FUSED_KERNEL_REGISTER,
                                  cpu, VKMHA_DTYPE_F32, mem, breaks);
        if (!st && (todo & coop) &&
            vk_pipe_available(vk, (vk_pipe){.kernel = KERNEL_FLASH_COOP, .cls = (uint8_t)c}))
            st = attention_canary(vk, d, VKMHA_ATTENTION_PATH_FUSED,
                                  VKMHA_FUSED_KERNEL_COOPERATIVE, coop, VKMHA_DTYPE_F16, mem,
                                  breaks);
    }
    return st;
}

static double elapsed_ms(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

uint32_t vk_check_attention(uint32_t d_k, uint32_t d_v)
{
    const uint32_t bits = VK_CHECK_MATMUL | VK_CHECK_UNFUSED, c = vk_flash_class(d_k, d_v);
    if (c == VK_FLASH_CLASSES) /* unfused only */
        return bits;
    return bits | vk_flash_path(VKMHA_PATH_FUSED_D32, c) |
           vk_flash_path(VKMHA_PATH_FUSED_CPU_D32, c) |
           vk_flash_path(VKMHA_PATH_COOPMAT_FUSED_D32, c);
}

vkmha_status vk_self_check(vk_state *vk, bool run, bool now, uint32_t breaks)
{
    vkmha_context *ctx = vk->ctx;
    const char *env = getenv("VKMHA_DISABLE_PATHS");
    for (const char *s = env; s && *s;) {
        const size_t n = strcspn(s, ",");
        const struct path_info *p = path_named(s, n);
        if (!p && n) {
            char names[256];
            path_names(names, sizeof names);
            return vkmha__fail(ctx, VKMHA_ERROR_INVALID_ARGUMENT,
                               "vkmha_context_create: VKMHA_DISABLE_PATHS names \"%.*s\", not a "
                               "path (%s)",
                               (int)n, s, names);
        }
        if (p) {
            vkmha__log(ctx, VKMHA_LOG_INFO, VKMHA_SUCCESS,
                       "vkmha_context_create: %s disabled by VKMHA_DISABLE_PATHS", p->what);
            vk_tuning_disable(vk, p->bit);
        }
        s += n + (s[n] == ',');
    }
    vk->check.pending = run ? ~0u : 0;
    vk->check.breaks = breaks;
    return now ? vk_self_check_need(vk, ~0u) : VKMHA_SUCCESS;
}

vkmha_status vk_self_check_need(vk_state *vk, uint32_t paths)
{
    vkmha_context *ctx = vk->ctx;
    if (vk->check.running) /* a canary's own op */
        return VKMHA_SUCCESS;
    if ((paths & VK_CHECK_UNFUSED) && vk->check.unfused_wrong)
        return vkmha__fail(ctx, VKMHA_ERROR_UNSUPPORTED,
                           "%s: the self-check found the unfused attention wrong on this device "
                           "(an earlier call said how): no attention path is left",
                           ctx->call);
    const uint32_t todo = vk->check.pending & (paths | VK_CHECK_BASE);
    if (!todo)
        return VKMHA_SUCCESS;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const uint32_t before16 = vk->tuning.native16, subgroup = vk->tuning.use_subgroup;
    /* The cooperative matmuls' canaries (matmul_canaries): A, B, C and the
     * reference's C in fp32, and the three in fp16. */
    size_t mem_bytes = (size_t)(2 * H * LQ + 2 * HKV * LK + H * LQ) * DMAX * sizeof(float) +
                       (size_t)(2 * H * LQ + 2 * HKV * LK) * DMAX * sizeof(uint16_t) +
                       3 * 16400 * sizeof(float);
    for (int i = 0; i < 2; i++) {
        uint32_t d[3];
        coop_canary_dims(i ? &vk->tuning.tile_cm2 : &vk->tuning.tile_coop, i == 1, d);
        const size_t cm = d[0], cn = d[1], ck = d[2],
                     bytes = (cm * ck + cn * ck + 2 * cm * cn) * sizeof(float) +
                             (cm * ck + cn * ck + cm * cn) * sizeof(uint16_t);
        mem_bytes = bytes > mem_bytes ? bytes : mem_bytes;
    }
    float *mem = vkmha__alloc(ctx, mem_bytes);
    if (!mem)
        return vkmha__fail(ctx, VKMHA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                           ctx->call);
    /* Two passes: the first only plans (vk->exec.gather), so that the pipelines
     * of every canary are created together, on several threads. */
    memset(mem, 0, mem_bytes);
    vk->check.running = true;
    vk_exec_gather(vk, true);
    vkmha_status st = run_canaries(vk, mem, todo, vk->check.breaks);
    vk_exec_gather(vk, false);
    const uint32_t created = vk->pipelines.created;
    struct timespec ta, tb;
    clock_gettime(CLOCK_MONOTONIC, &ta);
    if (!st)
        st = vk_pipelines_build(vk);
    const uint32_t built = vk->pipelines.created;
    clock_gettime(CLOCK_MONOTONIC, &tb);
    if (!st)
        st = run_canaries(vk, mem, todo, vk->check.breaks);
    vk->check.running = false;
    /* Read by tests/test_selfcheck.c: the judged pass creates nothing. */
    vkmha__log(ctx, VKMHA_LOG_DEBUG, VKMHA_SUCCESS,
               "%s: self-check: %u pipelines created together in %.1f ms, %u while judging",
               ctx->call, built - created, elapsed_ms(&ta, &tb), vk->pipelines.created - built);
    vkmha__free(ctx, mem);
    /* Every path of todo is judged (or not on this device) unless a
     * canary failed: those left are checked by the next call needing them. */
    if (!st)
        vk->check.pending &= ~todo;
    /* Pipelines built before a fallback changed their code: built anew (the
     * paths of VK_CHECK_BASE are checked before any call used a pipeline). */
    if (vk->tuning.native16 != before16 || vk->tuning.use_subgroup != subgroup)
        vk_pipelines_forget(vk);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    vk->check.us += (uint32_t)(elapsed_ms(&t0, &t1) * 1e3);
    return st;
}
