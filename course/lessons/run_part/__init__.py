"""Deep dive: the job's run part: the resource request, rank placement, threads and staging, and
one node two ways."""
