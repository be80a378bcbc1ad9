#version 450
// The matmul of shaders/matmul.comp (same bindings, push block, batching,
// op T, bias and ranges of k) on the device's matrix units through
// VK_NV_cooperative_matrix2: fp16 operands, fp32 accumulation.
//
// Unlike shaders/matmul_coop.comp (subgroup-scope matrices staged by the
// kernel in shared memory), the whole workgroup owns one BM x BN
// accumulator of workgroup scope, and A's BM x BK and op(B)'s BK x BN
// slices are loaded straight from the buffers by tensor-addressed loads
// (coopMatLoadTensorNV): the driver stages them, in the layout its matrix
// units want, through the shared memory it reserves. A tile wholly inside
// M x N, with K a multiple of BK and strides and offsets multiples of 8
// elements, takes loads without bounds checks that the compiler knows
// 16-byte aligned, UNROLL steps of k unrolled at a time; any other tile
// takes clamped loads, which read zeros past M, N or K (no edge is padded
// by the caller). Op T reads B [N][K] through a transposed view; op N reads
// B [K][N] as it is.
//
// The output: the accumulator gets alpha and the bias per element
// (coopMatPerElementNV, a pure function: a device may evaluate an element
// in more than one invocation), then an fp32 or fp16 C is stored by a
// tensor store (clamped at edges: nothing past M x N is written), a bf16 C
// element by element from a second per-element operation (a store of the
// same value, harmless if repeated). The host sends no product in ranges
// of k here (matmul_out.glsl's ACCUMULATE and ADDEND, which read C or an
// addend back): those take the other kernels.
//
// Needs SPIR-V 1.6 (the tensor layouts), so this shader is built for
// Vulkan 1.3 (meson.build), and storageBuffer16BitAccess (the fp16 views
// below, in both build variants). The host sizes WG to a workgroup size
// the device lists for fp16 x fp16 -> fp32 matrices of workgroup scope,
// and BM, BN, BK to multiples of that entry's granularities.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#extension GL_EXT_control_flow_attributes : require
#include "typed.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 128;
layout(constant_id = 3) const uint BK = 32;

#include "matmul_push.glsl"

// TEXEL_LAYOUT (CPU devices, whose matmul layout puts the register
// variant's texel views at bindings 0 and 1): A and B at bindings 4 and 5.
#if defined(TEXEL_LAYOUT) && TEXEL_LAYOUT
#define BINDING_A 4
#define BINDING_B 5
#else
#define BINDING_A 0
#define BINDING_B 1
#endif
TYPED_IN(2, 2, bias) // [N]
TYPED_OUT(3, 3, c)
// The fp16 views of A and B and the fp16 and fp32 views of C that the
// tensor loads and stores address in elements.
layout(binding = BINDING_A) readonly buffer A16 { float16_t a16[]; };
layout(binding = BINDING_B) readonly buffer B16 { float16_t b16[]; };
layout(binding = 3) buffer C16 { float16_t c16[]; };
layout(binding = 3) buffer C32 { float c32[]; };


#define ACC coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>
#define MAT_A coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>

// Per element (r, col) of the tile at (row0, col0): alpha times the sum,
// plus the bias.
float epilogue(const in uint32_t r, const in uint32_t col, const in float sum,
               const in uint32_t row0, const in uint32_t col0)
{
    const uint gc = col0 + col;
    const float v = p.alpha * sum + ((p.flags & FLAG_BIAS) != 0u && gc < p.N ? ld_bias(gc) : 0.0);
    // fp16 C: finite values past the format saturate, as every store does
    // (shaders/dtype.glsl); Inf and NaN stay what they are. The tensor
    // store's conversion rounds as the device's OpFConvert does (to
    // nearest even on the devices measured).
    return DTYPE(3) == DT_F16 && abs(v) > 65504.0 && !isinf(v) ? sign(v) * 65504.0 : v;
}

// A bf16 C: element (r, col) stored through typed.glsl (round to nearest
// even, saturating).
float store_bf16(const in uint32_t r, const in uint32_t col, const in float v,
                 const in uint32_t row0, const in uint32_t col0, const in uint32_t offc)
{
    const uint gr = row0 + r, gc = col0 + col;
    if (gr < p.M && gc < p.N)
        st_c(offc + gr * p.ldc + gc, v);
    return v;
}

// The tensor store of the accumulator, converted to C's dtype (fp32 or
// fp16), through layout L at element offset AT (a macro: the clamped and
// unclamped layouts are different types).
#define store_tile(ACCUM, L, AT)                                                           \
    if (DTYPE(3) == DT_F32) {                                                              \
        coopMatStoreTensorNV(ACCUM, c32, AT, L);                                           \
    } else {                                                                               \
        coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> h =         \
            coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(ACCUM); \
        coopMatStoreTensorNV(h, c16, AT, L);                                               \
    }

