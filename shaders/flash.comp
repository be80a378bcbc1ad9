#version 450
// Fused attention ("flash attention" forward, fp32 throughout). One
// workgroup per (batch b, head h, block of BR queries, key range): the
// queries stay in shared memory while keys and values stream through it BC
// at a time. For each key block:
//   1. load K[j0 .. j0 + BC) into shared memory
//   2. s[r][c] = scale * q_r . k_c + bias, set to -1e9 where masked
//   3. online softmax per row: m' = max(m, max_c s), p = exp(s - m'),
//      l' = l exp(m - m') + sum_c p; meanwhile load V[j0 .. j0 + BC)
//   4. acc[r] = acc[r] exp(m - m') + sum_c p[r][c] v_c   (registers)
// so the [len_q][len_k] scores never exist in device memory. At the end the
// workgroup writes out = acc / l and the row statistics (m, l), or, when the
// keys are split across workgroups (split-K), the unnormalized acc and (m, l)
// of its range for shaders/flash_combine.comp to merge.
//
// A layer's RoPE (p.rope): the queries are rotated as they are loaded
// (load_q_rope), with the (cos, sin) table at binding 10, so no pass over
// them runs before the attention (the keys were rotated on their way into
// the KV cache, or by a pass where there is none: src/vk_mha.c).
//
// Non-finite scores (a PyTorch float mask holds -inf): a row whose scores so
// far are all -inf has m = -inf; its weights exp(s - m) are taken as
// exp(s - 0) = 0 instead of exp(-inf - -inf) = NaN, so a later finite score
// starts the row afresh (corr = 0). A row whose every score is -inf ends with
// l = 0 and gets weights 0 and output 0 (acc holds only 0 * v), as in the
// reference. +Inf or NaN scores make the row NaN.
//
// Attention weights (MODE_WEIGHTS, a second dispatch after the row
// statistics are final): the same pipeline recomputes each score with the
// same instructions (fma chains, `precise`, so no compiler may round them
// differently) and writes exp(s - m) / l, so the weights are exactly the
// softmax the output was computed with, also at logits of 1e4 and beyond
// where one ulp of a score is a visible fraction of a weight.
//
// Masked scores are SET to -1e9 exactly as the reference does, so a fully
// masked row averages every value row, like softmax over equal scores. With a
// causal mask or a window, key blocks that every row of the block hides
// (above the diagonal, or a window's width before the first row or, without
// the causal mask, after the last) are skipped once each row has a score
// above -1e9 + 128: their weights exp(-1e9 - m) are then exactly 0 in fp32.
// So that the rows see their visible keys first, the blocks are visited
// from the one holding the window's first key on, then those before it.
// A hidden block met while a row is not settled yet (every key of a split-K
// range hidden, say, by the causal mask, a window or key padding) costs one
// read of its values instead of its products: its scores are -1e9, all of
// them, so the online softmax's step is
// m' = max(m, -1e9), l' = l exp(m - m') + n exp(-1e9 - m'),
// acc' = acc exp(m - m') + exp(-1e9 - m') sum_j v_j.
// Key padding, a full mask and a bias are data: with any of them, each
// block is first classified over its rows and keys (DATA_*), and a block
// with no live score is skipped where its weights are exactly 0: its -1e9
// scores once the rows settle, its -inf ones (a bias's, unmasked) always,
// provided no score of the block could be NaN (-inf + NaN or + Inf): the
// block's keys and the queries are finite and small enough that no
// product overflows (the max |q| and |k| bound them), else it is computed.
//
// Tensors are addressed through strides, so the same shader reads split
// heads [B][H][L][d] and projections [B][L][H * d] in place. Query head h
// reads key/value head h / group (grouped-query attention).
//
// COOP (the build variant flash_coop, for fp16 q and fp16 k and v or a Q8
// cache's rows, whose int8 codes are staged exactly, the key's scale
// multiplying its scores and the value's its weights in P): the two
// products run on the matrix units through VK_KHR_cooperative_matrix, the
// rest is this shader's. The query block, the K block and the V block are
// staged as fp16 (exact: the inputs are fp16; zero past d_k, d_v and the
// block's keys). The workgroup's subgroups share the CM x CN tiles of
// S = Q K^T (fp32 sums, stored to ps, whose scale, bias, masks and
// non-finite rules follow as in step 2) and of the block's P V, where P,
// the online softmax's weights in [0, 1], is rounded to fp16 (ph); P V goes
// through ps (now [BR][4 D4]) into the same register accumulators as the
// scalar step 4, scaled by the row's correction. The weights pass computes
// its scores with the same matrix instructions. The host makes WG the
// subgroups times maxSubgroupSize with full subgroups, TY * TX == WG, BR a
// multiple of CM, BC of CN and CK, and 4 D4 of CN and CK.

