/* vkmha_attention on Vulkan vs the reference backend: Lq != Lk, d_k != d_v,
 * grouped-query and multi-query heads, every mask kind alone and combined,
 * fully masked rows, returned weights, and logits around +-1e4; each case on
 * the fused path, the fused path with the keys split in 3 (split-K), and the
 * unfused path, and the fused output against the unfused one. Then long
 * sequences (Lq = Lk = 4096), decode shapes (Lq = 1, Lk up to 8192) with
 * automatic and forced split-K, and head dims up to 256 (and above, where
 * the fused path must say UNSUPPORTED and AUTO falls back to unfused).
 *
 * Tolerances (inputs uniform in [-1, 1]): weights |gpu - ref| <= 1e-6 +
 * 1e-5 |ref|; outputs <= 2e-6 sqrt(len_k) + 1e-5 |ref| (a sum over len_k
 * weighted values). For the +-1e4 logit cases q and k are small integers and
 * scale is 1, so the logits are exact in fp32 and the same tolerances hold. */
#include "util.h"

#define W_ATOL 1e-6
#define RTOL 1e-5
#define O_ATOL_PER_SQRT_LK 2e-6

typedef struct attn_case {
    uint32_t batch, heads, kv_heads, len_q, len_k, d_k, d_v;
    uint32_t kinds, bias_batch, bias_heads;
    bool fully_masked_row, weights, big_logits;
} attn_case;

/* Small integers: exact products and sums in fp32. */
static float *integers(t_rng *r, size_t n, int lo, int hi)
{
    float *p = t_alloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(lo + (int)(t_next(r) % (uint64_t)(hi - lo + 1)));
    return p;
}

static void run_case(vkmha_context *ref, vkmha_context *gpu, const char *tag, t_rng *rng,
                     const attn_case *c, const t_attention_run *only)
{
    char name[220], mname[64];
    snprintf(name, sizeof name,
             "attention B %u H %u Hkv %u Lq %u Lk %u dk %u dv %u mask %s%s%s%s", c->batch,
             c->heads, c->kv_heads, c->len_q, c->len_k, c->d_k, c->d_v,
             t_mask_name(c->kinds, mname, sizeof mname),
             c->fully_masked_row ? " fully-masked-row" : "", c->weights ? " weights" : "",
             c->big_logits ? " logits~1e4" : "");
    vkmha_attention_desc d = {c->batch, c->heads, c->kv_heads, c->len_q, c->len_k,
                              c->d_k, c->d_v, c->big_logits ? 1.0f : 0.0f, 0, 0, 0};
    const t_attention_sizes n = t_attention_size(&d);
    const size_t nq = n.q, nk = n.k, nv = n.v, no = n.out, nw = n.weights;
    float *q = c->big_logits ? integers(rng, nq, -30, 30) : t_random(rng, nq, -1, 1);
    float *k = c->big_logits ? integers(rng, nk, -30, 30) : t_random(rng, nk, -1, 1);
    float *v = t_random(rng, nv, -1, 1);
    float *want = t_alloc(no), *got = t_alloc(no), *fused = t_alloc(no);
    float *want_w = c->weights ? t_alloc(nw) : NULL, *got_w = c->weights ? t_alloc(nw) : NULL;
    t_mask tm;
    const vkmha_mask *m = t_mask_make(&tm, rng, c->kinds, c->batch, c->heads, c->len_q,
                                      c->len_k, c->bias_batch, c->bias_heads,
                                      c->fully_masked_row);
    const double o_atol = O_ATOL_PER_SQRT_LK * sqrt((double)c->len_k);
    vkmha_status rst = vkmha_attention(ref, &d, q, k, v, m, want, want_w);
    if (rst)
        t_diag("reference: %s", vkmha_context_last_error(ref));
    size_t n_runs = only ? 1 : T_ATTENTION_RUNS;
    for (size_t r = 0; r < n_runs; r++) {
        const t_attention_run *run = only ? only : &t_attention_runs[r];
        bool ok = rst == VKMHA_SUCCESS;
        d.path = run->path;
        d.kv_splits = run->kv_splits;
        vkmha_status st = vkmha_attention(gpu, &d, q, k, v, m, got, got_w);
        T_EXPECT_STATUS(st, VKMHA_SUCCESS, ok);
        if (st)
            t_diag("%s", vkmha_context_last_error(gpu));
        if (ok && c->weights)
            ok = t_close(name, "weights", got_w, want_w, nw, W_ATOL, RTOL);
        if (ok)
            ok = t_close(name, "out", got, want, no, o_atol, RTOL);
        t_report(ok, "%s [%s, %s]", name, run->name, tag);
        if (r == 0)
            memcpy(fused, got, no * sizeof *got);
        else if (run->path == VKMHA_ATTENTION_PATH_UNFUSED)
            t_report(ok && t_close(name, "fused vs unfused out", fused, got, no, o_atol, RTOL),
                     "%s: fused and unfused outputs agree [%s]", name, tag);
    }
    free(q);
    free(k);
    free(v);
    free(want);
    free(got);
    free(fused);
    free(want_w);
    free(got_w);
    t_mask_free(&tm);
}

