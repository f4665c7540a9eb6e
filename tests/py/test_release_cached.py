"""The worker's memory release after a request: when it collects garbage. The collection runs
inside the request that the judge clocks (the worker replies after it), so it must not run for
memory that no collection frees, such as a captured CUDA graph's private pool."""

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "python"))

from adaexplore_worker import common  # noqa: E402

MB = 1 << 20
LIMIT = 256 * MB


def test_a_graph_pool_left_reserved_is_not_collected():
    # 1 GiB reserved by a graph's private pool; the timing request left nothing allocated.
    assert not common.collects_garbage(reserved=1400 * MB, allocated=400 * MB, threshold=LIMIT,
                                       allocated_before=400 * MB)


def test_memory_a_request_left_allocated_is_collected():
    assert common.collects_garbage(reserved=1400 * MB, allocated=700 * MB, threshold=LIMIT,
                                   allocated_before=400 * MB)
    # even when little sits cached: a cycle that holds tensors shows as allocated memory
    assert common.collects_garbage(reserved=710 * MB, allocated=700 * MB, threshold=LIMIT,
                                   allocated_before=100 * MB)


def test_small_growth_is_not_collected():
    assert not common.collects_garbage(reserved=2000 * MB, allocated=500 * MB, threshold=LIMIT,
                                       allocated_before=300 * MB)


def test_without_the_starting_figure_cached_memory_decides():
    assert common.collects_garbage(reserved=1400 * MB, allocated=400 * MB, threshold=LIMIT)
    assert not common.collects_garbage(reserved=500 * MB, allocated=400 * MB, threshold=LIMIT)


def test_the_worker_loop_passes_the_starting_figure():
    # The loop records the allocated bytes before each request and hands them over.
    source = (ROOT / "python" / "adaexplore_worker" / "__main__.py").read_text()
    assert "allocated = common.allocated_bytes()" in source
    assert 'common.release_cached("cuda", allocated_before=allocated)' in source
    assert common.allocated_bytes() >= 0
