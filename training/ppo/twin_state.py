"""The batched twin's snapshot (BatchedTwin.state_dict) as torch tensors, so it goes into a checkpoint that
torch.load(..., weights_only=True) reads back, and a resumed run collects exactly the next batch."""

from __future__ import annotations

import numpy as np
import torch

from sim.twin import BatchedTwin


def twin_state_dict(twin: BatchedTwin) -> dict:
    return _convert(twin.state_dict(), lambda a: torch.from_numpy(np.ascontiguousarray(a)))


def load_twin_state(twin: BatchedTwin, state: dict) -> None:
    twin.load_state_dict(_convert(state, lambda t: t.numpy().copy()))


def _convert(value, leaf):
    if isinstance(value, dict):
        return {k: _convert(v, leaf) for k, v in value.items()}
    if isinstance(value, np.ndarray | torch.Tensor):
        return leaf(value)
    return value
