"""Checks of stage 3 (ChainerMN), on two real MPI ranks of this machine.

Each check finds all the stage-3 functions through the notebook (the namespace of the function
it is given; ones not written yet act as stubs), runs them once under `mpiexec -n 2` with
course.notebook.checks.mn_probe, and caches those facts until a function's source changes: the other
checks of the notebook then cost nothing.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from course import stages
from course.cluster import mpi
from course.errors import JobError
from course.notebook import scripts
from course.notebook.checks import call, expect, fail, passed

TIMEOUT = 120  # seconds for the two-rank run; a rank stuck in a collective is the usual cause
_facts: dict[str, dict] = {}


def probe(function) -> dict:
    """The two-rank facts for the stage-3 functions of `function`'s notebook (cached)."""
    __tracebackhide__ = True
    namespace = function.__globals__
    text = scripts.assemble_script("multi_node", {name: namespace.get(name)
                                                  for name in stages.MULTI_NODE.functions})
    key = hashlib.sha256(text.encode()).hexdigest()
    if key in _facts:
        return _facts[key]
    try:
        mpiexec = mpi.mpiexec()
    except JobError as e:
        fail(f"{e.message}, so the two-rank check cannot run", e.hint)
    env = mpi.local_run_environment(CHAINERMN_FORCE_ABORT_ON_EXCEPTION="")
    with tempfile.TemporaryDirectory(prefix="course-probe-") as tmp:
        module = Path(tmp) / "stage3_functions.py"
        module.write_text(text)
        try:
            run = subprocess.run([mpiexec, "-n", "2", "--oversubscribe", sys.executable, "-m",
                                  "course.notebook.checks.mn_probe", str(module)], capture_output=True, text=True,
                                 timeout=TIMEOUT, env=env, cwd=tmp)
        except subprocess.TimeoutExpired:
            fail(f"the two-rank run of your functions did not finish in {TIMEOUT} s",
                 "a rank is probably waiting in a collective call (scatter, allreduce, bcast) that the other rank "
                 "never makes: every rank must call scatter_dataset, the optimizer and the evaluator")
    lines = run.stdout.strip().splitlines()
    try:
        facts = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        fail(f"the two-rank run failed (exit status {run.returncode}): {run.stderr.strip()[-800:]}",
             "run the cells above again; if it persists, run python -m course doctor")
    _facts[key] = facts
    return facts


def _part(function, name: str) -> list[dict]:
    """One part's facts from both ranks; CheckFailed with the student's error if it raised."""
    __tracebackhide__ = True
    facts = probe(function)
    for rank, found in enumerate(facts["ranks"]):
        errors = found["errors"]
        if "module" in errors:
            fail(f"the functions could not be loaded: {errors['module']}")
        if name in errors:
            if errors[name].startswith("NotImplementedError"):
                where = errors[name].split("(line", 1)[-1].rstrip(")")
                raise NotImplementedError(f"the PUT YOUR CODE HERE stub is still there (line{where}): write the "
                                          "function, then run this check again")
            fail(f"on rank {rank}: {errors[name]}", "the line named above raised it while two ranks ran your functions")
    return [found[name] for found in facts["ranks"]]


def communicator(make_communicator) -> None:
    __tracebackhide__ = True
    ranks = _part(make_communicator, "communicator")
    expect(all(r["class"] and r["class"].endswith("Communicator") for r in ranks),
           f"make_communicator returned {ranks[0]['class']}, not a ChainerMN communicator",
           "chainermn.create_communicator(name)")
    expect([r["size"] for r in ranks] == [2, 2] and sorted(r["rank"] for r in ranks) == [0, 1],
           f"on two ranks the communicator says size {ranks[0]['size']}, ranks {[r['rank'] for r in ranks]}",
           "create it over all ranks: chainermn.create_communicator(name)")
    expect(ranks[0]["class"] == "NaiveCommunicator", f"make_communicator('naive') made a {ranks[0]['class']}",
           "pass the name on: chainermn.create_communicator(name)")
    passed("make_communicator: a ChainerMN communicator over both ranks (size 2, ranks 0 and 1)")


def device_binding(device_for_rank) -> None:
    __tracebackhide__ = True
    ranks = _part(device_for_rank, "devices")
    gpu = [r["gpu"] for r in ranks]
    expect(gpu == [f"@cupy:{r['intra_rank']}" for r in ranks],
           f"with GPUs the two ranks of one node would use {gpu}",
           "each rank drives the GPU of its number within the node: '@cupy:%d' % comm.intra_rank "
           "(comm.rank counts across all nodes and would point past the node's GPUs)")
    cpu = [r["cpu"] for r in ranks]
    expect(cpu == ["@numpy", "@numpy"], f"without GPUs the ranks would use {cpu}", "on CPUs every rank uses '@numpy'")
    passed(f"device_for_rank: one GPU per rank of a node ({', '.join(gpu)}), '@numpy' on CPUs")


