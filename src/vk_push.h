/* The push-constant blocks of the shaders as C structs, one per op, shared
 * by the op's kernels (GPU and CPU-shaped variants take the same block):
 * each is shaders/<op>_push.glsl, the very file the shaders include, so the
 * C struct and the GLSL block are one list of members. Read by the kernel
 * table (src/vk_kernels.c: each row's push size, checked at every dispatch)
 * and the op's recording file. Each starts with vk_dispatch's two misalign
 * words (PUSH_MISALIGN) and fits VK_PUSH_BYTES in whole words
 * (VK_PUSH_BLOCK). */
#ifndef VKMHA_VK_PUSH_H
#define VKMHA_VK_PUSH_H

#include <stdint.h>

/* The blocks themselves: shaders/<op>_push.glsl, read here as C. uint is
 * uint32_t within them; their constants (FLAG_*, MODE_*) become enums. */
#define uint uint32_t
#define PUSH_BEGIN(name) struct name {
#define PUSH_END(name) }; VK_PUSH_BLOCK(name);
#define PUSH_CONST(name, value) enum { name = value };
#define PUSH_MISALIGN uint32_t misalign[2];

#include "../shaders/matmul_push.glsl"
#include "../shaders/softmax_push.glsl"
#include "../shaders/heads_push.glsl"
#include "../shaders/layernorm_push.glsl"
#include "../shaders/flash_push.glsl"
#include "../shaders/combine_push.glsl"
#include "../shaders/rope_push.glsl"

#undef uint
#undef PUSH_BEGIN
#undef PUSH_END
#undef PUSH_CONST
#undef PUSH_MISALIGN

#endif
