"""The job's training script written from the student's functions (course.notebook.scripts)."""

from __future__ import annotations

import re

import pytest

from course.contracts import stages
from course.contracts.stubs import stubbed_functions
from course.errors import CourseError
from course.notebook import scripts
from tests.helpers import functions, notebook
from tests.solutions import solution_functions, solution_source


@pytest.mark.parametrize("stage", stages.STAGES.values(), ids=stages.NAMES)
def test_each_solution_notebook_defines_exactly_its_stage_s_functions_in_order(stage):
    # the script's functions in their order in the stage's notebook; the stage's other functions
    # each once, in it or in the deep-dive lessons that teach them (stages.LESSON_FUNCTIONS; which
    # notebook holds which: tests/test_lessons.py)
    defined = list(solution_functions(stage.name))
    others = [
        *stage.job_functions,
        *stage.prediction_functions,
        *stage.model_functions,
        *stage.derivation_functions,
    ]
    assert [name for name in defined if name in stage.functions] == list(stage.functions)
    assert sorted(name for name in defined if name in others) == sorted(others)


@pytest.mark.parametrize("stage", stages.STAGES.values(), ids=stages.NAMES)
def test_a_stage_script_holds_the_functions_then_main(tmp_path, stage):
    text = scripts.assemble_script(
        stage.name, functions(notebook(tmp_path, solution_source(stage.name)), stage)
    )
    defined = re.findall(r"^def (\w+)\(", text, re.M)
    assert defined == [*stage.functions, "main"]
    main = scripts.main_source(stage)
    assert main.startswith("def main(") and text.index(main) > text.index(
        f"def {stage.functions[-1]}("
    )
    assert text.rstrip().endswith('if __name__ == "__main__":\n    main()')
    assert f"written by {stage.notebook} from your functions; {stage.job_path} runs it" in text
    assert ("import chainermn\n" in text) is ("chainermn" in stage.extra_imports)
    compile(text, stage.script, "exec")
    assert stubbed_functions(text) == []


def test_the_script_holds_the_functions_as_written(tmp_path):
    module = notebook(tmp_path, solution_source("multi_gpu"))
    text = scripts.assemble_script("multi_gpu", functions(module, stages.MULTI_GPU))
    for name in stages.MULTI_GPU.functions:  # the prediction stays in the notebook
        assert solution_functions("multi_gpu")[name] in text


def test_a_function_not_written_yet_becomes_a_stub(tmp_path):
    module = notebook(tmp_path, solution_source("multi_node"))
    text = scripts.assemble_script(
        "multi_node",
        {"make_communicator": module.make_communicator, "shard_datasets": module.shard_datasets},
    )
    assert stubbed_functions(text) == [
        "device_for_rank",
        "make_optimizer",
        "learning_rate_schedule",
        "build_trainer",
    ]
    namespace = {"__name__": "stage3_functions"}
    exec(compile(text, "train_cifar_multi_node.py", "exec"), namespace)
    with pytest.raises(NotImplementedError, match="device_for_rank is not written yet"):
        namespace["device_for_rank"](None, False)


@pytest.mark.parametrize(
    "names",
    [
        ["make_iterators", "make_model_and_optimizer", "build_trainer"],
        ["make_iterators", "make_model_and_optimizer", "build_trainer", "build_trainer"],
        ["make_iterators", "make_model_and_optimizer", "build_the_trainer", "add_snapshots"],
    ],
    ids=["one missing", "one twice", "another name"],
)
def test_the_wrong_functions_are_refused_naming_the_expected_ones(tmp_path, names):
    renamed = solution_functions("single_gpu")["build_trainer"].replace(
        "def build_trainer(", "def build_the_trainer("
    )
    module = notebook(tmp_path, solution_source("single_gpu") + "\n\n" + renamed)
    with pytest.raises(CourseError) as raised:
        scripts.assemble_script("single_gpu", [getattr(module, name) for name in names])
    error = raised.value
    assert error.message.startswith(
        "stage single_gpu needs exactly the functions make_iterators, "
        "make_model_and_optimizer, build_trainer, add_snapshots; got make_iterators, "
    )
    assert error.hint == (
        'course.notebook.write_script("single_gpu", '
        "[make_iterators, make_model_and_optimizer, build_trainer, add_snapshots])"
    )


def test_another_stage_s_functions_are_refused(tmp_path):
    module = notebook(tmp_path, solution_source("single_gpu"))
    with pytest.raises(
        CourseError, match="stage multi_gpu needs exactly the functions make_train_iterators"
    ):
        scripts.assemble_script("multi_gpu", functions(module, stages.SINGLE_GPU))


