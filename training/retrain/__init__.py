"""Retraining from field logs, libraries: ingest MCAP, score it with the campaign KPIs, detect drift, identify
the twin (system id), fine-tuning configs, promotion rules, the lineage registry. sim2real.retrain runs
them as stages."""

__all__ = ["config", "drift", "finetune", "ingest", "promote", "registry", "sysid"]
