"""The one interface every inference runtime offers: `act(obs) -> actions`."""

from __future__ import annotations

import numpy as np

from edge.errors import ObservationError
from edge.manifest import Manifest
from edge.safety import SafetyFilter


class Policy:
    """Base of the runtimes. `act` checks the observation, runs the model and applies the safety filter;
    `infer` is the same without the filter (parity checks, benchmarks of the model alone)."""

    backend = "none"

    def __init__(self, manifest: Manifest, safety: bool = True):
        self.manifest = manifest
        self.obs_dim = manifest.obs_dim
        self.action_dim = manifest.action_dim
        self.safety = SafetyFilter.from_manifest(manifest) if safety else None
        self.reason = "requested"  # why this backend runs (load_policy's auto selection fills it in)

    def _run(self, obs: np.ndarray) -> np.ndarray:
        """The model on a C-contiguous float32 batch [batch, obs_dim] -> [batch, action_dim] float32."""
        raise NotImplementedError

    def _batch(self, obs: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(obs, dtype=np.float32)
        if x.ndim == 1:
            x = x[None]
        if x.ndim != 2 or x.shape[1] != self.obs_dim or x.shape[0] == 0:
            raise ObservationError(
                f"observation must have shape ({self.obs_dim},) or (batch, {self.obs_dim}) for this policy "
                f"({', '.join(t['name'] for t in self.manifest.observation['terms'])}); got {np.shape(obs)}"
            )
        return x

    def infer(self, obs: np.ndarray) -> np.ndarray:
        """Raw policy output for one observation (obs_dim,) or a batch (batch, obs_dim); no safety filter."""
        x = self._batch(obs)
        y = self._run(x)
        return y[0] if np.ndim(obs) == 1 else y

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Filtered actions for one observation (obs_dim,) or a batch (batch, obs_dim)."""
        x = self._batch(obs)
        y = self._run(x)
        if self.safety is not None:
            y = self.safety(y, x)
        return y[0] if np.ndim(obs) == 1 else y

    def reset(self, mask: np.ndarray | None = None) -> None:
        """Reset the safety filter's rate-limit memory (all rows, or the rows where `mask` is true)."""
        if self.safety is not None:
            self.safety.reset(mask)
