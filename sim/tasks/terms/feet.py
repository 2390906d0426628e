"""Foot state with memory, for the gait terms: contacts (contact force over the task's threshold), air time since
lift-off, landings (first contacts) and the swing's peak height. The twin keeps one per batch, updates it after
every step from the backend's feet (TwinBackend.feet) and resets it with the envs, as it does last_actions.

Air time counts the steps a foot is in the air, as mjlab's feet_air_time does: a foot in the air for K steps lands
with last_air_time = K * dt on its first contact.
"""

from __future__ import annotations

import numpy as np

_ARRAYS = (
    "contact",
    "first_contact",
    "air_time",
    "last_air_time",
    "swing_peak",
    "last_swing_peak",
    "pos",
    "vel",
    "height",
)


class FootTracker:
    def __init__(self, num_envs: int, num_feet: int, dt: float, contact_force_n: float):
        """dt: the policy period (one update per env-step); contact_force_n: the force (N) above which a foot is in
        contact (the task's feet.contact_force_n)."""
        self.dt, self.contact_force_n = dt, contact_force_n
        shape = (num_envs, num_feet)
        self.contact = np.zeros(shape, bool)  # in contact now
        self.first_contact = np.zeros(shape, bool)  # landed on this step (in the air on the step before)
        self.air_time = np.zeros(shape)  # s in the air so far (0 in contact)
        self.last_air_time = np.zeros(shape)  # s: the flight that ended with the latest landing
        self.swing_peak = np.zeros(shape)  # m: highest foot height (above the ground under it) of the current flight
        self.last_swing_peak = np.zeros(shape)  # m: that of the flight that ended with the latest landing
        self.pos = np.zeros(shape + (3,))  # foot positions, world frame
        self.vel = np.zeros(shape + (3,))  # foot linear velocities, world frame
        self.height = np.zeros(shape)  # m: foot height above the ground under it (world z on the flat floor)

    def update(self, feet: dict[str, np.ndarray], ground: np.ndarray | None = None) -> None:
        """Advance one env-step with the backend's feet (contact_force, pos, vel); ground: [N, F] the terrain's
        height under each foot (None: the flat floor at z = 0)."""
        contact = feet["contact_force"] > self.contact_force_n
        self.pos, self.vel = feet["pos"], feet["vel"]
        self.height = self.pos[..., 2] if ground is None else self.pos[..., 2] - ground
        in_air = ~contact
        self.first_contact = contact & (self.air_time > 0)
        self.last_air_time = np.where(self.first_contact, self.air_time, self.last_air_time)
        self.last_swing_peak = np.where(self.first_contact, self.swing_peak, self.last_swing_peak)
        self.air_time = np.where(in_air, self.air_time + self.dt, 0.0)
        self.swing_peak = np.where(in_air, np.maximum(self.swing_peak, self.height), 0.0)
        self.contact = contact

    def reset(self, env_ids: np.ndarray) -> None:
        for name in _ARRAYS:
            getattr(self, name)[env_ids] = 0

    def state_dict(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name).copy() for name in _ARRAYS}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for name in _ARRAYS:
            setattr(self, name, np.array(state[name], dtype=getattr(self, name).dtype))
