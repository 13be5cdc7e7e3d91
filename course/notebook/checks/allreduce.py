"""Checks of the allreduce exercise: the student's α–β cost model and their fit of α and β.

    allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta) -> seconds
    fit_alpha_beta(sizes, seconds, algorithm, n_ranks) -> (alpha, beta)

The checks observe what the functions return (course.notebook.checks.allreduce_observers, where
they run with the kit's own cost model closed) and judge those numbers against the kit's reference
(course.costmodel). A wrong answer that matches a known mistake (p for p−1, p for log2 p, α and β
swapped, ...) gets a hint that names it. The hidden tests pass other cases, and every check adds
cases drawn at random, so that no case can simply be copied.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import course.notebook.checks.allreduce_observers as observers
from course import costmodel
from course.contracts import grading_rules
from course.notebook import allreduce_report, profile_report
from course.notebook.allreduce_report import parameter_arrays
from course.notebook.checks.allreduce_mistakes import close, diagnosis
from course.notebook.checks.observe import number, observe
from course.notebook.checks.verdict import expect, fail, passed

# (algorithm, ranks, bytes, alpha, beta): a laptop-like and a cluster-like link, and one rank (no
# exchange).
VISIBLE_CASES = (
    ("ring", 4, 2**20, 5e-6, 1e-9),
    ("recursive_doubling", 4, 2**20, 5e-6, 1e-9),
    ("ring", 8, 64 * 2**20, 2e-6, 1e-10),
    ("recursive_doubling", 16, 4096, 2e-6, 1e-10),
    ("ring", 1, 2**20, 5e-6, 1e-9),
)


def _drawn_cases() -> list[tuple[str, int, int, float, float]]:
    """One case of each algorithm that nobody knows before the check runs (recursive doubling on a
    power of two, as the lesson's cases are)."""
    draw = random.SystemRandom()
    return [
        (
            algorithm,
            ranks,
            draw.randint(1, 2**27),
            10 ** draw.uniform(-7, -4),
            10 ** draw.uniform(-11, -8),
        )
        for algorithm, ranks in (
            ("ring", draw.randint(2, 64)),
            ("recursive_doubling", 2 ** draw.randint(1, 7)),
        )
    ]


def cost_model(
    allreduce_time: Callable[..., Any],
    cases: Iterable[tuple[str, int, int, float, float]] = VISIBLE_CASES,
) -> None:
    """allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta) gives the reference model's
    seconds, on `cases` and on cases drawn at random."""
    __tracebackhide__ = True
    drawn = _drawn_cases()
    every = [*cases, *drawn]
    facts = observe(observers.times, allreduce_time, cases=[list(case) for case in every])
    for (algorithm, ranks, nbytes, alpha, beta), fact in zip(every, facts, strict=True):
        expected = costmodel.allreduce_seconds(algorithm, ranks, nbytes, alpha, beta)
        shown = f"allreduce_time({algorithm!r}, {ranks}, {nbytes}, {alpha:g}, {beta:g})"
        value = number(fact["seconds"])
        if value is None:
            fail(f"{shown} returned {fact['type']}, not a number of seconds")
        expect(
            close(value, expected),
            f"{shown} returned {value:.6g} s; the model gives {expected:.6g} s",
            diagnosis(value, algorithm, ranks, nbytes, alpha, beta),
        )
    passed(
        f"allreduce_time: ring and recursive doubling match the alpha-beta model in {len(every)} "
        f"cases, {len(drawn)} of them drawn at random"
    )


def _fitted(fact: Any, what: str) -> tuple[float, float]:
    """The (alpha, beta) of a fit's facts (allreduce_observers._pair), or why they are none."""
    __tracebackhide__ = True
    pair = fact["pair"]
    expect(
        pair is not None,
        f"fit_alpha_beta returned {fact['type']} on {what}, not the pair (alpha, beta)",
    )
    first, second = pair
    alpha, beta = number(first), number(second)
    expect(
        alpha is not None and beta is not None,
        f"fit_alpha_beta returned ({fact['types'][0]}, {fact['types'][1]}) on {what}, not two "
        "numbers",
    )
    assert alpha is not None and beta is not None
    return alpha, beta


def _compare(
    got: tuple[float, float], expected: tuple[float, float], relative: float, what: str, hint: str
) -> None:
    __tracebackhide__ = True
    if close(got[0], expected[1], relative) and close(got[1], expected[0], relative):
        fail(
            f"fit_alpha_beta on {what} returned ({got[0]:.4g}, {got[1]:.4g}): alpha and beta the "
            "wrong way round "
            f"(expected alpha {expected[0]:.4g} s, beta {expected[1]:.4g} s/byte)",
            "return (alpha, beta): the latency first",
        )
    expect(
        close(got[0], expected[0], relative) and close(got[1], expected[1], relative),
        f"fit_alpha_beta on {what} returned alpha {got[0]:.4g} s, beta {got[1]:.4g} s/byte; "
        "expected "
        f"alpha {expected[0]:.4g} s, beta {expected[1]:.4g} s/byte (within {relative:.0%})",
        hint,
    )


def fit(
    fit_alpha_beta: Callable[..., Any],
    table: Sequence,
    alpha: float = 3e-6,
    beta: float = 2e-10,
    tolerance: float = 0.02,
) -> None:
    """fit_alpha_beta recovers (alpha, beta) from exact model times (and a pair drawn at random),
    and on the measured `table` (the Series of course.notebook.allreduce_report.measured_table)
    agrees with the kit's relative-error fit."""
    __tracebackhide__ = True
    sizes = [1024 * 4**k for k in range(1, 9)]
    draw = random.SystemRandom()
    exact = [
        ("ring", 4, alpha, beta),
        ("recursive_doubling", 2, alpha, beta),
        ("recursive_doubling", 8, alpha, beta),
        (
            draw.choice(costmodel.ALGORITHMS),
            2 ** draw.randint(1, 6),
            10 ** draw.uniform(-6, -4.5),
            10 ** draw.uniform(-10.5, -8.5),
        ),
    ]
    measured = [
        s for s in table if s.algorithm in costmodel.ALGORITHMS and s.ranks > 1 and len(s.sizes) > 1
    ]
    series = [
        [sizes, [costmodel.allreduce_seconds(a, p, n, al, be) for n in sizes], a, p]
        for a, p, al, be in exact
    ] + [[s.sizes, s.median, s.algorithm, s.ranks] for s in measured]
    facts = observe(observers.fits, fit_alpha_beta, series=series)
    if len(facts) != len(series):
        fail(f"fit_alpha_beta was observed on {len(facts)} series, not {len(series)}")
    for (algorithm, ranks, a, b), fact in zip(exact, facts):
        what = f"exact {algorithm} times on {ranks} ranks"
        _compare(
            _fitted(fact, what),
            (a, b),
            1e-4,
            f"{what} (alpha {a:g}, beta {b:g})",
            "these times follow the model exactly, so a least-squares fit of the model's two "
            "terms gives alpha and beta back; the terms' coefficients are those of allreduce_time",
        )
    expect(
        bool(measured),
        "there is no measured ring or recursive_doubling series to fit",
        "submit jobs/run_allreduce_benchmark.sh, then allreduce_report.measured_table() again",
    )
    for s, fact in zip(measured, facts[len(exact) :]):
        _compare(
            _fitted(fact, f"the measured {s.label}"),
            costmodel.fit(s.sizes, s.median, s.algorithm, s.ranks),
            tolerance,
            f"the measured {s.label}",
            "weigh every size alike: divide each row and its time by the measured time (relative "
            "error); "
            "unweighted, the 64 MiB points alone set the fit",
        )
    passed(
        f"fit_alpha_beta: recovers alpha and beta from exact times, and fits {len(measured)} "
        "measured series "
        "as the kit does"
    )


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
    _fitted(facts["fit"], what)
    if len(facts["times"]) != len(messages):
        fail(f"allreduce_time was observed on {len(facts['times'])} messages, not {len(messages)}")
    total = 0.0
    for fact in facts["times"]:
        value = number(fact["seconds"])
        if value is None:
            fail(f"allreduce_time returned {fact['type']}, not a number of seconds")
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
            f"the benchmark has not measured {algorithm} on {ranks} ranks, the setting of the "
            "profiled step",
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
        f"the measured {series.label}",
    )


