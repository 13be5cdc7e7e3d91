"""Deep dive: accuracy at scale: the learning-rate rules for large batches and LARS, and their
reference runs."""
