"""The safety filter between policy output and actuators: clamping, rate limit, NaN/Inf handling."""

import numpy as np
import pytest

from edge.safety import SafetyFilter

LOW = np.array([-1.0, -2.0, -0.5])
HIGH = np.array([1.0, 2.0, 3.0])


def test_clamps_to_limits_and_passes_actions_within_them():
    f = SafetyFilter(LOW, HIGH)
    out = f(np.array([5.0, -7.0, 0.25]))
    np.testing.assert_array_equal(out, np.array([1.0, -2.0, 0.25], np.float32))
    assert out.dtype == np.float32 and not f.fault and f.fault_count == 0
    rng = np.random.default_rng(0)
    batch = f(rng.normal(scale=10, size=(500, 3)))
    assert batch.shape == (500, 3)
    assert np.all(batch >= LOW.astype(np.float32)) and np.all(batch <= HIGH.astype(np.float32))


def test_rate_limit_ramps_from_the_safe_action_and_restarts_after_reset():
    f = SafetyFilter(LOW, HIGH, max_step=0.25)
    target = np.array([1.0, -2.0, 0.1])
    steps = [f(target) for _ in range(5)]
    np.testing.assert_allclose(steps[0], [0.25, -0.25, 0.1])
    np.testing.assert_allclose(steps[1], [0.5, -0.5, 0.1])
    np.testing.assert_allclose(steps[4], [1.0, -1.25, 0.1])
    f.reset()
    np.testing.assert_allclose(f(target), [0.25, -0.25, 0.1])


def test_rate_limit_resets_only_masked_rows():
    f = SafetyFilter(LOW, HIGH, max_step=0.5)
    target = np.ones((2, 3))
    f(target)
    f.reset(np.array([True, False]))
    out = f(target)
    np.testing.assert_allclose(out[0], [0.5, 0.5, 0.5])
    np.testing.assert_allclose(out[1], [1.0, 1.0, 1.0])


def test_nan_action_gives_safe_action_fault_flag_and_count():
    f = SafetyFilter(LOW, HIGH)
    out = f(np.array([0.3, np.nan, 0.2]))
    np.testing.assert_array_equal(out, np.zeros(3))
    assert f.fault and f.fault_count == 1 and f.fault_reason == "non-finite action"
    out = f(np.array([0.3, 0.1, 0.2]))
    np.testing.assert_allclose(out, [0.3, 0.1, 0.2])
    assert not f.fault and f.fault_count == 1 and f.fault_reason is None


def test_inf_observation_gives_safe_action_even_when_the_action_is_finite():
    f = SafetyFilter(LOW, HIGH, safe_action=[0.0, 0.0, 1.0])
    out = f(np.array([0.3, 0.1, 0.2]), obs=np.array([0.0, np.inf, 1.0, 2.0]))
    np.testing.assert_array_equal(out, [0.0, 0.0, 1.0])
    assert f.fault and f.fault_count == 1 and f.fault_reason == "non-finite observation"


def test_batch_replaces_and_counts_only_the_faulty_rows():
    f = SafetyFilter(LOW, HIGH)
    actions = np.array([[0.1, 0.1, 0.1], [np.inf, 0.0, 0.0], [0.2, 0.2, 0.2]])
    obs = np.array([[0.0, 0.0], [0.0, 0.0], [np.nan, 0.0]])
    out = f(actions, obs)
    np.testing.assert_allclose(out, [[0.1, 0.1, 0.1], [0, 0, 0], [0, 0, 0]])
    assert f.fault and f.fault_count == 2


def test_after_a_fault_the_rate_limit_ramps_from_the_safe_action():
    f = SafetyFilter(LOW, HIGH, max_step=0.5)
    f(np.ones(3))
    f(np.ones(3))  # at 1.0
    f(np.full(3, np.nan))  # fault: hold the safe action
    np.testing.assert_allclose(f(np.ones(3)), [0.5, 0.5, 0.5])


def test_returned_array_is_not_the_filters_memory():
    f = SafetyFilter(LOW, HIGH, max_step=0.5)
    out = f(np.ones(3))
    out[:] = 100.0
    np.testing.assert_allclose(f(np.ones(3)), [1.0, 1.0, 1.0])


def test_rejects_a_safe_action_outside_the_limits():
    with pytest.raises(ValueError, match="safe action"):
        SafetyFilter([0.5, -1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="low <= high"):
        SafetyFilter([1.0], [0.0])
