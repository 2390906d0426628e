"""Software in the loop: the robot's node set as separate processes over real DDS, driven by an operator in this
process and scored as campaigns are. One module per job: `scripts` (what the operator plays), `scoring` (KPIs and
displacement), `processes` (the node processes), `operator` (the operator node), `run` (`run_sil`, the
orchestration). The command line is `sim2real.cli.sil`. rclpy is imported only once `run_sil` runs."""

from sim2real.sil.run import SilRequest, run_sil
from sim2real.sil.scoring import SETTLE_S, displacement, tracking_kpis
from sim2real.sil.scripts import (
    DEFAULT_COMMANDS,
    Instruction,
    Segment,
    command_at,
    load_commands,
    load_instructions,
)

__all__ = [
    "DEFAULT_COMMANDS",
    "SETTLE_S",
    "Instruction",
    "Segment",
    "command_at",
    "displacement",
    "load_commands",
    "load_instructions",
    "SilRequest",
    "run_sil",
    "tracking_kpis",
]
