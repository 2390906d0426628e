"""The application: the `sim2real` command line (cli/, one module per subcommand), the loop (loop/), the RLHF and
retraining pipelines (rlhf/, retrain/), the software-in-the-loop orchestration (sil/) and reports. It may import
every floor below."""

__all__ = [
    "cli",
    "errors",
    "library_logs",
    "loop",
    "pipeline",
    "retrain",
    "rlhf",
    "sil",
]
