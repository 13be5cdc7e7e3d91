"""Points from a submission's job outputs, by the instructor's rules in grading.toml.

The hidden tests of the notebooks call these: a traced run of a stage, its weak-scaling
efficiency against the student's own stage-1 run (in credit tiers), and stage 3's comparison.
Each either returns the points it gives or raises CheckFailed saying why it gives none;
course.evidence decides which runs count.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

from course import evidence, results, stages
from course.errors import GradingError
from course.evidence import Run, comparable, efficiency
from course.notebook.checks import fail, passed

CONFIG = "grading.toml"


def config() -> dict:
    """grading.toml: $COURSE_GRADING_CONFIG, else the first one found from here upwards."""
    explicit = os.environ.get("COURSE_GRADING_CONFIG")
    candidates = [Path(explicit)] if explicit else [p / CONFIG for p in (Path.cwd(), *Path.cwd().parents)]
    for candidate in candidates:
        if candidate.is_file():
            try:
                return tomllib.loads(candidate.read_text())
            except tomllib.TOMLDecodeError as e:
                raise GradingError(f"{candidate} is not valid TOML: {e}", "fix the line it names") from None
    raise GradingError(f"no {CONFIG} found (looked from {Path.cwd()} upwards)",
                       "grade inside the kit's course folder, or set COURSE_GRADING_CONFIG")


def _latest_traced(stage: str, folder: Path) -> Run:
    __tracebackhide__ = True
    found = evidence.runs(stage, folder)
    if not found:
        fail(f"there is no {stage} run in {Path(folder, results.RUNS_DIR)}/",
              "submit the stage's job and hand in runs/ with its log (<job script>.o<number>)")
    traced = [run for run in found if run.traced]
    if not traced:
        last = found[-1]
        fail(f"no {stage} run can be traced to its job; the latest, {last.describe()}: {'; '.join(last.problems)}")
    return traced[-1]


def grade_run(stage: str, points: float, folder: Path = Path(".")) -> float:
    """Full points for a traced, complete run of `stage`; CheckFailed (no points) otherwise."""
    __tracebackhide__ = True
    run = _latest_traced(stage, folder)
    for note in run.notes:
        print(f"note: {note}")
    passed(f"{run.describe()}: {run.images_per_sec:.1f} img/s on {run.workers} worker(s), traced to {run.log.name}")
    return points


def _limits(stage: str, kind: str) -> tuple[list, float]:
    """(tiers best first, suspicious_above) for `stage` on `kind` (gpu or cpu) from grading.toml."""
    settings = config().get("efficiency", {})
    for_stage = settings.get(stage, {})
    for_kind = for_stage.get(kind, {})
    tiers = for_kind.get("tiers", for_stage.get("tiers", []))
    default = for_stage.get("suspicious_above", settings.get("suspicious_above", 1.05))
    ceiling = for_kind.get("suspicious_above", default)
    return sorted(tiers, reverse=True), ceiling


def grade_efficiency(stage: str, points: float, folder: Path = Path(".")) -> float:
    """Points by weak-scaling efficiency: the best traced `stage` run on the most workers that
    stays below the sanity ceiling, against the student's own stage-1 run."""
    __tracebackhide__ = True
    base = evidence.baseline(folder)
    if base is None:
        fail("no traced stage-1 run to compare with", "stage 1's results and job log must come with the submission")
    found = evidence.runs(stage, folder)
    if not found:
        fail(f"there is no {stage} run in {Path(folder, results.RUNS_DIR)}/",
              "submit the stage's job where it can run (stage 2 needs a node with 2 or more GPUs) and hand in "
              "runs/ with the job log")
    candidates = [run for run in found if run.traced and run.workers > 1 and not comparable(run, base)]
    if not candidates:
        untraced = [run for run in found if run.workers > 1]
        why = "; ".join(run.problems[0] if run.problems else comparable(run, base)[0] for run in untraced[-3:])
        fail(f"no traced {stage} run on 2 or more workers compares with stage 1 ({why or 'none found'})",
              "run every stage with the same site settings (model, width, batch per worker, data set)")
    tiers, ceiling = _limits(stage, base.record.get("device_kind", "gpu"))
    most = max(run.workers for run in candidates)
    ranked = sorted((run for run in candidates if run.workers == most), key=lambda run: efficiency(run, base))
    plausible = [run for run in ranked if efficiency(run, base) <= ceiling]
    best = plausible[-1] if plausible else ranked[0]
    value = efficiency(best, base)
    measured = (f"{best.describe()}: {best.images_per_sec:.1f} img/s on {best.workers} workers against "
                f"{base.images_per_sec:.1f} img/s on 1 in {base.describe()}: efficiency {value:.3f}")
    if value > ceiling:
        fail(f"{measured}, above {ceiling}: more than linear speedup means the runs do not compare",
              "run stage 1 and this stage again with the same settings, on the same kind of node")
    for minimum, share in tiers:
        if value >= minimum:
            print(f"{measured} >= {minimum}: {share:.0%} of the points")
            return round(points * share, 3)
    lowest = tiers[-1][0] if tiers else 0
    fail(f"{measured}, below {lowest}",
          "look at the job log: too few steady iterations, other jobs on the node, or too small a batch per "
          "worker for the communication to hide behind")


def grade_comparisons(points: float, folder: Path = Path(".")) -> float:
    """Stage 3: traced runs with at least two rank counts and two communication settings."""
    __tracebackhide__ = True
    found = evidence.runs(stages.MULTI_NODE.name, folder)
    coverage = evidence.comparison_coverage(found)
    if not coverage.complete:
        left_out = "".join(f"; {run.describe()} does not count: {run.problems[0]}" for run in found if not run.traced)
        fail(f"traced stage-3 runs cover {coverage.describe()}{left_out}",
             f"the comparison needs at least {coverage.NEEDED} of each: run the notebook's comparison cell")
    passed(f"stage-3 runs compare {coverage.describe()}")
    return points
