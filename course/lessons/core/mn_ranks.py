"""Stage 3's functions run on MPI ranks: the request to course.lessons.core.mn_probe, its
launch under `mpiexec`, and its replies read back and validated; the checks (multi_node) judge
what the ranks say.

All the stage-3 functions of a notebook run once per layout: those of the namespace of the
function a check is given, or under the grader, where the check gets a `Remote` handle, the
sources it carries (ones not written yet act as stubs). This process launches the ranks and reads
their facts; it never runs the student's code itself. The communicator and optimizer parts work on
arrays drawn from a seed this process chooses per run, so that the ranks' facts cannot be made up
beforehand: the checks compute what they should be (mn_reference).

The facts are cached, by the functions' sources and the nodes, until a source changes: the other
checks of the notebook then cost nothing. The cache is this process's own. The grader, which runs
each test cell in a process of its own, carries the entries from one test of a submission to the
next itself: `cached()` gives a copy of them (JSON data: {key: {"seed": int, "ranks": [...]}}),
`remember(entries)` takes them back in another process.

The ranks run on simulated nodes (a Layout), so that comm.rank and comm.intra_rank differ as on a
cluster. Inside a job whose nodes match a layout (e.g. a 2-node job for the visible checks) they
run on those nodes instead, with their real host names.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from course import i18n
from course.cluster import hosts as job_hosts
from course.cluster import mpi
from course.contracts import stages
from course.errors import JobError
from course.i18n import _
from course.lessons.core.mn_settings import HOSTS
from course.notebook import scripts
from course.notebook.checks.observe import Remote
from course.notebook.checks.verdict import fail

TIMEOUT = 120  # seconds for the run of all ranks; a rank stuck in a collective is the usual cause
# this process's cache: {key of the functions and nodes: {"seed": the run's, "ranks": facts}}
_facts: dict[str, dict] = {}


def cached() -> dict[str, dict]:
    """A copy of this process's cached probe runs, for `remember` in another process."""
    return json.loads(json.dumps(_facts))


def remember(entries: dict[str, dict]) -> None:
    """Take in probe runs that `cached` gave in another process of the same submission's grading;
    ValueError if they are not such entries."""
    for key, entry in entries.items():
        if not (
            isinstance(key, str)
            and isinstance(entry, dict)
            and isinstance(entry.get("seed"), int)
            and isinstance(entry.get("ranks"), list)
        ):
            raise ValueError(f"not a cached probe run: {key!r}")
    _facts.update(json.loads(json.dumps(entries)))


@dataclass(frozen=True)
class Layout:
    """Ranks on simulated nodes, placed as mpiexec places them: --map-by slot fills a node before
    the next, --map-by node deals the ranks round-robin over the nodes."""

    nodes: int = 2
    ranks_per_node: int = 2
    map_by: str = "slot"

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.ranks_per_node < 1 or self.map_by not in ("slot", "node"):
            raise ValueError(f"no such layout: {self}")

    @property
    def size(self) -> int:
        return self.nodes * self.ranks_per_node

    def node_of(self) -> list[int]:
        """The node of each rank, by rank."""
        return [
            rank // self.ranks_per_node if self.map_by == "slot" else rank % self.nodes
            for rank in range(self.size)
        ]

    def intra_ranks(self) -> list[int]:
        """Each rank's number within its node, by rank: what comm.intra_rank must say."""
        nodes = self.node_of()
        return [nodes[:rank].count(node) for rank, node in enumerate(nodes)]

    def __str__(self) -> str:
        """The layout in words, for the checks' messages."""
        real = job_nodes(self)
        if real and self.map_by == "slot":
            words = _(
                "{size} ranks on this job's nodes {hosts}, {per_node} each: the nodes of ranks "
                "0-{last} are {nodes}"
            )
        elif real:
            words = _(
                "{size} ranks on this job's nodes {hosts}, {per_node} each, placed round-robin "
                "(mpiexec --map-by node): the nodes of ranks 0-{last} are {nodes}"
            )
        elif self.map_by == "slot":
            words = _(
                "{size} ranks on {count} simulated nodes of {per_node}: the nodes of ranks "
                "0-{last} are {nodes}"
            )
        else:
            words = _(
                "{size} ranks on {count} simulated nodes of {per_node}, placed round-robin "
                "(mpiexec --map-by node): the nodes of ranks 0-{last} are {nodes}"
            )
        return words.format(
            size=self.size,
            hosts=i18n.listed(real or []),
            count=self.nodes,
            per_node=self.ranks_per_node,
            last=self.size - 1,
            nodes=self.node_of(),
        )