/* The debug log says how each call ran; keep the last attention line. */
static void keep_plan(void *user, vkmha_log_level level, vkmha_status status, const char *msg)
{
    (void)status;
    if (level == VKMHA_LOG_DEBUG && (strstr(msg, " attention") || strstr(msg, "rows of one head")))
        snprintf((char *)user, 256, "%s", msg);
}

/* On the fused path, split-K is chosen automatically for decode shapes (too
 * few query blocks to fill the device) and not for long query sequences;
 * the plan is read back from the debug log. */
static void auto_split_case(vkmha_context *ref, t_rng *rng)
{
    char plan[256] = "";
    vkmha_context_desc desc = {0};
    desc.enable_validation = t_validation();
    desc.log = keep_plan;
    desc.log_user = plan;
    desc.log_level = VKMHA_LOG_DEBUG; /* the plan of each attention */
    vkmha_context *gpu = NULL;
    if (vkmha_context_create(&desc, &gpu)) {
        t_report(false, "context with a debug logger: %s", vkmha_context_last_error(NULL));
        return;
    }
    const t_attention_run run = {VKMHA_ATTENTION_PATH_FUSED, 0, "fused, automatic splits, logged"};
    const attn_case decode = {1, 8, 0, 1, 4096, 64, 64, 0, 0, 0, false, false, false};
    run_case(ref, gpu, "auto split-K", rng, &decode, &run);
    unsigned ranges = 0;
    const char *p = strstr(plan, "workgroups, ");
    t_report(p && sscanf(p, "workgroups, %u key ranges", &ranges) == 1 && ranges > 1,
             "decode shape (Lq 1, Lk 4096, 8 heads) splits the keys: \"%s\"", plan);
    /* A decode step of MQA (MLA's 16 heads over one key head): the group's
     * heads run as the rows of one head, each key read once. */
    const attn_case mqa = {1, 16, 1, 1, 500, 576, 512, VKMHA_MASK_KEY_PADDING,
                           0, 0, false, false, false};
    run_case(ref, gpu, "auto split-K", rng, &mqa, &run);
    t_report(strstr(plan, "16 query heads per key / value head run as the rows of one head"),
             "MQA decode step (16 heads over one key head): folded into rows: \"%s\"", plan);
    /* Enough query blocks for any device: 256 workgroups of 64 queries
     * fill a GPU (vk_state.flash_fill_groups); L 256 split on an H100. */
    const attn_case prefill = {2, 8, 0, 1024, 1024, 64, 64, 0, 0, 0, false, false, false};
    run_case(ref, gpu, "auto split-K", rng, &prefill, &run);
    p = strstr(plan, "workgroups, ");
    t_report(p && sscanf(p, "workgroups, %u key ranges", &ranges) == 1 && ranges == 1,
             "long query sequence (B 2, L 1024, 8 heads) does not: \"%s\"", plan);
    t_report_validation(gpu);
    vkmha_context_destroy(gpu);
}

/* Head dims above the fused shaders' 576: FUSED is UNSUPPORTED with a
 * message, AUTO runs unfused and matches the reference. */
static void head_dim_limit_case(vkmha_context *ref, vkmha_context *gpu, t_rng *rng)
{
    const uint32_t L = 9, dk = 584, dv = 8;
    float *q = t_random(rng, (size_t)L * dk, -1, 1), *k = t_random(rng, (size_t)L * dk, -1, 1);
    float *v = t_random(rng, (size_t)L * dv, -1, 1);
    float *want = t_alloc((size_t)L * dv), *got = t_alloc((size_t)L * dv);
    vkmha_attention_desc d = {1, 1, 0, L, L, dk, dv, 0, VKMHA_ATTENTION_PATH_FUSED, 0, 0};
    vkmha_status st = vkmha_attention(gpu, &d, q, k, v, NULL, got, NULL);
    const char *msg = vkmha_context_last_error(gpu);
    t_report(st == VKMHA_ERROR_UNSUPPORTED && strstr(msg, "fused") && strstr(msg, "d_k 584"),
             "fused path with d_k 584: %s, \"%s\"", vkmha_status_string(st), msg);
    d.path = VKMHA_ATTENTION_PATH_AUTO;
    bool ok = true;
    T_EXPECT_STATUS(vkmha_attention(ref, &d, q, k, v, NULL, want, NULL), VKMHA_SUCCESS, ok);
    T_EXPECT_STATUS(vkmha_attention(gpu, &d, q, k, v, NULL, got, NULL), VKMHA_SUCCESS, ok);
    t_report(ok && t_close("d_k 584 auto", "out", got, want, (size_t)L * dv, 1e-5, RTOL),
             "d_k 584 on the default path falls back to unfused and matches the reference");
    free(q), free(k), free(v), free(want), free(got);
}

