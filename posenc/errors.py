"""The core's one exception tree.

    PosencError(ValueError)
    ├── ParameterError(param, message)   a parameter is out of its range
    └── NotApplicableError(param, scheme)     a parameter that the scheme does not take

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
