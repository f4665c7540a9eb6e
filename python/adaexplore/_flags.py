"""Keyword arguments to the command line's flags: the engine parses and checks them."""

# Keywords whose False is a flag of its own.
_NEGATIONS = {"cache": "--no-cache", "time": "--no-time"}


def to_flags(options):
    """{"steps": 8, "small_step_limit": 3, "cache": False} -> ["--steps", "8", "--small-step-limit", "3", "--no-cache"]."""
    flags = []
    for key, value in options.items():
        if value is None:
            continue
        if key in _NEGATIONS:
            if value is False:
                flags.append(_NEGATIONS[key])
            continue
        name = "--" + key.replace("_", "-")
        if value is True:
            flags.append(name)
        elif value is False:
            continue
        elif isinstance(value, (list, tuple)):
            flags += [name, ",".join(str(v) for v in value)]
        else:
            flags += [name, str(value)]
    return flags
