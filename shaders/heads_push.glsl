// The push-constant block of shaders/heads.comp and heads_cpu.comp, and its C
// mirror struct heads_push: this file is both. The shaders include it after
// typed.glsl, whose PUSH_BEGIN, PUSH_END, PUSH_MISALIGN and PUSH_CONST make it
// a GLSL block `p` and constants; src/vk_push.h includes it with C definitions
// of the same macros (and `uint` as uint32_t), which make it a struct and an
// enum. One list of members, so the two cannot drift apart. Members: 32-bit
// scalars only (uint, float), which std430 and C lay out alike.
PUSH_BEGIN(heads_push)
    PUSH_MISALIGN   // vk_dispatch's (shaders/typed.glsl)
    uint total; // batch * len * heads * head_dim
    uint len;
    uint heads;
    uint head_dim;
    uint split; // 1: split, 0: merge
    uint group_base; // first workgroup of this dispatch
    uint texel;      // heads_cpu.comp: 1: binding 3 is x's vec4 view; vscan.comp: 1: by runs
    uint x_sb, x_sh, x_sl; // x's element strides per batch entry, head, row
    uint y_sb, y_sh, y_sl; // y's
    // The variants built with -DROPE=1 (shaders/rope.glsl): RoPE on x's
    // rows on their way into a KV cache, pairs per head (0: none), the
    // pair layout, and the (cos, sin) table's row of x's (b, l): rope_t0 +
    // b * rope_tb + l.
    uint rope_pairs;
    uint rope_interleaved; // 1: pairs (2i, 2i + 1); 0: (i, i + rope_pairs)
    uint rope_t0, rope_tb;
PUSH_END(heads_push)
// shaders/vscan.comp by runs: the vec4s one invocation reads.
PUSH_CONST(VSCAN_VEC4S, 256u)
