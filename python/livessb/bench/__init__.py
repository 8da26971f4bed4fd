"""The SPEC §4 benchmark (``livessb benchmark``) and its device-side synthetic data.

* ``workload``: regions, targets, timing candidates (boxes from ``livessb.params``);
* ``device_data``: counts generated on the GPU, ``DeviceDataset4D``;
* ``backend``: what the runner needs of a device (CUDA, or the CPU stand-in);
* ``parity``, ``timing``: CPU/CUDA parity, ceilings and per-candidate timing (CUDA);
* ``runner``: the workload through the public Session API; ``report``: the record.

Every module imports without CuPy; CuPy is imported where device work starts.
"""
