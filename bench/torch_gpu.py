#!/usr/bin/env python3
"""PyTorch peer of vkmha-bench-gpu: the fp16 targets of issue 27 on the device
named by VKMHA_TORCH_DEVICE (bench/torch_peer.py; cuda on a lent GPU).

    python3 bench/torch_gpu.py REPS THREADS ROW...

Each ROW is "matmul:M:N:K" (torch.matmul of fp16 [M][K] and [K][N]) or
"mha:BATCH:LEN:D_MODEL:HEADS" (torch.nn.MultiheadAttention(batch_first) in
fp16, self-attention, need_weights=False, so that PyTorch may take its fused
scaled-dot-product path). Inputs are random (the timing does not depend on
them; vkmha's results are checked by its test suite). Two warm-ups, then
REPS timed calls (the clock waits for the device); one line per row:

    ROW median_ms min_ms max_ms

Exit status 3 when torch cannot be imported (the bench reports the peer as
absent).
"""
import sys

from torch_peer import DEVICE, describe, now, torch


def timed(fn, reps):
    with torch.inference_mode():
        for _ in range(2):
            fn()
        times = []
        for _ in range(reps):
            t0 = now()
            fn()
            times.append((now() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2], times[0], times[-1]


def main():
    reps, threads = max(1, int(sys.argv[1])), int(sys.argv[2])
    torch.set_num_threads(threads)
    print(describe(threads), flush=True)
    # fp16 where the device computes it; PyTorch's CPU builds before 2.x have
    # no fp16 matmul: there the peer runs fp32 and says so.
    dtype = torch.float16
    try:
        torch.matmul(torch.ones(2, 2, device=DEVICE, dtype=dtype),
                     torch.ones(2, 2, device=DEVICE, dtype=dtype))
    except RuntimeError:
        dtype = torch.float32
        print(f"# no fp16 matmul on {DEVICE.type} in this torch: the peer runs fp32", flush=True)
    for row in sys.argv[3:]:
        kind, *dims = row.split(":")
        dims = [int(x) for x in dims]
        if kind == "matmul":
            m, n, k = dims
            a = torch.randn(m, k, device=DEVICE).to(dtype)
            b = torch.randn(k, n, device=DEVICE).to(dtype)
            t = timed(lambda: torch.matmul(a, b), reps)
        else:
            batch, length, d_model, heads = dims
            mha = torch.nn.MultiheadAttention(d_model, heads, batch_first=True)
            mha = mha.to(DEVICE).to(dtype).eval()
            x = torch.randn(batch, length, d_model, device=DEVICE).to(dtype)
            t = timed(lambda: mha(x, x, x, need_weights=False), reps)
        print(f"{row} {t[0]:.4f} {t[1]:.4f} {t[2]:.4f}", flush=True)


if __name__ == "__main__":
    main()
