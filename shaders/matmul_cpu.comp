#version 450
// Batched matmul shaped for CPU devices (lavapipe):  C[z] = alpha * A[z] * op(B[z]) + bias
// (+ C[z]: ACCUMULATE)
// The same operation, layouts and push constants as matmul.comp.
//
// A CPU Vulkan driver (lavapipe) runs the invocations of a workgroup as the
// lanes of SIMD registers. It pays for every barrier (the workgroup is
// suspended and resumed) and reads a storage buffer with a branchy loop over
// the lanes (one scalar load per lane and component, bounds-checked), even
// when every lane reads the same address; a texel fetch is one 16-byte load
// per lane and a transpose, without branches. So this variant uses no shared
// memory and no barrier, reads A and B as vec4 texels, and keeps a large
// block of C in registers to reuse each fetch:
//   - each invocation owns TM rows of C (rows i0 + t * WG, t < TM, where i0 is
//     its index in the workgroup) and TN consecutive columns col0 .. col0+TN-1,
//     the same columns for the whole workgroup;
//   - per step of 4 along K it fetches TM vec4s of A and TN vec4s of B and
//     does 4 * TM * TN fma.
// Rows beyond M and columns beyond N are clamped for loads (so that control
// flow stays uniform) and skipped on store.
// With LANE_COLS (matrices of a few rows: a decode step's projections) the
// lanes spread over columns instead: each invocation owns TN consecutive
// columns col0 .. col0+TN-1 of its own and the workgroup's TM rows, so that
// no lane repeats another's row; A's fetches are then the same for every
// lane and B's are gathers (one row of B per column).
// With VEC the host guarantees 16-byte alignment of every row start, K % 4 ==
// 0 and, when B is not transposed, N % 4 == 0 (then TN % 4 == 0 too); without
// it every load is a scalar read of the storage-buffer bindings. A quantized
// B (shaders/quant.glsl) is read through its storage binding and
// dequantized as it is read, with VEC four elements of a row at a time.

#extension GL_GOOGLE_include_directive : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64; // invocations; the tile is WG * TM rows
layout(constant_id = 1) const uint TM = 1;  // rows per invocation
layout(constant_id = 2) const uint TN = 8;  // columns per workgroup (and invocation)
layout(constant_id = 3) const bool VEC = false;
layout(constant_id = 4) const bool LANE_COLS = false;
const uint RSTEP = LANE_COLS ? 1u : WG; // between an invocation's rows

#include "matmul_push.glsl"

// Ranges of k of a product past maxStorageBufferRange, as variants (bits 1
// and 2 of VARIANT: src/vk_base.h): C += ..., or (16-bit C) the bias
// binding is the fp32 sum of the ranges before, [M][N] at ld_add.
const bool ACCUMULATE = ((VARIANT >> 1) & 1u) != 0u;
const bool ADDEND = ((VARIANT >> 2) & 1u) != 0u;

// A and B twice: as vec4 texel buffers (a CPU driver fetches a texel for all
// lanes at once, without the per-lane loop of a storage-buffer read; 16-bit
// data through the TEXEL_U16 variant, shaders/typed.glsl) and as storage
// buffers of any float dtype for the scalar path (shaders/typed.glsl; the
// dtype slots are the host's buffer indices: A and B are 0 and 1).
layout(binding = 0) uniform TEXEL_BUFFER A4;
layout(binding = 1) uniform TEXEL_BUFFER B4;
TYPED_IN(2, 2, bias) // [N], or [M][ld_add] (ADDEND)
TYPED_IO(3, 3, c)
TYPED_IN(4, 0, a)
TYPED_IN(5, 1, b)
#include "quant.glsl"

// What is added to output (r, col) of this dispatch besides the product.
float bias_at(uint r, uint col)
{
    return ADDEND ? ld_bias(r * p.ld_add + col) : ld_bias(col);
}

vec4 a4(uint i) { return TEXEL_FETCH(A4, i, 0u); }
vec4 b4(uint i) { return TEXEL_FETCH(B4, i, 1u); }

// The TN vec4s of B that a step of 4 along K needs (the same for every
// invocation of the workgroup):
//   trans_b: item j = B row col0 + j, elements 4 k4 .. 4 k4 + 3;
//   else:    item 4 q + r = B row 4 k4 + r, columns col0 + 4 q .. + 3
//            (N % 4 == 0: a group of 4 columns is wholly in or out).
uint b_item(uint item, uint k4, bool trans_b, uint col0, uint offb)
{
    if (trans_b)
        return (offb + min(col0 + item, p.N - 1u) * p.ldb) / 4u + k4;
    return (offb + min(col0 + (item / 4u) * 4u, p.N - 4u)) / 4u +
           (k4 * 4u + item % 4u) * (p.ldb / 4u);
}

