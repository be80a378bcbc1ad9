/* The scratch budget (vkmha_context_desc.scratch_budget): after a long run
 * of calls of varied shapes (every op, both attention paths with and without
 * weights, the layer, on host arrays and on tensors), a context with a
 * budget holds at most that many bytes of scratch after every call, and
 * gives the same bits as a context without one, whose scratch grows past
 * the budget (so the budget is what kept it down). vkmha_context_info
 * reports the scratch bytes; vkmha_context_trim frees them all. */
#include "util.h"

#define BUDGET (1u << 20) /* bytes */
#define CALLS 120

typedef struct pair {
    vkmha_context *ctx[2]; /* [0] with the budget, [1] without */
    uint64_t most[2];      /* most scratch bytes seen after a call */
    bool over_budget;      /* [0] was above the budget after a call */
} pair;

static uint64_t scratch_of(vkmha_context *ctx)
{
    vkmha_context_info info;
    return vkmha_context_get_info(ctx, &info) == VKMHA_SUCCESS ? info.scratch_bytes
                                                               : UINT64_MAX;
}

static void after_call(pair *p)
{
    for (int i = 0; i < 2; i++) {
        const uint64_t s = scratch_of(p->ctx[i]);
        if (s > p->most[i])
            p->most[i] = s;
        if (i == 0 && s > BUDGET) {
            if (!p->over_budget)
                t_diag("scratch %llu bytes after a call, budget %u", (unsigned long long)s,
                       BUDGET);
            p->over_budget = true;
        }
    }
}

static uint32_t pick(t_rng *r, uint32_t lo, uint32_t hi)
{
    return lo + (uint32_t)(t_next(r) % (hi - lo + 1));
}

/* One random call on both contexts; false if a status or a bit differs. */
static bool random_call(pair *p, t_rng *r, vkmha_mha *layers[2], int kind)
{
    float *in[3] = {NULL, NULL, NULL}, *out[2] = {NULL, NULL}, *w[2] = {NULL, NULL};
    size_t n_out = 0, n_w = 0;
    vkmha_status st[2];
    switch (kind) {
    case 0: { /* matmul */
        vkmha_matmul_desc d = {.batch = pick(r, 1, 3), .m = pick(r, 1, 300),
                               .n = pick(r, 1, 300), .k = pick(r, 1, 200),
                               .op_b = VKMHA_OP_T};
        in[0] = t_random(r, (size_t)d.batch * d.m * d.k, -1, 1);
        in[1] = t_random(r, (size_t)d.batch * d.n * d.k, -1, 1);
        n_out = (size_t)d.batch * d.m * d.n;
        for (int i = 0; i < 2; i++) {
            out[i] = t_alloc(n_out);
            st[i] = vkmha_matmul(p->ctx[i], &d, in[0], in[1], NULL, out[i]);
            after_call(p);
        }
        break;
    }
    case 1: { /* softmax */
        vkmha_softmax_desc d = {pick(r, 1, 2), pick(r, 1, 4), pick(r, 1, 200), pick(r, 1, 400), 0, 0};
        n_out = (size_t)d.batch * d.heads * d.len_q * d.len_k;
        in[0] = t_random(r, n_out, -4, 4);
        for (int i = 0; i < 2; i++) {
            out[i] = t_alloc(n_out);
            st[i] = vkmha_softmax(p->ctx[i], &d, in[0], NULL, out[i]);
            after_call(p);
        }
        break;
    }
    case 2: { /* attention, either path, maybe weights */
        vkmha_attention_desc d = {pick(r, 1, 2), 4, 2, pick(r, 1, 150), pick(r, 1, 600),
                                  pick(r, 1, 64), pick(r, 1, 64), 0,
                                  t_next(r) & 1 ? VKMHA_ATTENTION_PATH_UNFUSED
                                                : VKMHA_ATTENTION_PATH_AUTO, 0, 0};
        t_attention_sizes n = t_attention_size(&d);
        in[0] = t_random(r, n.q, -1, 1), in[1] = t_random(r, n.k, -1, 1);
        in[2] = t_random(r, n.v, -1, 1);
        n_out = n.out;
        n_w = t_next(r) & 1 ? n.weights : 0;
        for (int i = 0; i < 2; i++) {
            out[i] = t_alloc(n_out);
            w[i] = n_w ? t_alloc(n_w) : NULL;
            st[i] = vkmha_attention(p->ctx[i], &d, in[0], in[1], in[2], NULL, out[i], w[i]);
            after_call(p);
        }
        break;
    }
    default: { /* the layer, self-attention */
        vkmha_mha_io io = {0};
        io.batch = pick(r, 1, 2);
        io.len_q = pick(r, 1, 200);
        io.attention_path = t_next(r) & 1 ? VKMHA_ATTENTION_PATH_UNFUSED : 0;
        n_out = (size_t)io.batch * io.len_q * 64;
        in[0] = t_random(r, n_out, -1, 1);
        io.query = io.key = io.value = in[0];
        for (int i = 0; i < 2; i++) {
            out[i] = t_alloc(n_out);
            io.out = out[i];
            st[i] = vkmha_mha_forward(layers[i], &io);
            after_call(p);
        }
        break;
    }
    }
    bool ok = st[0] == VKMHA_SUCCESS && st[1] == VKMHA_SUCCESS &&
              memcmp(out[0], out[1], n_out * sizeof(float)) == 0 &&
              (!n_w || memcmp(w[0], w[1], n_w * sizeof(float)) == 0);
    if (!ok)
        t_diag("call kind %d: status %s / %s, or the outputs differ", kind,
               vkmha_status_string(st[0]), vkmha_status_string(st[1]));
    for (int i = 0; i < 3; i++)
        free(in[i]);
    for (int i = 0; i < 2; i++)
        free(out[i]), free(w[i]);
    return ok;
}

