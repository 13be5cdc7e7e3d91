"""The students' functions the model-parallel checks' tests (tests/test_model_parallel_checks.py)
run: notebook 05's solutions, planted mistakes and attacks. Module-level defs, as a notebook's
are: a Remote handle runs them by name, and the functions a check observes together come from one
module.
"""

from __future__ import annotations

import types
from pathlib import Path

from course.contracts import stages
from tests.helpers import CHECKED_NOTEBOOK_SETUP, module_from_file
from tests.solutions import solution_functions

NOTEBOOK = next(name for name in stages.LESSON_NOTEBOOKS if name.startswith("08_"))
# The large-batch exercises (tests/large_batch_students.py) were this notebook's; they are 06's now.
LARGE_BATCH_NOTEBOOK = next(name for name in stages.LESSON_NOTEBOOKS if name.startswith("06_"))
SOLVED = types.SimpleNamespace()


def load(folder: Path) -> types.ModuleType:
    """Notebook 08's and 06's large-batch solution functions, in a module of a real file under
    `folder` (tests.remote sends their sources), and in SOLVED."""
    path = folder / "beyond_notebook.py"
    sources = solution_functions(NOTEBOOK) | solution_functions(LARGE_BATCH_NOTEBOOK)
    path.write_text(
        CHECKED_NOTEBOOK_SETUP.format(extra="") + "".join(f"\n\n{s}" for s in sources.values())
    )
    module = module_from_file(path, f"beyond_{folder.name}")
    for name in sources:
        setattr(SOLVED, name, getattr(module, name))
    return module


# --- the solutions again, beside the planted functions they are observed with -------------------


def solved_activation(batch, cut_shape):
    return SOLVED.activation_bytes(batch, cut_shape)


def solved_gradient(parameters, ranks):
    return SOLVED.gradient_bytes(parameters, ranks)


# --- planted mistakes: each a student's slip the check names ----------------------------------


def forward_only(batch, cut_shape):
    return SOLVED.activation_bytes(batch, cut_shape) / 2


def values_not_bytes(batch, cut_shape):
    return SOLVED.activation_bytes(batch, cut_shape) / 4


def one_image(batch, cut_shape):
    return SOLVED.activation_bytes(1, cut_shape)


def bits(batch, cut_shape):
    return SOLVED.activation_bytes(batch, cut_shape) * 8


def one_rank(parameters, ranks):
    return SOLVED.gradient_bytes(parameters, ranks) / ranks


def half_ring(parameters, ranks):
    return (ranks - 1) * parameters * 4


def whole_to_everyone(parameters, ranks):
    return ranks * (ranks - 1) * parameters * 4


def no_micro_batches(stages, micro_batches):
    return (stages - 1) / stages


def busy_share(stages, micro_batches):
    return micro_batches / (micro_batches + stages - 1)


def over_micro_batches(stages, micro_batches):
    return (stages - 1) / micro_batches


def text_count(batch, cut_shape):
    return f"{SOLVED.activation_bytes(batch, cut_shape)} bytes"


def stub_count(parameters, ranks):
    raise NotImplementedError()


# --- attacks: handing the work to the kit, knowing only the listed cases -----------------------


def kit_activation(batch, cut_shape):
    from course.lessons.beyond import parallelism

    return parallelism.activation_bytes(batch, cut_shape)


def kit_idle(stages, micro_batches):
    import course.lessons.beyond.parallelism

    return course.lessons.beyond.parallelism.idle_fraction(stages, micro_batches)


LISTED = {(2, 1): 0.5, (4, 1): 0.75, (4, 8): 3 / 11, (2, 16): 1 / 17, (1, 4): 0.0}


def listed_idle(stages, micro_batches):
    return LISTED.get((stages, micro_batches), 0.0)