#extension GL_GOOGLE_include_directive : require
#if defined(COOP) && COOP
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint BR = 32; // query rows per workgroup
layout(constant_id = 2) const uint BC = 32; // keys per step
layout(constant_id = 3) const uint D4 = 16; // vec4s per row: d_k, d_v <= 4 * D4
layout(constant_id = 4) const uint SR = 4;  // scores per invocation: SR rows
layout(constant_id = 5) const uint SC = 4;  // x SC keys
#if defined(COOP) && COOP
layout(constant_id = 6) const uint CM = 16; // the device's matrix shape
layout(constant_id = 7) const uint CN = 16;
layout(constant_id = 8) const uint CK = 16;
#endif
// Register blocking: invocation (ty, tx) computes the scores of rows
// ty * SR + a and keys tx + b * TX, then the outputs of the same rows in
// vec4 columns tx + o * TX. The host guarantees WG == TY * TX and TX | D4.
const uint TX = BC / SC;
const uint TY = BR / SR;
const uint OC = D4 / TX;

#include "flash_push.glsl"

// Fields the host packs or leaves out to keep the push block small.
#define P_DK (p.dims & 0xffffu)
#define P_DV (p.dims >> 16)
#define P_SPLITS ((p.len_k + p.split_len - 1u) / p.split_len) // key ranges (1: no split-K)
#define P_Q_BLOCKS ((p.len_q + BR - 1u) / BR)

// q, k, v and out of any float dtype (shaders/typed.glsl; the partial state
// and the statistics are always fp32).
TYPED_IN(0, 0, q)
TYPED_IN(1, 1, k)
TYPED_IN(2, 2, v)
layout(binding = 3) readonly buffer KeyPadding { uint kp[]; };
layout(binding = 4) readonly buffer FullMask { uint fm[]; };
layout(binding = 5) readonly buffer Bias { float bias[]; };
// out through o_*, or with MODE_PARTIAL the partial state [split][row][d_v]
// (unnormalized acc), read back with MODE_RESUME; with MODE_WEIGHTS the
// weights [row][len_k].
TYPED_IO(6, 6, o)
// (m, l) per row: [row][2], or per split [split][row][2]; MODE_WEIGHTS reads
// the final [row][2].
layout(binding = 7) buffer Stats { float ml[]; };
layout(binding = 8) readonly buffer Lengths { uint lens[]; }; // with MASK_LENGTHS
layout(binding = 10) readonly buffer RopeTable { vec2 rope_cs[]; }; // p.rope's (cos, sin)
#include "rope.glsl"
// U8 k and v: a Q8 KV cache's rows (shaders/kv_q8.glsl), dequantized in
// load_k / load_v; the host's strides then count bytes, rows of R.
#include "kv_q8.glsl"
KV_Q8_READ(1, k)
KV_Q8_READ(2, v)

#define MASK_SLOT 3u
#define HEAD_RULES_BINDING 9
#include "mask.glsl"
#include "flash_rules.glsl"

// MODE_* (the flags' modes): shaders/flash_push.glsl.

#if defined(COOP) && COOP
// fp16 rows padded by 8 halves (16 bytes: matrix loads stay aligned).
const uint DS = 4u * D4 + 8u; // q, k and v rows
const uint PS = BC + 8u;      // weight rows
const uint DV = 4u * D4;      // P V's row stride in ps
shared float16_t qh[BR * DS];
shared float16_t kvh[BC * DS]; // the K block, then the V block
shared float16_t ph[BR * PS];  // the weights, rounded
// Scores, then the block's P V.
shared float ps[BR * (BC > DV ? BC : DV)];
#define MAT_A(R, C) coopmat<float16_t, gl_ScopeSubgroup, R, C, gl_MatrixUseA>
#define MAT_B(R, C) coopmat<float16_t, gl_ScopeSubgroup, R, C, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>

// Four halves of a staged row at AT of the shared array S: a vec4 rounded
// (exact for fp16 inputs), or an f16vec4's bits as they are. A macro: GLSL
// passes no shared array to a function.
#define PUT4H(S, AT, V)                                                        \
    {                                                                          \
        const uint at_ = (AT);                                                 \
        const f16vec4 h_ = f16vec4(V);                                         \
        S[at_] = h_.x; S[at_ + 1u] = h_.y; S[at_ + 2u] = h_.z; S[at_ + 3u] = h_.w; \
    }
// K and V rows whose starts are 4-aligned and whose widths are whole vec4s
// are staged from one fp16 load of 4 elements each, their bits unconverted
// (shaders/typed.glsl's ld4h; exact either way).
TYPED_LD4H(1, k)
TYPED_LD4H(2, v)

