// Reading a Q8 KV cache's rows (include/vkmha.h, vkmha_kv_cache_desc.quant;
// written by shaders/kv_q8.comp): a binding of dtype U8 (slot S) whose rows
// are R = 4 + d rounded up to 4 bytes: bytes 0-1 the fp16 scale s, bytes
// 2-3 zero, the int8 codes from byte 4. KV_Q8_READ(S, NAME), after
// TYPED_IN(.., S, NAME), declares, for the row starting at byte `row` (a
// multiple of 4) and c a multiple of 4:
//   float kv_q8_scale_NAME(uint row)          its scale s
//   vec4  kv_q8_codes_NAME(uint row, uint c, uint n)
//                                             codes c .. c + 3, 0 past n
//   vec4  kv_q8_NAME(uint row, uint c, uint n)
//                                             elements c .. c + 3, s * q
//                                             each (exact in fp32), 0 past n
// one word of codes and the scale's word. Rows start on words: the host
// requires 4-aligned tensors, so the binding's misalignment is whole words.
#define KV_Q8_READ(S, NAME)                                                        \
    float kv_q8_scale_##NAME(uint row)                                             \
    {                                                                              \
        return f16_bits_to_f32(NAME##_w[(row + MISALIGN_BYTES(S)) >> 2] & 0xffffu); \
    }                                                                              \
    vec4 kv_q8_codes_##NAME(uint row, uint c, uint n)                              \
    {                                                                              \
        const uint w = NAME##_w[((row + MISALIGN_BYTES(S)) >> 2) + 1u + (c >> 2)]; \
        const vec4 q = i8x4_to_vec4(w);                                            \
        return vec4(q.x, c + 1u < n ? q.y : 0.0, c + 2u < n ? q.z : 0.0,           \
                    c + 3u < n ? q.w : 0.0);                                       \
    }                                                                              \
    vec4 kv_q8_##NAME(uint row, uint c, uint n)                                    \
    {                                                                              \
        const vec4 v = kv_q8_scale_##NAME(row) * kv_q8_codes_##NAME(row, c, n);    \
        return vec4(v.x, c + 1u < n ? v.y : 0.0, c + 2u < n ? v.z : 0.0,           \
                    c + 3u < n ? v.w : 0.0);                                       \
    }