void main()
{
    const uint z = gl_WorkGroupID.z + p.z_base;
    const uint zo = z / p.batch_inner;
    const uint zi = z % p.batch_inner;
    const uint offa = zo * p.sa_outer + zi * p.sa_inner + MISALIGN(0);
    const uint offb = zo * p.sb_outer + (zi / p.b_div) * p.sb_inner + MISALIGN(1);
    const uint offc = zo * p.sc_outer + zi * p.sc_inner;
    const uint row0 = (gl_WorkGroupID.y + p.y_base) * BM;
    const uint col0 = (gl_WorkGroupID.x + p.x_base) * BN;
    const bool trans_b = (p.flags & FLAG_TRANS_B) != 0u;

    // A [M][K] at lda; B [N][K] (op T) or [K][N] (op N) at ldb.
    tensorViewNV<2, false, 1, 0> transpose = createTensorViewNV(2, false, 1, 0);
    ACC acc = ACC(0.0);
    const bool inside = row0 + BM <= p.M && col0 + BN <= p.N && p.K % BK == 0u &&
                        p.lda % 8u == 0u && p.ldb % 8u == 0u && offa % 8u == 0u &&
                        offb % 8u == 0u;
    if (inside) {
        // Strides and offsets masked to what the test above found them:
        // multiples of 8 elements. The masks change nothing but tell the
        // compiler the rows are 16-byte aligned, so that the driver's
        // staging copies 16 bytes at a time (without them, on an H200, the
        // kernel ran at a tenth of the speed and slower as tiles grew).
        const uint lda = p.lda & ~7u, ldb = p.ldb & ~7u, oa = offa & ~7u, ob = offb & ~7u;
        tensorLayoutNV<2> la = createTensorLayoutNV(2);
        tensorLayoutNV<2> lb = createTensorLayoutNV(2);
        la = setTensorLayoutDimensionNV(la, p.M, p.K);
        la = setTensorLayoutStrideNV(la, lda, 1);
        lb = trans_b ? setTensorLayoutDimensionNV(lb, p.N, p.K)
                     : setTensorLayoutDimensionNV(lb, p.K, p.N);
        lb = setTensorLayoutStrideNV(lb, ldb, 1);
        // UNROLL steps of BK per iteration, unrolled, so that the loads of
        // later steps can be issued during the products of earlier ones;
        // the rest of K one step at a time.
        const uint UNROLL = BK >= 128u ? 2u : 256u / BK;
        const uint k_main = p.K - p.K % (UNROLL * BK);
        uint k0 = 0u;
        for (; k0 < k_main; k0 += UNROLL * BK) {
            [[unroll]] for (uint u = 0u; u < UNROLL; u++) {
                MAT_A ma;
                MAT_B mb;
                const uint k = k0 + u * BK;
                coopMatLoadTensorNV(ma, a16, oa, sliceTensorLayoutNV(la, row0, BM, k, BK));
                if (trans_b)
                    coopMatLoadTensorNV(mb, b16, ob, sliceTensorLayoutNV(lb, col0, BN, k, BK),
                                        transpose);
                else
                    coopMatLoadTensorNV(mb, b16, ob, sliceTensorLayoutNV(lb, k, BK, col0, BN));
                acc = coopMatMulAdd(ma, mb, acc);
            }
        }
        for (; k0 < p.K; k0 += BK) {
            MAT_A ma;
            MAT_B mb;
            coopMatLoadTensorNV(ma, a16, oa, sliceTensorLayoutNV(la, row0, BM, k0, BK));
            if (trans_b)
                coopMatLoadTensorNV(mb, b16, ob, sliceTensorLayoutNV(lb, col0, BN, k0, BK),
                                    transpose);
            else
                coopMatLoadTensorNV(mb, b16, ob, sliceTensorLayoutNV(lb, k0, BK, col0, BN));
            acc = coopMatMulAdd(ma, mb, acc);
        }
    } else {
        // Edge tiles: reads past M, N or K give zeros.
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> la =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lb =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        la = setTensorLayoutDimensionNV(la, p.M, p.K);
        la = setTensorLayoutStrideNV(la, p.lda, 1);
        lb = trans_b ? setTensorLayoutDimensionNV(lb, p.N, p.K)
                     : setTensorLayoutDimensionNV(lb, p.K, p.N);
        lb = setTensorLayoutStrideNV(lb, p.ldb, 1);
        for (uint k0 = 0u; k0 < p.K; k0 += BK) {
            MAT_A ma;
            MAT_B mb;
            coopMatLoadTensorNV(ma, a16, offa, sliceTensorLayoutNV(la, row0, BM, k0, BK));
            if (trans_b)
                coopMatLoadTensorNV(mb, b16, offb, sliceTensorLayoutNV(lb, col0, BN, k0, BK),
                                    transpose);
            else
                coopMatLoadTensorNV(mb, b16, offb, sliceTensorLayoutNV(lb, k0, BK, col0, BN));
            acc = coopMatMulAdd(ma, mb, acc);
        }
    }

    coopMatPerElementNV(acc, acc, epilogue, row0, col0);
    if (DTYPE(3) == DT_BF16) {
        coopMatPerElementNV(acc, acc, store_bf16, row0, col0, offc);
        return;
    }
    const uint at = offc + MISALIGN(3);
    if (row0 + BM <= p.M && col0 + BN <= p.N && p.ldc % 8u == 0u && at % 8u == 0u) {
        // A whole tile at 16-byte aligned rows (as the loads above).
        tensorLayoutNV<2> lc = createTensorLayoutNV(2);
        lc = setTensorLayoutDimensionNV(lc, p.M, p.N);
        lc = setTensorLayoutStrideNV(lc, p.ldc & ~7u, 1);
        store_tile(acc, sliceTensorLayoutNV(lc, row0, BM, col0, BN), at & ~7u);
    } else {
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lc =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        lc = setTensorLayoutDimensionNV(lc, p.M, p.N);
        lc = setTensorLayoutStrideNV(lc, p.ldc, 1);
        store_tile(acc, sliceTensorLayoutNV(lc, row0, BM, col0, BN), at);
    }
}
