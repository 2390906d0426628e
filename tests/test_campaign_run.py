"""Campaigns end to end on real MuJoCo and ONNX Runtime, through the `sim2real validate` command line:
gates and exit codes, resume, report, tamper refusal, --compare, promotion into the manifest."""

import hashlib
import json
import shutil

import numpy as np
import pytest
import yaml
from campaign_helpers import TINY_CAMPAIGN, export_rover_policy

from edge.manifest import MANIFEST_FILE, ONNX_FILE, load_manifest
from edge.validation import UnvalidatedArtifactError, require_validated
from sim.campaign.config import load_campaign
from sim.campaign.results import RESULTS_FILE
from sim.campaign.runner import REPORT_FILE, SUMMARY_FILE, CampaignRequest, run_campaign
from sim2real import cli

TINY = TINY_CAMPAIGN
BAD_GAIN = -3.0  # feeds the measured velocity back with the wrong sign: runs away, saturates the wheels


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    root = tmp_path_factory.mktemp("artifacts")
    export_rover_policy(root / "good")
    export_rover_policy(root / "bad", gain=BAD_GAIN)
    return root


@pytest.fixture
def good(artifacts, tmp_path):
    dst = tmp_path / "good"
    shutil.copytree(artifacts / "good", dst)
    return dst


@pytest.fixture
def bad(artifacts, tmp_path):
    dst = tmp_path / "bad"
    shutil.copytree(artifacts / "bad", dst)
    return dst


