"""Checks of the allreduce exercise: the student's α–β cost model and their fit of α and β.

    allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta) -> seconds
    fit_alpha_beta(sizes, seconds, algorithm, n_ranks) -> (alpha, beta)

Both are compared with the kit's reference (course.costmodel). A wrong answer that matches a known
mistake (p for p−1, p for log2 p, α and β swapped, ...) gets a hint that names it. The hidden tests
pass other cases, so that the visible ones cannot simply be copied.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from course import costmodel
from course.contracts import grading_rules
from course.notebook import allreduce_report, profile_report
from course.notebook.allreduce_report import parameter_arrays
from course.notebook.checks.verdict import call, expect, fail, passed, real

# (algorithm, ranks, bytes, alpha, beta): a laptop-like and a cluster-like link, and one rank (no
# exchange).
VISIBLE_CASES = (
    ("ring", 4, 2**20, 5e-6, 1e-9),
    ("recursive_doubling", 4, 2**20, 5e-6, 1e-9),
    ("ring", 8, 64 * 2**20, 2e-6, 1e-10),
    ("recursive_doubling", 16, 4096, 2e-6, 1e-10),
    ("ring", 1, 2**20, 5e-6, 1e-9),
)
RELATIVE = 1e-6  # the same formula computed in another order agrees far closer than this

# Mistakes the checks recognise: (the algorithm it applies to, what it is, a cost model that makes
# it).
_MISTAKES: tuple[tuple[str | None, str, Callable[[str, int, float, float, float], float]], ...] = (
    (
        None,
        "alpha and beta are swapped",
        lambda a, p, n, al, be: costmodel.allreduce_seconds(a, p, n, be, al),
    ),
    (
        None,
        "the message is n bytes: do not multiply by 8 (bits)",
        lambda a, p, n, al, be: costmodel.allreduce_seconds(a, p, 8 * n, al, be),
    ),
    (
        "ring",
        "the ring counts p where it takes p - 1: 2(p-1) steps, 2(p-1)/p of the bytes",
        lambda a, p, n, al, be: 2 * p * al + 2 * n * be,
    ),
    (
        "ring",
        "the ring sends 2(p-1)/p x n bytes, not n: reduce-scatter and allgather each move (p-1)/p "
        "of them",
        lambda a, p, n, al, be: 2 * (p - 1) * al + n * be,
    ),
    (
        "ring",
        "the ring takes 2(p - 1) steps, not p - 1: reduce-scatter then allgather, p - 1 steps each",
        lambda a, p, n, al, be: (p - 1) * al + (p - 1) / p * n * be,
    ),
    (
        "recursive_doubling",
        "recursive doubling takes log2(p) steps, not p",
        lambda a, p, n, al, be: p * (al + n * be),
    ),
    (
        "recursive_doubling",
        "recursive doubling sends the whole vector at each of its log2(p) steps: "
        "log2(p) x n bytes, not n",
        lambda a, p, n, al, be: math.log2(p) * al + n * be,
    ),
)


def _close(value: float, expected: float, relative: float = RELATIVE) -> bool:
    return math.isclose(value, expected, rel_tol=relative, abs_tol=1e-15)


def _diagnosis(
    value: float, algorithm: str, ranks: int, nbytes: float, alpha: float, beta: float
) -> str:
    """The known mistake `value` matches, or the formula to compare with."""
    right = costmodel.allreduce_seconds(algorithm, ranks, nbytes, alpha, beta)
    for applies_to, what, model in _MISTAKES:
        if applies_to not in (None, algorithm):
            continue
        wrong = model(algorithm, ranks, nbytes, alpha, beta)
        if _close(value, wrong) and not _close(wrong, right):
            return f"it looks like {what}"
    latency = costmodel.allreduce_seconds(algorithm, ranks, nbytes, alpha, 0.0)
    return (
        f"the model's {right:.6g} s is {latency:.6g} s of latency (alpha per step) plus "
        f"{right - latency:.6g} s of transfer (beta per byte sent)"
        f"{f'; yours is {value / right:.3g} times it' if right else ''}: count {algorithm}'s steps "
        f"on {ranks} ranks and the bytes each rank sends, as the lesson's alpha-beta model does"
    )


# The kit's own model and fit (course.costmodel, and the report that calls them): a student's
# function that calls them has written nothing.
_KIT_NAMES = {"costmodel", "allreduce_seconds", "coefficients", "allreduce_report", "fits"}


def _own_work(function, name: str) -> None:
    __tracebackhide__ = True
    used = _KIT_NAMES & set(getattr(getattr(function, "__code__", None), "co_names", ()))
    expect(
        not used,
        f"{name} calls the kit's own {', '.join(sorted(used))}: the exercise is to write it "
        "yourself",
        "write the formulas (or the least-squares fit) in your function",
    )


def cost_model(
    allreduce_time: Callable[..., Any],
    cases: Iterable[tuple[str, int, int, float, float]] = VISIBLE_CASES,
) -> None:
    """allreduce_time(algorithm, n_ranks, message_bytes, alpha, beta) gives the reference model's
    seconds."""
    __tracebackhide__ = True
    _own_work(allreduce_time, "allreduce_time")
    cases = list(cases)
    for algorithm, ranks, nbytes, alpha, beta in cases:
        returned = call(allreduce_time, algorithm, ranks, nbytes, alpha, beta)
        expected = costmodel.allreduce_seconds(algorithm, ranks, nbytes, alpha, beta)
        shown = f"allreduce_time({algorithm!r}, {ranks}, {nbytes}, {alpha:g}, {beta:g})"
        value = real(returned)  # NumPy's floats too
        if value is None:
            fail(f"{shown} returned {type(returned).__name__}, not a number of seconds")
        expect(
            _close(value, expected),
            f"{shown} returned {value:.6g} s; the model gives {expected:.6g} s",
            _diagnosis(value, algorithm, ranks, nbytes, alpha, beta),
        )
    passed(
        f"allreduce_time: ring and recursive doubling match the alpha-beta model in {len(cases)} "
        "cases"
    )


def _fit_of(
    fit_alpha_beta: Callable[..., Any],
    sizes: Sequence[int],
    seconds: Sequence[float],
    algorithm: str,
    ranks: int,
    what: str,
) -> tuple[float, float]:
    __tracebackhide__ = True
    result = call(fit_alpha_beta, list(sizes), list(seconds), algorithm, ranks)
    expect(
        not isinstance(result, str)
        and hasattr(result, "__len__")
        and len(result) == 2,  # a tuple, an array
        f"fit_alpha_beta returned {type(result).__name__} on {what}, not the pair (alpha, beta)",
    )
    alpha, beta = real(result[0]), real(result[1])
    expect(
        alpha is not None and beta is not None,
        f"fit_alpha_beta returned ({type(result[0]).__name__}, {type(result[1]).__name__}) on "
        f"{what}, not two numbers",
    )
    assert alpha is not None and beta is not None
    return alpha, beta


def _compare(
    got: tuple[float, float], expected: tuple[float, float], relative: float, what: str, hint: str
) -> None:
    __tracebackhide__ = True
    if _close(got[0], expected[1], relative) and _close(got[1], expected[0], relative):
        fail(
            f"fit_alpha_beta on {what} returned ({got[0]:.4g}, {got[1]:.4g}): alpha and beta the "
            "wrong way round "
            f"(expected alpha {expected[0]:.4g} s, beta {expected[1]:.4g} s/byte)",
            "return (alpha, beta): the latency first",
        )
    expect(
        _close(got[0], expected[0], relative) and _close(got[1], expected[1], relative),
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
    """fit_alpha_beta recovers (alpha, beta) from exact model times, and on the measured `table`
    (the Series of course.notebook.allreduce_report.measured_table) agrees with the kit's
    relative-error fit."""
    __tracebackhide__ = True
    _own_work(fit_alpha_beta, "fit_alpha_beta")
    sizes = [1024 * 4**k for k in range(1, 9)]
    for algorithm, ranks in (("ring", 4), ("recursive_doubling", 2), ("recursive_doubling", 8)):
        exact = [costmodel.allreduce_seconds(algorithm, ranks, n, alpha, beta) for n in sizes]
        got = _fit_of(
            fit_alpha_beta,
            sizes,
            exact,
            algorithm,
            ranks,
            f"exact {algorithm} times on {ranks} ranks",
        )
        _compare(
            got,
            (alpha, beta),
            1e-4,
            f"exact {algorithm} times on {ranks} ranks (alpha {alpha:g}, beta {beta:g})",
            "these times follow the model exactly, so a least-squares fit of the model's two "
            "terms gives alpha and beta back; the terms' coefficients are those of allreduce_time",
        )
    measured = [
        s for s in table if s.algorithm in costmodel.ALGORITHMS and s.ranks > 1 and len(s.sizes) > 1
    ]
    expect(
        bool(measured),
        "there is no measured ring or recursive_doubling series to fit",
        "submit jobs/run_allreduce_benchmark.sh, then allreduce_report.measured_table() again",
    )
    for s in measured:
        got = _fit_of(
            fit_alpha_beta, s.sizes, s.median, s.algorithm, s.ranks, f"the measured {s.label}"
        )
        _compare(
            got,
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
    alpha, beta = _fit_of(
        fit_alpha_beta,
        series.sizes,
        series.median,
        algorithm,
        ranks,
        f"the measured {series.label}",
    )
    total = 0.0
    for n in [arrays] if isinstance(arrays, int) else arrays:
        returned = call(
            allreduce_time, algorithm, ranks, costmodel.BYTES_PER_PARAMETER * n, alpha, beta
        )
        seconds = real(returned)
        if seconds is None:
            fail(f"allreduce_time returned {type(returned).__name__}, not a number of seconds")
        total += seconds
    return total


def predict_profiled_step(
    allreduce_time: Callable[..., Any], fit_alpha_beta: Callable[..., Any], folder: Path = Path(".")
) -> tuple[float, dict]:
    """(the student's predicted seconds, the measured exchange) for the profiled stage-3 run on the
    most ranks: their alpha and beta fitted on the benchmark's series of that run's ranks and
    algorithm, their model over that run's gradient (per parameter array with `naive`, which
    allreduces each on its own; one buffer with the communicators that pack them)."""
    __tracebackhide__ = True
    # The student's functions first: a stub says so before anything about the runs.
    call(allreduce_time, "ring", 2, 1024, 1e-6, 1e-9)
    call(fit_alpha_beta, [1024, 4096], [3e-6, 9e-6], "ring", 2)
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
    alpha, beta = _fit_of(
        fit_alpha_beta,
        series.sizes[:-1],
        series.median[:-1],
        series.algorithm,
        ranks,
        f"the measured {series.label} without its largest size",
    )
    largest = series.sizes[-1]
    returned = call(allreduce_time, series.algorithm, ranks, largest, alpha, beta)
    predicted = real(returned)
    if predicted is None:
        fail(f"allreduce_time returned {type(returned).__name__}, not a number of seconds")
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
