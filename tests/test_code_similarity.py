"""Solution code two submissions share beyond the solution (course.instructor.code_similarity),
and handed-in notebooks that are links or copies (course.instructor.plagiarism,
submission_files.refused)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat

from course.instructor import code_similarity, demo, plagiarism, submission_files
from tests.helpers import ROOT

SOLUTION = """def shard(train, comm, seed):
    ### BEGIN SOLUTION
    return chainermn.scatter_dataset(train, comm, shuffle=True, seed=seed)
    ### END SOLUTION
"""
STUB = """def shard(train, comm, seed):
    # PUT YOUR CODE HERE
    raise NotImplementedError()
"""
# Unusual code (a hand-made shard), as one student wrote it and a classmate copied it with other
# names and comments.
ODD = """def shard(train, comm, seed):
    order = numpy.random.RandomState(seed + 17).permutation(len(train))
    size = len(train) // comm.size
    mine = order[comm.rank * size:(comm.rank + 1) * size]
    if comm.rank == comm.size - 1:
        mine = order[comm.rank * size:]
    return chainer.datasets.SubDataset(train, 0, len(mine), order=mine)
"""
ODD_RENAMED = """def shard(data, c, s):
    # my own shuffling
    perm = numpy.random.RandomState(s + 17).permutation(len(data))
    n = len(data) // c.size
    part = perm[c.rank * n:(c.rank + 1) * n]
    if c.rank == c.size - 1:
        part = perm[c.rank * n:]
    return chainer.datasets.SubDataset(data, 0, len(part), order=part)
"""
# The same code renamed, its lines reordered, its comparisons and sums turned round.
ODD_REORDERED = """def shard(data, c, s):
    n = len(data) // c.size
    perm = numpy.random.RandomState(17 + s).permutation(len(data))
    part = perm[c.rank * n:(c.rank + 1) * n]
    if c.size - 1 == c.rank:
        part = perm[c.rank * n:]
    return chainer.datasets.SubDataset(data, 0, len(part), order=part)
"""
OTHER = """def shard(train, comm, seed):
    if comm.rank == 0:
        train = chainer.datasets.split_dataset_random(train, len(train), seed=seed)[0]
    else:
        train = None
    return chainermn.scatter_dataset(train, comm, shuffle=True, seed=seed + 1)
