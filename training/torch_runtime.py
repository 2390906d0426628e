"""The PyTorch reference runtime: the training-side actor behind the same `act` interface, for parity checks
against the exported artifact and for benchmarks. Not for the robot (torch is imported only here, lazily)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edge.manifest import Manifest
from edge.policy import Policy


class TorchPolicy(Policy):
    """`module` maps obs [batch, obs_dim] -> actions; an rsl_rl MLPModel is used through its `as_onnx()` form,
    the same deterministic, normaliser-included forward that export writes to ONNX."""

    backend = "torch"

    def __init__(self, module, manifest: Manifest, *, safety: bool = True):
        import torch

        super().__init__(manifest, safety)
        module = module.as_onnx(verbose=False) if hasattr(module, "as_onnx") else module
        self.module = module.to("cpu").eval()
        self._torch = torch

    @classmethod
    def from_checkpoint(
        cls,
        module,
        checkpoint: str | Path,
        manifest: Manifest,
        *,
        key: str | None = "actor_state_dict",
        safety: bool = True,
    ) -> TorchPolicy:
        """Load weights into `module` with torch.load(weights_only=True): a checkpoint cannot run code on load.
        `key`: the entry holding the actor's state dict (rsl_rl's runner saves "actor_state_dict"); None if the
        file is the state dict itself."""
        import torch

        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
        module.load_state_dict(state[key] if key is not None else state)
        return cls(module, manifest, safety=safety)

    def _run(self, obs: np.ndarray) -> np.ndarray:
        with self._torch.inference_mode():
            return self.module(self._torch.from_numpy(obs)).numpy()
