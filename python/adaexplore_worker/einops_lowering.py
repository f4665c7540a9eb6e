"""einops.rearrange, reduce and repeat as plain tensor operations.

While a forward is traced, an einops call on a traced value becomes what it
does: a reshape into the pattern's elementary axes, a reduction over the axes
the output drops, a permute into the output's order, an expand for the axes a
repeat adds and a reshape into the output's groups (each only where needed).
The pattern is parsed by einops' own parser (`einops.parsing.ParsedExpression`);
the input's shape is known while tracing, so every axis length is a number.

The functions here take anything with a `shape` and torch's tensor methods: a
traced value records the operations into the graph, a tensor just computes.
"""

import contextlib
import math
import sys

import torch

# einops reduction name -> the torch.Tensor method that does it.
_REDUCTIONS = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin", "prod": "prod", "any": "any",
               "all": "all"}


class EinopsLoweringError(ValueError):
    pass


def _parse(side):
    from einops.parsing import ParsedExpression

    return ParsedExpression(side)


def _groups(parsed, ellipsis_names):
    """The composition with the ellipsis spelled out: a list of lists of axes."""
    from einops.parsing import _ellipsis

    out = []
    for item in parsed.composition:
        if item == _ellipsis:
            out += [[e] for e in ellipsis_names]
        else:
            group = []
            for a in item:
                group += list(ellipsis_names) if a == _ellipsis else [a]
            out.append(group)
    return out


def _shape_of(x):
    try:
        shape = tuple(x.shape)
    except Exception as exc:  # a traced value whose shape the tracer does not know
        raise EinopsLoweringError("einops: the input's shape is unknown") from exc
    if not all(isinstance(d, int) for d in shape):
        raise EinopsLoweringError("einops: the input's shape is unknown")
    return shape


def lower(x, pattern, reduction, axes_lengths):
    """einops.reduce(x, pattern, reduction, **axes_lengths) ("rearrange" and
    "repeat" are reductions too, as in einops) as tensor operations on x."""
    from einops.parsing import AnonymousAxis

    if isinstance(x, (list, tuple)):
        x = torch.stack(list(x))
    if not isinstance(reduction, str) or (reduction not in _REDUCTIONS and reduction not in ("rearrange", "repeat")):
        raise EinopsLoweringError("einops: reduction %r is not lowered" % (reduction,))
    if "->" not in pattern:
        raise EinopsLoweringError("einops: pattern %r has no '->'" % pattern)
    left_text, right_text = pattern.split("->")
    left, right = _parse(left_text), _parse(right_text)
    shape = _shape_of(x)
    if left.has_ellipsis_parenthesized:
        raise EinopsLoweringError("einops: ellipsis inside parenthesis in the left side is not allowed")
    if left.has_ellipsis:
        count = len(shape) - (len(left.composition) - 1)
        if count < 0:
            raise EinopsLoweringError("einops: the input has too few dimensions for %r" % pattern)
        ellipsis = ["\u2026%d" % i for i in range(count)]
    else:
        if right.has_ellipsis:
            raise EinopsLoweringError("einops: ellipsis found in the right side but not in the left")
        if len(shape) != len(left.composition):
            raise EinopsLoweringError("einops: pattern %r expects %d dimensions, the input has %d"
                                      % (pattern, len(left.composition), len(shape)))
        ellipsis = []
    lgroups, rgroups = _groups(left, ellipsis), _groups(right, ellipsis)

    known = {}
    for name, value in axes_lengths.items():
        known[name] = int(value)
    for group in lgroups + rgroups:
        for a in group:
            if isinstance(a, AnonymousAxis):
                known[a] = a.value
    for group, dim in zip(lgroups, shape):
        unknown = [a for a in group if a not in known]
        product = math.prod(known[a] for a in group if a in known)
        if len(unknown) > 1:
            raise EinopsLoweringError("einops: cannot infer the sizes of %s" % unknown)
        if unknown:
            if product == 0 or dim % product:
                raise EinopsLoweringError("einops: dimension of %d does not divide into %r" % (dim, group))
            known[unknown[0]] = dim // product
        elif product != dim:
            raise EinopsLoweringError("einops: shape mismatch, %d != %d" % (dim, product))

    laxes = [a for g in lgroups for a in g]
    raxes = [a for g in rgroups for a in g]
    lset, rset = set(laxes), set(raxes)
    if reduction == "rearrange":
        if lset != rset:
            raise EinopsLoweringError("einops: the two sides of %r name different axes" % pattern)
    elif reduction == "repeat":
        if not lset <= rset:
            raise EinopsLoweringError("einops: repeat %r drops axes" % pattern)
    elif not rset <= lset:
        raise EinopsLoweringError("einops: reduce %r adds axes" % pattern)
    for a in raxes:
        if a not in known:
            raise EinopsLoweringError("einops: the size of %s is not given" % a)

    # 1. Into the elementary axes.
    if any(len(g) != 1 for g in lgroups):
        x = x.reshape([known[a] for a in laxes])
    # 2. Reduce the axes the output drops.
    reduced = [a for a in laxes if a not in rset]
    if reduced:
        dims = [laxes.index(a) for a in reduced]
        method = _REDUCTIONS[reduction]
        if method == "prod":
            for d in sorted(dims, reverse=True):
                x = x.prod(dim=d)
        else:
            x = getattr(x, method)(dim=tuple(dims) if method in ("amax", "amin", "any", "all") else dims)
    kept = [a for a in laxes if a in rset]
    # 3. Into the output's order.
    order = [a for a in raxes if a in lset]
    perm = [kept.index(a) for a in order]
    if perm != list(range(len(perm))):
        x = x.permute(perm)
    # 4. The axes a repeat adds.
    if any(a not in lset for a in raxes):
        x = x.reshape([1 if a not in lset else known[a] for a in raxes])
        x = x.expand([known[a] for a in raxes])
    # 5. Into the output's groups.
    if any(len(g) != 1 for g in rgroups):
        x = x.reshape([math.prod(known[a] for a in g) for g in rgroups])
    return x


