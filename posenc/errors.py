"""The core's one exception tree.

    PosencError(ValueError)
    ├── ParameterError(param, message)        a parameter is out of its range
    │   ├── InconsistentError(param, message) it breaks a rule tying it to another parameter
    │   │   ├── IncompleteError(…, needed_bytes) a file's first bytes stop too soon
    │   │   └── ExternalDataNeededError(…, needed) bytes the body refers to, not sent
    │   └── LimitError(param, message)        together, the parameters ask for too much
    └── NotApplicableError(param, scheme)     a parameter that the scheme does not take

A JSON schema of separate query parameters can state a range but not a rule between two
parameters (rope's ``short_factor`` must hold ``d_model/2`` numbers), nor a bound on their sum
or product: those two kinds have classes of their own, so a client can tell them apart.

Every message names the parameter, what was given and what is allowed, so the HTTP layer can
pass it to the client unchanged.
"""


class PosencError(ValueError):
    """Base class of every error the core raises on bad input."""


class ParameterError(PosencError):
    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param
        self.message = message


class NotApplicableError(PosencError):
    def __init__(self, param: str, scheme: str, reason: str = "") -> None:
        message = f"does not apply to scheme {scheme!r}" + (f": {reason}" if reason else "")
        super().__init__(f"{param}: {message}")
        self.param = param
        self.scheme = scheme
        self.message = message


class InconsistentError(ParameterError):
    """Each parameter is in its range, but together they break a rule their descriptions state."""


class IncompleteError(InconsistentError):
    """A body of a file's first bytes stops before what is read from it: ``needed_bytes``
    from the file's start reach it, a number a client acts on (it sends that many again)."""

    def __init__(self, param: str, message: str, needed_bytes: int) -> None:
        # Not super(): a subclass may also derive from another ParameterError whose own
        # __init__ takes other arguments (the GGUF reader's errors).
        ParameterError.__init__(self, param, message)
        self.needed_bytes = needed_bytes


class ExternalDataNeededError(InconsistentError):
    """A file in the body keeps data in another file (an ONNX model's external data), and the
    body does not hold the bytes that are read from it: ``needed`` lists them, each
    ``{"tensor", "location", "offset", "length"}``, ranges a client sends next."""

    def __init__(self, param: str, message: str, needed: list[dict[str, object]]) -> None:
        super().__init__(param, message)
        self.needed = needed


class LimitError(ParameterError):
    """Each parameter is in its range, but together they ask for more than the service serves
    (positions past 2^31, more grid cells than 2^24)."""


def against_model_type(error: ParameterError) -> ParameterError:
    """A value refused deep in a model's config.json, which an operation's schema takes as an
    object without typing every key of every family: the config disagrees with what its
    model type's config class takes, a rule between the two (limits stay limits)."""
    if isinstance(error, InconsistentError | LimitError):
        return error
    return InconsistentError(error.param, error.message)
