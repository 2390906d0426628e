"""A campaign distributed as Ray tasks (a real local Ray instance with two workers) gives exactly the results of
the same campaign run in one process: batching and random streams depend on the campaign only."""

import dataclasses

from campaign_helpers import TINY_CAMPAIGN, export_rover_policy

from sim.campaign.config import campaign_from_dict
from sim.campaign.runner import CampaignRequest, run_campaign


def test_two_ray_workers_match_one_process(tmp_path):
    export_rover_policy(tmp_path / "policy")
    cfg = dataclasses.replace(campaign_from_dict(TINY_CAMPAIGN), batch_size=2)  # two batches: one per worker
    local = run_campaign(CampaignRequest(tmp_path / "policy", cfg, tmp_path / "local", promote_verdict=False))
    seen = []
    ray = run_campaign(
        CampaignRequest(tmp_path / "policy", cfg, tmp_path / "ray", workers=2, promote_verdict=False),
        progress=lambda done, total: seen.append(done),
    )
    assert ray.env_steps == local.env_steps == 4 * 50
    assert seen == [0, 2, 4]  # results streamed batch by batch
    strip = ("out_dir", "started_at", "finished_at", "wall_s")
    assert {k: v for k, v in ray.summary.items() if k not in strip} == {
        k: v for k, v in local.summary.items() if k not in strip
    }
