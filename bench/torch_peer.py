"""What the PyTorch peers of the benchmarks share: torch itself (exit status 3
when it cannot be imported, which the benchmarks report as an absent peer),
the device the peer runs on, and a clock that waits for that device.

VKMHA_TORCH_DEVICE names the device (default cpu): cuda on a machine whose GPU
vkmha is measured on makes PyTorch on the same GPU the peer. Weights and
inputs are moved there; to_numpy() brings a result back to host memory."""
import os
import sys
import time

try:
    import numpy as np
    import torch
except ImportError as e:  # the peer is absent, not broken
    print(f"torch peer absent: {e}", file=sys.stderr)
    sys.exit(3)

DEVICE = torch.device(os.environ.get("VKMHA_TORCH_DEVICE", "cpu"))


def describe(threads):
    """The header line of a peer's output: torch's version and where it runs."""
    where = (torch.cuda.get_device_name(DEVICE) if DEVICE.type == "cuda"
             else f"{torch.get_num_threads()} threads")
    return f"# torch {torch.__version__} on {DEVICE.type}, {where}"


def now():
    """Seconds, after the device has finished what was queued on it."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)
    return time.perf_counter()


def to_numpy(t):
    return t.detach().to("cpu").contiguous().numpy()