/* The blocks of the variant with the GPU blocks (gpu): on a CPU device they
 * must differ from the workgroup-shared variant's (shared) in some head-dim
 * class, or that variant would run nothing new; on a GPU they are the same.
 * The blocks are the parameters of the "flash_d*" kernels
 * (vkmha_context_get_kernels). */
static void gpu_blocks_case(vkmha_context *shared, vkmha_context *gpu)
{
    vkmha_context_info gi;
    if (vkmha_context_get_info(gpu, &gi)) {
        t_report(false, "GPU blocks: cannot query the context");
        return;
    }
    bool differ = false, listed = true;
    vkmha_kernel_info d32 = {0};
    for (int c = 0; c < 4; c++) {
        char name[32], da[160], db[160];
        snprintf(name, sizeof name, "flash_d%u", 32u << c);
        vkmha_kernel_info a, b;
        listed = kernel_find(shared, name, &a) && kernel_find(gpu, name, &b) && listed;
        t_diag("%s: CPU-device blocks %s; GPU blocks %s, %u bytes of shared memory", name,
               kernel_describe(&a, da, sizeof da), kernel_describe(&b, db, sizeof db),
               b.shared_bytes);
        differ = differ || a.available != b.available || a.param_count != b.param_count ||
                 memcmp(a.params, b.params, sizeof a.params) != 0;
        if (c == 0)
            d32 = b;
    }
    const bool cpu = gi.device.type == VKMHA_DEVICE_TYPE_CPU;
    t_report(listed && differ == cpu && d32.available,
             "fused kernel with the GPU blocks: %s the workgroup-shared kernel's on this %s "
             "device",
             differ ? "blocks differ from" : "same blocks as", cpu ? "CPU" : "GPU");
}

