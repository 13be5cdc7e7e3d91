"""Notebook 04's section 4 checks (course.lessons.exchange.exchange_scaling): the solutions pass
them
and each planted mistake fails with the words that name it, with the functions themselves (as in a
notebook) and with Remote handles observed in a forked child (as under the grader); a function that
hands the work to the kit's own model fails. The kit's models against hand-worked cases, and the
notebook's report lines on given fits."""

from __future__ import annotations

import math

import pytest

from course.lessons.exchange import exchange_scaling as checks
from course.lessons.exchange import exchange_scaling_mistakes as known
from course.lessons.exchange import exchangemodel, scaling_report
from course.lessons.step_time.allreduce_mistakes import close
from course.notebook.checks import CheckFailed
from tests import exchange_scaling_students as wrong
from tests import exchange_students as students
from tests.remote import HANDLES, RemoteRaised


@pytest.fixture(scope="module", autouse=True)
def solved(tmp_path_factory):
    return students.load(tmp_path_factory.mktemp("solved"))


def test_the_kits_models_on_hand_worked_cases():
    # 4 ranks, one alpha and beta: the ring pays 6 alpha against 2, sends 1.5 n beta against 2 n:
    # faster above 4 alpha / (0.5 beta)
    assert exchangemodel.ring_crossover_bytes(4, 1e-6, 1e-9, 1e-6, 1e-9) == pytest.approx(8000)
    # 2 ranks: the same bytes, twice the latency: never; a ring of no latency: always
    assert exchangemodel.ring_crossover_bytes(2, 1e-6, 1e-9, 1e-6, 1e-9) == math.inf
    assert exchangemodel.ring_crossover_bytes(4, 0.0, 1e-9, 1e-6, 1e-9) == 0.0
    # one rank: one rank's speedup; 2 ranks whose exchange (2 alpha + n beta) equals the compute
    assert exchangemodel.weak_scaling_speedup(1, 0.5, 1e9, 1e-3, 1e-9) == 1.0
    assert exchangemodel.weak_scaling_speedup(2, 0.5, 4e8, 5e-2, 1e-9) == pytest.approx(1.0)
    assert exchangemodel.first_slower([1, 2, 4], 0.1, 4e8, 5e-2, 1e-9) == 2
    assert exchangemodel.first_slower([1, 2, 4], 10.0, 4e8, 5e-2, 1e-9) is None
    assert exchangemodel.exchange_share(0.5, 4e8, 2, 5e-2, 1e-9) == pytest.approx(0.5)
    assert exchangemodel.exchange_share(0.5, 4e8, 1, 5e-2, 1e-9) == 0.0


@HANDLES
def test_the_solutions_pass_every_check(handle, solved, capsys):
    checks.crossover(handle(solved.ring_crossover_bytes))
    checks.slowdown(handle(solved.weak_scaling_speedup), handle(solved.first_slower))
    checks.share(handle(solved.exchange_share))
    said = capsys.readouterr().out
    assert said.count("OK: ") == 3, said
    assert "ring_crossover_bytes: matches the kit's model in 7 cases" in said
    assert "match the kit's model in 5 and 5 cases" in said


@HANDLES
@pytest.mark.parametrize(
    "check, mistake, said",
    [
        (
            checks.crossover,
            wrong.crossover_alphas_crossed,
            "your size grows when the ring's own latency falls",
        ),
        (checks.crossover, wrong.crossover_swapped, "the units of your answer are off"),
        (
            checks.crossover,
            wrong.crossover_ring_latency_once,
            "your ring's latency does not grow with the ranks",
        ),
        (checks.crossover, wrong.crossover_doubling_one_step, "costs the same on 4 ranks as on 64"),
        (
            checks.crossover,
            wrong.crossover_reversed,
            "above your size, recursive doubling is the faster",
        ),
        (checks.crossover, wrong.crossover_raw_ratio, "here the ring does not win above it"),
        (checks.crossover, wrong.crossover_none, "returned NoneType, not a number of bytes"),
        (checks.share, wrong.share_over_compute, "your share is not of the whole step"),
        (checks.share, wrong.share_of_compute, "your share falls as the exchange grows"),
        (checks.share, wrong.share_bytes_per_rank, "your exchange's bytes shrink"),
        (checks.share, wrong.share_doubling, "recursive doubling's time"),
        (checks.share, wrong.share_swapped, "the units of your answer are off"),
    ],
)
def test_each_planted_mistake_fails_its_check_naming_it(handle, check, mistake, said):
    with pytest.raises(CheckFailed) as failed:
        check(handle(mistake))
    assert said in str(failed.value), str(failed.value)


