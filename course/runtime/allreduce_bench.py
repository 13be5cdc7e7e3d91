"""`python -m course.runtime.allreduce_bench`, one rank of the allreduce micro-benchmark (under
mpiexec).

Times MPI_Allreduce (sum of float32) over message sizes from 4 KiB to 64 MiB: per size one warm-up
call, then repeats, each after a barrier so that all ranks start together; a repeat's time is the
slowest rank's (an allreduce is done when the last rank has the sum). Each size repeats for its
share of --budget seconds (at least MIN_REPEATS times), which bounds a burst's time. Open MPI picks
the algorithm at MPI_Init from its MCA parameters, which `course launch --allreduce NAME` sets (and
COURSE_ALLREDUCE names it), so one burst measures one algorithm; the job script alternates them.
Rank 0 writes the sealed file (course.contracts.benchmark) and prints its log line and a summary.

`--pattern parameter_server` times a parameter server's exchange instead (notebook 05): rank 0
gathers every rank's vector (MPI_Gather, which Open MPI does with one receive per rank at the root
for these few ranks), sums them, and sends the sum to each other rank with its own MPI_Send. Not
MPI_Reduce and MPI_Bcast: they work along trees whose inner ranks add and forward, so the root's
link would not carry every rank's bytes, which is what makes a parameter server what it is.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

import numpy as np

from course.cli import command_parser
from course.cluster import hosts, mpi
from course.contracts import benchmark
from course.i18n import _

SIZES = tuple(1024 * 4**k for k in range(1, 9))  # 4 KiB, 16 KiB, ..., 64 MiB
MIN_REPEATS, MAX_REPEATS = (
    3,
    200,
)  # 3: a median and quartiles mean something; 200: small sizes stop early


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = command_parser("python -m course.runtime.allreduce_bench", __doc__)
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=list(SIZES), help=_("message sizes in bytes")
    )
    parser.add_argument(
        "--budget", type=float, default=1.5, help=_("seconds of timed repeats per burst, about")
    )
    parser.add_argument(
        "--out", default=".", help=_("the folder whose runs/ gets the file (the submit folder)")
    )
    parser.add_argument(
        "--pattern",
        choices=("allreduce", benchmark.PARAMETER_SERVER),
        default="allreduce",
        help=_("what is timed: MPI_Allreduce, or a parameter server's gather and sends via rank 0"),
    )
    parser.add_argument(
        "--prefix",
        choices=benchmark.PREFIXES,
        default=benchmark.PREFIX,
        help=_("the run folder's name before the job id: runs/<prefix>-<job id>"),
    )
    return parser.parse_args(argv)


def _format_bytes(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 1024} KiB"


def _exchange(comm, pattern: str, largest: int):
    """exchange(send, received): one exchange of `pattern` that leaves the sum in `received`."""
    from mpi4py import MPI

    if pattern == "allreduce":
        return lambda send, received: comm.Allreduce(send, received, op=MPI.SUM)
    gathered = np.empty(comm.size * largest, dtype=np.float32) if comm.rank == 0 else None

    def server(send, received):
        n = len(send)
        comm.Gather(send, gathered[: comm.size * n] if gathered is not None else None, root=0)
        if gathered is None:
            comm.Recv(received, source=0)
            return
        np.sum(gathered[: comm.size * n].reshape(comm.size, n), axis=0, out=received)
        for rank in range(1, comm.size):  # one message at a time through the server's link
            comm.Send(received, dest=rank)

    return server


def measure(comm, sizes: list[int], budget: float, pattern: str = "allreduce") -> list[dict] | None:
    """{bytes, repeats, seconds} per size (seconds: the slowest rank's time of each repeat) on rank
    0; None on the other ranks."""
    from mpi4py import MPI

    largest = max(sizes) // 4
    exchange = _exchange(comm, pattern, largest)
    send = np.full(largest, comm.rank + 1, dtype=np.float32)
    received = np.empty(
        largest, dtype=np.float32
    )  # touched by the warm-up calls, before any timing
    expected = comm.size * (comm.size + 1) / 2
    exchange(send[:1], received[:1])  # connections are set up at the first call: not timed
    share = budget / len(sizes)
    measured = []
    for nbytes in sizes:
        n = nbytes // 4
        exchange(send[:n], received[:n])  # warm-up: first touch of the pages, not timed
        if received[0] != expected or received[n - 1] != expected:
            raise RuntimeError(
                # TRANSLATORS: {pattern} is allreduce or parameter_server; the sums are numbers
                _("{pattern} of {size} bytes summed to {found}, not {expected}").format(
                    pattern=pattern, size=nbytes, found=received[0], expected=expected
                )
            )
        times, began = [], time.perf_counter()
        while True:
            comm.Barrier()
            start = time.perf_counter()
            exchange(send[:n], received[:n])
            times.append(time.perf_counter() - start)
            # Rank 0's clock decides for all, outside the timed call, so that every rank repeats
            # alike.
            more = len(times) < MIN_REPEATS or (
                len(times) < MAX_REPEATS and time.perf_counter() - began < share
            )
            if not comm.bcast(more, root=0):
                break
        mine = np.asarray(times)
        slowest = np.empty_like(mine) if comm.rank == 0 else None
        # after the repeats: no traffic between them
        comm.Reduce(mine, slowest, op=MPI.MAX, root=0)
        if slowest is not None:
            measured.append({"bytes": nbytes, "repeats": len(times), "seconds": slowest.tolist()})
    return measured if comm.rank == 0 else None


def _run_tag(job: hosts.JobEnvironment) -> str:
    """The run folder's suffix: the job's id (every burst of a job shares it), else the time and
    process."""
    tag = (
        os.environ.get("COURSE_RUN_TAG")
        or job.job_id
        or f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    )
    return re.sub(r"[^A-Za-z0-9._-]", "_", tag)


def main(argv: list[str] | None = None) -> int:
    from mpi4py import MPI

    args = parse_args(argv)
    comm = MPI.COMM_WORLD
    # Each copy alone (another MPI's launcher started it) would measure nothing: stop it.
    mpi.check_world(comm.Get_size())
    started = time.time()
    measured = measure(comm, sorted(set(args.sizes)), args.budget, args.pattern)
    names = comm.gather(MPI.Get_processor_name(), root=0)
    if measured is None:  # not rank 0
        return 0
    job = hosts.detect()
    algorithm = (
        benchmark.PARAMETER_SERVER
        if args.pattern == benchmark.PARAMETER_SERVER
        else os.environ.get("COURSE_ALLREDUCE") or benchmark.DEFAULT_ALGORITHM
    )
    folder = benchmark.run_folder(args.out, _run_tag(job), args.prefix)
    path = benchmark.next_path(folder, algorithm, comm.size)
    # cores: the node's (rank 0 itself is bound to one); mca: the Open MPI settings that chose the
    # algorithm.
    record = {
        "job": {"id": job.job_id, "scheduler": job.scheduler, "name": job.job_name},
        "ranks": comm.size,
        "hosts": names,
        "cores": os.cpu_count(),
        "algorithm": algorithm,
        "mca": {k: v for k, v in os.environ.items() if k.startswith("OMPI_MCA_coll_")},
        "mpi": MPI.Get_library_version().strip().splitlines()[0],
        "started": started,
        "seconds_total": time.time() - started,
        "sizes": measured,
    }
    sha256 = benchmark.write(path, record)
    what = algorithm if args.pattern == benchmark.PARAMETER_SERVER else f"allreduce {algorithm}"
    for size in measured:
        median, q1, q3 = benchmark.summarize(size["seconds"])
        print(
            # TRANSLATORS: {what} is what was timed, e.g. "allreduce ring"; {size} e.g. "16 KiB";
            # the times are microseconds (us)
            _(
                "{what} on {ranks} rank(s), {size}: median {median:10.1f} us (quartiles "
                "{low:.1f}-{high:.1f}) over {repeats} repeats"
            ).format(
                what=what,
                ranks=comm.size,
                size=f"{_format_bytes(size['bytes']):>7}",
                median=median * 1e6,
                low=q1 * 1e6,
                high=q3 * 1e6,
                repeats=size["repeats"],
            )
        )
    print(
        benchmark.log_line(os.path.relpath(path, args.out), sha256, algorithm, comm.size),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