int main(void)
{
    vkmha_context *ref = t_context(VKMHA_BACKEND_REFERENCE, 0);
    t_rng rng = {11};
    const uint32_t KP = VKMHA_MASK_KEY_PADDING, FULL = VKMHA_MASK_FULL,
                   CAUSAL = VKMHA_MASK_CAUSAL, BIAS = VKMHA_MASK_BIAS;
    static const attn_case cases[] = {
        /* B H Hkv Lq Lk dk dv kinds bb bh fully weights big */
        {1, 1, 0, 1, 1, 1, 1, 0, 0, 0, false, true, false},
        {2, 4, 0, 17, 17, 16, 16, 0, 0, 0, false, true, false},
        {1, 2, 0, 3, 75, 8, 5, 0, 0, 0, false, false, false},     /* cross, dk != dv */
        {2, 8, 2, 33, 40, 16, 24, 0, 0, 0, false, true, false},   /* GQA */
        {1, 4, 1, 20, 129, 32, 32, 0, 0, 0, false, false, false}, /* MQA */
        /* decode steps of GQA and MQA: a group's heads fold into rows
         * (not under a causal mask that hides keys from the query) */
        {2, 16, 2, 1, 77, 40, 24, KP, 0, 0, true, false, false},
        {1, 16, 1, 1, 45, 576, 512, KP, 0, 0, false, false, false},
        {1, 12, 2, 1, 33, 16, 16, CAUSAL, 0, 0, false, false, false},
        {1, 3, 0, 1, 300, 64, 17, 0, 0, 0, false, true, false},   /* one query (decode) */
        {2, 2, 0, 9, 30, 8, 8, KP, 0, 0, false, true, false},
        {2, 2, 0, 9, 30, 8, 8, FULL, 0, 0, false, true, false},
        {1, 2, 0, 30, 30, 8, 12, CAUSAL, 0, 0, false, true, false},
        {1, 2, 0, 10, 30, 8, 8, CAUSAL, 0, 0, false, false, false}, /* causal, Lq < Lk */
        {2, 4, 0, 7, 19, 4, 4, BIAS, 1, 1, false, true, false},
        {2, 4, 2, 7, 19, 4, 4, BIAS, 0, 0, false, true, false},     /* bias per head, GQA */
        {2, 4, 0, 12, 12, 8, 6, KP | CAUSAL, 0, 0, false, true, false},
        {2, 4, 1, 12, 17, 8, 6, KP | FULL | BIAS, 1, 4, false, true, false},
        {2, 2, 0, 16, 16, 8, 8, KP | FULL | CAUSAL | BIAS, 2, 1, false, true, false},
        {2, 2, 0, 5, 75, 8, 8, KP, 0, 0, true, true, false},       /* fully masked row */
        {2, 2, 0, 5, 5, 8, 8, KP | CAUSAL, 0, 0, true, true, false},
        {1, 2, 0, 6, 129, 16, 8, 0, 0, 0, false, true, true},      /* logits ~ +-1e4 */
        {1, 2, 0, 6, 129, 16, 8, KP, 0, 0, false, true, true},
        {2, 2, 0, 6, 40, 16, 8, KP, 0, 0, true, true, true}, /* set, not added, at 1e4 */
        {1, 2, 0, 300, 300, 64, 64, CAUSAL, 0, 0, false, false, false},
        {1, 2, 2, 70, 45, 128, 100, KP | BIAS, 1, 2, false, true, false}, /* dims 65..128 */
        {1, 2, 1, 33, 50, 256, 200, CAUSAL, 0, 0, false, false, false},  /* dims 129..256 */
        /* dims 257..576: MLA's d_k 576, d_v 512 (one key head, as in its
         * absorbed form), and multiples of 8 in between */
        {1, 4, 1, 5, 37, 576, 512, CAUSAL, 0, 0, false, true, false},
        {2, 2, 2, 9, 19, 320, 264, KP | BIAS, 1, 2, true, true, false},
        {1, 1, 0, 40, 40, 3, 5, KP | CAUSAL, 0, 0, true, true, false},   /* tiny dims */
        /* Fully masked rows under a causal mask need every key block, even
         * those above the diagonal that the fused path otherwise skips. */
        {2, 2, 0, 150, 200, 8, 8, KP | CAUSAL, 0, 0, true, true, false},
        {1, 2, 0, 100, 300, 8, 8, FULL | CAUSAL, 0, 0, false, true, false},
    };
    /* Long sequences and decode shapes: fused only (the unfused scores of
     * the long case alone would be 64 MiB), reference in double. */
    static const attn_case long_cases[] = {
        {1, 1, 0, 4096, 4096, 64, 64, CAUSAL, 0, 0, false, false, false},
        {1, 8, 2, 1, 8192, 64, 64, KP, 0, 0, false, false, false}, /* decode, GQA */
        {2, 4, 0, 3, 5000, 32, 48, KP | BIAS, 1, 4, true, true, false},
        /* Wide heads over many keys (the shared-memory kernel on CPU
         * devices visits 1024 per dispatch). */
        {1, 2, 1, 5, 1500, 128, 100, CAUSAL, 0, 0, false, true, false},
        {1, 2, 0, 3, 1000, 256, 200, KP, 0, 0, false, false, false},
        /* Past the CPU-shaped kernel's 16384 keys per dispatch. */
        {1, 2, 1, 1, 20000, 64, 64, KP, 0, 0, false, true, false},
    };
    static const t_attention_run auto_run = {VKMHA_ATTENTION_PATH_AUTO, 0, "default path, auto splits"};
    static const t_attention_run split_run = {VKMHA_ATTENTION_PATH_FUSED, 7, "fused, 7 key splits"};
    for (size_t variant = 0; variant < T_VK_VARIANTS; variant++) {
        vkmha_context *gpu = t_context_variant(&t_vk_variants[variant]);
        const char *tag = t_vk_variants[variant].tag;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_case(ref, gpu, tag, &rng, &cases[i], NULL);
        /* Long rows on each fused kernel (the reductions do not matter). */
        if (t_vk_variants[variant].flags == 0) {
            for (size_t i = 0; i < sizeof long_cases / sizeof long_cases[0]; i++)
                run_case(ref, gpu, tag, &rng, &long_cases[i], &auto_run);
            for (size_t i = 1; i < sizeof long_cases / sizeof long_cases[0]; i++)
                run_case(ref, gpu, tag, &rng, &long_cases[i], &split_run);
        }
        if (variant == 0) {
            head_dim_limit_case(ref, gpu, &rng);
            auto_split_case(ref, &rng);
        }
        if (t_vk_variants[variant].kernel == VKMHA_FUSED_KERNEL_SHARED_GPU_BLOCKS) {
            const t_vk_variant shared = {0, VKMHA_FUSED_KERNEL_SHARED, "workgroup-shared"};
            vkmha_context *s = t_context_variant(&shared);
            gpu_blocks_case(s, gpu);
            vkmha_context_destroy(s);
        }
        t_report_validation(gpu);
        vkmha_context_destroy(gpu);
    }
    vkmha_context_destroy(ref);
    return t_finish();
}
