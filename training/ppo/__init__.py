"""PPO on the batched twin: `PPOConfig` (every knob, YAML-loadable) and `train(cfg) -> run_dir`.

    from training.ppo import PPOConfig, train
    run_dir = train(PPOConfig.for_robot("rover"))

Files with one job each: config, runner (one process's loop), checkpoint, twin_state, evaluate, monitor,
ray_train (several workers), sweep (Ray Tune), export_hook (to training.export), launch (train(): the entry point).
"""

from training.ppo.config import PPOConfig

__all__ = ["PPOConfig", "train"]


def __getattr__(name: str):
    # torch, rsl_rl and MuJoCo load only when training is asked for, not when a config is read or checked
    if name == "train":
        from training.ppo.launch import train

        return train
    raise AttributeError(f"module 'training.ppo' has no attribute {name!r}")