// ps[r][c] = Q K^T for the block's rows and keys (their first `depth`
// columns, a multiple of CK), a tile per subgroup in turn.
void scores_coop(uint depth)
{
    const uint tiles_c = BC / CN;
    for (uint t = gl_SubgroupID; t < (BR / CM) * tiles_c; t += gl_NumSubgroups) {
        const uint r0 = (t / tiles_c) * CM, c0 = (t % tiles_c) * CN;
        MAT_C acc = MAT_C(0.0);
        for (uint d = 0; d < depth; d += CK) {
            MAT_A(CM, CK) a;
            MAT_B(CK, CN) bk; // K^T: K's rows are its columns
            coopMatLoad(a, qh, r0 * DS + d, DS, gl_CooperativeMatrixLayoutRowMajor);
            coopMatLoad(bk, kvh, c0 * DS + d, DS, gl_CooperativeMatrixLayoutColumnMajor);
            acc = coopMatMulAdd(a, bk, acc);
        }
        coopMatStore(acc, ps, r0 * BC + c0, BC, gl_CooperativeMatrixLayoutRowMajor);
    }
}

// ps[r][c] = (P V)[r][c] for the block, its first `width` columns (a
// multiple of CN).
void pv_coop(uint width)
{
    const uint tiles_c = width / CN;
    for (uint t = gl_SubgroupID; t < (BR / CM) * tiles_c; t += gl_NumSubgroups) {
        const uint r0 = (t / tiles_c) * CM, c0 = (t % tiles_c) * CN;
        MAT_C acc = MAT_C(0.0);
        for (uint kk = 0; kk < BC; kk += CK) {
            MAT_A(CM, CK) a;
            MAT_B(CK, CN) bv;
            coopMatLoad(a, ph, r0 * PS + kk, PS, gl_CooperativeMatrixLayoutRowMajor);
            coopMatLoad(bv, kvh, kk * DS + c0, DS, gl_CooperativeMatrixLayoutRowMajor);
            acc = coopMatMulAdd(a, bv, acc);
        }
        coopMatStore(acc, ps, r0 * DV + c0, DV, gl_CooperativeMatrixLayoutRowMajor);
    }
}
#else
const uint KS = D4 + 1; // padded K/V row stride (vec4s)

shared vec4 qs[BR * D4];
shared vec4 kvs[BC * KS]; // the K block, then the V block
shared float ps[BR * BC]; // scores, then probabilities
#endif
shared float row_m[BR];
shared float row_l[BR];
shared float row_corr[BR];
shared uint bad_bits[4 * D4]; // per output column: OR of the skipped NaN / Inf values' bits,
                              // or the hidden block's column sums of v (as float bits)
shared uint blk_class;        // the block's DATA_* classes
shared uint q_amax, k_amax;   // max |q| of the workgroup's rows, |k| of the block's keys (bits)

// A block's scores: live (to compute), -1e9 (masked), -inf (a bias's).
const uint DATA_LIVE = 1u;
const uint DATA_MASKED = 2u;
const uint DATA_NEG_INF = 4u;

// Elements c .. c + 3 (c a multiple of 4) of a row starting at `base`,
// zero past `n`.
vec4 load_q(uint base, uint c, uint n)
{
    return vec4(ld_q(base + c), c + 1u < n ? ld_q(base + c + 1u) : 0.0,
                c + 2u < n ? ld_q(base + c + 2u) : 0.0, c + 3u < n ? ld_q(base + c + 3u) : 0.0);
}
// Elements c .. c + 3 of a query row at `base` rotated by RoPE (p.rope)
// with table row t (shaders/rope.glsl): the layer's queries are rotated
// here, at their one load, instead of by a pass.
ROPE_ELEMENT(rope_q_element, ld_q, rope_cs)
#define rope_q(base, c, t)                                                     \
    rope_q_element(base, c, t, p.rope & 0xffffu, (p.rope & ROPE_INTERLEAVED) != 0u)
vec4 load_q_rope(uint base, uint c, uint n, uint t)
{
    return vec4(rope_q(base, c, t), c + 1u < n ? rope_q(base, c + 1u, t) : 0.0,
                c + 2u < n ? rope_q(base, c + 2u, t) : 0.0,
                c + 3u < n ? rope_q(base, c + 3u, t) : 0.0);
}
vec4 load_k(uint base, uint c, uint n)
{
    if (DTYPE(1) == DT_U8)
        return kv_q8_k(base, c, n);
    return vec4(ld_k(base + c), c + 1u < n ? ld_k(base + c + 1u) : 0.0,
                c + 2u < n ? ld_k(base + c + 2u) : 0.0, c + 3u < n ? ld_k(base + c + 3u) : 0.0);
}
vec4 load_v(uint base, uint c, uint n)
{
    if (DTYPE(2) == DT_U8)
        return kv_q8_v(base, c, n);
    return vec4(ld_v(base + c), c + 1u < n ? ld_v(base + c + 1u) : 0.0,
                c + 2u < n ? ld_v(base + c + 2u) : 0.0, c + 3u < n ? ld_v(base + c + 3u) : 0.0);
}

