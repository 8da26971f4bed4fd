"""A full-field fit that does not finish (cancelled through its progress callback, or
failed) leaves the session as it was: ``Session.fit`` sets ``full_fit``,
``rotation_deg`` and ``transpose`` only at its end, and this puts the resident
full-field model back at the kept rotation, which the search had moved through the
branches (reconstructions, previews and ``diagnostics`` expect it there).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["FitRequiredError", "SessionClosedError", "keeps_fitted_geometry"]


class SessionClosedError(RuntimeError):
    """The session was closed; results already returned stay valid."""


class FitRequiredError(RuntimeError):
    """A regional fit or reconstruction needs the full-field rotation first."""


def keeps_fitted_geometry(method: F) -> F:
    """Decorator of a Session method that moves the full-field model's rotation."""

    @functools.wraps(method)
    def wrapper(session: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(session, *args, **kwargs)
        except BaseException:
            if session.rotation_deg is not None and not session.closed:
                session.loss_evaluator()  # binds the full field at the kept rotation
            raise
    return cast(F, wrapper)
