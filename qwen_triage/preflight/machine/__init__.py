"""What the machine is: GPUs through NVML or recorded nvidia-smi output, topology, host and software checks."""