// The keys j0 .. j_end that a causal block skips have weight exactly 0 for
// every row of the block (exp(-1e9 - m) underflows in fp32), and 0 * v adds
// nothing unless v is NaN or Inf, where it makes the output NaN, as in the
// reference and the unfused path. So instead of their scores, only their
// values are scanned (one load per element, shared by the workgroup): the
// bits of every NaN or Inf (exponent all ones, an integer test) are OR-ed
// into bad_bits[column], and main() adds weight * that value to the column.
// Both factors come from memory at run time: a compiler that assumes no NaN
// or Inf may fold such constants away.
// The skipped keys are [j0, j_end) and [j2, j3) (the blocks before the
// window's, visited last; empty without one).
void scan_skipped_values(uint j0, uint j_end, uint j2, uint j3, uint v_base, uint dv4,
                         uint tid)
{
    for (uint c = tid; c < 4u * D4; c += WG)
        bad_bits[c] = 0u;
    barrier();
    const uint n0 = j_end - j0;
    for (uint e = tid; e < (n0 + j3 - j2) * dv4; e += WG) {
        const uint jj = e / dv4, c4 = e % dv4;
        const uint j = jj < n0 ? j0 + jj : j2 + (jj - n0);
        const uvec4 bits = floatBitsToUint(load_v(v_base + j * p.v_ld, 4u * c4, P_DV));
        for (uint k = 0; k < 4u; k++)
            if ((bits[k] & 0x7f800000u) == 0x7f800000u)
                atomicOr(bad_bits[4u * c4 + k], bits[k]);
    }
    barrier();
}

// Whether every one of the block's rows has a score above -1e9 + 128, so
// that a -1e9 score has weight exactly 0 (exp(-1e9 - m) underflows in fp32).
bool rows_settled(uint rows)
{
    bool settled = true;
    for (uint r = 0; r < rows; r++)
        settled = settled && row_m[r] > MASKED_SCORE + 128.0;
    return settled;
}

// bad_bits of output columns 4 c4 .. 4 c4 + 3.
uvec4 bad4(uint c4)
{
    return uvec4(bad_bits[4u * c4], bad_bits[4u * c4 + 1u], bad_bits[4u * c4 + 2u],
                 bad_bits[4u * c4 + 3u]);
}

// Accumulator s of invocation (ty, tx) plus weight * the skipped NaN / Inf
// values (bad_bits), the weight 0 for every row computed at run time:
// exp(-1e9 - m) with m at least -1e9 + 128.
vec4 with_skipped(vec4 acc, uint s, uint tx, uint ty, uint dv4)
{
    const uint c4 = tx + (s % OC) * TX;
    const uvec4 bits = c4 < dv4 ? bad4(c4) : uvec4(0u);
    if (all(equal(bits, uvec4(0u))))
        return acc;
    return acc + exp(MASKED_SCORE - max(row_m[ty * SR + s / OC], MASKED_SCORE + 128.0)) *
                     uintBitsToFloat(bits);
}

// Max |x| of a vec4's elements as bits (NaN's above Inf's: both at least
// 0x7f800000), for atomicMax.
uint amax_bits(vec4 x)
{
    const uvec4 u = floatBitsToUint(abs(x));
    return max(max(u.x, u.y), max(u.z, u.w));
}

// Keys j0 .. j0 + nk of the block, rows 0 .. rows of the workgroup: the
// DATA_* classes of their scores, OR-ed (a live score ends an
// invocation's look).
uint classify_block(uint b, uint i0, uint rows, uint j0, uint nk, uint len_b, uint bias_base,
                    uint tid)
{
    if (tid == 0u)
        blk_class = 0u;
    barrier();
    uint cls = 0u;
    for (uint e = tid; e < rows * nk; e += WG) {
        const uint i = i0 + e / nk, j = j0 + e % nk;
        if (mask_hides(p.flags, b, i, j, p.len_q, p.len_k,
                       causal_last(i, p.causal_offset, len_b, p.len_k))) {
            cls |= DATA_MASKED;
        } else if ((p.flags & MASK_BIAS) != 0u &&
                   bias_at(bias_base + i * p.len_k + j) == neg_inf()) {
            cls |= DATA_NEG_INF;
        } else {
            cls |= DATA_LIVE;
            break;
        }
    }
    if (cls != 0u)
        atomicOr(blk_class, cls);
    barrier();
    const uint c = blk_class;
    barrier(); // every invocation read it before the next block's reset
    return c;
}

// Whether no score q . k of the block's keys j0 .. j0 + nk can be NaN or
// +-Inf: q and k finite, and d_k max|q| max|k| |scale| far below FLT_MAX.
bool block_finite(uint k_base, uint j0, uint nk, uint dk4, uint tid)
{
    if (tid == 0u)
        k_amax = 0u;
    barrier();
    uint mx = 0u;
    for (uint e = tid; e < nk * dk4; e += WG)
        mx = max(mx, amax_bits(load_k(k_base + (j0 + e / dk4) * p.k_ld, 4u * (e % dk4), P_DK)));
    atomicMax(k_amax, mx);
    barrier();
    const uint kb = k_amax, qb = q_amax;
    return kb < 0x7f800000u && qb < 0x7f800000u &&
           uintBitsToFloat(qb) * uintBitsToFloat(kb) * abs(p.scale) * float(P_DK) < 1e37;
}

