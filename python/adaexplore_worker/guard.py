"""Watches what the harness relies on inside the candidate's process, and counts its kernel launches.

Everything here runs inside the candidate's process, so it is defence in depth: correctness is
decided in the trusted reference process on inputs the judge chose, and the judge's own clock
bounds the times a candidate reports (src/judge/timing_rules.cpp), whatever happens in here.
What this module adds is a clear verdict (`harness_tampering`, `background_threads`) for the usual
tricks: replacing or rewriting the harness's functions, classes and objects (code objects
included), the clocks, events, synchronisation, copies and comparisons its timing and comparison
paths call, installing trace hooks, signal handlers or torch modes that would run inside the
harness, and leaving threads running after a call.
"""

import builtins
import gc
import json
import json.decoder
import json.encoder
import os
import signal
import sys
import threading
import time
import types

import torch

_MISSING = object()
_EMPTY_CELL = object()

# Attributes of torch.Tensor that the harness calls, and whether the timer does.
_TENSOR_METHODS = (
    ("clone", True), ("copy_", True), ("zero_", True), ("__torch_function__", True), ("cpu", False),
    ("contiguous", False), ("numpy", False), ("view", False), ("reshape", False), ("to", False),
    ("detach", False), ("numel", False), ("element_size", False), ("__eq__", False), ("__sub__", False),
    ("abs", False), ("data_ptr", False), ("__getitem__", False), ("__setitem__", False), ("__len__", False),
    ("__iter__", False), ("shape", False), ("dtype", False), ("is_cuda", False),
)

# (module path, attribute, on the timing path) of torch functions the harness calls.
_TORCH_FUNCTIONS = (
    ("torch", "allclose", False), ("torch", "isclose", False), ("torch", "equal", False),
    ("torch", "manual_seed", True), ("torch", "initial_seed", False), ("torch", "from_file", False),
    ("torch", "empty", False), ("torch", "zeros", False), ("torch", "empty_like", False),
    ("torch", "get_rng_state", False), ("torch", "set_rng_state", False), ("torch", "no_grad", False),
    ("torch", "device", False), ("torch", "Tensor", False), ("torch", "get_float32_matmul_precision", False),
    ("torch.testing", "assert_close", False),
    ("torch.cuda", "synchronize", False), ("torch.cuda", "Event", False), ("torch.cuda", "Stream", False),
    ("torch.cuda", "current_stream", False), ("torch.cuda", "manual_seed_all", True),
    ("torch.cuda", "get_rng_state_all", False), ("torch.cuda", "set_rng_state_all", False),
    ("torch.cuda", "is_available", False), ("torch.cuda", "is_initialized", False),
    ("torch.cuda", "empty_cache", False), ("torch.cuda", "memory_reserved", False),
    ("torch.cuda", "memory_allocated", False),
    ("torch._C", "_cuda_synchronize", True), ("torch._C", "_len_torch_function_stack", False),
    ("torch._C", "_len_torch_dispatch_stack", False),
    ("torch.utils.cpp_extension", "load_inline", False),
    ("torch.profiler", "profile", False),
)

_STDLIB_FUNCTIONS = (
    (os, "urandom", False), (os, "write", False), (os, "read", False), (os, "close", False),
    (os, "open", False), (os, "fdopen", False), (os, "dup2", False), (os, "fstat", False),
    (threading, "enumerate", True), (threading, "active_count", False), (threading, "current_thread", False),
    (threading, "Thread", False), (threading, "settrace", False), (threading, "setprofile", False),
    (threading, "_trace_hook", False), (threading, "_profile_hook", False),
    (sys, "settrace", False), (sys, "setprofile", False), (sys, "gettrace", True), (sys, "getprofile", True),
    (signal, "signal", False), (signal, "alarm", False), (signal, "setitimer", False),
    (signal, "getsignal", False), (gc, "collect", False), (gc, "disable", False), (gc, "enable", False),
    (gc, "isenabled", False), (types, "FunctionType", False),
)

# Signals whose handlers run Python code at arbitrary points (a timer interrupting the harness).
_SIGNALS = tuple(getattr(signal, n) for n in ("SIGALRM", "SIGVTALRM", "SIGPROF", "SIGUSR1", "SIGUSR2", "SIGIO")
                 if hasattr(signal, n))


def _resolve(path):
    obj = sys.modules.get(path)
    if obj is None:
        obj = __import__(path, fromlist=["_"])
    return obj


