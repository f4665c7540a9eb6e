"""adaexplore: fast, verified GPU kernels for PyTorch operators, from Python.

The C++ engine (the extension ``adaexplore._engine``) does all the work: the
judge, the search, the builtin compiler and the run store. This package turns
keyword arguments into the command line's flags and results into objects::

    import adaexplore
    result = adaexplore.optimize("examples/tasks/1_BiasReLUScale.py", steps=4, device="cpu")
    fast = result.module()

See docs/python.md.
"""

from ._errors import AdaexploreError, InvalidInputError, JudgeUnavailableError
from ._api import Verdict, Result, Report, evaluate, optimize, bench, report, load
from ._engine import __version__

__all__ = [
    "AdaexploreError", "InvalidInputError", "JudgeUnavailableError",
    "Verdict", "Result", "Report", "evaluate", "optimize", "bench", "report", "load", "__version__",
]
