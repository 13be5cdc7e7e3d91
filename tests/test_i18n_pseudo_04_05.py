"""The decisive test of the marking (issue 23) for notebooks 04 and 05's checks (the exchange, its
scaling, large batches, model parallelism): every planted mistake of their tests
(tests/test_exchange_checks.py, tests/test_exchange_scaling_checks.py,
tests/test_large_batch_checks.py, tests/test_model_parallel_checks.py, read from there, not copied)
runs under the pseudo-locale, where `_()` wraps each line of a translated message in markers. Every
line a student sees must be one translated message whole (a line that only holds a translated
piece would stay half English), the known mistake a hint names must carry markers of its own, and
the failure must be the one the English test expects. The same for the passing lines, the other
failures (a text for a number, a run that is missing or miscounted) and the kit's closed models.
With the functions themselves (the judge's messages are the same under the grader's Remote)."""

from __future__ import annotations

import pytest

from course import i18n
from course.lessons.accuracy import large_batch
from course.lessons.beyond import model_parallel
from course.lessons.exchange import exchange, exchange_scaling
from course.notebook.checks import CheckFailed
from tests import (
    exchange_scaling_students,
    exchange_students,
    large_batch_students,
    model_parallel_students,
    test_exchange_checks,
    test_exchange_scaling_checks,
    test_large_batch_checks,
    test_model_parallel_checks,
)


def _planted(test) -> list[tuple]:
    """The rows of `test`'s parametrization of planted mistakes (not of its handles)."""
    [rows] = [mark.args[1] for mark in test.pytestmark if mark.args[0] != "handle"]
    return rows


def _slowdown(speedup, first):
    """The slowdown check with one planted function and the solution for the other."""

    def check(_: object) -> None:
        solved = exchange_students.SOLVED
        exchange_scaling.slowdown(
            speedup or solved.weak_scaling_speedup, first or solved.first_slower
        )

    return check


# (check, planted function, the words the English test finds)
CASES = [
    *_planted(test_exchange_checks.test_each_planted_mistake_fails_its_check_naming_it),
    *_planted(test_exchange_scaling_checks.test_each_planted_mistake_fails_its_check_naming_it),
    *[
        (_slowdown(speedup, first), speedup or first, said)
        for speedup, first, said in _planted(
            test_exchange_scaling_checks.test_each_planted_slowdown_mistake_fails_naming_it
        )
    ],
    *test_large_batch_checks.MISTAKES,
    *test_model_parallel_checks.MISTAKES,
]


@pytest.fixture(scope="module", autouse=True)
def solved(tmp_path_factory):
    """Notebooks 04 and 05's solutions, which the planted functions call for what they get right."""
    exchange_students.load(tmp_path_factory.mktemp("exchange"))
    return model_parallel_students.load(tmp_path_factory.mktemp("beyond"))


@pytest.fixture(autouse=True)
def pseudo_locale(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)


def unwhole(text: str, prefix: str = "") -> list[str]:
    """The non-blank lines of `text` that are not one translated message whole: after their
    indentation, the hint's arrow or `prefix`, they must open and close with the markers."""
    found = []
    for line in text.splitlines():
        body = line.strip().removeprefix("-> ").removeprefix(prefix)
        if body and not (body.startswith(i18n.MARK_OPEN) and body.endswith(i18n.MARK_CLOSE)):
            found.append(line)
    return found


def english(text: str) -> str:
    return text.replace(i18n.MARK_OPEN, "").replace(i18n.MARK_CLOSE, "")


def test_the_cases_are_all_of_the_planted_mistakes():
    assert len(CASES) == 19 + 12 + 11 + 11 + 10, len(CASES)


@pytest.mark.parametrize(
    "check, wrong, said", CASES, ids=[f"{wrong.__name__}: {said[:30]}" for _, wrong, said in CASES]
)
def test_every_line_of_a_planted_mistakes_failure_is_translated(check, wrong, said):
    with pytest.raises(CheckFailed) as raised:
        check(wrong)
    message = str(raised.value)
    assert said in english(message), message  # the same failure as in English
    assert not unwhole(message), message
    if "it looks like" in message:  # the mistake it names went through `_()` on its own
        [hint] = [line for line in message.splitlines() if "it looks like" in line]
        assert hint.count(i18n.MARK_OPEN) >= 2, hint


