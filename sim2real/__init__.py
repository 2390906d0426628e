"""The application: the `sim2real` command line (cli/, one module per subcommand), the loop (loop/), the RLHF and
retraining pipelines, the software-in-the-loop orchestration (sil) and reports. It may import every floor below."""

__all__ = [
    "cli",
    "errors",
    "loop",
    "pipeline",
    "retrain_pipeline",
    "retrain_watch",
    "rlhf_pipeline",
    "rlhf_report",
    "sil",
]
