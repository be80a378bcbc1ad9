#!/usr/bin/env python3
"""PyTorch peer of vkmha-bench: torch.nn.MultiheadAttention on the CPU (or
the GPU named by VKMHA_TORCH_DEVICE, bench/torch_peer.py).

    python3 bench/torch_mha.py DIR THREADS REPS

DIR/manifest.txt has one shape per line: "id d_model heads batch len". For each,
DIR/<id>/{w_q,w_k,w_v,w_o,x}.f32 hold vkmha's weights ([out][in], the layout of
torch.nn.Linear) and self-attention input [batch][len][d_model], raw
little-endian fp32, written by vkmha-bench. This script loads them into
MultiheadAttention(batch_first=True): in_proj_weight = cat(w_q, w_k, w_v),
out_proj.weight = w_o, biases zero (vkmha's layer has none here; torch 1.13's
fast path rejects bias=False, so the zero biases are added). It times the forward under
torch.inference_mode (need_weights=False, so PyTorch may take its fast path)
after two warm-ups, REPS times, writes the output to DIR/<id>/out.f32 for the
bench to compare with vkmha's, and prints one line per shape:

    id median_ms min_ms max_ms

Exit status 3 when torch cannot be imported (the bench reports the peer as
absent).
"""
import os
import sys

from torch_peer import DEVICE, describe, now, np, to_numpy, torch


def load(path, shape):
    return torch.from_numpy(np.fromfile(path, dtype="<f4").reshape(shape)).to(DEVICE)


def main():
    d, threads, reps = sys.argv[1], int(sys.argv[2]), max(1, int(sys.argv[3]))
    torch.set_num_threads(threads)
    print(describe(threads), flush=True)
    with open(os.path.join(d, "manifest.txt")) as f:
        shapes = [line.split() for line in f if line.strip()]
    for sid, d_model, heads, batch, length in shapes:
        d_model, heads, batch, length = int(d_model), int(heads), int(batch), int(length)
        sd = os.path.join(d, sid)
        w = [load(os.path.join(sd, n + ".f32"), (d_model, d_model))
             for n in ("w_q", "w_k", "w_v", "w_o")]
        x = load(os.path.join(sd, "x.f32"), (batch, length, d_model))
        mha = torch.nn.MultiheadAttention(d_model, heads, batch_first=True).to(DEVICE)
        mha.eval()
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.cat(w[:3], 0))
            mha.out_proj.weight.copy_(w[3])
            mha.in_proj_bias.zero_()
            mha.out_proj.bias.zero_()
        times = []
        with torch.inference_mode():
            for _ in range(2):  # warm-up (the first call also starts threads)
                out, _ = mha(x, x, x, need_weights=False)
            for _ in range(reps):
                t0 = now()
                out, _ = mha(x, x, x, need_weights=False)
                times.append((now() - t0) * 1e3)
        to_numpy(out).astype("<f4").tofile(os.path.join(sd, "out.f32"))
        times.sort()
        print(f"{sid} {times[len(times) // 2]:.4f} {times[0]:.4f} {times[-1]:.4f}", flush=True)


if __name__ == "__main__":
    main()