def scatter(shard_datasets) -> None:
    __tracebackhide__ = True
    ranks = _part(shard_datasets, "shards")
    for split, total in (("train", 64), ("test", 32)):
        parts = [r[split] for r in ranks]
        if None in parts:
            fail(f"rank {parts.index(None)} has no {split} set (None): only rank 0 loads the data",
                 f"chainermn.scatter_dataset({split}, comm{', shuffle=True' if split == 'train' else ''}) "
                 "sends every rank its own part")
        together = [i for p in parts for i in p]
        expect(len(together) == len(set(together)), f"both ranks got some of the same {split} examples "
               f"({len(set(parts[0]) & set(parts[1]))} shared)",
               "only rank 0 has the data: chainermn.scatter_dataset(data, comm) sends each rank its own part")
        expect(sorted(together) == list(range(total)),
               f"the ranks' {split} parts hold {len(set(together))} of the {total} examples",
               f"scatter the whole {split} set: chainermn.scatter_dataset({split}, comm"
               f"{', shuffle=True, seed=seed' if split == 'train' else ''})")
    first = ranks[0]["train"]
    expect(first != list(range(len(first))),
           f"rank 0's training part is the first {len(first)} examples in their stored order: it is not shuffled",
           "a data set stored by class would give each rank other classes: "
           "chainermn.scatter_dataset(train, comm, shuffle=True, seed=seed)")
    expect(all(r["same_seed"] == r["train"] for r in ranks),
           "two calls with the same seed split the training set differently, so runs cannot be repeated",
           "pass the seed on: chainermn.scatter_dataset(train, comm, shuffle=True, seed=seed)")
    expect(any(r["other_seed"] != r["train"] for r in ranks),
           "another seed gives the same split: the seed is not used", "shuffle=True, seed=seed")
    passed(f"shard_datasets: each rank gets its own shuffled half (train {len(ranks[0]['train'])} + "
           f"{len(ranks[1]['train'])}, test {len(ranks[0]['test'])} + {len(ranks[1]['test'])}), together all of "
           "it, the same for the same seed")


def optimizer(make_optimizer) -> None:
    __tracebackhide__ = True
    ranks = _part(make_optimizer, "optimizer")
    expect(all(r["class"] == "_MultiNodeOptimizer" for r in ranks),
           f"make_optimizer returned a {ranks[0]['class']}, which does not exchange gradients between ranks",
           "wrap it: chainermn.create_multi_node_optimizer(optimizer, comm)")
    expect(all(r["target_is_model"] for r in ranks), "the optimizer is not set up on the model",
           "call optimizer.setup(model) on what create_multi_node_optimizer returns")
    expect(all(r["lr"] is not None and abs(r["lr"] - 0.1) < 1e-9 for r in ranks),
           f"with args.lr = 0.1 on 2 ranks the optimizer starts at {ranks[0]['lr']}",
           "start at args.lr, the single-worker rate: learning_rate_schedule (and --lr-rule) scales it up")
    weights = [r["weights"] for r in ranks]
    expect(abs(weights[0] - weights[1]) <= 1e-5 * max(1.0, abs(weights[0])),
           "after one update on different data the ranks' weights differ", "the allreduce must average the gradients")
    passed("make_optimizer: a multi-node optimizer at args.lr; after an update on different data both ranks hold "
           "the same weights")


def trainer(build_trainer) -> None:
    __tracebackhide__ = True
    ranks = _part(build_trainer, "trainer")
    expect(all(r["updater"] == "StandardUpdater" for r in ranks), f"the updater is a {ranks[0]['updater']}",
           "ChainerMN uses the usual StandardUpdater: the multi-node optimizer does the communication")
    expect(all(r["evaluators"] == 1 for r in ranks), "every rank needs one Evaluator",
           "extensions.Evaluator(test_iter, model, device=device), wrapped for ChainerMN")
    a, b = (r["evaluation"] for r in ranks)
    expect(a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 1e-6 * max(1.0, abs(a[k])) for k in a),
           "the ranks evaluate only their own test part and report different results",
           "chainermn.create_multi_node_evaluator(evaluator, comm) averages them over the ranks")
    expect(all(r["throughput_images"] == 16 for r in ranks),
           f"Throughput counts {ranks[0]['throughput_images']} images per step; 2 ranks x 8 move 16",
           "course.Throughput(args.batchsize, comm=comm)")
    reports = [{"LogReport", "PrintReport"} & set(r["extensions"]) for r in ranks]
    expect(reports[0] == {"LogReport", "PrintReport"}, "rank 0 has no LogReport and PrintReport",
           "add them on rank 0: the log should hold one table")
    expect(not reports[1], f"rank 1 also reports ({', '.join(sorted(reports[1]))}), so every line would be "
           "printed once per rank", "add LogReport and PrintReport only when comm.rank == 0")
    expect(all(r["out"] for r in ranks), "the trainer writes to another folder than args.out", "out=args.out")
    passed("build_trainer: StandardUpdater, a multi-node Evaluator (same result on both ranks), Throughput over "
           "both ranks, LogReport and PrintReport on rank 0 only")


