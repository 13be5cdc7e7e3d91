"""Where a training step's time goes, per rank: `--profile` on stage 3 (`qsub -v PROFILE=1`).

Each step of the trainer is cut into data loading (the iterator and the converter), forward,
backward, waiting for the slowest rank (a barrier the profile adds before the exchange), gradient
exchange (ChainerMN's allreduce of the gradients) and update (the optimizer's rule), plus what is
left (the updater's own work). The cuts come from Chainer's and ChainerMN's own
objects, wrapped on the student's trainer: the updater's `update` (a step), a `chainer.FunctionHook`
(the first function of the forward pass and the first of the backward pass), the communicator's
`multi_node_mean_grad` and the wrapped optimizer's `update`. On a GPU every cut first waits for the
GPU (the kernels run asynchronously), and each phase is an NVTX range, so that Nsight Systems shows
the same phases in its timeline (`qsub -v PROFILE=nsys`).

Within the backward pass each layer's gradient is ready when the function that takes the layer's
parameters has run its backward (a `backward_postprocess` hook): `layers` gives every layer with
parameters in the order the backward pass reaches it, its parameter count and its share of the
backward pass (from the previous layer's gradient, or the pass's start, to its own), for notebook
04's model of overlapping the exchange with the backward pass. On a GPU each of these moments waits
for the GPU too, which slows the profiled steps a little.

Each rank also notes the share of a core its process got over its steady steps (`cpu_share`: the
process's CPU time, `time.process_time()`, over the wall time from each steady step's start to its
end, summed). A rank alone on its core runs all along, waits included (MPI and the barrier poll);
one that shares its core with other work is descheduled, and its phases, the exchange first, take
longer than the work in them: the grading of notebook 04's prediction reads this
(course.lessons.step_time.allreduce_judge).

The contract of the results file's `profile` field (written by the harness, read by the report) is
here: `{"phases": [...], "ranks": [{"rank", "host", "steps", "median_ms": {phase: ms},
"layers": [Layer], "cpu_share": float | None}]}` (`layers` since the exchange notebook, now 05,
`cpu_share` since issue 24; older runs have neither).
"""

from __future__ import annotations

import socket
import statistics
import time
from typing import Any, TypedDict

import chainer
import numpy

from course.i18n import _

PHASES = ("data", "forward", "backward", "wait", "allreduce", "update", "other")
# The moments that begin each phase after "data", in order within a step, and the step's end.
_CUTS = (*PHASES[1:], "end")


class Layer(TypedDict):
    """One layer of a rank's profile, in the order the backward pass reaches it."""

    name: str  # the link's path in the model, e.g. "/predictor/conv1"
    parameters: int  # its gradient's size, in parameters (4 bytes each in float32)
    backward_ms: float  # median ms from the previous layer's gradient (or the pass's start)


class _Cuts(chainer.FunctionHook):
    """Notes the first forward and the first backward function of a step (Chainer calls these hooks
    for every function; only the first of each kind matters)."""

    name = "CourseStepProfile"

    def __init__(self, profile: StepProfile) -> None:
        self._profile = profile

    def forward_preprocess(self, function, in_data) -> None:
        self._profile.cut("forward")

    def backward_preprocess(self, function, in_data, out_grad) -> None:
        self._profile.cut("backward")

    def backward_postprocess(self, function, in_data, out_grad) -> None:
        self._profile.gradient_ready(function)


