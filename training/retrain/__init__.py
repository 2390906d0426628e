"""Retraining from field logs: ingest MCAP, score it with the campaign KPIs, detect drift, identify the twin."""
