"""Which layout fits: memory estimates and the tensor/pipeline/data-parallel layouts for the visible GPUs."""
