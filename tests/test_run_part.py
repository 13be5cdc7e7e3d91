"""The check of the stage-3 job's run part (checks.run_part.run_part,
course/lessons/run_part/checks.py): notebook 07's run_lines passes the visible and hidden cases,
and each
planted mistake fails with the words that name it, both with the function itself (as in a
notebook) and with a Remote handle whose observation runs in a forked child (as under the grader).
The ranks' placement is read from Open MPI's own map of the launch line
(course.lessons.run_part.placement).
"""

from __future__ import annotations

import pytest

from course.errors import CourseError
from course.lessons.run_part import checks as run_part_checks
from course.lessons.run_part import placement
from course.notebook import checks
from course.notebook.checks import CheckFailed
from tests.helpers import check_cells, notebook_module, replaced_once
from tests.remote import HANDLES
from tests.solutions import solution_functions

# Open MPI's mpirun maps the launch lines (--do-not-launch: no rank starts), which the unit tier's
# guard refuses like any launcher: the module is in the fast tier, not the unit one.
pytestmark = pytest.mark.integration


def _run_lines(folder, *replacements: tuple[str, str]):
    """Notebook 03's run_lines, with each (old, new) of `replacements` made once."""
    source = solution_functions("multi_node")["run_lines"]
    for old, new in replacements:
        source = replaced_once(source, old, new)
    return notebook_module(folder, "multi_node", run_lines=source).run_lines


@HANDLES
def test_the_solution_passes_the_visible_and_hidden_cases(handle, tmp_path, capsys):
    cell = check_cells("multi_node")["check_run_lines"]
    exec(cell, {"checks": checks, "run_lines": handle(_run_lines(tmp_path))})
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 2 and all(line.startswith("OK: run_lines: ") for line in said), said
    assert "on 3 sites" in said[0] and "on 2 sites" in said[1]


MISTAKES = {
    "threads left at one": (
        'f"export OMP_NUM_THREADS={threads_per_rank}"',
        '"export OMP_NUM_THREADS=1"',
        "the ranks start with OMP_NUM_THREADS=1, and each rank runs 4 thread(s)",
    ),
    "no threads set": (
        'f"export OMP_NUM_THREADS={threads_per_rank}",',
        "",
        "the ranks start without OMP_NUM_THREADS",
    ),
    "no staging": (
        'f\'mkdir -p "{staged}"\',\n        f\'cp -r "$CHAINER_DATASET_ROOT/." "{staged}"\',\n'
        "        f'export CHAINER_DATASET_ROOT=\"{staged}\"',",
        "",
        "the ranks read the data set from the shared folder; nothing was copied to node-local "
        "storage ($TMPDIR)",
    ),
    "the copy not used": (
        "f'export CHAINER_DATASET_ROOT=\"{staged}\"',",
        "",
        "the lines copy the data set to $TMPDIR, but the ranks still read it from the shared",
    ),
    "copied into another layout": (
        '"$CHAINER_DATASET_ROOT/."',
        '"$CHAINER_DATASET_ROOT/pfnet/."',
        "but pfnet/chainer/cifar/cifar-10.npz is not there as it is in the shared folder",
    ),
    "the data set linked, not copied": (
        "cp -r",
        "cp -rs",
        "pfnet/chainer/cifar/cifar-10.npz under CHAINER_DATASET_ROOT links to the shared file "
        "rather than copying it to $TMPDIR",
    ),
    "the shared folder linked": (
        'f\'mkdir -p "{staged}"\',\n        f\'cp -r "$CHAINER_DATASET_ROOT/." "{staged}"\',',
        'f\'ln -s "$CHAINER_DATASET_ROOT" "{staged}"\',',
        "links to the shared file rather than copying it to $TMPDIR",
    ),
    "an option spelt with one dash": (
        "--map-by",
        "-map-by",
        "mpirun refused the line: An unrecognized option was included on the mpirun command line: "
        "Option: --map-by",
    ),
    "an option the check does not know": (
        "--bind-to core",
        "--bind-to core -q",
        "the launch line has the option -q, which this check does not know",
    ),
    "a rank file": (
        "--bind-to core",
        "--bind-to core --rankfile ranks.txt",
        "the launch line places the ranks by a rank file (--rankfile)",
    ),
    "ranks per node by -N, off their GPUs' sockets": (
        "--map-by {mapping}:pe=",
        "-N {ranks_per_node} --map-by :pe=",
        "rank 1 drives its node's GPU 1, attached to socket 1, and runs on socket(s) [0]",
    ),
    "the staged root not passed on": (
        " -x CHAINER_DATASET_ROOT",
        "",
        "the lines set CHAINER_DATASET_ROOT, but the launch line does not pass it on",
    ),
    "unbound ranks": (
        ":pe={threads_per_rank}",
        "",
        "rank 0 is bound to no core",
        ("--bind-to core", "--bind-to none"),
    ),
    "cores asked for, and another binding": (
        "--bind-to core",
        "--bind-to none",
        "mpirun refused the line: The PE=<list> mapping directive cannot be combined",
    ),
    "a rank's threads on one core": (
        ":pe={threads_per_rank}",
        "",
        "rank 0 runs 4 thread(s) on 1 core(s)",
    ),
    "ranks per node fixed": (
        'f"ppr:{ranks_per_node}:node"',
        '"ppr:2:node"',
        "on 2 nodes the line places [2, 2] rank(s) per node; the directives give each node 4",
    ),
    "GPU ranks off their sockets": (
        'f"ppr:{ranks_per_node // site.sockets_per_node}:package"',
        'f"ppr:{ranks_per_node}:node"',
        "rank 1 drives its node's GPU 1, attached to socket 1, and runs on socket(s) [0]",
    ),
    "ranks sharing cores": (
        ":pe={threads_per_rank}",
        "",
        "ranks 0 and 1 share core(s) [0, 1, 2, 3, 4, 5, 6, 7] of node1",
        ("--bind-to core", "--bind-to package"),
    ),
    "a string, not lines": (
        "    return [",
        "    return '\\n'.join([",
        "run_lines returned str, not a list of lines",
        ("    ]", "    ])"),
    ),
    "a command that fails": (
        "cp -r",
        "cp",
        "the lines stopped with exit status 1: cp: -r not specified; omitting directory",
    ),
    "a misspelt variable": (
        "$CHAINER_DATASET_ROOT/.",
        "$CHAINER_DATASETROOT/.",
        "the lines stopped with exit status 1: bash: line 3: CHAINER_DATASETROOT: unbound variable",
    ),
}


