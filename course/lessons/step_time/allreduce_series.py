"""The allreduce micro-benchmark's measurements: each (ranks, algorithm) measured in
runs/allreduce-*/, its times per message size, and the kit's fit of α and β to them.

Each (ranks, algorithm) comes from its newest job, all of that job's bursts pooled: a job that
alternates algorithms (jobs/run_allreduce_benchmark.sh) gives each the same machine, minute by
minute. The spread is the quartiles of the pooled repeats.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from course.contracts import benchmark
from course.errors import ResultsError
from course.i18n import _
from course.lessons.step_time import costmodel


@dataclass
class Series:
    """One (ranks, algorithm): per message size, the median and quartiles of every repeat of its
    bursts."""

    ranks: int
    algorithm: str
    job: str
    nodes: int
    cores: int  # of the node rank 0 ran on
    bursts: int
    sizes: list[int] = field(default_factory=list)
    median: list[float] = field(default_factory=list)
    q1: list[float] = field(default_factory=list)
    q3: list[float] = field(default_factory=list)
    repeats: list[int] = field(default_factory=list)

    @property
    def label(self) -> str:
        return _("{algorithm}, {ranks} ranks").format(algorithm=self.algorithm, ranks=self.ranks)

    @property
    def oversubscribed(self) -> bool:
        return self.nodes == 1 and self.ranks > self.cores


def measured_table(folder: Path = Path("."), prefix: str = benchmark.PREFIX) -> list[Series]:
    """Every (ranks, algorithm) the benchmark measured in folder/runs/<prefix>-*, ordered by ranks
    then algorithm; files whose seal does not match are left out with a note."""
    by_job: dict[tuple[int, str], dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for path in benchmark.find(folder, prefix):
        try:
            record = benchmark.load(path)
        except ResultsError as e:
            print(_("note: left out: {why}").format(why=e.message))
            continue
        by_job[(record["ranks"], record["algorithm"])][path.parent.name].append(record)
    table = []
    for (ranks, algorithm), jobs in sorted(by_job.items()):
        # The newest job by the time its bursts started (file times do not survive a copy of the
        # folder).
        job, records = max(jobs.items(), key=lambda item: max(r.get("started", 0) for r in item[1]))
        table.append(_series(ranks, algorithm, job, records))
    return table


def _series(ranks: int, algorithm: str, job: str, records: list[dict]) -> Series:
    pooled: dict[int, list[float]] = defaultdict(list)
    for record in records:
        for size in record["sizes"]:
            pooled[size["bytes"]] += size["seconds"]
    series = Series(
        ranks,
        algorithm,
        job,
        nodes=len(set(records[0]["hosts"])),
        cores=records[0].get("cores") or 0,
        bursts=len(records),
    )
    for nbytes in sorted(pooled):
        median, q1, q3 = benchmark.summarize(pooled[nbytes])
        series.sizes.append(nbytes)
        series.median.append(median)
        series.q1.append(q1)
        series.q3.append(q3)
        series.repeats.append(len(pooled[nbytes]))
    return series


def fits(table: list[Series]) -> dict[tuple[int, str], tuple[float, float]]:
    """The kit's (α, β) per (ranks, algorithm) with a cost model, fitted on the medians."""
    return {
        (s.ranks, s.algorithm): costmodel.fit(s.sizes, s.median, s.algorithm, s.ranks)
        for s in table
        if s.algorithm in costmodel.ALGORITHMS and s.ranks > 1 and len(s.sizes) > 1
    }
