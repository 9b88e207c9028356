"""Anomaly models beside the rules: per-entity robust baselines and an IsolationForest
per entity class, trained from recorded telemetry (`fabric-rca train`) and scored in the
detect stage (`--models DIR`). See models/model.py for the method."""
