/*
 * Tests of the reference backend's ops (src/reference.c) against small cases
 * worked out by hand. The reference is the oracle every other test compares
 * the Vulkan backend with, so it is itself checked here against literals, not
 * against another implementation. The ref_* functions are called directly with
 * hand-filled resolved shapes; no context and no Vulkan are involved.
 *
 * Tolerance: float outputs that are not exactly representable are compared
 * with an absolute tolerance of 1e-6 (TOL) and no relative part; the
 * expected literals carry 10 significant digits, and all values are O(1), so
 * a float rounding (~6e-8) is far inside it. Results that must be exact
 * (integer matmuls, masked weights of 0, uniform rows, untouched gaps) are
 * compared with ==.
 */
#include "../src/internal.h"

#include "util.h"

#define TOL 1e-6

/* Exact element-wise equality; prints the first mismatch. */
static bool eq_exact(const char *case_name, const char *what, const float *got,
                     const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            t_diag("%s: %s[%zu] = %.9g, expected exactly %.9g", case_name, what, i,
                   (double)got[i], (double)want[i]);
            return false;
        }
    }
    return true;
}

static bool close_(const char *case_name, const char *what, const float *got,
                   const float *want, size_t n)
{
    return t_close(case_name, what, got, want, n, TOL, 0.0);
}

static bool status_ok(const char *case_name, vkmha_status st)
{
    if (st != VKMHA_SUCCESS) {
        t_diag("%s: returned %d", case_name, (int)st);
        return false;
    }
    return true;
}

/* ---- matmul ------------------------------------------------------------- */

/* A = [[1,2,3],[4,5,6]], B = [[7,8],[9,10],[11,12]]:
 *   A*B = [[1*7+2*9+3*11, 1*8+2*10+3*12], [4*7+5*9+6*11, 4*8+5*10+6*12]]
 *       = [[58, 64], [139, 154]]
 *   2 * A*B + [1, -1] = [[117, 127], [279, 307]]  (all exact in float) */
static void case_matmul(void)
{
    const char *name = "matmul 2x3 * 3x2, alpha 2, bias";
    const float a[6] = {1, 2, 3, 4, 5, 6};
    const float b[6] = {7, 8, 9, 10, 11, 12};
    const float bias[2] = {1, -1};
    const float want[4] = {117, 127, 279, 307};
    float c[4] = {0};
    mm_shape s = {.batch = 1, .m = 2, .n = 2, .k = 3, .lda = 3, .ldb = 2, .ldc = 2,
                  .trans_b = false, .alpha = 2.0f, .sa = 6, .sb = 6, .sc = 4,
                  .extent_a = 6, .extent_b = 6, .extent_c = 4};
    ref_matmul(&s, a, b, bias, c);
    t_report(eq_exact(name, "C", c, want, 4), "%s", name);
}

/* The same product with B given transposed, as [n][k] = [[7,9,11],[8,10,12]]. */
static void case_matmul_trans(void)
{
    const char *name = "matmul trans_b (B as [n][k])";
    const float a[6] = {1, 2, 3, 4, 5, 6};
    const float bt[6] = {7, 9, 11, 8, 10, 12};
    const float bias[2] = {1, -1};
    const float want[4] = {117, 127, 279, 307};
    float c[4] = {0};
    mm_shape s = {.batch = 1, .m = 2, .n = 2, .k = 3, .lda = 3, .ldb = 3, .ldc = 2,
                  .trans_b = true, .alpha = 2.0f, .sa = 6, .sb = 6, .sc = 4,
                  .extent_a = 6, .extent_b = 6, .extent_c = 4};
    ref_matmul(&s, a, bt, bias, c);
    t_report(eq_exact(name, "C", c, want, 4), "%s", name);
}

/* batch 2, m = n = k = 2, lda = 3 and ldc = 3 (one padding column each), B
 * broadcast (sb = 0), alpha 1, no bias. Padding of A is 99 (must be ignored),
 * C starts as -7 everywhere (its gaps must stay -7).
 *   B = [[1,2],[0,1]]
 *   A0 = [[1,2],[3,4]]: [1*1+2*0, 1*2+2*1] = [1, 4];  [3, 3*2+4] = [3, 10]
 *   A1 = [[5,6],[7,8]]: [5, 5*2+6] = [5, 16];         [7, 7*2+8] = [7, 22] */
