#!/usr/bin/env python3
"""PyTorch peer of vkmha-bench-decode: one cached decode step of an MHA layer
on the CPU (or the GPU named by VKMHA_TORCH_DEVICE, bench/torch_peer.py), the
way an inference loop in PyTorch writes it.

    python3 bench/torch_decode.py D_MODEL HEADS KV_HEADS CONTEXT STEPS THREADS

A step, for one sequence holding CONTEXT earlier positions: project the new
token's query, key and value (torch.nn.functional.linear, fp32 weights of
torch.nn.Linear's layout, no biases), concatenate the key and value to the
cached ones (torch.cat), attend (grouped-query heads: each key/value head
serves HEADS / KV_HEADS query heads; matmul, softmax, matmul), and project the
output. Every step starts from the same CONTEXT cached positions, so each
concatenates as much. Random weights and cache (seeded): the bench times the
work, the correctness of the math is the test suite's. After two warm-up
steps it times STEPS steps under torch.inference_mode and prints

    median_ms min_ms max_ms

VKMHA_TORCH_DTYPE=float16 runs the step in fp16 (weights, cache and
activations; a GPU's, as vkmha's fp16 rows).

Exit status 3 when torch cannot be imported (the bench reports the peer as
absent).
"""
import math
import os
import sys

from torch_peer import DEVICE, now, torch

F = torch.nn.functional


def main():
    d_model, heads, kv_heads, context, steps, threads = map(int, sys.argv[1:7])
    torch.set_num_threads(threads)
    d = d_model // heads
    g = torch.Generator().manual_seed(1)

    dtype = getattr(torch, os.environ.get("VKMHA_TORCH_DTYPE", "float32"))

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(DEVICE).to(dtype)

    w_q = rand(heads * d, d_model, scale=d_model ** -0.5)
    w_k = rand(kv_heads * d, d_model, scale=d_model ** -0.5)
    w_v = rand(kv_heads * d, d_model, scale=d_model ** -0.5)
    w_o = rand(d_model, heads * d, scale=(heads * d) ** -0.5)
    keys, values = rand(1, kv_heads, context, d), rand(1, kv_heads, context, d)
    x = rand(1, 1, d_model)
    group = heads // kv_heads

    def step(keys, values):
        q = F.linear(x, w_q).view(1, kv_heads, group, d)  # one query per head
        k = F.linear(x, w_k).view(1, kv_heads, 1, d)
        v = F.linear(x, w_v).view(1, kv_heads, 1, d)
        keys = torch.cat([keys, k], 2)
        values = torch.cat([values, v], 2)
        p = torch.softmax(q @ keys.transpose(-1, -2) / math.sqrt(d), -1)
        return F.linear((p @ values).reshape(1, 1, heads * d), w_o)

    times = []
    with torch.inference_mode():
        for _ in range(2):
            step(keys, values)
        for _ in range(max(1, steps)):
            t0 = now()
            step(keys, values)
            times.append((now() - t0) * 1e3)
    times.sort()
    print(f"{times[len(times) // 2]:.4f} {times[0]:.4f} {times[-1]:.4f}", flush=True)


if __name__ == "__main__":
    main()
