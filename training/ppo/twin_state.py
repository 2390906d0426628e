"""The batched twin's full state as plain tensors, so a checkpoint resumes the very next batch exactly.

Physics state, commands, episode counters, actuation-latency history, per-env randomised parameters and the
twin's numpy generator. This reads the twin's internals: it belongs in sim.twin as BatchedTwin.state_dict()
once that exists; until then it lives beside its only user.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import torch

from sim.randomization import PhysicsParams
from sim.twin import BatchedTwin

_ARRAYS = ("commands", "actions", "last_actions", "episode_length", "episode_return", "_target_history", "_obs")


def twin_state_dict(twin: BatchedTwin) -> dict:
    return {
        "num_envs": twin.num_envs,
        "physics": torch.from_numpy(twin.backend._state.copy()),
        "arrays": {k: torch.from_numpy(np.array(getattr(twin, k))) for k in _ARRAYS},
        "episode_terms": {k: torch.from_numpy(v.copy()) for k, v in twin.episode_terms.items()},
        "params": {f.name: torch.from_numpy(getattr(twin.params, f.name).copy())
                   for f in dataclasses.fields(PhysicsParams)},
        # PCG64's state holds 128-bit integers: JSON keeps them exact and loads with weights_only=True
        "rng": json.dumps(twin.rng.bit_generator.state),
        "counters": {"nan_action_count": twin.nan_action_count, "physics_fault_count": twin.physics_fault_count},
    }


def load_twin_state(twin: BatchedTwin, state: dict) -> None:
    if state["num_envs"] != twin.num_envs:
        raise ValueError(f"checkpoint holds {state['num_envs']} envs for this worker, the twin has {twin.num_envs}")
    twin.backend._state[:] = state["physics"].numpy()
    for k, v in state["arrays"].items():
        setattr(twin, k, v.numpy().copy())
    twin.episode_terms = {k: v.numpy().copy() for k, v in state["episode_terms"].items()}
    params = PhysicsParams(**{k: v.numpy().copy() for k, v in state["params"].items()})
    twin.params = params
    twin.backend.set_params(np.arange(twin.num_envs), params)
    twin.rng.bit_generator.state = json.loads(state["rng"])
    for k, v in state["counters"].items():
        setattr(twin, k, v)