@HANDLES
@pytest.mark.parametrize(
    "speedup, first, said",
    [
        (wrong.speedup_strong, None, "your ranks share one batch"),
        (wrong.speedup_bytes_per_rank, None, "your exchange's bytes shrink"),
        (wrong.speedup_whole_bytes, None, "work out a ring of 2 ranks by hand"),
        (wrong.speedup_is_efficiency, None, "your speedup never exceeds 1"),
        (wrong.speedup_doubling, None, "recursive doubling's time"),
        (wrong.speedup_swapped, None, "the units of your answer are off"),
        (None, wrong.first_at_or_below_one, "check a rank count whose speedup is exactly 1"),
        (None, wrong.first_most_ranks, "the most ranks still slower"),
        (None, wrong.first_faster, "that rank count is faster than one rank"),
        (None, wrong.first_position, "a position in the list"),
        (None, wrong.first_zero_for_none, "returned 0, which is not the model's answer"),
    ],
)
def test_each_planted_slowdown_mistake_fails_naming_it(handle, solved, speedup, first, said):
    with pytest.raises(CheckFailed) as failed:
        checks.slowdown(
            handle(speedup or solved.weak_scaling_speedup), handle(first or solved.first_slower)
        )
    assert said in str(failed.value), str(failed.value)


@HANDLES
def test_the_kits_own_model_is_closed_while_a_function_is_checked(handle, solved):
    with pytest.raises(
        (RuntimeError, RemoteRaised), match=r"course\.lessons\.exchange\.exchangemodel\) is closed"
    ):
        checks.slowdown(handle(wrong.speedup_from_the_kit), handle(solved.first_slower))
    assert exchangemodel.weak_scaling_speedup(1, 1.0, 1.0, 1.0, 1.0) == 1.0  # restored


def test_each_mistake_differs_from_the_model_on_a_visible_case():
    """The visible cases alone tell every planted mistake from the model (the drawn ones could
    happen to as well)."""
    for reference, visible, mistakes in (
        (exchangemodel.ring_crossover_bytes, checks.CROSSOVER_CASES, known.crossover()),
        (exchangemodel.weak_scaling_speedup, checks.SPEEDUP_CASES, known.speedup()),
        (exchangemodel.exchange_share, checks.SHARE_CASES, known.share()),
    ):
        for what, model in mistakes:
            assert any(not close(model(*case), reference(*case)) for case in visible), what
    for what, model in known.first_slower():
        assert any(
            not known.same_count(model(*case), exchangemodel.first_slower(*case))
            for case in checks.FIRST_SLOWER_CASES
        ), what


def test_the_reports_apply_the_students_functions_to_the_given_numbers(solved):
    fitted = {
        (4, "ring"): (1e-6, 1e-9),
        (4, "recursive_doubling"): (1e-6, 1e-9),
        (2, "ring"): (1, 1),
    }
    said = scaling_report.crossover_lines(
        solved.ring_crossover_bytes, fitted, {"small": 4000, "large": 16000}
    )
    assert said == [
        "4 ranks: ring alpha 1.00 us, beta 1.000 ns/byte; recursive doubling alpha 1.00 us, beta "
        "1.000 ns/byte: the ring is faster above 8,000 bytes (0.00763 MiB)",
        "  small, 4,000 bytes (0.00381 MiB): recursive doubling",
        "  large, 16,000 bytes (0.0153 MiB): the ring",
    ]
    assert (
        "No fit of both" in scaling_report.crossover_lines(solved.ring_crossover_bytes, {}, {})[0]
    )
    setting = {
        "run": "multi_node-9",
        "ranks": 2,
        "compute": 0.5,
        "bytes": 4e8,
        "alpha": 5e-2,
        "beta": 1e-9,
        "source": "your notebook-04 benchmark",
    }
    said = scaling_report.slowdown_lines(solved.weak_scaling_speedup, solved.first_slower, setting)
    # 2 ranks exactly as fast as one (not slower); with a GPU 100 times faster, slower
    assert said[1].startswith("as profiled: 1 ranks 1, 2 ranks 1, 4 ranks 1.43, 8 ranks 2.11")
    assert said[1].endswith("no rank count slower than one")
    assert said[2].startswith("a GPU 100 times faster: ") and said[2].endswith("first slower: 2")
    said = scaling_report.share_lines(solved.exchange_share, setting)
    assert said[1] == "  as profiled: the exchange is 50.00% of the step"
    assert said[2] == "  a GPU 4 times faster: the exchange is 80.00% of the step"


@HANDLES
def test_a_text_is_no_rank_count(handle, solved):
    with pytest.raises(CheckFailed, match="returned str, not a number of ranks or None"):
        checks.slowdown(handle(solved.weak_scaling_speedup), handle(wrong.first_as_text))
