/* IEEE 754 half (binary16) and bfloat16 to fp32, exactly (every 16-bit
 * value is representable in fp32; NaN payloads are kept). No dependencies, so
 * tests link it directly. */
#ifndef VKMHA_HALF_H
#define VKMHA_HALF_H

#include <stdint.h>

float vkmha__half_to_float(uint16_t h);
float vkmha__bf16_to_float(uint16_t h);

#endif /* VKMHA_HALF_H */