def job_nodes(layout: Layout) -> list[str] | None:
    """The nodes of the job this runs in, where it has the layout's node count (2 or more) with a
    slot for each of its ranks on every node: the probe's ranks then run there, as the training's
    would, with their real host names. None elsewhere (no job, one node, another shape): the nodes
    are simulated."""
    job = job_hosts.detect()
    if job.scheduler == "none" or layout.nodes < 2 or job.nodes != layout.nodes:
        return None
    if any(slots < layout.ranks_per_node for _, slots in job.hosts):
        return None
    return [host for host, _ in job.hosts]


def part_facts(function: Any, part: str, layout: Layout) -> tuple[int, list[dict]]:
    """The seed of the run and each rank's facts of one part of the probe (mn_probe's name for
    it), by rank; CheckFailed with the student's error if it raised there, NotImplementedError if
    it is still a stub. `function` is a function of the notebook or a Remote handle."""
    __tracebackhide__ = True
    facts = probe(function, layout)
    for rank, found in enumerate(facts["ranks"]):
        errors = found["errors"]
        if "module" in errors:
            fail(_("the functions could not be loaded: {error}").format(error=errors["module"]))
        if part in errors:
            if errors[part].startswith("NotImplementedError"):
                where = errors[part].split("(line", 1)[-1].rstrip(")")
                raise NotImplementedError(
                    # TRANSLATORS: {where} is the line's number and code, after a space
                    _(
                        "the PUT YOUR CODE HERE stub is still there (line{where}): write the "
                        "function, then run this check again"
                    ).format(where=where)
                )
            fail(
                _("on rank {rank}: {error}").format(rank=rank, error=errors[part]),
                _("the line named above raised it while {size} ranks ran your functions").format(
                    size=layout.size
                ),
            )
    return facts["seed"], [found[part] for found in facts["ranks"]]


def module_text(function: Any) -> str:
    """The module of the stage-3 functions the ranks load: from a Remote handle's sources, or from
    the namespace of a notebook's function."""
    if isinstance(function, Remote):
        sources = function.sources
        return scripts.script_text(
            "multi_node", {n: sources[n] for n in stages.MULTI_NODE.functions if n in sources}
        )
    namespace = function.__globals__
    return scripts.assemble_script(
        "multi_node", {name: namespace.get(name) for name in stages.MULTI_NODE.functions}
    )


def probe(function: Any, layout: Layout = Layout()) -> dict:
    """{"seed": the run's seed, "ranks": each rank's facts} of the stage-3 functions of
    `function`'s notebook, run on `layout` (cached)."""
    __tracebackhide__ = True
    text = module_text(function)
    nodes = job_nodes(layout)
    hosts = ",".join(f"node{node}" for node in layout.node_of())
    key = hashlib.sha256(f"{nodes or hosts}\n{text}".encode()).hexdigest()
    if key not in _facts:
        seed = random.SystemRandom().randrange(2**31)
        reply = _reply(_launch(text, layout, nodes, hosts, seed), layout)
        _check_placement(reply, layout, nodes)
        _facts[key] = {"seed": seed, "ranks": reply["ranks"]}
    return _facts[key]


