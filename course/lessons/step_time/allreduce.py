"""Checks of the allreduce exercise: the student's α–β cost model and their fit of α and β, and
their prediction of a profiled step's gradient allreduce with both.

    allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta) -> seconds
    fit_alpha_beta(sizes, seconds, algorithm, n_ranks) -> (alpha, beta)

The checks observe what the functions return (course.lessons.step_time.allreduce_observers, where
they run with the kit's own cost model closed) and judge those numbers against the kit's reference
(course.lessons.step_time.costmodel). A wrong answer that matches a known mistake (p for p−1, p for
log2 p, α and β
swapped, ...) gets a hint that names it. The hidden tests pass other cases, and every check adds
cases drawn at random, so that no case can simply be copied. The model's and the fit's checks live
in allreduce_model; this module predicts the profiled step, and the notebook calls all from here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import course.lessons.step_time.allreduce_observers as observers
from course.contracts import grading_rules
from course.i18n import _
from course.lessons.step_time import allreduce_judge, costmodel
from course.lessons.step_time.allreduce_model import VISIBLE_CASES, cost_model, fit, fitted
from course.notebook.checks.observe import number, observe
from course.notebook.checks.verdict import fail

__all__ = [
    "VISIBLE_CASES",
    "cost_model",
    "fit",
    "predict",
    "predict_held_out_size",
    "predict_profiled_step",
    "prediction_verdict",
]


def _predicted(
    allreduce_time: Callable[..., Any],
    fit_alpha_beta: Callable[..., Any],
    sizes: Sequence[int],
    seconds: Sequence[float],
    algorithm: str,
    ranks: int,
    messages: Sequence[int],
    what: str,
) -> float:
    """The seconds of the student's model summed over `messages` (bytes), with their alpha and
    beta fitted on (sizes, seconds): a plain float, from the facts."""
    __tracebackhide__ = True
    facts = observe(
        observers.prediction,
        allreduce_time,
        fit_alpha_beta,
        sizes=list(sizes),
        seconds=list(seconds),
        algorithm=algorithm,
        ranks=ranks,
        messages=[int(n) for n in messages],
    )
    fitted(facts["fit"], what)
    if len(facts["times"]) != len(messages):
        fail(
            _("allreduce_time was observed on {found} messages, not {messages}").format(
                found=len(facts["times"]), messages=len(messages)
            )
        )
    total = 0.0
    for fact in facts["times"]:
        value = number(fact["seconds"])
        if value is None:
            fail(
                _("{call} returned {type}, not a number of seconds").format(
                    call="allreduce_time", type=fact["type"]
                )
            )
        total += value
    return total


def predict(
    allreduce_time: Callable[..., Any],
    fit_alpha_beta: Callable[..., Any],
    table: Sequence,
    ranks: int,
    algorithm: str,
    arrays: int | Sequence[int],
) -> float:
    """The student's prediction of one step's gradient allreduce: their alpha and beta fitted on the
    measured (ranks, algorithm) series of `table`, their model once per parameter array of 4-byte
    floats (`arrays`: the arrays' sizes, as the naive communicator sends them; or one count, for one
    packed buffer)."""
    __tracebackhide__ = True
    series = next((s for s in table if (s.ranks, s.algorithm) == (ranks, algorithm)), None)
    if series is None:
        fail(
            _(
                "the benchmark has not measured {algorithm} on {ranks} ranks, the setting of the "
                "profiled step"
            ).format(algorithm=algorithm, ranks=ranks),
            f"qsub -j oe -l select=1:mpiprocs={ranks} -v ALGORITHMS={algorithm} "
            "jobs/run_allreduce_benchmark.sh",
        )
    return _predicted(
        allreduce_time,
        fit_alpha_beta,
        series.sizes,
        series.median,
        algorithm,
        ranks,
        [
            costmodel.BYTES_PER_PARAMETER * n
            for n in ([arrays] if isinstance(arrays, int) else arrays)
        ],
        _("the measured {series}").format(series=series.label),
    )


def predict_profiled_step(
    allreduce_time: Callable[..., Any], fit_alpha_beta: Callable[..., Any], folder: Path = Path(".")
) -> tuple[float, dict]:
    """(the student's predicted seconds, the measured exchange) for the profiled stage-3 run on the
    most ranks: their alpha and beta fitted on the benchmark's series of that run's ranks and
    algorithm, their model over that run's gradient (per parameter array with `naive`, which
    allreduces each on its own; one buffer with the communicators that pack them). The verdict it
    prints is the grader's (course.lessons.step_time.allreduce_judge): against the measured time,
    or, where
    the run's cores were shared, against the kit's model on the same inputs."""
    __tracebackhide__ = True
    # The student's functions first: a stub says so before anything about the runs.
    observe(observers.tried, allreduce_time, fit_alpha_beta)
    step = allreduce_judge.required_step(folder)
    measured = step.measured
    if measured["device_kind"] == "gpu":
        return predict_held_out_size(allreduce_time, fit_alpha_beta, step.table, measured)
    messages = step.messages
    arrays = [messages] if isinstance(messages, int) else messages
    predicted = predict(
        allreduce_time,
        fit_alpha_beta,
        step.table,
        measured["ranks"],
        measured["algorithm"],
        messages,
    )
    ratio = predicted / measured["seconds"]
    print(
        _(
            "{run}: {parameters:,} parameters in {count} allreduce(s) of {algorithm} on {ranks} "
            "ranks: predicted {predicted:.2f} ms, measured {measured:.2f} ms per step (ratio "
            "{ratio:.2f})"
        ).format(
            run=measured["run"],
            parameters=sum(arrays),
            count=len(arrays),
            algorithm=measured["algorithm"],
            ranks=measured["ranks"],
            predicted=predicted * 1e3,
            measured=measured["seconds"] * 1e3,
            ratio=ratio,
        )
    )
    rules = grading_rules.for_students() or grading_rules.GradingRules({})
    share = allreduce_judge.shared(measured, rules)
    judged = None if share is None else allreduce_judge.by_model(predicted, step, share, rules)
    print(prediction_verdict(ratio, judged))
    return predicted, measured


def predict_held_out_size(
    allreduce_time: Callable[..., Any],
    fit_alpha_beta: Callable[..., Any],
    table: Sequence,
    profiled: dict,
) -> tuple[float, dict]:
    """On GPUs: (the predicted seconds, the measurement) of the benchmark's largest message on the
    profiled run's ranks, alpha and beta fitted on its other sizes. A GPU step exchanges its
    gradient with NCCL in GPU memory, which the MPI benchmark in host memory does not measure, so
    the step's exchange is shown, not graded."""
    __tracebackhide__ = True
    ranks = profiled["ranks"]
    series = allreduce_judge.held_out_series(table, ranks)
    if series is None:
        fail(
            _(
                "the benchmark has no ring or recursive_doubling series of 3 or more sizes on "
                "{ranks} ranks, the rank count of the profiled step"
            ).format(ranks=ranks),
            f"qsub -j oe -l select=1:mpiprocs={ranks} jobs/run_allreduce_benchmark.sh",
        )
    largest = series.sizes[-1]
    predicted = _predicted(
        allreduce_time,
        fit_alpha_beta,
        series.sizes[:-1],
        series.median[:-1],
        series.algorithm,
        ranks,
        [largest],
        _("the measured {series} without its largest size").format(series=series.label),
    )
    what = allreduce_judge.held_out_what(series)
    print(
        _(
            "{run} ran on GPUs: its gradient went through NCCL in GPU memory ({step:.2f} ms per "
            "step), which the MPI benchmark in host memory does not measure. Graded instead: "
            "{what}, from a fit of its smaller sizes: predicted {predicted:.2f} ms, measured "
            "{measured:.2f} ms (ratio {ratio:.2f})"
        ).format(
            run=profiled["run"],
            step=profiled["seconds"] * 1e3,
            what=what,
            predicted=predicted * 1e3,
            measured=series.median[-1] * 1e3,
            ratio=predicted / series.median[-1],
        )
    )
    print(prediction_verdict(predicted / series.median[-1]))
    return predicted, {**profiled, "run": what, "seconds": series.median[-1]}


