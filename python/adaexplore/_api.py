"""evaluate, optimize, bench, report and load: the engine's commands as functions.

Every function builds the command line's flags from its keyword arguments and
calls the engine in-process (adaexplore._engine); the run folders are the
command line's, so `adaexplore report RUN` and `optimize(..., resume=True)`
work on either's runs.
"""

import dataclasses
import importlib.util
import os
import sys
import tempfile
import time
import uuid

from . import _engine
from ._errors import AdaexploreError, InvalidInputError, raise_for
from ._flags import to_flags
from ._module_task import write_task


def _worker_python(options):
    """The judge's workers run in this interpreter unless told otherwise (it has torch: this package needs it)."""
    if options.get("python") is None and not os.environ.get("ADAEXPLORE_PYTHON"):
        options["python"] = sys.executable
    return options


def _task_spec(task):
    if isinstance(task, os.PathLike):
        return os.fspath(task)
    if isinstance(task, str):
        return task
    raise InvalidInputError("task must be a task file, a folder or a KernelBench spec (a str or a path); got a %s"
                            % type(task).__name__, 2)


@dataclasses.dataclass
class Verdict:
    """The judge's word on one candidate (the command line's `eval --json`, as an object)."""
    status: str
    correct: bool
    speedups: dict      # baseline ("eager", "compile") -> candidate's speedup over it
    times: dict         # "candidate" and each baseline -> milliseconds
    flags: list
    error: str
    device: str
    precision: str      # what the task was judged in: "fp32", "fp16" or "bf16"
    timing_mode: str    # what a timed call covers: "host" (launch overhead included) or "gpu"
    raw: dict = dataclasses.field(repr=False)  # every field of the verdict JSON

    @classmethod
    def from_json(cls, j):
        times = {"candidate": j.get("runtime_ms")}
        times.update(j.get("baseline_ms") or {})
        return cls(status=j.get("status", ""), correct=bool(j.get("correct")), speedups=dict(j.get("speedup") or {}),
                   times=times, flags=list(j.get("flags") or []), error=j.get("error") or "",
                   device=j.get("device") or "", precision=j.get("precision") or "fp32",
                   timing_mode=j.get("timing_mode") or "host", raw=j)


def evaluate(task, candidate, device=None, tolerance="strict", precision="fp32", **judge_options):
    """Judges one candidate (a file, or source text defining ModelNew) against a task; returns a Verdict.

    precision: "fp32", "fp16" or "bf16": the task's model and floating inputs are cast to it on every side.
    judge_options are eval's flags as keywords: timing="gpu", trials=, iters=, warmup=, baselines=["eager"], time=False,
    seed=, compile_timeout=, call_timeout=, run_timeout=, python=, cache=False, cache_dir=, judge="redis://...".
    """
    spec = _task_spec(task)
    tmp = None
    if isinstance(candidate, str) and "\n" in candidate:
        fd, tmp = tempfile.mkstemp(prefix="adaexplore-candidate-", suffix=".py")
        with os.fdopen(fd, "w") as f:
            f.write(candidate)
        candidate = tmp
    elif isinstance(candidate, os.PathLike):
        candidate = os.fspath(candidate)
    elif not isinstance(candidate, str):
        raise InvalidInputError("candidate must be a file or source text; got a %s" % type(candidate).__name__, 2)
    options = _worker_python(dict(judge_options, device=device, tolerance=tolerance, precision=precision))
    try:
        reply = _engine.evaluate(spec, candidate, to_flags(options))
    finally:
        if tmp:
            os.unlink(tmp)
    raise_for(reply, "evaluate")
    return Verdict.from_json(reply["verdict"])


@dataclasses.dataclass
class Result:
    """What optimize() found: the best kernel of the task (or of each task, for several)."""
    run_dir: str
    status: str
    best_source: str        # best.py ("" when no correct kernel was found)
    speedup: dict           # baseline -> the best kernel's speedup
    runtime_ms: float
    summary: dict = dataclasses.field(repr=False)  # summary.json

    def module(self):
        """The best kernel's ModelNew, built as the task builds Model, with the task's weights."""
        return load(self.run_dir)


def _progress_sink(progress):
    """A callable for the engine's events, and a function that closes it."""
    if progress is False:
        return None, lambda: None
    if callable(progress):
        return progress, lambda: None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None, lambda: None
    bars = {}

    def on_event(ev):
        bar = bars.get(ev["task"])
        if bar is None:
            bar = bars[ev["task"]] = tqdm(total=ev["steps"], desc=ev["task"], unit="step", leave=True)
        if ev["step"]:
            bar.n = ev["step"]
            best = ev["best_speedup"]
            bar.set_postfix_str("best %.3fx" % best if best is not None else "no correct kernel yet")
    return on_event, lambda: [b.close() for b in bars.values()]