@HANDLES
@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_planted_mistake_fails_with_its_words(handle, mistake, tmp_path):
    old, new, words, *more = MISTAKES[mistake]
    function = _run_lines(tmp_path, (old, new), *more)
    with pytest.raises(CheckFailed) as failed:
        run_part_checks.run_part(handle(function))
    assert words in str(failed.value), str(failed.value)


def test_a_map_is_read_rank_by_rank():
    text = (
        "Data for node: node1\tState: 3\n  Local rank: 0\tNode rank: 0\tApp rank: 0\n"
        "  Binding: package[0][core:L0-3]\n  Local rank: 1\tNode rank: 1\tApp rank: 1\n"
        "  Binding: package[1][core:L18,L20]\nData for node: node2\n"
        "  Local rank: 0\tNode rank: 0\tApp rank: 2\n  Binding: UNBOUND\n"
    )
    assert placement.read_map(text) == [
        placement.Rank(0, "node1", 0, (0,), (0, 1, 2, 3)),
        placement.Rank(1, "node1", 1, (1,), (18, 20)),
        placement.Rank(2, "node2", 0, (), ()),
    ]
    # Only the options that decide the map reach the dry run: no MCA parameter, variable or command.
    assert placement.mapping_words(
        ["--hostfile", "h", "-H", "a,b", "--machinefile=m", "-x", "A", "--map-by", "ppr:2:node"]
        + ["--mca", "mca_base_component_path", "/x", "--report-bindings", "--bind-to=core"]
        + ["-n", "4", "python", "--map-by", "no"]
    ) == ["--map-by", "ppr:2:node", "--bind-to=core", "-n", "4"]


def test_the_map_options_of_open_mpi_5_reach_the_dry_run():
    # -N with pe= in --map-by: 2 ranks per node, 2 cores each (Open MPI 5 maps it so).
    line = ["-N", "2", "--map-by", ":pe=2", "--bind-to", "core", "-x", "A", "python", "-N", "1"]
    assert placement.mapping_words(line) == line[:6]
    ranks = placement.dry_run(line, nodes=2, slots=2, sockets=2, cores=8)
    assert [(r.node, r.cores) for r in ranks] == [
        ("node1", (0, 1)), ("node1", (2, 3)), ("node2", (0, 1)), ("node2", (2, 3))
    ]  # fmt: skip
    for refused, words in (
        (["--map-by", "rankfile:file=r.txt"], "by a rank file (--map-by rankfile:file=r.txt)"),
        (["--frobnicate=2"], "the option --frobnicate, which this check does not know"),
    ):
        with pytest.raises(CourseError) as raised:
            placement.mapping_words([*refused, "python"])
        assert words in raised.value.message, raised.value.message


@pytest.mark.parametrize(
    "job",
    [
        # sbatch's: mpirun would map onto cnode[1-2] through srun, which cannot reach slurmctld here
        {"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "cnode[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)"},
        # qsub's: an Open MPI built with PBS support would map onto the job's node file
        {"PBS_ENVIRONMENT": "PBS_BATCH", "PBS_JOBID": "3.pbs", "PBS_NODEFILE": "/etc/hostname"},
    ],
    ids=["slurm", "pbs"],
)
def test_the_dry_run_maps_the_simulated_nodes_inside_a_job(job, monkeypatch):
    """The stage-3 checks run inside a job too (test_two_nodes): the job's allocation is not the
    dry run's."""
    for name, value in job.items():
        monkeypatch.setenv(name, value)
    ranks = placement.dry_run(["-N", "2", "python"], nodes=2, slots=2, sockets=2, cores=8)
    assert [r.node for r in ranks] == ["node1", "node1", "node2", "node2"]
