/* The row kernels (softmax, split / merge heads, residual + LayerNorm) on
 * every variant a device can run, against the reference backend:
 *
 *   cpu       the CPU-shaped kernels (shaders/softmax_cpu.comp, heads_cpu.comp,
 *             layernorm_cpu.comp: a row per invocation, vec4 texel reads),
 *             what CPU devices use;
 *   storage   the same with storage-buffer reads only (VKMHA_ROW_KERNELS=
 *             storage), as with wrapped tensors, which have no texel view;
 *   gpu       the workgroup-per-row kernels (VKMHA_ROW_KERNELS=gpu), what
 *             GPUs use, with subgroup reductions and with shared memory only.
 * On a GPU the first two are the GPU kernels again (reported in a
 * diagnostic). Edge cases: rows shorter than a vec4, lengths that are not
 * multiples of 4 (the scalar paths), row counts that are not multiples of
 * the 16 rows of a CPU workgroup, rows at VK_CPU_ROW_MAX (the longest a
 * CPU-shaped kernel takes) and past it (the workgroup-per-row fallback),
 * -inf rows and keys in the softmax. The program links the library's
 * objects: LayerNorm has no public op, so it calls vk_layernorm and
 * ref_layernorm.
 *
 * Tolerances: softmax 1e-6 + 1e-5 |ref| (as tests/test_softmax.c), heads
 * exact, LayerNorm 1e-5 + 1e-5 |ref| (float32 two-pass statistics against
 * double). */
#include "util.h"

#include "internal.h"
#include "vk_internal.h"

typedef struct variant {
    const char *name, *env; /* VKMHA_ROW_KERNELS, NULL: unset */
    uint32_t flags;
} variant;

static const variant variants[] = {
    {"cpu", NULL, 0},
    {"storage", "storage", 0},
    {"gpu subgroup", "gpu", 0},
    {"gpu shared-memory", "gpu", VKMHA_CONTEXT_NO_SUBGROUP_OPS},
};

typedef struct sm_case {
    uint32_t batch, heads, len_q, len_k, kinds, bias_batch, bias_heads;
    bool neg_inf; /* -inf biases: row 0 entirely, row 1 but its last key */
} sm_case;

static void softmax_case(vkmha_context *ref, vkmha_context *gpu, const char *tag, t_rng *rng,
                         const sm_case *c)
{
    char name[192], mn[64];
    snprintf(name, sizeof name, "[%s] softmax B %u H %u Lq %u Lk %u mask %s%s", tag, c->batch,
             c->heads, c->len_q, c->len_k, t_mask_name(c->kinds, mn, sizeof mn),
             c->neg_inf ? " -inf rows" : "");
    vkmha_softmax_desc d = {c->batch, c->heads, c->len_q, c->len_k, 0.7f, 0};
    size_t n = (size_t)c->batch * c->heads * c->len_q * c->len_k;
    float *x = t_random(rng, n, -4, 4), *want = t_alloc(n), *got = t_alloc(n);
    t_mask tm;
    const vkmha_mask *m = t_mask_make(&tm, rng, c->kinds, c->batch, c->heads, c->len_q,
                                      c->len_k, c->bias_batch, c->bias_heads, false);
    if (c->neg_inf && tm.bias) {
        const float inf = INFINITY;
        for (uint32_t j = 0; j < c->len_k; j++)
            tm.bias[j] = -inf;
        for (uint32_t j = 0; c->len_q > 1 && j + 1 < c->len_k; j++)
            tm.bias[c->len_k + j] = -inf;
    }
    vkmha_status rst = vkmha_softmax(ref, &d, x, m, want);
    vkmha_status st = vkmha_softmax(gpu, &d, x, m, got);
    if (st)
        t_diag("%s: %s", name, vkmha_context_last_error(gpu));
    t_report(!rst && !st && t_close(name, "y", got, want, n, 1e-6, 1e-5), "%s", name);
    free(x), free(want), free(got);
    t_mask_free(&tm);
}

static void heads_case(vkmha_context *ref, vkmha_context *gpu, const char *tag, t_rng *rng,
                       uint32_t batch, uint32_t len, uint32_t heads, uint32_t head_dim)
{
    vkmha_heads_desc d = {batch, len, heads, head_dim, 0};
    size_t n = (size_t)batch * len * heads * head_dim;
    float *x = t_random(rng, n, -1, 1), *want = t_alloc(n), *got = t_alloc(n);
    for (int split = 1; split >= 0; split--) {
        char name[160];
        snprintf(name, sizeof name, "[%s] %s heads B %u L %u H %u d %u", tag,
                 split ? "split" : "merge", batch, len, heads, head_dim);
        vkmha_status rst = split ? vkmha_split_heads(ref, &d, x, want)
                                 : vkmha_merge_heads(ref, &d, x, want);
        vkmha_status st = split ? vkmha_split_heads(gpu, &d, x, got)
                                : vkmha_merge_heads(gpu, &d, x, got);
        if (st)
            t_diag("%s: %s", name, vkmha_context_last_error(gpu));
        t_report(!rst && !st && t_close(name, "y", got, want, n, 0, 0), "%s", name);
    }
    free(x), free(want), free(got);
}