def _functions_of(value):
    """The plain Python functions behind a class attribute (methods, static and class methods,
    property accessors)."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset, value.fdel) if isinstance(f, types.FunctionType)]
    return [value] if isinstance(value, types.FunctionType) else []


class Guard:
    """A snapshot of the harness and of everything its timing and comparison paths call, taken
    before any candidate code runs, and the checks against it.

    `check()` compares the whole snapshot (after the import, after the build and at the end of
    every request); `after_call()` compares the part the timer relies on, after every timed call.
    Whatever a check finds is remembered, so that a change undone before the end of a request is
    still reported with it.
    """

    def __init__(self, harness_modules, watched=()):
        self._entries = []
        self._timing = []  # the entries after_call compares
        self._labels = set()
        self._seen = set()
        self._thread_names = set()
        for mod, timing_names in harness_modules:
            self._module(mod, mod.__name__, harness=True, timing_names=timing_names)
        self._module(builtins, "builtins")
        self._module(time, "time")
        for mod in (json, json.encoder, json.decoder):
            self._module(mod, mod.__name__)
        for cls in (json.JSONEncoder, json.JSONDecoder):
            self._class(cls, "json." + cls.__name__)
        for obj, name, timing in _STDLIB_FUNCTIONS:
            self._attr(obj, name, "%s.%s" % (obj.__name__, name), timing)
        for path, name, timing in _TORCH_FUNCTIONS:
            try:
                obj = _resolve(path)
            except ImportError:
                continue
            self._attr(obj, name, "%s.%s" % (path, name), timing)
        for name, timing in _TENSOR_METHODS:
            self._attr(torch.Tensor, name, "torch.Tensor." + name, timing)
        for name in ("record", "elapsed_time", "synchronize", "__init__", "__new__"):
            self._attr(torch.cuda.Event, name, "torch.cuda.Event." + name, True)
        self._class(torch.cuda.Event, "torch.cuda.Event")
        self._profiler_classes()
        self._triton()
        self._probe("sys.gettrace()", sys.gettrace, True)
        self._probe("sys.getprofile()", sys.getprofile, True)
        self._probe("gc.callbacks", lambda: tuple(gc.callbacks), True)
        self._probe("signal handlers", lambda: tuple(signal.getsignal(s) for s in _SIGNALS), True)
        self._probe("torch function modes", torch._C._len_torch_function_stack, True)
        self._probe("torch dispatch modes", torch._C._len_torch_dispatch_stack, True)
        self._threads = frozenset(threading.enumerate())
        # Originals captured before any candidate code runs; the timer uses these.
        self.sync = getattr(torch._C, "_cuda_synchronize", None)
        self.event = torch.cuda.Event
        for label, obj, keys in watched:
            self.watch(obj, label, keys, timing=False)
        self.watch(self, "the guard", timing=False)

    # -- building the snapshot ---------------------------------------------
    def _add(self, entry):
        if entry[1] in self._labels:
            return
        self._labels.add(entry[1])
        self._entries.append(entry)
        if entry[2]:
            self._timing.append(entry)

    def _attr(self, obj, name, label, timing=False):
        value = _lookup(obj, name)
        self._add(("attr", label, timing, obj, name, value))
        for fn in _functions_of(value):
            self._function(fn, label, timing)

    def _probe(self, label, fn, timing=False):
        self._add(("probe", label, timing, fn, fn()))

    def _mapping(self, label, get, timing, keys=None):
        live = get()
        pairs = tuple((k, live.get(k, _MISSING)) for k in (keys if keys is not None else list(live)))
        self._add(("mapping", label, timing, get, pairs, keys is None))

    def _function(self, fn, label, timing=False):
        kw = fn.__kwdefaults__
        closure = fn.__closure__
        self._add(("function", label + " (code)", timing, fn, fn.__code__, fn.__defaults__, kw,
                   None if kw is None else tuple(kw.items()), closure,
                   None if closure is None else tuple(_cell(c) for c in closure)))

    def _class(self, cls, label, timing=False):
        self._add(("type", label + " (bases)", timing, cls, cls.__bases__))
        self._mapping(label, lambda c=cls: c.__dict__, timing)
        for name, value in list(cls.__dict__.items()):
            for fn in _functions_of(value):
                self._function(fn, "%s.%s" % (label, name), timing)

    def _module(self, mod, label, harness=False, timing_names=()):
        """A module's namespace; for a module of the harness (or the task), also its functions'
        code and its classes. `timing_names`: the names of the module that after_call compares
        too (each name, and a function's code or a class's attributes)."""
        self._mapping(label, lambda m=mod: vars(m), False)
        if not harness:
            return
        for name, value in list(vars(mod).items()):
            where = getattr(value, "__module__", None)
            if isinstance(value, types.FunctionType) and where == mod.__name__:
                self._function(value, "%s.%s" % (label, name), name in timing_names)
            elif isinstance(value, type) and where == mod.__name__:
                self._class(value, "%s.%s" % (label, name), name in timing_names)
        for name in timing_names:
            self._attr(mod, name, "%s.%s" % (label, name), True)

    def _profiler_classes(self):
        try:
            from torch.autograd import profiler_util
            from torch.profiler import profiler
        except ImportError:
            return
        for cls in (profiler.profile, profiler._KinetoProfile, profiler_util.EventList, profiler_util.FunctionEvent):
            self._class(cls, "%s.%s" % (cls.__module__, cls.__name__))

    def _triton(self):
        try:
            from triton.runtime import jit as tjit
        except Exception:  # triton absent: CUDA candidates only
            return
        for name in ("run", "__getitem__", "__call__"):
            self._attr(tjit.JITFunction, name, "triton.JITFunction." + name)
        try:
            from triton.runtime.interpreter import InterpretedFunction
        except Exception:
            return
        for name in ("run", "__getitem__", "__call__"):
            self._attr(InterpretedFunction, name, "triton.InterpretedFunction." + name)

    def watch(self, obj, label, keys=None, timing=True):
        """Adds an object of the harness (an instance) to the snapshot: its class and its
        attributes (`keys`, or all of them); watching the same label again replaces it."""
        self._entries[:] = [e for e in self._entries if e[1] not in (label, label + " (class)")]
        self._timing[:] = [e for e in self._timing if e[1] not in (label, label + " (class)")]
        self._labels.discard(label)
        self._labels.discard(label + " (class)")
        self._add(("class_of", label + " (class)", timing, obj, type(obj)))
        self._mapping(label, lambda o=obj: o.__dict__, timing, keys)

    # -- checks ----------------------------------------------------------
    def _changed(self, entry):
        kind = entry[0]
        if kind == "attr":
            return _lookup(entry[3], entry[4]) is not entry[5]
        if kind == "mapping":
            live = entry[3]()
            pairs = entry[4]
            if (entry[5] and len(live) != len(pairs)) or any(live.get(k, _MISSING) is not v for k, v in pairs):
                return self._which(entry)
            return False
        if kind == "function":
            fn = entry[3]
            if fn.__code__ is not entry[4] or fn.__defaults__ is not entry[5] or fn.__kwdefaults__ is not entry[6]:
                return True
            if fn.__closure__ is not entry[8]:
                return True
            if entry[7] is not None and (len(entry[6]) != len(entry[7]) or any(
                    entry[6].get(k, _MISSING) is not v for k, v in entry[7])):
                return True
            return entry[9] is not None and not _same_items(tuple(_cell(c) for c in entry[8]), entry[9])
        if kind == "type":
            return entry[3].__bases__ != entry[4]
        if kind == "class_of":
            return type(entry[3]) is not entry[4]
        if kind == "probe":
            try:
                now = entry[3]()
            except Exception:
                return True
            return not _same(now, entry[4])
        return False

    @staticmethod
    def _which(entry):
        """The names of a mapping's entries that changed, were added or removed."""
        live, pairs = dict(entry[3]()), dict(entry[4])
        names = [k for k, v in pairs.items() if live.get(k, _MISSING) is not v]
        if entry[5]:
            names += [k for k in live if k not in pairs]
        return ["%s.%s" % (entry[1], k) for k in names] or [entry[1]]

    def check(self, timing_only=False):
        """Compares the snapshot (or its timing part); changes are remembered."""
        changed = self._changed
        for entry in tuple(self._timing if timing_only else self._entries):
            try:
                found = changed(entry)
            except Exception:
                found = True
            if found:
                self._seen.update(found if isinstance(found, list) else [entry[1]])

    def after_call(self):
        """After each timed call: the timing part of the snapshot, and threads left running."""
        self.check(timing_only=True)
        self._note_threads()

    def tampered(self):
        """Everything found changed so far, the whole snapshot checked now."""
        self.check()
        return sorted(self._seen)[:40]

    def _note_threads(self):
        for t in threading.enumerate():
            if t not in self._threads and t.is_alive():
                self._thread_names.add(t.name)

    def new_threads(self):
        """Python threads started since the guard was made that were alive at a check (after a
        timed call, or now)."""
        self._note_threads()
        return sorted(self._thread_names)


def _lookup(obj, name):
    """An attribute as stored: for a class, the raw entry of the first class of its MRO that
    has it (a classmethod, not a new bound method at every lookup)."""
    if isinstance(obj, type):
        for klass in obj.__mro__:
            if name in klass.__dict__:
                return klass.__dict__[name]
        return _MISSING
    return getattr(obj, name, _MISSING)


def _cell(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY_CELL


def _same_items(a, b):
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _same(a, b):
    if a is b:
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) is type(b) and isinstance(a, (int, str, bool)):
        return a == b
    return False


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