def _rates_used(extension, base_lr: float, updates: int) -> list[float]:
    """The learning rate of each of `updates` updates of a small trainer that has `extension`."""
    import chainer
    import chainer.links as L
    from chainer import training

    from course.notebook.checks import labelled_dataset

    model = L.Classifier(L.Linear(None, 10))
    optimizer = chainer.optimizers.MomentumSGD(base_lr)
    optimizer.setup(model)
    used: list[float] = []
    optimizer.add_hook(lambda opt: used.append(float(opt.lr)), name="record_lr")  # runs inside each update
    iterator = chainer.iterators.SerialIterator(labelled_dataset(8, size=4), 4)
    trainer = training.Trainer(training.updaters.StandardUpdater(iterator, optimizer), (updates, "iteration"),
                               out=tempfile.mkdtemp(prefix="course-check-"))
    trainer.extend(extension, name="learning_rate_schedule")
    trainer.run(show_loop_exception_msg=False)
    return used


def learning_rate_schedule(schedule, base_lr: float = 0.1, n_workers: int = 4, warmup_iterations: int = 8) -> None:
    """The rates the optimizer really uses: base_lr at the first update, n_workers x base_lr after the warm-up."""
    __tracebackhide__ = True
    import chainer

    extension = call(schedule, base_lr, n_workers, warmup_iterations)
    expect(isinstance(extension, chainer.training.Extension) or callable(extension),
           f"learning_rate_schedule returned {type(extension).__name__}, not a trainer extension",
           "return extensions.LinearShift('lr', (first, last), (0, warmup_iterations))")
    updates = warmup_iterations + 4
    used = _rates_used(extension, base_lr, updates)
    ramp = [base_lr * (1 + (n_workers - 1) * min(t, warmup_iterations) / warmup_iterations) for t in range(updates)]
    shown = ", ".join(f"{r:.3g}" for r in used)
    target = base_lr * n_workers

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= 1e-6 * max(1.0, abs(b))

    expect(len(used) == updates, f"{len(used)} updates ran instead of {updates}")
    expect(close(used[-1], target) or not close(used[-1], base_lr),
           f"with {n_workers} workers the rate stays at the single-worker rate {base_lr} (rates used: {shown}): "
           "no scaling", f"the linear scaling rule: end at base_lr x n_workers = {target:g}")
    expect(close(used[-1], target), f"after the warm-up the rate is {used[-1]:.3g}, not base_lr x n_workers = "
           f"{target:g} (rates used: {shown})", "end the ramp at base_lr * n_workers")
    expect(close(used[0], base_lr), f"the first update used the rate {used[0]:.3g}, not the single-worker rate "
           f"{base_lr} (rates used: {shown}): no warm-up, so the first updates of a large batch take too large "
           "steps", "start the ramp at base_lr: LinearShift('lr', (base_lr, base_lr * n_workers), "
           "(0, warmup_iterations))")
    expect(all(close(a, b) for a, b in zip(used, ramp)),
           f"the rates used were {shown}; a linear ramp over {warmup_iterations} updates gives "
           f"{', '.join(f'{r:.3g}' for r in ramp)}", "grow the rate linearly over warmup_iterations updates")
    passed(f"learning_rate_schedule: the rate ramps linearly from {base_lr} to {target:g} over {warmup_iterations} "
           f"updates, then stays ({shown})")


# Sites unlike the course's own, so that lines copied from the job script's defaults do not pass.
_OTHER_SITES = (("pbs-gpu", "h-regular", "gt00", 2, 2, "00:20:00"),  # the seed hands-on's machine, 2 nodes x 2 GPUs
                ("no-queue", None, None, 4, 1, "01:30:00"),
                ("queue-only", "short", None, 1, 8, "00:05:00"))


def resource_request(function, cases=_OTHER_SITES, folder: Path = Path(".")) -> None:
    """The #PBS lines of resource_request(site, nodes, ranks_per_node, walltime), read with the kit's
    directive parser, for this folder's site (when a profile is applied) and for `cases`."""
    __tracebackhide__ = True
    from course.cluster import siteenv
    from course.errors import CourseError
    from course.notebook import directives

    sites = [(directives.Site(name, queue, group), nodes, ranks, walltime)
             for name, queue, group, nodes, ranks, walltime in cases]
    if (Path(folder) / "jobs" / siteenv.FILE).is_file():
        sites.insert(0, (directives.applied_site(folder), *directives.request_shape(folder), "00:15:00"))
    for site, nodes, ranks, walltime in sites:
        lines = call(function, site, nodes, ranks, walltime)
        try:
            directives.check(lines, site, nodes, ranks, walltime)
        except CourseError as e:
            fail(f"for {site!r}, {nodes} node(s) x {ranks} rank(s), {walltime}: {e.message}", e.hint)
    passed(f"resource_request: the right #PBS lines for {len(sites)} sites and shapes, "
           f"e.g. {' | '.join(call(function, *sites[0]))}")
