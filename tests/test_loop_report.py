"""The loop's report (sim2real.loop.report) from a state file's stage records, read through the typed stage outputs:
every section shows what its stage recorded, a stage not run yet shows as pending, and the state rides along."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sim2real.loop.report import write_report

ROOT = Path(__file__).resolve().parents[1]


class Run:
    """What write_report reads of a sim2real.pipeline Run."""

    def __init__(self, out: Path, results: dict):
        self.results, self.seconds = results, {name: 10.0 for name in results}
        self.config = {"robot": "rover", "budget": "quick", "out": str(out), "field_twin": "field_twin.yaml"}

    def body(self) -> dict:
        stages = {n: {"seconds": self.seconds[n], "result": r} for n, r in self.results.items()}
        return {"pipeline": "loop", "config": self.config, "stages": stages, "finished": False}


def record(data: dict, verdict: str = "pass") -> dict:
    return {"verdict": verdict, "figure": "figure", "data": data}


@pytest.fixture
def results(tmp_path: Path) -> dict:
    rows = [{"type": "iteration", "iteration": i, "Episode/return": 0.5 * i} for i in range(3)]
    (tmp_path / "progress.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    validation = tmp_path / "validation"
    validation.mkdir()
    entries = [{"value": v, "failure_rate": 0.0, "kpis": {"tracking_error_lin": 0.1}} for v in (0.5, 1.0)]
    summary = {
        "campaign": str(ROOT / "config" / "campaigns" / "quick.yaml"),
        "kpis": {"tracking_error_lin": {"mean": 0.12}},
        "axes": {"friction": entries},
    }
    (validation / "summary.json").write_text(json.dumps(summary))
    (validation / "report.html").write_text("")
    kpis = {"tracking_error_lin": 0.25, "tracking_error_ang": 0.31}
    return {
        "train": record(
            {
                "run_dir": "runs/train/x",
                "iterations": 3,
                "env_steps": 12345,
                "env_steps_per_s": 999.0,
                "threshold": {"iteration": 2, "train_seconds": 33.0},
                "final_eval": {},
                "progress_file": str(tmp_path / "progress.jsonl"),
            }
        ),
        "export": record({"artifact": "policy", "sha256": "ab"}),
        "validate": record(
            {
                "passed": True,
                "summary_file": str(validation / "summary.json"),
                "report": str(validation / "report.html"),
                "kpi_means": {"tracking_error_lin": 0.12},
                "episodes": 32,
                "failing_episodes": 2,
            }
        ),
        "instruction": record(  # the RLHF pipeline's result, the gate deployed SFT
            {
                "onnx_dir": "onnx",
                "signed_by": "k",
                "model_dir": "rl",
                "deployed": "sft",
                "deployed_dir": "instruction/sft",
                "intent_accuracy": 0.78,
                "intent_accuracy_sft": 0.8,
                "json_valid_rate": 0.99,
                "validation": {"intent_accuracy": 0.7, "intent_accuracy_sft": 0.75},
                "phrasings": {},
                "win_rate_rm": 0.55,
                "win_rate_operator": 0.48,
                "eval": {"json_valid_rate_sft": 0.97},
            }
        ),
        "deploy": record({"logs": "field_logs", "field_twin": "", **kpis, "falls": 0}),
        "analyse": record(
            {
                "retrain": False,
                "reasons": [],
                "drifted": [],
                "duty_kpis": kpis,
                "instruction_session_kpis": kpis,
                "baseline_kpis": {"tracking_error_lin": 0.1},
                "episodes": 3,
                "files": [],
                "damage": ["a.mcap: 1.0-2.0 s"],
            }
        ),
        "retrain": record({"promoted": False}, "skipped"),
    }


def text(html: str) -> str:
    """The report without its tags, images and embedded state."""
    html = re.sub(r"<script.*?</script>|<details>.*?</details>|<img [^>]*>", "", html, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_each_section_shows_what_its_stage_recorded(tmp_path, results):
    page = write_report(tmp_path, Run(tmp_path, results)).read_text()
    shown = text(page)
    assert "3 iterations, 12,345 env-steps at 999 env-steps/s; evaluation threshold reached at iteration 2" in shown
    assert "30/32 episodes within the gates" in shown and "validation/report.html" in shown
    assert "Deployed (the gate: RLHF only if not worse than SFT on validation): SFT , instruction/sft" in shown
    assert "intent accuracy (validation: the gate) 0.75 0.7" in shown and "JSON-valid rate 0.97 0.99" in shown
    assert "intent accuracy (phrasing set) - -" in shown and "(simulated operator) - 0.48" in shown
    assert "(3 episodes)" in shown and "a.mcap: 1.0-2.0 s" in shown and "no drift" in shown
    assert "System identification not needed: no drift" in shown
    assert "Lineage of the artifact in service not run yet" in shown
    state = json.loads(re.search(r'id="loop-state">(.*?)</script>', page, re.S).group(1))
    assert state["stages"]["instruction"]["result"] == results["instruction"]


def test_a_retraining_shows_its_fit_campaigns_and_lineage(tmp_path, results):
    results["retrain"] = record(
        {
            "promoted": True,
            "new_artifact": "retrain/policy",
            "promotion_reason": "nothing got worse",
            "identified": {"payload_kg": 1.5},
            "estimates": {"payload_kg": {"value": 1.5, "low": 1.4, "high": 1.6, "determined": True, "why": ""}},
            "sysid_error_before": 0.2,
            "sysid_error_after": 0.05,
            "selected_iteration": 40,
            "checkpoint_scores": [
                {"iteration": 20, "passed": True, "kpi_means": {}, "left": 0.8},
                {"iteration": 40, "passed": True, "kpi_means": {}, "left": 0.55},
                {"iteration": 60, "passed": False, "kpi_means": {}, "left": 0.4},
            ],
            "campaigns": {"quick": {"passed": True}},
            "lineage": [{"kind": "logs", "ref": "a.mcap", "detail": "3 episodes"}],
        }
    )
    results["final"] = record(
        {
            "artifact": "retrain/policy",
            "promoted": True,
            "logs": "field_logs_final",
            "field_kpis": {"tracking_error_lin": 0.12, "tracking_error_ang": 0.3},
            "gap_closed": {"tracking_error_lin": 0.87},
            "worse_elsewhere": {"tracking_error_ang": [0.25, 0.3]},
        }
    )
    shown = text(write_report(tmp_path, Run(tmp_path, results)).read_text())
    assert "payload_kg 1.5 1.4 to 1.6 -" in shown and "0.2 before, 0.05 after identification (75% lower)" in shown
    assert "quick pass" in shown and "promoted: nothing got worse" in shown
    assert "20 80% pass 40 (chosen) 55% pass 60 40% FAIL" in shown  # the checkpoints on the identified twin
    assert "tracking_error_lin: 87% of the field-vs-campaign gap closed" in shown
    assert "tracking_error_ang: worse in the field, 0.250 -> 0.300 (it did not drift)" in shown
    assert "logs a.mcap 3 episodes" in shown and "field, operator script, retrained 0.12 0.3" in shown


def test_the_fit_shows_a_parameter_the_field_robot_leaves_at_nominal_as_its_nominal_value(tmp_path, results):
    """The hard quadruped's YAML plants kp, not kd: kd's hidden value is the twin's nominal 1.0, not unknown."""
    results["deploy"]["data"]["field_twin"] = str(ROOT / "config" / "retrain" / "field_robot_hard_quadruped.yaml")
    estimates = {k: {"value": v} for k, v in {"kp_scale": 0.74, "kd_scale": 1.1, "encoder_offset": 0.01}.items()}
    results["retrain"] = record(
        {"promoted": False, "identified": {k: e["value"] for k, e in estimates.items()}, "estimates": estimates}
    )
    shown = text(write_report(tmp_path, Run(tmp_path, results)).read_text())
    assert "kp_scale 0.74 not measured 0.75" in shown
    assert "kd_scale 1.1 not measured 1.0" in shown and "encoder_offset 0.01 not measured 0.01" in shown


def test_a_rolled_back_retraining_shows_the_first_artifact_in_service(tmp_path, results):
    results["retrain"] = record({"promoted": True, "new_artifact": "retrain/policy", "lineage": [{"kind": "logs"}]})
    results["final"] = record(
        {
            "artifact": "retrain/policy",
            "promoted": True,
            "logs": "field_logs_final",
            "field_kpis": {"tracking_error_lin": 0.12, "tracking_error_ang": 0.4},
            "gap_closed": {"tracking_error_ang": -0.27},
            "rolled_back": True,
        },
        "warn",
    )
    shown = text(write_report(tmp_path, Run(tmp_path, results)).read_text())
    assert "Lineage of the artifact in service policy the first artifact, in service again" in shown
    assert "tracking_error_ang: -27% of the field-vs-campaign gap closed" in shown


def test_a_copied_run_directory_links_its_campaign_report_where_it_was_written(tmp_path, results):
    """A run directory copied elsewhere and resumed: its validate stage's record still names the first directory's
    campaign report, and the report links there instead of failing."""
    copy = tmp_path / "copy"
    copy.mkdir()
    shown = text(write_report(copy, Run(copy, results)).read_text())
    assert "full report with worst-case trajectories: ../validation/report.html" in shown
