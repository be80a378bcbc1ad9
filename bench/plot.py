#!/usr/bin/env python3
"""Renders a vkmha-bench CSV into PNG plots (python3-matplotlib).

    python3 bench/plot.py docs/bench-lavapipe.csv docs/bench-lavapipe

writes PREFIX-mha.png (MHA forward: median time vs L, one line per
implementation and path, one panel per d_model / heads / batch) and
PREFIX-matmul.png (matmul GFLOP/s vs size per implementation, square and
projection shapes). Rows whose status is not "ok" (an absent peer) are left
out, never drawn as zero.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


# One colour per implementation in every panel and plot.
COLORS = {"vulkan": "tab:green", "torch": "tab:orange", "openblas": "tab:orange",
          "reference": "tab:blue"}


def main():
    src, prefix = sys.argv[1], sys.argv[2]
    with open(src, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    if not rows:
        sys.exit("plot.py: no measured rows in " + src)
    title = f'{rows[0]["device"]}, {rows[0]["date"][:10]}'

    mha = [r for r in rows if r["op"] == "mha"]
    panels = sorted({(int(r["d_model"]), int(r["heads"]), int(r["batch"])) for r in mha})
    if panels:
        fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
        for ax, (dm, h, b) in zip(axes[0], panels):
            sel = [r for r in mha if (int(r["d_model"]), int(r["heads"]), int(r["batch"])) == (dm, h, b)]
            for impl in sorted({(r["impl"], r["path"]) for r in sel}):
                pts = sorted((int(r["len"]), float(r["wall_ms_median"])) for r in sel
                             if (r["impl"], r["path"]) == impl)
                label = impl[0] if impl[1] in ("-", "") else f"{impl[0]} ({impl[1]})"
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label,
                        color=COLORS.get(impl[0]))
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("sequence length L")
            ax.set_ylabel("median ms per forward")
            ax.set_title(f"MHA d_model {dm}, {h} heads, batch {b}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(prefix + "-mha.png", dpi=90)

    mm = [r for r in rows if r["op"] == "matmul"]
    if mm:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        shapes = []
        for r in mm:
            if r["shape"] not in shapes:
                shapes.append(r["shape"])
        for impl in sorted({r["impl"] for r in mm}):
            ys = []
            for s in shapes:
                v = [float(r["rate"]) for r in mm if r["impl"] == impl and r["shape"] == s]
                ys.append(v[0] if v else float("nan"))
            ax.plot(range(len(shapes)), ys, marker="o", label=impl, color=COLORS.get(impl))
        ax.set_xticks(range(len(shapes)))
        ax.set_xticklabels([s.replace(" op ", "\nop ") for s in shapes], fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("GFLOP/s (median)")
        ax.set_title("matmul, " + title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(prefix + "-matmul.png", dpi=90)


if __name__ == "__main__":
    main()
