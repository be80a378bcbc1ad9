// Typed storage. A binding that holds activations or weights is declared
// with TYPED_IN / TYPED_OUT / TYPED_IO (binding B, dtype slot S, NAME), which
// give it, in fp32 whatever its dtype:
//   float ld_NAME(uint i)           element i
//   vec4  ld4_NAME(uint i4)         elements 4 i4 .. 4 i4 + 3 (host-aligned)
//   void  st_NAME(uint i, float v)  (OUT, IO)
//   void  st4_NAME(uint i4, vec4 v) (OUT, IO)
// The dtype of slot S (0 .. 7) is 4 bits of the specialization constant
// DTYPES (constant_id 16), set per dispatch by the host (VK_DT in
// src/vk_base.h): the vkmha_dtype values 0 F32, 1 U8, 2 F16, 3 BF16, and
// element types with no public dtype yet, DT_I8 (two's complement) and
// DT_U4 (4-bit, two per byte, the low nibble first), which read as their
// integer values and store rounded to nearest even and clamped to their
// range (NaN stores 0). The slot is the index of the buffer in the host's
// dispatch (also for bindings that repeat a buffer). A pipeline is
// specialized per dtype combination, so the other branches are folded away
// and an all-F32 pipeline is the plain fp32 shader. Elements narrower than
// 16 bits are read from 32-bit words and stored with atomicAnd / atomicOr
// into their bits (the neighbours kept), in both build variants.
//
// NATIVE16 (a build variant of every shader): 16-bit elements are read and
// written as float16_t / uint16_t, which needs storageBuffer16BitAccess.
// Without it two 16-bit elements share a uint: reads pick their half, and a
// single-element store replaces its half with atomicAnd / atomicOr, so that
// the neighbour (written by another invocation, or the caller's data
// between rows) is kept; st4 writes whole words.
//
// Stores round to nearest even and saturate (shaders/dtype.glsl).
//
// Misaligned tensors: a descriptor's offset must be a multiple of the
// device's minStorageBufferOffsetAlignment (at most 256), so a tensor that
// starts between two such offsets is bound from the one below it, and the
// bytes it starts past it are byte S % 4 of word S / 4 of the push constant
// `misalign` (the first member of every push block, declared by
// PUSH_MISALIGN: the host fills it for every dispatch). Element accesses add
// them; a vec4 access whose elements are not 4-aligned in the binding reads
// or writes the four elements one by one.
// Include this first: it enables extensions.
#if NATIVE16
#extension GL_EXT_shader_16bit_storage : require
#endif
#extension GL_EXT_samplerless_texture_functions : require

#include "dtype.glsl"

layout(constant_id = 16) const uint DTYPES = 0u;
// The pipeline's variant bits, set by the host (VK_VARIANT_* in
// src/vk_base.h): bit 0 a misaligned buffer (below); bits 1 and 2 the
// matmul's ranges of k (shaders/matmul.comp); bit 3 fp16 texels widened
// with integer operations (texel16, below); bit 4 a quantized B with op N
// (shaders/matmul_coop.comp).
layout(constant_id = 17) const uint VARIANT = 0u;
#define DT_F32 0u
#define DT_U8 1u
#define DT_F16 2u
#define DT_BF16 3u
#define DT_I8 4u
#define DT_U4 5u
#define DTYPE(S) ((DTYPES >> (4u * (S))) & 15u)
// log2 of an element's bits, and whether it is narrower than 16 bits (read
// and stored through words). Functions, not specialization-constant
// expressions (glslang emits a nested select of spec constants that
// references an undefined id), folded all the same once specialized.
uint dt_log2_bits(uint dt)
{
    return dt == DT_F32 ? 5u : (dt == DT_F16 || dt == DT_BF16) ? 4u : dt == DT_U4 ? 2u : 3u;
}
bool dt_narrow(uint dt)
{
    return dt == DT_U8 || dt == DT_I8 || dt == DT_U4;
}

