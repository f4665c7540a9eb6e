"""`adaexplore compile`: the builtin compiler's candidate sources without judging them."""

import json

from conftest import CORPUS, EXAMPLE_TASK, ROOT

CONV_TASK = CORPUS / "builtin" / "conv_bias_activations.py"
MARKER = "# adaexplore-plan: "


def _marker(path):
    for line in path.read_text().splitlines():
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER):])
    raise AssertionError("no plan marker in %s" % path)


def test_the_large_step_plans_are_listed_written_and_judged_correct(run_cli, tmp_path):
    out = tmp_path / "plans"
    rc, stdout, err = run_cli("compile", EXAMPLE_TASK, "--device", "cpu", "--out", out)
    assert rc == 0, err
    rows = [json.loads(l) for l in (out / "plans.jsonl").read_text().splitlines()]
    assert len(rows) >= 4 and [r["index"] for r in rows] == list(range(len(rows)))
    assert len(stdout.strip().splitlines()) == len(rows)
    assert rows[0]["description"] == "maximal fusion" and rows[0]["kernels"] == 1
    assert any(r["description"] == "one kernel per operator" for r in rows)
    for r in rows:
        assert _marker(out / ("plan_%02d.py" % r["index"])) == r["plan"]
    # Plans whose source repeats an earlier one say which.
    for r in rows:
        if "same_as" in r:
            assert (out / ("plan_%02d.py" % r["index"])).read_text() == (out / ("plan_%02d.py" % r["same_as"])).read_text()
    # What it writes is a candidate like any other.
    rc, stdout, err = run_cli("eval", EXAMPLE_TASK, out / "plan_01.py", "--device", "cpu", "--no-time", "--json")
    assert rc == 0, err
    assert json.loads(stdout.strip().splitlines()[-1])["status"] == "ok"


def test_a_given_plan_is_generated_with_its_schedule(run_cli, tmp_path):
    rc, stdout, err = run_cli("compile", CONV_TASK, "--device", "cpu", "--json")
    assert rc == 0, err
    conv = [json.loads(l) for l in stdout.splitlines() if json.loads(l)["plan"].get("conv")][0]["plan"]
    conv["gemm"] = [[32, 16, 16, 4, 4, 2]]
    rc, source, err = run_cli("compile", CONV_TASK, "--device", "cpu", "--plan", json.dumps(conv))
    assert rc == 0, err
    assert MARKER + json.dumps(conv, sort_keys=True, separators=(",", ":")) in source
    assert "BM=32, BN=16, BK=16, GROUP_M=4, num_warps=4, num_stages=2" in source
    # @FILE reads a generated source's plan back: the same source again.
    cand = tmp_path / "cand.py"
    cand.write_text(source)
    rc, again, err = run_cli("compile", CONV_TASK, "--device", "cpu", "--plan", "@%s" % cand)
    assert rc == 0 and again == source, err
    rc, stdout, err = run_cli("eval", CONV_TASK, cand, "--device", "cpu", "--no-time", "--json")
    assert rc == 0 and json.loads(stdout.strip().splitlines()[-1])["status"] == "ok", err


def test_bad_plans_and_untraceable_tasks_say_why(run_cli, tmp_path):
    rc, stdout, err = run_cli("compile", EXAMPLE_TASK, "--device", "cpu", "--plan", '{"cuts": [')
    assert rc == 2 and err.strip().startswith("adaexplore: --plan is not a JSON object")
    rc, stdout, err = run_cli("compile", EXAMPLE_TASK, "--device", "cpu", "--plan", "@%s" % (tmp_path / "none.json"))
    assert rc == 2 and "cannot read plan file" in err
    task = tmp_path / "value_branch.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        if x.sum() > 0:\n            return x * 2\n        return x - 1\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 8)]\n\n\ndef get_init_inputs():\n    return []\n")
    rc, stdout, err = run_cli("compile", task, "--device", "cpu")
    assert rc == 1 and "cannot trace" in err and len(err.strip().splitlines()) == 1, err


def test_bench_conv_tiles_generates_its_grid_through_compile(binary, worker_python, tmp_path, monkeypatch):
    """bench/conv_tiles.py's CPU half: the conv plan found, each grid configuration given to its
    convolutions and generated (the GPU half times them)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("conv_tiles", ROOT / "bench" / "conv_tiles.py")
    ct = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ct)
    monkeypatch.setenv("ADAEXPLORE_PYTHON", worker_python)
    rows, _ = ct.compile_json(str(binary), str(CONV_TASK), "cpu")
    base = [r for r in rows if r["plan"].get("conv") and not r["plan"].get("conv_native")][0]["plan"]
    plans = ct.grid_plans(base, "small", cout=8)
    # BN no wider than the 4 output channels allow (16, the smallest tile); every configuration distinct.
    assert plans and all(p["gemm"][0][1] == 16 for p in plans)
    assert len({json.dumps(p, sort_keys=True) for p in plans}) == len(plans)
    # Tiles whose pipelined fp32 operands overflow shared memory (GemmSchedule::Valid) are left out.
    wide = ct.grid_plans(base, "full", cout=128)
    smem = [4 * (bm + bn) * bk * stages for bm, bn, bk, _, _, stages in (p["gemm"][0] for p in wide)]
    assert wide and max(smem) <= 200 * 1024
    bms, bns, bks, ws = ct.GRIDS["full"]
    assert len(wide) < len(bms) * len(bns) * len(bks) * len(ws)  # some were dropped
    out = tmp_path / "grid"
    generated, _ = ct.compile_json(str(binary), str(CONV_TASK), "cpu", plans[:3], str(out))
    assert [r["index"] for r in generated] == [0, 1, 2]
    for r, p in zip(generated, plans):
        bm, bn, bk, gm, warps, stages = p["gemm"][0]
        src = (out / ("plan_%02d.py" % r["index"])).read_text()
        assert "BM=%d, BN=%d, BK=%d, GROUP_M=%d, num_warps=%d, num_stages=%d" % (bm, bn, bk, gm, warps, stages) in src