def rearrange(tensor, pattern, **axes_lengths):
    return lower(tensor, pattern, "rearrange", axes_lengths)


def reduce(tensor, pattern, reduction, **axes_lengths):
    return lower(tensor, pattern, reduction, axes_lengths)


def repeat(tensor, pattern, **axes_lengths):
    return lower(tensor, pattern, "repeat", axes_lengths)


def is_layer(module):
    """Whether module is an einops layer (Rearrange, Reduce) lowered the same way."""
    einops = sys.modules.get("einops")
    if einops is None:
        return False
    layers = sys.modules.get("einops.layers.torch")
    return layers is not None and isinstance(module, (layers.Rearrange, layers.Reduce))


def lower_layer(module, x):
    return lower(x, module.pattern, getattr(module, "reduction", "rearrange"), dict(module.axes_lengths))


@contextlib.contextmanager
def patched(modules, is_traced):
    """While active, einops.rearrange/reduce/repeat called on a traced value (as
    is_traced tells) lower into tensor operations: in the einops module and in
    every module in `modules` (those that defined the model's classes) whose
    globals name them (`from einops import rearrange`)."""
    einops = sys.modules.get("einops")
    if einops is None:
        yield
        return
    originals = {name: getattr(einops, name) for name in ("rearrange", "reduce", "repeat") if hasattr(einops, name)}

    def wrap(name, fn):
        def lowered(tensor, *args, **kwargs):
            items = tensor if isinstance(tensor, (list, tuple)) else [tensor]
            if not any(is_traced(t) for t in items):
                return fn(tensor, *args, **kwargs)
            return {"rearrange": rearrange, "reduce": reduce, "repeat": repeat}[name](tensor, *args, **kwargs)
        lowered.__wrapped__ = fn
        return lowered

    wrappers = {name: wrap(name, fn) for name, fn in originals.items()}
    undo = []
    targets = [einops] + [sys.modules.get(m) for m in modules]
    for mod in targets:
        if mod is None:
            continue
        space = vars(mod)
        for key, value in list(space.items()):
            for name, fn in originals.items():
                if value is fn:
                    undo.append((space, key, value))
                    space[key] = wrappers[name]
    try:
        yield
    finally:
        for space, key, value in reversed(undo):
            space[key] = value
