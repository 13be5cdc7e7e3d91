"""How notebook 04's prediction of the profiled step's gradient allreduce is judged: the one home of
the rule that the student's check prints (course.lessons.step_time.allreduce) and the grader applies
(course.instructor.scoring.grade_profiled_prediction), each from the files in the student's folder.

On cores of their own the ranks exchange at the network's pace, and the prediction earns the point
within grading.toml's [allreduce] prediction_factor of what the step profile measured, either way.
On shared cores (a laptop running other work, the demo at load 10-19, a CI box) the ranks are
descheduled in the middle of the exchange and the measurement balloons: a correct model's ratio
fell to 0.02. So when a rank of the profiled run got less than [allreduce] shared_below of a core
over its steady steps (the profile's cpu_share, course.runtime.profile), the measured time is not
judged: the prediction is compared with the kit's own model on the same inputs instead
(course.lessons.step_time.costmodel's fit of the same benchmark series, over the same messages,
ranks and
algorithm).

The share is written by the job's own processes, so a student could write a low one to escape the
measurement. Only traced runs are read (profile_report.profiled_runs): the results file is sealed,
its digest in the job's log line, so an edited file does not count. And a low share gains nothing:
the kit's model then judges the prediction, and only a correct model agrees with it, the same model
that earns the point against a measurement on cores of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from course.contracts.grading_rules import GradingRules
from course.i18n import _
from course.lessons.step_time import costmodel, profile_report
from course.lessons.step_time.allreduce_model import FIT_TOLERANCE
from course.lessons.step_time.allreduce_report import Series, measured_table, parameter_arrays
from course.notebook.checks.verdict import fail

# How far a prediction may be from the kit's model's, as a multiple of the most that a fit passing
# the fit check can move it. The fit check (allreduce_model.fit, check_fit) accepts alpha and beta
# each within FIT_TOLERANCE (2%) of the kit's fit of the same series, and a prediction is alpha
# terms plus beta terms over the same messages: such a fit moves it by at most 2% of the alpha part
# plus 2% of the beta part (2% of the whole where both parts are positive, as they are unless noise
# makes the fitted alpha negative). Twice that bound passes a fit at the check's edge; the mistakes
# the hint names (bits, alpha and beta swapped, an unweighted fit) are off by far more.
MARGIN = 2.0


@dataclass(frozen=True)
class Step:
    """The profiled step a prediction is of, from the files: the exchange the profile measured
    (profile_report.measured_allreduce_seconds) and the benchmark's table of the same folder."""

    measured: dict
    table: list[Series]

    @property
    def messages(self) -> int | list[int]:
        """The parameter counts the step's exchange sent: one packed buffer, as ChainerMN's
        communicators but `naive` send it, or each parameter array on its own (`naive`)."""
        arrays = self.measured["arrays"] or parameter_arrays(
            self.measured["model"], self.measured["width"]
        )  # older runs: rebuilt
        return sum(arrays) if self.measured["communicator"] != "naive" else list(arrays)

    @property
    def series(self) -> Series | None:
        """The benchmark's series of the step's ranks and algorithm (None: not measured)."""
        setting = (self.measured["ranks"], self.measured["algorithm"])
        return next((s for s in self.table if (s.ranks, s.algorithm) == setting), None)


def profiled_step(folder: Path = Path(".")) -> Step | None:
    """The profiled stage-3 run on the most ranks of `folder` and its benchmark; None without a
    traced profiled run on 2 or more ranks."""
    measured = profile_report.measured_allreduce_seconds(folder)
    return None if measured is None else Step(measured, measured_table(folder))


def required_step(folder: Path = Path(".")) -> Step:
    """profiled_step(folder); CheckFailed (saying what to run) where there is none."""
    __tracebackhide__ = True
    step = profiled_step(folder)
    if step is None:
        fail(
            _("there is no profiled stage-3 run on 2 or more ranks"),
            _("run the step-profile section above first"),
        )
    return step


def held_out_series(table: Sequence[Series], ranks: int) -> Series | None:
    """On GPUs: the benchmark series whose largest message is predicted from its other sizes (a
    ring or recursive-doubling series of 3 or more sizes on `ranks` ranks), None where there is
    none."""
    series = next(
        (s for s in table if s.ranks == ranks and s.algorithm in costmodel.ALGORITHMS), None
    )
    return series if series is not None and len(series.sizes) >= 3 else None


def held_out_what(series: Series) -> str:
    """What the GPU runs' graded prediction is of: the held-out largest message of `series`."""
    return _("the benchmark's {bytes:,}-byte {algorithm} allreduce on {ranks} ranks").format(
        bytes=series.sizes[-1], algorithm=series.algorithm, ranks=series.ranks
    )


def shared(measured: dict, rules: GradingRules) -> float | None:
    """The lowest share of a core the profiled run's ranks got, where it is below the rules'
    shared_below (the measured time is then not judged); None where the ranks had their cores, or
    where it is unknown: judged as before (older runs against the measurement, GPU runs against the
    benchmark's held-out largest message)."""
    share = measured.get("cpu_share")
    return share if share is not None and share < rules.shared_below else None


