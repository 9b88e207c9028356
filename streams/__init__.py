"""Kafka adapters: topic names and administration, publishing recorded telemetry."""
