"""govd: a Linux user-space DVFS governor for GPUs.

Data flows sources → governor (model, policy) → device; the daemon (`govd.daemon`) and the
offline evaluator (`govd.eval`) are two thin drivers of the same `govd.governor.Governor`.
"""

__version__ = "0.1.0"
