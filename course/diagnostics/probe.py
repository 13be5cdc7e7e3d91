"""Inside a job of `python -m course site verify`: what a compute node has, as one log line.

    python -m course.diagnostics.probe

It prints PREFIX followed by a JSON object: the node's host name, the versions of Python and the
course's libraries as this node imports them (or why one does not import), the GPUs it sees, whether
the data set the jobs use (COURSE_DATASET) can be read here, and on a GPU node the GPU self-test's
lines. It also writes STDERR_MARK to stderr, so that the reader can tell that the job's stderr was
joined into its log (qsub -j oe). It always exits 0: what it found is for the reader to judge.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import sys

PREFIX = "course site probe: "
STDERR_MARK = "course site probe, on stderr: this line was written to the job's stderr"
LIBRARIES = ("chainer", "chainermn", "cupy", "mpi4py")


def _versions() -> tuple[dict[str, str | None], dict[str, str]]:
    """({library: version, None where it is not installed}, {library: why it did not import})."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    errors: dict[str, str] = {}
    for name in LIBRARIES:
        try:
            module = importlib.import_module(name)
            found[name] = getattr(module, "__version__", "?")
        except ModuleNotFoundError as e:
            found[name] = None
            if name != "cupy" or e.name != "cupy":  # CuPy is optional: absent is not an error
                errors[name] = f"{type(e).__name__}: {e}"
        except Exception as e:  # a library that is there but fails to load is the finding
            found[name] = None
            errors[name] = f"{type(e).__name__}: {e}"
    if found.get("mpi4py"):
        try:
            import mpi4py

            mpi4py.rc.initialize = False  # the library's version needs no MPI_Init
            from mpi4py import MPI

            found["mpi"] = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
        except Exception as e:
            found["mpi"] = None
            errors["mpi"] = f"{type(e).__name__}: {e}"
    return found, errors


def _dataset() -> dict:
    from course.errors import CourseError
    from course.runtime import data

    name = os.environ.get("COURSE_DATASET") or "auto"
    try:
        resolved = data.resolve(name)
        found = data.info(resolved)
    except CourseError as e:
        return {"name": name, "readable": False, "error": e.message, "hint": e.hint or ""}
    except OSError as e:
        return {"name": name, "readable": False, "error": str(e), "hint": ""}
    return {
        "name": resolved,
        "readable": True,
        "path": str(found.path),
        "train": found.n_train,
        "test": found.n_test,
    }


def _gpus() -> dict:
    from course import gpu

    found = gpu.visible_gpus()
    return {
        "count": found.count,
        "names": list(found.names),
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def probe() -> dict:
    versions, errors = _versions()
    facts: dict = {"host": platform.node(), "versions": versions, "import_errors": errors}
    facts["gpus"] = _gpus()
    facts["dataset"] = _dataset()
    if facts["gpus"]["count"]:
        from course.diagnostics import selftest

        lines: list[str] = []
        status = selftest.run(echo=lines.append)
        facts["selftest"] = {"status": status, "lines": lines}
    return facts


def main() -> int:
    print(STDERR_MARK, file=sys.stderr, flush=True)
    print(PREFIX + json.dumps(probe()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
