"""The contracts between the kit's steps, each with its writer and its reader side by side: a
stage's facts (stages), the stub (stubs), the job log's lines (joblog, jobend), the results file
(results), the allreduce benchmark's file (benchmark) and the grading rules (grading_rules)."""