// The push blocks (shaders/<op>_push.glsl, which src/vk_push.h also reads
// as C): PUSH_BEGIN / PUSH_END around the members make the block `p`,
// PUSH_CONST a constant, and PUSH_MISALIGN is the first member of every
// block.
#define PUSH_BEGIN(name) layout(push_constant) uniform Push {
#define PUSH_END(name) } p;
#define PUSH_CONST(name, value) const uint name = value;
#define PUSH_MISALIGN uvec2 misalign;
// Bytes binding slot S starts past its descriptor's offset. Only pipelines
// for dispatches with a misaligned buffer (bit 0 of VARIANT, set by the
// host) read the words: on CPU devices the reads and the element-by-element
// fallbacks below cost the others up to 2x.
#define MISALIGNED ((VARIANT & 1u) != 0u)
#define MISALIGN_BYTES(S)                                                          \
    (MISALIGNED ? (p.misalign[(S) >> 2u] >> (8u * ((S) & 3u))) & 0xffu : 0u)
// The same in elements of its dtype (whole bytes: a 4-bit tensor starts on
// a byte).
#define MISALIGN(S) ((MISALIGN_BYTES(S) << 3u) >> dt_log2_bits(DTYPE(S)))

float dt_decode(uint dt, uint h)
{
    return dt == DT_F16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
}

uint dt_encode(uint dt, float v)
{
    return dt == DT_F16 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v);
}

// A narrow element's bits (dt U8, I8 or U4) and value.
uint dt_narrow_bits(uint dt)
{
    return dt == DT_U4 ? 4u : 8u;
}

float dt_narrow_decode(uint dt, uint e)
{
    return dt == DT_I8 ? float(int(e << 24) >> 24) : float(e);
}

uint dt_narrow_encode(uint dt, float v)
{
    const float lo = dt == DT_I8 ? -128.0 : 0.0, hi = dt == DT_I8 ? 127.0 : dt == DT_U4 ? 15.0 : 255.0;
    const float r = isnan(v) ? 0.0 : clamp(roundEven(v), lo, hi);
    return uint(int(r)) & ((1u << dt_narrow_bits(dt)) - 1u);
}

// The 16-bit half of a binding, per build variant: declarations, and
// ld16 / ld16x4 / st16 / st16x4 for dtype dt (F16 or BF16).
#if NATIVE16

#define TYPED_DECL16_(B, NAME, Q)                                                  \
    layout(binding = B) Q buffer NAME##_F16 { float16_t NAME##_h[]; };             \
    layout(binding = B) Q buffer NAME##_F16x4 { f16vec4 NAME##_h4[]; };            \
    layout(binding = B) Q buffer NAME##_U16 { uint16_t NAME##_s[]; };              \
    layout(binding = B) Q buffer NAME##_U16x4 { u16vec4 NAME##_s4[]; };

