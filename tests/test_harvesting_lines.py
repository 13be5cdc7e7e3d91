"""The harvesting test (tests/test_harvesting.py) on notebook 03's job-line derivations:
resource_request (the #PBS lines, read by the kit's own PBS parser) and run_lines (the run part,
run in bash with a recording mpiexec and placed by Open MPI's own mpirun on simulated nodes, as
its check does). An answer is a list of lines: the harvester retries every number within them
(the node count, the ranks per node, the walltime's fields, the threads) with every number a
failure names, for the case the failure echoes (a site and its run) and for every call, and takes
the solution when a failure states a correction. Then the graded cell, visible and hidden tests,
runs on what it ended with. The rows join tests/test_harvesting.py's table."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pytest

from course.contracts import stages
from course.lessons.run_part import directives
from tests.harvesting import ROWS, Student, harvest
from tests.helpers import replaced_once
from tests.solutions import solution_functions
from tests.test_harvesting import CELLS, HIDDEN, _runner

_SITE = r"(Site\(.*?\))"
_REQUEST_CASE = re.compile(
    rf"^for {_SITE}: (\d+) rank\(s\) of (\d+) thread\(s\), (\d+) epoch\(s\) of ([\d.e+]+) s:"
)
_RUN_CASE = re.compile(rf"^for {_SITE} \((\d+) rank\(s\) per node of (\d+) thread\(s\), (\$\w+)\)")


def _site(text: str) -> directives.Site:
    return eval(text, {"__builtins__": {}, "Site": directives.Site})  # the check's own repr


def request_case(message: str) -> tuple | None:
    """(site, ranks, threads, epoch seconds, epochs) of the case a request's failure names."""
    found = _REQUEST_CASE.match(message.splitlines()[0])
    if not found:
        return None
    site, ranks, threads, epochs, seconds = found.groups()
    return (_site(site), int(ranks), int(threads), float(seconds), int(epochs))


def run_case(message: str) -> tuple | None:
    """(site, ranks per node, threads, local folder) of the case a run part's failure names."""
    found = _RUN_CASE.match(message.splitlines()[0])
    if not found:
        return None
    site, per_node, threads, local_dir = found.groups()
    return (_site(site), int(per_node), int(threads), local_dir)


def _function(source: str):
    namespace: dict = {"math": math}
    exec(source, namespace)
    return next(value for key, value in namespace.items() if key != "math" and callable(value))


_SOURCES = solution_functions(stages.MULTI_NODE.name)
REQUEST = _SOURCES["resource_request"]
RUN = _SOURCES["run_lines"]


@dataclass(frozen=True)
class LinesExercise:
    cell: str
    function: str
    echo: object
    planted: tuple[tuple[str, str], ...]  # (old, new) in the solution: a wrong start each


EXERCISES = (
    LinesExercise(
        "check_resource_request",
        "resource_request",
        request_case,
        (
            ("nodes = math.ceil(ranks / per_node)", "nodes = ranks"),  # a rank per node
            (
                "site.cores_per_node // threads_per_rank",
                "site.cores_per_node",
            ),  # cores, not threads
            ("if threads_per_rank > 1:", "if False:"),  # no ompthreads
            ("(training + max(0.2 * training, 600))", "training"),  # no margin
            ("max(0.2 * training, 600)", "0.2 * training"),  # no floor on the margin
        ),
    ),
    LinesExercise(
        "check_run_lines",
        "run_lines",
        run_case,
        (
            (
                'f"ppr:{ranks_per_node // site.sockets_per_node}:package"',
                'f"ppr:{ranks_per_node}:node"',
            ),
            (":pe={threads_per_rank} ", " "),  # the threads' cores not reserved
            ("-x OMP_NUM_THREADS ", ""),  # the threads not passed to every rank
            ('f"export OMP_NUM_THREADS={threads_per_rank}",', '"export OMP_NUM_THREADS=1",'),
        ),
    ),
)


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: f"{e.cell}-{e.function}")
def test_harvesting_the_job_lines_earns_nothing(exercise, tmp_path, monkeypatch, capsys):
    source, points = CELLS[exercise.cell]
    monkeypatch.chdir(tmp_path)  # no site applied here: the check's other sites say it all
    solution = _SOURCES[exercise.function]
    right = _function(solution)
    visible = _runner(source.split(HIDDEN)[0], {}, exercise.function)
    graded = _runner(source, {}, exercise.function)
    graded(right)  # the solution earns the points on the same path
    retries = moved = 0
    leaked, corrected, earned = [], [], 0.0
    for old, new in exercise.planted:
        wrong = _function(replaced_once(solution, old, new))
        student = Student(exercise.function, wrong, right, echo=exercise.echo)
        done = harvest(student, visible)
        retries, moved = retries + done.retries, moved + done.moved_on
        leaked += done.leaked
        corrected += done.corrected
        try:
            graded(student.function)
        except AssertionError:
            continue
        earned = points
    capsys.readouterr()
    ROWS.append(
        (
            exercise.cell,
            exercise.function,
            points,
            len(exercise.planted),
            retries,
            moved,
            len(leaked),
            len(corrected),
            earned,
        )
    )
    assert not leaked, f"messages named the answer: {leaked}"
    assert not corrected, f"messages stated a correction: {corrected}"
    assert earned == 0, f"the harvesting student earned {earned} of {points} points"
