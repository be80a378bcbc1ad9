#version 450
// Fused attention shaped for CPU devices (lavapipe): the same operation,
// push constants, bindings 0-7, modes and partial-state layout as
// shaders/flash.comp, so the host, the split-K combine pass and the weights
// pass treat the two alike; the difference is the shape.
//
// A CPU Vulkan driver runs a workgroup's invocations as SIMD lanes; it pays
// for every barrier (the workgroup is suspended and resumed), reads shared
// memory and storage buffers with a loop over the lanes, and fetches a texel
// for all lanes with one load each and a transpose (see
// shaders/matmul_cpu.comp). So here there is no shared memory and no
// barrier: each invocation owns TM query rows (rows lane + u * WG of the
// block) with their q, (m, l) and output accumulator in registers, and the
// whole workgroup walks the same keys, fetching each key and value row once
// (as vec4 texels) for all its rows. Keys go BK at a time through
// the online softmax:
//   s[u][kk] = scale * q_u . k_j + bias, set to -1e9 where masked
//   m' = max(m, max s), p = exp(s - m'), l' = l exp(m - m') + sum p,
//   acc = acc exp(m - m') + sum p v_j
// with the same handling of -inf (subtract 0 while a row has seen only
// -inf) and the same `precise` fma chain for the scores as flash.comp, so
// MODE_WEIGHTS recomputes bit-identical scores.
//
// Every lane runs the same loops (rows past len_q are clamped for loads and
// never written), so control flow stays uniform without any barrier.
// Steps that add nothing (key padding, a full mask, a bias; the DATA_SKIP
// build variant, flash_cpu_skip, which the host takes for them): before a step,
// a lane passes over the steps where none of its scores is live, each one
// -1e9 (masked, once its rows settle above -1e9 + 128) or -inf (past the
// keys, or a -inf bias where no product can be NaN or Inf: the head's keys
// hold no element of 2^64 or more, nor NaN or Inf, per shaders/vscan.comp,
// and the lane's queries are small enough), all their weights exactly 0,
// where vscan.comp found no NaN or Inf among the head's values (0 * v then
// adds nothing). A loop, not a branch: lavapipe runs both sides of a
// branch under a mask, but leaves a loop once every lane has.
// Skipping (a causal mask or a window, not the weights pass): the keys every
// row of the block hides, those after the last row's position or a window's
// width before the first row's (or, without the causal mask, after the
// last's), are visited last: with rows in blocks, the keys from the block's
// window on first, then those before it; with lanes over keys (a decode
// step's), each lane's share of the visible keys first, then its share of
// the hidden ones (shares of the entry's keys, so that every lane of every
// split-K range meets visible keys first). Once each of a
// lane's rows has a score above -1e9 + 128, the hidden keys left have
// weight exactly 0 (exp(-1e9 - m) in fp32; the lane's m only grows, and
// the split-K merge's m is at least the lane's) and the lane stops: only where
// shaders/vscan.comp found no NaN or Inf among the head's values (with
// one, 0 * NaN must make the output NaN, as in the reference: those heads
// visit every key). Lanes decide alone: there is no barrier to keep
// uniform. (Scanning the skipped values instead, as flash.comp does, made
// this kernel's pipelines take minutes to compile on lavapipe.)
// lavapipe ends an invocation's loops after 65535 iterations in all: the
// host bounds the keys of one dispatch (kv_count) by the loop iterations a
// key costs here (vk_attention.c).

#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 8;      // invocations
layout(constant_id = 1) const uint TM = 2;      // query rows per invocation
layout(constant_id = 2) const uint D4 = 16;     // vec4s per row: d_k, d_v <= 4 * D4

// A loop over a row's vec4s c4, unrolled up to the d256 class; the d576
// class's (MLA's heads) is a loop, its rows in memory: unrolled, its 4 keys
// x 144 vec4s took Mesa 26's LLVM 22 70-140 s to compile (Mesa 22's LLVM
// 15: 3 s). The branch on the specialization constant leaves one loop.
#define D4_LOOP(BODY)                                                          \
    if (D4 <= 64u) {                                                           \
        [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) { BODY }                   \
    } else {                                                                   \
        [[dont_unroll]] for (uint c4 = 0u; c4 < D4; c4++) { BODY }              \
    }
