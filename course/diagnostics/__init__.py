"""What works on this machine: `course doctor`, the GPU self-test, and the CUDA kernels compiled
without a GPU."""
