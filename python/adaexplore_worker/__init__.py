"""adaexplore judge worker.

The C++ judge starts this package as isolated subprocesses and speaks to them
over a line-oriented JSON protocol (docs/worker-protocol.md):

* ``python -m adaexplore_worker reference`` is the trusted side: it runs only
  the task's own ``Model``, keeps reference outputs in its memory, compares
  candidate outputs and times the eager and ``torch.compile`` baselines.
* ``python -m adaexplore_worker candidate`` hosts exactly one candidate
  ``ModelNew``; it is thrown away after that candidate.
"""

PROTOCOL_VERSION = 1
