"""The loop's stage hand-offs (sim2real.loop.outputs): typed on the way in, the state file's JSON on the way out,
and a state file written before them reads back as it was written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim2real.errors import UserError
from sim2real.loop.outputs import Exported, Retrained, StageResult, Validated
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


def test_what_only_the_report_reads_rides_along_in_details():
    data = {"promoted": True, "new_artifact": "/r/retrain/policy", "identified": {"friction": 0.8}, "lineage": []}
    retrained = Retrained.from_json(data)
    assert retrained.new_artifact == "/r/retrain/policy"
    assert retrained.details == {"identified": {"friction": 0.8}, "lineage": []}
    assert retrained.to_json() == data


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
