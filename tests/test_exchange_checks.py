"""Notebook 04's checks (course.lessons.exchange.exchange): the solutions pass them and each planted
mistake fails with the words that name it, with the functions themselves (as in a notebook) and
with Remote handles observed in a forked child (as under the grader); a function that hands the
work to the kit's own model fails. The kit's models against hand-worked cases."""

from __future__ import annotations

import pytest

from course.lessons.exchange import exchange as checks
from course.lessons.exchange import exchangemodel
from course.notebook.checks import CheckFailed
from tests import exchange_students as students
from tests.remote import HANDLES, RemoteRaised


@pytest.fixture(scope="module", autouse=True)
def solved(tmp_path_factory):
    return students.load(tmp_path_factory.mktemp("solved"))


# --- the kit's models, by hand -------------------------------------------------------------------


def test_the_kits_models_on_hand_worked_cases():
    # 4 ranks, 1 MB: the server's link 3 x 1 MB in and 3 x 1 MB out; a ring link 2 x 3 chunks of
    # 1/4 MB out and as many in
    assert exchangemodel.busiest_link_bytes("parameter_server", 4, 1e6) == 6e6
    assert exchangemodel.busiest_link_bytes("ring", 4, 1e6) == 3e6
    assert exchangemodel.busiest_link_bytes("ring", 1, 1e6) == 0
    assert exchangemodel.parameter_server_seconds(4, 1e6, 1e-6, 1e-9) == pytest.approx(6 * 1.001e-3)
    assert exchangemodel.parameter_server_seconds(1, 1e6, 1e-6, 1e-9) == 0
    # backward 1, 1, 1 and exchanges 2, 2, 2: ready at 1, 2, 3; the link ends at 3, 5, 7
    assert exchangemodel.overlapped_seconds([1, 1, 1], [2, 2, 2]) == 7
    # exchanges shorter than the next layer's backward: only the last one's shows
    assert exchangemodel.overlapped_seconds([1, 1, 1], [0.5, 0.5, 0.5]) == 3.5
    # 1e6 parameters on 4 ranks: 2 MB fewer, of which a ring link sends 3/2 x 2 MB x 1 ns
    assert exchangemodel.half_precision_saving(4, 10**6, 1e-6, 1e-9) == pytest.approx(3e-3)
    with pytest.raises(ValueError, match="one exchange time per layer"):
        exchangemodel.overlapped_seconds([1, 2], [1])


# --- the checks ---------------------------------------------------------------------------------


@HANDLES
def test_the_solutions_pass_every_check(handle, solved, capsys):
    checks.traffic(handle(solved.exchange_traffic))
    checks.parameter_server(handle(solved.parameter_server_time))
    checks.parameter_server(handle(students.server_numpy_float), cases=[(3, 100, 1e-6, 1e-9)])
    checks.overlap(handle(solved.overlapped_backward))
    checks.half_precision(handle(solved.half_precision_saving))
    said = capsys.readouterr().out
    assert said.count("OK: ") == 5, said
    assert "both patterns match the kit's model in 7 cases" in said


@HANDLES
@pytest.mark.parametrize(
    "check, wrong, said",
    [
        (
            checks.traffic,
            students.traffic_one_way,
            "your count for the server covers one direction",
        ),
        (
            checks.traffic,
            students.traffic_ring_sent_only,
            "your count for a ring rank covers one direction",
        ),
        (checks.traffic, students.traffic_server_counts_itself, "your count is not 0 on 1 rank"),
        (
            checks.traffic,
            students.traffic_ring_whole_vector,
            "your ring count keeps growing with the ranks",
        ),
        (
            checks.parameter_server,
            students.server_one_way,
            "one direction of the server's link only",
        ),
        (checks.parameter_server, students.server_counts_itself, "your time is not 0 on 1 rank"),
        (
            checks.parameter_server,
            students.server_parallel_links,
            "your time is the same on 2 ranks as on 64",
        ),
        (checks.parameter_server, students.server_swapped, "the units of your answer are off"),
        (checks.parameter_server, students.server_is_ring, "grows with the ranks far more slowly"),
        (checks.overlap, students.overlap_none, "as long as with no overlap at all"),
        (checks.overlap, students.overlap_ideal, "shorter than the timeline allows"),
        (
            checks.overlap,
            students.overlap_per_layer_max,
            "your layers wait for each other's exchanges",
        ),
        (checks.overlap, students.overlap_many_links, "your exchanges overlap each other"),
        (
            checks.overlap,
            students.overlap_reversed,
            "which layer does the backward pass reach first",
        ),
        (checks.half_precision, students.half_of_everything, "your saving grows with alpha"),
        (
            checks.half_precision,
            students.half_parameters_as_bytes,
            "too small for the parameters given",
        ),
        (
            checks.half_precision,
            students.half_whole_transfer,
            "as large as sending no bytes at all",
        ),
        (checks.half_precision, students.half_bits, "larger than the bytes allow"),
        (checks.half_precision, students.half_swapped, "the units of your answer are off"),
    ],
)
def test_each_planted_mistake_fails_its_check_naming_it(handle, check, wrong, said):
    with pytest.raises(CheckFailed) as failed:
        check(handle(wrong))
    message = str(failed.value)
    assert "which is not the model's" in message and said in message, message


@HANDLES
def test_a_text_is_no_number(handle):
    with pytest.raises(CheckFailed, match="returned str, not a number of bytes"):
        checks.traffic(handle(students.traffic_text))


@HANDLES
def test_the_kits_own_model_is_closed_while_a_function_is_checked(handle):
    raised = (RuntimeError, RemoteRaised)
    with pytest.raises(raised, match=r"course\.lessons\.exchange\.exchangemodel\) is closed"):
        checks.parameter_server(handle(students.server_from_the_kit))
    with pytest.raises(raised, match=r"course\.lessons\.exchange\.exchangemodel\) is closed"):
        checks.overlap(handle(students.overlap_from_the_kit))
    # restored after the check
    assert exchangemodel.overlapped_seconds([1.0], [1.0]) == 2.0


def test_a_check_fails_on_the_right_case_for_each_visible_mistake():
    """The visible cases alone tell every planted mistake from the model (the drawn ones could
    happen to as well): each mistake differs from the model on some visible case."""
    cases = {
        "traffic": (exchangemodel.busiest_link_bytes, checks.TRAFFIC_CASES),
        "server": (exchangemodel.parameter_server_seconds, checks.PARAMETER_SERVER_CASES),
        "overlap": (exchangemodel.overlapped_seconds, checks.OVERLAP_CASES),
        "half": (exchangemodel.half_precision_saving, checks.HALF_PRECISION_CASES),
    }
    from course.lessons.exchange import exchange_mistakes as known
    from course.lessons.step_time.allreduce_mistakes import close

    for name, mistakes in (
        ("traffic", known.traffic()),
        ("server", known.parameter_server()),
        ("overlap", known.overlap()),
        ("half", known.half_precision()),
    ):
        reference, visible = cases[name]
        for what, model in mistakes:
            assert any(not close(model(*case), reference(*case)) for case in visible), (
                f"{name}: {what}"
            )