def test_the_passing_lines_are_translated(solved, folder, capsys):
    found = exchange_students.SOLVED
    exchange.traffic(found.exchange_traffic)
    exchange.parameter_server(found.parameter_server_time)
    exchange.overlap(found.overlapped_backward)
    exchange.half_precision(found.half_precision_saving)
    exchange_scaling.crossover(found.ring_crossover_bytes)
    exchange_scaling.slowdown(found.weak_scaling_speedup, found.first_slower)
    exchange_scaling.share(found.exchange_share)
    large_batch.rates(solved.large_batch_rates)
    large_batch.lars(solved.lars_local_rate)
    model_parallel.activation(solved.activation_bytes)
    model_parallel.gradient(solved.gradient_bytes)
    model_parallel.idle(solved.idle_fraction)
    test_model_parallel_checks.traced_run(folder)
    model_parallel.measured_run(solved.activation_bytes, solved.gradient_bytes, folder)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 13 and all(line.startswith("OK: ") for line in lines), lines
    assert not unwhole("\n".join(lines), prefix="OK: "), lines


def _failure(check, *args, **kwargs) -> str:
    with pytest.raises(CheckFailed) as raised:
        check(*args, **kwargs)
    return str(raised.value)


def test_the_other_failures_are_translated(solved, folder):
    mp, lb = model_parallel_students, large_batch_students
    found = [  # (the words the English tests find, the failure under the pseudo-locale)
        # a number of a unit, whose name is translated too
        (
            "returned str, not a number of bytes",
            _failure(exchange.traffic, exchange_students.traffic_text),
        ),
        (
            "returned str, not a number of ranks or None",
            _failure(
                exchange_scaling.slowdown,
                exchange_students.SOLVED.weak_scaling_speedup,
                exchange_scaling_students.first_as_text,
            ),
        ),
        ("returned float, not the pair", _failure(large_batch.rates, lb.one_rate)),
        ("returned str, not a number", _failure(large_batch.lars, lb.text_rate)),
        (
            "which is not the kit's pair",
            _failure(large_batch.rates, lb.listed_rates, cases=list(lb.LISTED)),
        ),
        ("returned str, not a number of bytes", _failure(model_parallel.activation, mp.text_count)),
        # no known mistake: the limits to work out by hand, never the kit's count
        (
            "returned 0, which is not the kit's count",
            _failure(model_parallel.idle, mp.listed_idle, cases=list(mp.LISTED)),
        ),
        # on 2 ranks one rank's share is also half the ring: both mistakes named, joined
        ("; or your ring stops", _failure(model_parallel.gradient, mp.one_rank, cases=[(1000, 2)])),
        (
            "submit jobs/run_model_parallel.sh",
            _failure(
                model_parallel.measured_run, solved.activation_bytes, solved.gradient_bytes, folder
            ),
        ),
    ]
    test_model_parallel_checks.traced_run(folder)
    found.append(
        (
            "the run counted 262,144 bytes",
            _failure(model_parallel.measured_run, mp.forward_only, mp.solved_gradient, folder),
        )
    )
    for said, message in found:
        assert said in english(message), message
        assert not unwhole(message), message
    bytes_ = f"{i18n.MARK_OPEN}bytes{i18n.MARK_CLOSE}"  # the unit, translated on its own
    for _, message in (found[0], found[5]):
        assert message.endswith(f"not a number of {bytes_}{i18n.MARK_CLOSE}"), message
    joined = found[7][1].splitlines()[-1]  # the frame that joins the two went through `_()`
    assert f"it looks like {i18n.MARK_OPEN * 2}" in joined, joined


@pytest.mark.parametrize(
    "check, cheat, module",
    [
        (
            exchange.parameter_server,
            exchange_students.server_from_the_kit,
            "lessons.exchange.exchangemodel",
        ),
        (large_batch.lars, large_batch_students.kit_lars, "runtime.largebatch"),
        (model_parallel.idle, model_parallel_students.kit_idle, "lessons.beyond.parallelism"),
    ],
    ids=["exchange", "large_batch", "model_parallel"],
)
def test_the_kits_closed_models_say_so_in_the_students_language(check, cheat, module):
    with pytest.raises(RuntimeError) as raised:
        check(cheat)
    message, notes = str(raised.value), raised.value.__notes__
    assert f"(course.{module})" in message, message
    assert not unwhole(message) and not unwhole("\n".join(notes)), (message, notes)
