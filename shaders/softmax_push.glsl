// The push-constant block of shaders/softmax.comp and softmax_cpu.comp, and
// its C mirror struct softmax_push: this file is both. The shaders include it
// after typed.glsl, whose PUSH_BEGIN, PUSH_END, PUSH_MISALIGN and PUSH_CONST
// make it a GLSL block `p` and constants; src/vk_push.h includes it with C
// definitions of the same macros (and `uint` as uint32_t), which make it a
// struct and an enum. One list of members, so the two cannot drift apart.
// Members: 32-bit scalars only (uint, float), which std430 and C lay out
// alike.
PUSH_BEGIN(softmax_push)
    PUSH_MISALIGN   // vk_dispatch's (shaders/typed.glsl)
    uint rows;    // batch * heads * len_q
    uint len_q;
    uint len_k;
    uint heads;
    uint flags;   // MASK_* of mask.glsl
    float scale;
    uint bias_sb; // bias stride per batch entry, elements (0: broadcast)
    uint bias_sh; // bias stride per head, elements (0: broadcast)
    uint group_base; // first row (softmax.comp) or workgroup (softmax_cpu.comp) of this dispatch
    uint texel;      // softmax_cpu.comp: 1: bindings 7, 8 are the input's, the bias's vec4 views
    uint causal_offset; // see mask.glsl's mask_hides
    uint window;        // MASK_WINDOW's (vkmha_mask.window)
    float softcap;      // MASK_SOFTCAP's
PUSH_END(softmax_push)
