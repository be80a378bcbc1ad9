/* Private to src/split.c and src/split_ops.c: a part of a call too large
 * for one binding, and the helpers both use. */
#ifndef VKMHA_SPLIT_H
#define VKMHA_SPLIT_H

#include "internal.h"

/* A part of a [batch][heads][len_q][...] problem: nb batch entries from b0
 * (all heads, all rows), or nh heads from h0 of entry b0 (all rows), or ni
 * query rows from i0 of head h0 of entry b0. */
typedef struct part {
    uint32_t b0, nb, h0, nh, i0, ni;
} part;

/* The most bytes one array of a call may have on ctx's device; 0: no limit.
 * A tensor's part is bound from up to 255 bytes below it (descriptor
 * offsets are multiples of the alignment, at most 256). */
uint64_t vkmha__split_limit(const vkmha_context *ctx, const vkmha_run *run);
/* Argument a moved `bytes` on: a host array's pointer, a tensor's `at`. */
vkmha_arg vkmha__arg_at(const vkmha_arg *a, uint64_t bytes);
/* check_part for a call's arguments (names[i] of a[i], bytes[i] of each). */
vkmha_status vkmha__check_parts(vkmha_context *ctx, const char *const names[],
                                const vkmha_arg *const a[], const uint64_t bytes[], int n);
/* check_part for the mask tensors of part p (am: its mask, part_mask's). */
vkmha_status vkmha__check_mask_parts(vkmha_context *ctx, const vkmha_mask_arg *am,
                                     uint32_t len_k, const part *p);
/* The largest of a part's masks, in bytes. */
uint64_t vkmha__mask_part_bytes(const mask_r *m, uint32_t len_k, const part *p);
/* The mask of a part: its arrays moved to its first element (tensors by
 * `at`), the bias's broadcast kept, the causal mask moved with its first
 * row. */
vkmha_mask_arg vkmha__part_mask(const vkmha_mask_arg *ma, uint32_t len_q, uint32_t len_k,
                                const part *p);

#endif
