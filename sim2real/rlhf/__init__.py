"""The instruction model's pipeline as the application runs it: `pipeline` (`run_pipeline`: SFT, preferences,
reward model, RL, evaluation and the gate, the ONNX export; the budgets of config/rlhf/budgets.yaml) and `report`
(`run_eval`, the table of `sim2real rlhf eval`). The command line is `sim2real.cli.rlhf`; the stages themselves are
training.rlhf. Neither module imports torch, transformers or vLLM before a stage runs.

    from sim2real.rlhf import run_pipeline

    run_pipeline(Path("runs/loop/instruction"), robot="rover", budget="quick")
"""

from sim2real.rlhf.pipeline import (
    BUDGETS,
    HELDOUT,
    PHRASINGS,
    PIPELINE,
    RLHFBudget,
    load_budgets,
    run_pipeline,
    torch_threads,
)
from sim2real.rlhf.report import run_eval

__all__ = [
    "BUDGETS",
    "HELDOUT",
    "PHRASINGS",
    "PIPELINE",
    "RLHFBudget",
    "load_budgets",
    "run_eval",
    "run_pipeline",
    "torch_threads",
]
