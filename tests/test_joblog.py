"""Every line the kit writes into a job log (course.contracts.joblog), written and read back by its
own parser."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime

import pytest

from course.cluster import diagnosis
from course.contracts import jobend, joblog

SHA = "0123456789abcdef" * 4

AT = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def header(**changes) -> joblog.RunHeader:
    fields = dict(
        stage="multi_node",
        job_id="15.pbs-admin",
        scheduler="pbs",
        workers=4,
        hosts=["a088", "a087", "a087", "a088"],
        devices=["@cupy:0", "@cupy:1", "@cupy:0", "@cupy:1"],
        batch_per_worker=32,
        learning_rate=0.2,
        seed=0,
        communicator="pure_nccl",
    )
    return joblog.RunHeader(**{**fields, **changes})


def test_run_header_round_trip():
    line = header().format()
    assert line.startswith(
        "course: run multi_node | job 15.pbs-admin (pbs) | 4 worker(s) on a087, a088: "
    )
    assert "batch 32 per worker, 128 total | lr 0.2 | seed 0 | communicator pure_nccl" in line
    assert joblog.run_headers(line) == [
        {
            "stage": "multi_node",
            "job": "15.pbs-admin",
            "scheduler": "pbs",
            "workers": 4,
            "devices": ["@cupy:0", "@cupy:1", "@cupy:0", "@cupy:1"],
            "gpu_model": None,
        }
    ]


def test_run_header_names_the_gpu_model():
    line = header(gpu_model="Tesla P100-PCIE-16GB").format()
    assert (
        "4 worker(s) on a087, a088: @cupy:0, @cupy:1, @cupy:0, @cupy:1 (Tesla P100-PCIE-16GB) | "
        "batch 32" in line
    )
    [read] = joblog.run_headers(line)
    assert read["devices"] == ["@cupy:0", "@cupy:1", "@cupy:0", "@cupy:1"]
    assert read["gpu_model"] == "Tesla P100-PCIE-16GB"


def test_run_header_without_a_job_or_learning_rate():
    line = header(
        stage="single_gpu",
        job_id=None,
        scheduler=None,
        workers=1,
        hosts=["laptop"],
        devices=["@numpy"],
        learning_rate=None,
        communicator=None,
    ).format()
    assert "| no job |" in line and "lr n/a" in line
    assert joblog.run_headers(line) == [
        {
            "stage": "single_gpu",
            "job": None,
            "scheduler": None,
            "workers": 1,
            "devices": ["@numpy"],
            "gpu_model": None,
        }
    ]


def test_every_run_header_of_a_log_is_read_with_the_allreduce_setting():
    first = header(
        workers=1,
        hosts=["n1"],
        devices=["@numpy"],
        communicator="naive",
        scheduler="local",
        job_id="3.local",
    ).format()
    second = header(
        workers=2,
        hosts=["n1", "n1"],
        devices=["@numpy"] * 2,
        communicator="naive",
        allreduce="ring",
        scheduler="local",
        job_id="4.local",
    ).format()
    assert second.endswith("| communicator naive (ring allreduce)")
    log = f"mpiexec -n 1 ...\n{first}\nepoch  main/loss\n{second}\n"
    assert [(h["job"], h["workers"]) for h in joblog.run_headers(log)] == [
        ("3.local", 1),
        ("4.local", 2),
    ]
    assert joblog.run_headers("course: run single_gpu was not started\n") == []


@pytest.mark.parametrize(
    "template,ranks",
    [
        ("mpiexec -n 4 --hostfile /tmp/h --bind-to core", 4),
        ("mpirun --mca btl_openib_want_cuda_gdr 1 -np 4 -machinefile /tmp/h -npernode 2", 4),
        ("srun --ntasks=4 --cpus-per-task 1 -c 1", 4),
        (
            "mpiexec --hostfile /tmp/h",
            None,
        ),  # Open MPI then starts one rank per slot of the host file
    ],
)
def test_launch_lines_round_trip_with_the_launcher_s_rank_count(template, ranks):
    slots = joblog.launch_line("15.pbs-admin", "pbs", [("a087", 2), ("a088", 2)])
    assert (
        slots == "course launch: job 15.pbs-admin (pbs); 4 slot(s) on 2 node(s): a087 x2, a088 x2"
    )
    command = joblog.launch_command_line([*template.split(), "python", "train.py", "-n", "9"])
    warning = (
        "course launch: warning: 2 ranks per node but this node has 1 GPU(s); "
        "ranks past the last GPU cannot"
    )
    assert joblog.launches(f"{slots}\n{warning}\n{command}\ncourse: run ...\n") == [
        {
            "job": "15.pbs-admin",
            "scheduler": "pbs",
            "slots": 4,
            "nodes": 2,
            "launcher": template.split()[0],
            "command_ranks": ranks,
        }
    ]


def test_a_log_of_an_older_kit_reads_as_the_same_launch():
    log = (
        "course launch: job 2.local (local); 1 slot(s) on 1 node(s): localhost x1\n"
        "course launch: /v/bin/mpiexec -n 1 --hostfile /tmp/course-launch-8ao2eqw5/hostfile "
        "--bind-to core python "
        "train_cifar_multi_node.py --model vgg\n"
    )
    assert joblog.launches(log) == [
        {
            "job": "2.local",
            "scheduler": "local",
            "slots": 1,
            "nodes": 1,
            "launcher": "/v/bin/mpiexec",
            "command_ranks": 1,
        }
    ]
    assert (
        joblog.launches(
            "course launch: nothing to launch\n  -> python -m course launch -- python train.py\n"
        )
        == []
    )


def test_a_rank_of_another_mpis_launcher_names_both_launchers_in_its_error():
    said = joblog.wrong_launcher("/usr/bin/mpiexec", "/opt/my env/bin/mpiexec", 4, 1)
    assert said.startswith("wrong MPI launcher: /usr/bin/mpiexec; the kit needs /opt/my env/bin/")
    log = f"Traceback ...\ncourse.errors.JobError: {said}\n  -> the site profile's ...\n"
    [m] = joblog.WRONG_LAUNCHER.finditer(log)
    assert m.groupdict() == {
        "ran": "/usr/bin/mpiexec",
        "needed": "/opt/my env/bin/mpiexec",
        "launched": "4",
        "size": "1",
    }


def test_rank_lines_round_trip_in_a_log_with_other_lines():
    places = [
        joblog.RankPlace(rank, 4, host, rank % 2, rank // 2, "@numpy", 256)
        for rank, host in enumerate(["cnode1", "cnode1", "cnode2", "cnode2"])
    ]
    assert places[2].format() == (
        "course: rank 2 of 4 on cnode2: intra_rank 0, inter_rank 1, device @numpy, "
        "256 training examples"
    )
    log = (
        "course: run multi_node | ...\n"
        + "\n".join(p.format() for p in places)
        + "\nepoch  main/loss\n"
    )
    assert joblog.rank_places(log) == places


def test_throughput_line_round_trip():
    line = joblog.throughput_line(51.1234, counted=120, warmup=5, excluded=3)
    assert line == (
        "Throughput: 51.12 [images/sec.] over 120 steady iterations "
        "(warm-up 5, 3 left out after epoch ends): every counted image over their total time. "
        "The per-epoch throughput column is the mean of each step's rate, which slow steps pull "
        "down less, so it reads higher"
    )
    assert joblog.throughputs(f"epoch 4\n{line}\ncourse: results x\n") == [51.12]


def test_a_run_that_measured_nothing_shows_no_throughput_figure():
    assert joblog.throughputs(joblog.throughput_not_measured(5)) == []


@pytest.mark.parametrize("recorded", [123.455, 123.445, 0.125, 2.675, 99.995, 1234567.005, 51.1])
def test_the_logged_figure_is_the_same_throughput_at_the_rounding_edge(recorded):
    [logged] = joblog.throughputs(joblog.throughput_line(recorded, 10, 5, 0))
    assert joblog.same_throughput(logged, recorded)


@pytest.mark.parametrize(
    "logged,recorded",
    [(123.46, 123.455), (123.44, 123.455), (123.46, 123.45), (123.44, 123.45), (51.13, 51.12)],
)
def test_a_figure_one_hundredth_off_is_not_the_same_throughput(logged, recorded):
    assert not joblog.same_throughput(logged, recorded)


def test_results_line_round_trip_relative_and_absolute():
    log = "\n".join(
        [
            joblog.results_line("runs/single_gpu-12.local/results.json", SHA),
            joblog.results_line("/home/s/course/runs/multi_node-13.local/results.json", SHA[::-1]),
        ]
    )
    assert joblog.results_digests(log, "single_gpu-12.local", "results.json") == [SHA]
    assert joblog.results_digests(log, "multi_node-13.local", "results.json") == [SHA[::-1]]


def test_results_digests_name_only_that_run_folder():
    log = joblog.results_line("runs/single_gpu-12.local/results.json", SHA)
    assert joblog.results_digests(log, "single_gpu-2.local", "results.json") == []
    assert joblog.results_digests(log, "single_gpu-1.local", "results.json") == []
    short = joblog.results_line("runs/single_gpu-12.local/results.json", SHA[:40])
    assert joblog.results_digests(short, "single_gpu-12.local", "results.json") == []


@pytest.mark.parametrize("variable", ["PBS_JOBID", "SLURM_JOB_ID"])
def test_the_end_trap_prints_the_line_exit_status_reads(variable):
    env = {k: v for k, v in os.environ.items() if k not in ("PBS_JOBID", "SLURM_JOB_ID")}
    run = subprocess.run(
        ["bash", "-c", f"{variable}=12.x; {jobend.END_TRAP}; echo training; exit 3"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 3
    assert run.stdout.splitlines() == [
        "training",
        jobend.end_line("12.x", 3, jobend.ended_at(run.stdout)),
    ]
    assert jobend.exit_status(run.stdout) == 3


def test_exit_status_is_the_last_end_line_and_none_without_one():
    log = f"{jobend.end_line('1.x', 0, AT)}\nrerun\n{jobend.end_line('1.x', 137, AT)}\n"
    assert jobend.exit_status(log) == 137
    assert jobend.exit_status("Throughput: 1.00 [images/sec.]\n") is None


SLURM_TIME_LIMIT = (
    "slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***"
)


@pytest.mark.parametrize(
    "notice,walltime",
    [
        (jobend.walltime_notice("00:10:00"), True),
        (SLURM_TIME_LIMIT, True),
        (
            "slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2024-05-01T10:00:00 ***",
            False,
        ),  # scancel
        ("=>> PBS: job killed: mem 8gb exceeded limit 4gb", False),
    ],
)
def test_scheduler_kill_notices(notice, walltime):
    log = f"epoch 1\n{notice}\n{jobend.end_line('7', 143, AT)}\n"
    assert jobend.killed_by_scheduler(log)
    assert jobend.walltime_exceeded(log) is walltime


@pytest.mark.parametrize("notice", [jobend.walltime_notice("00:10:00"), SLURM_TIME_LIMIT])
def test_a_walltime_kill_leads_with_resubmitting_to_resume_unless_nothing_snapshots(notice):
    log = f"epoch 1\n{notice}\n{jobend.end_line('7', 143, AT)}\n"
    said = diagnosis.explain(log, "7", local=False)
    assert said.startswith("the walltime ran out: submit the same job script again, unchanged"), (
        said
    )
    assert "resumes from its last snapshot" in said and "train fewer epochs" in said
    said = diagnosis.explain(f"{joblog.NO_SNAPSHOTS}\n{log}", "7", local=False)
    assert said.startswith("the walltime ran out, and this trainer takes no snapshots"), said
    assert "submitting it again starts over" in said


def test_a_log_that_only_mentions_a_walltime_is_not_a_kill():
    log = "course: warning: the walltime is short\nThroughput: 1.00 [images/sec.]\n"
    assert not jobend.killed_by_scheduler(log) and not jobend.walltime_exceeded(log)
    assert (
        jobend.walltime_notice("01:00:00")
        == "=>> PBS: job killed: walltime 01:00:00 exceeded limit 01:00:00"
    )


def test_find_picks_the_named_log_of_that_job(tmp_path):
    for name in (
        "a_short.o12",
        "run_single_gpu_training.sh.o12",
        "run_single_gpu_training.sh.o123",
        "run_single_gpu_training.sh.e12",
    ):
        (tmp_path / name).write_text("")
    found = joblog.find(tmp_path, "12.pbs-admin", "run_single_gpu_training.sh")
    assert found == tmp_path / "run_single_gpu_training.sh.o12"
    assert (
        joblog.find(tmp_path, "123.local", "run_single_gpu_training.sh").name
        == "run_single_gpu_training.sh.o123"
    )


def test_find_falls_back_to_any_log_of_that_job_number(tmp_path):
    (tmp_path / "run_multi_nod.o9").write_text("")  # a scheduler that shortens long job names
    (tmp_path / "other.o90").write_text("")
    assert (
        joblog.find(tmp_path, "9.local", "run_multi_node_training.sh")
        == tmp_path / "run_multi_nod.o9"
    )
    assert joblog.find(tmp_path, "9.local") == tmp_path / "run_multi_nod.o9"
    assert joblog.find(tmp_path, "8.local", "run_multi_node_training.sh") is None
    assert (
        joblog.log_name("run_multi_node_training.sh", joblog.job_number("9.local"))
        == "run_multi_node_training.sh.o9"
    )


def test_clean_strips_print_report_escapes():
    assert joblog.clean("\x1b[Jepoch       main/loss") == "epoch       main/loss"
    assert joblog.clean("\x1b[1;31mred\x1b[0m plain") == "red plain"
    assert joblog.clean("Throughput: 1.00 [images/sec.]") == "Throughput: 1.00 [images/sec.]"


def test_the_staged_data_set_line_is_read_back(tmp_path):
    line = joblog.staged_line("synthetic", tmp_path / "a b" / "synthetic.npz", 12345, 0.25)
    text = f"{line}\n{joblog.launch_line('7.local', 'pbs', [('n1', 2)])}\n"
    assert joblog.staged(text) == [
        {
            "name": "synthetic",
            "path": str(tmp_path / "a b" / "synthetic.npz"),
            "bytes": 12345,
            "seconds": 0.25,
        }
    ]
    assert joblog.staged("course launch: data set x staged somewhere\n") == []
