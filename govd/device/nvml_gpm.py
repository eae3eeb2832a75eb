"""GPU Performance Monitoring (GPM) metrics of Hopper and newer GPUs, as the model's counters.

NVML computes GPM metrics from two samples: ``nvmlGpmSampleGet`` fills a buffer from
``nvmlGpmSampleAlloc``, and ``nvmlGpmMetricsGet`` turns the older and the newer sample into each
metric over the time between them. NVML wants the two at least 100 ms apart (its counters refresh
that often), so `GpmReader.metrics` takes a new sample only when that much time has passed and
returns the last values in between: at a 50 ms tick a counter moves every other tick.

Where the GPU has no GPM (before Hopper: ``nvmlGpmQueryDeviceSupport`` says so, or the sample
is NOT_SUPPORTED; a library without the GPM calls) the reader says so once and gives nothing.
The counters, fractions 0..1 (NVML gives percent):

- ``sm_activity``: ``NVML_GPM_METRIC_SM_UTIL``, the share of SMs busy (DCGM's SM activity);
- ``dram_bw_util``: ``NVML_GPM_METRIC_DRAM_BW_UTIL``, DRAM bandwidth used of the maximum.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

import pynvml

from govd.device.base import DeviceError, DeviceGone, NotSupported

log = logging.getLogger(__name__)

GPM_COUNTERS = {
    "sm_activity": pynvml.NVML_GPM_METRIC_SM_UTIL,
    "dram_bw_util": pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
}
"""Counter name -> GPM metric id."""
MIN_INTERVAL_S = 0.1
"""Least time between the two samples of a metric (NVML refreshes its counters every 100 ms)."""


class GpmReader:
    """The GPM counters of one GPU, sampled at most every `MIN_INTERVAL_S`.

    ``call(what, function, *args)`` runs an NVML call with the device's error mapping (NVML
    errors become govd's typed ones); ``clock`` gives seconds (monotonic)."""

    def __init__(self, name: str, handle: Any, call: Callable[..., Any],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._name = name
        self._handle = handle
        self._call = call
        self._clock = clock
        self._samples: list[Any] = []
        self._taken_s = -math.inf
        self._values: dict[str, float] = {}
        self.missing = ""
        """Why the GPU gives no GPM counters, "" while it gives them."""
        try:
            support = call("query GPM support", pynvml.nvmlGpmQueryDeviceSupport, handle)
            if not support.isSupportedDevice:
                self._give_up("no GPM (Hopper or newer only)")
                return
            self._samples = [call("allocate a GPM sample", pynvml.nvmlGpmSampleAlloc)
                             for _ in range(2)]
            self._sample(1)
        except (NotSupported, pynvml.NVMLError_FunctionNotFound) as exc:
            self._give_up(f"no GPM ({exc})")
        except DeviceError as exc:
            self._give_up(f"GPM unavailable ({exc})")

    def _sample(self, slot: int) -> None:
        self._call("take a GPM sample", pynvml.nvmlGpmSampleGet, self._handle,
                   self._samples[slot])
        self._taken_s = self._clock()

    def _give_up(self, why: str) -> None:
        self.missing = why
        log.info("%s: %s: the model gets no GPM counters", self._name, why)
        self.close()

    def metrics(self) -> dict[str, float]:
        """The GPM counters over the latest interval of at least `MIN_INTERVAL_S` (the last
        values between two; {} before the second sample or where there is no GPM). Raises
        DeviceGone (the GPU lost), DeviceError."""
        if not self._samples or self._clock() - self._taken_s < MIN_INTERVAL_S:
            return self._values
        try:
            self._sample(0)
            older, newer = self._samples[1], self._samples[0]
            got = pynvml.c_nvmlGpmMetricsGet_t()
            got.version = pynvml.NVML_GPM_METRICS_GET_VERSION
            got.numMetrics = len(GPM_COUNTERS)
            got.sample1, got.sample2 = older, newer
            for i, metric in enumerate(GPM_COUNTERS.values()):
                got.metrics[i].metricId = metric
            self._call("compute GPM metrics", pynvml.nvmlGpmMetricsGet, got)
        except DeviceGone:
            raise
        except DeviceError as exc:  # a counter lost is no reason to stop governing
            self._give_up(f"no GPM ({exc})")
            self._values = {}
            return self._values
        self._samples.reverse()  # the newer sample is the older one of the next interval
        self._values = {
            name: got.metrics[i].value / 100.0
            for i, name in enumerate(GPM_COUNTERS)
            if got.metrics[i].nvmlReturn == pynvml.NVML_SUCCESS
            and math.isfinite(got.metrics[i].value)}
        return self._values

    def close(self) -> None:
        """Free the sample buffers (idempotent)."""
        samples, self._samples = self._samples, []
        for sample in samples:
            try:
                pynvml.nvmlGpmSampleFree(sample)
            except pynvml.NVMLError as exc:
                log.debug("%s: GPM sample not freed: %s", self._name, exc)
