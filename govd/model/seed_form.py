"""The form ``seed`` (seed 000's eq. 10): `OnlineModel` over one clock domain, `TwoDomainModel`
over (core, memory) pairs. Its own module because the two-domain model builds on the one-domain
one: the registration that picks between them imports both."""

from __future__ import annotations

from govd.model.arrays import FloatArray
from govd.model.forms import Form
from govd.model.online import OnlineModel
from govd.model.settings import ModelSettings
from govd.model.two_domain import TwoDomainModel


def seed_model(levels_mhz: FloatArray, mem_levels_mhz: FloatArray | None,
               settings: ModelSettings, idle_power_w: float) -> OnlineModel:
    """The seed form over ``levels_mhz`` (MHz), over (core, memory) pairs when
    ``mem_levels_mhz`` is given; ``idle_power_w``: known idle power (W) or NaN."""
    if mem_levels_mhz is None:
        return OnlineModel(levels_mhz, settings, idle_power_w)
    return TwoDomainModel(levels_mhz, mem_levels_mhz, settings, idle_power_w)


SEED = Form("seed", seed_model, takes_prior=True)
"""The form ``seed``, registered in `govd.model.forms`."""
