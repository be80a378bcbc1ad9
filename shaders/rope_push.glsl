// The push-constant block of shaders/rope.comp, and its C mirror struct
// rope_push: this file is both (see shaders/flash_push.glsl). Members:
// 32-bit scalars only (uint, float), which std430 and C lay out alike.
PUSH_BEGIN(rope_push)
    PUSH_MISALIGN    // vk_dispatch's (shaders/typed.glsl)
    uint total;      // rows * heads * pairs: one invocation per pair
    uint pairs;      // rope_dims / 2
    uint heads;
    uint head_dim;   // d_k: the heads' stride within a row
    uint ld;         // the rows' stride (elements)
    uint interleaved; // 1: pairs (2i, 2i + 1); 0: (i, i + pairs)
    uint table0;     // the first row's (cos, sin) pairs in the table
    uint group_base; // first workgroup of this dispatch
PUSH_END(rope_push)
