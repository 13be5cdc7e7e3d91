"""The checks of the job's request and run part (notebook 07, called as checks.run_part.<check>).

resource_request(site, ranks, threads_per_rank, epoch_seconds, epochs) is judged on its #PBS lines,
read with the kit's directive parser (course.lessons.run_part.directives).

run_lines(site, ranks_per_node, threads_per_rank,
local_dir) returns the shell lines that set the ranks' threads, stage the data set to node-local
storage and launch one rank per GPU (or per group of cores). The observer (observers.run_part)
runs the lines in bash with a recording mpiexec; this judge checks what they set and copied, and
asks Open MPI's own mpirun where the recorded launch would put the ranks on two simulated nodes of
the site (course.lessons.run_part.placement), never running the student's code itself."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Any

from course.errors import CourseError
from course.i18n import _
from course.lessons.run_part import placement
from course.lessons.run_part.observers import request_lines
from course.lessons.run_part.observers import run_part as observe_run_part
from course.notebook.checks.observe import observe
from course.notebook.checks.verdict import expect, fail, passed

# (name, GPUs per node, cores per node, sockets per node, ranks per node, threads per rank,
# local_dir): sites unlike this machine, so that a line written for it alone does not pass.
_CASES = (
    ("pbs-gpu", 2, 36, 2, 2, 4, "$TMPDIR"),  # Reedbush-H's nodes: a P100 on each socket
    ("cpu-8", 0, 8, 1, 4, 2, "$LOCAL_SCRATCH"),  # 4 ranks of 2 threads
    ("cpu-2s", 0, 16, 2, 16, 1, "$TMPDIR"),  # a rank per core over two sockets
)
NODES = 2  # the simulated nodes of the dry run: ranks per node shows only across nodes
DATA_FILE = Path("pfnet", "chainer", "cifar", "cifar-10.npz")  # where Chainer keeps CIFAR-10
# Variables Open MPI passes to every rank itself.
_FORWARDED_ANYWAY = ("OMPI_", "PMIX_", "PRTE_")


def run_part(function: Any, cases: tuple = _CASES) -> None:
    """The run part run_lines returns, for every site of `cases`."""
    __tracebackhide__ = True
    from course.lessons.run_part import directives

    with tempfile.TemporaryDirectory(prefix="course-run-part-") as scratch:
        folders = [_folders(Path(scratch) / str(n), case[-1]) for n, case in enumerate(cases)]
        sites = [
            directives.Site(name, None, None, gpus, cores, (), sockets)
            for name, gpus, cores, sockets, *_others in cases
        ]
        found = observe(
            observe_run_part,
            function,
            cases=[
                [dataclasses.asdict(site), per_node, threads, local_dir]
                for site, (*_others, per_node, threads, local_dir) in zip(sites, cases)
            ],
            folders=folders,
        )
        expect(
            len(found) == len(cases),
            _("{found} answers came back for {cases} cases").format(
                found=len(found), cases=len(cases)
            ),
        )
        for site, case, folder, facts in zip(sites, cases, folders, found):
            _judge(site, case, folder, facts)
    passed(
        _(
            "run_lines: threads, staging and one rank per GPU or core group on {sites} sites, "
            "e.g. {line}"
        ).format(sites=len(cases), line=found[0]["lines"][-1])
    )


def _folders(root: Path, local_dir: str) -> dict:
    """A shared folder holding a data set file, an empty node-local one, and a work folder."""
    if not (local_dir.startswith("$") and local_dir[1:].isidentifier()):
        raise ValueError(f"a case's local_dir is $NAME, not {local_dir!r}")
    shared, local, work = root / "shared" / "datasets", root / "local", root / "work"
    (shared / DATA_FILE).parent.mkdir(parents=True)
    (shared / DATA_FILE).write_bytes(os.urandom(4096))
    local.mkdir()
    work.mkdir()
    return {
        "shared": str(shared),
        "local": str(local),
        "variable": local_dir[1:],
        "work": str(work),
    }


def _judge(site: Any, case: tuple, folder: dict, facts: dict) -> None:
    __tracebackhide__ = True
    *_others, per_node, threads, local_dir = case
    # TRANSLATORS: {site} is the simulated site (its Python repr); {local_dir} its node-local
    # folder, such as $TMPDIR. The words before each failure of the case.
    where = _(
        "for {site} ({per_node} rank(s) per node of {threads} thread(s), {local_dir})"
    ).format(site=repr(site), per_node=per_node, threads=threads, local_dir=local_dir)
    expect(
        "lines" in facts,
        _("{where}: run_lines returned {kind}, not a list of lines").format(
            where=where, kind=facts.get("type")
        ),
        _('return a list of shell lines, such as ["export NAME=value", ...]'),
    )
    expect(
        facts["status"] == 0,
        _("{where}: the lines stopped with exit status {status}: {said}").format(
            where=where, status=facts["status"], said=facts["said"].strip()
        ),
        _(
            "they run with bash -eu: every command must succeed, and every variable they use must "
            "be set (the job's shell sets $PBS_NODEFILE, $COURSE_TRAIN_ARGS and the local folder)"
        ),
    )
    launches = facts["launches"]
    expect(
        len(launches) == 1,
        _("{where}: the lines start mpiexec (or mpirun) {count} time(s)").format(
            where=where, count=len(launches)
        ),
        _("the job launches all its ranks at once, with one mpiexec line"),
    )
    launch = launches[0]
    _judge_threads(where, threads, launch["set"].get("OMP_NUM_THREADS"))
    _judge_forwarding(where, launch)
    _judge_staging(where, local_dir, folder, launch["root"])
    try:
        ranks = placement.dry_run(
            launch["argv"][1:],
            NODES,
            per_node,
            site.sockets_per_node,
            site.cores_per_node,
        )
    except CourseError as e:
        fail(f"{where}: {e.message}", e.hint)
    _judge_map(where, site, per_node, threads, ranks)


def _judge_threads(where: str, threads: int, found: str | None) -> None:
    __tracebackhide__ = True
    expect(
        found is not None,
        _("{where}: the ranks start without OMP_NUM_THREADS").format(where=where),
        _(
            "without it OpenMP (and the BLAS under NumPy) starts a thread per core in every rank, "
            "so the ranks of a node fight over its cores"
        ),
    )
    expect(
        found == str(threads),
        _(
            "{where}: the ranks start with OMP_NUM_THREADS={found}, and each rank runs {threads} "
            "thread(s)"
        ).format(where=where, found=found, threads=threads),
        _("the threads per rank are what the directives ask each rank (ompthreads)"),
    )


def _judge_forwarding(where: str, launch: dict) -> None:
    __tracebackhide__ = True
    words = launch["argv"]
    named = {words[i + 1].split("=", 1)[0] for i, w in enumerate(words[:-1]) if w == "-x"}
    for name in sorted(launch["set"]):
        expect(
            name in named or name.startswith(_FORWARDED_ANYWAY),
            _("{where}: the lines set {name}, but the launch line does not pass it on").format(
                where=where, name=name
            ),
            _(
                "ranks on the other nodes start from their own login environment: Open MPI passes "
                "on only the variables its options name (see the lesson's Open MPI reference)"
            ),
        )


def _judge_staging(where: str, local_dir: str, folder: dict, root: str | None) -> None:
    __tracebackhide__ = True
    shared, local = Path(folder["shared"]), Path(folder["local"])
    own = local.resolve()
    # A copy is a file whose bytes are on node-local storage: a link (or a file under a linked
    # folder) that leads to the shared file system is read from it at every epoch.
    copies = [p for p in local.rglob(DATA_FILE.name) if p.is_file() and _on(p.resolve(), own)]
    expect(
        root is not None,
        _(
            "{where}: the ranks start without CHAINER_DATASET_ROOT, so Chainer looks for the data "
            "set in its default folder"
        ).format(where=where),
        _("the training finds the data set where CHAINER_DATASET_ROOT says"),
    )
    named = Path(folder["work"], str(root))  # a relative root is the job folder's
    used = named.resolve()
    staged = named / DATA_FILE
    expect(
        not (_on(named, local) or _on(used, own))
        or not staged.exists()
        or _on(staged.resolve(), own),
        (
            _(
                "{where}: {file} under CHAINER_DATASET_ROOT links to the shared file rather than "
                "copying it to {local_dir}"
            )
            if staged.resolve() == (shared / DATA_FILE).resolve()
            else _(
                "{where}: {file} under CHAINER_DATASET_ROOT links to a file outside {local_dir} "
                "rather than copying it there"
            )
        ).format(where=where, file=DATA_FILE, local_dir=local_dir),
        _(
            "a link leads every read back to where it points, so the ranks would read the shared "
            "file system at every epoch: node-local storage must hold the file's own bytes"
        ),
    )
    if used == shared.resolve():
        expect(
            bool(copies),
            _(
                "{where}: the ranks read the data set from the shared folder; nothing was copied "
                "to node-local storage ({local_dir})"
            ).format(where=where, local_dir=local_dir),
            _("every epoch would read the shared file system, which all jobs of the centre share"),
        )
        fail(
            _(
                "{where}: the lines copy the data set to {local_dir}, but the ranks still read it "
                "from the shared folder"
            ).format(where=where, local_dir=local_dir),
            _("the copy is used only if the training is told where it is"),
        )
    expect(
        _on(used, own),
        _("{where}: CHAINER_DATASET_ROOT names {root}, which is not under {local_dir}").format(
            where=where, root=root, local_dir=local_dir
        ),
        _("node-local storage is the folder local_dir names"),
    )
    expect(
        staged.is_file() and staged.read_bytes() == (shared / DATA_FILE).read_bytes(),
        _(
            "{where}: CHAINER_DATASET_ROOT names {root}, but {file} is not there as it is in the "
            "shared folder"
        ).format(where=where, root=root, file=DATA_FILE),
        _("Chainer looks for its files under CHAINER_DATASET_ROOT with the shared folder's layout"),
    )


def _on(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or under it, by their names (resolve them to follow links)."""
    return Path(os.path.normpath(path)).is_relative_to(folder)


