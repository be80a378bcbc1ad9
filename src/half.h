/* IEEE 754 half (binary16) and bfloat16 to fp32, exactly (every 16-bit
 * value is representable in fp32; NaN payloads are kept). No dependencies, so
 * tests link it directly. */
#ifndef VKMHA_HALF_H
#define VKMHA_HALF_H

#include <stddef.h>
#include <stdint.h>

float vkmha__half_to_float(uint16_t h);
float vkmha__bf16_to_float(uint16_t h);
uint16_t vkmha__float_to_half(float f);
uint16_t vkmha__float_to_bf16(float f);
size_t vkmha__dtype_size(uint32_t dtype);
void vkmha__to_f32(uint32_t dtype, const void *src, size_t n, float *dst);
void vkmha__from_f32(uint32_t dtype, const float *src, size_t n, void *dst);

#endif /* VKMHA_HALF_H */