static void case_matmul_batched(void)
{
    const char *name = "matmul batched, broadcast B, lda/ldc padding untouched";
    const float a[12] = {1, 2, 99, 3, 4, 99, 5, 6, 99, 7, 8, 99};
    const float b[4] = {1, 2, 0, 1};
    const float want[12] = {1, 4, -7, 3, 10, -7, 5, 16, -7, 7, 22, -7};
    float c[12];
    for (int i = 0; i < 12; i++)
        c[i] = -7.0f;
    mm_shape s = {.batch = 2, .m = 2, .n = 2, .k = 2, .lda = 3, .ldb = 2, .ldc = 3,
                  .trans_b = false, .alpha = 1.0f, .sa = 6, .sb = 0, .sc = 6,
                  .extent_a = 12, .extent_b = 4, .extent_c = 12};
    ref_matmul(&s, a, b, NULL, c);
    t_report(eq_exact(name, "C", c, want, 12), "%s", name);
}

/* ---- softmax ------------------------------------------------------------ */

/* softmax([1,2,3]) = e^(x-3) / sum:
 *   e^-2 = 0.1353352832, e^-1 = 0.3678794412, e^0 = 1, sum = 1.5032147244
 *   -> [0.0900305732, 0.2447284711, 0.6652409558]
 * scale 0.5: scores [0.5, 1, 1.5]:
 *   e^-1 = 0.3678794412, e^-0.5 = 0.6065306597, 1, sum = 1.9744101009
 *   -> [0.1863237232, 0.3071958857, 0.5064803911]
 * The first row is computed in place (y == x). */
static void case_softmax_basic(void)
{
    const char *name = "softmax [1,2,3] (in place) and scale 0.5";
    float x[3] = {1, 2, 3};
    const float want1[3] = {0.0900305732f, 0.2447284711f, 0.6652409558f};
    const float x2[3] = {1, 2, 3};
    const float want2[3] = {0.1863237232f, 0.3071958857f, 0.5064803911f};
    float y2[3];
    sm_shape s = {.batch = 1, .heads = 1, .len_q = 1, .len_k = 3, .scale = 1.0f};
    bool ok = status_ok(name, ref_softmax(NULL, &s, x, NULL, x));
    ok = close_(name, "y (scale 1)", x, want1, 3) && ok;
    s.scale = 0.5f;
    ok = status_ok(name, ref_softmax(NULL, &s, x2, NULL, y2)) && ok;
    ok = close_(name, "y (scale 0.5)", y2, want2, 3) && ok;
    t_report(ok, "%s", name);
}

/* x = [1,2,3], key_padding = [1,0,1]: scores [1, -1e9, 3]
 *   e^(1-3) = 0.1353352832, e^(-1e9-3) = 0 (underflow), e^0 = 1
 *   -> [0.1353352832/1.1353352832, 0, 1/1.1353352832] = [0.1192029220, 0, 0.8807970780]
 * The masked weight must be exactly 0. */
static void case_softmax_key_padding(void)
{
    const char *name = "softmax with key padding: masked column exactly 0";
    const float x[3] = {1, 2, 3};
    const uint8_t kp[3] = {1, 0, 1};
    const float want[3] = {0.1192029220f, 0.0f, 0.8807970780f};
    float y[3];
    mask_r m = {.kinds = VKMHA_MASK_KEY_PADDING, .key_padding = kp};
    sm_shape s = {.batch = 1, .heads = 1, .len_q = 1, .len_k = 3, .scale = 1.0f};
    bool ok = status_ok(name, ref_softmax(NULL, &s, x, &m, y));
    ok = close_(name, "y", y, want, 3) && ok;
    if (y[1] != 0.0f) {
        t_diag("%s: masked weight %.9g, expected exactly 0", name, (double)y[1]);
        ok = false;
    }
    t_report(ok, "%s", name);
}

/* Every key masked: all scores are SET to -1e9 (whatever x is), so
 * e^(s - max) = e^0 = 1 for each, and the row is exactly 1/4 each. */
