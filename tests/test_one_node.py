"""The Reedbush-H hands-on's optional experiment, MultiprocessParallelUpdater beside ChainerMN on
one node's GPUs (course.lessons.run_part.one_node): the runs it pairs, and what it says where there
are
none."""

from __future__ import annotations

from course.contracts import stages
from course.lessons.run_part import one_node
from tests.helpers import make_run


def cpu_run(folder, number: int) -> None:
    """A stage-3 run of job <number> on 2 CPU ranks: not one the table compares."""
    make_run(
        folder,
        stages.MULTI_NODE.name,
        number,
        60.0,
        workers=2,
        device_kind="cpu",
        communicator="naive",
    )


def test_stage_2_and_stage_3_runs_on_the_same_gpus_of_one_node_share_the_table(tmp_path):
    make_run(tmp_path, stages.MULTI_GPU.name, 1, 90.0, workers=2)
    make_run(tmp_path, stages.MULTI_NODE.name, 2, 95.0, workers=2, communicator="pure_nccl")
    make_run(
        tmp_path, stages.MULTI_NODE.name, 3, 170.0, workers=4, communicator="pure_nccl"
    )  # no stage-2 pair
    cpu_run(tmp_path, 4)
    table = one_node.rows(tmp_path)
    assert [(row["stage"], row["GPUs"], row["img/s"]) for row in table] == [
        (stages.MULTI_GPU.name, 2, 90.0),
        (stages.MULTI_NODE.name, 2, 95.0),
    ]
    assert table[0]["how"] == "MultiprocessParallelUpdater" and table[1]["how"].startswith(
        "ChainerMN, pure_nccl"
    )


def test_without_gpus_it_says_so_and_what_to_run_on_a_gpu_node(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # this machine as the kit sees it without GPUs
    cpu_run(tmp_path, 2)
    assert one_node.rows(tmp_path) == []
    said = one_node.why_empty(tmp_path)
    assert (
        said.startswith("This machine has no GPUs, and stage 2 has no run")
        and "select=1:mpiprocs=2" in said
    )
