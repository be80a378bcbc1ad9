/* Which way an attention call runs on the Vulkan backend (AUTO): the fused
 * path on the CPU-shaped kernel (shaders/flash_cpu.comp), on the
 * workgroup-shared kernel (shaders/flash.comp), or the unfused path (matmul,
 * softmax, matmul), whichever a cost model of this device type predicts to
 * be fastest. The model is linear in a few features of the shape, each
 * standing for a part of the work, with coefficients measured per device
 * type by bench/vkmha-bench-cost, which fits them on a grid of shapes and
 * prints the table below (and how far its choices are from the fastest
 * path on every shape it ran):
 *
 *   fused kernel:  t = fixed + group * G + fetch * G Lk D + vec4 * R Lk D + key * R Lk
 *     G: workgroups (batch x heads x query blocks), R: query rows rounded
 *     up to whole blocks (the lanes a block leaves idle still cost), Lk
 *     keys, D = d_k/4 + d_v/4 vec4s per key and row: a workgroup loads each
 *     key and value once (fetch) for all its rows (vec4: the multiply-adds);
 *     the weights pass adds G and the q . k half of the rest again.
 *   unfused:       t = fixed + mac * M + row * Rq + score * S + matrix * B H
 *     M: the multiply-adds of scale q k^T and p v with each matrix rounded up
 *     to the matmul's tile (tiny head dims waste most of a tile), Rq = B H
 *     len_q softmax rows, S = B H len_q len_k scores.
 *
 * All times in microseconds. Device types without a measured row use the
 * "other" row, which is not measured (no GPU has been available): it makes
 * the fused path win everywhere it can run, which is what fused attention
 * does on GPUs (FlashAttention and its successors). */
#include "vk_base.h"

/* Coefficients of the features below, in their order. */
typedef struct device_coeffs {
    vkmha_device_type type; /* VKMHA_DEVICE_TYPE_OTHER: every type not listed */
    double cpu_kernel[VK_COST_FUSED_FEATURES], shared_kernel[VK_COST_FUSED_FEATURES];
    double unfused[VK_COST_UNFUSED_FEATURES];
} device_coeffs;

/* bench/vkmha-bench-cost prints these rows. */
static const device_coeffs table[] = {
    /* lavapipe (Mesa 22.3.6, LLVM 15, 2 threads of an AVX-512 x86-64),
     * 2026-11-23. */
    {VKMHA_DEVICE_TYPE_CPU,
     {97.89, 0.886, 0.005476, 0, 0.006676},
     {0, 54.67, 0.08208, 0.0003851, 0.06059},
     {131.1, 0.0001263, 0.1088, 0.005488, 1.328}},
    /* Not measured: fused wherever it runs. */
    {VKMHA_DEVICE_TYPE_OTHER,
     {1e9, 0.0, 0.0, 1.0, 1.0},
     {10.0, 0.0, 0.0, 0.0001, 0.0},
     {1e6, 1.0, 1.0, 1.0, 1.0}},
};

static const device_coeffs *coeffs_for(vkmha_device_type type)
{
    for (size_t i = 0; i < VKMHA_ARRAY_LEN(table); i++)
        if (table[i].type == type)
            return &table[i];
    return &table[VKMHA_ARRAY_LEN(table) - 1];
}

static uint64_t round_up(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b * b;
}

void vk_cost_fused_features(const attn_shape *s, uint32_t block_q, bool weights,
                            double f[VK_COST_FUSED_FEATURES])
{
    const double bh = (double)s->batch * s->heads;
    const double groups = bh * (double)((s->len_q + block_q - 1) / block_q);
    const double keys = groups * block_q * s->len_k;
    const double dk4 = (s->d_k + 3) / 4, dv4 = (s->d_v + 3) / 4;
    const double passes = weights ? 2.0 : 1.0;
    const double d = dk4 + dv4 + (weights ? dk4 : 0.0);
    f[0] = 1.0;
    f[1] = passes * groups;
    f[2] = groups * s->len_k * d;
    f[3] = keys * d;
    f[4] = passes * keys;
}

void vk_cost_unfused_features(const attn_shape *s, const vkmha_tile_config *t,
                              double f[VK_COST_UNFUSED_FEATURES])
{
    const double bh = (double)s->batch * s->heads;
    /* scores [len_q][len_k] over d_k, then out [len_q][d_v] over len_k. */
    const double qk = (double)round_up(s->len_q, t->bm) * round_up(s->len_k, t->bn) *
                      round_up(s->d_k, t->bk);
    const double pv = (double)round_up(s->len_q, t->bm) * round_up(s->d_v, t->bn) *
                      round_up(s->len_k, t->bk);
    f[0] = 1.0;
    f[1] = bh * (qk + pv);
    f[2] = bh * s->len_q;
    f[3] = bh * s->len_q * s->len_k;
    f[4] = bh;
}

static double dot(const double *a, const double *b, int n)
{
    double r = 0.0;
    for (int i = 0; i < n; i++)
        r += a[i] * b[i];
    return r;
}

double vk_cost_fused(const vk_state *vk, const attn_shape *s, bool cpu_kernel, bool weights,
                     uint32_t block_q)
{
    const device_coeffs *c = coeffs_for(vk->info.type);
    double f[VK_COST_FUSED_FEATURES];
    vk_cost_fused_features(s, block_q, weights, f);
    return dot(cpu_kernel ? c->cpu_kernel : c->shared_kernel, f, VK_COST_FUSED_FEATURES);
}

double vk_cost_unfused(const vk_state *vk, const attn_shape *s)
{
    double f[VK_COST_UNFUSED_FEATURES];
    vk_cost_unfused_features(s, &vk->tuning.tile_large, f);
    return dot(coeffs_for(vk->info.type)->unfused, f, VK_COST_UNFUSED_FEATURES);
}
