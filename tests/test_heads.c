/* vkmha_split_heads / vkmha_merge_heads on Vulkan vs the reference: a pure
 * permutation, so the results must be bitwise equal (tolerance 0), and
 * merge(split(x)) == x. */
#include "util.h"

static void run_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng,
                     const vkmha_heads_desc *d)
{
    char name[160];
    uint32_t batch = d->batch ? d->batch : 1;
    size_t n = (size_t)batch * d->len * d->heads * d->head_dim;
    float *x = t_random(rng, n, -1, 1), *want = t_alloc(n), *got = t_alloc(n),
          *back = t_alloc(n);
    bool ok = true;
    snprintf(name, sizeof name, "split/merge heads B %u L %u H %u d %u", batch, d->len,
             d->heads, d->head_dim);
    T_EXPECT_STATUS(vkmha_split_heads(ref, d, x, want), VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS(vkmha_split_heads(gpu, d, x, got), VKMHA_SUCCESS, ok);
    if (ok)
        ok = t_close(name, "split", got, want, n, 0, 0);
    T_EXPECT_STATUS(vkmha_merge_heads(gpu, d, got, back), VKMHA_SUCCESS, ok);
    if (ok)
        ok = t_close(name, "merge(split(x))", back, x, n, 0, 0);
    /* Merge on its own input, against the reference's merge. */
    T_EXPECT_STATUS(vkmha_merge_heads(ref, d, x, want), VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS(vkmha_merge_heads(gpu, d, x, got), VKMHA_SUCCESS, ok);
    if (ok)
        ok = t_close(name, "merge", got, want, n, 0, 0);
    t_report(ok, "%s", name);
    free(x);
    free(want);
    free(got);
    free(back);
}

int main(void)
{
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    vkmha_context *gpu = t_context(VKMHA_BACKEND_VULKAN, 0);
    t_rng rng = {3};
    static const vkmha_heads_desc cases[] = {
        {1, 1, 1, 1, 0}, {2, 17, 3, 5, 0}, {3, 75, 8, 64, 0}, {1, 300, 7, 3, 0},
        {0, 129, 1, 17, 0}, /* batch 0 means 1; one head is the identity */
        {2, 1, 16, 3, 0},   /* one position */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(ref, gpu, &rng, &cases[i]);
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
    vkmha_context_destroy(ref);
    return t_finish();
}
