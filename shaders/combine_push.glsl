// The push-constant block of shaders/flash_combine.comp (both variants), and
// its C mirror struct combine_push: this file is both. The shaders include it
// after typed.glsl, whose PUSH_BEGIN, PUSH_END, PUSH_MISALIGN and PUSH_CONST
// make it a GLSL block `p` and constants; src/vk_push.h includes it with C
// definitions of the same macros (and `uint` as uint32_t), which make it a
// struct and an enum. One list of members, so the two cannot drift apart.
// Members: 32-bit scalars only (uint, float), which std430 and C lay out
// alike.
PUSH_BEGIN(combine_push)
    PUSH_MISALIGN   // vk_dispatch's (shaders/typed.glsl)
    uint rows; // batch * heads * len_q
    uint len_q;
    uint heads;
    uint d_v;
    uint splits;
    uint o_sb, o_sh, o_ld; // element strides of out: batch entry, head, row
    uint group_base; // first workgroup of this dispatch
PUSH_END(combine_push)
