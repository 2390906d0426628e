"""Retraining from field logs, libraries: ingest MCAP, calibrate the gyro against the odometry, score the logs
with the campaign KPIs, detect drift, identify the twin (system id), fine-tuning configs, the choice of a
fine-tuning's checkpoint, promotion rules, the lineage registry. sim2real.retrain runs them as stages."""

__all__ = [
    "calibration",
    "config",
    "drift",
    "duty",
    "estimate",
    "finetune",
    "ingest",
    "promote",
    "registry",
    "select",
    "sysid",
]
