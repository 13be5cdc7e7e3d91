"""The notebooks, executed for real: solved (with their jobs) and as released (with stubs)."""

from __future__ import annotations

import json
import shutil
import subprocess

import nbformat
import pytest

from course import evidence, paths
from course.contracts import results
from course.instructor import demo
from tests.helpers import PYTHON, ROOT, STAGE_3_CELLS, python, python_ok

pytestmark = pytest.mark.slow


def outputs(path, grade_id):
    notebook = nbformat.read(path, as_version=4)
    [cell] = [
        c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
    ]
    return cell.outputs


def errors(path) -> dict[str, str]:
    notebook = nbformat.read(path, as_version=4)
    return {
        cell.metadata["nbgrader"]["grade_id"]: output.ename
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    }


def test_solved_notebooks_run_top_to_bottom_on_cpu(student_run):
    assert errors(student_run / "01_single_gpu.ipynb") == {}
    assert errors(student_run / "03_multi_node.ipynb") == {}
    assert errors(student_run / "05_the_exchange.ipynb") == {}
    # notebook 05 sets its measurement and the profiled run's layers beside the student's models
    for cell, said in (
        ("server_report", "measured ratio"),
        ("overlap_report", "of the exchange"),
        ("half_report", "float16 saves"),
        ("crossover_report", "the ring is faster above"),
        ("slowdown_report", "a GPU 100 times faster: 1 ranks 1,"),
        ("share_report", "4 times the ranks: the exchange is"),
    ):
        text = "".join(
            o.get("text", "") for o in outputs(student_run / "05_the_exchange.ipynb", cell)
        )
        assert said in text, (cell, text)
    for name in ("04_step_time", "06_accuracy_at_scale", "07_run_part"):
        assert errors(student_run / f"{name}.ipynb") == {}, name
    assert errors(student_run / "08_beyond_data_parallel.ipynb") == {}  # its job ran on 2 CPU ranks
    # Stage 2's job needs two GPUs: its submit cell says so and Run All goes on to the report.
    assert errors(student_run / "02_multi_gpu.ipynb") == {}
    said = "".join(o.get("text", "") for o in outputs(student_run / "02_multi_gpu.ipynb", "submit"))
    assert said.startswith(
        "NOT SUBMITTED: this machine has no GPU and jobs/run_multi_gpu_training.sh asks for 2 "
        "GPU(s) per node"
    ), said
    assert outputs(student_run / "02_multi_gpu.ipynb", "report"), "the cells after it ran"


def test_every_check_says_what_it_verified(student_run):
    for name, check in (
        ("01_single_gpu.ipynb", "check_trainer"),
        ("02_multi_gpu.ipynb", "check_devices"),
        ("03_multi_node.ipynb", "check_scatter"),
        ("08_beyond_data_parallel.ipynb", "check_model_parallel_run"),
    ):
        text = "".join(o.get("text", "") for o in outputs(student_run / name, check))
        assert text.startswith("OK: "), (name, check, text)


def test_jobs_left_traced_results_and_the_notebooks_show_them(student_run):
    single = evidence.runs("single_gpu", student_run)
    multi = evidence.runs("multi_node", student_run)
    assert [run.traced for run in single] == [True]
    assert sorted(
        (
            run.workers,
            run.setting,
            run.lr_rule,
            run.record["batch_size"]["per_worker"],
            bool(run.record.get("profile")),
        )
        for run in multi
    ) == [
        (1, "naive", "warmup", 32, False),
        (1, "naive/ring", "warmup", 32, True),  # the step profile of 1 rank
        (
            2,
            "naive",
            "constant",
            16,
            False,
        ),  # strong scaling: stage 1's batch of 32 split over 2 ranks
        (2, "naive", "constant", 32, False),
        (2, "naive", "linear", 32, False),
        (2, "naive", "warmup", 32, False),
        (2, "naive/ring", "warmup", 32, False),
        (2, "naive/ring", "warmup", 32, True),
    ]  # and of 2 ranks
    assert all(run.traced for run in multi), [run.problems for run in multi]
    for run in single + multi:
        assert run.record["complete"] and run.log.name.startswith(
            ("run_single_gpu", "run_multi_node")
        )
        assert "\x1b[" not in run.log.read_text(), "job logs hold no terminal codes"
    for name in ("01_single_gpu.ipynb", "03_multi_node.ipynb", "06_accuracy_at_scale.ipynb"):
        kinds = {key for o in outputs(student_run / name, "report") for key in o.get("data", {})}
        assert {"text/html", "image/png"} <= kinds, f"{name} shows its table and plot"


