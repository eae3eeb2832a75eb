"""Compiling the per-tick kernels, apart from what they compute (`govd.model`).

- `loader`: the ``njit`` every kernel module decorates its kernels with; it hands out the
  kernels compiled ahead of time when a fresh extension sits in govd/model, else numba's JIT;
- `build`: ``python -m govd.kernels.build`` (``make kernels``) compiles that extension;
- `drive`: governors in every configuration the daemon can run, driven by synthetic ticks, so
  that the build finds which kernels a tick calls with which argument types.

`loader` imports nothing of govd; `drive` and `build` import the governor, and only when run.
"""