"""


def notebook(folder: Path, source: str, name: str = "03_multi_node.ipynb") -> Path:
    cell = nbformat.v4.new_code_cell(source, id="shard")  # a copied file is the same bytes
    cell.metadata["nbgrader"] = {
        "grade": False,
        "solution": True,
        "locked": False,
        "grade_id": "shard_datasets",
        "schema_version": 3,
    }
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), folder / name)
    return folder


def pairs(tmp_path: Path, **sources: str) -> list[code_similarity.Pair]:
    submissions = {
        student: notebook(tmp_path / student / "distributed_training", source)
        for student, source in sources.items()
    }
    bases = [notebook(tmp_path / "source", SOLUTION), notebook(tmp_path / "release", STUB)]
    return code_similarity.similar_pairs(submissions, bases)


def test_reordered_lines_and_turned_comparisons_read_as_the_original():
    def shape(source: str) -> str:  # what copydetect compares: every name one symbol
        return re.sub(r"[A-Za-z_]\w*", "V", code_similarity.canonical(source))

    assert shape(ODD) == shape(ODD_RENAMED) == shape(ODD_REORDERED)
    assert code_similarity.canonical("len(x) > 0") == "0 < len(x)"
    assert code_similarity.canonical("0 < i < n") == "0 < i < n"  # a chain reads one way only


def test_the_same_unusual_code_is_listed_with_its_similarity(tmp_path):
    [pair] = pairs(tmp_path, alice=ODD, bob=ODD_RENAMED, carol=OTHER, dave=SOLUTION)
    assert pair.students == ("alice", "bob") and pair.similarity == 1.0
    assert pair.notebook == "03_multi_node.ipynb" and pair.shared >= code_similarity.MIN_SHARED


def test_a_copy_renamed_reordered_and_turned_round_is_listed(tmp_path):
    [pair] = pairs(tmp_path, alice=ODD, erin=ODD_REORDERED, carol=OTHER, dave=STUB)
    assert pair.students == ("alice", "erin"), pair
    assert pair.similarity >= code_similarity.THRESHOLD, pair


def test_the_solution_written_twice_or_the_stub_left_twice_is_nobodys_copy(tmp_path):
    assert pairs(tmp_path, alice=SOLUTION, bob=SOLUTION, carol=STUB, dave=STUB) == []


def test_code_that_is_not_python_is_compared_as_written():
    assert code_similarity.canonical("def f(:\n  return '") == "def f(:\n  return '"


def with_shard(edition: str, student: Path, code: str) -> Path:
    """The edition's release of notebook 03 with `code` in its shard_datasets cell, the rest left
    as the stubs it was given."""
    folder = student / edition
    shutil.copytree(ROOT / "notebooks" / edition, folder)
    path = folder / "03_multi_node.ipynb"
    handed_in = nbformat.read(path, as_version=4)
    [cell] = [
        c
        for c in handed_in.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "shard_datasets"
    ]
    cell.source = code.replace("def shard(", "def shard_datasets(")
    nbformat.write(handed_in, path)
    return folder


def test_a_copy_across_the_two_editions_is_listed_and_its_report_shows_the_passages(tmp_path):
    english, japanese = "distributed_training", "distributed_training_ja"
    copied = ODD_REORDERED.replace("# my own shuffling", "").replace(
        "    n = ", "    # ランクごとの件数\n    n = "
    )
    submissions = {
        "alice": with_shard(english, tmp_path / "alice", ODD),
        "bob": with_shard(japanese, tmp_path / "bob", copied),
        "carol": with_shard(japanese, tmp_path / "carol", OTHER),
        "dave": with_shard(english, tmp_path / "dave", STUB),
    }
    bases = [
        ROOT / "solutions" / english,
        ROOT / "notebooks" / english,
        ROOT / "notebooks" / japanese,
    ]
    report = tmp_path / "grades-similarity.html"
    report.write_text("an earlier run's")
    [pair] = code_similarity.similar_pairs(submissions, bases, report)
    assert pair.students == ("alice", "bob") and pair.notebook == "03_multi_node.ipynb", pair
    page = report.read_text()
    assert "highlight-red" in page and "alice" in page and "bob" in page
    # the solution's own code, handed in by two students, is nobody's copy
    solved = {
        student: demo.student_copy(
            ROOT / "notebooks" / english, ROOT / "solutions" / english, tmp_path / student / english
        )
        for student in ("erin", "frank")
    }
    assert code_similarity.similar_pairs(solved, bases, report) == []
    assert not report.exists(), "the earlier run's report is gone"


def test_the_table_lists_code_and_identical_notebooks_but_not_the_release(tmp_path):
    source, release = notebook(tmp_path / "source", SOLUTION), notebook(tmp_path / "release", STUB)
    folders = {
        student: notebook(tmp_path / student / "distributed_training", text)
        for student, text in (("alice", ODD), ("bob", ODD), ("carol", STUB), ("dave", STUB))
    }
    flags = plagiarism.find(folders, source=source, release=release)
    assert {(flag.kind, flag.students) for flag in flags} == {
        ("notebook", ("alice", "bob")),
        ("solution code", ("alice", "bob")),
    }
    [code] = [flag for flag in flags if flag.kind == "solution code"]
    assert code.value.startswith("03_multi_node.ipynb: 100% alike beyond the solution (")


def test_links_that_leave_a_submission_are_named_and_links_within_it_are_not(tmp_path):
    classmate = notebook(tmp_path / "alice" / "distributed_training", ODD)
    folder = tmp_path / "zed" / "distributed_training"
    folder.mkdir(parents=True)
    (folder / "03_multi_node.ipynb").symlink_to(classmate / "03_multi_node.ipynb")
    (folder / "runs").symlink_to(tmp_path / "alice")
    (folder / "mine.txt").write_text("x")
    (folder / "also-mine.txt").symlink_to("mine.txt")
    assert submission_files.refused(folder) == [
        (f"03_multi_node.ipynb -> {classmate / '03_multi_node.ipynb'}", "outside the submission"),
        (f"runs -> {tmp_path / 'alice'}", "outside the submission"),
    ]
    assert submission_files.refused(classmate) == []
