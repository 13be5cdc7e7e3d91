"""The watchdog's parts (course.runtime.watchdog): its setting, the heartbeats, what a watcher
concludes from them, and where a thread is. tests/test_hang.py runs it in real jobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from course.contracts.jobend import Hang
from course.errors import CourseError
from course.runtime import watchdog
from course.runtime.watchdog import Beat

LIMIT = 600.0  # seconds


def beat(rank: int, still: float = LIMIT, waiting: bool = True, where: str = "") -> Beat:
    return Beat(rank, count=7, iteration=37, still=still, waiting=waiting, where=where)


@pytest.mark.parametrize("text, minutes", [(None, 10.0), ("", 10.0), ("2.5", 2.5), ("0", 0.0)])
def test_the_limit_is_its_variable_in_minutes(text, minutes):
    environ = {} if text is None else {watchdog.LIMIT_VARIABLE: text}
    assert watchdog.limit_minutes(environ) == minutes


@pytest.mark.parametrize("text", ["ten", "-1", "inf", "nan"])
def test_a_limit_that_is_no_number_of_minutes_is_refused_with_how_to_set_it(text):
    with pytest.raises(CourseError) as raised:
        watchdog.limit_minutes({watchdog.LIMIT_VARIABLE: text})
    assert raised.value.message == f"COURSE_HANG_MINUTES={text} is not a number of minutes"
    assert "(default 10)" in raised.value.hint and "0 for no watchdog" in raised.value.hint


def test_a_stopped_rank_is_named_the_lowest_first():
    me = beat(0, waiting=True)
    found = watchdog.verdict(me, {1: beat(1), 2: None, 3: beat(3)}, [2, 3], LIMIT)
    assert found == Hang(4, 2, 10.0, 37, "stopped")


def test_a_rank_stuck_outside_chainermn_is_named_with_where_it_is():
    others = {1: beat(1), 2: beat(2, waiting=False, where="get_example (train.py, line 9)")}
    found = watchdog.verdict(beat(0), others, [], LIMIT)
    assert found == Hang(3, 2, 10.0, 37, "stuck", "get_example (train.py, line 9)")


def test_every_rank_waiting_in_chainermn_is_a_deadlock():
    assert watchdog.verdict(beat(0), {1: beat(1)}, [], LIMIT) == Hang(2, None, 10.0, 37, "waiting")


@pytest.mark.parametrize(
    "others",
    [
        {1: beat(1, still=LIMIT / 2 - 1, waiting=False)},  # rank 1 still moves: slow, not hung
        {1: None},  # rank 1's heartbeat not read yet, and not silent for the limit
    ],
)
def test_no_hang_while_a_rank_moves_or_is_not_heard_from(others):
    assert watchdog.verdict(beat(0), others, [], LIMIT) is None


def test_a_heartbeat_reads_back_and_a_broken_one_is_none(tmp_path):
    path = watchdog.beat_file(tmp_path, 3)
    assert path.name == ".watchdog-rank3.json" and watchdog.read_beat(path) is None
    path.write_text(json.dumps(asdict(beat(3, where="x"))))
    assert watchdog.read_beat(path) == beat(3, where="x")
    path.write_text('{"rank": 3}')
    assert watchdog.read_beat(path) is None


def blocked_here(event: threading.Event) -> None:
    event.wait(60)


def test_where_a_thread_waits_names_the_call_and_the_scripts_line_that_led_there():
    event = threading.Event()
    thread = threading.Thread(target=blocked_here, args=(event,))
    thread.start()
    try:
        deadline = time.monotonic() + 30
        frame = None
        while frame is None or frame.f_code.co_name != "wait":  # until it sits in Event.wait
            assert time.monotonic() < deadline, "the thread did not reach Event.wait"
            frame = sys._current_frames().get(thread.ident)
        where, waiting = watchdog.place(frame, Path(__file__).resolve())
    finally:
        event.set()
        thread.join()
    line = blocked_here.__code__.co_firstlineno + 1
    assert where.startswith("wait (threading.py, line ")
    assert where.endswith(f", from blocked_here (test_watchdog.py, line {line})") and not waiting


# A training whose third step never gives the GIL back: a regular expression that backtracks for
# ever, in C, holding it (the watchdog's own thread then never runs).
HOLDS_THE_GIL = """
import re, sys
import chainer, chainer.links as L, numpy as np
from chainer import training
from course.runtime import watchdog

class Net(chainer.Chain):
    def __init__(self):
        super().__init__()
        self.calls = 0
        with self.init_scope():
            self.fc = L.Linear(2, 2)

    def forward(self, x):
        self.calls += 1
        if self.calls == 3:
            re.fullmatch(r"(a+)+b", "a" * 64)
        return self.fc(x)

data = chainer.datasets.TupleDataset(np.zeros((8, 2), "f"), np.zeros(8, "i"))
optimizer = chainer.optimizers.SGD()
optimizer.setup(L.Classifier(Net()))
updater = training.updaters.StandardUpdater(chainer.iterators.SerialIterator(data, 4), optimizer)
trainer = training.Trainer(updater, (100, "iteration"), out=sys.argv[1])
with watchdog.watching(trainer):
    trainer.run()
"""


def test_a_training_that_holds_the_gil_for_ever_is_dumped_and_ended_by_faulthandler(tmp_path):
    limit = 3.0  # seconds
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", HOLDS_THE_GIL, str(tmp_path)],
        env={**os.environ, watchdog.LIMIT_VARIABLE: str(limit / 60)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = time.monotonic() - started
    assert done.returncode == 1, done.stderr  # faulthandler's exit, not the kit's EXIT_STATUS
    assert "Timeout (0:00:04)!" in done.stderr, done.stderr  # the limit and two looks
    assert "in fullmatch" in done.stderr and "in forward" in done.stderr, done.stderr
    assert seconds < 120, seconds  # the regular expression alone would run for centuries