@dataclass(frozen=True)
class Judgement:
    """The verdict of the shared-cores rule: whether the prediction earns the point, what was
    compared (in the student's language) and, where it earns nothing, what to check."""

    earns: bool
    said: str
    hint: str


def _model(
    alpha: float, beta: float, algorithm: str, ranks: int, messages: int | list[int], bits: int = 1
) -> tuple[float, float]:
    """(alpha part, beta part) of the model's seconds over `messages` (parameter counts)."""
    counts = [messages] if isinstance(messages, int) else messages
    a, b = costmodel.coefficients(algorithm, ranks)
    nbytes = sum(costmodel.BYTES_PER_PARAMETER * bits * n for n in counts)
    return a * alpha * len(counts), b * nbytes * beta


def _unweighted_fit(series: Series) -> tuple[float, float]:
    """(alpha, beta) fitted in absolute error: the mistake the fit check names."""
    a, b = costmodel.coefficients(series.algorithm, series.ranks)
    sizes, seconds = np.asarray(series.sizes, float), np.asarray(series.median, float)
    rows = np.column_stack([np.full_like(sizes, a), b * sizes])
    (alpha, beta), *_rest = np.linalg.lstsq(rows, seconds, rcond=None)
    return float(alpha), float(beta)


def by_model(predicted: float, step: Step, share: float, rules: GradingRules) -> Judgement:
    """The prediction against the kit's own model on the step's inputs, the cores having been
    shared (`share`: the lowest share of a core a rank got)."""
    measured = step.measured
    algorithm, ranks = measured["algorithm"], measured["ranks"]
    why = _(
        "the cores were shared while the profile ran (a rank got only {share:.0%} of a core over "
        "its steady steps, below the grading rules' {below:.0%}): the measured time is not "
        "compared"
    ).format(share=share, below=rules.shared_below)
    series = step.series
    if series is None or len(series.sizes) < 2:
        return Judgement(
            False,
            _(
                "{why}, and the benchmark has not measured {algorithm} on {ranks} ranks, the "
                "setting of the profiled step, for the kit's model to predict it"
            ).format(why=why, algorithm=algorithm, ranks=ranks),
            f"qsub -j oe -l select=1:mpiprocs={ranks} -v ALGORITHMS={algorithm} "
            "jobs/run_allreduce_benchmark.sh",
        )
    alpha, beta = costmodel.fit(series.sizes, series.median, algorithm, ranks)
    alpha_part, beta_part = _model(alpha, beta, algorithm, ranks, step.messages)
    kit = alpha_part + beta_part
    allowed = MARGIN * FIT_TOLERANCE * (abs(alpha_part) + abs(beta_part))
    tolerance = allowed / abs(kit) if kit else math.inf
    said = _(
        "predicted {predicted:.3g} ms, the kit's model {kit:.3g} ms on the same inputs (ratio "
        "{ratio:.2f})"
    ).format(
        predicted=predicted * 1e3,
        kit=kit * 1e3,
        ratio=predicted / kit if kit else math.inf,
    )
    if abs(predicted - kit) <= allowed:
        return Judgement(
            True,
            _("{why}; your model agrees with the kit's: {said}, within {tolerance:.0%}").format(
                why=why, said=said, tolerance=tolerance
            ),
            "",
        )
    return Judgement(
        False,
        _(
            "{why}; your model does not agree with the kit's: {said}, more than {tolerance:.0%} "
            "apart"
        ).format(why=why, said=said, tolerance=tolerance),
        _hint(predicted, series, step.messages, allowed),
    )


def _hint(predicted: float, series: Series, messages: int | list[int], allowed: float) -> str:
    """The mistake the prediction matches (the kit's model making it), or what to check."""
    algorithm, ranks = series.algorithm, series.ranks
    alpha, beta = costmodel.fit(series.sizes, series.median, algorithm, ranks)
    mistakes = (
        (
            sum(_model(*_unweighted_fit(series), algorithm, ranks, messages)),
            _(
                "it is what a fit in absolute error predicts: there the 64 MiB points alone set "
                "alpha and beta, and the latency is lost in their noise"
            ),
        ),
        (
            sum(_model(beta, alpha, algorithm, ranks, messages)),
            _("it is what the model predicts with alpha and beta swapped"),
        ),
        (
            sum(_model(alpha, beta, algorithm, ranks, messages, bits=8)),
            _("the message is n bytes: do not multiply by 8 (bits)"),
        ),
    )
    for seconds, hint in mistakes:
        if abs(predicted - seconds) <= max(allowed, 1e-6 * abs(seconds)):
            return hint
    return _(
        "the prediction is your allreduce_time with the alpha and beta of your fit_alpha_beta, "
        "over the messages the kit's model sums: check both with the cells that check them above "
        "(the model against the formula, the fit against the kit's on the measured series)"
    )
