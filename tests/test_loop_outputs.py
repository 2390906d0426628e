"""The loop's stage hand-offs (sim2real.loop.outputs): typed on the way in, the state file's JSON on the way out,
and a state file written before them reads back as it was written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim2real.errors import UserError
from sim2real.loop.outputs import Exported, Instructed, Retrained, StageResult, Validated
from sim2real.pipeline import Budget, Pipeline, Stage, StageContext

# loop.json stage records as the loop wrote them before its outputs were typed (a wheeled robot's validation, a
# skipped retraining)
OLD_RECORDS = {
    "export": {"verdict": "pass", "figure": "policy.onnx 0123abcd", "data": {"artifact": "/r/policy", "sha256": "ab"}},
    "validate": {
        "verdict": "pass",
        "figure": "8/8 episodes pass",
        "data": {
            "passed": True,
            "summary_file": "/r/validation/summary.json",
            "report": "/r/validation/report.html",
            "kpi_means": {"tracking_error_lin": 0.05},
            "episodes": 8,
            "failing_episodes": 0,
        },
    },
    "retrain": {"verdict": "skipped", "figure": "no drift detected", "data": {"promoted": False}},
}


def test_a_record_written_before_reads_back_typed_and_writes_back_the_same():
    validated = Validated.from_json(OLD_RECORDS["validate"]["data"])
    assert validated.passed and validated.kpi_means == {"tracking_error_lin": 0.05} and validated.details == {}
    assert validated.to_json() == OLD_RECORDS["validate"]["data"]
    skipped = Retrained.from_json(OLD_RECORDS["retrain"]["data"])
    assert not skipped.promoted and skipped.new_artifact is None


def test_what_the_report_reads_is_typed_and_the_rest_rides_along_in_details():
    data = {
        "promoted": True,
        "new_artifact": "/r/retrain/policy",
        "promotion_reason": "nothing got worse",
        "identified": {"friction": 0.8},
        "estimates": {},
        "sysid_error_before": 0.2,
        "sysid_error_after": 0.05,
        "sysid_plot": None,
        "gyro_bias": {"axes": {}, "why_not": "no log has both an IMU and an odometry to compare it with"},
        "selected_iteration": 100,
        "checkpoint_scores": [{"iteration": 100, "passed": True, "kpi_means": {}, "left": 0.5}],
        "campaigns": {"quick": {"passed": True}},
        "lineage": [],
        "timings": {"sysid": 3.0},
        "lineage_id": 1,
    }
    retrained = Retrained.from_json(data)
    assert retrained.new_artifact == "/r/retrain/policy" and retrained.identified == {"friction": 0.8}
    assert retrained.details == {"timings": {"sysid": 3.0}, "lineage_id": 1}
    assert retrained.to_json() == data


def test_a_record_lacking_what_only_the_report_reads_gets_the_defaults_the_report_shows():
    before_the_gate = {"onnx_dir": "/o", "signed_by": "k", "model_dir": "/rl", "json_valid_rate": 1.0}
    instructed = Instructed.from_json(before_the_gate | {"intent_accuracy": 0.8, "intent_accuracy_sft": 0.7})
    assert instructed.deployed == "rlhf" and instructed.deployed_dir is None and instructed.win_rate_rm is None
    assert instructed.validation == {} and instructed.eval == {}
    skipped = Retrained.from_json(OLD_RECORDS["retrain"]["data"])
    assert skipped.identified == {} and skipped.lineage == [] and skipped.promotion_reason == ""


def test_the_report_reads_a_stage_that_has_not_run_as_none():
    results = {name: OLD_RECORDS[name] for name in ("export", "validate")}
    assert Exported.recorded(results) == Exported(artifact="/r/policy", sha256="ab")
    assert Validated.recorded(results).episodes == 8 and Retrained.recorded(results) is None


def test_a_record_without_a_field_a_stage_reads_is_refused_in_one_line():
    with pytest.raises(UserError, match="the export stage's record has no sha256: it was written by another version"):
        Exported.from_json({"artifact": "/r/policy"})


def test_a_resumed_stage_reads_the_typed_output_of_one_recorded_before(tmp_path: Path):
    """The pipeline records a StageResult as {verdict, figure, data}; on resume the next stage reads it typed."""
    (tmp_path / "loop.json").write_text(
        json.dumps(
            {"pipeline": "loop", "config": {}, "stages": {"export": {"seconds": 1.0, "result": OLD_RECORDS["export"]}}}
        )
    )
    seen = []

    def export(ctx: StageContext) -> StageResult:
        raise AssertionError("recorded: not run again")

    def validate(ctx: StageContext) -> StageResult:
        seen.append(Exported.of(ctx))
        return StageResult("pass", "checked", Validated.from_json(OLD_RECORDS["validate"]["data"]))

    pipeline = Pipeline("loop", (Stage("export", export), Stage("validate", validate)))
    run = pipeline.open(tmp_path).execute(None, Budget("test"))
    assert seen == [Exported(artifact="/r/policy", sha256="ab")]
    assert run.results["validate"] == OLD_RECORDS["validate"] | {"figure": "checked"}
    assert json.loads((tmp_path / "loop.json").read_text())["stages"]["validate"]["result"] == run.results["validate"]


def test_a_roll_back_deploys_the_exported_artifact_again(tmp_path: Path):
    """The final stage's rollback (sim2real.loop.stages.roll_back): the retrained artifact that made the field worse
    stays in the loop's registry, and the artifact the loop exported is its robot's deployed one again."""
    from sim2real.loop.stages import registry_path, roll_back
    from training.retrain.registry import Registry

    ctx = StageContext(None, tmp_path, {"export": OLD_RECORDS["export"]}, lambda *a: None)
    with Registry(registry_path(ctx)) as reg:
        reg.add_artifact("ab", Path("/r/policy"), "rover", "run-1", None)
        reg.add_artifact("cd", Path("/r/retrain/policy"), "rover", "run-2", None, parent_sha256="ab")
        reg.mark_deployed("cd", "rover")
    assert roll_back(ctx) == "ab"
    with Registry(registry_path(ctx)) as reg:
        assert reg.deployed("rover")["sha256"] == "ab" and reg.artifact("cd")["parent_sha256"] == "ab"
