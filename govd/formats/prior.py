"""The prior file `govd fit-prior` writes and ``model.prior`` names: JSON, version 1.

The math (clusters, choosing one, seeding the model) is `govd.model.prior`; this module only
reads and writes the file::

    {"format": "govd-prior", "version": 1,
     "levels_rel": [f/f_max, ...],        # ascending, last = 1: where the curves are sampled
     "top_mhz": 1380.0,                   # f_max of the tables the prior was fitted on (MHz)
     "time_noise": 0.02,                  # relative frame-to-frame noise of the time (σ)
     "sources": ["a.csv", ...],
     "clusters": [{"time_curve": [...],   # time / time at f_max, one per levels_rel
                   "power_curve": [...],  # power / power at f_max, one per levels_rel
                   "a0": 0.8,             # eq. 10 coefficient of t·(f_prev/f − 1)
                   "a1_rel": -0.05,       # a1 / (t at f_max) · (f_max / 1000): a1 in ms/GHz
                                          #   is a1_rel · t_top_ms · 1000 / f_max_device
                   "p0_scale": [[.., ..], [.., ..]],  # covariance of (a0, a1_rel) / time_noise²
                   "members": 12}, ...]}
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from govd.formats.regular_file import read_regular
from govd.model.arrays import FloatArray
from govd.model.prior import Cluster, Prior

MAX_PRIOR_BYTES = 64 << 20
"""A prior file larger than this is refused (a fitted prior takes a few KiB). Units: bytes."""
FORMAT = "govd-prior"
VERSION = 1


class PriorFormatError(ValueError):
    """A prior file that cannot be used; the message names the file."""


def prior_to_json(prior: Prior) -> dict[str, Any]:
    """The file's JSON object (version 1) of ``prior``."""
    return {
        "format": FORMAT, "version": VERSION, "levels_rel": prior.levels_rel.tolist(),
        "top_mhz": prior.top_mhz, "time_noise": prior.time_noise, "sources": prior.sources,
        "clusters": [{"time_curve": c.time_curve.tolist(),
                      "power_curve": c.power_curve.tolist(), "a0": c.a0,
                      "a1_rel": c.a1_rel, "p0_scale": c.p0_scale.tolist(),
                      "members": c.members} for c in prior.clusters],
    }


def write_prior(path: str | os.PathLike[str], prior: Prior) -> None:
    """Write ``prior`` as JSON (version 1)."""
    Path(path).write_text(json.dumps(prior_to_json(prior), indent=1) + "\n")


def _finite_array(obj: dict[str, Any], key: str, shape: tuple[int, ...]) -> FloatArray:
    value = np.asarray(obj[key], dtype=np.float64)
    if value.shape != shape or not np.all(np.isfinite(value)):
        raise ValueError(f"{key} must be {shape[0] if shape else ''} finite numbers "
                         f"(shape {shape}), got shape {value.shape}")
    return value


def _finite(obj: dict[str, Any], key: str) -> float:
    value = float(obj[key])
    if not math.isfinite(value):
        raise ValueError(f"{key} must be finite")
    return value


def prior_from_json(doc: Any) -> Prior:
    """Validate a parsed prior file; raises ValueError (KeyError, TypeError) naming the field."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a govd prior (no \"format\": \"{FORMAT}\")")
    if doc.get("version") != VERSION:
        raise ValueError(f"version {doc.get('version')!r} unsupported (this govd reads {VERSION})")
    levels = np.asarray(doc["levels_rel"], dtype=np.float64)
    if not (levels.ndim == 1 and levels.size >= 2 and np.all(np.isfinite(levels))
            and levels[0] > 0 and np.all(np.diff(levels) > 0) and levels[-1] == 1.0):
        raise ValueError("levels_rel must ascend in (0, 1] and end at 1")
    n = levels.size
    clusters = []
    for i, c in enumerate(doc["clusters"]):
        try:
            time_curve = _finite_array(c, "time_curve", (n,))
            if not np.all(time_curve > 0):
                raise ValueError("time_curve must be positive")
            p0 = _finite_array(c, "p0_scale", (2, 2))
            if not (p0[0, 0] > 0 and p0[1, 1] > 0 and np.linalg.det(p0) > 0):
                raise ValueError("p0_scale must be positive definite")
            clusters.append(Cluster(time_curve, _finite_array(c, "power_curve", (n,)),
                                    _finite(c, "a0"), _finite(c, "a1_rel"), p0,
                                    int(c["members"])))
        except KeyError as exc:
            raise ValueError(f"cluster {i}: missing field {exc}") from exc
        except (TypeError, ValueError) as exc:
            raise ValueError(f"cluster {i}: {exc}") from exc
    if not clusters:
        raise ValueError("no clusters")
    top_mhz, noise = _finite(doc, "top_mhz"), _finite(doc, "time_noise")
    if not (top_mhz > 0 and noise > 0):
        raise ValueError("top_mhz and time_noise must be positive")
    return Prior(levels, top_mhz, noise, clusters, [str(s) for s in doc.get("sources", [])])


def read_prior(path: str | os.PathLike[str]) -> Prior:
    """Read a prior file; raises `PriorFormatError` naming the file and what is wrong."""
    try:
        doc = json.loads(read_regular(path, MAX_PRIOR_BYTES))
        return prior_from_json(doc)
    except OSError as exc:
        raise PriorFormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise PriorFormatError(f"{path}: not JSON: {exc.msg} (line {exc.lineno})") from exc
    except KeyError as exc:
        raise PriorFormatError(f"{path}: missing field {exc}") from exc
    except (TypeError, ValueError) as exc:
        raise PriorFormatError(f"{path}: {exc}") from exc


