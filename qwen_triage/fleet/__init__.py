"""Fleet integration: `qwen-triage check` for node-problem-detector, node_exporter and Slurm."""
