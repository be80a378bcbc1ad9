// RoPE's rotation of one element, where a tensor is read anyway instead of
// by a pass of shaders/rope.comp: the KV cache append's copy rotates the
// new keys as it writes them (shaders/heads.comp, heads_cpu.comp,
// kv_q8.comp built with -DROPE=1), flash.comp the queries as it loads
// them. As rope.comp computes it, in fp32 from the (cos, sin) the host
// computed in double: x0' = x0 cos - x1 sin, x1' = x1 cos + x0 sin; the
// dims past 2 n pass through.
//
// ROPE_ELEMENT(NAME, LD, CS) defines float NAME(base, c, t, n, inter):
// element c of the row at `base` (LD(i) reads element i) rotated with row t
// of the table CS ([rows][n] vec2 (cos, sin)), n pairs per head, pairs
// (2i, 2i + 1) when inter, else (i, i + n).
#define ROPE_ELEMENT(NAME, LD, CS)                                             \
    float NAME(uint base, uint c, uint t, uint n, bool inter)                  \
    {                                                                          \
        const float x = LD(base + c);                                          \
        if (c >= 2u * n)                                                       \
            return x;                                                          \
        const bool second = inter ? (c & 1u) != 0u : c >= n; /* x1 of its pair */ \
        const uint i = inter ? c >> 1 : (second ? c - n : c),                  \
                   other = inter ? c ^ 1u : (second ? c - n : c + n);          \
        const vec2 cs = CS[t * n + i];                                         \
        const float y = LD(base + other);                                      \
        return second ? x * cs.x + y * cs.y : x * cs.x - y * cs.y;             \
    }

// The append's copies (-DROPE=1; after typed.glsl's TYPED_IN of x and
// heads_push.glsl): the table at binding 2, rope_ld_x(src, b, l, c) the
// element c of x's row at src, row l of batch entry b, which takes table
// row rope_t0 + b * rope_tb + l.
#ifdef ROPE
layout(binding = 2) readonly buffer RopeTable { vec2 rope_cs[]; };
ROPE_ELEMENT(rope_x, ld_x, rope_cs)
#define rope_ld_x(src, b, l, c)                                                \
    rope_x(src, c, p.rope_t0 + (b) * p.rope_tb + (l), p.rope_pairs, p.rope_interleaved != 0u)
#endif