static void layernorm_case(vkmha_context *gpu, const char *tag, t_rng *rng, uint32_t rows,
                           uint32_t cols, bool residual)
{
    char name[160];
    snprintf(name, sizeof name, "[%s] layernorm rows %u cols %u%s", tag, rows, cols,
             residual ? " + residual" : "");
    size_t n = (size_t)rows * cols;
    float *x = t_random(rng, n, -3, 5), *res = residual ? t_random(rng, n, -1, 1) : NULL;
    float *gamma = t_random(rng, cols, 0.5f, 1.5f), *beta = t_random(rng, cols, -0.5f, 0.5f);
    float *want = t_alloc(n), *got = t_alloc(n);
    ref_layernorm(rows, cols, x, res, gamma, beta, 1e-5f, want);
    vkmha__begin_call(gpu, "vk_layernorm");
    vkmha_status st = vk_layernorm(gpu->vk, rows, cols, 1e-5f, x, res, gamma, beta, got);
    if (st)
        t_diag("%s: %s", name, vkmha_context_last_error(gpu));
    t_report(!st && t_close(name, "y", got, want, n, 1e-5, 1e-5), "%s", name);
    free(x), free(res), free(gamma), free(beta), free(want), free(got);
}

int main(void)
{
    const uint32_t KP = VKMHA_MASK_KEY_PADDING, FULL = VKMHA_MASK_FULL,
                   CAUSAL = VKMHA_MASK_CAUSAL, BIAS = VKMHA_MASK_BIAS;
    const uint32_t MAX = VK_CPU_ROW_MAX;
    static const sm_case sm_cases[] = {
        {1, 1, 1, 1, 0, 0, 0, false},
        {1, 1, 2, 3, CAUSAL, 0, 0, false},
        {1, 1, 3, 4, KP | BIAS, 0, 0, false},
        {2, 3, 17, 75, KP | FULL | CAUSAL | BIAS, 0, 0, false}, /* scalar path */
        {2, 3, 17, 76, KP | FULL | CAUSAL | BIAS, 1, 1, false}, /* vec4, broadcast bias */
        {2, 3, 5, 7, BIAS, 1, 3, true},
        {2, 3, 5, 8, BIAS | CAUSAL, 2, 3, true},
        {1, 1, 2, MAX, KP | CAUSAL | BIAS, 0, 0, true}, /* the longest CPU-shaped row */
        {1, 2, 3, MAX + 4, KP | BIAS, 0, 0, false},    /* past it: workgroup per row */
        {1, 1, 2, MAX + 3, FULL, 0, 0, false},
    };
    t_rng rng = {31};
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    for (size_t v = 0; v < VKMHA_ARRAY_LEN(variants); v++) {
        const variant *va = &variants[v];
        if (va->env)
            setenv("VKMHA_ROW_KERNELS", va->env, 1);
        else
            unsetenv("VKMHA_ROW_KERNELS");
        vkmha_context *gpu = t_context(VKMHA_BACKEND_VULKAN, va->flags);
        t_diag("%s: CPU-shaped row kernels %s, texel reads %s", va->name,
               gpu->vk->tuning.cpu_rows_wg ? "on" : "off", gpu->vk->tuning.row_texel ? "on" : "off");
        for (size_t i = 0; i < VKMHA_ARRAY_LEN(sm_cases); i++)
            softmax_case(ref, gpu, va->name, &rng, &sm_cases[i]);
        heads_case(ref, gpu, va->name, &rng, 1, 1, 1, 1);
        heads_case(ref, gpu, va->name, &rng, 2, 5, 3, 3);
        heads_case(ref, gpu, va->name, &rng, 2, 37, 3, 4);
        heads_case(ref, gpu, va->name, &rng, 1, 19, 5, 7);
        heads_case(ref, gpu, va->name, &rng, 2, 17, 4, 64);
        heads_case(ref, gpu, va->name, &rng, 1, 3, 2, MAX);
        heads_case(ref, gpu, va->name, &rng, 1, 3, 2, MAX + 1);
        const uint32_t ln[][2] = {{1, 1},  {3, 3},  {17, 5},   {33, 32}, {19, 75},
                                  {40, 512}, {3, MAX}, {2, MAX + 4}, {2, MAX + 1}};
        for (size_t i = 0; i < VKMHA_ARRAY_LEN(ln); i++)
            for (int r = 0; r < 2; r++)
                layernorm_case(gpu, va->name, &rng, ln[i][0], ln[i][1], r);
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
    }
    unsetenv("VKMHA_ROW_KERNELS");
    vkmha_context_destroy(ref);
    return t_finish();
}
