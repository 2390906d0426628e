"""A node logs a passed artifact check and a waived one in turn (policy_node: signed, then allowed unvalidated):
rclpy fixes each logging call site's severity at its first call, so one call site for both fails the node's
configure (it did, under `ros2 launch`: policy_node stayed unconfigured)."""

import pytest
import rclpy.logging

from edge.signing import ArtifactCheck
from ros_nodes.checks import log_check

PASSED, WAIVED = ArtifactCheck(True, "signed by trusted key k"), ArtifactCheck(False, "UNVALIDATED artifact allowed")


def test_one_call_site_cannot_log_both_severities():  # what log_check avoids: this test proves rclpy's rule holds
    logger = rclpy.logging.get_logger("test_node_checks_rule")
    with pytest.raises(ValueError, match="severity cannot be changed"):
        for check in (PASSED, WAIVED):
            (logger.info if check.passed else logger.warning)(check.message)


def test_log_check_logs_a_passed_and_a_waived_check_in_turn():
    logger = rclpy.logging.get_logger("test_node_checks")
    for check in (PASSED, WAIVED, PASSED):
        log_check(logger, check, about="/opt/policy")
