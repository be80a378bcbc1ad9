// The push-constant block of shaders/layernorm.comp and layernorm_cpu.comp,
// and its C mirror struct layernorm_push: this file is both. The shaders
// include it after typed.glsl, whose PUSH_BEGIN, PUSH_END, PUSH_MISALIGN and
// PUSH_CONST make it a GLSL block `p` and constants; src/vk_push.h includes it
// with C definitions of the same macros (and `uint` as uint32_t), which make
// it a struct and an enum. One list of members, so the two cannot drift apart.
// Members: 32-bit scalars only (uint, float), which std430 and C lay out
// alike.
PUSH_BEGIN(layernorm_push)
    PUSH_MISALIGN   // vk_dispatch's (shaders/typed.glsl)
    uint rows;
    uint cols;
    float eps;
    uint has_residual;
    uint group_base; // first row (layernorm.comp) or workgroup (layernorm_cpu.comp) of this dispatch
    uint texel;      // layernorm_cpu.comp: 1: bindings 4-7 are y's, the residual's, gamma's, beta's vec4 views
PUSH_END(layernorm_push)
