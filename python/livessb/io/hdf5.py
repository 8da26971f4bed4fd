"""HDF5 files: the one place that decides the layout, and the loader.

* py4DSTEM / EMD 1.0: a data group with ``emd_group_type`` (see ``emd``).
* Dectris/Arina master: ``/entry/data/data_000001, data_000002, ...`` (external
  links to the data files, which must sit next to the master) are concatenated
  in order (see ``dectris``).
* Generic: the counts are the largest numeric dataset with 3 or 4 dimensions;
  when two candidates tie, ``dataset_path=`` is required (the error lists them).

Only the HDF5 chunks that intersect the requested ``scan_region`` are read.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..dataset import Dataset4D
from .dectris import ConcatFrames, dectris_links, open_links
from .emd import choose_group, dims_calibration, emd_groups
from .h5 import find_dataset, open_hdf5
from .h5meta import collect_metadata
from .metadata import FileCalibration
from .options import LoadOptions
from .source import ScanSource
from .stream import stream_dataset


@dataclass
class HDF5Counts:
    """Where an open file keeps its counts, and the calibration its metadata gives."""

    calibration: FileCalibration
    data_name: str  # "<file>:<path>" for messages
    dataset: Any = None  # the counts ``h5py.Dataset``; None for a Dectris master
    links: list[str] = field(default_factory=list)  # Dectris master: data_000001...


def locate_counts(f: Any, dataset_path: str | None, name: str) -> HDF5Counts:
    """EMD group, Dectris master or generic dataset: the layout dispatch, done once."""
    if emd_groups(f):
        group = choose_group(f, dataset_path, name)
        dset = group["data"] if "data" in group else find_dataset(f, dataset_path, name)
        cal = dims_calibration(group, dset.ndim, f"{name}:{group.name}")
        cal.update_missing(collect_metadata(f, dset, name))
        return HDF5Counts(cal, f"{name}:{dset.name}", dataset=dset)
    links = dectris_links(f) if dataset_path is None else []
    if links:
        return HDF5Counts(collect_metadata(f, None, name), f"{name}:/entry/data/data_*",
                          links=links)
    dset = find_dataset(f, dataset_path, name)
    return HDF5Counts(collect_metadata(f, dset, name), f"{name}:{dset.name}", dataset=dset)


def load_hdf5(source: Any, opts: LoadOptions, dataset_path: str | None,
              name: str) -> Dataset4D:
    """Open ``source`` (path or binary file object) and load its counts (any layout)."""
    base = Path(source).parent if isinstance(source, str | Path) else Path.cwd()
    with open_hdf5(source, name) as f, contextlib.ExitStack() as stack:
        counts = locate_counts(f, dataset_path, name)
        array: Any = counts.dataset
        if counts.links:
            array = ConcatFrames(open_links(f, counts.links, base, stack, name), name)
        src = ScanSource(array, opts.scan_shape, counts.data_name)
        return stream_dataset(src, opts, counts.calibration)


def read_hdf5_metadata(source: Any, dataset_path: str | None, name: str) -> FileCalibration:
    """The calibration the file's metadata gives, without reading counts."""
    with open_hdf5(source, name) as f:
        return locate_counts(f, dataset_path, name).calibration