def test_the_job_ran_exactly_the_script_the_notebook_wrote(student_run):
    [run] = evidence.runs("single_gpu", student_run)
    script = student_run / "train_cifar_single.py"
    assert run.notes == [] and run.record["script"]["name"] == script.name
    text = script.read_text()
    for function in (
        "def make_iterators",
        "def make_model_and_optimizer",
        "def build_trainer",
        "def main",
    ):
        assert function in text
    assert "BEGIN SOLUTION" not in text


def test_job_scripts_run_from_the_command_line_without_a_scheduler(
    student_run, quick_env, tmp_path
):
    folder = tmp_path / paths.ASSIGNMENT
    shutil.copytree(student_run, folder, ignore=shutil.ignore_patterns("runs", "*.o*"))
    python_ok(
        "-m", "course", "submit", "jobs/run_single_gpu_training.sh", cwd=folder, env=quick_env
    )
    [log] = folder.glob("run_single_gpu_training.sh.o*")
    assert "ended with exit status 0" in log.read_text()
    [path] = results.find(folder, "single_gpu")
    assert evidence.trace(path, folder).traced
    run = python(
        "-m", "course", "submit", "jobs/run_multi_gpu_training.sh", cwd=folder, env=quick_env
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "asks for 2 GPU(s) per node" in run.stderr


def test_released_notebooks_fail_only_at_their_stubs(quick_env, tmp_path):
    folder = tmp_path / paths.ASSIGNMENT
    shutil.copytree(ROOT / "notebooks" / paths.ASSIGNMENT, folder)
    expected = {
        "01_single_gpu.ipynb": {
            "check_iterators",
            "check_model_and_optimizer",
            "check_trainer",
            "check_snapshots",
            "submit",
            "check_predict_run",
        },
        "02_multi_gpu.ipynb": {
            "check_train_iterators",
            "check_devices",
            "check_learning_rate",
            "check_trainer",
            "submit",
            "check_predict_run",
        },
        "03_multi_node.ipynb": {
            *(set(STAGE_3_CELLS) - {"check_resource_request", "check_run_lines"}),
            "submit",
            "check_predict_comparison",
        },
        "04_step_time.ipynb": {
            "profile_submit",
            "check_allreduce_time",
            "check_fit",
            "check_prediction",
            "check_exchange_ratio",
            "check_implied_exchange",
            "check_step_shares",
        },
        # its measurement shows the student's model beside it: the stub raises there too
        "05_the_exchange.ipynb": {
            "check_exchange_traffic",
            "check_parameter_server_time",
            "server_report",
            "check_ring_crossover",
            "crossover_report",
            "check_overlap",
            "check_half_precision",
            "check_slowdown",
            "check_exchange_share",
        },
        "06_accuracy_at_scale.ipynb": {
            "check_run_plan",
            "check_large_batch_rates",
            "check_lars_local_rate",
        },
        "07_run_part.ipynb": {"check_resource_request", "check_run_lines", "use_request"},
        "08_beyond_data_parallel.ipynb": {
            "check_activation_bytes",
            "check_gradient_bytes",
            "check_idle_fraction",
            "check_model_parallel_run",
        },
    }
    for name, cells in expected.items():
        demo.run_notebook(folder / name, env=quick_env)
        found = errors(folder / name)
        assert set(found) == cells, name
        assert set(found.values()) == {"NotImplementedError"}, (name, found)
    # no training job ran; the allreduce benchmark and the model-parallel job need no student code,
    # and ran (notebook 04's benchmark jobs into runs/exchange-*)
    assert {path.name.split("-")[0] for path in (folder / "runs").iterdir()} == {
        "allreduce",
        "exchange",
        "model_parallel",
    }


def test_submit_does_nothing_while_nbgrader_runs_the_notebook(student_run, quick_env, tmp_path):
    folder = tmp_path / paths.ASSIGNMENT
    shutil.copytree(student_run, folder)
    before = sorted(p.name for p in folder.iterdir())
    probe = (
        "import course; job = course.submit('jobs/run_single_gpu_training.sh'); "
        "print(json.dumps(job is None))"
    )
    out = subprocess.run(
        [PYTHON, "-c", "import json; " + probe],
        cwd=folder,
        capture_output=True,
        text=True,
        env={**quick_env, "NBGRADER_EXECUTION": "autograde"},
        check=True,
    ).stdout
    assert json.loads(out.splitlines()[-1]) is True
    assert "is not submitted" in out
    assert sorted(p.name for p in folder.iterdir()) == before
