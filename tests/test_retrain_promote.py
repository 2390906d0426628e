"""The promotion rule: gates, no regressed scenario, no more of the gates' margin used than the deployed artifact."""

from training.retrain.config import RetrainConfig
from training.retrain.promote import CampaignCheck, decide

KPIS = ("tracking_error_lin", "tracking_error_ang", "falls")
LIMITS = {"tracking_error_lin": 0.35, "tracking_error_ang": 0.6, "falls": 0.0}
RULE = RetrainConfig.from_yaml().promotion


def check(name, new, deployed, passed=True, regressions=0):
    return CampaignCheck(
        "standard",
        name,
        passed,
        [] if passed else ["failure_rate"],
        dict(zip(KPIS, new, strict=True)),
        dict(zip(KPIS, deployed, strict=True)),
        LIMITS,
        regressions,
    )


def test_a_trade_that_is_better_overall_is_promoted():
    promoted, why = decide(
        [check("quick", (0.126, 0.076, 0), (0.111, 0.088, 0)), check("twin", (0.126, 0.064, 0), (0.086, 0.323, 0))],
        RULE,
    )
    assert promoted and "tracking_error_ang 0.064 vs 0.323 on twin" in why


def test_worse_overall_failing_or_regressing_is_not_promoted():
    promoted, why = decide([check("quick", (0.161, 0.106, 0), (0.111, 0.088, 0))], RULE)
    assert not promoted and "17% more of their gates' margin" in why
    promoted, why = decide([check("twin", (0.2, 0.05, 0), (0.09, 0.35, 0))], RULE)  # one KPI far worse
    assert not promoted and "tracking_error_lin 0.2 vs 0.09 deployed on twin (31% of its gate)" in why
    promoted, why = decide([check("quick", (0.1, 0.05, 0.5), (0.1, 0.09, 0))], RULE)  # a fall appears
    assert not promoted and "falls" in why
    promoted, why = decide([check("quick", (0.1, 0.05, 0), (0.1, 0.09, 0), regressions=2)], RULE)
    assert not promoted and "2 scenario(s) of quick fail that the deployed artifact passes" in why
    promoted, why = decide([check("quick", (0.1, 0.05, 0), (0.1, 0.09, 0), passed=False)], RULE)
    assert not promoted and why == "gates failed: quick failed failure_rate"
