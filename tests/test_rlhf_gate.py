"""RL that cannot silently hurt: an RL run made to hurt (a learning rate 100 times the configured one) is refused by
the pipeline's gate and the SFT model is deployed; with validation selection the same run writes the SFT weights
itself. Both start from the session's minimal run (tests.rlhf_helpers) and sample with transformers (the gate does
not depend on the engine)."""

import json
import shutil
from pathlib import Path

from safetensors.torch import load_file

from edge.fileio import sha256_file
from sim2real.rlhf import run_pipeline
from tests.rlhf_helpers import minimal_run, reward_dir, sft_dir
from training.rlhf.config import RLConfig
from training.rlhf.rl import RLTrainer

HURT = {"learning_rate": 0.05, "iterations": 2, "prompts_per_iteration": 8}


def test_a_run_made_to_hurt_is_refused_and_the_sft_model_deployed(tmp_path, capsys):
    run = tmp_path / "run"  # the minimal run's SFT, preferences and reward model; RL, eval and export afresh
    shutil.copytree(
        Path(minimal_run()["model_dir"]).parent,
        run,
        ignore=shutil.ignore_patterns("rl", "eval", "onnx", "rlhf.json", "stages.log", "libraries.log"),
    )
    hurt = {"rl": {**HURT, "validate_every": 0}}  # no selection: RL writes its last, damaged, weights
    result = run_pipeline(run, budget="minimal", engine="transformers", overrides=hurt)
    v = result["validation"]
    assert v["intent_accuracy"] < v["intent_accuracy_sft"], v
    assert result["deployed"] == "sft" and result["deployed_dir"] == str(run / "sft")
    assert result["intent_accuracy_deployed"] == result["intent_accuracy_sft"]
    out = capsys.readouterr().out
    warn = [line for line in out.splitlines() if line.startswith("WARN rlhf gate")]
    assert len(warn) == 1 and f"{v['intent_accuracy']:.1%}" in warn[0] and f"{v['intent_accuracy_sft']:.1%}" in warn[0]
    source = json.loads((run / "onnx" / "manifest.json").read_text())["source_model"]  # what the robot runs
    assert source["path"] == str((run / "sft").resolve())
    assert source["weights_sha256"] == {"model.safetensors": sha256_file(run / "sft" / "model.safetensors")}
    recorded = json.loads((run / "rlhf.json").read_text())["stages"]["eval"]["result"]
    assert recorded["deployed"] == "sft" and recorded["validation"] == v


def test_validation_selection_keeps_the_sft_weights_when_rl_only_hurts(tmp_path):
    config = RLConfig(
        **HURT,
        out=str(tmp_path / "rl"),
        model=str(sft_dir()),
        reward_model=str(reward_dir()),
        engine="transformers",
        validate_every=1,
    )
    trainer = RLTrainer(config)
    try:
        summary = trainer.train()
    finally:
        trainer.close()
    history = summary["validation"]["history"]
    assert [h["iteration"] for h in history] == [0, 1, 2]
    assert all(h["intent_accuracy"] < history[0]["intent_accuracy"] for h in history[1:]), history
    assert summary["checkpoint_iteration"] == 0 and summary["validation"]["chosen"] == summary["validation"]["sft"]
    sft, rl = load_file(sft_dir() / "model.safetensors"), load_file(tmp_path / "rl" / "model.safetensors")
    assert all((sft[k] == rl[k]).all() for k in sft)
