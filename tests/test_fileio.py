"""Atomic writes (course.fileio): a reader never sees half a file, whatever stops the writer."""

from __future__ import annotations

import signal
import subprocess
import threading

from course.fileio import atomic_file
from tests.helpers import PYTHON

# Writes the first MB of a file, says so, then waits for the rest, which never comes.
WRITER = """
import signal, sys
from pathlib import Path
from course.fileio import atomic_file
if sys.argv[2] == "own-handler":
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(3))
with atomic_file(Path(sys.argv[1])) as f:
    f.write(b"x" * (1 << 20))
    f.flush()
    print("writing", flush=True)
    sys.stdin.read()
    f.write(b"end")
"""


def terminate_mid_write(folder, handler: str) -> int:
    writer = subprocess.Popen(
        [PYTHON, "-c", WRITER, str(folder / "data.npz"), handler],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline() == "writing\n"
        [partial] = folder.iterdir()
        assert partial.name.startswith(".data.npz.") and partial.stat().st_size == 1 << 20
        writer.send_signal(signal.SIGTERM)  # as `course cancel` or a walltime does
        return writer.wait(timeout=60)
    finally:
        writer.kill()
        writer.wait()


def test_a_writer_killed_by_sigterm_leaves_no_partial_file(tmp_path):
    assert (
        terminate_mid_write(tmp_path, "default") == -signal.SIGTERM
    )  # it still dies by the signal
    assert list(tmp_path.iterdir()) == []


def test_a_program_s_own_sigterm_handler_is_kept(tmp_path):
    assert terminate_mid_write(tmp_path, "own-handler") == 3
    assert list(tmp_path.iterdir()) == []


def test_writes_from_threads_work_and_sigterm_is_given_back(tmp_path):
    before = signal.getsignal(signal.SIGTERM)

    def write():
        with atomic_file(tmp_path / "from-thread.txt", "w") as f:
            f.write("done")

    thread = threading.Thread(target=write)
    thread.start()
    thread.join()
    with atomic_file(tmp_path / "from-main.txt", "w") as f:
        f.write("done")
    assert signal.getsignal(signal.SIGTERM) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["from-main.txt", "from-thread.txt"]
