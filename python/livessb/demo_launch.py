"""`livessb demo`: open the demo notebook in JupyterLab."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

__all__ = ["demo_notebook_path", "free_port", "launch_demo_notebook", "run_until_stopped"]

# The one copy of the demo notebook: shipped in the package (a checkout uses it too).
_PACKAGED = Path(__file__).parent / "notebooks" / "demo.ipynb"


def demo_notebook_path() -> Path:
    """The demo notebook shipped with the package."""
    if _PACKAGED.is_file():
        return _PACKAGED
    raise FileNotFoundError(
        f"demo.ipynb not found at {_PACKAGED}: reinstall livessb (the wheel ships it)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch_demo_notebook(port: int | None = None, open_browser: bool = True,
                         workdir: str | Path | None = None) -> int:
    """Copy the demo notebook to ``workdir`` (default ``./livessb-demo``) and run JupyterLab on it.

    Blocks until JupyterLab exits; returns its exit code.
    """
    work = Path(workdir or "livessb-demo").resolve()
    work.mkdir(parents=True, exist_ok=True)
    target = work / "demo.ipynb"
    if not target.exists():  # never overwrite the user's edits
        shutil.copyfile(demo_notebook_path(), target)
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={work}",
           f"--port={port or free_port()}", "--ServerApp.ip=127.0.0.1"]
    if not open_browser:
        cmd.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    cmd.append(str(target.name))
    print(f"livessb demo: {target}")
    return run_until_stopped(cmd, work)


class _TerminatedError(Exception):
    """SIGTERM reached ``livessb demo``."""


def run_until_stopped(cmd: list[str], cwd: str | Path, grace_s: float = 10.0) -> int:
    """Run ``cmd`` until it exits, or until Ctrl-C or SIGTERM reaches this process: then
    stop it too (terminate, kill after ``grace_s``) so no JupyterLab is left running.
    Its exit code; 0 when stopped."""
    def on_term(_signum: int, _frame: object) -> None:
        raise _TerminatedError

    previous = signal.signal(signal.SIGTERM, on_term)
    child = subprocess.Popen(cmd, cwd=cwd)
    try:
        return child.wait()
    except (KeyboardInterrupt, _TerminatedError):
        child.terminate()
        try:
            child.wait(grace_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