// The same items of a quantized B (shaders/quant.glsl), dequantized from
// its storage binding (offb 0): four elements along a row of B either way.
vec4 qb_item(uint item, uint k4, bool trans_b, uint col0)
{
    if (trans_b)
        return qb_at4(min(col0 + item, p.N - 1u), 4u * k4);
    return qb_at4(4u * k4 + item % 4u, min(col0 + (item / 4u) * 4u, p.N - 4u));
}

void load_b(out vec4 bv[TN], uint k4, bool trans_b, uint col0, uint offb)
{
    for (uint j = 0u; j < TN; j++)
        bv[j] = quant_b() ? qb_item(j, k4, trans_b, col0) : b4(b_item(j, k4, trans_b, col0, offb));
}

void main()
{
    const uint z = gl_WorkGroupID.z + p.z_base;
    const uint zo = z / p.batch_inner;
    const uint zi = z % p.batch_inner;
    const uint offa = zo * p.sa_outer + zi * p.sa_inner;
    const uint offb = zo * p.sb_outer + (zi / p.b_div) * p.sb_inner;
    const uint offc = zo * p.sc_outer + zi * p.sc_inner;
    const uint lane = gl_LocalInvocationID.x;
    const uint row0 = LANE_COLS ? (gl_WorkGroupID.y + p.y_base) * TM
                                : (gl_WorkGroupID.y + p.y_base) * (WG * TM) + lane;
    const uint col0 = LANE_COLS ? ((gl_WorkGroupID.x + p.x_base) * WG + lane) * TN
                                : (gl_WorkGroupID.x + p.x_base) * TN;
    const bool trans_b = (p.flags & FLAG_TRANS_B) != 0u;

    // Row starts of A (per lane, clamped into the matrix).
    uint arow[TM];
    for (uint t = 0u; t < TM; t++)
        arow[t] = offa + min(row0 + t * RSTEP, p.M - 1u) * p.lda;

    float acc[TM * TN];
    for (uint i = 0u; i < TM * TN; i++)
        acc[i] = 0.0;

    if (VEC && trans_b && quant_b()) {
        // A quantized B [N][K] (shaders/quant.glsl; K a multiple of the
        // group size): each row's scale and zero point read once per group,
        // its codes per step (4-bit ones two steps, eight codes, per word
        // where the binding starts on a word), dequantized as the reference
        // does (s (q - z), exact in fp32) and used like B's texels below.
        const uint gk4 = (1u << p.q_shift) / 4u; // vec4 steps per group
        const uint ks = DTYPE(1) == DT_U4 && (MISALIGN_BYTES(1) & 3u) == 0u ? 2u : 1u;
        uint brow[TN];
        for (uint j = 0u; j < TN; j++)
            brow[j] = min(col0 + j, p.N - 1u);
        for (uint g4 = 0u; g4 < p.K / 4u; g4 += gk4) {
            vec2 sz[TN];
            for (uint j = 0u; j < TN; j++)
                sz[j] = qb_group(brow[j], 4u * g4);
            for (uint k4 = g4; k4 < g4 + gk4; k4 += ks) {
                vec4 av[2u * TM];
                for (uint h = 0u; h < ks; h++)
                    for (uint t = 0u; t < TM; t++)
                        av[h * TM + t] = a4(arow[t] / 4u + k4 + h);
                for (uint j = 0u; j < TN; j++) {
                    vec4 q[2];
                    if (ks == 2u)
                        q[0] = qb_codes8(brow[j], 4u * k4, q[1]);
                    else
                        q[0] = qb_codes4(brow[j], 4u * k4);
                    for (uint h = 0u; h < ks; h++) {
                        const vec4 bv = sz[j].x * (q[h] - sz[j].y);
                        for (uint t = 0u; t < TM; t++) {
                            float s = acc[t * TN + j];
                            s = fma(av[h * TM + t].x, bv.x, s);
                            s = fma(av[h * TM + t].y, bv.y, s);
                            s = fma(av[h * TM + t].z, bv.z, s);
                            s = fma(av[h * TM + t].w, bv.w, s);
                            acc[t * TN + j] = s;
                        }
                    }
                }
            }
        }
    } else if (VEC && trans_b) {
        for (uint k4 = 0u; k4 < p.K / 4u; k4++) {
            vec4 av[TM], bv[TN];
            for (uint t = 0u; t < TM; t++)
                av[t] = a4(arow[t] / 4u + k4);
            load_b(bv, k4, true, col0, offb);
            for (uint j = 0u; j < TN; j++)
                for (uint t = 0u; t < TM; t++) {
                    float s = acc[t * TN + j];
                    s = fma(av[t].x, bv[j].x, s);
                    s = fma(av[t].y, bv[j].y, s);
                    s = fma(av[t].z, bv[j].z, s);
                    s = fma(av[t].w, bv[j].w, s);
                    acc[t * TN + j] = s;
                }
        }
    } else if (VEC) {
        for (uint k4 = 0u; k4 < p.K / 4u; k4++) {
            vec4 av[TM], bv[TN];
            for (uint t = 0u; t < TM; t++)
                av[t] = a4(arow[t] / 4u + k4);
            load_b(bv, k4, false, col0, offb);
            for (uint q = 0u; q < TN / 4u; q++)
                for (uint t = 0u; t < TM; t++) {
                    const uint o = t * TN + q * 4u;
                    vec4 s = vec4(acc[o], acc[o + 1u], acc[o + 2u], acc[o + 3u]);
                    s = fma(vec4(av[t].x), bv[q * 4u], s);
                    s = fma(vec4(av[t].y), bv[q * 4u + 1u], s);
                    s = fma(vec4(av[t].z), bv[q * 4u + 2u], s);
                    s = fma(vec4(av[t].w), bv[q * 4u + 3u], s);
                    acc[o] = s.x;
                    acc[o + 1u] = s.y;
                    acc[o + 2u] = s.z;
                    acc[o + 3u] = s.w;
                }
        }
    } else {
        // Any shape and stride: scalar loads.
        uint bidx[TN], bcol[TN];
        for (uint j = 0u; j < TN; j++) {
            const uint col = min(col0 + j, p.N - 1u);
            bidx[j] = offb + (trans_b ? col * p.ldb : col);
            bcol[j] = col;
        }
        const uint bstep = trans_b ? 1u : p.ldb; // B index step per k
        for (uint k = 0u; k < p.K; k++) {
            float av[TM];
            for (uint t = 0u; t < TM; t++)
                av[t] = ld_a(arow[t] + k);
            for (uint j = 0u; j < TN; j++) {
                const float bv = !quant_b() ? ld_b(bidx[j] + k * bstep)
                                 : trans_b    ? qb_at(bcol[j], k)
                                              : qb_at(k, bcol[j]);
                for (uint t = 0u; t < TM; t++)
                    acc[t * TN + j] = fma(av[t], bv, acc[t * TN + j]);
            }
        }
    }

    const bool has_bias = (p.flags & FLAG_BIAS) != 0u;
    for (uint t = 0u; t < TM; t++) {
        const uint r = row0 + t * RSTEP;
        if (r >= p.M || col0 >= p.N)
            continue;
        const uint c_row = offc + r * p.ldc + col0;
        // Whole aligned vec4s where the row allows (one store of 4 outputs,
        // 16 or 8 bytes), else element by element.
        if (TN % 4u == 0u && (c_row & 3u) == 0u && col0 + TN <= p.N) {
            for (uint q = 0u; q < TN / 4u; q++) {
                vec4 v = p.alpha * vec4(acc[t * TN + 4u * q], acc[t * TN + 4u * q + 1u],
                                        acc[t * TN + 4u * q + 2u], acc[t * TN + 4u * q + 3u]);
                if (has_bias)
                    v += vec4(bias_at(r, col0 + 4u * q), bias_at(r, col0 + 4u * q + 1u),
                              bias_at(r, col0 + 4u * q + 2u), bias_at(r, col0 + 4u * q + 3u));
                if (ACCUMULATE)
                    v += ld4_c(c_row / 4u + q);
                st4_c(c_row / 4u + q, v);
            }
            continue;
        }
        for (uint j = 0u; j < TN; j++) {
            const uint col = col0 + j;
            if (col < p.N)
                st_c(c_row + j, p.alpha * acc[t * TN + j] + (has_bias ? bias_at(r, col) : 0.0) +
                                    (ACCUMULATE ? ld_c(c_row + j) : 0.0));
        }
    }
}
