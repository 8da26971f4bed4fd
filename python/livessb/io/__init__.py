"""Loading 4D-STEM files into :class:`~livessb.Dataset4D` (see ``docs/formats.md``).

``load(path, ...)`` picks the reader from the suffix (and, for HDF5, the layout):

========================  =====================================================
``.npy``                  memory-mapped; 3D needs ``scan_shape``
``.npz``                  the 3D/4D member; scalar members fill calibration
``.h5 .hdf5 .hdf .nxs``   generic HDF5, Dectris/Arina master files (``*_master.h5``)
``.emd .h5``              py4DSTEM / EMD 1.0 (calibration from dims and metadata)
``.mib``                  Merlin counting-mode frames; needs ``scan_shape``
========================  =====================================================
"""

from __future__ import annotations

from ..dataset import DatasetError
from .dispatch import load, read_metadata
from .errors import CorruptFileError, FileFormatError, UnsupportedFormatError
from .metadata import CALIBRATION_KEYS, FileCalibration, parse_attrs, resolve_calibration

__all__ = [
    "CALIBRATION_KEYS",
    "CorruptFileError",
    "DatasetError",
    "FileCalibration",
    "FileFormatError",
    "UnsupportedFormatError",
    "load",
    "parse_attrs",
    "read_metadata",
    "resolve_calibration",
]
