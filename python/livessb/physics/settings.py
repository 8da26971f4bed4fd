"""Model settings a session is opened with: one check and one message shape for all."""

from __future__ import annotations


def check_setting(name: str, value: str, choices: tuple[str, ...], meaning: str) -> str:
    """``value`` when it is one of a model setting's ``choices``; else an error that names
    the setting, the choices and what each ``meaning`` is."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}: {meaning}")
    return value
