"""How the training code starts or joins Ray: one `ray.init` for PPO's Ray Train job (training.ppo.ray_train) and
the vLLM engines as Ray actors (training.rlhf.engine)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REPO_ROOT", "init_ray"]

REPO_ROOT = Path(__file__).resolve().parents[1]


def init_ray(address: str | None) -> None:
    """Joins the Ray cluster at `address` (None: a local one). The job's workers import this checkout's packages
    even when it is not pip-installed (PYTHONPATH in its runtime env); their output stays in Ray's session logs."""
    import ray

    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    ray.init(
        address=address,
        log_to_driver=False,
        runtime_env={"env_vars": env},
        logging_config=ray.LoggingConfig(log_level="WARNING"),
    )
