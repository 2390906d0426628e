"""What each loop stage hands on to the stages after it: one frozen dataclass per stage.

A stage returns a StageResult whose `output` is one of these; the state file (loop.json) holds it as the stage's
`data`, a flat JSON object, and a later stage reads it back with `Exported.of(ctx)`, the report with
`Exported.recorded(run.results)`. The typed fields are what other stages and the report read (a field with a
default: a record may lack it, as one of an older version does); whatever else a stage records rides along in
`details`, written back beside the fields as it came, so a state file written before these classes existed reads
back as it was written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from sim2real.errors import UserError
from sim2real.pipeline import StageContext

_Output = TypeVar("_Output", bound="StageOutput")


@dataclass(frozen=True)
class StageOutput:
    stage: ClassVar[str]  # the stage that writes it
    details: dict[str, Any] = field(default_factory=dict, kw_only=True)  # what only the report reads

    @classmethod
    def of(cls: type[_Output], ctx: StageContext) -> _Output:
        """The output of `cls.stage`, as it reads back from the state file."""
        return cls.from_json(ctx.results[cls.stage]["data"])

    @classmethod
    def recorded(cls: type[_Output], results: Mapping[str, Any]) -> _Output | None:
        """The output of `cls.stage` in a run's results (stage -> {verdict, figure, data}), as the report reads it;
        None when that stage has not run."""
        record = results.get(cls.stage)
        return None if record is None else cls.from_json(record["data"])

    @classmethod
    def from_json(cls: type[_Output], data: Mapping[str, Any]) -> _Output:
        typed = {f.name: f for f in dataclasses.fields(cls) if f.name != "details"}
        missing = [
            name
            for name, f in typed.items()
            if name not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        if missing:  # a state file from a version whose stage recorded other things
            raise UserError(
                f"the {cls.stage} stage's record has no {', '.join(missing)}: it was written by another version of "
                "sim2real; move the run directory away or choose another one"
            )
        return cls(
            **{k: v for k, v in data.items() if k in typed}, details={k: v for k, v in data.items() if k not in typed}
        )

    def to_json(self) -> dict[str, Any]:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "details"}
        return {**fields, **self.details}


@dataclass(frozen=True)
class RayTask:
    """Where a stage ran when the loop ran it on a Ray cluster (sim2real.loop.cluster)."""

    node: str  # the Ray node id
    task: str  # the Ray task id
    request: dict[str, float]  # what it reserved: StageResources' fields


@dataclass(frozen=True)
class StageResult:
    verdict: str  # pass | warn (ran, below target) | fail (the loop stops) | skipped
    figure: str  # the key figure, one short line
    output: StageOutput | None = None  # None: the stage hands nothing on
    ray_task: RayTask | None = None  # None: the stage ran in the loop's own process

    def to_json(self) -> dict[str, Any]:
        """The record in the state file (sim2real.pipeline writes what this returns)."""
        record = {"verdict": self.verdict, "figure": self.figure, "data": self.output.to_json() if self.output else {}}
        return record | ({"ray_task": dataclasses.asdict(self.ray_task)} if self.ray_task else {})


@dataclass(frozen=True)
class Trained(StageOutput):
    """The PPO run on the nominal twin (training.ppo): its directory and its summary.json's figures."""

    stage = "train"
    run_dir: str  # the export stage exports its latest checkpoint
    iterations: int
    env_steps: int
    env_steps_per_s: float | None
    threshold: dict | None  # {iteration, train_seconds} where the evaluation threshold was reached
    final_eval: dict  # the final evaluation's tracking errors (and a legged robot's gait figures)
    progress_file: str  # progress.jsonl: the report's training curves


@dataclass(frozen=True)
class Exported(StageOutput):
    """The ONNX artifact every later stage runs, validates, deploys or retrains from."""

    stage = "export"
    artifact: str  # its directory (policy.onnx, manifest.json)
    sha256: str  # of policy.onnx: its id in the lineage registry


@dataclass(frozen=True)
class Validated(StageOutput):
    """The campaign gate; a legged robot's terrain campaign is in details["terrain"]."""

    stage = "validate"
    passed: bool
    summary_file: str
    report: str
    kpi_means: dict[str, float]
    episodes: int
    failing_episodes: int