const uint BK = 4;                              // keys per online-softmax step
const uint BR = WG * TM;                        // query rows per workgroup

#include "flash_push.glsl"

// The DATA_SKIP variant's max |q| of a lane's rows (q_bits), element by element.
#if defined(DATA_SKIP) && DATA_SKIP
#define Q_BITS(X)                                                              \
    {                                                                          \
        const uvec4 qb_ = floatBitsToUint(abs(X));                             \
        q_bits = max(q_bits, max(max(qb_.x, qb_.y), max(qb_.z, qb_.w)));       \
    }
#else
#define Q_BITS(X)
#endif

// Fields the host packs or leaves out to keep the push block small.
#define P_DK (p.dims & 0xffffu)
#define P_DV (p.dims >> 16)
#define P_SPLITS ((p.len_k + p.split_len - 1u) / p.split_len) // key ranges (1: no split-K)

// q, k and v as vec4 texels: the host runs this kernel only when every row
// of q, k, v and out starts on a multiple of 4 elements and d_k, d_v are
// multiples of 4 (else flash.comp or the unfused path), so there is no
// scalar path and no bounds check.
layout(binding = 0) uniform TEXEL_BUFFER Q4;
#if defined(KV_Q8) && KV_Q8
// KV_Q8 (a build variant): k and v are a Q8 KV cache's rows (include/vkmha.h,
// vkmha_kv_cache_desc.quant) through R32_UINT texels, a word each: a row's
// first word holds its fp16 scale s, the next d / 4 words its int8 codes q,
// four a word (d_k, d_v multiples of 4 here), each element s * q (exact in
// fp32, as shaders/kv_q8.glsl reads them). The host's strides count bytes.
layout(binding = 1) uniform utextureBuffer K4;
layout(binding = 2) uniform utextureBuffer V4;
float q8_scale(uint w)
{
    return f16_bits_to_f32(w & 0xffffu);
}
vec4 q8_codes(uint w)
{
    return i8x4_to_vec4(w);
}
// Row `row` (its first word) of K4 / V4: its scale, and the four elements
// of word 1 + c4 times it.
#define KV_SCALE(T, row) q8_scale(texelFetch(T, int(row)).x)
#define KV_FETCH(T, row, c4, s, S) ((s) * q8_codes(texelFetch(T, int((row) + 1u + (c4))).x))
#define KV_LD 4u // the strides' units (bytes) a word
#else
layout(binding = 1) uniform TEXEL_BUFFER K4;
layout(binding = 2) uniform TEXEL_BUFFER V4;
#define KV_SCALE(T, row) 1.0
#define KV_FETCH(T, row, c4, s, S) TEXEL_FETCH(T, (row) + (c4), S)
#define KV_LD 4u // the strides' units (elements) a texel
#endif
layout(binding = 3) readonly buffer KeyPadding { uint kp[]; };
layout(binding = 4) readonly buffer FullMask { uint fm[]; };
layout(binding = 5) readonly buffer Bias { float bias[]; };
// Out as vec4s (outputs, partial state), and as floats (the weights).
// q, k, v: texel views (fp32; 16-bit in the TEXEL_U16 variant); out (outputs, partial state, weights)
// of any float dtype (shaders/typed.glsl; partial state always fp32).
TYPED_IO(6, 6, o)
layout(binding = 7) buffer Stats { float ml[]; };
layout(binding = 8) readonly buffer Lengths { uint lens[]; }; // with MASK_LENGTHS

#define MASK_SLOT 3u
#define HEAD_RULES_BINDING 9
#include "mask.glsl"
#include "flash_rules.glsl"

// MODE_* (the flags' modes, MODE_LANE_KEYS this shader's): shaders/flash_push.glsl.

