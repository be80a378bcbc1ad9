// RoPE on a row on its way into a KV cache: the append's copy
// (shaders/heads.comp, heads_cpu.comp, kv_q8.comp built with -DROPE=1)
// rotates the new keys as it writes them, so no pass of shaders/rope.comp
// runs over them. Element c of the row at x's element src (table row t)
// as rope.comp computes it, in fp32 from the (cos, sin) the host computed
// in double: x0' = x0 cos - x1 sin, x1' = x1 cos + x0 sin; the dims past
// 2 * rope_pairs pass through. Include after typed.glsl's TYPED_IN of x
// and heads_push.glsl; binding 2 is the table.

#ifdef ROPE
layout(binding = 2) readonly buffer RopeTable { vec2 rope_cs[]; }; // (cos, sin)

float rope_ld_x(uint src, uint t, uint c)
{
    const float x = ld_x(src + c);
    const uint n = p.rope_pairs;
    if (c >= 2u * n)
        return x;
    const bool inter = p.rope_interleaved != 0u;
    const bool second = inter ? (c & 1u) != 0u : c >= n;       // x1 of its pair
    const uint i = inter ? c >> 1 : (second ? c - n : c),       // the pair
               other = inter ? c ^ 1u : (second ? c - n : c + n);
    const vec2 cs = rope_cs[t * n + i];
    const float y = ld_x(src + other);
    return second ? x * cs.x + y * cs.y : x * cs.x - y * cs.y;
}
#endif
