"""The candidate role: hosts one ModelNew, runs it, writes its outputs for the trusted side."""

import os
import re
import sys

import torch

import adaexplore_worker

from . import builds as builds_mod
from . import common
from . import guard as guard_mod
from . import transfer

_TRITON_DEF = re.compile(r"@triton\.(?:jit|autotune|heuristics)\b[^\n]*\n(?:\s*@[^\n]*\n|[^\n]*\n)*?\s*def\s+(\w+)\s*\(")
_CUDA_DEF = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")


def own_kernel_names(source):
    names = set(_TRITON_DEF.findall(source)) | set(_CUDA_DEF.findall(source))
    return sorted(names)


def classify(exc, phase):
    """Map an exception to a verdict status."""
    text = str(exc)
    mod = type(exc).__module__ or ""
    if "Error building extension" in text or "ninja" in text and "error" in text.lower():
        return "compile_error", common.trim_compiler_output(text)
    if mod.startswith("triton.compiler") or type(exc).__name__ in ("CompilationError", "CompileTimeAssertionFailure"):
        return "compile_error", common.error_text(exc)
    if phase == "import":
        return "compile_error", common.error_text(exc)
    return "runtime_error", common.error_text(exc)


class CandidateRole:
    def __init__(self, channel=None, proto=None):
        self.channel = channel
        self.proto = proto
        self.vmm = False
        self.model = None
        self.task = None
        self.device = "cpu"
        self.guard = None
        self.counter = None
        self.own = []
        self.builds = builds_mod.BuildEvents(proto)
        self._warm_seed = 0

    # -- helpers ---------------------------------------------------------
    def _integrity(self):
        """Flags for harness tampering, background threads or TF32 switched on."""
        flags = {}
        tampered = self.guard.tampered() if self.guard else []
        if tampered:
            flags["tampered"] = tampered
        threads = self.guard.new_threads() if self.guard else []
        if threads:
            flags["threads"] = threads
        if common.tf32_enabled():
            flags["tf32"] = True
        return flags

    def _fail(self, status, error, **extra):
        resp = {"ok": False, "status": status, "error": error}
        resp.update(extra)
        resp.update(self._integrity())
        return resp

    # -- operations ------------------------------------------------------
    def op_load(self, req):
        self.device = req["device"]
        self._warm_seed = req["warm_seed"]
        if req.get("extensions_dir"):
            # CUDA extensions build here, keyed by the candidate's source: a
            # candidate judged again (or resumed) never compiles twice.
            os.environ["TORCH_EXTENSIONS_DIR"] = req["extensions_dir"]
        common.configure_numerics()
        self.counter = guard_mod.LaunchCounter()
        self.builds.install()
        try:
            self.task = common.load_module(req["task"], "adaexplore_task")
            common.set_precision(self.task, req.get("precision", "fp32"))
        except Exception as exc:  # validated earlier, so this is an environment problem
            return self._fail("runtime_error", "task failed to load: " + common.error_text(exc))
        with open(req["candidate"], encoding="utf-8", errors="replace") as f:
            source = f.read()
        self.own = own_kernel_names(source)
        # The snapshot of the harness, the task and what they call, before any candidate code
        # runs; checked after the import, after the build and at the end of every request.
        self._snapshot()
        try:
            mod = common.load_module(req["candidate"], "adaexplore_candidate")
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                return self._fail("crashed", "candidate exited while being imported: %r" % (exc,))
            status, text = classify(exc, "import")
            return self._fail(status, text)
        self.guard.check()
        cls = getattr(mod, "ModelNew", None)
        if cls is None:
            return self._fail("compile_error", "the candidate defines no class ModelNew")
        try:
            self.model = common.build_model(cls, common.init_inputs(self.task), req["init_seed"], self.device,
                                            self.task)
        except Exception as exc:
            status, text = classify(exc, "init")
            return self._fail(status, text)
        self.guard.check()
        # Outputs can go to the trusted side device to device when this
        # process can export device memory and has a descriptor channel.
        self.vmm = bool(self.channel is not None and self.device.startswith("cuda") and transfer.available())
        flags = self._integrity()
        return {"ok": True, "own_kernels": self.own, "vmm": self.vmm, **flags}

    def op_warm(self, req):
        """One call on throw-away inputs: triggers Triton's JIT and lazy builds so
        that the trials and the timing see a compiled kernel. The builds it
        starts are reported as build events: the judge's deadline for the call
        itself excludes them."""
        if self.model is None:
            return self._fail("runtime_error", "no candidate loaded")
        try:
            inputs = common.make_inputs(self.task, self._warm_seed, self.device)
            with torch.no_grad():
                self.model(*inputs)
            common.sync(self.device)
        except Exception as exc:
            status, text = classify(exc, "run")
            return self._fail(status, text)
        finally:
            self.builds.reset()
        return {"ok": True, **self._integrity()}

    def op_trial(self, req):
        seed, out_dir, index = req["seed"], req["out_dir"], req["index"]
        inputs = common.make_inputs(self.task, seed, self.device)
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        kernels = None
        # `launched` reports this trial's launches only: the kernel has to run
        # in every call, not once during warm-up or the first trial.
        del self.counter.launched[:]
        try:
            with torch.no_grad():
                if req.get("profile") and self.device.startswith("cuda"):
                    kernels, gpu, out = self._profiled(inputs, req.get("flush_bytes", 0),
                                                        max(1, min(int(req.get("profile_calls", 1)), 16)))
                else:
                    out = self.model(*inputs)
                    common.sync(self.device)
        except Exception as exc:
            status, text = classify(exc, "run")
            return self._fail(status, text)
        try:
            outs = common.as_tensor_list(out)
        except TypeError as exc:
            return self._fail("mismatch", str(exc))
        mutated = [i for i, (b, a) in enumerate(zip(before, inputs))
                   if isinstance(b, torch.Tensor) and not _same_bits(b, a)]
        try:
            files = self._write(outs, out_dir, "t%d" % index, req.get("transport"))
        except transfer.TransferError as exc:
            return {"ok": False, "status": "internal", "error": "output transfer failed: %s" % exc,
                    "transport_failed": True}
        del out, outs, inputs, before
        common.release_cached(self.device)  # leave room for the other workers on this GPU
        resp = {"ok": True, "outputs": files, "inputs_mutated": mutated,
                "launched": sorted(set(self.counter.launched))}
        if kernels is not None:
            resp["gpu_kernels"] = kernels
            resp.update(gpu)
        resp.update(self._integrity())
        return resp

    def _profiled(self, inputs, flush_bytes=0, calls=1):
        """Calls under the profiler, each after an L2 flush (as before each
        timed call): the names of the GPU activities (kernels, copies, memsets)
        of the last call, whose output is returned and compared, and per call
        their times on the GPU's own clock: `gpu_span_ms` from the first
        activity's start to the last one's end (gaps between launches included,
        the host's time before the first launch not), `gpu_busy_ms` the sum of
        their durations. The judge takes the medians. Without room for the
        flush buffer the calls run unflushed and report no GPU times (a cached
        input would flatter them)."""
        from torch.profiler import profile, ProfilerActivity
        flush, timed = None, True
        if flush_bytes > 0:
            try:
                flush = torch.empty(int(flush_bytes) // 4, dtype=torch.int32, device=self.device)
            except torch.OutOfMemoryError:
                timed = False
        spans, busy, breakdowns = [], [], []
        names, out = set(), None
        # Every call starts from the generators' state after the inputs were made, as the
        # reference's call did: a task that draws random numbers in its forward (dropout in
        # training mode) then gets the same draws in the compared (last) call.
        cuda = self.device.startswith("cuda")
        rng = torch.get_rng_state(), (torch.cuda.get_rng_state_all() if cuda else None)
        for _ in range(calls):
            out = None  # the previous call's output is not kept alive across the next one
            torch.set_rng_state(rng[0])
            if cuda:
                torch.cuda.set_rng_state_all(rng[1])
            if flush is not None:
                flush.zero_()
            common.sync(self.device)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                out = self.model(*inputs)
                common.sync(self.device)
            names, times = set(), []
            for ev in prof.events():
                if str(getattr(ev, "device_type", "")).endswith("CUDA"):
                    names.add(ev.name)
                    tr = getattr(ev, "time_range", None)
                    if tr is not None and tr.end >= tr.start:
                        times.append((ev.name, tr.start, tr.end))
            if times:
                spans.append((max(e for _, _, e in times) - min(s for _, s, _ in times)) / 1e3)
                busy.append(sum(e - s for _, s, e in times) / 1e3)
                breakdowns.append(kernel_breakdown(times))
        del flush
        gpu = {}
        if spans and timed:
            # The breakdown of the call whose busy time is the median (the judge's figure),
            # so that its kernels' times add up to that figure.
            median = sorted(range(len(busy)), key=lambda i: busy[i])[(len(busy) - 1) // 2]
            gpu = {"gpu_span_ms": spans, "gpu_busy_ms": busy, "gpu_kernel_times": breakdowns[median]}
        return sorted(names)[:200], gpu, out

    def _write(self, outs, out_dir, stem, transport=None):
        """Hands the outputs over: device to device (one descriptor per output,
        sent before the reply) or as raw files."""
        files = []
        if transport == "vmm" and self.vmm and all(t.is_cuda for t in outs):
            for t in outs:
                fd, nbytes = transfer.export(t)
                try:
                    self.channel.send(fd)
                finally:
                    os.close(fd)
                files.append({"vmm": True, "bytes": nbytes, **common.describe(t)})
            return files
        for j, t in enumerate(outs):
            path = os.path.join(out_dir, "%s_o%d.bin" % (stem, j))
            common.write_raw(t, path)
            files.append({"path": path, **common.describe(t)})
        return files

    def op_time(self, req):
        self._kept = None
        timer = common.Timer(self.device, req.get("flush_bytes", 0), synchronize=self.guard.sync,
                             event_cls=self.guard.event, after_call=self.guard.after_call,
                             timing=req.get("timing", "host"))
        self.guard.watch(timer, "the timer")
        try:
            with torch.no_grad():
                times, kept = timer.run(self.model, self.task, req["set_seeds"], req["refresh_seed0"],
                                        req["warmup"], req["iters"], req.get("check_index"))
        except Exception as exc:
            status, text = classify(exc, "run")
            return self._fail(status, text)
        # The kept outputs are written by `final` requests: writing them is not part of the
        # timed request, which the parent's clock measures.
        self._kept = kept
        resp = {"ok": True, **times, "checked_index": kept["checked"][0] if kept["checked"] else None,
                "sample_index": kept["sample"][0] if kept["sample"] else None}
        resp.update(self._integrity())
        del timer
        common.free_cached(self.device)  # as the baseline's timing request does
        return resp

    def op_final(self, req):
        """Writes a kept timed output (`pick`: `checked`, the default, or `sample`) for the
        trusted comparison; the judge compares it on the seed it derived for that call."""
        pick = req.get("pick", "checked")
        kept = (getattr(self, "_kept", None) or {}).get(pick)
        if kept is None:
            return self._fail("runtime_error", "no timed call to report (%s)" % pick)
        index, out = kept  # kept: a request repeated after a failed transfer writes it again
        try:
            outs = common.as_tensor_list(out)
        except TypeError as exc:
            return self._fail("mismatch", str(exc))
        try:
            files = self._write(outs, req["out_dir"], "timed_" + pick, req.get("transport"))
        except transfer.TransferError as exc:
            return {"ok": False, "status": "internal", "error": "output transfer failed: %s" % exc,
                    "transport_failed": True}
        resp = {"ok": True, "final": {"index": index, "outputs": files}}
        resp.update(self._integrity())
        return resp

    def _snapshot(self):
        """The guard over the harness's modules (the timer's in full after every timed call),
        the task's module, what they call, and the harness's own objects."""
        main = sys.modules.get("__main__")
        # With what the timer calls during the loop, compared after every timed call.
        modules = [(adaexplore_worker, ()), (builds_mod, ()), (common, ("Timer", "make_inputs", "seed_all", "_clone_outputs", "gc",
                                                      "checked_call", "_perf_counter", "_urandom", "torch",
                                                      "_sleep_cycles", "_spin_cycles", "GPU_SPIN_MS")),
                   (guard_mod, ()), (transfer, ()), (sys.modules[__name__], ()), (self.task, ("get_inputs", common.DTYPE_ATTR))]
        if main is not None and getattr(getattr(main, "__spec__", None), "name", "") == "adaexplore_worker.__main__":
            modules.append((main, ()))
        watched = [("the launch counter", self.counter, None)]
        if self.channel is not None:
            watched.append(("the descriptor channel", self.channel, None))
        if self.proto is not None:
            watched.append(("the protocol writer", self.proto, None))
        guard = self.guard = guard_mod.Guard(modules, watched)
        guard.watch(self, "the candidate role",
                    ("channel", "proto", "guard", "counter", "task", "device", "own", "builds", "_warm_seed"),
                    timing=False)
        return guard


def kernel_breakdown(times, limit=50):
    """The GPU activities of one call, `(name, start_us, end_us)`, summed by name:
    `[{"name", "ms", "launches"}]`, the longest first; beyond `limit` names the
    rest is one entry named "(other)"."""
    by_name = {}
    for name, start, end in times:
        ms, n = by_name.get(name, (0.0, 0))
        by_name[name] = (ms + (end - start) / 1e3, n + 1)
    rows = [{"name": k, "ms": v[0], "launches": v[1]}
            for k, v in sorted(by_name.items(), key=lambda kv: (-kv[1][0], kv[0]))]
    if len(rows) > limit:
        rest = rows[limit - 1:]
        rows = rows[:limit - 1] + [{"name": "(other)", "ms": sum(r["ms"] for r in rest),
                                    "launches": sum(r["launches"] for r in rest)}]
    return rows


def _same_bits(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a = a.contiguous().reshape(-1)
    b = b.contiguous().reshape(-1)
    if a.numel() == 0:
        return True
    return bool(torch.equal(a.view(torch.uint8), b.view(torch.uint8)))
