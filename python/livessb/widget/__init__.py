"""The notebook widget: ``SSBWidget`` (traits and handlers, ``widget.py``), its worker
(``scheduler.py``), the front-end bundle (``bundle.py``) and the JSON records it
syncs (``records.py``). The wire contract is docs/widget-protocol.md."""

from __future__ import annotations

from .bundle import FrontendBuildError, bundle_paths
from .widget import SSBWidget, WidgetClosedError

__all__ = ["FrontendBuildError", "SSBWidget", "WidgetClosedError", "bundle_paths"]
