"""What the prediction checks (course.notebook.checks.predictions) say to a student: plain
sentences with named placeholders, filled with `.format(...)` (they go through gettext later)."""

NOT_A_DICT = "{name} returned a {kind}, not a dict"
RETURN_KEYS = "return a dict with the keys {keys}"
MISSING_KEYS = "{name}{args} has no {keys}"
UPDATES_MISS = (
    "updates per epoch: predicted {predicted}, but each worker's {images} images in batches of "
    "{batch} make {updates:.2f}"
)
ITERATIONS_MISS = "iterations: predicted {predicted}, {made} {count}"
SNAPSHOTS_MISS = (
    "predicted {predicted} written and {predicted_kept} kept, the run wrote {written} and kept "
    "{kept}"
)
SNAPSHOTS_EXPECTED = (
    "predicted {predicted} written and {predicted_kept} kept, expected {written} written and "
    "{kept} kept"
)
CASE_MISS = "for {args}: {miss}"
NOT_RECORDED = "{run} does not record its data set, batch or epochs"
RUN_AGAIN = "run the job again with this kit's script"
CASES_RIGHT = "right for the check's own settings"
TRACED_RUN = "traced {stage} run"
NO_RUN = "there is no {what} to compare your prediction with (your function: {cases})"
RUN_FIRST = (
    "a prediction earns its points once the job it predicts has run: submit it, and hand in "
    "runs/ with the job log"
)
NOT_YET = "NOT YET: {missing}\n  -> {todo}"
PART_MISSED = "{part} did not hold: {misses}"
NONE_HELD = (
    "set each number beside what the run shows, and find the fact of the lesson it leaves out"
)
HELD = "{right} of {all} parts of your prediction hold: {names}"
PREDICTED_ITEM = "{key} {value}"
YOU_PREDICTED = "{run}: you predicted {said}"
NOT_AN_OPTION = "you chose {choice}, which is not one of those compared: {options}"
MEASURED = "{option} {values}"
AS_PREDICTED = "{what}: {shown}: {option} wins beyond the noise, as predicted"
WINS = "{shown}: {option} wins beyond the noise ({noise:g}), not {choice}"
WITHIN_NOISE = "{what}: {shown}: within the noise ({noise:g}), so either answer counts"
ONE_SIDE = (
    "only the {kind} {found} has traced runs on {ranks} ranks; the comparison needs two (run the "
    "comparison cell above, then this one again)"
)
NO_SIDE = (
    "no {kind} has traced runs on {ranks} ranks; the comparison needs two (run the comparison "
    "cell above, then this one again)"
)
RATIO_MISS = (
    "{key} for compute {compute:.4g} ms, exchange {exchange:.4g} ms, batch {batch}: {got}, "
    "expected {want:.4g}"
)
NO_MEDIAN = (
    "the step profile of {run} has no median time for {phases} on rank(s) {ranks}: they made no "
    "step past the warm-up ones"
)
NO_EXCHANGE = (
    "the step profile of {run} times the gradient exchange at {exchange} ms per step (the median "
    "over its ranks), so there is no exchange to compare the compute with"
)
PROFILE_AGAIN = (
    "submit the profiled runs again (the cell that runs course.profile_plan()) with this kit's "
    "job script and enough training steps for each rank to pass the warm-up, then run this "
    "check again"
)
PROFILED = (
    "{run}: compute {compute:.1f} ms, exchange {exchange:.2f} ms per step at {batch} images per "
    "rank"
)
# The prediction recorded with a job (course.notebook.checks.recorded)
NOT_SUBMITTED = (
    "no prediction was recorded with {run}, the first run this question compares: it was "
    "submitted without one, so your choice cannot be graded"
)
SUBMIT_PREDICTED = (
    "a prediction counts only when it goes with its job: move the runs of this comparison out of "
    "runs/, run the cell that defines your prediction, then the cell that submits the jobs (it "
    "records your prediction with each), and hand in the new runs and their logs"
)
NOT_GRADED = "{why} ({todo})"
NOT_COUNTED = "the prediction recorded with {run} does not count: {why}"
ASK_AGAIN = (
    "a recorded prediction cannot be changed after its job ran: submit the comparison again from "
    "the cell that predicts, and hand in its runs and logs untouched"
)
GRADED_RECORDED = (
    "{key}: your function now answers {now}, but the prediction recorded when {run} was "
    "submitted ({made}) says {then}: that one is graded"
)
CHANGED_SINCE = (
    "{key}: your function now answers {now}; when {run} was submitted ({made}) it said {then}"
)
RECORDED_WITH = "recorded with {run} when it was submitted ({made}): {said}"
DERIVATION_FROM_FUNCTION = (
    "these numbers are derivations, graded from your function with this and other settings"
)
NONE_RECORDED = (
    "no prediction was recorded with {run}: the cell that submits the job records the one your "
    "function returns"
)