def predict_profiled_step(
    allreduce_time: Callable[..., Any], fit_alpha_beta: Callable[..., Any], folder: Path = Path(".")
) -> tuple[float, dict]:
    """(the student's predicted seconds, the measured exchange) for the profiled stage-3 run on the
    most ranks: their alpha and beta fitted on the benchmark's series of that run's ranks and
    algorithm, their model over that run's gradient (per parameter array with `naive`, which
    allreduces each on its own; one buffer with the communicators that pack them)."""
    __tracebackhide__ = True
    # The student's functions first: a stub says so before anything about the runs.
    observe(observers.tried, allreduce_time, fit_alpha_beta)
    measured = profile_report.measured_allreduce_seconds(folder)
    if measured is None:
        fail(
            "there is no profiled stage-3 run on 2 or more ranks",
            "run the step-profile section above first",
        )
    if measured["device_kind"] == "gpu":
        return predict_held_out_size(
            allreduce_time, fit_alpha_beta, allreduce_report.measured_table(folder), measured
        )
    arrays = measured["arrays"] or parameter_arrays(
        measured["model"], measured["width"]
    )  # older runs: rebuilt
    packed = measured["communicator"] != "naive"
    predicted = predict(
        allreduce_time,
        fit_alpha_beta,
        allreduce_report.measured_table(folder),
        measured["ranks"],
        measured["algorithm"],
        sum(arrays) if packed else arrays,
    )
    print(
        f"{measured['run']}: {sum(arrays):,} parameters in {1 if packed else len(arrays)} "
        "allreduce(s) of "
        f"{measured['algorithm']} on {measured['ranks']} ranks: predicted {predicted * 1e3:.2f} "
        "ms, measured "
        f"{measured['seconds'] * 1e3:.2f} ms per step (ratio {predicted / measured['seconds']:.2f})"
    )
    print(prediction_verdict(predicted / measured["seconds"]))
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
    series = next(
        (s for s in table if s.ranks == ranks and s.algorithm in costmodel.ALGORITHMS), None
    )
    if series is None or len(series.sizes) < 3:
        fail(
            f"the benchmark has no ring or recursive_doubling series of 3 or more sizes on {ranks} "
            "ranks, the rank count of the profiled step",
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
        f"the measured {series.label} without its largest size",
    )
    what = f"the benchmark's {largest:,}-byte {series.algorithm} allreduce on {ranks} ranks"
    print(
        f"{profiled['run']} ran on GPUs: its gradient went through NCCL in GPU memory "
        f"({profiled['seconds'] * 1e3:.2f} ms per step), which the MPI benchmark in host memory "
        f"does not measure. Graded instead: {what}, from a fit of its smaller sizes: predicted "
        f"{predicted * 1e3:.2f} ms, measured {series.median[-1] * 1e3:.2f} ms (ratio "
        f"{predicted / series.median[-1]:.2f})"
    )
    print(prediction_verdict(predicted / series.median[-1]))
    return predicted, {**profiled, "run": what, "seconds": series.median[-1]}


def prediction_verdict(ratio: float) -> str:
    """Whether a predicted / measured ratio earns the point, by the course's prediction factor
    (grading.toml's [allreduce], or its public part in the students' bundle)."""
    rules = grading_rules.for_students()
    factor = rules.prediction_factor if rules is not None else grading_rules.PREDICTION_FACTOR
    if 1 / factor <= ratio <= factor:
        return (
            f"PASS: the prediction is within {factor:g}x of the measurement, the factor the "
            "course's grading rules allow either way, so it earns the point."
        )
    return (
        f"NOT YET: the prediction is more than {factor:g}x away from the measurement (the course's "
        "grading rules allow that factor either way), so it would earn no point. Check the "
        "model's inputs: the bytes are parameters x 4, the ranks and algorithm those of the "
        "measured run, alpha and beta from your fit of that rank count; the naive communicator "
        "sends one allreduce per parameter array, each paying alpha."
    )
