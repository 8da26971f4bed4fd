"""`livessb demo` stops the JupyterLab it started when it is stopped itself (SIGTERM or
Ctrl-C), instead of leaving it running (issue 21 item 7)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# A stand-in for `livessb demo`: run_until_stopped on a long-running child (in place of
# JupyterLab) that writes its pid, so the test can check it is gone afterwards.
LAUNCHER = r"""
import sys
from livessb.demo_launch import run_until_stopped
child = [sys.executable, "-c",
         "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)",
         sys.argv[1]]
sys.exit(run_until_stopped(child, "."))
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill 0: look at its state
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stopping_the_demo_stops_the_server_it_started(tmp_path: Path,
                                                       sig: signal.Signals) -> None:
    pid_file = tmp_path / "server.pid"
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(pid_file)],
                                cwd=tmp_path, env={**os.environ})
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline, "the stand-in server never started"
            assert launcher.poll() is None, "the launcher exited early"
            time.sleep(0.05)
        server = int(pid_file.read_text())
        assert _alive(server)
        launcher.send_signal(sig)
        assert launcher.wait(30) == 0
        deadline = time.monotonic() + 15
        while _alive(server):
            assert time.monotonic() < deadline, f"the server {server} was left running"
            time.sleep(0.05)
    finally:
        if launcher.poll() is None:
            launcher.kill()
