"""What runs inside a job: the training harness, throughput, results, data and models."""
