"""Helpers shared by the tests and the benchmarks (not installed, not in the image):
free ports (`ports`), Prometheus samples (`metrics`), incidents in a store (`store`),
dev services on free ports (`services`) and `fabric-rca worker` processes (`workers`)."""