// A lane visits up to three runs of keys, [first.x, end.x), then
// [first.y, end.y), then [first.z, end.z), in whole steps of BK (the last
// of a run may be short): step t's first key and the end of its run, where
// at = (the steps of the first run, of the first two) in keys.
uvec2 step_keys(uint t, uvec3 first, uvec3 end, uvec2 at)
{
    return t < at.x   ? uvec2(first.x + t, end.x)
           : t < at.y ? uvec2(first.y + (t - at.x), end.y)
                      : uvec2(first.z + (t - at.y), end.z);
}

// The part of the run of keys [first, end), at positions [at, at + its
// length) of a lane's list, that positions [lo, hi) of the list hold.
uvec2 clip_run(uint first, uint end, uint at, uint lo, uint hi)
{
    const uint n = end - first;
    const uint a = clamp(lo, at, at + n) - at, b = clamp(hi, at, at + n) - at;
    return uvec2(first + a, first + max(a, b));
}

// Whole steps of BK over n keys.
uint steps_of(uint n)
{
    return (n + BK - 1u) / BK * BK;
}

void main()
{
    const uint g = linear_group(p.group_base);
    if (g >= p.groups)
        return;
    const uint lane = gl_LocalInvocationIndex;
    const bool lane_keys = (p.flags & MODE_LANE_KEYS) != 0u;
    const uint block = lane_keys ? TM : BR; // query rows per workgroup
    const uint q_blocks = (p.len_q + block - 1u) / block;
    const uint split = g % P_SPLITS;
    uint rest = g / P_SPLITS;
    const uint qb = rest % q_blocks;
    rest /= q_blocks;
    const uint h = rest % p.heads;
    const uint b = rest / p.heads;
    const uint hk = h / p.group;
    const uint i0 = qb * block;
    const uint rows = min(block, p.len_q - i0);
    const uint dk4 = P_DK / 4u, dv4 = P_DV / 4u;
    // Texel (vec4) indices of head h's rows.
    const uint q_base = (b * p.q_sb + h * p.q_sh) / 4u, q_ld = p.q_ld / 4u;
    const uint k_base = ((b + p.kv_b0) * p.k_sb + hk * p.k_sh) / KV_LD, k_ld = p.k_ld / KV_LD;
    const uint v_base = ((b + p.kv_b0) * p.v_sb + hk * p.v_sh) / KV_LD, v_ld = p.v_ld / KV_LD;
    // This entry's keys: len_b (a KV cache entry may hold fewer than len_k).
    const uint len_b = (p.flags & MASK_LENGTHS) != 0u ? min(lens[b], p.len_k) : p.len_k;
    const bool weights_mode = (p.flags & MODE_WEIGHTS) != 0u;
    // The weights pass visits keys past len_b too: it writes their zeros.
    const uint n_keys = weights_mode ? p.len_k : len_b;
    // Rows in blocks: this dispatch's keys of the split's range.
    const uint j_first = split * p.split_len + p.kv_first;
    const uint j_end =
        max(j_first, min(split * p.split_len + min(p.kv_first + p.kv_count, p.split_len), n_keys));
    const uint bias_base = flash_bias_base(b, h);
    const float slope = alibi_slope(h);
    const uint rows_total = (p.groups / (P_SPLITS * q_blocks)) * p.len_q;
    const uint row_base = (b * p.heads + h) * p.len_q + i0;
    const uint psplit = lane_keys ? split * WG + lane : split; // partial state's range
    const uint part = psplit * rows_total + row_base;
    const bool resume = (p.flags & MODE_RESUME) != 0u;
    // A row starts from its head's sink (flash_start: one lane's partial
    // state of split 0 with lane_keys), or from nothing.
    const vec2 start = flash_start(h, psplit);

    // This lane's rows (clamped into the block for loads) and their state.
    // Every array is indexed by constants only (the loops over them are
    // unrolled): a runtime index would make the driver lower the array to
    // memory or to a chain of selects. Except in the d576 class (D4_LOOP).
    uint r[TM];
    bool live[TM];
#if defined(DATA_SKIP) && DATA_SKIP
    uint q_bits = 0u; // max |q| of the lane's rows, as bits (NaN's above Inf's)
#endif
    vec4 qv[TM * D4];
    vec4 acc[TM * D4];
    float m[TM], l[TM];
    [[unroll]] for (uint u = 0u; u < TM; u++) {
        const uint ru = lane_keys ? u : lane + u * WG;
        live[u] = ru < rows;
        r[u] = min(ru, rows - 1u);
        const uint sidx = part + r[u];
        m[u] = resume ? ml[2u * sidx] : start.x;
        l[u] = resume ? ml[2u * sidx + 1u] : start.y;
        const uint qrow = q_base + (i0 + r[u]) * q_ld;
        D4_LOOP(
            qv[u * D4 + c4] = c4 < dk4 ? TEXEL_FETCH(Q4, qrow + c4, 0u) : vec4(0.0);
            Q_BITS(qv[u * D4 + c4])
            acc[u * D4 + c4] = resume && c4 < dv4 ? ld4_o(sidx * dv4 + c4) : vec4(0.0);)
    }

    // The keys the block's rows may see, [vis_lo, vis_hi], and where the
    // visit starts: j_rot, the window's first key (whole steps of BK).
    // Only where shaders/vscan.comp found no NaN or Inf among the head's
    // values: a skipped key then adds exactly nothing (0 * v). Its keys'
    // flag: no element of 2^64 or more, so no product of queries below
    // 1e37 / (2^64 d_k |scale|) overflows (scanned with a bias only).
    const uint flags_at = 2u * p.heads + 2u * (b * (p.heads / p.group) + hk);
    const bool v_clean =
        (p.flags & MODE_VSCANNED) != 0u && floatBitsToUint(hr[flags_at]) == 0u;
#if defined(DATA_SKIP) && DATA_SKIP
    const bool keys_small =
        (p.flags & (MODE_VSCANNED | MASK_BIAS)) == (MODE_VSCANNED | MASK_BIAS) &&
        floatBitsToUint(hr[flags_at + 1u]) == 0u && q_bits < 0x7f800000u &&
        uintBitsToFloat(q_bits) * 18446744073709551616.0 * abs(p.scale) * float(P_DK) < 1e37;
    // Steps that add nothing are passed over (see the top).
    const bool data_skipping = (p.flags & MASK_DATA) != 0u && !weights_mode && v_clean;
#endif
    const bool skipping =
        (p.flags & (MASK_CAUSAL | MASK_WINDOW)) != 0u && !weights_mode && v_clean;
    const ivec2 vis = flash_visible(causal_last(i0, p.causal_offset, len_b, p.len_k),
                                    causal_last(i0 + rows - 1u, p.causal_offset, len_b, p.len_k),
                                    lane_keys ? 0 : int(j_first));
    const int vis_lo = vis.x, vis_hi = vis.y;
    // The lane's runs of keys, visible ones first, then hidden ones.
    uvec3 run_first, run_end;
    if (lane_keys) {
        // The entry's keys [0, n_keys) in shares, one per lane of each
        // split (psplit): share P takes the P-th part of the visible keys
        // [v0, v1), then the P-th part of the hidden ones (those after the
        // visible ones, then those before), so that every lane of every
        // split meets visible keys first (where there are enough).
        const uint v0 = uint(clamp(vis_lo, 0, int(n_keys)));
        const uint v1 = uint(clamp(vis_hi, int(v0) - 1, int(n_keys) - 1) + 1);
        const uint shares = P_SPLITS * WG, nv = v1 - v0, nh = n_keys - nv, tail = n_keys - v1;
        const uint pv = (nv + shares * BK - 1u) / (shares * BK) * BK;
        const uint ph = (nh + shares * BK - 1u) / (shares * BK) * BK;
        const uint a0 = min(v0 + psplit * pv, v1), h0 = min(psplit * ph, nh);
        const uint a1 = min(a0 + pv, v1), h1 = min(h0 + ph, nh);
        // This dispatch's part of the lane's list: its chunk's share of
        // kv_count (the last chunk: the rest).
        const uint quota = (p.kv_count + WG * BK - 1u) / (WG * BK) * BK;
        const uint lo = p.kv_first / p.kv_count * quota;
        const uint hi = p.kv_first + p.kv_count >= p.split_len ? 0xffffffffu : lo + quota;
        const uint la = a1 - a0, lb = min(h1, tail) - min(h0, tail);
        const uvec2 ra = clip_run(a0, a1, 0u, lo, hi);
        const uvec2 rb = clip_run(v1 + min(h0, tail), v1 + min(h1, tail), la, lo, hi);
        const uvec2 rc = clip_run(max(h0, tail) - tail, max(h1, tail) - tail, la + lb, lo, hi);
        run_first = uvec3(ra.x, rb.x, rc.x);
        run_end = uvec3(ra.y, rb.y, rc.y);
    } else {
        // The split's keys from the window's first one (whole steps of BK
        // from j_first), then those before it.
        const uint j_rot = skipping && vis_lo > int(j_first)
                               ? min(j_first + (uint(vis_lo) - j_first) / BK * BK, j_end)
                               : j_first;
        run_first = uvec3(j_rot, j_first, 0u);
        run_end = uvec3(j_end, j_rot, 0u);
    }
    // The runs in one loop (one copy of its body).
    const uint steps_a = steps_of(run_end.x - run_first.x);
    const uvec2 run_at = uvec2(steps_a, steps_a + steps_of(run_end.y - run_first.y));
    const uint steps = run_at.y + steps_of(run_end.z - run_first.z);
    for (uint t = 0u; t < steps; t += BK) {
#if defined(DATA_SKIP) && DATA_SKIP
        if (data_skipping) {
            bool settled = true;
            [[unroll]] for (uint u = 0u; u < TM; u++)
                settled = settled && m[u] > MASKED_SCORE + 128.0;
            while (t < steps) {
                const uvec2 at = step_keys(t, run_first, run_end, run_at);
                const uint j0 = at.x, seg_end = at.y;
                bool idle = true; // no live score; -1e9 ones only where settled
                [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
                    const uint j = j0 + kk;
                    if (j >= seg_end || j >= len_b)
                        continue; // -inf
                    // Key padding hides the key from every row; the other
                    // kinds are looked at per row (a load each).
                    if ((p.flags & MASK_KEY_PADDING) != 0u && kp_byte(b * p.len_k + j) == 0u) {
                        idle = idle && settled;
                        continue;
                    }
                    [[unroll]] for (uint u = 0u; u < TM; u++) {
                        const uint i = i0 + r[u];
                        if (mask_hides(p.flags & ~MASK_KEY_PADDING, b, i, j, p.len_q, p.len_k,
                                       causal_last(i, p.causal_offset, len_b, p.len_k)))
                            idle = idle && settled;
                        else
                            idle = idle && keys_small &&
                                   bias_at(bias_base + i * p.len_k + j) == neg_inf();
                    }
                }
                if (!idle)
                    break;
                t += BK;
            }
            if (t >= steps)
                break;
        }
#endif
        const uvec2 at = step_keys(t, run_first, run_end, run_at);
        const uint j0 = at.x, seg_end = at.y;
        if (skipping && (int(j0) > vis_hi || int(min(j0 + BK, seg_end)) <= vis_lo)) {
            // Hidden from every row, and so is every key left to visit.
            bool settled = true;
            [[unroll]] for (uint u = 0u; u < TM; u++)
                settled = settled && m[u] > MASKED_SCORE + 128.0;
            if (settled)
                break;
        }
        // Scores of keys j0 .. j0 + BK - 1 (-inf past seg_end).
        float s[TM * BK];
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            const uint j = min(j0 + kk, seg_end - 1u);
            const uint krow = k_base + j * k_ld;
            const float ks = KV_SCALE(K4, krow);
            precise float sacc[TM];
            [[unroll]] for (uint u = 0u; u < TM; u++)
                sacc[u] = 0.0;
            D4_LOOP(
                if (c4 < dk4) {
                    const vec4 kv = KV_FETCH(K4, krow, c4, ks, 1u);
                    [[unroll]] for (uint u = 0u; u < TM; u++)
                        sacc[u] = fma(qv[u * D4 + c4].w, kv.w,
                                      fma(qv[u * D4 + c4].z, kv.z,
                                          fma(qv[u * D4 + c4].y, kv.y,
                                              fma(qv[u * D4 + c4].x, kv.x, sacc[u]))));
                })
            [[unroll]] for (uint u = 0u; u < TM; u++) {
                const uint i = i0 + r[u];
                precise float x;
                if (j0 + kk >= seg_end || j >= len_b) {
                    x = neg_inf(); // past this range or this entry's keys: weight 0
                } else {
                    x = rule_score(sacc[u] * p.scale, b, i, j,
                                   causal_last(i, p.causal_offset, len_b, p.len_k),
                                   bias_base + i * p.len_k + j, slope);
                }
                s[u * BK + kk] = x;
            }
        }

        if (weights_mode) {
            [[unroll]] for (uint u = 0u; u < TM; u++) {
                const uint row = row_base + r[u];
                const float mr = ml[2u * row], lr = ml[2u * row + 1u];
                [[unroll]] for (uint kk = 0u; kk < BK; kk++)
                    if (live[u] && j0 + kk < seg_end)
                        st_o(row * p.len_k + j0 + kk,
                             lr == 0.0 ? 0.0 : exp(s[u * BK + kk] - mr) / lr);
            }
            continue;
        }

        [[unroll]] for (uint u = 0u; u < TM; u++) {
            float mt = neg_inf();
            [[unroll]] for (uint kk = 0u; kk < BK; kk++)
                mt = max(mt, s[u * BK + kk]);
            const float m_new = max(m[u], mt);
            // Only -inf so far: subtract 0, never -inf (see flash.comp).
            const float m_sub = m_new == neg_inf() ? 0.0 : m_new;
            float sum = 0.0;
            [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
                const float e = exp(s[u * BK + kk] - m_sub);
                s[u * BK + kk] = e;
                sum += e;
            }
            const float corr = exp(m[u] - m_sub);
            l[u] = l[u] * corr + sum;
            m[u] = m_new;
            D4_LOOP(acc[u * D4 + c4] *= corr;)
        }
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            const uint vrow = v_base + min(j0 + kk, seg_end - 1u) * v_ld; // past seg_end: p = 0
            const float vs = KV_SCALE(V4, vrow);
            D4_LOOP(
                if (c4 < dv4) {
                    const vec4 vv = KV_FETCH(V4, vrow, c4, vs, 2u);
                    [[unroll]] for (uint u = 0u; u < TM; u++)
                        acc[u * D4 + c4] += s[u * BK + kk] * vv;
                })
        }
    }
    if (weights_mode)
        return;

    [[unroll]] for (uint u = 0u; u < TM; u++) {
        if (!live[u])
            continue;
        const uint row = row_base + r[u];
        const bool partial = (p.flags & MODE_PARTIAL) != 0u;
        const uint base = partial ? (psplit * rows_total + row) * dv4
                                  : (b * p.o_sb + h * p.o_sh + (i0 + r[u]) * p.o_ld) / 4u;
        // l = 0: every score was -inf, acc is 0 (or 0 * NaN / Inf values).
        const float inv = partial || l[u] == 0.0 ? 1.0 : 1.0 / l[u];
        D4_LOOP(if (c4 < dv4) st4_o(base + c4, acc[u * D4 + c4] * inv);)
        const uint idx = 2u * (psplit * rows_total + row);
        ml[idx] = m[u];
        ml[idx + 1u] = l[u];
    }
}
