"""Every student-facing string of the modules marked for translation goes through `_()`
(course.instructor.i18n_catalog.MARKED): a string literal or f-string with words in it, outside a
docstring and outside `_()`, must be in this file's allowlist (machine tokens, internal errors,
names). And what `_()` is given is one literal with named placeholders only: an f-string or a
positional `{}` could never be looked up or reordered."""

from __future__ import annotations

import ast
import re
import string
from pathlib import Path

import pytest

from course.instructor.i18n_catalog import MARKED

ROOT = Path(__file__).resolve().parent.parent
_WORDS = re.compile(r"[A-Za-z]{2,}[ ,:;'-]+[A-Za-z]{2,}")

# Strings of the marked modules that are not prose for a student, and why.
ALLOWED = {
    # internal: a kit bug, never a student's (the checks' own use of observe)
    "a check observes the student's functions, all of them remote or none",
    # the prog names of the command and its module, as typed
    "course doctor",
    "course.diagnostics.doctor",
    # what CuPy's compiler prints, matched to find the cause
    "cannot open source file",
    "no CUDA headers",
    # the snapshot file name pattern the next job looks for
    "snapshot_iter_{.updater.iteration}",
    # an option and commands, typed as they are in any language
    "--gpu-selftest",
    "python -m course site apply <profile>",
    'pip install "nvidia-cuda-runtime-cu12=={}.*"',
    # the run-part check's simulated site and scratch folder: names, not prose
    "pbs-gpu",
    "course-run-part-",
    # internal: a kit bug, never a student's (a run-part case written wrong; a module attribute
    # that does not exist, in Python's own words)
    "a case's local_dir is $NAME, not {}",
    "module {} has no attribute {}",
    # the verdict token NOT YET, kept as OK: is (what follows it is translated)
    "NOT YET: ",
    "NOT YET: {missing}\n  -> {todo}",
    # the report's columns: the rows' keys (their headings are translated where they are shown)
    "time to target",
    "TTA speedup",
    "GPU model",
    # HTML and matplotlib's own words
    'style="white-space: nowrap"',
    "axes fraction",
    "upper left",
    # the prog names of the commands, as typed
    "course report",
    "course handin",
    "python -m course site apply {}",
    # nbgrader's log line once a submission is in the exchange, matched to tell it was
    "Submitted as:",
    # what Open MPI's mpirun prints of a map, matched to read it, and its options, as typed
    "Data for node: (\\S+)",
    "Local rank: (\\d+).*App rank: (\\d+)",
    "course-map-",
    "--do-not-launch",
    "--map-by",
    "--bind-to",
    "--rank-by",
    "--cpus-per-proc",
    "--cpus-per-rank",
    "--cpu-set",
    "--use-hwthread-cpus",
    "--launch-agent",
    "--stream-buffering",
    "--report-bindings",
    "--display-map",
    "-display-map",
    "--tag-output",
    "--timestamp-output",
    "--merge-stderr-to-stdout",
    "--allow-run-as-root",
    "--show-progress",
    # the code of a job's training script (its comment and the stub's words are translated)
    "import course  # {first}\nimport chainer\nimport chainer.functions as F\n"
    "import chainer.links as L\nimport numpy as np\nfrom chainer import training\n"
    "from chainer.training import extensions\n{extra}\nfrom course.runtime import harness\n",
    "def {}(*args, **kwargs):\n    raise NotImplementedError({})\n",
    "def main(",
    # how jobend and the local scheduler's supervisor word a job's end (English in the log and the
    # record), looked up by course.cluster.diagnosis.how_ended to translate them
    r"ended with exit status (?P<status>-?\d+)|was killed by (?:PBS: (?P<why>.+)|(?P<signal>\S+))",
    "was killed at its walltime",
    "was requeued by the scheduler",
    "was stopped: a node of it failed",
    "was lost: its scheduler process died",
    "was cancelled",
    "could not start",
    # what bash, Open MPI, Slurm, PBS and qstat print, matched to find the cause or the state
    r"^.*No such file or directory.*$",
    r"^(?P<file>\S+): line (?P<line>\d+): syntax error(?P<what>.*)$",
    r"^(?:\S+: )?(?:Unknown option: |unrecognized option ')(?P<option>[^\s']+)'?$",
    r"^(?P<file>\S+): line (?P<line>\d+): (?P<command>.+): command not found$",
    r"(?P<launcher>\w+) was unable to find the specified executable file[\s\S]*?Executable: "
    r"(?P<exe>\S+)",
    r"(?P<launcher>\w+) noticed that process rank (?P<rank>\d+) with PID \d+ on node "
    r"(?P<node>\S+) exited on\s+signal (?P<signal>\d+) \((?P<name>[^)]*)\)",
    "Nodes required for job are DOWN",
    r"ineligible state: (?P<state>\w+)",
    "Can Never Run",
    r"Insufficient amount of (?:\w+ )?resource|too few free|free nodes",
    "reservation|top job",
    "Queue not started",
    "Unknown Job Id",
    "Invalid job id",
    "has finished",
    "Job has been deleted",
    # prog names, options, commands and launcher words, typed as they are in any language
    "course submit",
    "course launch",
    "course cancel",
    "--no-wait",
    "--stage-data",
    "{}:overload-allowed",
    "python -m course cancel {}",
    "python -m course launch -- python train.py ...",
    # file and folder names of the local scheduler and the budget's ledger
    "course-kit",
    "course-launch-",
    "job-counter",
    "submitted-jobs.json",
    # the budget's kinds: keys of course.cluster.usage.limits (translated where they are shown)
    "node-hours",
    "GPU-hours",
    # the prefix of the watchdog's lines in a job log (its hang line: course.contracts.jobend)
    "course: watchdog: ",
    # a heartbeat's file name and the watchdog thread's name, never shown as prose
    ".watchdog-rank{}.json",
    "course-watchdog",
    # the other sites' names a stage-3 check passes to resource_request, as a site profile has them
    # (and "pbs-gpu", above)
    "no-queue",
    "queue-only",
    # mpiexec's options, a command the probe's sandbox runs, and a job id it fakes
    "mpiexec true",
    "1.course-check",
    # the prefixes of the checks' temporary folders
    "course-check-",
    "course-probe-",
    # internal: a kit bug, never a student's (a layout the checks never ask for, a forged cache
    # entry from the grader's own channel, the probe's ranks not where the kit put them)
    "no such layout: {}",
    "not a cached probe run: {}",
    "the ranks on the job's nodes {} (hosts {})",
    "the probe's simulated nodes",
    "{} did not take the layout: the kit's communicator has intra ranks {}, not {} ({})",
    # the command a job's account comes from (shown as it is typed) and sacct's field names
    "scontrol show job",
    "User,NNodes,AllocTRES,ElapsedRaw",
    # the launcher a rank's protocol line names (course.contracts.joblog.wrong_launcher); the hint
    # says it in the student's language
    "the mpiexec of {}",
    # how the local scheduler's supervisor words a job's end in its record (as jobend does; see
    # above), translated by course.cluster.diagnosis.how_ended
    "was killed by {}",
    "ended with exit status {}",
    # the markers of the directive block that `site apply` rewrites, a directive, an option and
    # the command's prog name and command line, as typed
    "# >>> site directives: written by `python -m course site apply` >>>",
    "# <<< site directives <<<",
    "#SBATCH --open-mode=append",
    "--open-mode",
    "course site",
    "python -m course site verify",
    # the lines of jobs/site_env.sh that SiteSettings.from_shell finds the setup by (its other
    # comments are translated), and a command it runs
    ": # nothing to load: jobs inherit the submitting environment",
    "# Software: modules and the kit's Python environment.\n",
    "# Data and training defaults, the same at every stage so that the stages compare.",
    "\n\n# Data and training defaults",
    'eval "$(python -m course env)"',
    # the JSON Schema dialect a site profile's schema is written in
    "https://json-schema.org/draft/2020-12/schema",
    # schema ids and JSON Schema's own, which the kit reads back
    "course-results/2",
    "course-model-parallel/1",
    "http://json-schema.org/draft-07/schema#",
    # the model-parallel job's protocol line in its log, and its parser
    "course: model_parallel {} sha256={} | {} rank(s)",
    r"^course: model_parallel (?P<path>\S+) sha256=(?P<sha256>[0-9a-f]{64}) \| "
    r"(?P<ranks>\d+) rank\(s\)$",
    # argparse's usage line (as it begins every command's help), a command's name, prog names and
    # options, typed as they are in any language
    "usage: python -m course COMMAND [-h] [...]",
    "class-report",
    "course data",
    "course env",
    "course kernels",
    "--lr-rule",
    "--lr-warmup-epochs",
    "--lr-drop-epochs",
    "--no-eval",
    "--device-as-default-execution-space",
    # the members of the CIFAR-10 python archive
    "cifar-10-batches-py/data_batch_{}",
    "cifar-10-batches-py/test_batch",
    # the GPU self-test's scratch folder
    "course-selftest-",
    # code: the CUB kernel's CUDA source, a kernel's origin named as the others' modules are, the
    # shell line of `course env`, what the GPU probes run and what they match in ompi_info and
    # CuPy's warnings
    "\n#include <cub/block/block_reduce.cuh>\n#include <cub/block/block_load.cuh>\n"
    'extern "C" __global__ void course_cub_sum(const float* x, float* out, int n) {\n'
    "  typedef cub::BlockLoad<float, 256, 4, cub::BLOCK_LOAD_DIRECT> Load;\n"
    "  typedef cub::BlockReduce<float, 256> Reduce;\n"
    "  __shared__ typename Load::TempStorage load_storage;\n"
    "  __shared__ typename Reduce::TempStorage reduce_storage;\n"
    "  float items[4];\n"
    "  Load(load_storage).Load(x + blockIdx.x * 1024, items, n - blockIdx.x * 1024, 0.0f);\n"
    "  float total = Reduce(reduce_storage).Sum(items);\n"
    "  if (threadIdx.x == 0) atomicAdd(out, total);\n"
    "}\n",
    "cupy (CUB reductions)",
    'export LD_LIBRARY_PATH="{}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"',
    "nvidia-smi",
    "--query-gpu=index,uuid,name,driver_version",
    "--query-gpu=index,uuid,{}",
    "--format=csv,noheader",
    "import cupy; r = cupy.cuda.runtime; n = r.getDeviceCount(); "
    "print('\\n'.join(r.getDeviceProperties(i)['name'].decode() for i in range(n)))",
    "_built_with_cuda_support:value:(true|false)",
    r"\s*nccl library could not be loaded",
    # matched by course doctor to give its fix (the cause it shows is CuPy's English anyway)
    "CuPy finds no CUDA headers: {}",
    # the site probe's marks in a job log, which `course site verify` looks for
    "course site probe: ",
    "course site probe, on stderr: this line was written to the job's stderr",
    # the verifier's flags for the instructor (course grade's report, never a graded notebook's
    # outputs): English whatever the edition, like the rest of the instructor's report
    "the test cell {test} is missing from the submission (deleted, or its nbgrader marks changed): "
    "graded on the instructor's copy, which nbgrader put back",
    "the submission holds {}, which would shadow the kit's {} package in a kernel (the grader "
    "ignores it)",
    "timed out",
    "killed by {}",
    "exit status {}",
    "met the limit of {} processes",
    "met the memory limit of {} GiB (its processes together)",
    "the test's process ended without a result ({})",
    "; it uses {}",
    "{}: a syntax error at line {} ({}): its functions are missing",
    "{}: {} has a decorator, which would run code of its own: left out",
    "{}: {} computes a default value, which would run code: left out",
    "{}: {} does what the exercise never needs ({}): read it",
    "{}: line {} runs code outside a function (left out: only the functions are graded){}",
    # a name the verifier flags in a student's def (an import of the kit), and the file names of
    # the cells it compiles, as Python's tracebacks show them
    "import course",
    "<test cell>",
    "<setup cell>",
    # the instructor's: the grading sandbox refused before anything is graded, a traitlets option's
    # help, nbgrader's own log line (its words), the verifier's scratch folder
    "the grading sandbox does not start here: {}",
    "grading needs unprivileged user namespaces or root for bubblewrap (or {}=off, knowing the "
    "risk)",
    "seconds a test cell may run in the verifier",
    "Missing grade cell %s, adding it to the notebook",
    "course-verify-",
    # internal: a kit bug or the grader's machine, never a student's (the verifier's processes
    # speaking their protocol wrongly, a hidden part not given, the worker's pipes, nbgrader's
    # steps not the ones the kit was written for)
    "the grader's process for this submission answered wrongly: {}",
    "the grader's process for this submission asked wrongly ({})",
    "the grader's hidden part is not text",
    "the grader gave no hidden part for this test",
    "the grader could not protect its pipes (prctl: errno {})",
    "nbgrader changed",
    "nbgrader's feedback steps changed",
    # the verifier's protocol: the worker's request for a hidden part, and what a record's field
    # should be, in the ProtocolError a kit bug raises
    "hidden part of",
    "true or false",
    "an object",
    "outputs (objects with an output_type)",
    "a list of {}",
    "an object of {}",
    "{}: expected a JSON object, got {}",
    "probe facts",
    "an observer's module:name under {}",
    "JSON data",
    "null or an object with a name, a message, notes and a message's record",
    "a message's record",
    "a message's record or null",
    "messages' records",
    "lists of outputs",
    "lists of strings",
    "{}.{}: {} is not {}",
    "{}: not JSON ({}): {}",
    "missing field(s) {}",
    "unknown field(s) {}",
    # the allreduce benchmark's schema id, its protocol line in a job log, and its parser
    "course-allreduce/1",
    "course: allreduce {} sha256={} | {} on {} rank(s)",
    r"^course: allreduce (?P<path>\S+) sha256=(?P<sha256>[0-9a-f]{64}) \| "
    r"(?P<algorithm>\w+) on (?P<ranks>\d+) rank\(s\)$",
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _translated(tree: ast.AST) -> tuple[set[int], list[ast.Call]]:
    """The ids of every node inside a `_()` call, and the calls."""
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("_", "N_")
    ]
    return {id(inner) for call in calls for inner in ast.walk(call)}, calls


