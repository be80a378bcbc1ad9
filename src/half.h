/* IEEE 754 half (binary16) and bfloat16 <-> fp32, and the host arrays of a
 * vkmha_dtype. Widening is exact (every 16-bit value is representable in
 * fp32; NaN payloads are kept). Narrowing rounds to nearest even, produces
 * fp16 subnormals (gradual underflow), saturates a finite value that would
 * round beyond the largest finite value to +-that value (fp16 65504, bf16
 * 0x7f7f = 3.3895314e38) instead of making it Inf, keeps +-Inf, and quiets
 * NaN (top mantissa bit set, sign and the high payload bits kept). Integer
 * bit manipulation only, so the result does not depend on the compiler or
 * the FPU; shaders/dtype.glsl does the same, line for line, so the shaders
 * round exactly as the reference backend. No dependencies beyond vkmha.h's
 * types, so tests link it directly. */
#ifndef VKMHA_HALF_H
#define VKMHA_HALF_H

#include <stddef.h>
#include <stdint.h>

float vkmha__half_to_float(uint16_t h);
float vkmha__bf16_to_float(uint16_t h);
uint16_t vkmha__float_to_half(float f);
uint16_t vkmha__float_to_bf16(float f);

/* Bytes per element of a vkmha_dtype: F32 4, U8 1, F16 and BF16 2; 0 for
 * any other value. */
size_t vkmha__dtype_size(uint32_t dtype);

/* n elements of dtype (F32, F16 or BF16) at src to fp32 at dst, and back.
 * src and dst do not overlap; the 16-bit arrays need no alignment. */
void vkmha__to_f32(uint32_t dtype, const void *src, size_t n, float *dst);
void vkmha__from_f32(uint32_t dtype, const float *src, size_t n, void *dst);
/* n elements of dtype `from` at src to dtype `to` at dst, through fp32
 * (exact widening, then the rounding above). */
void vkmha__convert(uint32_t from, const void *src, uint32_t to, void *dst, size_t n);

#endif /* VKMHA_HALF_H */
