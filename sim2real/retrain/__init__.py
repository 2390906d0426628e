"""Retraining from field logs as the application runs it: `pipeline` (`retrain`: ingest, drift decision, system
identification, fine-tuning, the choice of its checkpoint, campaigns, promotion, lineage) and `watch` (`sim2real
retrain --watch`: retrain as finalised logs arrive). The command line is `sim2real.cli.retrain`; the libraries the
stages call are training.retrain.

    from sim2real.retrain import RetrainRequest, retrain

    retrain(RetrainRequest(logs, artifact, out_dir))
"""

from sim2real.retrain.pipeline import PIPELINE, RetrainRequest, RetrainResult, retrain
from sim2real.retrain.watch import WatchConfig, watch

__all__ = ["PIPELINE", "RetrainRequest", "RetrainResult", "WatchConfig", "retrain", "watch"]
