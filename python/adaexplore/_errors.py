"""The exceptions of the API; each carries the command line's exit code."""


class AdaexploreError(RuntimeError):
    """The engine could not do what was asked; ``code`` is the command line's exit code."""

    def __init__(self, message, code=1, errors=()):
        super().__init__(message)
        self.code = code
        self.errors = list(errors) or [message]


class InvalidInputError(AdaexploreError, ValueError):
    """Bad input (exit code 2): a broken task, an unknown option, a missing run folder."""


class JudgeUnavailableError(AdaexploreError):
    """The judge's environment is broken (exit code 3): no Python with torch, no GPU, no broker."""


def raise_for(reply, what):
    """Raises the exception that an engine reply ({"code", "errors"}) calls for."""
    code = reply.get("code", 0)
    if code == 0:
        return
    errors = reply.get("errors") or []
    message = "%s: %s" % (what, errors[0] if errors else "failed with exit code %d" % code)
    if code == 2:
        raise InvalidInputError(message, code, errors)
    if code == 3:
        raise JudgeUnavailableError(message, code, errors)
    raise AdaexploreError(message, code, errors)
