"""Pieces shared by the reference and candidate roles."""

import gc
import importlib.util
import os
import sys
import time
import traceback
import uuid

import torch

# Captured when the harness is imported, before any task or candidate code runs.
_perf_counter = time.perf_counter
_urandom = os.urandom
_sleep_cycles = getattr(torch.cuda, "_sleep", None)

# GPU timing (request "timing": "gpu"): each timed call is queued behind a spin
# of this length, so that its launches are hidden while the spin runs. Fixed,
# so that the null loop, the baselines and every candidate spin alike and the
# judge's clock compares their requests as before.
GPU_SPIN_MS = 1.0
_cycles_per_ms = {}


def configure_numerics():
    """Strict fp32 on both sides: no TF32 anywhere."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def tf32_enabled():
    return bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32
                or torch.get_float32_matmul_precision() != "highest")


def load_module(path, prefix):
    """Import a python file under a private, unguessable module name."""
    name = "%s_%s" % (prefix, uuid.uuid4().hex)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton and dataclasses look modules up by name
    spec.loader.exec_module(module)
    return module


def seed_all(seed):
    torch.manual_seed(seed)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


PRECISIONS = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}
DTYPE_ATTR = "__adaexplore_dtype__"


def set_precision(task_module, name):
    """Judges the task in `name` (fp32, fp16, bf16): make_inputs casts the task's floating
    inputs to that dtype, and build_model the model's floating parameters and buffers, as
    KernelBench's precision option does (integer tensors keep their dtype). Kept on the task's
    module, so that every input made for it, in trials, timing and baselines alike, follows."""
    if name not in PRECISIONS:
        raise ValueError("unknown precision %r (fp32, fp16 or bf16)" % (name,))
    setattr(task_module, DTYPE_ATTR, PRECISIONS[name])


def task_dtype(task_module):
    """The dtype the task is judged in, or None for its own (fp32)."""
    return getattr(task_module, DTYPE_ATTR, None)


def make_inputs(task_module, seed, device, cast=True):
    """The task's get_inputs() under a fixed seed, created on the device.

    Creating them directly on the device (rather than on the CPU and moving
    them) keeps multi-gigabyte inputs cheap; both sides do the same, so the
    values agree bit for bit on the same machine. Floating tensors are cast
    to the task's precision (set_precision) unless `cast` is false.
    """
    seed_all(seed)
    with torch.device(device):
        inputs = task_module.get_inputs()
    dtype = task_dtype(task_module) if cast else None
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            x = x.to(device)
            if dtype is not None and x.is_floating_point():
                x = x.to(dtype)
        out.append(x)
    return out


def init_inputs(task_module):
    return list(task_module.get_init_inputs())


def has_lazy_parameters(model):
    """Whether the module holds parameters or buffers that its first forward creates
    (nn.LazyLinear, nn.LazyConv2d, ...)."""
    from torch.nn.parameter import is_lazy
    return any(is_lazy(t) for t in list(model.parameters()) + list(model.buffers()))


def materialize(model, task_module, seed, device, forward=None):
    """Gives a model's lazy parameters their shapes and values before anything else runs it.

    Lazy modules draw their initial values from the global generator at their first forward.
    The reference and the candidate are called at different points of the protocol, so without
    this they would draw different weights. Both are materialised here the same way: one
    forward, in evaluation mode (no running statistics move, no dropout draws) and without
    gradients, on the task's inputs made with `seed`, with the generators seeded to `seed`
    again just before the call. `forward` (default: the model's own) lets a candidate that
    subclasses the task's Model be materialised by the task's own forward, so the lazy modules
    are created in the same order whatever the candidate's forward does first.
    """
    if task_module is None or not isinstance(model, torch.nn.Module) or not has_lazy_parameters(model):
        return
    # In the task's own dtype: the model is cast to the task's precision after this.
    inputs = make_inputs(task_module, seed, device, cast=False)
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        seed_all(seed)
        with torch.no_grad():
            (forward or model)(*inputs)
    finally:
        for m, mode in modes:
            m.training = mode
    if has_lazy_parameters(model):
        raise RuntimeError("the model still has uninitialised lazy parameters after one forward")


def build_model(cls, init_args, init_seed, device, task_module=None):
    """cls(*init_args) under init_seed, on device; with task_module, lazy parameters are
    materialised at once (materialize)."""
    seed_all(init_seed)
    model = cls(*init_args)
    if isinstance(model, torch.nn.Module):
        model = model.to(device)
        # A candidate that subclasses the task's Model (or its own copy of it, as the
        # builtin proposer writes) is materialised by that Model's forward.
        base = next((c for c in type(model).__mro__[1:] if c.__name__ == "Model" and "forward" in c.__dict__), None)
        forward = (lambda *xs: base.forward(model, *xs)) if base is not None else None
        materialize(model, task_module, init_seed, device, forward)
        dtype = task_dtype(task_module) if task_module is not None else None
        if dtype is not None:
            model = model.to(dtype)
    return model


def as_tensor_list(out):
    """The outputs as a list of tensors, or raise TypeError naming the problem."""
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    for i, t in enumerate(items):
        if type(t) is not torch.Tensor:
            raise TypeError("output %d is a %s, not a plain torch.Tensor" % (i, type(t).__name__))
    return items


def describe(t):
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}


DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}


def write_raw(t, path):
    """Plain bytes, no pickle: the trusted side reads them with a known dtype and shape.

    The file is sized first and mapped, and the tensor is copied straight into
    the mapping (one device-to-host copy, no intermediate host buffer): outputs
    of KernelBench tasks reach a gigabyte, and this is on every trial's path.
    """
    flat = t.detach().contiguous().reshape(-1)
    nbytes = flat.numel() * flat.element_size()
    with open(path, "wb") as f:
        f.truncate(nbytes)
    if nbytes == 0:
        return
    dst = torch.from_file(path, shared=True, size=nbytes, dtype=torch.uint8)
    if flat.dtype == torch.bool:
        dst.copy_(flat.view(torch.uint8))
    else:
        dst.view(flat.dtype).copy_(flat)
    del dst


def read_raw(path, dtype_name, shape):
    dtype = DTYPES.get(dtype_name)
    if dtype is None:
        raise ValueError("unsupported output dtype %s" % dtype_name)
    numel = 1
    for s in shape:
        numel *= int(s)
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    if os.path.getsize(path) != nbytes:
        raise ValueError("output file holds %d bytes, expected %d" % (os.path.getsize(path), nbytes))
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    # Mapped read-only, not read: the caller copies it to the device (or clones it).
    import warnings

    import numpy as np
    arr = np.memmap(path, dtype=np.uint8, mode="r", shape=(nbytes,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "not writable": nothing writes through this view
        raw = torch.from_numpy(arr)
    return raw.view(dtype).reshape(shape)


def release_cached(device, threshold=1 << 28, allocated_before=None):
    """Gives the allocator's cached, unused device memory back to the driver
    once it reaches `threshold` bytes, so that the other workers on the same
    GPU (candidates, the trusted workers) can use it: PyTorch's caching
    allocator would otherwise keep it reserved for this process. Called after
    every request (the worker's loop) and inside requests after large work.

    A garbage collection first frees tensors that only reference cycles keep
    alive. Without `allocated_before` it runs whenever the cache is emptied;
    with it (the bytes allocated when the request began) only when the request
    left `threshold` bytes more allocated (collects_garbage)."""
    if not str(device).startswith("cuda") or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return
    limit = max(threshold, 1)
    if collects_garbage(torch.cuda.memory_reserved(), torch.cuda.memory_allocated(), limit, allocated_before):
        import gc
        gc.collect()
    if torch.cuda.memory_reserved() - torch.cuda.memory_allocated() >= limit:
        torch.cuda.empty_cache()


def collects_garbage(reserved, allocated, threshold, allocated_before=None):
    """Whether release_cached collects garbage first. Memory reserved but not
    allocated is not always garbage's: a captured CUDA graph keeps its private
    pool reserved for as long as it lives, and no collection frees it. A full
    collection costs a process holding torch and Triton 0.1 s or more, and
    the worker's loop releases memory before it replies, inside the request
    that the judge clocks: so, given the bytes allocated when the request
    began, only memory the request left allocated calls for one."""
    if allocated_before is None:
        return reserved - allocated >= threshold
    return allocated - allocated_before >= threshold


def allocated_bytes():
    """The bytes this process has allocated on its current GPU (0 before CUDA is initialised)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.memory_allocated()
    return 0


def sync(device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def error_text(exc, limit=6000):
    """The exception with the traceback frames that belong to user code."""
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    keep = [f for f in tb if "adaexplore_worker" not in f]
    text = "".join(keep).strip()
    if len(text) > limit:
        text = text[: limit // 3] + "\n...\n" + text[-2 * limit // 3:]
    return text


def trim_compiler_output(text, limit=4000):
    """Keep the lines of a build log that say what went wrong."""
    lines = text.splitlines()
    keep = []
    for i, line in enumerate(lines):
        low = line.lower()
        if "error" in low or "undefined reference" in low:
            keep.extend(lines[i:i + 3])
    if not keep:
        keep = lines[-30:]
    seen, out = set(), []
    for line in keep:
        if line not in seen:
            seen.add(line)
            out.append(line)
    text = "\n".join(out)
    return text[:limit]


def _clone_outputs(out):
    if isinstance(out, torch.Tensor):
        return out.clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_clone_outputs(o) for o in out)
    return out


def checked_call(warmup, iters, sets):
    """The timed call whose output is always checked: the last one whose input set an earlier
    call (warm-up or timed) had already used, since a candidate that replays results keyed on
    input addresses returns stale data exactly there (the last call when none repeats a set).
    The judge derives the same index (src/judge/timing_rules.cpp, CheckedCall)."""
    seen = set(range(min(warmup, sets)))
    checked = iters - 1
    for i in range(iters):
        if i % sets in seen:
            checked = i
        seen.add(i % sets)
    return checked


def free_cached(device):
    """Returns the allocator's cached device memory to the driver, without a garbage
    collection: cheap, and alike in the trusted and the candidate's timing requests, whose
    length the judge compares."""
    if str(device).startswith("cuda") and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


class Timer:
    """Times calls of fn the same way for baselines and candidates.

    Before each timed call: the chosen input set is refreshed in place with new
    seeded values (so a cache keyed on pointers or shapes returns stale data),
    then the L2 cache is flushed. Each call is bracketed by a start event, an
    end event on the current stream and a second end event after a device-wide
    synchronise, so work hidden on other streams is still counted.

    Two outputs are kept for the judge's check, each cloned as soon as its call
    returned (outside the timed events, so work that a forward leaves to finish
    later is not waited for): the checked call's (checked_call) and one other
    timed call's, drawn uniformly after the calls ran (a reservoir sample over
    os.urandom), so that a candidate cannot know while it computes an output
    whether it will be checked. `after_call`, when given, runs after each timed
    call, outside the timed events (the candidate's guard).
    """

    def __init__(self, device, flush_bytes, synchronize=None, event_cls=None, after_call=None, timing="host"):
        self.device = device
        self.cuda = str(device).startswith("cuda")
        if timing not in ("host", "gpu"):
            raise ValueError("unknown timing %r (host or gpu)" % (timing,))
        if timing == "gpu" and not self.cuda:
            raise ValueError("gpu timing needs a CUDA device")
        self.gpu_timing = timing == "gpu"
        self.flush = None
        if self.cuda and flush_bytes > 0:
            self.flush = torch.empty(int(flush_bytes) // 4, dtype=torch.int32, device=device)
        self._sync = synchronize or torch.cuda.synchronize
        self._event = event_cls or torch.cuda.Event
        self._after_call = after_call

    def run(self, fn, task_module, set_seeds, refresh_seed0, warmup, iters, check_index=None):
        """Returns the per-call times and the kept outputs: {"checked": (index, output),
        "sample": (index, output) or None}. Call i runs on the inputs of seed refresh_seed0 + i."""
        sets = [make_inputs(task_module, s, self.device) for s in set_seeds]
        k = len(sets)
        checked = checked_call(warmup, iters, k) if check_index is None else int(check_index)
        # No automatic garbage collection inside the loop: a full collection costs more in
        # a candidate's process than in the trusted one, and the judge compares the two
        # requests' lengths.
        collect = gc.isenabled()
        gc.disable()
        try:
            for w in range(warmup):
                fn(*sets[w % k])
            self._sync_any()
            spin = _spin_cycles(self.device, self._event) if self.gpu_timing else 0
            return self._timed(fn, task_module, sets, refresh_seed0, iters, checked, spin)
        finally:
            if collect:
                gc.enable()

    def _timed(self, fn, task_module, sets, refresh_seed0, iters, checked, spin=0):
        k = len(sets)
        stream_ms, device_ms, host_ms, spin_ms = [], [], [], []
        kept = {"checked": None, "sample": None}
        others = 0
        for i in range(iters):
            idx = i % k
            fresh = make_inputs(task_module, refresh_seed0 + i, self.device)
            for dst, src in zip(sets[idx], fresh):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(src)
            del fresh
            if self.flush is not None:
                self.flush.zero_()
            self._sync_any()
            if self.cuda:
                start, end1, end2 = self._event(enable_timing=True), self._event(enable_timing=True), self._event(enable_timing=True)
                h0 = _perf_counter()
                if spin:
                    queued = self._event(enable_timing=True)
                    queued.record()
                    _sleep_cycles(spin)
                start.record()
                out = fn(*sets[idx])
                end1.record()
                if spin:
                    # The GPU is still spinning (about a millisecond): a blocking wait that
                    # long may yield the CPU, and on a loaded host the thread then wakes tens
                    # of microseconds late, which would count in the device-wide figure and
                    # the worker's clock. Polling the stream's end keeps the wake-up prompt;
                    # the device-wide synchronise below still waits for any other stream.
                    while not end1.query():
                        pass
                self._sync()
                end2.record()
                end2.synchronize()
                h1 = _perf_counter()
                stream_ms.append(start.elapsed_time(end1))
                device_ms.append(start.elapsed_time(end2))
                if spin:
                    spin_ms.append(queued.elapsed_time(start))
            else:
                h0 = _perf_counter()
                out = fn(*sets[idx])
                h1 = _perf_counter()
                stream_ms.append((h1 - h0) * 1e3)
                device_ms.append((h1 - h0) * 1e3)
            host_ms.append((h1 - h0) * 1e3)
            if i == checked:
                kept["checked"] = (i, _clone_outputs(out))
            else:
                others += 1
                if int.from_bytes(_urandom(8), "little") % others == 0:
                    kept["sample"] = None  # the previous sample's memory goes first
                    kept["sample"] = (i, _clone_outputs(out))
            del out
            if self._after_call is not None:
                self._after_call()
        times = {"stream_ms": stream_ms, "device_ms": device_ms, "host_ms": host_ms}
        if spin:
            times["spin_ms"] = spin_ms
        return times, kept

    def _sync_any(self):
        if self.cuda:
            self._sync()


def _spin_cycles(device, event_cls):
    """The cycles for which torch.cuda._sleep spins GPU_SPIN_MS on this device,
    measured once per process (the median of three spins on the GPU's clock)."""
    key = str(device)
    if key not in _cycles_per_ms:
        probe = 200000
        _sleep_cycles(probe)  # the first launch loads the kernel
        torch.cuda.synchronize(device)
        rates = []
        for _ in range(3):
            a, b = event_cls(enable_timing=True), event_cls(enable_timing=True)
            a.record()
            _sleep_cycles(probe)
            b.record()
            b.synchronize()
            rates.append(probe / max(a.elapsed_time(b), 1e-3))
        _cycles_per_ms[key] = sorted(rates)[1]
    return max(1, int(_cycles_per_ms[key] * GPU_SPIN_MS))