def prediction_verdict(ratio: float, shared: allreduce_judge.Judgement | None = None) -> str:
    """Whether a predicted / measured ratio earns the point, by the course's prediction factor
    (grading.toml's [allreduce], or its public part in the students' bundle); or, where the
    profiled run's cores were shared, the verdict of `shared` (allreduce_judge.by_model: the
    prediction against the kit's model, the measured time not compared)."""
    # "PASS: " and "NOT YET: " are verdict tokens, as "OK: " is: they stay as they are.
    if shared is not None and shared.earns:
        return "PASS: " + _("{said}, so it earns the point.").format(said=shared.said)
    if shared is not None:
        return "NOT YET: " + _("{said}, so it would earn no point; {hint}.").format(
            said=shared.said, hint=shared.hint
        )
    rules = grading_rules.for_students()
    factor = rules.prediction_factor if rules is not None else grading_rules.PREDICTION_FACTOR
    if 1 / factor <= ratio <= factor:
        return "PASS: " + _(
            "the prediction is within {factor:g}x of the measurement, the factor the course's "
            "grading rules allow either way, so it earns the point."
        ).format(factor=factor)
    return "NOT YET: " + _(
        "the prediction is more than {factor:g}x away from the measurement (the course's grading "
        "rules allow that factor either way), so it would earn no point. Check the model's "
        "inputs: the bytes are parameters x 4, the ranks and algorithm those of the measured run, "
        "alpha and beta from your fit of that rank count; the naive communicator sends one "
        "allreduce per parameter array, each paying alpha."
    ).format(factor=factor)