def _search(specs, bench, options, progress, what, out):
    """Runs optimize or bench in the engine; raises as the reply says; returns the run (summary.json)."""
    sink, close = _progress_sink(progress)
    try:
        reply = _engine.optimize(specs, bench, to_flags(options), sink)
    finally:
        close()
    if reply.get("callback_error") is not None:
        raise reply["callback_error"]
    if reply.get("code") == 130:
        raise KeyboardInterrupt("interrupted: the run is saved in %s; %s(..., out=%r, resume=True) continues it"
                                % (out, what, out))
    raise_for(reply, what)
    return reply.get("run") or {}


def optimize(task, example_inputs=None, proposer="builtin", steps=8, out=None, device=None, progress=None,
             resume=False, name=None, init_args=None, **search_options):
    """Searches for the fastest correct kernel of a task; returns a Result.

    task: a task file, a KernelBench spec ("level1/19"), or your own nn.Module with example_inputs (it is
    written as a task file first, in OUT/task/). search_options are optimize's flags as keywords:
    search="mcts", seed=, tolerance=, precision="bf16", timing="gpu", trials=, memory=, max_wall=, small_step_limit=, ...
    progress: a callable given each step's event (a dict), False for none, or None: a tqdm bar when tqdm is
    installed. Ctrl-C stops the run after the candidates being judged, saves it, and raises
    KeyboardInterrupt; optimize(..., out=RUN, resume=True) continues it.
    """
    import torch
    if out is None:
        base = name or (type(task).__name__ if isinstance(task, torch.nn.Module) else
                        os.path.splitext(os.path.basename(_task_spec(task).rstrip("/")))[0].replace("/", "_"))
        out = os.path.join("runs", "%s-%s" % (base, time.strftime("%Y%m%d-%H%M%S")))
    out = os.path.abspath(os.fspath(out))
    if isinstance(task, torch.nn.Module):
        if example_inputs is None:
            raise InvalidInputError("optimize(module, example_inputs): the example inputs are missing", 2)
        task_dir = os.path.join(out, "task")
        existing = [f for f in os.listdir(task_dir) if f.endswith(".py")] if resume and os.path.isdir(task_dir) else []
        spec = os.path.join(task_dir, existing[0]) if existing else write_task(task, example_inputs, task_dir, name,
                                                                               init_args)
    else:
        if example_inputs is not None:
            raise InvalidInputError("example_inputs go with an nn.Module, not with a task file", 2)
        spec = _task_spec(task)
    options = _worker_python(dict(search_options, proposer=proposer, steps=steps, out=out, device=device,
                                  resume=bool(resume)))
    run = _search([spec], False, options, progress, "optimize", out)
    tasks = run.get("tasks") or [{}]
    t = tasks[0]
    status = t.get("status", "")
    if proposer == "builtin" and status.startswith("stopped: cannot trace"):
        raise InvalidInputError("optimize: %s cannot be traced, so the builtin compiler cannot take it (%s); an LLM "
                                "proposer can" % (t.get("task", spec), status[len("stopped: "):]), 2)
    best_file = os.path.join(out, "best.py")
    best_source = open(best_file).read() if t.get("best_node", -1) >= 0 and os.path.exists(best_file) else ""
    return Result(run_dir=out, status=status, best_source=best_source, speedup=dict(t.get("speedup") or {}),
                  runtime_ms=t.get("runtime_ms"), summary=run)


def bench(tasks, out, proposer="builtin", steps=8, jobs=1, device=None, progress=None, resume=False,
          **search_options):
    """Optimizes many tasks (a folder, a KernelBench level, or a list of task files) in one run; returns its Report.

    The command line's `bench`: `jobs` tasks searched at once per device, one judge pool and one LLM budget,
    OUT/TASK/best.py per task; load(OUT, task=NAME) loads one. Same keywords and Ctrl-C as optimize().
    """
    specs = [_task_spec(t) for t in tasks] if isinstance(tasks, (list, tuple)) else [_task_spec(tasks)]
    out = os.path.abspath(os.fspath(out))
    options = _worker_python(dict(search_options, proposer=proposer, steps=steps, out=out, device=device, jobs=jobs,
                                  resume=bool(resume)))
    _search(specs, True, options, progress, "bench", out)
    return report(out)