static void case_softmax_fully_masked(void)
{
    const char *name = "softmax fully masked row is exactly uniform 1/len_k";
    const float x[4] = {5, -3, 100, 0};
    const uint8_t kp[4] = {0, 0, 0, 0};
    const float want[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    float y[4];
    mask_r m = {.kinds = VKMHA_MASK_KEY_PADDING, .key_padding = kp};
    sm_shape s = {.batch = 1, .heads = 1, .len_q = 1, .len_k = 4, .scale = 1.0f};
    bool ok = status_ok(name, ref_softmax(NULL, &s, x, &m, y));
    ok = eq_exact(name, "y", y, want, 4) && ok;
    t_report(ok, "%s", name);
}

/* Causal 3x3 on x = 0: row i keeps keys 0..i, each e^0 = 1:
 *   row 0 = [1, 0, 0], row 1 = [1/2, 1/2, 0], row 2 = [1/3, 1/3, 1/3].
 * Rows 0 and 1 and every masked zero are exact. */
static void case_softmax_causal(void)
{
    const char *name = "softmax causal 3x3";
    const float x[9] = {0};
    const float third = (float)(1.0 / 3.0);
    const float want[9] = {1, 0, 0, 0.5f, 0.5f, 0, third, third, third};
    float y[9];
    mask_r m = {.kinds = VKMHA_MASK_CAUSAL};
    sm_shape s = {.batch = 1, .heads = 1, .len_q = 3, .len_k = 3, .scale = 1.0f};
    bool ok = status_ok(name, ref_softmax(NULL, &s, x, &m, y));
    ok = eq_exact(name, "rows 0-1", y, want, 6) && ok;
    ok = close_(name, "row 2", y + 6, want + 6, 3) && ok;
    t_report(ok, "%s", name);
}

/* Broadcast bias (bias_batch = bias_heads = 1) over batch 2 x heads 2, one
 * row of 2 keys each. x rows = [2, 0], scale 0.5, bias [0, 1]:
 *   scores = [0.5*2 + 0, 0.5*0 + 1] = [1, 1] -> exactly [0.5, 0.5]
 * (scale multiplies x only, before the bias is added; without the bias the
 * row would be [e/(1+e), 1/(1+e)]). */
static void case_bias_broadcast(void)
{
    const char *name = "softmax additive bias broadcast over batch and heads";
    const float x[8] = {2, 0, 2, 0, 2, 0, 2, 0};
    const float bias[2] = {0, 1};
    const float want[8] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    float y[8];
    mask_r m = {.kinds = VKMHA_MASK_BIAS, .bias = bias, .bias_batch = 1, .bias_heads = 1};
    sm_shape s = {.batch = 2, .heads = 2, .len_q = 1, .len_k = 2, .scale = 0.5f};
    bool ok = status_ok(name, ref_softmax(NULL, &s, x, &m, y));
    ok = eq_exact(name, "y", y, want, 8) && ok;
    t_report(ok, "%s", name);
}

/* Per-head bias (bias_batch = 1, bias_heads = 2), x = 0, scale 1:
 *   head 0 bias [0, 1] -> [1/(1+e), e/(1+e)] = [0.2689414214, 0.7310585786]
 *   head 1 bias [1, 0] -> [0.7310585786, 0.2689414214]
 * for both batch entries. Then a full [2][2] bias where batch 1 head 0 gets
 * [0, 0] -> [0.5, 0.5] while the others keep the pattern above. */
static void case_bias_per_head(void)
{
    const char *name = "softmax additive bias per head and per (batch, head)";
    const float x[8] = {0};
    const float bias_h[4] = {0, 1, 1, 0};
    const float bias_bh[8] = {0, 1, 1, 0, 0, 0, 1, 0};
    const float lo = 0.2689414214f, hi = 0.7310585786f;
    const float want_h[8] = {lo, hi, hi, lo, lo, hi, hi, lo};
    const float want_bh[8] = {lo, hi, hi, lo, 0.5f, 0.5f, hi, lo};
    float y[8];
    sm_shape s = {.batch = 2, .heads = 2, .len_q = 1, .len_k = 2, .scale = 1.0f};
    mask_r m = {.kinds = VKMHA_MASK_BIAS, .bias = bias_h, .bias_batch = 1, .bias_heads = 2};
    bool ok = status_ok(name, ref_softmax(NULL, &s, x, &m, y));
    ok = close_(name, "y (per head)", y, want_h, 8) && ok;
    m.bias = bias_bh;
    m.bias_batch = 2;
    ok = status_ok(name, ref_softmax(NULL, &s, x, &m, y)) && ok;
    ok = close_(name, "y (per batch and head)", y, want_bh, 8) && ok;
    /* ref_bias directly: batch 1, head 1, key 0 of the full bias is 1. */
    if (ref_bias(&m, 1, 1, 0, 0, 1, 2) != 1.0 || ref_bias(NULL, 1, 1, 0, 0, 1, 2) != 0.0) {
        t_diag("%s: ref_bias direct lookup wrong", name);
        ok = false;
    }
    t_report(ok, "%s", name);
}

/* The mask SETS -1e9, it does not add it: x = [-2e9, 0] with key 1 masked
 * gives scores [-2e9, -1e9]; max -1e9, e^(-1e9) = 0, e^0 = 1 -> [0, 1]
 * exactly: the masked key wins because the unmasked score is below -1e9.
 * Also checks ref_is_masked on combined kinds and a NULL mask. */
static void case_mask_set_not_added(void)
{
    const char *name = "masked score is set to -1e9; ref_is_masked combines kinds";
    const float x[2] = {-2e9f, 0};
    const uint8_t kp[2] = {1, 0};
    const float want[2] = {0, 1};
    float y[2];
    mask_r m = {.kinds = VKMHA_MASK_KEY_PADDING, .key_padding = kp};
    sm_shape s = {.batch = 1, .heads = 1, .len_q = 1, .len_k = 2, .scale = 1.0f};
    bool ok = status_ok(name, ref_softmax(NULL, &s, x, &m, y));
    ok = eq_exact(name, "y", y, want, 2) && ok;

    /* batch 2, len_q 2, len_k 3: key padding masks (b=1, j=0); full masks
     * (b=0, i=1, j=1); causal masks j > i. */
    const uint8_t kp2[6] = {1, 1, 1, 0, 1, 1};
    const uint8_t full[12] = {1, 1, 1, 1, 0, 1, /* b = 0 */ 1, 1, 1, 1, 1, 1};
    mask_r all = {.kinds = VKMHA_MASK_KEY_PADDING | VKMHA_MASK_FULL | VKMHA_MASK_CAUSAL,
                  .key_padding = kp2, .full = full};
    /* expected[b][i][j], 1 = masked */
    const bool expect[2][2][3] = {{{0, 1, 1}, {0, 1, 1}}, {{1, 1, 1}, {1, 0, 1}}};
    for (uint32_t b = 0; b < 2; b++)
        for (uint32_t i = 0; i < 2; i++)
            for (uint32_t j = 0; j < 3; j++) {
                if (ref_is_masked(&all, b, i, j, 2, 3, 3) != expect[b][i][j]) {
                    t_diag("%s: ref_is_masked(b=%u, i=%u, j=%u) wrong", name, b, i, j);
                    ok = false;
                }
                if (ref_is_masked(NULL, b, i, j, 2, 3, 3)) {
                    t_diag("%s: NULL mask masks (b=%u, i=%u, j=%u)", name, b, i, j);
                    ok = false;
                }
            }
    t_report(ok, "%s", name);
}

/* Large logits: softmax([10000, 10001]) = softmax([0, 1]) since only
 * differences matter after max subtraction (e^-1 and e^0, no overflow):
 *   [1/(1+e), e/(1+e)] = [0.2689414214, 0.7310585786]
 * (10000 and 10001 are exact in float). Same for [-10000, -9999]. */
static void case_softmax_large_logits(void)
{
    const char *name = "softmax of [10000, 10001] equals softmax of [0, 1]";
    const float x[6] = {10000, 10001, 0, 1, -10000, -9999};
    const float want[6] = {0.2689414214f, 0.7310585786f, 0.2689414214f, 0.7310585786f,
                           0.2689414214f, 0.7310585786f};
    float y[6];
    sm_shape s = {.batch = 1, .heads = 1, .len_q = 3, .len_k = 2, .scale = 1.0f};
    bool ok = status_ok(name, ref_softmax(NULL, &s, x, NULL, y));
    ok = close_(name, "y", y, want, 6) && ok;
    ok = eq_exact(name, "row [10000,10001] vs row [0,1]", y, y + 2, 2) && ok;
    t_report(ok, "%s", name);
}

/* ---- attention ---------------------------------------------------------- */

/* len_q 2, len_k 3, d_k 2, d_v 2, scale 1.
 *   q = [[1,0],[0,1]], k = [[1,0],[0,1],[1,1]], v = [[1,0],[0,1],[2,3]]
 *   full mask [[1,1,1],[1,1,0]] (query 1 cannot see key 2)
 * row 0: scores q0.k = [1, 0, 1]; e^(s-1) = [1, e^-1, 1], sum 2 + e^-1 = 2.3678794412
 *   p = [0.4223187983, 0.1553624035, 0.4223187983]
 *   out = p0*[1,0] + p1*[0,1] + p2*[2,3] = [3*p0, p1 + 3*p2]
 *       = [3/2.3678794412, (e^-1 + 3)/2.3678794412] = [1.2669563948, 1.4223187983]
 * row 1: scores [0, 1, -1e9]; p = [1/(1+e), e/(1+e), 0] = [0.2689414214, 0.7310585786, 0]
 *   out = p0*[1,0] + p1*[0,1] = [0.2689414214, 0.7310585786] */
static void case_attention(void)
{
    const char *name = "attention 2x3 with a full mask, weights and output";
    const float q[4] = {1, 0, 0, 1};
    const float k[6] = {1, 0, 0, 1, 1, 1};
    const float v[6] = {1, 0, 0, 1, 2, 3};
    const uint8_t full[6] = {1, 1, 1, 1, 1, 0};
    const float want_out[4] = {1.2669563948f, 1.4223187983f, 0.2689414214f, 0.7310585786f};
    const float want_w[6] = {0.4223187983f, 0.1553624035f, 0.4223187983f,
                             0.2689414214f, 0.7310585786f, 0.0f};
    float out[4], w[6], out2[4];
    mask_r m = {.kinds = VKMHA_MASK_FULL, .full = full};
    attn_shape s = {.batch = 1, .heads = 1, .kv_heads = 1, .len_q = 2, .len_k = 3,
                    .d_k = 2, .d_v = 2, .scale = 1.0f};
    bool ok = status_ok(name, ref_attention(NULL, &s, q, k, v, &m, out, w));
    ok = close_(name, "out", out, want_out, 4) && ok;
    ok = close_(name, "weights", w, want_w, 6) && ok;
    if (w[5] != 0.0f) {
        t_diag("%s: masked weight %.9g, expected exactly 0", name, (double)w[5]);
        ok = false;
    }
    /* weights == NULL computes the same output. */
    ok = status_ok(name, ref_attention(NULL, &s, q, k, v, &m, out2, NULL)) && ok;
    ok = eq_exact(name, "out without weights", out2, out, 4) && ok;
    t_report(ok, "%s", name);
}

/* Attention with scale 0.5, a broadcast bias, a full mask and d_k = d_v = 1:
 *   q = [2, -4e9, 3], k = [1, 0.5], v = [1, 2]
 *   bias [1][1][3][2] = [[0,1],[0,0],[5,-5]], full mask [[1,1],[1,0],[0,0]]
 * row 0: scores [0.5*2*1 + 0, 0.5*2*0.5 + 1] = [1, 1.5] (scale multiplies the
 *   dot product only, not the bias); p = [1/(1+e^0.5), e^0.5/(1+e^0.5)]
 *   = [0.3775406688, 0.6224593312]; out = p0*1 + p1*2 = 1.6224593312
 * row 1: key 0 unmasked: 0.5*(-4e9)*1 = -2e9; key 1 masked: SET to -1e9
 *   (adding would give 0.5*(-4e9)*0.5 - 1e9 = -2e9 and a tie); max -1e9,
 *   e^(-1e9) = 0 -> p = [0, 1] exactly, out = 2 exactly
 * row 2: fully masked -> p = [0.5, 0.5] exactly, out = 1.5 exactly */
static void case_attention_bias_mask(void)
{
    const char *name = "attention: scale before bias, mask set to -1e9, fully masked row";
    const float q[3] = {2, -4e9f, 3};
    const float k[2] = {1, 0.5f};
    const float v[2] = {1, 2};
    const float bias[6] = {0, 1, 0, 0, 5, -5};
    const uint8_t full[6] = {1, 1, 1, 0, 0, 0};
    const float want_out[3] = {1.6224593312f, 2.0f, 1.5f};
    const float want_w[6] = {0.3775406688f, 0.6224593312f, 0, 1, 0.5f, 0.5f};
    float out[3], w[6];
    mask_r m = {.kinds = VKMHA_MASK_FULL | VKMHA_MASK_BIAS, .full = full, .bias = bias,
                .bias_batch = 1, .bias_heads = 1};
    attn_shape s = {.batch = 1, .heads = 1, .kv_heads = 1, .len_q = 3, .len_k = 2,
                    .d_k = 1, .d_v = 1, .scale = 0.5f};
    bool ok = status_ok(name, ref_attention(NULL, &s, q, k, v, &m, out, w));
    ok = close_(name, "out row 0", out, want_out, 1) && ok;
    ok = close_(name, "weights row 0", w, want_w, 2) && ok;
    ok = eq_exact(name, "out rows 1-2", out + 1, want_out + 1, 2) && ok;
    ok = eq_exact(name, "weights rows 1-2", w + 2, want_w + 2, 4) && ok;
    t_report(ok, "%s", name);
}

/* Runs attention per (batch, query head) as separate single-head calls, with
 * query head h reading kv head h / group, and compares with the grouped call. */
static bool gqa_matches_separate(const char *name, uint32_t batch, uint32_t H,
                                 uint32_t Hkv)
{
    enum { LQ = 2, LK = 3, DK = 2, DV = 2, MAXH = 4, MAXB = 2 };
    float q[MAXB * MAXH * LQ * DK], k[MAXB * MAXH * LK * DK], v[MAXB * MAXH * LK * DV];
    float out[MAXB * MAXH * LQ * DV], w[MAXB * MAXH * LQ * LK];
    float o1[LQ * DV], w1[LQ * LK];
    /* Small distinct values so that a wrong head or batch shows. */
    for (int i = 0; i < MAXB * MAXH * LQ * DK; i++)
        q[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
    for (int i = 0; i < MAXB * MAXH * LK * DK; i++)
        k[i] = (float)((i * 5) % 13) * 0.2f - 1.0f;
    for (int i = 0; i < MAXB * MAXH * LK * DV; i++)
        v[i] = (float)((i * 3) % 17) * 0.5f - 4.0f;
    attn_shape s = {.batch = batch, .heads = H, .kv_heads = Hkv, .len_q = LQ,
                    .len_k = LK, .d_k = DK, .d_v = DV, .scale = 0.7f};
    bool ok = status_ok(name, ref_attention(NULL, &s, q, k, v, NULL, out, w));
    attn_shape s1 = s;
    s1.batch = 1;
    s1.heads = 1;
    s1.kv_heads = 1;
    for (uint32_t b = 0; b < batch; b++)
        for (uint32_t h = 0; h < H; h++) {
            uint32_t hkv = h / (H / Hkv);
            ok = status_ok(name, ref_attention(NULL, &s1, q + (b * H + h) * LQ * DK,
                                               k + (b * Hkv + hkv) * LK * DK,
                                               v + (b * Hkv + hkv) * LK * DV, NULL, o1,
                                               w1)) && ok;
            ok = eq_exact(name, "out", out + (b * H + h) * LQ * DV, o1, LQ * DV) && ok;
            ok = eq_exact(name, "weights", w + (b * H + h) * LQ * LK, w1, LQ * LK) && ok;
        }
    return ok;
}

/* GQA H = 2, Hkv = 1 (multi-query): both heads read the single k/v head. */
static void case_gqa(void)
{
    const char *name = "GQA H=2 Hkv=1 equals two single-head calls on the same k/v";
    t_report(gqa_matches_separate(name, 1, 2, 1), "%s", name);
}

/* GQA H = 4, Hkv = 2, batch 2: heads 0,1 read kv 0, heads 2,3 read kv 1 (not
 * h % Hkv), and batch b reads its own kv heads. */
static void case_gqa_groups(void)
{
    const char *name = "GQA H=4 Hkv=2 batch 2: query head h reads kv head h/2";
    t_report(gqa_matches_separate(name, 2, 4, 2), "%s", name);
}

/* ---- heads -------------------------------------------------------------- */

/* batch 1, len 2, heads 2, head_dim 2:
 *   x [1][2][4] = [[0,1,2,3],[4,5,6,7]]
 *   y [1][2][2][2]: head 0 = [[0,1],[4,5]], head 1 = [[2,3],[6,7]]
 *   -> [0,1,4,5,2,3,6,7]; merge_heads(y) == x. */
static void case_heads(void)
{
    const char *name = "split_heads / merge_heads permutation and round trip";
    const float x[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const float want[8] = {0, 1, 4, 5, 2, 3, 6, 7};
    float y[8], back[8];
    heads_shape s = {.batch = 1, .len = 2, .heads = 2, .head_dim = 2};
    ref_split_heads(&s, x, y);
    bool ok = eq_exact(name, "split", y, want, 8);
    ref_merge_heads(&s, y, back);
    ok = eq_exact(name, "merge(split(x))", back, x, 8) && ok;
    t_report(ok, "%s", name);
}

/* ---- layernorm ---------------------------------------------------------- */

/* [1,2,3,4], eps 0: mean 2.5, var = (2.25+0.25+0.25+2.25)/4 = 1.25,
 * sqrt(1.25) = 1.1180339887:
 *   y = [-1.5,-0.5,0.5,1.5]/1.1180339887 = [-1.3416407865, -0.4472135955, 0.4472135955, 1.3416407865]
 * A second row [2,4,6,8] (mean 5, var 5) normalizes to the same values.
 * eps 0.75: sqrt(1.25 + 0.75) = sqrt(2) -> [-1.0606601718, -0.3535533906, 0.3535533906, 1.0606601718] */
static void case_layernorm(void)
{
    const char *name = "layernorm [1,2,3,4] (eps 0, eps 0.75, two rows)";
    const float x[8] = {1, 2, 3, 4, 2, 4, 6, 8};
    const float n0 = 1.3416407865f, n1 = 0.4472135955f;
    const float want[8] = {-n0, -n1, n1, n0, -n0, -n1, n1, n0};
    const float want_eps[4] = {-1.0606601718f, -0.3535533906f, 0.3535533906f,
                               1.0606601718f};
    float y[8];
    ref_layernorm(2, 4, x, NULL, NULL, NULL, 0.0f, y);
    bool ok = close_(name, "y", y, want, 8);
    ref_layernorm(1, 4, x, NULL, NULL, NULL, 0.75f, y);
    ok = close_(name, "y (eps 0.75)", y, want_eps, 4) && ok;
    t_report(ok, "%s", name);
}

/* x = [0,0,5,1] + residual [1,2,-2,3] = [1,2,3,4] -> n = [-1.3416407865,
 * -0.4472135955, 0.4472135955, 1.3416407865]; gamma [1,2,0.5,-1],
 * beta [0,1,-1,0.5]:
 *   [1*-1.3416407865 + 0, 2*-0.4472135955 + 1, 0.5*0.4472135955 - 1, -1*1.3416407865 + 0.5]
 *   = [-1.3416407865, 0.1055728090, -0.7763932023, -0.8416407865]
 * Computed once out of place and once in place (y == x). */
static void case_layernorm_affine_residual(void)
{
    const char *name = "layernorm with gamma, beta and residual (also in place)";
    const float x[4] = {0, 0, 5, 1};
    const float res[4] = {1, 2, -2, 3};
    const float gamma[4] = {1, 2, 0.5f, -1};
    const float beta[4] = {0, 1, -1, 0.5f};
    const float want[4] = {-1.3416407865f, 0.1055728090f, -0.7763932023f, -0.8416407865f};
    float y[4], inplace[4] = {0, 0, 5, 1};
    ref_layernorm(1, 4, x, res, gamma, beta, 0.0f, y);
    bool ok = close_(name, "y", y, want, 4);
    ref_layernorm(1, 4, inplace, res, gamma, beta, 0.0f, inplace);
    ok = eq_exact(name, "in place vs out of place", inplace, y, 4) && ok;
    t_report(ok, "%s", name);
}

int main(void)
{
    case_matmul();
    case_matmul_trans();
    case_matmul_batched();
    case_softmax_basic();
    case_softmax_key_padding();
    case_softmax_fully_masked();
    case_softmax_causal();
    case_bias_broadcast();
    case_bias_per_head();
    case_mask_set_not_added();
    case_softmax_large_logits();
    case_attention();
    case_attention_bias_mask();
    case_gqa();
    case_gqa_groups();
    case_heads();
    case_layernorm();
    case_layernorm_affine_residual();
    return t_finish();
}
