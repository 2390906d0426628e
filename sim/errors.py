"""The digital twins' errors: a robot YAML or MJCF, a campaign or a task config that cannot give a working twin."""

from __future__ import annotations

from edge.errors import UserFixableError


class SimError(UserFixableError, ValueError):
    """Base of the errors sim raises on purpose; the message names the file and the problem."""


class RobotConfigError(SimError):
    """A robot YAML or MJCF that cannot give a working twin."""


class CampaignError(SimError):
    """A campaign YAML that cannot be run, or a results file that does not belong to it."""
