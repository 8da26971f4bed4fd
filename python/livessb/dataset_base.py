"""The dataset's leaf definitions (no Dataset4D here): the error type and the counts
dtypes. ``livessb.io``'s metadata and adapter modules import these, so that
``Dataset4D.from_hyperspy``/``from_py4dstem`` can call them without an import cycle."""

from __future__ import annotations

import numpy as np

SUPPORTED_DTYPES = (np.uint8, np.uint16, np.uint32, np.float32)


class DatasetError(ValueError):
    """Counts or calibration that SSB cannot use; the message names the fix."""