int main(void)
{
    t_rng rng = {77};
    pair p = {{NULL, NULL}, {0, 0}, false};
    for (int i = 0; i < 2; i++) {
        vkmha_context_desc desc = {0};
        desc.enable_validation = t_validation();
        desc.log = t_log;
        desc.scratch_budget = i == 0 ? BUDGET : 0;
        /* Scratch is what these cases measure: none left by the self-check
         * (its own scratch stays within the budget: test_selfcheck.c). */
        desc.flags = VKMHA_CONTEXT_NO_SELF_CHECK;
        if (vkmha_context_create(&desc, &p.ctx[i])) {
            printf("Bail out! cannot create a Vulkan context: %s\n",
                   vkmha_context_last_error(NULL));
            return 1;
        }
    }
    t_pin_libraries(); /* sanitizer reports name the driver's frames */
    vkmha_context_info info;
    const bool got_info = vkmha_context_get_info(p.ctx[0], &info) == VKMHA_SUCCESS;
    t_report(got_info && info.scratch_budget == BUDGET && info.scratch_bytes == 0,
             "info reports the budget (%llu) and no scratch before the first call",
             (unsigned long long)info.scratch_budget);

    t_layer l;
    t_layer_make(&l, &rng, 64, 4, 2, 1, 1, 0, 0);
    vkmha_mha *layers[2] = {NULL, NULL};
    bool ok = vkmha_mha_create(p.ctx[0], &l.desc, &layers[0]) == VKMHA_SUCCESS &&
              vkmha_mha_create(p.ctx[1], &l.desc, &layers[1]) == VKMHA_SUCCESS;
    t_report(ok, "a layer on each context");
    bool same = ok;
    for (int c = 0; c < CALLS && same; c++)
        same = random_call(&p, &rng, layers, c % 4);
    t_report(same, "%d calls of varied shapes give the same bits with and without the budget",
             CALLS);
    t_report(!p.over_budget, "scratch within the budget (%u bytes) after every call: most %llu",
             BUDGET, (unsigned long long)p.most[0]);
    t_report(p.most[1] > 2ull * BUDGET,
             "without a budget the scratch grew to %llu bytes (the budget is what bounds it)",
             (unsigned long long)p.most[1]);

    /* On tensors too: a large softmax in and out of tensors. */
    vkmha_tensor_desc td = {VKMHA_DTYPE_F32, 2, {700, 700, 0, 0}};
    vkmha_tensor *x = NULL, *y = NULL;
    ok = vkmha_tensor_create(p.ctx[0], &td, &x) == VKMHA_SUCCESS &&
         vkmha_tensor_create(p.ctx[0], &td, &y) == VKMHA_SUCCESS;
    vkmha_softmax_desc sd = {1, 1, 700, 700, 0, 0};
    vkmha_tensor_mask tm = {0};
    tm.kinds = VKMHA_MASK_BIAS;
    tm.bias = x;
    ok = ok && vkmha_softmax_tensor(p.ctx[0], &sd, x, &tm, y) == VKMHA_SUCCESS;
    t_report(ok && scratch_of(p.ctx[0]) <= BUDGET, "softmax on tensors: scratch %llu bytes",
             (unsigned long long)scratch_of(p.ctx[0]));
    vkmha_tensor_destroy(x);
    vkmha_tensor_destroy(y);

    const uint64_t before = scratch_of(p.ctx[1]);
    ok = vkmha_context_trim(p.ctx[1]) == VKMHA_SUCCESS;
    t_report(ok && before > 0 && scratch_of(p.ctx[1]) == 0,
             "vkmha_context_trim frees every scratch byte (%llu before)",
             (unsigned long long)before);

    vkmha_mha_destroy(layers[0]);
    vkmha_mha_destroy(layers[1]);
    t_layer_free(&l);
    t_report_validation(p.ctx[0]);
    t_report_validation(p.ctx[1]);
    vkmha_context_destroy(p.ctx[0]);
    vkmha_context_destroy(p.ctx[1]);
    return t_finish();
}
