"""Detects a candidate that tampers with the harness, and counts its kernel launches.

Everything here runs inside the candidate's process, so it is defence in
depth: correctness is decided elsewhere (the trusted reference process), and
timings are cross-checked by the parent's own clock. What this module adds is
a clear verdict for the common tricks: patching timers, synchronisation,
comparison functions or signal handlers, and starting background threads.
"""

import builtins
import signal
import threading
import time

import torch

# (object, attribute name) pairs whose identity must not change while a
# candidate is loaded and run.
def _sensitive():
    pairs = [
        (builtins, "type"), (builtins, "isinstance"), (builtins, "open"),
        (time, "perf_counter"), (time, "time"), (time, "monotonic"), (time, "sleep"),
        (signal, "signal"), (signal, "alarm"), (signal, "setitimer"),
        (torch, "allclose"), (torch, "equal"), (torch, "isclose"), (torch, "manual_seed"),
        (torch, "from_file"), (torch, "empty"), (torch, "zeros"),
        (torch.Tensor, "clone"), (torch.Tensor, "cpu"), (torch.Tensor, "copy_"),
        (torch.Tensor, "contiguous"), (torch.Tensor, "numpy"), (torch.Tensor, "view"),
        (torch.Tensor, "reshape"), (torch.Tensor, "zero_"), (torch.Tensor, "to"),
        (torch.Tensor, "__eq__"), (torch.Tensor, "__sub__"), (torch.Tensor, "abs"),
        (torch.cuda, "synchronize"), (torch.cuda, "Event"), (torch.cuda, "manual_seed_all"),
        (torch.cuda.Event, "record"), (torch.cuda.Event, "elapsed_time"),
        (torch.cuda.Event, "synchronize"), (torch.testing, "assert_close"),
    ]
    try:
        import torch.profiler as profiler  # the GPU's evidence of the launched kernels, and their times
        pairs.append((profiler, "profile"))
    except ImportError:
        pass
    if hasattr(torch._C, "_cuda_synchronize"):
        pairs.append((torch._C, "_cuda_synchronize"))
    return pairs


class Guard:
    def __init__(self, own_modules):
        self.pairs = _sensitive()
        self.snapshot = {self._key(o, a): getattr(o, a, None) for o, a in self.pairs}
        # Our own functions too: a candidate must not rewrite the harness.
        for mod in own_modules:
            for name, val in list(vars(mod).items()):
                if callable(val) and not name.startswith("__"):
                    self.pairs.append((mod, name))
                    self.snapshot[self._key(mod, name)] = val
        self.threads = set(threading.enumerate())
        # Originals captured before any candidate code runs; the timer uses these.
        self.sync = getattr(torch._C, "_cuda_synchronize", None)
        self.event = torch.cuda.Event

    @staticmethod
    def _key(obj, attr):
        return "%s.%s" % (getattr(obj, "__name__", type(obj).__name__), attr)

    def tampered(self):
        changed = []
        for obj, attr in self.pairs:
            key = self._key(obj, attr)
            if getattr(obj, attr, None) is not self.snapshot[key]:
                changed.append(key)
        return changed

    def new_threads(self):
        """Python threads started since the guard was made and still alive."""
        return sorted(t.name for t in threading.enumerate()
                      if t not in self.threads and t.is_alive())


class LaunchCounter:
    """Counts launches of Triton kernels and calls into inline-compiled extensions.

    On a GPU the profiler's kernel list is the primary evidence; this counter
    is what CPU mode (Triton's interpreter) relies on.
    """

    def __init__(self):
        self.launched = []
        self._install_triton()
        self._install_extensions()

    def _record(self, name):
        if len(self.launched) < 10000:
            self.launched.append(name)

    def _install_triton(self):
        try:
            from triton.runtime import jit as tjit
        except Exception:  # triton absent: CUDA candidates only
            return
        counter = self
        classes = [tjit.JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction
            classes.append(InterpretedFunction)
        except Exception:
            pass
        for cls in classes:
            original = cls.run

            def run(self, *args, __orig=original, **kwargs):
                if not kwargs.get("warmup", False):
                    fn = getattr(self, "fn", None)
                    counter._record(getattr(fn, "__name__", "triton_kernel"))
                return __orig(self, *args, **kwargs)

            cls.run = run

    def _install_extensions(self):
        from torch.utils import cpp_extension
        counter = self
        original = cpp_extension.load_inline

        def load_inline(*args, **kwargs):
            module = original(*args, **kwargs)
            return _CountingModule(module, counter)

        cpp_extension.load_inline = load_inline
        self.load_inline = load_inline


class _CountingModule:
    def __init__(self, module, counter):
        object.__setattr__(self, "_m", module)
        object.__setattr__(self, "_c", counter)

    def __getattr__(self, name):
        attr = getattr(object.__getattribute__(self, "_m"), name)
        if callable(attr):
            counter = object.__getattribute__(self, "_c")

            def call(*a, **k):
                counter._record("ext:" + name)
                return attr(*a, **k)
            return call
        return attr
