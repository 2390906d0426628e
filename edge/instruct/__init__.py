"""The instruction runtime of the robot side: plan grammar, number slots, number words, the safety screen and the
planner over a generator interface (instruction in, clamped plan out), grammar-constrained decoding (grammar.py) and
the robot's generator on ONNX Runtime (onnx_generator.py, imported from there: it loads onnxruntime and tokenizers).
numpy only: no torch, no transformers.

    generator = OnnxGenerator("/opt/instruct")                 # edge.instruct.onnx_generator
    planner = InstructionPlanner(generator, limits_from_manifest("/opt/policy"))
    planned = planner.plan("go forward 2 m then turn left")   # planned.plan: [Segment(vx, vy, wz, duration_s)]
"""

from edge.instruct.generator import MAX_NEW_TOKENS, Completion, Generator
from edge.instruct.plan import STOP, Plan, PlanError, Segment, format_plan, parse_plan, plan_metrics
from edge.instruct.planner import InstructionPlanner, Planned
from edge.instruct.safety import PlanLimits, clamp_plan, is_stop, limits_from_manifest, screen_instruction

__all__ = [
    "MAX_NEW_TOKENS",
    "STOP",
    "Completion",
    "Generator",
    "InstructionPlanner",
    "Plan",
    "PlanError",
    "PlanLimits",
    "Planned",
    "Segment",
    "clamp_plan",
    "format_plan",
    "is_stop",
    "limits_from_manifest",
    "parse_plan",
    "plan_metrics",
    "screen_instruction",
]