@pytest.fixture
def campaign(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


@pytest.fixture(scope="module")
def good_run(artifacts, tmp_path_factory, request):
    """The good policy validated once through the CLI: (artifact copy, campaign file, out dir, exit code)."""
    root = tmp_path_factory.mktemp("good_run")
    shutil.copytree(artifacts / "good", root / "policy")
    (root / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    mp = pytest.MonkeyPatch()
    code = validate(mp, root / "policy", "--campaign", root / "tiny.yaml", "--out", root / "out")
    mp.undo()
    return root / "policy", root / "tiny.yaml", root / "out", code


def validate(monkeypatch, *args) -> int:
    monkeypatch.setitem(cli.SUBCOMMANDS, "validate", "sim2real.cli.validate")
    return cli.main(["validate", *map(str, args)])


def test_good_policy_passes_and_is_promoted(good_run, good):
    policy, _, out, code = good_run
    assert code == 0
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["passed"] and summary["episodes"] == 4 and summary["failing_episodes"] == 0
    verdict = load_manifest(policy).campaign_verdict
    report = (out / REPORT_FILE).read_bytes()
    assert verdict["passed"] and verdict["campaign"] == "tiny"
    assert verdict["policy_sha256"] == load_manifest(policy).policy["sha256"]
    assert verdict["report_sha256"] == hashlib.sha256(report).hexdigest()
    assert verdict["summary_sha256"] == hashlib.sha256((out / SUMMARY_FILE).read_bytes()).hexdigest()
    check = require_validated(load_manifest(policy))
    assert check.passed and "validated by campaign 'tiny'" in check.message
    with pytest.raises(UnvalidatedArtifactError, match="no campaign verdict.*sim2real validate"):
        require_validated(load_manifest(good), artifact_dir=good)  # the same policy, never validated


def test_report_holds_each_axis_plot_worst_cases_and_the_summary(good_run):
    out = good_run[2]
    html = (out / REPORT_FILE).read_text()
    for axis in TINY["axes"]:
        assert f'alt="heatmap: {axis}" src="data:image/png;base64,' in html
    assert html.count('alt="trajectory: ') == 4 and 'alt="failure rate over axis pairs"' in html
    embedded = html.split('<script type="application/json" id="campaign-summary">')[1].split("</script>")[0]
    assert json.loads(embedded) == json.loads((out / SUMMARY_FILE).read_text())


def test_resume_skips_finished_scenarios_and_reruns_a_cut_batch(good_run, tmp_path):
    policy, campaign, done_dir, _ = good_run
    out = tmp_path / "out"
    shutil.copytree(done_dir, out)
    cfg = load_campaign(campaign)
    again = run_campaign(CampaignRequest(policy, cfg, out, promote_verdict=False))
    assert again.env_steps == 0 and again.summary["episodes"] == 4

    lines = (out / RESULTS_FILE).read_text().splitlines(keepends=True)
    (out / RESULTS_FILE).write_text("".join(lines[:-1]) + lines[-1][:20])  # a crash in the middle of a line
    resumed = run_campaign(CampaignRequest(policy, cfg, out, promote_verdict=False))
    assert resumed.env_steps == 4 * 50  # the cut scenario's batch ran again...
    text = (out / RESULTS_FILE).read_text().splitlines()[1:]
    rows = [json.loads(line) for line in text if line.endswith("}")]
    assert len(rows) == 4 and len(text) == 5  # ...but only the missing scenario was appended after the cut line
    final = {r["id"]: r["kpis"] for r in rows}
    original = {json.loads(line)["id"]: json.loads(line)["kpis"] for line in lines[1:]}
    assert final == original  # same batches, same random streams: the same numbers


def test_bad_policy_fails_with_exit_code_1_and_compare_shows_regressions(monkeypatch, good_run, bad, tmp_path, capsys):
    good, campaign, _, _ = good_run
    out = tmp_path / "out"
    assert validate(monkeypatch, bad, "--campaign", campaign, "--out", out, "--compare", good) == 1
    assert "FAIL failure_rate" in capsys.readouterr().out
    manifest = load_manifest(bad)
    assert manifest.campaign_verdict["passed"] is False
    with pytest.raises(UnvalidatedArtifactError, match="campaign 'tiny' failed it"):
        require_validated(manifest)
    check = require_validated(manifest, allow_unvalidated=True)
    assert not check.passed and check.message.startswith("UNVALIDATED artifact allowed by --allow-unvalidated")
    assert load_manifest(good).campaign_verdict["passed"]  # the compared artifact is left alone

    cmp = json.loads((out / "compare.json").read_text())
    assert cmp["scenarios"] == 4 and cmp["regressions"] == 4 and cmp["fixes"] == 0
    assert cmp["other"]["policy_sha256"] == load_manifest(good).policy["sha256"]
    for s in cmp["per_scenario"]:
        assert s["deltas"]["tracking_error_lin"] > 0  # the bad policy tracks worse everywhere
    assert np.isclose(
        cmp["mean_delta"]["tracking_error_lin"],
        np.mean([s["deltas"]["tracking_error_lin"] for s in cmp["per_scenario"]]),
    )
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["comparison"]["regressions"] == 4 and "per_scenario" not in summary["comparison"]
    assert 'alt="per-scenario KPI deltas"' in (out / REPORT_FILE).read_text()


def test_a_gate_the_bad_policy_can_meet(monkeypatch, bad, campaign, tmp_path):
    loose = dict(TINY, gates={"kpis": {"falls": 0, "joint_limit_violations": 0}, "failure_rate": 0.0})
    campaign.write_text(yaml.safe_dump(loose))
    assert validate(monkeypatch, bad, "--campaign", campaign, "--out", tmp_path / "out", "--no-promote") == 0
    assert load_manifest(bad).campaign_verdict is None


def test_results_of_another_artifact_are_not_mixed(monkeypatch, good_run, bad, tmp_path, capsys):
    _, campaign, done_dir, _ = good_run
    out = tmp_path / "out"
    shutil.copytree(done_dir, out)
    assert validate(monkeypatch, bad, "--campaign", campaign, "--out", out, "--no-promote") == 2
    assert "holds results of another run (policy_sha256 differ)" in capsys.readouterr().err
    assert len((out / RESULTS_FILE).read_text().splitlines()) == 5  # untouched


def test_tampered_artifact_is_refused(monkeypatch, good, campaign, tmp_path, capsys):
    data = bytearray((good / ONNX_FILE).read_bytes())
    data[-10] ^= 0xFF
    (good / ONNX_FILE).write_bytes(bytes(data))
    assert validate(monkeypatch, good, "--campaign", campaign, "--out", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "does not match the manifest" in err and "Traceback" not in err
    assert not (tmp_path / "out" / RESULTS_FILE).exists()


def test_artifact_of_another_robot_is_refused(monkeypatch, good, campaign, tmp_path, capsys):
    campaign.write_text(yaml.safe_dump(dict(TINY, robot="quadruped")))
    assert validate(monkeypatch, good, "--campaign", campaign, "--out", tmp_path / "out") == 2
    assert (
        "exported for robot 'rover', which does not match the campaign's robot 'quadruped'" in capsys.readouterr().err
    )


def test_verdict_is_bound_to_the_onnx_bytes(good):
    verdict = {
        "passed": True,
        "campaign": "x",
        "backend": "mujoco",
        "episodes": 1,
        "validated_at": "now",
        "policy_sha256": "0" * 64,
    }
    data = json.loads((good / MANIFEST_FILE).read_text())
    data["campaign_verdict"] = verdict
    (good / MANIFEST_FILE).write_text(json.dumps(data))
    with pytest.raises(UnvalidatedArtifactError, match="other ONNX bytes"):
        require_validated(load_manifest(good))
