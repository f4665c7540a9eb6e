"""Build events: while a request runs, the candidate's builds (Triton JIT
compilations and autotuning, CUDA extensions, torch.compile) are reported to
the judge as event lines on the protocol channel, so that the judge gives the
builds their own deadline and the call another (docs/worker-protocol.md,
"Build events"). A hung call is then a timeout after seconds, not after the
build deadline.

The events only ever lengthen the time a candidate gets up to the build
deadline, which applied to the whole first call before: a candidate that
forges them gains nothing over that.
"""

import functools
import json
import threading


class BuildEvents:
    """Counts nested builds and writes `{"event": "build", "state": "start"|"end"}`
    when the outermost one starts and ends."""

    def __init__(self, proto):
        self._proto = proto
        self._lock = threading.Lock()
        self._depth = 0

    def _write(self, state):
        if self._proto is not None:
            self._proto.write(json.dumps({"event": "build", "state": state}) + "\n")

    def start(self):
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                self._write("start")

    def end(self):
        with self._lock:
            if self._depth == 0:
                return
            self._depth -= 1
            if self._depth == 0:
                self._write("end")

    def reset(self):
        """Closes a build left open (a compiler that raised between its hooks)."""
        with self._lock:
            if self._depth:
                self._depth = 0
                self._write("end")

    def wrap(self, fn):
        @functools.wraps(fn)
        def built(*args, **kwargs):
            self.start()
            try:
                return fn(*args, **kwargs)
            finally:
                self.end()
        built.__adaexplore_build__ = True
        return built

    def install(self):
        """Hooks the builders this worker knows; each is optional."""
        try:
            from triton import knobs
            previous_cache, previous_post = knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook

            def cache_hook(*args, **kwargs):
                self.start()
                return previous_cache(*args, **kwargs) if previous_cache else False

            def post_hook(*args, **kwargs):
                self.end()
                return previous_post(*args, **kwargs) if previous_post else None

            knobs.runtime.jit_cache_hook = cache_hook
            knobs.runtime.jit_post_compile_hook = post_hook
        except Exception:
            pass
        try:
            from triton.runtime import autotuner
            if not getattr(autotuner.Autotuner._bench, "__adaexplore_build__", False):
                autotuner.Autotuner._bench = self.wrap(autotuner.Autotuner._bench)
        except Exception:
            pass
        try:
            import torch.utils.cpp_extension as ext
            if not getattr(ext._jit_compile, "__adaexplore_build__", False):
                ext._jit_compile = self.wrap(ext._jit_compile)
        except Exception:
            pass
        try:
            from torch._dynamo.callback import callback_handler
            callback_handler.register_start_callback(lambda *a, **k: self.start())
            callback_handler.register_end_callback(lambda *a, **k: self.end())
        except Exception:
            pass