class StepProfile:
    """The phases of every steady step of one rank's trainer (steps after `warmup`)."""

    def __init__(self, trainer, comm, warmup: int) -> None:
        self.comm, self.warmup = comm, warmup
        self.steps: list[dict[str, float]] = []
        self._times: dict[str, float] | None = None  # the cuts of the step under way
        self._open: str | None = None  # the phase whose NVTX range is open
        self._complete = 0  # steps with every cut seen
        self._cpu_started = 0.0  # the process's CPU time when the step under way began
        self.cpu_seconds = 0.0  # over the steady steps: the process's CPU time
        self.wall_seconds = 0.0  # and the wall time, from each step's start to its end
        optimizer = trainer.updater.get_optimizer("main")
        actual = getattr(optimizer, "actual_optimizer", None)
        communicator: Any = getattr(optimizer, "communicator", None)
        if actual is None or not hasattr(communicator, "multi_node_mean_grad"):
            raise ValueError(
                _(
                    "--profile needs ChainerMN's multi-node optimizer (stage 3): "
                    "chainermn.create_multi_node_optimizer(optimizer, comm)"
                )
            )
        self._gpu = optimizer.target.xp is not numpy
        # Each parameter's layer (the link that holds it), by the parameter object's identity: the
        # backward functions see the parameters' nodes, whose variable is the parameter itself.
        self._layer_of: dict[int, str] = {}
        self._params: dict[str, list] = {}
        for name, param in optimizer.target.namedparams():
            layer = name.rsplit("/", 1)[0]
            self._layer_of[id(param)] = layer
            self._params.setdefault(layer, []).append(param)
        self._ready: dict[str, float] = {}  # the step under way: when each layer's gradient came
        self.layer_steps: list[dict[str, float]] = []  # per steady step: seconds per layer
        self.hook = _Cuts(self)
        self._wrap(trainer.updater, "update", start="data", end="end")
        # Before the exchange every rank waits at a barrier for the slowest: the allreduce phase is
        # then the exchange itself, and "wait" is what synchronous training costs when ranks run at
        # different speeds.
        self._wrap(communicator, "multi_node_mean_grad", start="allreduce", end="update")
        exchange = communicator.multi_node_mean_grad

        def barrier_first(*args, **kwargs):
            self.cut("wait")
            communicator.mpi_comm.Barrier()
            return exchange(*args, **kwargs)

        communicator.multi_node_mean_grad = barrier_first
        self._wrap(actual, "update", start=None, end="other")

    def _wrap(self, owner, method: str, start: str | None, end: str) -> None:
        original = getattr(owner, method)

        def timed(*args, **kwargs):
            if start == "data":
                self._begin()
            elif start is not None:
                self.cut(start)
            result = original(*args, **kwargs)
            self.cut(end)
            if end == "end":
                self._finish()
            return result

        setattr(
            owner, method, timed
        )  # on this object only: its class (and other trainers) stay as they were

    def _now(self) -> float:
        if self._gpu:  # the GPU's queued kernels belong to the phase that queued them
            import cupy

            cupy.cuda.get_current_stream().synchronize()
        return time.perf_counter()

    def _nvtx(self, phase: str | None) -> None:
        """Close the open NVTX range, open `phase`'s (Nsight Systems shows them per rank)."""
        if self._gpu:
            from cupy.cuda import nvtx

            if self._open is not None:
                nvtx.RangePop()
            if phase is not None:
                nvtx.RangePush(phase)
        self._open = phase

    def _begin(self) -> None:
        self._times = {"start": self._now()}
        self._cpu_started = time.process_time()
        self._ready = {}
        self._nvtx("data")

    def cut(self, name: str) -> None:
        """The moment phase `name` begins ("end": the step ends); the first time only, within a
        step."""
        if self._times is None or name in self._times:
            return
        self._times[name] = self._now()
        self._nvtx(name if name in PHASES else None)

    def gradient_ready(self, function) -> None:
        """The moment the gradients of the layers whose parameters `function` takes are ready."""
        if self._times is None:
            return
        for node in function.inputs:
            layer = self._layer_of.get(id(node.get_variable_or_none()))
            if layer is not None and layer not in self._ready:
                self._ready[layer] = self._now()

    def _finish(self) -> None:
        # first: closing the NVTX range and this bookkeeping are not the step's work
        cpu_ended = time.process_time()
        times, self._times = self._times, None
        self._nvtx(None)
        # The first update of a multi-node optimizer broadcasts the weights and exchanges no
        # gradients: that step (and any step missing a cut) is not one of the steady pattern.
        if times is None or any(cut not in times for cut in _CUTS):
            return
        self._complete += 1
        if self._complete > self.warmup:
            moments = [times["start"], *(times[cut] for cut in _CUTS)]
            self.steps.append(
                {phase: moments[i + 1] - moments[i] for i, phase in enumerate(PHASES)}
            )
            self.cpu_seconds += cpu_ended - self._cpu_started
            self.wall_seconds += times["end"] - times["start"]
            previous, layers = times["backward"], {}
            for layer, moment in sorted(self._ready.items(), key=lambda item: item[1]):
                layers[layer], previous = moment - previous, moment
            self.layer_steps.append(layers)

    def summary(self) -> dict:
        """This rank's median milliseconds per phase over its steady steps."""
        median = {
            phase: round(1000 * statistics.median(step[phase] for step in self.steps), 3)
            if self.steps
            else None
            for phase in PHASES
        }
        return {
            "rank": self.comm.rank,
            "host": socket.gethostname(),
            "steps": len(self.steps),
            "median_ms": median,
            "layers": self.layers(),
            "cpu_share": self.cpu_share(),
        }

    def cpu_share(self) -> float | None:
        """The share of a core this rank's process got over its steady steps (None: none was
        profiled). Above 1 where the process runs more than one thread (BLAS, on a job that asks
        for more threads per rank)."""
        if self.wall_seconds <= 0:
            return None
        return round(self.cpu_seconds / self.wall_seconds, 3)

    def layers(self) -> list[Layer]:
        """Every layer the last steady step saw, in its backward order, with its median share of
        the backward pass over the steady steps."""
        if not self.layer_steps:
            return []
        return [
            Layer(
                name=layer,
                parameters=sum(param.size for param in self._params[layer]),
                backward_ms=round(
                    1000 * statistics.median(s[layer] for s in self.layer_steps if layer in s), 4
                ),
            )
            for layer in self.layer_steps[-1]
        ]

    def gathered(self) -> dict:
        """Every rank's summary (every rank must call this; rank 0 gets them all)."""
        ranks = self.comm.mpi_comm.gather(self.summary(), root=0)
        return {"phases": list(PHASES), "ranks": ranks}


def line(summary: dict) -> str:
    """The job log's line for one rank's profile."""
    medians = summary["median_ms"]
    parts = " | ".join(
        f"{phase} {medians[phase]:.2f} ms"
        if medians.get(phase) is not None
        else f"{phase} " + _("n/a")
        for phase in PHASES
    )
    share = summary.get("cpu_share")
    return "course: " + _(
        "profile rank {rank} on {host}: {phases} (median of {steps} steps; {share} of a core)"
    ).format(
        rank=summary["rank"],
        host=summary["host"],
        phases=parts,
        steps=summary["steps"],
        share=f"{share:.0%}" if share is not None else _("n/a"),
    )
