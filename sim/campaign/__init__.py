"""Validation campaigns: scenario matrices run on the exported artifact in batched twins (locally or as Ray
tasks), scored by sim.kpis, gated, reported, and promoted into the artifact's manifest.

The robot-side check of a verdict (require_validated) lives in edge.validation.
"""