@pytest.mark.parametrize(
    "cell,used",
    [
        (
            "def make_iterators(train, test, batchsize):\n"
            "    return SerialIterator(train, batchsize), SerialIterator(test, batchsize, "
            "repeat=False)\n",
            "SerialIterator",
        ),
        (
            "BATCH = 64\n\n\ndef make_iterators(train, test, batchsize):\n"
            "    return [chainer.iterators.SerialIterator(d, BATCH) for d in (train, test)]\n",
            "BATCH",
        ),
        (
            "def make_iterators(train, test, batchsize):\n    def one(d):\n        return "
            "SerialIterator(d, batchsize)\n"
            "    return one(train), one(test)\n",
            "SerialIterator",
        ),
    ],
    ids=["bare import", "notebook variable in a comprehension", "in a nested function"],
)
def test_a_function_using_a_name_only_the_notebook_has_is_refused(tmp_path, cell, used):
    module = notebook(
        tmp_path,
        "from chainer.iterators import SerialIterator\n" + solution_source("single_gpu") + cell,
    )
    with pytest.raises(CourseError) as raised:
        scripts.assemble_script("single_gpu", functions(module, stages.SINGLE_GPU))
    assert raised.value.message.startswith(
        f"make_iterators uses {used}, which the job's script does not have"
    )
    assert "define what it needs inside the function (or import it there)" in raised.value.hint


def test_a_name_imported_inside_the_function_is_accepted(tmp_path):
    cell = (
        "def make_iterators(train, test, batchsize):\n    from chainer.iterators import "
        "SerialIterator\n"
        "    return SerialIterator(train, batchsize), SerialIterator(test, batchsize, "
        "repeat=False)\n"
    )
    module = notebook(tmp_path, solution_source("single_gpu") + cell)
    text = scripts.assemble_script("single_gpu", functions(module, stages.SINGLE_GPU))
    assert "    from chainer.iterators import SerialIterator\n" in text


def test_a_default_value_only_the_notebook_has_is_refused(tmp_path):
    cell = (
        "BATCH = 64\n\n\ndef make_iterators(train, test, batchsize=BATCH):\n"
        "    return chainer.iterators.SerialIterator(train, batchsize), "
        "chainer.iterators.SerialIterator(test, batchsize, repeat=False)\n"
    )
    module = notebook(tmp_path, solution_source("single_gpu") + cell)
    with pytest.raises(CourseError, match="make_iterators uses BATCH"):
        scripts.assemble_script("single_gpu", functions(module, stages.SINGLE_GPU))


def test_a_lambda_is_refused(tmp_path):
    module = notebook(tmp_path, solution_source("multi_gpu"))
    by_name = {name: getattr(module, name) for name in stages.MULTI_GPU.functions}
    by_name["scaled_learning_rate"] = lambda base_lr, base_batch, total_batch: (
        base_lr * total_batch / base_batch
    )
    with pytest.raises(CourseError, match="is not a function defined with def"):
        scripts.assemble_script("multi_gpu", by_name)
    with pytest.raises(
        CourseError, match="got make_train_iterators, make_devices, <lambda>, build_trainer"
    ):
        scripts.assemble_script("multi_gpu", list(by_name.values()))


def test_a_function_without_source_is_refused():
    namespace = {}
    exec("def make_devices(gpu_ids):\n    return {'main': gpu_ids[0]}\n", namespace)
    with pytest.raises(CourseError, match="the source of make_devices cannot be found"):
        scripts.assemble_script("multi_gpu", {"make_devices": namespace["make_devices"]})


def test_write_script_writes_the_whole_script_and_says_so(tmp_path, capsys):
    module = notebook(tmp_path, solution_source("single_gpu"))
    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "train_cifar_single.py").write_text("# an older script\n")
    path = scripts.write_script("single_gpu", functions(module, stages.SINGLE_GPU), folder)
    text = scripts.assemble_script("single_gpu", functions(module, stages.SINGLE_GPU))
    assert path == folder / "train_cifar_single.py" and path.read_text() == text
    assert [p.name for p in folder.iterdir()] == ["train_cifar_single.py"], (
        "no partial file is left behind"
    )
    assert capsys.readouterr().out == (
        f"wrote {path}: {len(text.splitlines())} lines, your make_iterators, "
        "make_model_and_optimizer, build_trainer, add_snapshots and main()\n"
    )


def test_write_script_names_the_stubs_still_to_write(tmp_path, capsys):
    stub = (
        "\n\ndef build_trainer(args, train_iter, test_iter, model, optimizer, device):\n"
        "    # PUT YOUR CODE HERE\n    raise NotImplementedError()\n"
    )
    module = notebook(tmp_path, solution_source("single_gpu") + stub)
    scripts.write_script("single_gpu", functions(module, stages.SINGLE_GPU), tmp_path)
    assert capsys.readouterr().out.rstrip().endswith("and main() (still to write: build_trainer)")


def test_a_refused_script_leaves_the_old_one_in_place(tmp_path):
    module = notebook(
        tmp_path,
        "from chainer.iterators import SerialIterator\n"
        + solution_source("single_gpu")
        + "\n\ndef make_iterators(train, test, batchsize):\n    return SerialIterator(train, 8), "
        "None\n",
    )
    (tmp_path / "train_cifar_single.py").write_text("# the last good script\n")
    with pytest.raises(CourseError):
        scripts.write_script("single_gpu", functions(module, stages.SINGLE_GPU), tmp_path)
    assert (tmp_path / "train_cifar_single.py").read_text() == "# the last good script\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notebook.py", "train_cifar_single.py"]
