"""Termination terms: func(ctx, **params) -> [N] bool; an env terminates when any term is True.
sim.kpis.fall_flags scores falls by the same two criteria."""

from __future__ import annotations

import numpy as np

from sim.tasks.terms.context import TermContext


def base_too_low(ctx: TermContext, min_base_height: float) -> np.ndarray:
    """The base is lower than min_base_height (m) above the ground under it (the terrain's, on a heightfield)."""
    return ctx.base_height < min_base_height


def tilted(ctx: TermContext, max_tilt_rad: float) -> np.ndarray:
    """The base is tilted further than max_tilt_rad from level."""
    return ctx.projected_gravity[:, 2] > -np.cos(max_tilt_rad)


TERMINATIONS = {f.__name__: f for f in (base_too_low, tilted)}
