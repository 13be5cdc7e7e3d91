"""Notebook 03's three derivations (course.lessons.step_time.scaling): the solutions pass their
checks
and each planted mistake fails with the words that name it, with the functions themselves (as in a
notebook) and with Remote handles observed in a forked child (as under the grader); a function
that hands the work to the kit's own arithmetic fails. The kit's arithmetic against the sources'
figures, and the lines the notebook prints of the student's profiled runs."""

from __future__ import annotations

import pytest

from course.lessons.step_time import profile_report, scalingmodel
from course.lessons.step_time import scaling as checks
from course.lessons.step_time import scaling_mistakes as known
from course.notebook.checks import CheckFailed
from course.runtime.profile import PHASES
from tests import scaling_students as students
from tests.remote import HANDLES, RemoteRaised


@pytest.fixture(scope="module", autouse=True)
def solved(tmp_path_factory):
    return students.load(tmp_path_factory.mktemp("solved"))


# --- the kit's arithmetic, by hand --------------------------------------------------------------


def test_the_kits_arithmetic_on_the_sources_figures():
    # Hanawa's 240 GPUs at 32 images each on ImageNet-1k, Goyal et al.'s 0.1 per 256:
    # 7680 images an update, 1,281,167 / 7680 = 166.8 -> 167 updates, 0.1 x 30 = 3.0
    plan = scalingmodel.run_plan(240, 32, 1_281_167, 0.1, 256)
    assert plan == {"total_batch": 7680, "updates_per_epoch": 167, "lr": pytest.approx(3.0)}
    assert scalingmodel.run_plan(8, 25, 50_000, 0.1, 100)["updates_per_epoch"] == 250
    # the announcement's 100 times on 128 GPUs: a step 1.28 times one GPU's, 0.28 of it exchange
    implied = scalingmodel.implied_exchange(100.0, 128, 1.0)
    assert implied == {"efficiency": 0.78125, "exchange_seconds": pytest.approx(0.28)}
    assert scalingmodel.implied_exchange(1.0, 1, 0.3)["exchange_seconds"] == 0
    # a 100 ms step: wait 4 and allreduce 6 are a tenth of it
    found = scalingmodel.step_shares(dict(zip(PHASES, (1, 30, 55, 4, 6, 3, 1), strict=True)))
    assert found["shares"]["backward"] == 0.55
    assert found["not_computing"] == pytest.approx(0.10)


# --- the checks ---------------------------------------------------------------------------------


@HANDLES
def test_the_solutions_pass_every_check(handle, solved, capsys):
    checks.shares(handle(solved.step_shares))
    checks.shares(handle(students.shares_that_empty_the_profile))
    checks.plan(handle(solved.run_plan))
    checks.plan(handle(students.plan_numpy), cases=[(240, 32, 1_281_167, 0.1, 256)])
    checks.exchange(handle(solved.implied_exchange))
    said = capsys.readouterr().out
    assert said.count("OK: ") == 5, said
    assert "step_shares: the kit's shares in 6 cases, 2 drawn at random" in said


