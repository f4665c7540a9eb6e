"""Compiles every Triton kernel a generated candidate launches with Triton's
own compiler for an H100/H200 target (sm_90), on a machine without a GPU.

The interpreter (TRITON_INTERPRET=1, what the CPU tests judge with) runs
kernels that the GPU compiler rejects, such as a loop variable whose shape
changes inside the loop. This runs each candidate's forward on the CPU with
kernel launches recorded instead of run (their outputs stay uninitialised;
nothing is checked but compilation), then compiles each distinct launch
(kernel, argument types, constexprs, warps) to a cubin.

usage: triton_compile_check.py CANDIDATE.py...   (each defines ModelNew and
the task's get_inputs / get_init_inputs); prints one line per candidate and
exits 1 when any kernel fails to compile.
"""
import importlib.util
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
           torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
           torch.bool: "i1"}
_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")

launches = {}


def _record(self, *args, grid, warmup, **kwargs):
    bound = dict(zip(self.arg_names, args))
    bound.update({k: v for k, v in kwargs.items() if k in self.arg_names})
    sig, const = {}, {}
    for p in self.params:
        v = bound.get(p.name, p.default if p.has_default else None)
        if p.is_constexpr or v is None:
            sig[p.name] = "constexpr"
            const[p.name] = v
        elif isinstance(v, torch.Tensor):
            sig[p.name] = "*" + _DTYPES[v.dtype]
        elif isinstance(v, bool):
            sig[p.name] = "i1"
        elif isinstance(v, int):
            sig[p.name] = "i32" if -2**31 <= v < 2**31 else "i64"
        elif isinstance(v, float):
            sig[p.name] = "fp32"
        else:
            raise TypeError(f"{self.fn.__name__}: argument {p.name} of type {type(v).__name__}")
    opts = tuple(sorted((k, v) for k, v in kwargs.items() if k in _OPTIONS))
    key = (self, tuple(sig.items()), tuple((k, repr(v)) for k, v in const.items()), opts)
    launches.setdefault(key, (self, sig, const, dict(opts)))
    return None


JITFunction.run = _record


def check(path):
    launches.clear()
    spec = importlib.util.spec_from_file_location("candidate_" + str(abs(hash(path))), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    model = mod.ModelNew(*mod.get_init_inputs())
    with torch.no_grad():
        model(*mod.get_inputs())
    failures = []
    for fn, sig, const, opts in launches.values():
        src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=const)
        try:
            triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)
        except Exception as e:  # the compiler's own message, first and last lines
            lines = [s for s in str(e).strip().splitlines() if s.strip()]
            failures.append(f"{fn.fn.__name__}: {type(e).__name__}: {lines[-1] if lines else ''}")
    return len(launches), failures


def main(paths):
    bad = 0
    for path in paths:
        try:
            n, failures = check(path)
        except Exception as e:
            print(f"{path}: could not run the forward: {type(e).__name__}: {e}")
            bad += 1
            continue
        if failures:
            bad += 1
            print(f"{path}: {len(failures)} of {n} kernels failed to compile: " + " | ".join(failures))
        else:
            print(f"{path}: {n} kernels compiled for sm_90")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
