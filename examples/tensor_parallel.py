#!/usr/bin/env python3
"""Tensor parallelism over vkmha head shards, with torch.distributed.

    /usr/bin/python3 examples/tensor_parallel.py [--world N] [--timeout S]
                                                  [--backend vulkan|reference]

An engine spreads a layer's heads over several devices: each process holds
one head shard in its own vkmha context, all of them run the same input,
and an all-reduce sums their partial outputs. Here the processes are
`world` local ones (torch.multiprocessing, gloo on 127.0.0.1 and a free
port), all on this machine's Vulkan device, which stands in for one GPU each:

    shard = vkmha.from_torch(module, ctx, heads=(h0, h1))   # the same checkpoint
    part = torch.from_numpy(shard.layer(x))                 # its heads' share
    dist.all_reduce(part)                                   # the sum over shards
    out = part + module.out_proj.bias                       # = module(x, x, x)

Each rank then decodes token by token with a KV cache of its shard (one
cache per shard), all-reducing every step. Rank 0 checks the prefill
against torch.nn.MultiheadAttention's forward and every decode step against
its causal forward over the whole sequence (|diff| <= 1e-4), and checks that
each rank's validation layer stayed silent (--validation). Prints TAP; exit
status 0 when every check passes, 1 otherwise, and the whole run is bounded
by --timeout (the processes are killed past it).
"""
import argparse
import datetime
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import vkmha

D_MODEL, HEADS, BATCH, PROMPT, STEPS = 32, 8, 2, 5, 4
TOL = 1e-4


def worker(rank, world, port, backend, validation, results):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    torch.set_num_threads(1)
    torch.manual_seed(0)  # every rank builds the same module and input
    module = torch.nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True).eval()
    x = torch.randn(BATCH, PROMPT + STEPS, D_MODEL)
    per = HEADS // world
    ctx = vkmha.Context(backend, validation=validation)
    shard = vkmha.from_torch(module, ctx, heads=(rank * per, (rank + 1) * per))
    checks = []

    # Prefill: the whole sequence at once, no mask.
    part = torch.from_numpy(shard.layer(x.numpy()))
    dist.all_reduce(part)
    if rank == 0:
        with torch.no_grad():
            want = module(x, x, x, need_weights=False)[0]
        diff = float((part + module.out_proj.bias.detach() - want).abs().max())
        checks.append((diff <= TOL, "%d shards: the all-reduced prefill equals "
                       "torch.nn.MultiheadAttention (max |diff| %.2e)" % (world, diff)))

    # Decode: the prompt, then one token per step, each shard with its cache.
    cache = shard.layer.kv_cache(PROMPT + STEPS, batch=BATCH)
    outs = [shard.layer(x[:, :PROMPT].numpy(), kv_cache=cache, causal=True)]
    for t in range(PROMPT, PROMPT + STEPS):
        outs.append(shard.layer(x[:, t:t + 1].numpy(), kv_cache=cache, causal=True))
    part = torch.from_numpy(np.concatenate(outs, 1))
    dist.all_reduce(part)
    if rank == 0:
        n = PROMPT + STEPS
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)
        with torch.no_grad():
            want = module(x, x, x, attn_mask=causal, need_weights=False)[0]
        diff = float((part + module.out_proj.bias.detach() - want).abs().max())
        checks.append((diff <= TOL, "%d shards: a prefill of %d and %d cached decode steps, "
                       "all-reduced, equal the causal forward (max |diff| %.2e)"
                       % (world, PROMPT, STEPS, diff)))
    info = ctx.info()
    quiet = torch.tensor([0 if not validation or (info["validation_enabled"] and
                                                  info["validation_messages"] == 0) else 1])
    dist.all_reduce(quiet)
    if rank == 0:
        checks.append((int(quiet) == 0, "%d shards: every rank's validation layer %s"
                       % (world, "was silent" if validation else "was off")))
        results.put(checks)
    del cache, shard
    ctx.close()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, default=2, help="processes (head shards): 2, 4 or 8")
    ap.add_argument("--timeout", type=float, default=120, help="seconds for the whole run")
    ap.add_argument("--backend", default="vulkan", choices=("vulkan", "reference"))
    ap.add_argument("--validation", action="store_true", help="the validation layer on")
    a = ap.parse_args()
    if a.world < 1 or HEADS % a.world:
        ap.error("--world must divide %d heads" % HEADS)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker,
                         args=(r, a.world, port, a.backend, a.validation, results))
             for r in range(a.world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + a.timeout
    checks = None
    while checks is None and time.monotonic() < deadline:
        try:
            checks = results.get(timeout=0.5)
        except Exception:
            if all(p.exitcode is not None for p in procs):
                break
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    failed = [r for r, p in enumerate(procs) if p.exitcode != 0]
    if checks is None:
        checks = []
    checks.append((not failed and len(checks) == 3,
                   "%d processes finished within %.0f s (failed ranks: %s)"
                   % (a.world, a.timeout, failed or "none")))
    print("1..%d" % len(checks))
    for i, (ok, what) in enumerate(checks, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, what))
    sys.exit(0 if all(ok for ok, _ in checks) else 1)


if __name__ == "__main__":
    main()
