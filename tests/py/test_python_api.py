"""The Python package (import adaexplore) on the CPU: evaluate, optimize (a task
file and a user's own nn.Module), report, load, progress, Ctrl-C and resume,
the `adaexplore` command it installs, and its errors. The package under test
is the development build's (build/python), over the same C++ engine as the
command line."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import EXAMPLE_TASK, ROOT

PKG = ROOT / "build" / "python"
if not list((PKG / "adaexplore").glob("_engine*.so")):
    pytest.skip("the Python extension is not built (scripts/setup.sh builds it into build/python)",
                allow_module_level=True)
sys.path.insert(0, str(PKG))
sys.path.insert(0, str(ROOT / "tests" / "py"))

import torch  # noqa: E402

import adaexplore  # noqa: E402
import api_modules  # noqa: E402

CANDIDATE = ROOT / "examples" / "candidates" / "1_BiasReLUScale_triton.py"
FAST = dict(device="cpu", trials=2, iters=2, warmup=1)


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path, worker_python):
    monkeypatch.setenv("ADAEXPLORE_PYTHON", worker_python)
    monkeypatch.setenv("ADAEXPLORE_CACHE_DIR", str(tmp_path / "cache"))


def test_the_package_is_the_engine():
    assert adaexplore.__version__ == "0.1.0"
    dirs = adaexplore._engine.resource_dirs()
    assert os.path.isfile(os.path.join(dirs["prompts"], "system.txt"))
    assert os.path.isfile(os.path.join(dirs["worker"], "adaexplore_worker", "__main__.py"))


def test_evaluate_a_correct_candidate():
    v = adaexplore.evaluate(EXAMPLE_TASK, CANDIDATE, **FAST)
    assert isinstance(v, adaexplore.Verdict)
    assert v.status == "ok" and v.correct, v.error
    assert v.times["candidate"] > 0 and v.times["eager"] > 0
    assert v.speedups["eager"] == pytest.approx(v.times["eager"] / v.times["candidate"], rel=1e-6)
    assert v.device == "cpu" and v.raw["task"]


def test_evaluate_source_text_that_is_wrong():
    src = CANDIDATE.read_text().replace("* scale", "* scale * 1.5")
    v = adaexplore.evaluate(str(EXAMPLE_TASK), src, time=False, **{k: v for k, v in FAST.items() if k != "iters"})
    assert v.status == "mismatch" and not v.correct
    assert v.error


def test_evaluate_call_timeout_bounds_a_hung_first_call():
    src = CANDIDATE.read_text().replace("    def forward(self, x):\n", "    def forward(self, x):\n        while True:\n            pass\n", 1)
    assert "while True" in src
    t0 = time.time()
    v = adaexplore.evaluate(EXAMPLE_TASK, src, call_timeout=2, **FAST)
    assert v.status == "timeout" and "the call ran longer than 2 s" in v.error, v.error
    assert time.time() - t0 < 60


def test_evaluate_bad_input_raises_with_the_reason(tmp_path):
    with pytest.raises(adaexplore.InvalidInputError, match="no_such_task"):
        adaexplore.evaluate(tmp_path / "no_such_task.py", CANDIDATE, **FAST)
    with pytest.raises(adaexplore.InvalidInputError, match="--bogus-option"):
        adaexplore.evaluate(EXAMPLE_TASK, CANDIDATE, bogus_option=3, **FAST)
    with pytest.raises(adaexplore.InvalidInputError, match="cannot read candidate"):
        adaexplore.evaluate(EXAMPLE_TASK, tmp_path / "missing.py", **FAST)
    with pytest.raises(adaexplore.InvalidInputError, match="candidate must be"):
        adaexplore.evaluate(EXAMPLE_TASK, 42, **FAST)
    try:
        adaexplore.evaluate(EXAMPLE_TASK, CANDIDATE, tolerance="loose-ish", **FAST)
    except adaexplore.InvalidInputError as e:
        assert e.code == 2 and "loose-ish" in str(e)
    else:
        pytest.fail("a bad tolerance was accepted")


@pytest.fixture(scope="module")
def task_run(tmp_path_factory, worker_python):
    os.environ.setdefault("ADAEXPLORE_PYTHON", worker_python)
    tmp = tmp_path_factory.mktemp("api")
    task = tmp / "1_BiasReLUScale.py"
    shutil.copy(EXAMPLE_TASK, task)
    events = []
    result = adaexplore.optimize(task, steps=2, out=tmp / "run", progress=events.append, seed=1,
                                 cache_dir=str(tmp / "cache"), **FAST)
    return {"task": task, "result": result, "events": events, "tmp": tmp}


def test_optimize_a_task_file(task_run):
    r = task_run["result"]
    assert isinstance(r, adaexplore.Result)
    assert r.status == "found", r.summary
    assert "class ModelNew" in r.best_source
    assert r.speedup["eager"] > 0 and r.runtime_ms > 0
    assert os.path.isfile(os.path.join(r.run_dir, "run.sqlite"))
    steps = [e for e in task_run["events"] if e["step"]]
    assert [e["step"] for e in steps] == [1, 2]
    assert all(e["steps"] == 2 and e["task"] == "1_BiasReLUScale" for e in steps)
    assert steps[-1]["best_speedup"] is not None


def test_module_matches_the_task(task_run):
    r = task_run["result"]
    fast = r.module()
    import importlib.util
    spec = importlib.util.spec_from_file_location("t_ref", task_run["task"])
    ref_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref_mod)
    torch.manual_seed(0)
    ref = ref_mod.Model(*ref_mod.get_init_inputs())
    x = ref_mod.get_inputs()[0]  # the builtin's kernels are generated for the task's shapes
    assert torch.allclose(fast(x), ref(x), rtol=1e-5, atol=1e-6)
    assert type(fast).__name__ == "ModelNew"


def test_report_of_the_run(task_run):
    rep = adaexplore.report(task_run["result"].run_dir)
    assert len(rep.tasks) == 1
    t = rep.tasks[0]
    assert t["task"] == "1_BiasReLUScale" and t["correct"] and t["steps"] == 2
    assert rep.metrics["all"]["tasks"] == 1 and rep.metrics["all"]["correct"] == 1
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs pandas"):
            rep.to_pandas()
    else:
        df = rep.to_pandas()
        assert list(df["task"]) == ["1_BiasReLUScale"] and df["correct"].all()


def test_load_refuses_a_changed_task(task_run, tmp_path):
    run = task_run["result"].run_dir
    other = tmp_path / "copy"
    shutil.copytree(run, other)
    assert isinstance(adaexplore.load(run), torch.nn.Module)
    task = task_run["task"]
    original = task.read_text()
    try:
        task.write_text(original.replace("y = relu(x + b) * s", "y = relu(x + b) * s, edited"))
        with pytest.raises(adaexplore.InvalidInputError, match="changed since the run"):
            adaexplore.load(run)
    finally:
        task.write_text(original)
    with pytest.raises(adaexplore.InvalidInputError, match="made for another task"):
        adaexplore.load(run, task=ROOT / "tests" / "py" / "api_other_task.py")


def test_load_without_a_gpu_says_when_triton_cannot_interpret(task_run):
    """Triton picks its interpreter when first imported: load() after a plain `import triton` says so."""
    script = ("import os, sys; os.environ.pop('TRITON_INTERPRET', None); sys.path.insert(0, %r); import triton; "
              "import adaexplore\ntry:\n    adaexplore.load(%r)\nexcept adaexplore.AdaexploreError as e:\n"
              "    print('REFUSED', e)" % (str(PKG), task_run["result"].run_dir))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    if "REFUSED" not in p.stdout and torch.cuda.is_available():
        pytest.skip("a GPU runs the kernel without the interpreter")
    assert "REFUSED load: there is no GPU here" in p.stdout and "TRITON_INTERPRET=1" in p.stdout, p.stdout + p.stderr


def test_bench_of_two_tasks(tmp_path):
    rep = adaexplore.bench([EXAMPLE_TASK, ROOT / "tests" / "py" / "api_other_task.py"], tmp_path / "b", steps=1,
                           jobs=2, progress=False, **FAST)
    assert isinstance(rep, adaexplore.Report)
    assert sorted(t["task"] for t in rep.tasks) == ["1_BiasReLUScale", "api_other_task"]
    assert all(t["correct"] for t in rep.tasks), rep.tasks
    m = adaexplore.load(tmp_path / "b", task="api_other_task")
    x = torch.randn(8, 8)
    assert torch.allclose(m(x), torch.tanh(x), atol=1e-6)
    with pytest.raises(adaexplore.InvalidInputError, match="holds 2 tasks"):
        adaexplore.load(tmp_path / "b")


def test_warm_start_keywords_reach_the_engine(tmp_path):
    # warm_start="builtin" becomes --warm-start builtin: refused with the builtin proposer.
    with pytest.raises(adaexplore.InvalidInputError, match="nothing to warm-start"):
        adaexplore.optimize(EXAMPLE_TASK, warm_start="builtin", out=tmp_path / "w", **FAST)
    with pytest.raises(adaexplore.InvalidInputError, match="--warm-start-steps must be 0..2"):
        adaexplore.optimize(EXAMPLE_TASK, proposer="compat:m@http://127.0.0.1:9/v1", steps=2, warm_start="builtin",
                            warm_start_steps=3, out=tmp_path / "w", **FAST)


def test_load_and_report_of_a_missing_run(tmp_path):
    with pytest.raises(adaexplore.InvalidInputError, match="no run folder"):
        adaexplore.load(tmp_path / "nothing-here")
    with pytest.raises(adaexplore.InvalidInputError, match="no run folder"):
        adaexplore.report(tmp_path / "nothing-here")


def test_optimize_own_module(tmp_path, capsys):
    torch.manual_seed(5)
    mine = api_modules.GatedBlock(32, 48, gain=3.0)
    x = torch.randn(16, 32)
    r = adaexplore.optimize(mine, (x,), steps=2, out=tmp_path / "mine", **FAST)
    assert r.status == "found", r.summary
    # progress=None: a tqdm bar per task (tqdm is in the project's requirements).
    err = capsys.readouterr().err
    assert "GatedBlock" in err and "2/2" in err and "best" in err, err
    task_file = tmp_path / "mine" / "task" / "GatedBlock.py"
    text = task_file.read_text()
    assert "def shifted_gelu" in text and "SHIFT = 0.25" in text and "'gain': 3.0" in text
    fast = r.module()
    with torch.no_grad():
        assert torch.allclose(fast(x), mine(x), rtol=1e-5, atol=1e-5)
        y = torch.randn(16, 32)
        assert torch.allclose(fast(y), mine(y), rtol=1e-5, atol=1e-5)


def test_a_module_that_cannot_be_a_task(tmp_path):
    x = torch.randn(4, 8)
    with pytest.raises(adaexplore.InvalidInputError, match="example input 0 is a str"):
        adaexplore.optimize(api_modules.GatedBlock(8, 8), ("not a tensor",), out=tmp_path / "a", **FAST)
    with pytest.raises(adaexplore.InvalidInputError, match="constructor argument 'width'"):
        adaexplore.optimize(api_modules.Forgetful(8), (x,), out=tmp_path / "b", **FAST)
    r = None
    with pytest.raises(adaexplore.InvalidInputError, match="cannot be traced"):
        r = adaexplore.optimize(api_modules.ValueDependent(), (x,), steps=1, out=tmp_path / "c", **FAST)
    assert r is None
    with pytest.raises(adaexplore.InvalidInputError, match="the example inputs are missing"):
        adaexplore.optimize(api_modules.GatedBlock(8, 8), out=tmp_path / "d", **FAST)
    Local = type("Local", (torch.nn.Module,), {"forward": lambda self, x: x})
    with pytest.raises(adaexplore.InvalidInputError, match="source of Local is not available"):
        adaexplore.optimize(Local(), (x,), out=tmp_path / "e", **FAST)
    # An explicit init_args mends the unrecoverable argument.
    t = adaexplore._module_task.write_task(api_modules.Forgetful(8), (x,), tmp_path / "f", init_args={"width": 8})
    assert "INIT_KWARGS = {'width': 8}" in open(t).read()


def test_a_failing_callback_stops_the_run_and_resume_continues(tmp_path):
    out = tmp_path / "run"

    def stop(ev):
        if ev["step"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        adaexplore.optimize(EXAMPLE_TASK, steps=3, out=out, progress=stop, seed=2, **FAST)
    assert (out / "summary.json").exists()
    first = json.loads((out / "summary.json").read_text())["tasks"][0]
    assert first["steps"] == 1 and first["status"].startswith("stopped")
    events = []
    r = adaexplore.optimize(EXAMPLE_TASK, steps=3, out=out, progress=events.append, resume=True, **FAST)
    assert r.summary["tasks"][0]["steps"] == 3
    # The resumed search replays step 1 from the store (nothing judged again), then goes on.
    assert [e["step"] for e in events if e["step"]] == [1, 2, 3]


def test_ctrl_c_saves_the_run(tmp_path, worker_python):
    """A real SIGINT to a script that calls optimize(): KeyboardInterrupt after the run is saved."""
    out = tmp_path / "run"
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import sys
        sys.path.insert(0, %r)
        import adaexplore
        def tick(ev):
            if ev["step"]:
                print("STEP", ev["step"], flush=True)
        try:
            adaexplore.optimize(%r, steps=6, out=%r, progress=tick, device="cpu", trials=2, iters=2, warmup=1)
        except KeyboardInterrupt as e:
            print("INTERRUPTED", e, flush=True)
            sys.exit(7)
        """ % (str(PKG), str(EXAMPLE_TASK), str(out))))
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line.startswith("STEP"), line + p.stderr.read()
    p.send_signal(signal.SIGINT)
    rest, err = p.communicate(timeout=300)
    assert p.returncode == 7, err[-2000:]
    assert "resume=True" in rest and "interrupted" in err
    steps = json.loads((out / "summary.json").read_text())["tasks"][0]["steps"]
    assert 1 <= steps < 6


def test_the_adaexplore_command_of_the_package(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(PKG))
    p = subprocess.run([sys.executable, "-m", "adaexplore", "eval", str(EXAMPLE_TASK), str(CANDIDATE), "--device", "cpu",
                        "--trials", "2", "--iters", "2", "--warmup", "1", "--json"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["correct"] is True
    p = subprocess.run([sys.executable, "-m", "adaexplore", "eval", str(tmp_path / "none.py"), str(CANDIDATE)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2 and p.stderr.strip().startswith("adaexplore:"), p.stderr


def test_evaluate_in_half_precision(tmp_path):
    # The task's model and inputs in float16 on both sides; the verdict says so.
    v = adaexplore.evaluate(EXAMPLE_TASK, CANDIDATE, precision="fp16", cache=False, **FAST)
    assert v.correct, v.error
    assert v.precision == "fp16" and v.raw["task"]["outputs"][0]["dtype"] == "float16"
    with pytest.raises(adaexplore.InvalidInputError, match="unknown precision 'fp4'"):
        adaexplore.evaluate(EXAMPLE_TASK, CANDIDATE, precision="fp4", cache=False, **FAST)