def _judge_map(where: str, site: Any, per_node: int, threads: int, ranks: list) -> None:
    __tracebackhide__ = True
    by_node: dict[str, list] = {}
    for rank in ranks:
        by_node.setdefault(rank.node, []).append(rank)
    counts = sorted(len(on) for on in by_node.values())
    expect(
        counts == [per_node] * NODES,
        _(
            "{where}: on {nodes} nodes the line places {counts} rank(s) per node; the directives "
            "give each node {per_node}"
        ).format(where=where, nodes=NODES, counts=counts, per_node=per_node),
        _(
            "the job's host file lists each node's slots; the mapping decides how many ranks go "
            "on each"
        ),
    )
    for node, on in sorted(by_node.items()):
        for rank in on:
            expect(
                bool(rank.cores),
                _("{where}: rank {rank} is bound to no core").format(where=where, rank=rank.rank),
                _(
                    "an unbound rank may be moved between cores and sockets by the OS, away from "
                    "its memory and its GPU"
                ),
            )
            expect(
                len(rank.cores) >= threads,
                _("{where}: rank {rank} runs {threads} thread(s) on {cores} core(s)").format(
                    where=where, rank=rank.rank, threads=threads, cores=len(rank.cores)
                ),
                _("a rank's threads share the cores it is bound to"),
            )
        for a, first in enumerate(on):
            for second in on[a + 1 :]:
                shared = sorted(set(first.cores) & set(second.cores))
                expect(
                    not shared,
                    _("{where}: ranks {a} and {b} share core(s) {cores} of {node}").format(
                        where=where, a=first.rank, b=second.rank, cores=shared, node=node
                    ),
                    _("two ranks on one core take turns on it"),
                )
        if site.gpus_per_node:
            for rank in on:
                socket = rank.local_rank * site.sockets_per_node // site.gpus_per_node
                expect(
                    rank.packages == (socket,),
                    _(
                        "{where}: rank {rank} drives its node's GPU {gpu}, attached to socket "
                        "{socket}, and runs on socket(s) {found}"
                    ).format(
                        where=where,
                        rank=rank.rank,
                        gpu=rank.local_rank,
                        socket=socket,
                        found=list(rank.packages),
                    ),
                    _(
                        "a rank on another socket than its GPU's sends every copy to the GPU over "
                        "the link between the sockets (Hanawa's report, in the lesson)"
                    ),
                )