#define TYPED_LD16_(NAME)                                                          \
    float ld16_##NAME(uint dt, uint i)                                             \
    {                                                                              \
        return dt == DT_F16 ? float(NAME##_h[i]) : bf16_bits_to_f32(uint(NAME##_s[i])); \
    }                                                                              \
    vec4 ld16x4_##NAME(uint dt, uint i4)                                           \
    {                                                                              \
        return dt == DT_F16 ? vec4(NAME##_h4[i4])                                  \
                            : uintBitsToFloat(uvec4(NAME##_s4[i4]) << 16);         \
    }

#define TYPED_ST16_(NAME)                                                          \
    void st16_##NAME(uint dt, uint i, float v)                                     \
    {                                                                              \
        NAME##_s[i] = uint16_t(dt_encode(dt, v));                                  \
    }                                                                              \
    void st16x4_##NAME(uint dt, uint i4, vec4 v)                                   \
    {                                                                              \
        NAME##_s4[i4] = u16vec4(uvec4(dt_encode(dt, v.x), dt_encode(dt, v.y),      \
                                      dt_encode(dt, v.z), dt_encode(dt, v.w)));    \
    }

#else

#define TYPED_DECL16_(B, NAME, Q)                                                  \
    layout(binding = B) Q buffer NAME##_U32 { uint NAME##_u[]; };                  \
    layout(binding = B) Q buffer NAME##_U32x2 { uvec2 NAME##_u2[]; };

#define TYPED_LD16_(NAME)                                                          \
    float ld16_##NAME(uint dt, uint i)                                             \
    {                                                                              \
        const uint w = NAME##_u[i >> 1];                                           \
        return dt_decode(dt, (i & 1u) != 0u ? w >> 16 : w & 0xffffu);              \
    }                                                                              \
    vec4 ld16x4_##NAME(uint dt, uint i4)                                           \
    {                                                                              \
        const uvec2 w = NAME##_u2[i4];                                             \
        return vec4(dt_decode(dt, w.x & 0xffffu), dt_decode(dt, w.x >> 16),        \
                    dt_decode(dt, w.y & 0xffffu), dt_decode(dt, w.y >> 16));       \
    }

#define TYPED_ST16_(NAME)                                                          \
    void st16_##NAME(uint dt, uint i, float v)                                     \
    {                                                                              \
        const uint sh = (i & 1u) * 16u;                                            \
        atomicAnd(NAME##_u[i >> 1], ~(0xffffu << sh));                             \
        atomicOr(NAME##_u[i >> 1], dt_encode(dt, v) << sh);                        \
    }                                                                              \
    void st16x4_##NAME(uint dt, uint i4, vec4 v)                                   \
    {                                                                              \
        NAME##_u2[i4] = uvec2(dt_encode(dt, v.x) | (dt_encode(dt, v.y) << 16),     \
                              dt_encode(dt, v.z) | (dt_encode(dt, v.w) << 16));    \
    }

#endif

// Narrow elements (U8, I8, U4) in 32-bit words, in both variants: lda / sta
// for element i of dtype dt.
#define TYPED_DECLN_(B, NAME, Q)                                                   \
    layout(binding = B) Q buffer NAME##_W32 { uint NAME##_w[]; };

#define TYPED_LDN_(NAME)                                                           \
    float ldn_##NAME(uint dt, uint i)                                              \
    {                                                                              \
        const uint bits = dt_narrow_bits(dt), per = 32u / bits;                    \
        const uint w = NAME##_w[i / per];                                          \
        return dt_narrow_decode(dt, (w >> (bits * (i % per))) & ((1u << bits) - 1u)); \
    }

#define TYPED_STN_(NAME)                                                           \
    void stn_##NAME(uint dt, uint i, float v)                                      \
    {                                                                              \
        const uint bits = dt_narrow_bits(dt), per = 32u / bits;                    \
        const uint sh = bits * (i % per);                                          \
        atomicAnd(NAME##_w[i / per], ~(((1u << bits) - 1u) << sh));                \
        atomicOr(NAME##_w[i / per], dt_narrow_encode(dt, v) << sh);                \
    }

// Both variants: fp32 as float / vec4, 16-bit and narrow elements through
// the functions above; DTYPE(S) is a specialization constant, so only one
// branch survives.
#define TYPED_DECL_(B, NAME, Q)                                                    \
    layout(binding = B) Q buffer NAME##_F32 { float NAME##_f[]; };                 \
    layout(binding = B) Q buffer NAME##_F32x4 { vec4 NAME##_f4[]; };               \
    TYPED_DECL16_(B, NAME, Q)                                                      \
    TYPED_DECLN_(B, NAME, Q)

#define TYPED_LD_(S, NAME)                                                         \
    TYPED_LD16_(NAME)                                                              \
    TYPED_LDN_(NAME)                                                               \
    float ld_##NAME(uint i)                                                        \
    {                                                                              \
        i += MISALIGN(S);                                                          \
        return DTYPE(S) == DT_F32      ? NAME##_f[i]                               \
               : dt_narrow(DTYPE(S)) ? ldn_##NAME(DTYPE(S), i)                     \
                                     : ld16_##NAME(DTYPE(S), i);                   \
    }                                                                              \
    vec4 ld4_##NAME(uint i4)                                                       \
    {                                                                              \
        const uint m = MISALIGN(S);                                                \
        if ((m & 3u) != 0u || dt_narrow(DTYPE(S)))                                 \
            return vec4(ld_##NAME(4u * i4), ld_##NAME(4u * i4 + 1u),               \
                        ld_##NAME(4u * i4 + 2u), ld_##NAME(4u * i4 + 3u));         \
        i4 += m >> 2;                                                              \
        return DTYPE(S) == DT_F32 ? NAME##_f4[i4] : ld16x4_##NAME(DTYPE(S), i4);   \
    }

#define TYPED_ST_(S, NAME)                                                         \
    TYPED_ST16_(NAME)                                                              \
    TYPED_STN_(NAME)                                                               \
    void st_##NAME(uint i, float v)                                                \
    {                                                                              \
        i += MISALIGN(S);                                                          \
        if (DTYPE(S) == DT_F32)                                                    \
            NAME##_f[i] = v;                                                       \
        else if (dt_narrow(DTYPE(S)))                                              \
            stn_##NAME(DTYPE(S), i, v);                                            \
        else                                                                       \
            st16_##NAME(DTYPE(S), i, v);                                           \
    }                                                                              \
    void st4_##NAME(uint i4, vec4 v)                                               \
    {                                                                              \
        const uint m = MISALIGN(S);                                                \
        if ((m & 3u) != 0u || dt_narrow(DTYPE(S))) {                               \
            st_##NAME(4u * i4, v.x);                                               \
            st_##NAME(4u * i4 + 1u, v.y);                                          \
            st_##NAME(4u * i4 + 2u, v.z);                                          \
            st_##NAME(4u * i4 + 3u, v.w);                                          \
            return;                                                                \
        }                                                                          \
        i4 += m >> 2;                                                              \
        if (DTYPE(S) == DT_F32)                                                    \
            NAME##_f4[i4] = v;                                                     \
        else                                                                       \
            st16x4_##NAME(DTYPE(S), i4, v);                                        \
    }

// Texel bindings of the CPU-shaped kernels: 4 elements per texel, read as
// one load for all SIMD lanes. Uniform texel buffers declared as
// textureBuffer and read with texelFetch without a sampler
// (GL_EXT_samplerless_texture_functions): an OpTypeImage of Dim Buffer
// fetched directly, valid in every SPIR-V version (a samplerBuffer is an
// OpTypeSampledImage of Dim Buffer, which SPIR-V 1.6 removed and which a
// validator for a Vulkan 1.3 device reports). fp32 data through
// R32G32B32A32_SFLOAT views (textureBuffer). 16-bit data (fp16 or bf16, of
// dtype slot S) in the TEXEL_U16 build variant: utextureBuffer over
// R32G32_UINT views (two plain
// words per texel: on lavapipe a 16-bit texel format costs a per-element
// conversion in the fetch), widened here: fp16 with unpackHalf2x16, bf16 by
// shifts. (Other shaders read fp16 texels through R16G16B16A16_SFLOAT
// views.) Declare with `uniform TEXEL_BUFFER name;`, read with
// TEXEL_FETCH(name, index, S).
#if defined(TEXEL_U16) && TEXEL_U16
#define TEXEL_BUFFER utextureBuffer
#define TEXEL_FETCH(t, i, S) texel16(texelFetch(t, int(i)).xy, DTYPE(S))
vec4 texel16(uvec2 w, uint dt)
{
    // VK_VARIANT_EXACT_F16: exact, and no unpackHalf2x16
    if (dt == DT_F16 && (VARIANT & 8u) != 0u)
        return vec4(f16_bits_to_f32(w.x), f16_bits_to_f32(w.x >> 16), f16_bits_to_f32(w.y),
                    f16_bits_to_f32(w.y >> 16));
    if (dt == DT_F16)
        return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    return uintBitsToFloat(uvec4(w.x << 16, w.x & 0xffff0000u, w.y << 16, w.y & 0xffff0000u));
}
#else
#define TEXEL_BUFFER textureBuffer
#define TEXEL_FETCH(t, i, S) texelFetch(t, int(i))
#endif

// ld4h_NAME(i4) (declared by TYPED_LD4H(S, NAME) after TYPED_IN, in shaders
// that enable float16 arithmetic types): elements 4 i4 .. 4 i4 + 3 as an
// f16vec4, an F16 binding's bits copied unconverted where the binding is
// 4-aligned, anything else through ld4 (exact for F16 either way).
#if NATIVE16
#define TYPED_RAW4H_(NAME, i4) NAME##_h4[i4]
#else
#define TYPED_RAW4H_(NAME, i4)                                                     \
    f16vec4(unpackFloat2x16(NAME##_u2[i4].x), unpackFloat2x16(NAME##_u2[i4].y))
#endif
#define TYPED_LD4H(S, NAME)                                                        \
    f16vec4 ld4h_##NAME(uint i4)                                                   \
    {                                                                              \
        const uint m = MISALIGN(S);                                                \
        if (DTYPE(S) == DT_F16 && (m & 3u) == 0u)                                  \
            return TYPED_RAW4H_(NAME, i4 + (m >> 2u));                             \
        return f16vec4(ld4_##NAME(i4));                                            \
    }

#define TYPED_IN(B, S, NAME) TYPED_DECL_(B, NAME, readonly) TYPED_LD_(S, NAME)
#define TYPED_OUT(B, S, NAME) TYPED_DECL_(B, NAME, ) TYPED_ST_(S, NAME)
#define TYPED_IO(B, S, NAME) TYPED_DECL_(B, NAME, ) TYPED_LD_(S, NAME) TYPED_ST_(S, NAME)
