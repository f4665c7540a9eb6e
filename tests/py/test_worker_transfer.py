"""The worker's side of output hand-over: the descriptor channel and the file fallback."""

import os
import socket
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "python"))
torch = pytest.importorskip("torch")

from adaexplore_worker import transfer  # noqa: E402
from adaexplore_worker.candidate import CandidateRole  # noqa: E402
from adaexplore_worker.reference import ReferenceRole  # noqa: E402


def _pair(timeout=2.0):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    return transfer.Channel(a.detach(), timeout), transfer.Channel(b.detach(), timeout)


def test_channel_carries_descriptors_in_order(tmp_path):
    left, right = _pair()
    paths = []
    for i in range(3):
        p = tmp_path / ("f%d" % i)
        p.write_text("payload %d" % i)
        paths.append(p)
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        left.send(fd)
        os.close(fd)  # the message in flight keeps the file open
    got = right.receive(3)
    assert [os.pread(fd, 100, 0).decode() for fd in got] == ["payload 0", "payload 1", "payload 2"]
    for fd in got:
        os.close(fd)


def test_channel_receive_times_out_with_a_clear_error():
    _, right = _pair(timeout=0.2)
    with pytest.raises(transfer.TransferError, match="no descriptor arrived"):
        right.receive(1)


def test_open_channel_without_the_variable_is_none(monkeypatch):
    monkeypatch.delenv("ADAEXPLORE_CHANNEL_FD", raising=False)
    assert transfer.open_channel() is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only answer")
def test_device_to_device_is_unavailable_without_cuda():
    assert transfer.available() is False


def _reference_with_task(tmp_path, channel=None):
    task = tmp_path / "task.py"
    task.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n        return x * 2\n"
        "def get_inputs():\n    return [torch.randn(4, 5)]\n"
        "def get_init_inputs():\n    return []\n")
    role = ReferenceRole(4, channel)
    tol = {"default": [1e-4, 1e-4]}
    resp = role.op_load_task({"key": "k", "task": str(task), "device": "cpu", "init_seed": 1,
                              "probe_seeds": [1, 2], "tolerance": tol})
    assert resp["ok"], resp
    return role, tol


def test_reference_without_a_channel_reports_a_transport_failure(tmp_path):
    role, tol = _reference_with_task(tmp_path)
    resp = role.op_compare({"key": "k", "seed": 3, "tolerance": tol, "strict": tol,
                            "outputs": [{"vmm": True, "bytes": 80, "shape": [4, 5], "dtype": "float32"}]})
    assert resp["ok"] is False and resp["transport_failed"] is True


def test_reference_reports_a_missing_descriptor_as_a_transport_failure(tmp_path):
    _, right = _pair(timeout=0.2)
    role, tol = _reference_with_task(tmp_path, right)
    resp = role.op_compare({"key": "k", "seed": 3, "tolerance": tol, "strict": tol,
                            "outputs": [{"vmm": True, "bytes": 80, "shape": [4, 5], "dtype": "float32"}]})
    assert resp["ok"] is False and resp["transport_failed"] is True
    assert "no descriptor arrived" in resp["error"]


def test_candidate_asked_for_device_transfer_of_cpu_outputs_writes_files(tmp_path):
    left, _ = _pair()
    role = CandidateRole(left)
    files = role._write([torch.arange(6, dtype=torch.float32)], str(tmp_path), "t0", "vmm")
    assert len(files) == 1 and "path" in files[0] and not files[0].get("vmm")
    assert os.path.getsize(files[0]["path"]) == 24


def test_reference_compares_file_outputs(tmp_path):
    role, tol = _reference_with_task(tmp_path)
    torch.manual_seed(3)
    x = torch.randn(4, 5)
    cand = CandidateRole()
    good = cand._write([x * 2], str(tmp_path), "good", "file")
    bad = cand._write([x * 2 + 1], str(tmp_path), "bad", "file")
    # The reference draws its inputs with the same seed through the task's get_inputs.
    resp = role.op_compare({"key": "k", "seed": 3, "tolerance": tol, "strict": tol, "outputs": good})
    assert resp["ok"] and resp["match"], resp
    resp = role.op_compare({"key": "k", "seed": 3, "tolerance": tol, "strict": tol, "outputs": bad})
    assert resp["ok"] and not resp["match"] and "differs at index" in resp["error"]


def test_chunked_comparison_finds_the_first_bad_element_and_counts_all(monkeypatch):
    from adaexplore_worker import reference
    tol = {"default": [1e-4, 1e-4]}
    ref = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    cand = ref.clone()
    cand[1, 2, 3] += 1.0   # flat index 33
    cand[2, 3, 4] = float("nan")  # flat index 59
    whole = reference._compare(cand, ref, tol)
    monkeypatch.setattr(reference, "_CHUNK", 7)
    chunked = reference._compare(cand, ref, tol)
    for res in (whole, chunked):
        assert res["ok"] is False and res["bad"] == 2
        assert res["first_bad"] == [1, 2, 3]
        assert res["got"] == 34.0 and res["expected"] == 33.0
    assert chunked["max_abs"] == whole["max_abs"]
    assert reference._compare(ref.clone(), ref, tol)["ok"] is True


def test_load_task_reports_the_memory_one_forward_needs(tmp_path):
    """The judge sizes its device memory admission by footprint_bytes: on CPU
    the inputs and outputs plus the parameters."""
    task = tmp_path / "task_params.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.lin = nn.Linear(100, 50)\n"
        "    def forward(self, x):\n        return self.lin(x)\n"
        "def get_inputs():\n    return [torch.randn(8, 100)]\n"
        "def get_init_inputs():\n    return []\n")
    role = ReferenceRole(4, None)
    resp = role.op_load_task({"key": "p", "task": str(task), "device": "cpu", "init_seed": 1,
                              "probe_seeds": [1, 2], "tolerance": {"default": [1e-4, 1e-4]}})
    assert resp["ok"], resp
    # input 8x100, output 8x50, weight 50x100 and bias 50, all fp32
    assert resp["footprint_bytes"] == 4 * (800 + 400 + 5000 + 50)
