#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_safetensors (tests/fuzz/corpus_safetensors/):
small valid safetensors files of each layout and dtype (under 512 bytes, but
a quantized layer's under 4096: the fuzz session's input limit, FUZZ_MAX_LEN in
tests/fuzz/meson.build) and a few broken ones. Plain Python, no numpy."""
import json
import os
import struct

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_safetensors")
os.makedirs(here, exist_ok=True)

SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I8": 1, "U8": 1}


def encode(dtype, values):
    if dtype == "F32":
        return struct.pack("<%df" % len(values), *values)
    if dtype == "F16":
        return struct.pack("<%de" % len(values), *values)
    if dtype == "BF16":
        return b"".join(struct.pack("<f", v)[2:] for v in values)
    if dtype in ("I8", "U8"):  # codes, and zero points 0 .. 14
        return bytes((3 * k) % 15 for k in range(len(values)))
    if dtype == "I32":  # packed nibbles: codes and stored zeros 0 .. 14
        return b"".join(struct.pack("<I", (0x76543210 + 0x11111111 * (k % 7)) & 0xEEEEEEEE)
                        for k in range(len(values)))
    return bytes(8 * len(values))


def file(tensors, metadata=True):
    """tensors: [(name, dtype, shape)]; values are small multiples of 1/8."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = {"format": "pt"}
    for i, (name, dtype, shape) in enumerate(tensors):
        n = 1
        for d in shape:
            n *= d
        raw = encode(dtype, [((i + k) % 9 - 4) / 8 for k in range(n)])
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


seeds = {
    "packed_f32": file([("in_proj_weight", "F32", [6, 2]), ("in_proj_bias", "F32", [6]),
                        ("out_proj.weight", "F32", [2, 2]), ("out_proj.bias", "F32", [2])]),
    "packed_f16_norm": file([("in_proj_weight", "F16", [6, 2]), ("out_proj.weight", "F16", [2, 2]),
                             ("norm.weight", "F16", [2]), ("norm.bias", "F16", [2])]),
    "separate_bf16": file([("q_proj_weight", "BF16", [2, 2]), ("k_proj_weight", "BF16", [2, 3]),
                           ("v_proj_weight", "BF16", [2, 1]), ("in_proj_bias", "BF16", [6]),
                           ("out_proj.weight", "BF16", [2, 2])]),
    "linear_gqa": file([("q_proj.weight", "F32", [3, 2]), ("k_proj.weight", "F16", [1, 2]),
                        ("v_proj.weight", "BF16", [2, 2]), ("o_proj.weight", "F32", [2, 6]),
                        ("q_proj.bias", "F32", [3])], metadata=False),
    "other_dtypes": file([("step", "I64", [1]), ("empty", "F32", [0]), ("in_proj_weight", "F32", [3, 1]),
                          ("out_proj.weight", "F32", [1, 1])]),
    "bias_kv": file([("in_proj_weight", "F32", [3, 1]), ("bias_k", "F32", [1, 1]),
                     ("out_proj.weight", "F32", [1, 1])]),
}
# GPTQ, 4-bit, groups of 32: the smallest GPTQ layer, d_model 32 (every
# projection 32 x 32: one group per row), found with 1 and 2 heads.
def gptq(name, k=32, n=32, g_idx=False):
    t = [(name + ".qweight", "I32", [k // 8, n]), (name + ".qzeros", "I32", [k // 32, n // 8]),
         (name + ".scales", "F16", [k // 32, n])]
    return t + ([(name + ".g_idx", "I32", [k])] if g_idx else [])


seeds["gptq"] = file(gptq("q_proj") + gptq("k_proj") + gptq("v_proj") + gptq("o_proj"),
                     metadata=False)
def vq(name, dtype="U8", k=32, n=32, zeros=True):
    cols = k if dtype == "I8" else k // 2
    t = [(name + ".qvalues", dtype, [n, cols]), (name + ".qscales", "F16", [n, k // 32])]
    return t + ([(name + ".qzero_points", "U8", [n, k // 32])] if zeros else [])


seeds["vkmha_q4z"] = file(vq("q_proj") + vq("k_proj") + vq("v_proj") + vq("o_proj"),
                          metadata=False)
seeds["vkmha_q8"] = file(vq("q_proj", "I8", n=16, zeros=False) +  # d_k 16, d_v 32
                         vq("k_proj", "I8", n=16, zeros=False) + vq("v_proj", "I8", zeros=False) +
                         vq("out_proj", "I8", zeros=False), metadata=False)
seeds["gptq_8bit"] = file(gptq("q_proj") + [("k_proj.qweight", "I32", [8, 32]),
                                            ("k_proj.qzeros", "I32", [1, 8]),
                                            ("k_proj.scales", "F16", [1, 32])], metadata=False)
seeds["truncated"] = seeds["packed_f32"][:100]
seeds["bad_json"] = struct.pack("<Q", 10) + b'{"w":{"dt"'
seeds["overlap"] = (lambda h: struct.pack("<Q", len(h)) + h + bytes(12))(
    b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
    b'"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}')
for name, data in seeds.items():
    assert len(data) <= (4096 if name.startswith(("gptq", "vkmha")) else 512), (name, len(data))
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)
