"""The retraining trigger: fires on drifted field logs with a readable reason, stays silent on nominal ones."""

import numpy as np
import pytest

from sim.kpis import RobotLimits
from tests.field_logs import JOINTS, write_log
from training.retrain.drift import TriggerPolicy, decide, field_kpis
from training.retrain.ingest import read_field_log

SCRIPT = [(3.0, 0.5, 0.0, 0.0), (3.0, 0.0, 0.0, 0.8), (3.0, 0.3, 0.0, -0.5), (3.0, -0.3, 0.0, 0.0)]
LIMITS = RobotLimits(np.full(2, -np.inf), np.full(2, np.inf), np.full(2, 8.0), 0.8, 0.05)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """What the campaign measured on the twin the policy was validated in (a crisp robot)."""
    log = read_field_log(write_log(tmp_path_factory.mktemp("b") / "campaign.mcap", SCRIPT, lag=0.03), JOINTS)
    return field_kpis([log], LIMITS).means


def test_trigger_fires_on_drifted_logs_with_a_reason(tmp_path, baseline):
    drifted = [read_field_log(write_log(tmp_path / f"{i}.mcap", SCRIPT, lag=0.3), JOINTS) for i in range(2)]
    kpis = field_kpis(drifted, LIMITS)
    decision = decide(kpis, baseline, TriggerPolicy.from_yaml())
    assert decision.retrain and kpis.episodes == 8
    assert any(
        r.startswith("tracking error") and "in field vs" in r and "threshold 2x" in r for r in decision.reasons
    ), decision.reasons


def test_trigger_stays_silent_on_nominal_logs(tmp_path, baseline):
    nominal = [read_field_log(write_log(tmp_path / "n.mcap", SCRIPT, lag=0.04), JOINTS)]
    kpis = field_kpis(nominal, LIMITS)
    decision = decide(kpis, baseline, TriggerPolicy.from_yaml())
    assert not decision.retrain and decision.reasons == []


def test_too_few_episodes_is_no_decision(tmp_path, baseline):
    short = [read_field_log(write_log(tmp_path / "s.mcap", SCRIPT[:1], lag=0.3), JOINTS)]
    kpis = field_kpis(short, LIMITS)
    decision = decide(kpis, baseline, TriggerPolicy.from_yaml())
    assert not decision.retrain and "need 3" in decision.reasons[0]


def test_trigger_yaml_errors_are_named(tmp_path):
    bad = tmp_path / "t.yaml"
    bad.write_text("kpis: {smoothness: {ratio: 2}}")
    with pytest.raises(ValueError, match="unknown KPI.*smoothness"):
        TriggerPolicy.from_yaml(bad)
