"""What the prediction checks (course.notebook.checks.predictions and .recorded) say to a
student: plain sentences with named placeholders, filled with `.format(...)`.

`words.NAME` is the message NAME in the student's language (COURSE_LANG) when it is read: the
module's `__getattr__` looks it up through gettext then, so a message is never fixed at import.
The frames below that hold no words of their own stay as they are."""

from __future__ import annotations

from course.i18n import _

# Frames of code, the same in every language
PREDICTED_ITEM = "{key} {value}"
MEASURED = "{option} {values}"
NOT_GRADED = "{why} ({todo})"
# "NOT YET: " is a verdict token, as "OK: " is; the missing part and the hint are translated
NOT_YET = "NOT YET: {missing}\n  -> {todo}"


def _messages() -> dict[str, str]:
    """Every message of the checks, by name, in the student's language."""
    return {
        "NOT_A_DICT": _("{name} returned a {kind}, not a dict"),
        "RETURN_KEYS": _("return a dict with the keys {keys}"),
        # TRANSLATORS: {name}{args} is the call, e.g. predict_run(1000, 32, 3); {keys} the keys.
        "MISSING_KEYS": _("{name}{args} has no {keys}"),
        # Never the right count (a student would copy it): the facts to work it out from.
        "UPDATES_MISS": _(
            "updates per epoch: predicted {predicted}, which is not what each worker's {images} "
            "images in batches of {batch} make"
        ),
        # Never the run's own counts either (issue 41: a harvesting student copies what a
        # message names): what they are, the student reads in the run's log.
        "ITERATIONS_MISS": _(
            "iterations: predicted {predicted}, which is not what the run made (its log counts "
            "them)"
        ),
        "ITERATIONS_EXPECTED": _(
            "iterations: predicted {predicted}, which is not the count for this setting"
        ),
        "SNAPSHOTS_MISS": _(
            "predicted {predicted} written and {predicted_kept} kept, which is not what the run "
            "wrote and kept"
        ),
        "SNAPSHOTS_EXPECTED": _(
            "predicted {predicted} written and {predicted_kept} kept, which is not what this "
            "setting writes and keeps"
        ),
        # TRANSLATORS: {args} is a case's arguments, e.g. (50000, 128, 4); {miss} what is wrong.
        "CASE_MISS": _("for {args}: {miss}"),
        "NOT_RECORDED": _("{run} does not record its data set, batch or epochs"),
        "RUN_AGAIN": _("run the job again with this kit's script"),
        "CASES_RIGHT": _("right for the check's own settings"),
        # TRANSLATORS: {stage} is a stage's name (single_gpu, multi_gpu); the phrase fills {what}
        # in "there is no {what} to compare your prediction with", as do the next two.
        "TRACED_RUN": _("traced {stage} run"),
        "WARMUP_RUN": _("traced stage-3 run on 2 or more ranks with the warm-up rule"),
        "PROFILED_RUN": _("traced stage-3 run with a step profile on 2 or more ranks"),
        # TRANSLATORS: {cases} is what the check's own cases found of the function.
        "NO_RUN": _("there is no {what} to compare your prediction with (your function: {cases})"),
        "RUN_FIRST": _(
            "a prediction earns its points once the job it predicts has run: submit it, and hand "
            "in runs/ with the job log"
        ),
        "PART_MISSED": _("{part} did not hold: {misses}"),
        "NONE_HELD": _(
            "set each number beside what the run shows, and find the fact of the lesson it leaves "
            "out"
        ),
        "HELD": _("{right} of {all} parts of your prediction hold: {names}"),
        # The parts of a prediction, as PART_MISSED and HELD name them
        "PART_DERIVATION": _("updates and iterations"),
        "PART_SNAPSHOTS": _("snapshots"),
        "PART_FASTER": _("faster setting"),
        "PART_MORE_ACCURATE": _("more accurate rule"),
        "PART_RATIO": _("ratio and break-even batch"),
        "YOU_PREDICTED": _("{run}: you predicted {said}"),
        "NOT_AN_OPTION": _("you chose {choice}, which is not one of those compared: {options}"),
        # TRANSLATORS: {what} is a part ("faster setting"); {shown} the measured values of each
        # option, e.g. "naive 145; naive/ring 118"; {option} the one that wins.
        "AS_PREDICTED": _("{what}: {shown}: {option} wins beyond the noise, as predicted"),
        "WINS": _(
            "{shown}: {option} wins beyond the noise ({noise:g}); your recorded choice was {choice}"
        ),
        "WITHIN_NOISE": _("{what}: {shown}: within the noise ({noise:g}), so either answer counts"),
        "ONE_SETTING": _(
            "only the setting {found} has traced runs on {ranks} ranks; the comparison needs two "
            "(run the comparison cell above, then this one again)"
        ),
        "ONE_RULE": _(
            "only the rule {found} has traced runs on {ranks} ranks; the comparison needs two (run "
            "the comparison cell above, then this one again)"
        ),
        "NO_SETTING": _(
            "no setting has traced runs on {ranks} ranks; the comparison needs two (run the "
            "comparison cell above, then this one again)"
        ),
        "NO_RULE": _(
            "no rule has traced runs on {ranks} ranks; the comparison needs two (run the "
            "comparison cell above, then this one again)"
        ),
        # TRANSLATORS: {key} is the dict's key (ratio or break_even_batch); {got} the student's.
        # Never the right number (a student would copy it).
        "RATIO_MISS": _(
            "{key} for compute {compute:.4g} ms, exchange {exchange:.4g} ms, batch {batch}: {got} "
            "is not it (check by hand: when compute and exchange take equal time, what are both?)"
        ),
        "NO_MEDIAN": _(
            "the step profile of {run} has no median time for {phases} on rank(s) {ranks}: they "
            "made no step past the warm-up ones"
        ),
        "NO_EXCHANGE": _(
            "the step profile of {run} times the gradient exchange at {exchange} ms per step (the "
            "median over its ranks), so there is no exchange to compare the compute with"
        ),
        "PROFILE_AGAIN": _(
            "submit the profiled runs again (the cell that runs course.profile_plan()) with this "
            "kit's job script and enough training steps for each rank to pass the warm-up, then "
            "run this check again"
        ),
        "PROFILED": _(
            "{run}: compute {compute:.1f} ms, exchange {exchange:.2f} ms per step at {batch} "
            "images per rank"
        ),
        # The prediction recorded with a job (course.notebook.checks.recorded)
        "NOT_SUBMITTED": _(
            "no prediction was recorded with {run}, the first run this question compares: it was "
            "submitted without one, so your choice cannot be graded"
        ),
        "SUBMIT_PREDICTED": _(
            "a prediction counts only when it goes with its job: move the runs of this comparison "
            "out of runs/, run the cell that defines your prediction, then the cell that submits "
            "the jobs (it records your prediction with each), and hand in the new runs and their "
            "logs"
        ),
        "NOT_COUNTED": _("the prediction recorded with {run} does not count: {why}"),
        "ASK_AGAIN": _(
            "a recorded prediction cannot be changed after its job ran: submit the comparison "
            "again from the cell that predicts, and hand in its runs and logs untouched"
        ),
        "GRADED_RECORDED": _(
            "{key}: your function now answers {now}, but the prediction recorded when {run} was "
            "submitted ({made}) says {then}: that one is graded"
        ),
        "CHANGED_SINCE": _(
            "{key}: your function now answers {now}; when {run} was submitted ({made}) it said "
            "{then}"
        ),
        "RECORDED_WITH": _("recorded with {run} when it was submitted ({made}): {said}"),
        "DERIVATION_FROM_FUNCTION": _(
            "these numbers are derivations, graded from your function with this and other settings"
        ),
        "NONE_RECORDED": _(
            "no prediction was recorded with {run}: the cell that submits the job records the one "
            "your function returns"
        ),
    }


def __getattr__(name: str) -> str:
    """`words.NAME`: the message NAME, translated now (COURSE_LANG as it is at this moment)."""
    messages = _messages()
    if name in messages:
        return messages[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