@HANDLES
@pytest.mark.parametrize(
    "check, wrong, said",
    [
        (
            checks.shares,
            students.shares_of_compute,
            "your shares add up to more than the whole step",
        ),
        (
            checks.shares,
            students.shares_without_wait,
            "misses a phase in which a rank does none of its own work",
        ),
        (checks.shares, students.shares_in_percent, "your numbers are on another scale"),
        (
            checks.shares,
            students.shares_all_but_compute,
            "takes in phases where a rank does its own work",
        ),
        (checks.plan, students.plan_per_gpu_updates, "do not change with the number of GPUs"),
        (checks.plan, students.plan_floor, "leave some of the epoch's images out"),
        (
            checks.plan,
            students.plan_lr_by_gpus,
            "your rate does not change with the images per GPU",
        ),
        (checks.plan, students.plan_ratio_upside_down, "your rate falls as the total batch grows"),
        (
            checks.exchange,
            students.exchange_strong,
            "your step's compute shrinks as GPUs are added",
        ),
        (
            checks.exchange,
            students.exchange_efficiency_upside_down,
            "your efficiency is above 1 when the speedup is below",
        ),
        (
            checks.exchange,
            students.exchange_over_speedup,
            "your exchange shrinks as GPUs are added at the same efficiency",
        ),
        (
            checks.exchange,
            students.exchange_whole_step,
            "your exchange is not 0 at the ideal speedup",
        ),
    ],
)
def test_each_planted_mistake_fails_its_check_naming_it(handle, check, wrong, said):
    with pytest.raises(CheckFailed) as failed:
        check(handle(wrong))
    message = str(failed.value)
    assert "which is not the kit's" in message and said in message, message


@HANDLES
@pytest.mark.parametrize(
    "check, wrong, said",
    [
        (
            checks.shares,
            students.shares_as_a_list,
            "returned list, not a dict with 'not_computing'",
        ),
        (checks.shares, students.shares_without_other, "returned no ['shares']['other']"),
        (checks.plan, students.plan_text, "['lr'] is str, not a number"),
        (checks.exchange, students.exchange_pair, "returned tuple, not a dict with 'efficiency'"),
    ],
)
def test_an_answer_of_another_shape_is_named(handle, check, wrong, said):
    with pytest.raises(CheckFailed) as failed:
        check(handle(wrong))
    assert said in str(failed.value), str(failed.value)


@HANDLES
def test_the_kits_own_arithmetic_is_closed_while_a_function_is_checked(handle):
    raised = (RuntimeError, RemoteRaised)
    with pytest.raises(raised, match=r"course\.lessons\.step_time\.scalingmodel\) is closed"):
        checks.shares(handle(students.shares_from_the_kit))
    with pytest.raises(raised, match=r"course\.lessons\.step_time\.scalingmodel\) is closed"):
        checks.exchange(handle(students.exchange_from_the_kit))
    # restored after the check
    assert scalingmodel.implied_exchange(2.0, 2, 1.0)["exchange_seconds"] == 0


def test_the_visible_cases_alone_tell_every_planted_mistake_from_the_kit():
    for reference, visible, mistakes in (
        (scalingmodel.step_shares, [(case,) for case in checks.SHARES_CASES], known.SHARES),
        (scalingmodel.run_plan, checks.PLAN_CASES, known.PLAN),
        (scalingmodel.implied_exchange, checks.EXCHANGE_CASES, known.EXCHANGE),
    ):
        for what, model in mistakes:
            assert any(
                not known.matches(known.flat(model(*case)), known.flat(reference(*case)))
                for case in visible
            ), what


# --- the notebook's lines of the student's profiled runs ------------------------------------------


def _row(rank: int, ranks: int, *ms: float | None) -> dict:
    medians = dict(zip(PHASES, ms, strict=True))
    step = sum(m or 0 for m in ms)
    return {"run": "multi_node-7", "ranks": ranks, "rank": rank, **medians, "step": step}


def test_the_profiled_runs_are_shown_with_the_students_shares(solved):
    table = [
        _row(0, 2, 1.0, 30.0, 55.0, 4.0, 6.0, 3.0, 1.0),
        _row(1, 2, *[None] * len(PHASES)),
    ]
    lines = profile_report.shares_lines(solved.step_shares, table)
    assert lines == [
        "multi_node-7, rank 0 of 2: not computing 10.0% of its 100.0 ms step (data 1.0%, "
        "forward 30.0%, backward 55.0%, wait 4.0%, allreduce 6.0%, update 3.0%, other 1.0%)",
        "multi_node-7, rank 1: no steady step was profiled",
    ]
    assert profile_report.shares_lines(solved.step_shares, []) == [profile_report.no_profile()]
