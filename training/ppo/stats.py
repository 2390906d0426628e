"""Per-iteration metrics as (sum, count) pairs over a fixed key list, so workers can add theirs with one all-reduce."""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist


class RolloutStats:
    def __init__(self, keys: tuple[str, ...], device: torch.device | str = "cpu"):
        self.keys, self.device = keys, device
        self.index = {k: i for i, k in enumerate(keys)}
        self.sums = np.zeros(len(keys))
        self.counts = np.zeros(len(keys))

    def add(self, log: dict[str, torch.Tensor]) -> None:
        """Accumulate one step's extras["log"]: every element of a tensor is one sample of its metric."""
        for key, value in log.items():
            i = self.index[key]
            self.sums[i] += float(value.sum())
            self.counts[i] += value.numel()

    def reduce(self) -> dict[str, float]:
        """Means over all workers' samples; keys without samples this iteration are left out."""
        sums, counts = self.sums, self.counts
        if dist.is_initialized():
            both = torch.from_numpy(np.concatenate([sums, counts])).to(self.device)
            dist.all_reduce(both)
            both = both.cpu().numpy()
            sums, counts = both[: len(self.keys)], both[len(self.keys) :]
        return {k: float(sums[i] / counts[i]) for i, k in enumerate(self.keys) if counts[i] > 0}
