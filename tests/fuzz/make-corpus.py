#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_api (tests/fuzz/corpus/): a few valid and a
few invalid calls of every entry point, in the byte format that fuzz_api.c
reads (function, pointer flags, then the fields in the harness's order; a
size byte below 64 is its own value). libFuzzer grows the corpus from here;
the files are kept small on purpose."""
import os

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
os.makedirs(here, exist_ok=True)

EDGE = {"2^16-1": 0x80 | 6, "2^16": 0x80 | 7, "2^31-1": 0x80 | 8, "2^32-1": 0x80 | 11}
ALL = 0x0F  # the four main pointers present, desc present
seeds = {
    # matmul: batch m n k op alpha lda ldb ldc stride_a stride_b stride_c,
    # dtype, quantized b (bit 0; type (b >> 1) % 5, group size [32, 64, 128,
    # 48][b >> 4 & 3]), array seeds
    "matmul_nn": [0, ALL, 2, 3, 5, 4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 7, 9, 11, 13],
    "matmul_nt_bias": [0, ALL, 1, 7, 3, 5, 1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4],
    "matmul_broadcast": [0, ALL, 3, 2, 4, 4, 0, 1, 6, 0, 0, 3, 3, 0, 0, 0, 5, 5, 5, 5],
    "matmul_strides": [0, ALL, 2, 2, 2, 3, 0, 1, 5, 4, 3, 4 | (12 << 3), 0, 4 | (8 << 3), 0, 0,
                       1, 1, 1, 1],
    "matmul_overflow": [0, ALL, EDGE["2^32-1"], EDGE["2^32-1"], 2, EDGE["2^32-1"], 0, 1, 0, 0, 0,
                        0, 0, 0, 0, 0],
    "matmul_nan": [0, ALL, 1, 2, 2, 2, 0, 254, 0, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff, 1, 1],
    "matmul_null_b": [0, 0x0D, 1, 2, 2, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1],
    # quantized b: q4 g32 op T (k 256), q4z g64 op T in f16, q8 g128 op N (n 256)
    "matmul_q4": [0, ALL, 1, 3, 5, 0x80 | 5, 1, 1, 0, 0, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4],
    "matmul_q4z_f16": [0, ALL, 1, 2, 3, 0x80 | 5, 1, 1, 0, 0, 0, 0, 0, 0, 4, 7 | (1 << 4),
                       1, 2, 3, 4],
    "matmul_q8_n": [0, ALL, 1, 2, 0x80 | 5, 7, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3 | (2 << 4),
                    1, 2, 3, 4],
    # softmax: batch heads len_q len_k scale, mask byte (+fields), arrays
    "softmax": [1, 0x03, 2, 2, 3, 5, 1, 0, 3, 4],
    "softmax_inplace": [1, 0x07, 1, 1, 4, 9, 3, 0, 6],
    "softmax_masks": [1, 0x03, 2, 2, 3, 5, 1, 1 | (15 << 1), 0x07, 0, 0, 0, 1, 2, 3, 4, 5],
    "softmax_bad_mask": [1, 0x03, 2, 1, 3, 3, 1, 1 | (1 << 1), 0x02, 0, 0, 0, 1, 2, 3],
    # the score rules (rules byte: kinds << 4 bits, 0x10 a window byte, 0x40 a cap index):
    # causal offset 2, window 3, ALiBi and sinks arrays, cap 2.5
    "softmax_rules": [1, 0x03, 2, 3, 3, 5, 1, 0x49, 0x18, 0, 0, 2, 0x0F | 0x10 | 0x40, 3, 1,
                      1, 2, 3, 4],
    "softmax_overflow": [1, 0x03, EDGE["2^32-1"], EDGE["2^32-1"], EDGE["2^32-1"], EDGE["2^32-1"], 1, 0],
    # split / merge heads: batch len heads head_dim, arrays
    "split": [2, 0x03, 2, 3, 2, 4, 1, 2],
    "merge": [3, 0x03, 1, 5, 3, 2, 3, 4],
    "merge_overlap_null": [3, 0x01, 1, 5, 3, 2, 3],
    "split_big": [2, 0x03, EDGE["2^16"], EDGE["2^16"], 1, 1, 1, 1],
    # attention: batch heads kv_heads len_q len_k d_k d_v scale path kv_splits, mask, arrays
    "attention": [4, 0x2F, 2, 4, 2, 3, 5, 4, 6, 0, 0, 0, 0, 1, 2, 3, 4, 5],
    "attention_unfused": [4, 0x2F, 1, 2, 0, 4, 7, 3, 3, 0, 2, 0, 0, 1, 2, 3, 4, 5],
    "attention_splitk": [4, 0x0F, 1, 2, 1, 1, 15, 4, 4, 0, 1, 3, 0, 1, 2, 3, 4],
    "attention_masks": [4, 0x2F, 2, 2, 2, 3, 3, 2, 2, 0, 0, 0, 1 | (13 << 1), 0x07, 0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8],
    "attention_rules": [4, 0x2F, 2, 4, 2, 3, 6, 4, 4, 0, 0, 0, 0x49, 0x19, 0, 0, 3,
                        0x0F | 0x10 | 0x40, 2, 2, 1, 2, 3, 4, 5, 6, 7, 8],
    "attention_bad_window": [4, 0x2F, 1, 2, 0, 2, 3, 4, 4, 0, 0, 0, 0x01, 0, 0, 0, 0x01, 1, 2, 3,
                             4, 5],
    "attention_gqa_bad": [4, 0x0F, 1, 3, 2, 2, 2, 2, 2, 0, 0, 0, 0, 1, 2, 3, 4],
    "attention_overflow": [4, 0x2F, 1, 1, 1, EDGE["2^32-1"], EDGE["2^32-1"], 1, 1, 0, 0, 0, 0, 1, 2, 3, 4, 5],
    # layer: d_model n_head n_kv_head d_k d_v kdim vdim scale norm_eps opt, weights,
    #        then forwards: batch len_q len_k path kv_splits io_ptrs mask arrays
    "layer": [5, 0x0F, 8, 2, 0, 0, 0, 0, 0, 0, 0, 0x0F, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
              2, 3, 0, 0, 0, 0x0F | 0x40, 0, 1, 2],
    # a KV cache (opt 0x40: batch capacity dtype quant, reorder's src, op),
    # Q8 (quant 0x81), then a forward appending to it
    "layer_q8_cache": [5, 0x0F, 8, 2, 0, 0, 0, 0, 0, 0, 0, 0x0F | 0x40, 1, 2, 3, 4, 5, 6, 7, 8,
                       9, 10, 2, 8, 0, 0x81, 1, 0, 1, 0, 1, 0, 1, 0, 4,
                       2, 3, 0, 0, 0, 0x0F | 0x40, 0, 1, 2],
    # RoPE (opt 0x10: rope_dims theta scale layout), then a forward with
    # positions (the byte after io_ptrs)
    "layer_rope": [5, 0x0F, 8, 2, 0, 0, 0, 0, 0, 0, 0, 0x0F | 0x10, 2, 0, 0, 0, 1, 2, 3, 4, 5,
                   6, 7, 8, 9, 10, 2, 3, 0, 0, 0, 0x0F | 0x40, 1, 0, 1, 2, 3, 4],
    # a mixed batch: a cache of 3 entries (opt 0x40), then forwards of
    # packed rows with entry_tokens (the byte after io_ptrs: 1 present, 2
    # made to add up; the counts), 4 + 1 + 1 then 1 each, causal
    "layer_mixed": [5, 0x0F, 8, 2, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 1, 2, 3, 4,
                    3, 12, 0, 0, 0, 1, 2, 0, 1, 2, 0, 0, 0,
                    3, 6, 0, 0, 0, 0, 0x0F, 3, 4, 1, 1, 0, 0x09, 0, 0, 0, 0, 1, 2, 3, 4,
                    3, 3, 0, 0, 0, 0, 0x0F, 3, 1, 1, 1, 0, 0x09, 0, 0, 0, 0, 5, 6, 7, 8],
    "layer_cross": [5, 0x0F, 8, 4, 2, 0, 0, 5, 6, 0, 0, 0x03, 1, 2, 3, 4, 5, 6, 7, 8,
                    1, 2, 4, 2, 0, 0x2F, 1 | (5 << 1), 0x01, 0, 0, 0, 9, 1, 2, 3, 4, 5],
    "layer_bad_heads": [5, 0x0F, 10, 4, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4],
    "layer_null_out": [5, 0x2F, 8, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4],
    "layer_rows": [5, 0x0F, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4,
                   EDGE["2^32-1"], EDGE["2^32-1"], 0, 0, 0, 0x0F, 0, 1, 2, 3, 4],
    # context: flags byte, debug fields, status value
    "context": [6, 0, 0x08, 1, 2, 3, 0, 0, 1, 1, 0, 0, 0, 5],
    "context_bad": [6, 0, 0x05, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff],
    "context_null_out": [6, 0, 0x10 | 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    "null_handles": [7, 0],
}
for name, data in seeds.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(bytes(data))
print(f"{len(seeds)} seeds in {here}")
