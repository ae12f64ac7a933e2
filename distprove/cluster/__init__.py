"""Many proofs on a Dask cluster: discovery and the batch runner, the planner, the task graph,
the worker state, the task bodies, check-and-write, clusters, incremental runs, metrics and the
dashboard fixes. Dask code here never does field arithmetic; it calls the prover's stages."""