def _text(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return str(node.value)
    assert isinstance(node, ast.JoinedStr)
    return "".join(_text(part) if isinstance(part, ast.Constant) else "{}" for part in node.values)


def untranslated(path: Path) -> list[str]:
    """'line: text' of each string with words in `path` that is neither translated nor allowed."""
    tree = ast.parse(path.read_text())
    inside, _ = _translated(tree)
    skipped = inside | _docstrings(tree)
    parts = {id(p) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for p in n.values}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped or id(node) in parts:
            continue
        if isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant) and isinstance(node.value, str)
        ):
            text = _text(node)
            if _WORDS.search(text) and text not in ALLOWED:
                found.append(f"{path.name}:{node.lineno}: {text!r}")
    return found


def badly_marked(path: Path) -> list[str]:
    """`_()` calls given anything but one plain literal with named placeholders, or inside an
    f-string (where Babel's extractor does not look: the message would never reach the catalog)."""
    tree = ast.parse(path.read_text())
    _, calls = _translated(tree)
    in_f_strings = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for inner in ast.walk(node)
    }
    found = [
        f"{path.name}:{call.lineno}: _() inside an f-string"
        for call in calls
        if id(call) in in_f_strings
    ]
    for call in calls:
        [argument] = call.args
        if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
            found.append(f"{path.name}:{call.lineno}: _() of a {type(argument).__name__}")
        elif any(
            f == "" or f.isdigit()
            for _, f, _, _ in string.Formatter().parse(argument.value)
            if f is not None
        ):
            found.append(f"{path.name}:{call.lineno}: a positional placeholder")
    return found


@pytest.mark.parametrize("module", MARKED)
def test_every_message_of_a_marked_module_goes_through_gettext(module):
    found = untranslated(ROOT / module) + badly_marked(ROOT / module)
    assert not found, "\n".join(found)


def test_the_lint_finds_an_unmarked_message_and_an_f_string_inside_gettext(tmp_path):
    module = tmp_path / "planted.py"
    module.write_text(
        'def f(n):\n    """A docstring with words."""\n'
        '    expect(n, _("the trainer needs {n} epochs").format(n=n), "an English hint")\n'
        '    fail(_(f"{n} snapshots"), _("{} positional"))\n'
        "    say(f\"{n}: {_('not extracted')}\")\n"
    )
    assert [line.split(": ")[0] for line in untranslated(module)] == ["planted.py:3"]
    assert len(badly_marked(module)) == 3
