#!/usr/bin/env python3
"""Writes, for each KernelBench task, candidates that are the reference itself
plus an identity Triton kernel of their own (so the judge accepts them), and a
batch manifest. Variants differ in the identity kernel's block size, so each
is a distinct source with its own compilation.

    make_reference_candidates.py TASK_DIR OUT_DIR [--variants K] [--limit N] [--kernel identity|trivial]

--kernel identity (default) passes every output through a copy kernel: real
work of the candidate's own, which bench/judge's throughput figure wants.
--kernel trivial leaves the outputs alone and launches a one-element kernel
per call: the judge's self-check, whose speedups should then be near 1.0.

The done-when check of the judge (every problem judged correct with speedup
near 1.0) and bench/judge's throughput figure use these.
"""

import argparse
import json
import re
from pathlib import Path

TEMPLATE = '''

# ---- appended by bench/make_reference_candidates.py: the reference itself,
# ---- passed through an identity kernel of the candidate's own.
import triton
import triton.language as tl


@triton.jit
def ax_identity_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


def _ax_identity(t):
    if not isinstance(t, torch.Tensor):
        return t
    if t.numel() == 0 or t.dtype == torch.bool:
        return t.clone()
    src = t.contiguous()
    dst = torch.empty_like(src)
    ax_identity_kernel[(triton.cdiv(src.numel(), {block}),)](src, dst, src.numel(), BLOCK={block})
    return dst


class ModelNew(Model):
    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        if isinstance(out, (tuple, list)):
            return type(out)(_ax_identity(o) for o in out)
        return _ax_identity(out)
'''

TRIVIAL = '''

# ---- appended by bench/make_reference_candidates.py: the reference itself,
# ---- plus a one-element kernel of the candidate's own on every call.
import triton
import triton.language as tl


@triton.jit
def ax_mark_kernel(dst):
    tl.store(dst, {block})


class ModelNew(Model):
    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        first = out if isinstance(out, torch.Tensor) else next(o for o in out if isinstance(o, torch.Tensor))
        mark = torch.empty(1, dtype=torch.int32, device=first.device)
        ax_mark_kernel[(1,)](mark)
        return out
'''

BLOCKS = [1024, 2048, 4096, 512, 8192, 256, 16384, 128]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("task_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--variants", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--kernel", choices=["identity", "trivial"], default="identity")
    args = ap.parse_args()
    tasks = sorted(Path(args.task_dir).glob("*.py"),
                   key=lambda p: (int(re.match(r"\d+", p.name).group()) if re.match(r"\d+", p.name) else 1 << 30, p.name))
    if args.limit:
        tasks = tasks[: args.limit]
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for task in tasks:
        src = task.read_text()
        if "import torch\n" not in src:
            src = "import torch\n" + src
        for v in range(args.variants):
            cand = out / ("%s__ref%d.py" % (task.stem, v))
            cand.write_text(src + (TEMPLATE if args.kernel == "identity" else TRIVIAL).replace("{block}", str(BLOCKS[v % len(BLOCKS)])))
            lines.append(json.dumps({"task": str(task.resolve()), "candidate": str(cand.resolve())}))
    (out / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    print("%d candidates for %d tasks in %s" % (len(lines), len(tasks), out))


if __name__ == "__main__":
    main()
