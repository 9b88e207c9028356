"""The data contract's vocabulary (docs/contract.md), in one place.

Causes and the entity kind each names, entity kinds and ids, the measurements with their
fields and the features rules may name, and the one reading of event times. Every other
package (engine, rules, models, api, sim, streams, cli) may import this one; it imports
none of them (tests/test_layers.py fails on an import that runs the wrong way).
"""