def _command(mpiexec: str, layout: Layout, nodes: list[str] | None, folder: Path) -> list[str]:
    """The probe's launch: on the job's real nodes (a host file, ranks placed by the layout), else
    all on this machine."""
    if nodes is None:
        return [mpiexec, "-n", str(layout.size), "--oversubscribe"]
    hostfile = folder / "hostfile"
    hostfile.write_text("".join(f"{node} slots={layout.ranks_per_node}\n" for node in nodes))
    return [
        mpiexec,
        "-n",
        str(layout.size),
        "--hostfile",
        str(hostfile),
        "--map-by",
        layout.map_by,
        "--bind-to",
        "none",
    ]


def _launch(
    text: str, layout: Layout, nodes: list[str] | None, hosts: str, seed: int
) -> subprocess.CompletedProcess[str]:
    """Run the probe on the module `text` over the layout's ranks: on `nodes`, else on this
    machine with each rank named after its simulated node (`hosts`)."""
    __tracebackhide__ = True
    try:
        mpiexec = mpi.mpiexec()
    except JobError as e:
        fail(
            # TRANSLATORS: {problem} is why no MPI launcher can run here
            _("{problem}, so the {size}-rank check cannot run").format(
                problem=e.message, size=layout.size
            ),
            e.hint,
        )
    env = mpi.local_run_environment(
        CHAINERMN_FORCE_ABORT_ON_EXCEPTION="", **({} if nodes else {HOSTS: hosts})
    )
    if nodes:
        env.pop(HOSTS, None)
    # Inside a job on several nodes mpiexec may start ranks on any of them: the module goes in a
    # folder every node reads, the working folder (as a job's is), not in this node's /tmp.
    spread = nodes is not None or job_hosts.detect().nodes > 1
    with tempfile.TemporaryDirectory(
        prefix="course-probe-", dir=Path.cwd() if spread else None
    ) as tmp:
        module = Path(tmp) / "stage3_functions.py"
        module.write_text(text)
        try:
            return subprocess.run(
                [
                    *_command(mpiexec, layout, nodes, Path(tmp)),
                    sys.executable,
                    "-m",
                    "course.lessons.core.mn_probe",
                    str(module),
                    str(seed),
                ],
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                env=env,
                cwd=tmp,
            )
        except subprocess.TimeoutExpired:
            fail(
                _("the {size}-rank run of your functions did not finish in {seconds} s").format(
                    size=layout.size, seconds=TIMEOUT
                ),
                _(
                    "a rank is probably waiting in a collective call (scatter, allreduce, bcast) "
                    "that another rank never makes: every rank must call scatter_dataset, "
                    "the optimizer and the evaluator"
                ),
            )


def _reply(run: subprocess.CompletedProcess[str], layout: Layout) -> dict:
    """Rank 0's last line: {"size": N, "ranks": [each rank's facts]}; CheckFailed with the ranks'
    errors when the run ended without it."""
    __tracebackhide__ = True
    lines = run.stdout.strip().splitlines()
    try:
        facts = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        facts = None
    if not isinstance(facts, dict) or not isinstance(facts.get("ranks"), list):
        fail(
            # TRANSLATORS: {said} is the end of what the ranks wrote on stderr
            _("the {size}-rank run failed (exit status {status}): {said}").format(
                size=layout.size, status=run.returncode, said=run.stderr.strip()[-800:]
            ),
            _("run the cells above again; if it persists, run python -m course doctor"),
        )
    return facts


def _check_placement(facts: dict, layout: Layout, nodes: list[str] | None) -> None:
    """The ranks sit on the layout's nodes, as the kit's own communicator sees them: RuntimeError
    if not, a fault of the kit, not of the student."""
    found = [ranked.get("intra_rank") for ranked in facts["ranks"]]
    if found == layout.intra_ranks():
        return
    hosts = [ranked.get("host") for ranked in facts["ranks"]]
    where = (
        f"the ranks on the job's nodes {i18n.listed(nodes)} (hosts {hosts})"
        if nodes
        else "the probe's simulated nodes"
    )
    raise RuntimeError(
        f"{where} did not take the layout: the kit's communicator has intra ranks {found}, "
        f"not {layout.intra_ranks()} ({layout})"
    )
