#!/usr/bin/env python3
"""bench/bandwidth: what a memory-bound kernel can reach on this GPU, and what a norm that reads
its input twice can reach at best.

    python3 bench/bandwidth.py [--gib 1] [--iters 20] [--device cuda:0] [--json OUT.json]

Measures, each as the median of `iters` timed calls (CUDA events, after warm-up) over a float32
tensor of `gib` GiB:
- copy:  `dst.copy_(src)`, bytes = 2 x size (the denominator bench/builtin.py uses);
- read:  a Triton kernel that sums the tensor (each program one block, one atomic add), bytes = size;
- write: `dst.fill_(1.0)`, bytes = size.

Then, for normalisations whose statistics need the whole of a group (a batch-norm channel, a
layer-norm row) before any output can be written, and whose group is larger than what the chip
can hold (registers plus shared memory plus L2), the input must be read twice: once for the
statistics and once with the output's write. The fastest such kernel then takes at least
X / read + (X + Y) / copy seconds for X input and Y output bytes (parameters left out), so its
fraction of copy bandwidth, counted as bench/builtin.py counts it ((X + Y) / time / copy), is at
most (X + Y) / copy / (X / read + (X + Y) / copy). The script prints that bound for the
KernelBench Level-1 norms whose groups do not fit on chip (batch norm 33: 64 MiB per channel;
layer norm 40: 16 MiB rows and 32 MiB of weight and bias, read once more if they do not stay in
L2), with the group sizes computed from the problems' shapes.
"""

import argparse
import json
import statistics
import sys


def timed(fn, iters, warmup, sync):
    import torch
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return statistics.median(times)


def two_pass_bound(x, y, p, read_bw, copy_bw):
    """The least time (s) of a kernel that reads x input bytes twice (statistics, then apply),
    writes y output bytes and reads p parameter bytes once more, and its fraction of copy
    bandwidth counted on input plus output bytes, as bench/builtin.py counts it."""
    t_min = x / read_bw + (x + y) / copy_bw + p / read_bw
    return t_min, (x + y) / t_min / copy_bw


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)

    import torch
    if not torch.cuda.is_available():
        print("bandwidth: no CUDA device (this bench measures a GPU)", file=sys.stderr)
        return 2
    import triton
    import triton.language as tl

    @triton.jit
    def _sum_kernel(x, acc, N, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x + offs, mask=offs < N, other=0.0, eviction_policy="evict_first")
        tl.atomic_add(acc, tl.sum(v, axis=0))

    dev = torch.device(a.device)
    sync = lambda: torch.cuda.synchronize(dev)
    n = int(a.gib * (1 << 30)) // 4
    size = n * 4
    src = torch.ones(n, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    acc = torch.zeros(1, dtype=torch.float32, device=dev)
    block = 8192
    grid = (triton.cdiv(n, block),)

    def read():
        _sum_kernel[grid](src, acc, n, BLOCK=block, num_warps=8)

    t_copy = timed(lambda: dst.copy_(src), a.iters, a.warmup, sync)
    t_read = timed(read, a.iters, a.warmup, sync)
    t_write = timed(lambda: dst.fill_(1.0), a.iters, a.warmup, sync)
    acc.zero_()
    read()
    sync()
    if float(acc.item()) != float(n):  # the read kernel really read every element
        print(f"bandwidth: read kernel summed {acc.item()} for {n} ones", file=sys.stderr)
        return 1
    copy_bw, read_bw, write_bw = 2 * size / t_copy, size / t_read, size / t_write
    name = torch.cuda.get_device_name(dev)
    print(f"device {name}; tensor {a.gib:g} GiB float32; median of {a.iters}")
    print(f"copy  {copy_bw / 1e9:8.1f} GB/s (2 x size)")
    print(f"read  {read_bw / 1e9:8.1f} GB/s ({read_bw / copy_bw:.3f} of copy)")
    print(f"write {write_bw / 1e9:8.1f} GB/s ({write_bw / copy_bw:.3f} of copy)")

    # Norms that must read their input twice: X input bytes, Y output bytes, P parameter bytes
    # that are read once more per group when they cannot stay in L2 (not counted in the
    # fraction's numerator, as bench/builtin.py does not count parameters).
    cases = [
        ("33_BatchNorm (train), [64, 64, 512, 512], 64 MiB per channel", 64 * 64 * 512 * 512 * 4, 0),
        ("40_LayerNorm, [16, 64, 256, 256], 16 MiB rows, 32 MiB weight+bias", 16 * 64 * 256 * 256 * 4,
         2 * 64 * 256 * 256 * 4),
    ]
    rows = []
    for label, x, p in cases:
        y = x
        t_min, frac = two_pass_bound(x, y, p, read_bw, copy_bw)
        rows.append({"case": label, "x_bytes": x, "y_bytes": y, "param_bytes": p,
                     "t_min_ms": t_min * 1e3, "max_fraction": frac})
        print(f"two-pass bound: {label}: >= {t_min * 1e3:.3f} ms, at most {frac:.3f} of copy")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": name, "gib": a.gib, "copy_gbs": copy_bw / 1e9, "read_gbs": read_bw / 1e9,
                       "write_gbs": write_bw / 1e9, "two_pass_bounds": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
