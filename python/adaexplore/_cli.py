"""The ``adaexplore`` command of the Python package: the engine's own command line."""

import os
import signal
import sys


def main():
    from . import _engine
    # The judge's workers need torch: by default, the interpreter that has this package.
    os.environ.setdefault("ADAEXPLORE_PYTHON", sys.executable)
    # Ctrl-C as in the native binary: the engine's handler while a run goes on, else the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    code = _engine.main(["adaexplore"] + sys.argv[1:])
    sys.exit(code)


if __name__ == "__main__":
    main()
