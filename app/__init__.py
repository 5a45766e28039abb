"""posenc's HTTP layer: parse the query, call the core, serialize the array. Nothing else."""