void main()
{
    const uint g = linear_group(p.group_base);
    if (g >= p.groups)
        return; // whole workgroups leave together: barriers stay uniform
    const uint tid = gl_LocalInvocationIndex;
    const uint split = g % P_SPLITS;
    uint rest = g / P_SPLITS;
    const uint qb = rest % P_Q_BLOCKS;
    rest /= P_Q_BLOCKS;
    const uint h = rest % p.heads;
    const uint b = rest / p.heads;
    const uint hk = h / p.group;
    const uint i0 = qb * BR;
    const uint rows = min(BR, p.len_q - i0);
    const uint dk4 = (P_DK + 3u) / 4u, dv4 = (P_DV + 3u) / 4u;
    const uint q_base = b * p.q_sb + h * p.q_sh;
    // Key j of this head is at k_base + j * k_ld. Windows of keys past
    // maxStorageBufferRange are bound from key kv_key0 of one head (the host
    // zeroes its strides): the bases wrap around 2^32, the sums do not.
    const uint k_base = (b + p.kv_b0) * p.k_sb + hk * p.k_sh - p.kv_key0 * p.k_ld;
    const uint v_base = (b + p.kv_b0) * p.v_sb + hk * p.v_sh - p.kv_key0 * p.v_ld;
#if defined(COOP) && COOP
    // Every K (V) row starts 4-aligned and holds whole vec4s: one ld4h per 4.
    const bool k_whole = (k_base | p.k_ld | P_DK) % 4u == 0u;
    const bool v_whole = (v_base | p.v_ld | P_DV) % 4u == 0u;
#endif
    // This entry's keys: len_b (a KV cache entry may hold fewer than len_k).
    const uint len_b = (p.flags & MASK_LENGTHS) != 0u ? min(lens[b], p.len_k) : p.len_k;
    const bool weights_mode = (p.flags & MODE_WEIGHTS) != 0u;
    const uint j_begin = split * p.split_len + p.kv_first;
    // The weights pass visits keys past len_b too: it writes their zeros.
    const uint j_end = min(split * p.split_len + min(p.kv_first + p.kv_count, p.split_len),
                           weights_mode ? p.len_k : len_b);
    const uint bias_base = flash_bias_base(b, h);
    const float slope = alibi_slope(h);

    // Key padding, a full mask or a bias: blocks are classified (DATA_*).
    const bool data_skip = (p.flags & MASK_DATA) != 0u && !weights_mode;
    if (tid == 0u)
        q_amax = 0u;
    barrier();
    uint q_mx = 0u;
    const bool rope = (p.rope & 0xffffu) != 0u;
    for (uint e = tid; e < BR * D4; e += WG) {
        const uint r = e / D4, c4 = e % D4;
        const uint q_row = q_base + (i0 + r) * p.q_ld,
                   t = (p.rope & ROPE_FOLDED) != 0u ? b : b * p.len_q + i0 + r;
        const vec4 q4 = r >= rows || c4 >= dk4 ? vec4(0.0)
                        : rope                 ? load_q_rope(q_row, 4u * c4, P_DK, t)
                                               : load_q(q_row, 4u * c4, P_DK);
        q_mx = max(q_mx, amax_bits(q4));
#if defined(COOP) && COOP
        PUT4H(qh, r * DS + 4u * c4, q4);
#else
        qs[e] = q4;
#endif
    }
    const uint rows_total = (p.groups / (P_SPLITS * P_Q_BLOCKS)) * p.len_q;
    const uint row_base = (b * p.heads + h) * p.len_q + i0; // row index of r = 0
    const uint part = split * rows_total + row_base;        // partial state of r = 0
    const bool resume = (p.flags & MODE_RESUME) != 0u;
    const uint tx = tid % TX, ty = tid / TX;
    // A row starts from its head's sink (flash_start), or from nothing.
    const vec2 start = flash_start(h, split);
    for (uint r = tid; r < BR; r += WG) {
        row_m[r] = resume && r < rows ? ml[2u * (part + r)] : start.x;
        row_l[r] = resume && r < rows ? ml[2u * (part + r) + 1u] : start.y;
    }
    if (data_skip)
        atomicMax(q_amax, q_mx);
    vec4 acc[SR * OC];
    for (uint s = 0; s < SR * OC; s++) {
        const uint r = ty * SR + s / OC, c0 = 4u * (tx + (s % OC) * TX);
        acc[s] = vec4(0.0);
        if (resume && r < rows && c0 < P_DV) {
            const uint base = (part + r) * P_DV + c0;
            acc[s] = vec4(ld_o(base), c0 + 1u < P_DV ? ld_o(base + 1u) : 0.0,
                          c0 + 2u < P_DV ? ld_o(base + 2u) : 0.0,
                          c0 + 3u < P_DV ? ld_o(base + 3u) : 0.0);
        }
    }
    barrier();

    // The keys some row of the block may see, [vis_lo, vis_hi].
    const ivec2 vis = flash_visible(causal_last(i0, p.causal_offset, len_b, p.len_k),
                                    causal_last(i0 + rows - 1u, p.causal_offset, len_b, p.len_k),
                                    int(j_begin));
    const int vis_lo = vis.x, vis_hi = vis.y;
    // Partial passes (split-K ranges, chunks) skip too: a range's or a
    // chunk's state is exact for its keys once its rows settle, and a chunk
    // resumes the settled rows of the chunks before. The weights pass
    // writes every key's weight.
    const bool skipping = (p.flags & (MASK_CAUSAL | MASK_WINDOW)) != 0u &&
                          (p.flags & MODE_WEIGHTS) == 0u;
    // Blocks from the one holding vis_lo on, then those before it.
    const uint n_blocks = j_end > j_begin ? (j_end - j_begin + BC - 1u) / BC : 0u;
    const uint first_block = skipping && vis_lo > int(j_begin)
                                 ? min((uint(vis_lo) - j_begin) / BC, n_blocks)
                                 : 0u;
    const uint j_wrap = min(j_begin + first_block * BC, j_end); // the blocks before it end here
    for (uint t = 0; t < n_blocks; t++) {
        const uint blk = t < n_blocks - first_block ? first_block + t
                                                    : t - (n_blocks - first_block);
        const uint j0 = j_begin + blk * BC;
        const uint nk = min(BC, j_end - j0);
        bool all_masked = false; // every score of the block -1e9, a row not settled
        if (skipping && (int(j0) > vis_hi || int(min(j0 + BC, j_end)) <= vis_lo)) {
            // Every key of this block is masked for every row of the block,
            // and so is every block after it in this order.
            if (rows_settled(rows)) { // uniform: every invocation read the same row_m
                const bool wrapped = blk < first_block;
                scan_skipped_values(j0, wrapped ? j_wrap : j_end, wrapped ? j_wrap : j_begin,
                                    j_wrap, v_base, dv4, tid);
                for (uint s = 0; s < SR * OC; s++)
                    acc[s] = with_skipped(acc[s], s, tx, ty, dv4);
                break;
            }
            all_masked = true;
        } else if (data_skip) {
            // Key padding, a full mask, a bias: a block without a live
            // score whose weights are all exactly 0 adds only 0 * v
            // (DATA_* above).
            const uint cls = classify_block(b, i0, rows, j0, nk, len_b, bias_base, tid);
            if ((cls & DATA_LIVE) == 0u && ((cls & DATA_MASKED) == 0u || rows_settled(rows)) &&
                ((cls & DATA_NEG_INF) == 0u || block_finite(k_base, j0, nk, dk4, tid))) {
                scan_skipped_values(j0, j0 + nk, 0u, 0u, v_base, dv4, tid);
                for (uint s = 0; s < SR * OC; s++)
                    acc[s] = with_skipped(acc[s], s, tx, ty, dv4);
                barrier(); // bad_bits read before a later block writes them
                continue;
            }
            all_masked = cls == DATA_MASKED;
        }
        if (all_masked) {
            // A row not settled yet and the block's nk scores all -1e9 (its
            // keys are below len_b): a step of the online softmax from the
            // column sums of its values (in bad_bits) and the rows' factors
            // (the old state's in row_corr, a key's weight in ps).
            for (uint c4 = tid; c4 < dv4; c4 += WG) {
                vec4 sum = vec4(0.0);
                for (uint jj = 0; jj < nk; jj++)
                    sum += load_v(v_base + (j0 + jj) * p.v_ld, 4u * c4, P_DV);
                for (uint k = 0; k < 4u; k++)
                    bad_bits[4u * c4 + k] = floatBitsToUint(sum[k]);
            }
            for (uint r = tid; r < BR; r += WG) {
                const float m_old = row_m[r], m_new = max(m_old, MASKED_SCORE);
                const float corr = exp(m_old - m_new), w = exp(MASKED_SCORE - m_new);
                row_l[r] = row_l[r] * corr + float(nk) * w;
                row_m[r] = m_new;
                row_corr[r] = corr;
                ps[r] = w;
            }
            barrier();
            for (uint s = 0; s < SR * OC; s++) {
                const uint r = ty * SR + s / OC, c4 = tx + (s % OC) * TX;
                acc[s] *= row_corr[r];
                if (c4 < dv4)
                    acc[s] += ps[r] * uintBitsToFloat(bad4(c4));
            }
            barrier();
            continue;
        }

        // 1. K block.
#if defined(COOP) && COOP
        // Zero past d_k up to the products' depth (stale keys past nk only
        // make scores that step 2 replaces).
        const uint depth = (dk4 * 4u + CK - 1u) / CK * CK;
        for (uint e = tid; e < nk * (depth / 4u); e += WG) {
            const uint j = e / (depth / 4u), c4 = e % (depth / 4u);
            const uint row = k_base + (j0 + j) * p.k_ld;
            if (DTYPE(1) == DT_U8) // Q8 rows: the codes (the scale below)
                PUT4H(kvh, j * DS + 4u * c4,
                      c4 < dk4 ? kv_q8_codes_k(row, 4u * c4, P_DK) : vec4(0.0))
            else if (c4 < dk4 && k_whole)
                PUT4H(kvh, j * DS + 4u * c4, ld4h_k(row / 4u + c4))
            else
                PUT4H(kvh, j * DS + 4u * c4, c4 < dk4 ? load_k(row, 4u * c4, P_DK) : vec4(0.0))
        }
        barrier();
        scores_coop(depth);
        barrier();
#else
        for (uint e = tid; e < nk * dk4; e += WG) {
            const uint j = e / dk4, c4 = e % dk4;
            kvs[j * KS + c4] = load_k(k_base + (j0 + j) * p.k_ld, 4u * c4, P_DK);
        }
        barrier();
#endif

        // 2. Scores: rows ty * SR + a against keys tx + b * TX.
#if defined(COOP) && COOP
        // Q8 rows: q . codes times the key's scale (exact codes in fp16).
        precise float sacc[SR * SC];
        for (uint a = 0; a < SR; a++)
            for (uint bb = 0; bb < SC; bb++) {
                const uint c = tx + bb * TX;
                sacc[a * SC + bb] = ps[(ty * SR + a) * BC + c];
                if (DTYPE(1) == DT_U8)
                    sacc[a * SC + bb] *=
                        c < nk ? kv_q8_scale_k(k_base + (j0 + c) * p.k_ld) : 0.0;
            }
        barrier(); // every score read before step 2 writes ps
#else
        precise float sacc[SR * SC];
        for (uint s = 0; s < SR * SC; s++)
            sacc[s] = 0.0;
        for (uint d = 0; d < dk4; d++) {
            vec4 qa[SR];
            for (uint a = 0; a < SR; a++)
                qa[a] = qs[(ty * SR + a) * D4 + d];
            for (uint bb = 0; bb < SC; bb++) {
                const vec4 kv = kvs[(tx + bb * TX) * KS + d];
                for (uint a = 0; a < SR; a++)
                    sacc[a * SC + bb] =
                        fma(qa[a].w, kv.w,
                            fma(qa[a].z, kv.z,
                                fma(qa[a].y, kv.y, fma(qa[a].x, kv.x, sacc[a * SC + bb]))));
            }
        }
#endif
        for (uint a = 0; a < SR; a++) {
            const uint r = ty * SR + a, i = i0 + r;
            for (uint bb = 0; bb < SC; bb++) {
                const uint c = tx + bb * TX, j = j0 + c;
                precise float x;
                if (c >= nk || j >= len_b) {
                    x = neg_inf(); // past this range or this entry's keys: weight 0
                } else if (r >= rows) {
                    x = MASKED_SCORE; // past len_q: computed, never written
                } else {
                    x = rule_score(sacc[a * SC + bb] * p.scale, b, i, j,
                                   causal_last(i, p.causal_offset, len_b, p.len_k),
                                   bias_base + i * p.len_k + j, slope);
                }
                if (weights_mode) {
                    if (c < nk && r < rows) {
                        const uint row = row_base + r;
                        const float m = ml[2u * row], l = ml[2u * row + 1u];
                        st_o(row * p.len_k + j, l == 0.0 ? 0.0 : exp(x - m) / l);
                    }
                } else {
                    ps[r * BC + c] = x;
                }
            }
        }
        barrier();
        if (weights_mode)
            continue; // uniform; the barrier above let every invocation finish with kvs

        // 3. Online softmax, one invocation per row; everyone loads V.
        for (uint r = tid; r < BR; r += WG) {
            const uint base = r * BC;
            float mt = neg_inf();
            for (uint cc = 0; cc < BC; cc++)
                mt = max(mt, ps[base + cc]);
            const float m_old = row_m[r];
            const float m_new = max(m_old, mt);
            // Only -inf so far: subtract 0, never -inf (see the top).
            const float m_sub = m_new == neg_inf() ? 0.0 : m_new;
            float sum = 0.0;
            for (uint cc = 0; cc < BC; cc++) {
                const float e = exp(ps[base + cc] - m_sub);
#if defined(COOP) && COOP
                // Q8 rows: the value's scale goes into P (the V block holds
                // the codes); the sum l stays unscaled.
                if (DTYPE(2) == DT_U8)
                    ph[r * PS + cc] = float16_t(
                        cc < nk ? e * kv_q8_scale_v(v_base + (j0 + cc) * p.v_ld) : 0.0);
                else
                    ph[r * PS + cc] = float16_t(e);
#else
                ps[base + cc] = e;
#endif
                sum += e;
            }
            const float corr = exp(m_old - m_sub); // 0 on the first block
            row_l[r] = row_l[r] * corr + sum;
            row_m[r] = m_new;
            row_corr[r] = corr;
        }
#if defined(COOP) && COOP
        // The V block, zero past the keys and past d_v up to the product's width.
        const uint width = (dv4 * 4u + CN - 1u) / CN * CN;
        for (uint e = tid; e < BC * (width / 4u); e += WG) {
            const uint jj = e / (width / 4u), c4 = e % (width / 4u);
            const uint row = v_base + (j0 + jj) * p.v_ld;
            if (DTYPE(2) == DT_U8) // Q8 rows: the codes (the scale is in P)
                PUT4H(kvh, jj * DS + 4u * c4,
                      jj < nk && c4 < dv4 ? kv_q8_codes_v(row, 4u * c4, P_DV) : vec4(0.0))
            else if (jj < nk && c4 < dv4 && v_whole)
                PUT4H(kvh, jj * DS + 4u * c4, ld4h_v(row / 4u + c4))
            else
                PUT4H(kvh, jj * DS + 4u * c4,
                      jj < nk && c4 < dv4 ? load_v(row, 4u * c4, P_DV) : vec4(0.0))
        }
        barrier();
        pv_coop(width);
        barrier();
#else
        for (uint e = tid; e < BC * dv4; e += WG) {
            const uint jj = e / dv4, c4 = e % dv4;
            kvs[jj * KS + c4] =
                jj < nk ? load_v(v_base + (j0 + jj) * p.v_ld, 4u * c4, P_DV) : vec4(0.0);
        }
        barrier();
#endif

        // 4. acc = acc * corr + P V, rows ty * SR + a, columns tx + o * TX.
        for (uint a = 0; a < SR; a++) {
            const float corr = row_corr[ty * SR + a];
            for (uint o = 0; o < OC; o++)
                acc[a * OC + o] *= corr;
        }
#if defined(COOP) && COOP
        for (uint a = 0; a < SR; a++)
            for (uint o = 0; o < OC; o++) {
                const uint c4 = tx + o * TX;
                if (c4 < dv4) {
                    const uint at = (ty * SR + a) * DV + 4u * c4;
                    acc[a * OC + o] += vec4(ps[at], ps[at + 1u], ps[at + 2u], ps[at + 3u]);
                }
            }
#else
        for (uint cc = 0; cc < BC; cc++) {
            float pa[SR];
            for (uint a = 0; a < SR; a++)
                pa[a] = ps[(ty * SR + a) * BC + cc];
            for (uint o = 0; o < OC; o++) {
                if (tx + o * TX < dv4) {
                    const vec4 vv = kvs[cc * KS + tx + o * TX];
                    for (uint a = 0; a < SR; a++)
                        acc[a * OC + o] += pa[a] * vv;
                }
            }
        }
#endif
        barrier();
    }

    if (weights_mode)
        return;
    for (uint s = 0; s < SR * OC; s++) {
        const uint r = ty * SR + s / OC, c4 = tx + (s % OC) * TX;
        if (r >= rows || c4 >= dv4)
            continue;
        uint base;
        vec4 val;
        if ((p.flags & MODE_PARTIAL) == 0u) {
            base = b * p.o_sb + h * p.o_sh + (i0 + r) * p.o_ld;
            // l = 0: every score was -inf, acc is 0 (or 0 * NaN / Inf values).
            val = row_l[r] == 0.0 ? acc[s] : acc[s] / row_l[r];
        } else {
            base = (split * rows_total + row_base + r) * P_DV;
            val = acc[s];
        }
        const uint c0 = 4u * c4;
        // A whole aligned vec4 in one store (16-bit packed data then needs
        // no atomics), else element by element.
        if (c0 + 3u < P_DV && ((base + c0) & 3u) == 0u) {
            st4_o((base + c0) / 4u, val);
            continue;
        }
        st_o(base + c0, val.x);
        if (c0 + 1u < P_DV)
            st_o(base + c0 + 1u, val.y);
        if (c0 + 2u < P_DV)
            st_o(base + c0 + 2u, val.z);
        if (c0 + 3u < P_DV)
            st_o(base + c0 + 3u, val.w);
    }
    for (uint r = tid; r < rows; r += WG) {
        const uint idx = 2u * (split * rows_total + row_base + r);
        ml[idx] = row_m[r];
        ml[idx + 1u] = row_l[r];
    }
}
