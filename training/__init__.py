"""DGX side, libraries only: PPO on Ray (ppo), the instruction model's training (rlhf), retraining from field
logs (retrain), and the torch -> ONNX export (export). The application that runs them is sim2real."""

__all__ = ["errors", "export", "ppo", "retrain", "rlhf", "torch_runtime"]
