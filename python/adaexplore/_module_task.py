"""A user's own nn.Module and example inputs, written as a KernelBench task file.

The task file holds the module's class (and what it needs from its own Python
file) as source, a ``Model`` that builds it with the constructor arguments
read from the instance and loads its ``state_dict`` from a weights file next
to the task (its SHA-256 is in the task, so the task's hash covers the
weights), and ``get_inputs()`` that makes fresh inputs shaped like the
examples. The written task is checked at once: its ``Model`` must reproduce
the module's output on the example inputs.
"""

import ast
import builtins
import hashlib
import importlib.util
import inspect
import os
import sys
import sysconfig
import textwrap
import types
import uuid

from ._errors import InvalidInputError

_LITERALS = (bool, int, float, str, type(None))


def _fail(cls_name, why):
    raise InvalidInputError("cannot write %s as a task: %s" % (cls_name, why), 2)


def _is_literal(v):
    if isinstance(v, _LITERALS):
        return not (isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))))
    if isinstance(v, (tuple, list)):
        return all(_is_literal(x) for x in v)
    return False


def _installed(module_name):
    """Whether a module is importable from the standard library or site-packages (not a user's own file)."""
    if module_name in sys.builtin_module_names:
        return True
    mod = sys.modules.get(module_name)
    path = getattr(mod, "__file__", None)
    if mod is None or path is None:
        return False
    path = os.path.realpath(path)
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return any(path.startswith(os.path.realpath(r) + os.sep) for r in roots)


class _Closure:
    """The source a class needs: its own, the user-defined classes and functions it names, and imports."""

    def __init__(self, root_name):
        self.root_name = root_name
        self.imports = []     # lines, in first-seen order
        self.defs = []        # (name, source), dependencies first
        self.constants = []   # lines
        self._seen = set()

    def _add_import(self, line):
        if line not in self.imports:
            self.imports.append(line)

    def add(self, obj):
        key = id(obj)
        if key in self._seen:
            return
        self._seen.add(key)
        name = getattr(obj, "__name__", "?")
        try:
            src = textwrap.dedent(inspect.getsource(obj))
        except (OSError, TypeError):
            _fail(self.root_name, "the source of %s is not available (a class typed at an interactive prompt has "
                  "none: define it in a file or a notebook cell)" % name)
        if getattr(obj, "__qualname__", name) != name:
            _fail(self.root_name, "%s is defined inside another class or function (%s); define it at module level"
                  % (name, obj.__qualname__))
        module = sys.modules.get(obj.__module__)
        env = vars(module) if module is not None else {}
        for ref in sorted(self._names(src)):
            if ref == name or ref not in env or hasattr(builtins, ref) and getattr(builtins, ref) is env[ref]:
                continue
            self._resolve(ref, env[ref])
        self.defs.append((name, src))

    @staticmethod
    def _names(src):
        tree = ast.parse(src)
        return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}

    def _resolve(self, ref, value):
        if isinstance(value, types.ModuleType):
            if not _installed(value.__name__.split(".")[0]) and not _installed(value.__name__):
                _fail(self.root_name, "it uses the module %s (%s), which is not installed; only installed modules "
                      "can be imported by the task" % (ref, value.__name__))
            line = ("import %s" % value.__name__) if ref == value.__name__ else "import %s as %s" % (value.__name__, ref)
            self._add_import(line)
        elif isinstance(value, (type, types.FunctionType)):
            mod = getattr(value, "__module__", None) or ""
            if mod and _installed(mod) and getattr(value, "__qualname__", "") == value.__name__:
                line = "from %s import %s" % (mod, value.__name__)
                self._add_import(line if ref == value.__name__ else line + " as " + ref)
            elif ref == value.__name__:
                self.add(value)
            else:
                _fail(self.root_name, "it uses %s under another name (%s)" % (value.__name__, ref))
        elif _is_literal(value):
            self.constants.append("%s = %r" % (ref, value))
        else:
            _fail(self.root_name, "it uses the global %r (a %s), which cannot be written into a task file"
                  % (ref, type(value).__name__))


def _init_kwargs(module, cls, init_args):
    """Constructor keyword arguments: init_args where given, else the instance's attributes of the same name."""
    if init_args is not None:
        if not isinstance(init_args, dict):
            raise InvalidInputError("init_args must be a dict of the constructor's keyword arguments", 2)
        for k, v in init_args.items():
            if not _is_literal(v):
                _fail(cls.__name__, "init_args[%r] is a %s; only numbers, strings, booleans, None and tuples of "
                      "them can be written" % (k, type(v).__name__))
        return dict(init_args)
    kwargs = {}
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        value = getattr(module, p.name, inspect.Parameter.empty)
        if value is not inspect.Parameter.empty and _is_literal(value):
            kwargs[p.name] = value
        elif p.default is inspect.Parameter.empty:
            _fail(cls.__name__, "its constructor argument %r cannot be recovered from the instance (keep it as "
                  "self.%s, or pass init_args={%r: ...})" % (p.name, p.name, p.name))
    return kwargs


