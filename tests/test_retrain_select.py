"""The choice of a fine-tuning's checkpoint: each scored by the share of the drifted KPIs' field error it leaves on
the identified twin; the lowest among those that pass the campaign's gates wins, the later one on a tie."""

import pytest

from training.retrain.select import CheckpointScore, best, drift_left

FIELD = {"tracking_error_ang": 0.145, "tracking_error_lin": 0.2, "falls": 0.0}


def _score(iteration: int, left: float, passed: bool = True) -> CheckpointScore:
    return CheckpointScore(iteration, passed, {"tracking_error_ang": left * 0.145}, left)


def test_drift_left_is_the_mean_share_of_the_drifted_kpis_field_error():
    twin = {"tracking_error_ang": 0.0725, "tracking_error_lin": 0.05, "falls": 0.0}
    assert drift_left(twin, FIELD, ["tracking_error_ang"]) == pytest.approx(0.5)
    assert drift_left(twin, FIELD, ["tracking_error_ang", "tracking_error_lin"]) == pytest.approx((0.5 + 0.25) / 2)
    with pytest.raises(ValueError, match="no drifted KPI"):
        drift_left(twin, FIELD, [])


def test_best_is_the_lowest_share_left_among_the_passing_checkpoints():
    scores = [_score(20, 0.8), _score(40, 0.3, passed=False), _score(60, 0.5), _score(80, 0.6)]
    assert best(scores).iteration == 60  # 40 leaves less but fails the campaign's gates
    assert best([_score(20, 0.8, False), _score(40, 0.3, False)]).iteration == 40  # none passes: the lowest
    assert best([_score(40, 0.5), _score(20, 0.5), _score(60, 0.7)]).iteration == 40  # a tie: the later one
    with pytest.raises(ValueError, match="no checkpoint"):
        best([])


def test_a_score_survives_its_record():
    score = _score(100, 0.42)
    assert CheckpointScore.from_dict(score.to_dict()) == score
