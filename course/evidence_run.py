"""A run as the kit reads it: one results file's facts (speed, workers, devices, accuracy curve,
snapshots) and what tracing it to its job log found (course.evidence fills that in)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from course.contracts import stages
from course.i18n import _


@dataclass
class Run:
    """One results file and what tracing it to its job log found."""

    path: Path
    record: dict
    log: Path | None = None
    problems: list[str] = field(default_factory=list)  # each one takes the run out of grading
    notes: list[str] = field(default_factory=list)
    # What the job recorded of the prediction submitted with it (course.prediction_evidence):
    prediction: dict | None = None  # None: none, or one that does not count (then the reason)
    prediction_problem: str | None = None

    @property
    def started(self) -> str:
        """When the run started (ISO 8601; "" where the record does not say)."""
        return self.record.get("started_at") or ""

    @property
    def traced(self) -> bool:
        return not self.problems

    @property
    def profiled(self) -> bool:
        """A step-profile run (PROFILE=1): on GPUs its cuts wait for the GPU, so its speed is not
        the run's."""
        return bool(self.record.get("profile"))

    @property
    def images_per_sec(self) -> float:
        return (self.record.get("throughput") or {}).get("images_per_sec") or 0.0

    @property
    def workers(self) -> int:
        return self.record["workers"]

    @property
    def job_id(self) -> str | None:
        """The scheduler's id of the run's (last) job; None outside a job."""
        return self.record["job"].get("id")

    @property
    def devices(self) -> list[str]:
        return self.record["devices"]

    @property
    def hosts(self) -> list[str]:
        return self.record["hosts"]

    @property
    def setting(self) -> str:
        """The communication setting of a stage-3 run: communicator[/allreduce algorithm]."""
        communicator = self.record.get("communicator") or "-"
        return (
            f"{communicator}/{self.record['allreduce']}"
            if self.record.get("allreduce")
            else communicator
        )

    @property
    def lr_rule(self) -> str:
        """How the learning rate followed the total batch (stages.LR_RULES); older runs: the taught
        one."""
        return (self.record.get("lr_schedule") or {}).get("rule") or stages.TAUGHT_LR_RULE

    @property
    def accuracy_curve(self) -> list[dict]:
        """Validation accuracy at each evaluation: {epoch, iteration, seconds, accuracy, lr} (lr:
        the mean learning rate the optimizer used since the previous entry, where the run observed
        it)."""
        return [
            {
                "epoch": entry.get("epoch"),
                "iteration": entry.get("iteration"),
                "seconds": entry.get("elapsed_time"),
                "accuracy": entry["validation/main/accuracy"],
                "lr": entry.get("lr"),
            }
            for entry in self.record["log"]
            if "validation/main/accuracy" in entry
        ]

    @property
    def final_accuracy(self) -> float | None:
        curve = self.accuracy_curve
        return curve[-1]["accuracy"] if curve else None

    def time_to_accuracy(self, target: float) -> dict | None:
        """The first evaluation at which validation accuracy reached `target` (None: never).

        Measured as MLPerf Training ranks systems: wall time from the start of training, here at the
        resolution of the run's evaluations (the Evaluator's trigger).
        """
        return next((point for point in self.accuracy_curve if point["accuracy"] >= target), None)

    def describe(self) -> str:
        return _("{run} (job {job})").format(run=self.path.parent.name, job=self.job_id)

    @property
    def segments(self) -> list[dict]:
        """The jobs that trained this run, in order (several when it resumed after a walltime)."""
        return self.record.get("segments") or []

    def snapshot_cost(self) -> dict | None:
        """{snapshots, seconds (mean per snapshot), epoch_seconds (mean), share (of an epoch)};
        None: no snapshots."""
        seconds = (self.record.get("snapshots") or {}).get("seconds") or []
        times = [point["seconds"] for point in self.accuracy_curve if point["seconds"] is not None]
        epochs = [
            b - a for a, b in zip([0.0, *times], times)
        ]  # a resumed run's clock leaves the restart out
        if not seconds:
            return None
        mean = sum(seconds) / len(seconds)
        epoch = sum(epochs) / len(epochs) if epochs else None
        return {
            "snapshots": len(seconds),
            "seconds": mean,
            "epoch_seconds": epoch,
            "share": mean / epoch if epoch else None,
        }
