"""The short form of benchmarks/ros_flood.py: policy_node and instruction_node, each in its own process over real
DDS, under a flood of /cmd_vel and /instruction. Behaviour, not speed (the benchmark measures the miss rate):
the control loop keeps ticking, memory stays flat, and instruction_node's queue is bounded: every instruction is
either planned or counted as dropped, and the plan that runs last is for the newest."""

from benchmarks.ros_flood import run_flood
from tests.rlhf_helpers import minimal_run


def test_a_flood_leaves_the_control_loop_ticking_and_the_newest_instruction_winning():
    r = run_flood(6.0, minimal_run()["onnx_dir"], quiet_s=1.0, cmd_hz=2000.0, instruction_hz=50.0, warmup_s=2.0)
    assert r.nodes_alive
    assert r.cmd_vel_sent > 10_000 and r.instructions_sent > 200
    assert r.tick_rate_hz > 40.0, r  # 50 Hz asked: the flood does not starve the control timer
    assert r.memory_growth_mb < 20 and r.instruction_memory_growth_mb < 20, r
    assert r.instructions_dropped > 0 and r.plans > 0
    # bounded and accounted for: each instruction ran or was dropped for a newer one (the probe may miss a plan)
    assert 0.95 * r.instructions_sent <= r.plans + r.instructions_dropped <= r.instructions_sent, r
    assert r.newest_plan_lag == 0, r
