"""Validation campaigns: scenario matrices run on the exported artifact in batched twins (locally or as Ray
tasks), scored by sim.kpis, gated, reported, and promoted into the artifact's manifest.

The robot-side check of a verdict (require_validated) lives in edge.validation.

    outcome = run_campaign(CampaignRequest("policy/", load_campaign("quick"), "runs/validation"))  # .passed, .summary
"""

from sim.campaign.config import CampaignConfig, GateConfig, load_campaign
from sim.campaign.runner import CampaignOutcome, CampaignRequest, run_campaign

__all__ = ["CampaignConfig", "CampaignOutcome", "CampaignRequest", "GateConfig", "load_campaign", "run_campaign"]
