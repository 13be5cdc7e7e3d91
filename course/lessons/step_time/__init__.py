"""Deep dive: where a step's time goes: the step profile, the alpha-beta model of allreduce, its
micro-benchmark and fit, and the derivations from the sources."""