@dataclass(frozen=True)
class Instructed(StageOutput):
    """The instruction model: the RLHF pipeline's result (sim2real.rlhf.run_pipeline) and the key that signed the
    export. Accuracies are on the held-out set; `eval` is the pipeline's eval stage record."""

    stage = "instruction"
    onnx_dir: str  # the exported model instruction_node runs
    signed_by: str  # the key id that signed it
    model_dir: str  # RL's output
    intent_accuracy: float  # the RLHF model's
    intent_accuracy_sft: float
    json_valid_rate: float  # the RLHF model's
    deployed: str = "rlhf"  # the gate's choice: rlhf or sft (a record from before the gate: rlhf)
    deployed_dir: str | None = None  # None: model_dir
    validation: dict = field(default_factory=dict)  # the gate's split: {set, n, intent_accuracy, intent_accuracy_sft}
    phrasings: dict = field(default_factory=dict)  # the phrasing set: {set, n, intent_accuracy, ...}
    win_rate_rm: float | None = None  # RLHF over SFT, judged by the reward model
    win_rate_operator: float | None = None  # RLHF over SFT, judged by the simulated operator
    eval: dict = field(default_factory=dict)  # both models' figures (json_valid_rate_sft, ...)


@dataclass(frozen=True)
class Deployed(StageOutput):
    """The two field sessions; details: the operator script's KPI summary (sim2real.sil.run_sil) and the
    instruction session's."""

    stage = "deploy"
    logs: str  # duty/ (the operator's script) and instructions/ under it
    field_twin: str  # the field robot YAML the sessions ran on (its hidden parameters: the report's reference)


@dataclass(frozen=True)
class Analysed(StageOutput):
    """The deployment's field KPIs against the campaign's, and the trigger's decision on them."""

    stage = "analyse"
    retrain: bool  # the trigger fired
    reasons: list[str]
    drifted: list[str]  # the KPIs that drifted
    duty_kpis: dict[str, float]  # the operator script's field KPIs: what the trigger judged
    instruction_session_kpis: dict[str, float]
    baseline_kpis: dict[str, float]  # the campaign's
    episodes: int
    files: list[str]
    damage: list[str]


@dataclass(frozen=True)
class Retrained(StageOutput):
    """The retraining's result (sim2real.retrain.RetrainResult: the fields below, the rest in details) when it
    ran; skipped (no drift), it is not promoted and every other field keeps its default."""

    stage = "retrain"
    promoted: bool
    new_artifact: str | None = None  # None: skipped (no drift)
    promotion_reason: str = ""
    identified: dict[str, float] = field(default_factory=dict)  # parameter -> value
    estimates: dict[str, dict] = field(default_factory=dict)  # parameter -> {value, low, high, determined, why}
    sysid_error_before: float | None = None  # the twin's replay error before identification
    sysid_error_after: float | None = None
    sysid_plot: str | None = None  # PNG: logged velocities beside the untuned and the identified twin's replays
    gyro_bias: dict = field(default_factory=dict)  # training.retrain.calibration.GyroBias.to_dict()
    selected_iteration: int | None = None  # the fine-tuning's checkpoint that became the candidate
    checkpoint_scores: list[dict] = field(default_factory=list)  # training.retrain.select.CheckpointScore per one
    campaigns: dict[str, dict] = field(default_factory=dict)  # campaign name -> its check ({passed, ...})
    lineage: list[dict] = field(default_factory=list)  # [{kind, ref, detail}]: logs -> ... -> campaign report


@dataclass(frozen=True)
class Checked(StageOutput):
    """The final deployment check; details: its KPI summary (sim2real.sil.run_sil)."""

    stage = "final"
    artifact: str  # the artifact measured: the promoted one, else the original
    promoted: bool
    logs: str
    field_kpis: dict[str, float]
    gap_closed: dict[str, float | None]  # drifted KPI -> share of its field-vs-campaign gap closed
    # a KPI the promotion rule compares that did not drift and got worse in the field -> [before, after]
    worse_elsewhere: dict[str, list[float]] = field(default_factory=dict)
    rolled_back: bool = False  # the promoted artifact made the field worse: the original is in service again