# Sites unlike the course's own, so that lines copied from the job script's defaults do not pass:
# (name, queue, group, GPUs per node, cores per node, ranks, threads per rank, epoch s, epochs).
_OTHER_SITES = (
    ("pbs-gpu", "h-regular", "gt00", 2, 36, 4, 4, 95.0, 10),  # the Reedbush-H hands-on's nodes
    ("no-queue", None, None, 0, 8, 8, 2, 1260.0, 4),  # CPU nodes: 4 ranks of 2 threads each
    ("queue-only", "short", None, 4, 16, 2, 1, 30.0, 3),  # fewer ranks than one node's GPUs
)


def resource_request(
    function: Any,
    cases: tuple[tuple[str, str | None, str | None, int, int, int, int, float, int], ...] = (
        _OTHER_SITES
    ),
    folder: Path = Path("."),
) -> None:
    """The #PBS lines of resource_request(site, ranks, threads_per_rank, epoch_seconds, epochs),
    read with the kit's directive parser, for this folder's site (when a profile is applied and a
    stage-1 run measured an epoch) and for `cases`."""
    __tracebackhide__ = True
    from course.cluster import siteenv
    from course.errors import CourseError
    from course.lessons.run_part import directives

    asked = [
        (directives.Site(name, queue, group, gpus, cores), ranks, threads, epoch_seconds, epochs)
        for name, queue, group, gpus, cores, ranks, threads, epoch_seconds, epochs in cases
    ]
    if (Path(folder) / "jobs" / siteenv.FILE).is_file():
        settings = siteenv.of_folder(folder)
        try:  # without a stage-1 run yet, the other sites' cases say it all
            measured = directives.measured_epochs(folder)
            ranks = settings.largest_run[0] * settings.largest_run[1]
            here = (directives.applied_site(folder), ranks, settings.threads_per_rank)
            asked.insert(0, (*here, *measured))
        except CourseError:
            pass
    found = observe(
        request_lines,
        function,
        cases=[[dataclasses.asdict(site), *run] for site, *run in asked],
    )
    expect(
        len(found) == len(asked),
        _("{found} requests came back for {asked} cases").format(
            found=len(found), asked=len(asked)
        ),
    )
    for (site, ranks, threads, epoch_seconds, epochs), request in zip(asked, found):
        try:
            if "lines" not in request:
                raise directives.not_lines(str(request["type"]))
            directives.check(request["lines"], site, ranks, threads, epoch_seconds, epochs)
        except CourseError as e:
            fail(
                # TRANSLATORS: {site} is the site's settings, {problem} what is wrong with the lines
                _(
                    "for {site}: {ranks} rank(s) of {threads} thread(s), {epochs} epoch(s) of "
                    "{seconds:g} s: {problem}"
                ).format(
                    site=repr(site),
                    ranks=ranks,
                    threads=threads,
                    epochs=epochs,
                    seconds=epoch_seconds,
                    problem=e.message,
                ),
                e.hint,
            )
    passed(
        _("resource_request: the right #PBS lines for {count} sites and runs, e.g. {lines}").format(
            count=len(asked), lines=" | ".join(found[0]["lines"])
        )
    )
