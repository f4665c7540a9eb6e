"""The trusted role: runs only the task's own Model, compares and times baselines.

Reference outputs live in this process's memory and nowhere else; candidate
outputs arrive as raw files written by the candidate's process and are read
here with a dtype and shape the candidate cannot influence beyond what it
declared.
"""

import collections
import gc
import os
import time

import torch

from . import common
from . import transfer


class _Task:
    def __init__(self, module, model, device):
        self.module = module
        self.model = model
        self.device = device
        self.compiled = None
        self.outputs = []  # [{shape, dtype}] of the reference's outputs

    def null(self, *inputs):
        """The timing loop's null model: no work, outputs of the reference's shapes (unfilled),
        so that the loop around it (refreshes, flushes, synchronisations, the kept outputs'
        clones) costs what it costs around a real model."""
        return [torch.empty(d["shape"], dtype=getattr(torch, d["dtype"]), device=self.device) for d in self.outputs]


class ReferenceRole:
    """Holds a few tasks loaded at a time (least recently used go first).

    Reference outputs are recomputed for every comparison: seeds are fresh for
    every candidate, so there is nothing to reuse, and device memory stays free
    for the candidates.
    """

    def __init__(self, max_tasks=4, channel=None):
        self.channel = channel
        self.tasks = collections.OrderedDict()
        self.requests = {}  # key -> the load_task request, to reload an evicted task
        self.max_tasks = max_tasks

    def _task(self, key):
        if key not in self.tasks:
            if key not in self.requests:
                raise KeyError("task %s was never loaded" % key)
            resp = self.op_load_task(self.requests[key])
            if not resp.get("ok"):
                raise RuntimeError("reloading the task failed: %s" % resp.get("error"))
        self.tasks.move_to_end(key)
        return self.tasks[key]

    def _remember(self, key, task, req):
        self.tasks[key] = task
        self.requests[key] = req
        self.tasks.move_to_end(key)
        while len(self.tasks) > self.max_tasks:
            self.tasks.popitem(last=False)
            gc.collect()
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                torch.cuda.empty_cache()

    def _reference(self, task, seed):
        inputs = common.make_inputs(task.module, seed, task.device)
        with torch.no_grad():
            out = task.model(*inputs)
        common.sync(task.device)
        return [t.detach() for t in common.as_tensor_list(out)]

    def op_load_task(self, req):
        """Build the reference, run it, describe its output and check for degeneracy."""
        device = req["device"]
        key = req["key"]
        common.configure_numerics()
        try:
            module = common.load_module(req["task"], "adaexplore_task")
        except Exception as exc:
            return {"ok": False, "error": "task does not import: " + _one_line(exc)}
        try:
            common.set_precision(module, req.get("precision", "fp32"))
        except ValueError as exc:
            return {"ok": False, "error": str(exc)}
        for fn in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(module, fn):
                return {"ok": False, "error": "task defines no %s" % fn}
        try:
            model = common.build_model(module.Model, common.init_inputs(module), req["init_seed"], device, module)
        except Exception as exc:
            return {"ok": False, "error": "Model(*get_init_inputs()) failed: " + _one_line(exc)}
        task = _Task(module, model, device)
        probe = req["probe_seeds"]
        cuda = device.startswith("cuda")
        if cuda:
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        try:
            outs_a, flops = self._counted(task, probe[0])
            peak = torch.cuda.max_memory_allocated() - before if cuda else 0
            t0 = time.perf_counter()
            outs_b = self._reference(task, probe[1])
            call_ms = (time.perf_counter() - t0) * 1e3
        except TypeError as exc:
            return {"ok": False, "error": "reference does not return tensors: " + _one_line(exc)}
        except Exception as exc:
            return {"ok": False, "error": "reference forward failed: " + _one_line(exc)}
        degenerate = []
        if all(_same(a, b) for a, b in zip(outs_a, outs_b)):
            degenerate.append("input_independent")
        tol = req["tolerance"]
        if all(_zero_passes(a, tol) for a in outs_a):
            degenerate.append("zero_output_passes")
        self._remember(key, task, req)
        described = [common.describe(t) for t in outs_a]
        task.outputs = described
        del outs_a, outs_b
        common.release_cached(device)
        # What one forward needs on the device (inputs, intermediates, outputs:
        # the peak above what was allocated; on CPU the inputs and outputs),
        # plus the parameters: the judge sizes its device memory admission by it.
        if not cuda:
            inputs = common.make_inputs(module, probe[0], device)
            peak = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
            peak += sum(_nbytes(d) for d in described)
            del inputs
        params = sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()))
        try:  # shapes only: on the meta device where get_inputs() allows it
            inputs = common.make_inputs(module, probe[0], "meta")
        except Exception:
            inputs = common.make_inputs(module, probe[0], device)
        in_bytes = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
        del inputs
        # What any implementation has to move at least (its inputs, weights and outputs once)
        # and the matrix products' FLOPs: the verdict's roofline figures.
        min_bytes = in_bytes + params + sum(_nbytes(d) for d in described)
        return {"ok": True, "outputs": described, "degenerate": degenerate, "footprint_bytes": int(peak + params),
                "call_ms": call_ms, "flops": flops, "min_bytes": int(min_bytes)}

    def _counted(self, task, seed):
        """The reference's outputs, and the FLOPs of its matrix products and convolutions
        (torch's FLOP counter; None when the counter cannot follow the forward)."""
        try:
            from torch.utils.flop_counter import FlopCounterMode
            counter = FlopCounterMode(display=False)
            with counter:
                outs = self._reference(task, seed)
            return outs, int(counter.get_total_flops())
        except (TypeError, ImportError):
            raise
        except Exception:
            return self._reference(task, seed), None

    def op_device_facts(self, req):
        """The device as prompts and roofline figures describe it: name, SMs (CPU: cores),
        memory, and two measured peaks: the copy bandwidth (read + write bytes per second of
        a large device-to-device copy), the fp32 matrix-product rate (no TF32) and, on a GPU,
        the TF32 tensor-core rate."""
        device = req["device"]
        cuda = device.startswith("cuda")
        common.configure_numerics()
        if cuda:
            props = torch.cuda.get_device_properties(0)
            facts = {"name": props.name, "sms": props.multi_processor_count, "memory_bytes": props.total_memory}
        else:
            import platform
            facts = {"name": platform.processor() or platform.machine() or "cpu", "sms": os.cpu_count() or 1,
                     "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")}
        copy_elems = (1 << 30) // 4 if cuda else (32 << 20) // 4
        n = 8192 if cuda else 512
        reps = 10 if cuda else 3
        try:
            a = torch.empty(copy_elems, dtype=torch.float32, device=device).fill_(1.0)
            b = torch.empty_like(a)
            seconds = _best_of(lambda: b.copy_(a), device, reps)
            facts["copy_gbps"] = 2 * a.numel() * 4 / seconds / 1e9
            del a, b
            x = torch.randn(n, n, device=device)
            y = torch.randn(n, n, device=device)
            seconds = _best_of(lambda: torch.mm(x, y), device, max(2, reps // 2))
            facts["fp32_tflops"] = 2.0 * n ** 3 / seconds / 1e12
            if cuda:
                # The tensor cores' TF32 rate: fp32-accurate products that use
                # them (three TF32 products each) run at up to a third of it.
                torch.backends.cuda.matmul.allow_tf32 = True
                try:
                    seconds = _best_of(lambda: torch.mm(x, y), device, reps // 2)
                finally:
                    common.configure_numerics()
                facts["tf32_tflops"] = 2.0 * n ** 3 / seconds / 1e12
            del x, y
        except Exception as exc:
            return {"ok": False, "error": "measuring the device failed: " + _one_line(exc)}
        common.free_cached(device)
        return {"ok": True, "facts": facts}

    def op_compare(self, req):
        got = req["outputs"]
        # Outputs handed over device to device arrive first, one descriptor
        # each, on the channel; take them all before anything can fail.
        fds = []
        want_fds = sum(1 for g in got if g.get("vmm"))
        if want_fds:
            if self.channel is None:
                return {"ok": False, "transport_failed": True, "error": "this worker has no descriptor channel"}
            try:
                fds = self.channel.receive(want_fds)
            except transfer.TransferError as exc:
                return {"ok": False, "transport_failed": True, "error": str(exc)}
        try:
            try:
                return self._compare_outputs(req, got, fds)
            except torch.OutOfMemoryError:
                # Other workers share the device: free what this one caches
                # and try once more (descriptors not yet used are still here).
                gc.collect()
                torch.cuda.empty_cache()
                return self._compare_outputs(req, got, fds)
        finally:
            common.release_cached(self._device_of(req))
            for fd in fds:
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass

    def _device_of(self, req):
        task = self.tasks.get(req.get("key"))
        return task.device if task is not None else "cpu"

    def _compare_outputs(self, req, got, fds):
        task = self._task(req["key"])
        refs = self._reference(task, req["seed"])
        if len(got) != len(refs):
            return {"ok": True, "match": False, "error":
                    "the candidate returned %d outputs, the reference %d" % (len(got), len(refs))}
        result = {"ok": True, "match": True, "strict_match": True, "max_abs_error": 0.0,
                  "max_rel_error": 0.0, "error": ""}
        next_fd = 0
        for j, (g, ref) in enumerate(zip(got, refs)):
            fd = None
            if g.get("vmm"):
                fd = fds[next_fd]
                next_fd += 1
            want = common.describe(ref)
            if g["dtype"] != want["dtype"]:
                return _mismatch(result, "output %d has dtype %s, the reference %s" % (j, g["dtype"], want["dtype"]))
            if list(g["shape"]) != want["shape"]:
                return _mismatch(result, "output %d has shape %s, the reference %s" % (j, g["shape"], want["shape"]))
            if fd is not None:
                try:
                    # Imported, copied into this process's memory, unmapped;
                    # the descriptor stays open (closed by op_compare), so a
                    # retry after running out of memory can import it again.
                    cand = transfer.import_clone(fd, ref.dtype, want["shape"], close=False)
                except transfer.TransferError as exc:
                    return {"ok": False, "transport_failed": True, "error": "output %d: %s" % (j, exc)}
            else:
                try:
                    mapped = common.read_raw(g["path"], g["dtype"], g["shape"])
                    cand = mapped.to(task.device)
                    if cand.numel() and cand.data_ptr() == mapped.data_ptr():
                        cand = cand.clone()  # never compare against memory the candidate can still write
                    del mapped
                except Exception as exc:
                    return _mismatch(result, "output %d unreadable: %s" % (j, _one_line(exc)))
            res = _compare(cand, ref, req["tolerance"])
            strict = _compare(cand, ref, req["strict"])
            result["max_abs_error"] = max(result["max_abs_error"], res["max_abs"])
            result["max_rel_error"] = max(result["max_rel_error"], res["max_rel"])
            if not strict["ok"]:
                result["strict_match"] = False
            if not res["ok"]:
                idx = res["first_bad"]
                return _mismatch(result, "output %d differs at index %s: got %r, expected %r "
                                 "(%d of %d elements outside atol=%g rtol=%g; max abs error %.6g)" % (
                                     j, idx, res["got"], res["expected"], res["bad"], ref.numel(),
                                     res["atol"], res["rtol"], res["max_abs"]))
        return result

    def op_baseline_prepare(self, req):
        """Compiles a baseline and runs it once, untimed (torch.compile's cost
        stays out of the timed request, which needs the device to itself)."""
        task = self._task(req["key"])
        if req["mode"] != "compile":
            return {"ok": False, "error": "unknown baseline mode %r" % req["mode"]}
        t0 = time.perf_counter()
        if task.compiled is None:
            task.compiled = torch.compile(task.model)
        with torch.no_grad():
            task.compiled(*common.make_inputs(task.module, req.get("seed", 0), task.device))
        common.sync(task.device)
        common.release_cached(task.device, threshold=1)
        return {"ok": True, "compile_s": time.perf_counter() - t0}

    def op_baseline(self, req):
        """Times a baseline (`eager`, `compile`) with the candidates' loop; `null` times the loop
        alone (the judge's measure of what a timing request costs around its calls)."""
        task = self._task(req["key"])
        mode = req["mode"]
        fn = task.null if mode == "null" else task.model
        compile_s = 0.0
        if mode == "compile":
            if task.compiled is None:
                t0 = time.perf_counter()
                task.compiled = torch.compile(task.model)
                compile_s = time.perf_counter() - t0
            fn = task.compiled
        timer = common.Timer(task.device, req.get("flush_bytes", 0), timing=req.get("timing", "host"))
        t0 = time.perf_counter()
        with torch.no_grad():
            # The first call of a compiled model compiles it: keep that out of the warm-up count.
            if mode == "compile":
                fn(*common.make_inputs(task.module, req["set_seeds"][0], task.device))
                common.sync(task.device)
                compile_s += time.perf_counter() - t0
            times, _ = timer.run(fn, task.module, req["set_seeds"], req["refresh_seed0"],
                                 req["warmup"], req["iters"])
        # The judge compares this request's length with the candidates' (the same loop): the
        # flush buffer and input sets go back the same cheap way there and here.
        del timer
        common.free_cached(task.device)
        return {"ok": True, **times, "compile_s": compile_s}

    def op_trace(self, req):
        """The task's forward as a JSON graph (torch.fx + ShapeProp on the task's inputs)."""
        import copy
        from . import tracing
        task = self._task(req["key"])
        try:
            # A copy: running the graph once must not move the reference's
            # state (BatchNorm running statistics in training mode, say).
            model = copy.deepcopy(task.model)
            inputs = common.make_inputs(task.module, req.get("seed", 0), task.device)
            graph = tracing.trace(model, inputs)
        except Exception as exc:
            return {"ok": False, "untraceable": True, "error": "cannot trace: " + _one_line(exc)}
        return {"ok": True, "graph": graph}

    def op_unload(self, req):
        self.tasks.pop(req["key"], None)
        return {"ok": True}


def _best_of(fn, device, reps):
    """The fastest of `reps` calls of fn after two warm-up calls, in seconds."""
    cuda = device.startswith("cuda")
    for _ in range(2):
        fn()
    common.sync(device)
    best = float("inf")
    for _ in range(reps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
    return best


def _nbytes(g):
    """Bytes of an output as its description says (an unknown dtype counts 4 per element)."""
    dtype = common.DTYPES.get(g.get("dtype"))
    n = torch.empty((), dtype=dtype).element_size() if dtype is not None else 4
    for d in g.get("shape", []):
        n *= int(d)
    return n


def _one_line(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    return " ".join(text.split())[:500]


def _mismatch(result, text):
    result.update({"match": False, "error": text})
    return result


def _same(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.equal(a, b)) or bool(torch.equal(a.isnan(), b.isnan()) and
                                           torch.equal(a.nan_to_num(), b.nan_to_num()))


def _tol_for(t, tol):
    name = common.describe(t)["dtype"]
    entry = tol.get(name) or tol.get("default")
    return float(entry[0]), float(entry[1])


def _zero_passes(ref, tol):
    if not ref.is_floating_point():
        return bool((ref == 0).all())
    atol, rtol = _tol_for(ref, tol)
    # An all-zero candidate c passes |c - r| <= atol + rtol * |r| when |r| (1 - rtol) <= atol.
    return bool(((ref.abs() <= atol + rtol * ref.abs()) | (ref == 0)).all())


_CHUNK = 1 << 26  # elements compared at once: bounds the temporaries on large outputs


def _compare(cand, ref, tol):
    """Elementwise comparison in chunks of _CHUNK elements (flat views); the
    first bad element (first_bad) is reported as an index into ref's shape."""
    res = _compare_flat(cand, ref, tol)
    if "first_flat" in res:
        res["first_bad"] = _unravel(res["first_flat"], ref.shape)
    return res


def _compare_flat(cand, ref, tol):
    if ref.numel() <= _CHUNK:
        return _compare_chunk(cand, ref, tol, 0)
    c_flat, r_flat = cand.reshape(-1), ref.reshape(-1)
    total = None
    for start in range(0, ref.numel(), _CHUNK):
        res = _compare_chunk(c_flat[start:start + _CHUNK], r_flat[start:start + _CHUNK], tol, start)
        if total is None:
            total = res
        else:
            total["max_abs"] = max(total["max_abs"], res["max_abs"])
            total["max_rel"] = max(total["max_rel"], res["max_rel"])
            total["bad"] += res["bad"]
            if res["bad"] and "first_flat" not in total:
                for k in ("first_flat", "got", "expected"):
                    total[k] = res[k]
    total["ok"] = total["bad"] == 0
    return total


def _unravel(flat, shape):
    idx = []
    rem = flat
    for size in reversed(shape):
        idx.append(rem % size)
        rem //= size
    return list(reversed(idx))


def _compare_chunk(cand, ref, tol, offset):
    if not ref.is_floating_point():
        bad = cand != ref
        nbad = int(bad.sum())
        res = {"ok": nbad == 0, "max_abs": float((cand.long() - ref.long()).abs().max()) if ref.numel() else 0.0,
               "max_rel": 0.0, "bad": nbad, "atol": 0.0, "rtol": 0.0}
    else:
        atol, rtol = _tol_for(ref, tol)
        c = cand.float()
        r = ref.float()
        diff = (c - r).abs()
        both_nan = c.isnan() & r.isnan()
        ok = (diff <= atol + rtol * r.abs()) | (c == r) | both_nan
        bad = ~ok
        del ok
        nbad = int(bad.sum())
        finite = diff.nan_to_num(nan=float("inf"))
        del diff
        finite = torch.where(both_nan | (c == r), torch.zeros_like(finite), finite)
        max_abs = float(finite.max()) if ref.numel() else 0.0
        rel = finite / r.abs().clamp_min(1e-12)
        max_rel = float(rel.max()) if ref.numel() else 0.0
        del rel, finite
        res = {"ok": nbad == 0, "max_abs": max_abs, "max_rel": max_rel, "bad": nbad, "atol": atol, "rtol": rtol}
    if nbad:
        flat = int(bad.reshape(-1).nonzero()[0])
        res["first_flat"] = offset + flat
        res["got"] = cand.reshape(-1)[flat].item()
        res["expected"] = ref.reshape(-1)[flat].item()
    return res
