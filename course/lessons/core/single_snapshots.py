"""Stage 1's snapshot check (notebook 01's exercise 4, called as course.lessons.core.single
.snapshots): add_snapshots snapshots the whole trainer every epoch, keeping a few, and a run stopped
early then resumed from its snapshot ends with the weights of a run that was never stopped."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

import course.lessons.core.single_observers as seen
from course.i18n import _
from course.notebook.checks.inputs import hidden_seed
from course.notebook.checks.observe import number, observe
from course.notebook.checks.verdict import expect, passed


def _never_stopped(epochs: int, batchsize: int, seed: int) -> dict[str, list]:
    """The weights after a tiny_trainer of `seed` trained `epochs` epochs in one go, with the kit's
    own snapshots (as a job has them): what a resumed run must end with."""
    from course.runtime import checkpoint

    state = np.random.get_state()  # tiny_trainer seeds NumPy's generator: the notebook's is kept
    try:
        with tempfile.TemporaryDirectory() as tmp:
            whole = seen.tiny_trainer(tmp, epochs, batchsize, seed)
            checkpoint.attach(whole)
            return seen.trained_weights(whole)
    finally:
        np.random.set_state(state)


def snapshots(add_snapshots: Callable[..., Any], epochs: int = 3, batchsize: int = 4) -> None:
    """add_snapshots(trainer) snapshots the whole trainer every epoch, keeping a few, and a run
    stopped early then resumed from its snapshot ends with the weights of a run that was never
    stopped (which this check trains itself)."""
    __tracebackhide__ = True
    inputs = dict(epochs=epochs, batchsize=batchsize, seed=hidden_seed())
    facts = observe(seen.snapshot_facts, add_snapshots, run=False, **inputs)
    found = facts["snapshots"]
    expect(
        len(found) == 1,
        _("add_snapshots added {count} snapshot extensions; one is needed").format(
            count=len(found)
        ),
        _("a job killed at its walltime would start over from epoch 0")
        if not found
        else _("each would write its own files into the same run folder"),
    )
    snapshot = found[0]
    expect(
        snapshot["whole"] is True,
        _(
            "the snapshot saves one object, not the trainer: a resumed run would lose the "
            "optimizer's momentum, the iterator's place in the epoch and the log"
        ),
        _(
            "resuming needs the trainer's whole state: Chainer's reference tells snapshot "
            "(the trainer) from snapshot_object (one object)"
        ),
    )
    expect(
        snapshot["filename"] == "snapshot_iter_{.updater.iteration}",
        _(
            "the snapshots are named {name}; the next job looks for snapshot_iter_<iteration>"
        ).format(name=repr(snapshot["filename"])),
        _("a file under another name is never found, and the job starts over"),
    )
    n_retains = snapshot["n_retains"]
    expect(
        number(n_retains) is not None and n_retains >= 1,
        _("every snapshot is kept, so a long run fills the disk"),
        _(
            "a resumed run needs only the newest snapshot (and one spare, in case a job dies "
            "while writing one); each holds the model and the optimizer's state"
        ),
    )
    period, unit = snapshot["trigger"]
    expect(
        [period, unit] == [1, "epoch"],
        _("the snapshot runs every {period} {unit}(s); take one at every epoch end").format(
            period="?" if period is None else period, unit="?" if unit is None else unit
        ),
        _(
            "a job resumes from the last snapshot: taken less often, the work since then is lost "
            "when the walltime ends the job"
        ),
    )
    facts = observe(seen.snapshot_facts, add_snapshots, run=True, **inputs)
    steps = 4  # tiny_trainer's steps per epoch
    written = facts["files"]
    expect(
        isinstance(written, list)
        and 0 < len(written) <= n_retains
        and f"snapshot_iter_{epochs * steps}" in written,
        _("after {epochs} epochs the run folder holds {count} snapshots (n_retains={kept})").format(
            epochs=epochs, count=len(written), kept=n_retains
        ),
    )
    expect(
        facts["resumed_at"] == (epochs - 1) * steps,
        _(
            "the resumed trainer starts at iteration {found}, not at {wanted} where the snapshot "
            "was taken"
        ).format(found=facts["resumed_at"], wanted=(epochs - 1) * steps),
    )
    expected, got = _never_stopped(epochs, batchsize, inputs["seed"]), facts["weights"]
    differ = [
        name
        for name in expected
        if np.shape(got.get(name)) != np.shape(expected[name])
        or not np.allclose(expected[name], np.asarray(got[name], np.float32), 1e-5, 1e-7)
    ]
    expect(
        not differ and sorted(got) == sorted(expected),
        _(
            "resumed from its snapshot, the run ends with other weights ({names}) than the run "
            "that was never stopped"
        ).format(names=differ[:2]),
    )
    passed(
        _(
            "add_snapshots: the whole trainer at every epoch end, the newest {kept} kept; a run "
            "stopped after {stopped} epochs and resumed from its snapshot ended with the same "
            "weights as a {epochs}-epoch run that was never stopped"
        ).format(kept=n_retains, stopped=epochs - 1, epochs=epochs)
    )