def _input_expr(i, x):
    import torch
    if isinstance(x, torch.Tensor):
        shape = tuple(x.shape)
        dtype = str(x.dtype)
        if x.dtype.is_floating_point:
            return "torch.randn(%r, dtype=%s)" % (shape, dtype)
        if x.dtype == torch.bool:
            return "torch.rand(%r) < 0.5" % (shape,)
        if x.dtype.is_complex:
            raise InvalidInputError("example input %d is a complex tensor: not supported" % i, 2)
        lo = int(x.min()) if x.numel() else 0
        hi = int(x.max()) if x.numel() else 0
        return "torch.randint(%d, %d, %r, dtype=%s)" % (lo, hi + 1, shape, dtype)
    if isinstance(x, (bool, int, float, type(None))) and _is_literal(x):
        return repr(x)
    raise InvalidInputError("example input %d is a %s: inputs must be tensors, numbers, booleans or None"
                            % (i, type(x).__name__), 2)


def write_task(module, example_inputs, directory, name=None, init_args=None):
    """Writes DIRECTORY/NAME.py (and NAME.weights.pt) for the module; returns the task file's path."""
    import torch
    if not isinstance(module, torch.nn.Module):
        raise InvalidInputError("optimize() takes a task file or an nn.Module; got a %s" % type(module).__name__, 2)
    if isinstance(example_inputs, torch.Tensor) or _is_literal(example_inputs) and not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise InvalidInputError("example_inputs must be a tensor or a tuple of inputs; got a %s"
                                % type(example_inputs).__name__, 2)
    example_inputs = tuple(example_inputs)
    cls = type(module)
    name = name or cls.__name__
    if not name.isidentifier():
        raise InvalidInputError("the task name %r is not a Python identifier" % name, 2)
    inputs = [_input_expr(i, x) for i, x in enumerate(example_inputs)]
    args = ["x%d" % i for i in range(len(inputs))]  # named: the tracer reads forward's signature
    kwargs = _init_kwargs(module, cls, init_args)

    closure = _Closure(cls.__name__)
    if _installed(cls.__module__) and cls.__qualname__ == cls.__name__:
        closure.imports.append("from %s import %s" % (cls.__module__, cls.__name__))
    else:
        closure.add(cls)

    os.makedirs(directory, exist_ok=True)
    weights = os.path.abspath(os.path.join(directory, name + ".weights.pt"))
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    torch.save(state, weights)
    with open(weights, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()

    lines = ['"""%s as a KernelBench task, written by adaexplore.optimize() from an nn.Module."""' % name, "",
             "import hashlib", "", "import torch", "import torch.nn as nn"]
    lines += [l for l in closure.imports if l not in ("import torch", "import torch.nn as nn")]
    lines += [""] + closure.constants + [""] if closure.constants else [""]
    for _, src in closure.defs:
        lines += ["", src.rstrip(), ""]
    lines += ["", "WEIGHTS = %r" % weights, "WEIGHTS_SHA256 = %r" % digest, "INIT_KWARGS = %r" % (kwargs,),
              "TRAINING = %r" % bool(module.training), "", "",
              "class Model(nn.Module):",
              '    """%s(**INIT_KWARGS) with the weights it was optimized with."""' % cls.__name__, "",
              "    def __init__(self):",
              "        super().__init__()",
              "        self.net = %s(**INIT_KWARGS)" % cls.__name__,
              "        with open(WEIGHTS, 'rb') as f:",
              "            if hashlib.sha256(f.read()).hexdigest() != WEIGHTS_SHA256:",
              "                raise RuntimeError('the weights file ' + WEIGHTS + ' changed since the task was written')",
              "        self.net.load_state_dict(torch.load(WEIGHTS, map_location='cpu', weights_only=True))",
              "        self.train(TRAINING)", "",
              "    def forward(self, %s):" % ", ".join(args),
              "        return self.net(%s)" % ", ".join(args), "", "",
              "def get_inputs():",
              "    return [%s]" % ", ".join(inputs), "", "",
              "def get_init_inputs():",
              "    return []", ""]
    path = os.path.join(directory, name + ".py")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    _check(path, module, example_inputs, cls.__name__)
    return path


def _check(path, module, example_inputs, cls_name):
    """The written task's Model must give the module's output on the example inputs."""
    import torch
    spec = importlib.util.spec_from_file_location("adaexplore_task_%s" % uuid.uuid4().hex, path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
        model = mod.Model()
    except Exception as e:  # noqa: BLE001 - any failure of the written file is the module's
        _fail(cls_name, "the written task does not load: %s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    devices = {x.device for x in example_inputs if isinstance(x, torch.Tensor)}
    device = devices.pop() if len(devices) == 1 else torch.device("cpu")
    model = model.to(device)
    with torch.no_grad():
        try:
            want = module(*example_inputs)
        except Exception as e:  # noqa: BLE001 - the user's module, on the user's inputs
            raise InvalidInputError("the module fails on its example inputs: %s: %s"
                                    % (type(e).__name__, (str(e).splitlines() or [""])[0]), 2) from e
        try:
            got = model(*example_inputs)
        except Exception as e:  # noqa: BLE001
            _fail(cls_name, "the written task fails on the example inputs: %s: %s"
                  % (type(e).__name__, (str(e).splitlines() or [""])[0]))
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    ok = len(want) == len(got) and all(
        isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
        and torch.equal(a, b) for a, b in zip(want, got))
    if not ok:
        _fail(cls_name, "the written task does not reproduce the module's output on the example inputs "
              "(a constructor argument read from the instance may be wrong: pass init_args=, or the forward "
              "draws random numbers)")
