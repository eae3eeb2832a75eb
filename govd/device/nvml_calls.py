"""NVML calls as govd makes them: NVML's return codes turned into govd's typed errors, and the one
NVML session a process shares however many GPUs it has open.

NOT_SUPPORTED → NotSupported; NO_PERMISSION and INVALID_ARGUMENT → WriteRefused; GPU_IS_LOST,
NOT_FOUND, UNINITIALIZED (a stale session after a driver reload), DRIVER_NOT_LOADED and
LIBRARY_NOT_FOUND → DeviceGone; anything else → DeviceError.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pynvml

from govd.device.base import DeviceError, DeviceGone, NotSupported, WriteRefused

T = TypeVar("T")

_GONE = {
    pynvml.NVML_ERROR_GPU_IS_LOST,
    pynvml.NVML_ERROR_NOT_FOUND,
    pynvml.NVML_ERROR_GPU_NOT_FOUND,
    pynvml.NVML_ERROR_UNINITIALIZED,
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
}
_REFUSED = {pynvml.NVML_ERROR_NO_PERMISSION, pynvml.NVML_ERROR_INVALID_ARGUMENT}


def typed_error(exc: pynvml.NVMLError, what: str) -> DeviceError:
    """The govd error for an NVML error; ``what`` says which call on which GPU failed."""
    code = exc.value
    message = f"{what}: NVML error {code} ({exc})"
    if code == pynvml.NVML_ERROR_NOT_SUPPORTED:
        return NotSupported(message)
    if code == pynvml.NVML_ERROR_NO_PERMISSION:
        return WriteRefused(f"{message}; NVML locks clocks only for root")
    if code in _REFUSED:
        return WriteRefused(message)
    if code in _GONE:
        return DeviceGone(message)
    return DeviceError(message)


def nvml_call(what: str, call: Callable[..., T], *args: Any) -> T:
    """Run one pynvml call, turning its errors into govd's typed ones."""
    try:
        return call(*args)
    except pynvml.NVMLError as exc:
        raise typed_error(exc, what) from exc


def nvml_code(exc: BaseException) -> int | None:
    """The NVML return code behind a typed error raised by `nvml_call`, if any."""
    cause = exc.__cause__
    return cause.value if isinstance(cause, pynvml.NVMLError) else None


class NvmlSession:
    """nvmlInit once per process however many GPUs are open; nvmlShutdown when the last closes."""

    def __init__(self) -> None:
        self._users = 0
        self._lock = threading.Lock()

    def acquire(self) -> None:
        """Take a reference, initialising NVML on the first. Raises pynvml.NVMLError."""
        with self._lock:
            if self._users == 0:
                pynvml.nvmlInit()
            self._users += 1

    def release(self) -> None:
        """Give a reference back, shutting NVML down with the last."""
        with self._lock:
            if self._users == 0:
                return
            self._users -= 1
            if self._users == 0:
                # A driver that went away cannot be shut down any further.
                with contextlib.suppress(pynvml.NVMLError):
                    pynvml.nvmlShutdown()


SESSION = NvmlSession()
"""The process's NVML session."""
