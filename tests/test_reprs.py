"""Concise reprs and notebook tables; no Optuna log line; progress bars for long stages."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pytest

from livessb import progress

if TYPE_CHECKING:
    from livessb import Session


def test_fit_result_repr_is_concise(demo_session: Session) -> None:
    fit = demo_session.full_fit
    assert fit is not None
    text = repr(fit)
    assert len(text) < 400, len(text)  # was 63,000 characters: every trial
    assert text.startswith("FitResult(loss=") and "C10=" in text and " Å" in text
    assert f"{len(fit.trials)} trials" in text
    # each value with its error; what the data do not determine named, not shown as 0
    assert f"C10={fit.params['C10']:.4g} ± {fit.errors['C10']:.2g} Å" in text
    assert fit.undetermined == ["tilt_row_mrad", "tilt_col_mrad", "depth"]  # thin demo
    assert "not determined: tilt_row_mrad, tilt_col_mrad, depth;" in text
    assert "depth=" not in text and "tilt_row_mrad=" not in text
    html = fit._repr_html_()
    assert len(html) < 4000 and "<table>" in html
    for name in fit.params:
        assert f"<td>{name}</td>" in html
    assert "rotation" in html and f"{fit.rotation_deg:.3f}°" in html
    assert html.count("not determined") == 3 and "<td>thin</td>" not in html
    assert "<th style='text-align:left'>model</th><td colspan='3'>thin</td>" in html


def test_session_region_and_reconstruction_reprs(demo_session: Session) -> None:
    s = demo_session
    text = repr(s)
    assert text.startswith("Session(device='cpu', Dataset4D(") and len(text) < 400
    assert "rotation_deg=" in text and "<table>" in s._repr_html_()
    rec = s.reconstruct(upsample=1)
    r = repr(rec)
    assert r.startswith("Reconstruction(96×96 complex64, upsample=1") and len(r) < 400
    h = rec._repr_html_()
    assert "data:image/png;base64," in h and "Å/px" in h
    reg = s.fit_region((8, 40, 8, 40), trials=16, region_id="q")
    try:
        t = repr(reg)
        assert t.startswith("RegionResult(id='q', bounds=(8, 40, 8, 40)") and len(t) < 400
        assert f"C10={reg.params['C10']:.4g} ± {reg.fit.errors['C10']:.2g} Å" in t
        assert "stops exclusive" in reg._repr_html_()
    finally:
        s.remove_region("q")


def test_study_logs_nothing(demo_session: Session, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        assert demo_session.full_fit is not None
        study = demo_session.full_fit.study()
    assert len(study.trials) == len(demo_session.full_fit.trials)
    assert not [r for r in caplog.records if r.name.startswith("optuna")]


def test_progress_bars_follow_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    import time

    with progress.progress_enabled(True), progress.stage("slow stage"):
        time.sleep(progress.SHOW_AFTER_S + 0.3)
    assert "slow stage" in capsys.readouterr().err
    with progress.progress_enabled(False), progress.stage("silent stage"):
        time.sleep(progress.SHOW_AFTER_S + 0.3)
    assert "silent stage" not in capsys.readouterr().err


def test_progress_silent_in_worker_threads() -> None:
    import threading

    seen: list[bool] = []
    t = threading.Thread(target=lambda: seen.append(progress.enabled()))
    t.start()
    t.join()
    assert seen == [False] and progress.enabled()


def test_compile_note_only_for_cold_cpu_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    class Engine:
        name = "cpu"

    monkeypatch.setattr(progress, "kernels_cached", lambda: False)
    assert "compiling the Numba kernels" in progress.compile_note(Engine())
    Engine.name = "cuda"
    assert progress.compile_note(Engine()) == ""
    monkeypatch.setattr(progress, "kernels_cached", lambda: True)
    Engine.name = "cpu"
    assert progress.compile_note(Engine()) == ""