class Report:
    """A run folder's figures (the command line's `report --json`) as plain data."""

    def __init__(self, data):
        self.data = data
        self.run_dir = data.get("run", "")
        self.config = data.get("config") or {}
        self.tasks = data.get("tasks") or []
        self.metrics = data.get("metrics") or {}

    def __repr__(self):
        return "Report(%r, %d tasks)" % (self.run_dir, len(self.tasks))

    def to_pandas(self):
        """One row per task: status, correctness, speedups, times, steps, LLM calls and cost (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("Report.to_pandas() needs pandas (pip install pandas)") from e
        rows = []
        for t in self.tasks:
            rows.append({"task": t["task"], "status": t["status"], "correct": t["correct"],
                         "speedup_eager": t["speedup"].get("eager"), "speedup_compile": t["speedup"].get("compile"),
                         "runtime_ms": t["runtime_ms"], "eager_ms": t["baseline_ms"].get("eager"),
                         "compile_ms": t["baseline_ms"].get("compile"), "steps": t["steps"], "judged": t["judged"],
                         "llm_calls": t["llm_calls"], "cost_usd": (t.get("cost") or {}).get("cost_usd"),
                         "device": t["device"], "best_file": t["best_file"]})
        return pd.DataFrame(rows)


def report(run_dir):
    """The figures of a run folder (from optimize, bench or the command line) as a Report."""
    run_dir = os.fspath(run_dir)
    if not os.path.isdir(run_dir):
        raise InvalidInputError("report: no run folder at %s" % run_dir, 2)
    reply = _engine.report(run_dir)
    raise_for(reply, "report")
    return Report(reply["report"])


def _import(path, prefix):
    spec = importlib.util.spec_from_file_location("%s_%s" % (prefix, uuid.uuid4().hex), path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # Triton looks kernels' modules up by name
    spec.loader.exec_module(mod)
    return mod


def load(run_dir, task=None):
    """The best kernel of a run as a module: ModelNew, built as the task builds Model, with its weights.

    task: for a run of several tasks, which one (its name); or a task file to check the kernel against.
    Refuses (InvalidInputError) a kernel whose task file changed since the run, or that was made for another task.
    """
    import torch
    rep = report(run_dir)
    recorded = {t["name"]: t for t in rep.config.get("tasks", [])}
    if not recorded:
        raise InvalidInputError("load: %s records no task" % run_dir, 2)
    task_file = None
    if task is None:
        if len(recorded) != 1:
            raise InvalidInputError("load: %s holds %d tasks; name one with task=" % (run_dir, len(recorded)), 2)
        entry = next(iter(recorded.values()))
    elif str(task) in recorded:
        entry = recorded[str(task)]
    else:
        task_file = os.fspath(task)
        info = _engine.task_info(task_file)
        raise_for(info, "load")
        mine = info["tasks"][0]
        entry = next((t for t in recorded.values() if t.get("hash") == mine["hash"]), None)
        if entry is None:
            raise InvalidInputError("load: the kernels in %s were made for another task (%s), not for %s"
                                    % (run_dir, ", ".join(recorded), task_file), 2)
    task_file = task_file or entry["path"]
    info = _engine.task_info(task_file)
    raise_for(info, "load")
    if info["tasks"][0]["hash"] != entry.get("hash"):
        raise InvalidInputError("load: %s changed since the run (its hash is %s, the run's kernel was made for %s); "
                                "refusing a kernel made for a different task"
                                % (task_file, info["tasks"][0]["hash"][:12], entry.get("hash", "")[:12]), 2)
    row = next((t for t in rep.tasks if t["task"] == entry["name"]), None)
    if row is None or not row.get("correct") or not row.get("best_file"):
        raise InvalidInputError("load: %s has no correct kernel for %s" % (run_dir, entry["name"]), 2)
    if not torch.cuda.is_available() and "triton" in open(row["best_file"]).read():
        # Triton kernels run on the CPU only in Triton's interpreter (as the judge runs them there),
        # which Triton picks when it is first imported.
        if os.environ.get("TRITON_INTERPRET", "").lower() not in ("1", "true", "on"):
            if "triton" in sys.modules:
                raise AdaexploreError("load: there is no GPU here, so the kernel's Triton code can only run in "
                                      "Triton's interpreter, and triton was imported without it: set "
                                      "TRITON_INTERPRET=1 before importing triton", 3)
            os.environ["TRITON_INTERPRET"] = "1"
    task_mod = _import(task_file, "adaexplore_task")
    best = _import(row["best_file"], "adaexplore_best")
    init = list(task_mod.get_init_inputs())
    # The task's weights: Model's, copied into ModelNew where the parameters match (the judge gives both
    # the same seed, which gives them the same initial values when they are created in the same order).
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        ref = task_mod.Model(*init)
        torch.manual_seed(0)
        new = best.ModelNew(*init)
    try:
        new.load_state_dict(ref.state_dict())
    except (RuntimeError, KeyError):
        pass
    new.train(ref.training)
    return new
