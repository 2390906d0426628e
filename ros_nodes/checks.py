"""How a node logs an artifact check (edge.signing.ArtifactCheck): info when it passed, a warning when a development
switch waived it. rclpy fixes a logging call site's severity at its first call and raises "Logger severity cannot be
changed between calls" at a later one with another, so each severity has its own call site here: one line that
picks info or warn by the check fails a node's configure as soon as it logs a passed check and then a waived one."""

from __future__ import annotations

from edge.signing import ArtifactCheck


def log_check(logger, check: ArtifactCheck, about: str = "") -> None:
    """`check.message` (after `about: ` when given) at info if the check passed, else as a warning."""
    text = f"{about}: {check.message}" if about else check.message
    if check.passed:
        logger.info(text)
    else:
        logger.warning(text)
