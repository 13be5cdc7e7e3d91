"""What gets a job script onto nodes: submission, the local scheduler, #PBS directives, site
profiles, the job's hosts and the MPI launch."""
