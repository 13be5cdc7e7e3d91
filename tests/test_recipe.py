"""Every stage trains with one optimizer recipe: the weight decay comes from one home
(course.runtime.lr_policy), added by each stage's main(), never by the student."""

from __future__ import annotations

import ast
import inspect

import chainer
import chainer.links as L
import numpy
import pytest

from course.errors import CourseError
from course.runtime import lr_policy, mains
from tests.solutions import solution_source


@pytest.mark.parametrize("stage", ["single_gpu", "multi_gpu", "multi_node"])
def test_each_stages_main_adds_the_courses_weight_decay_once(stage):
    tree = ast.parse(inspect.getsource(getattr(mains, stage)))
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "harness.add_weight_decay"
    ]
    assert len(calls) == 1, ast.unparse(tree)


@pytest.mark.parametrize("stage", ["single_gpu", "multi_node"])
def test_the_solutions_leave_weight_decay_to_main(stage):
    assert "WeightDecay" not in solution_source(stage)


def test_the_weight_decay_is_the_courses_and_a_second_one_is_refused_with_the_way_out():
    link = L.Linear(3, 2)
    optimizer = chainer.optimizers.MomentumSGD(0.05)
    optimizer.setup(link)
    lr_policy.add_weight_decay(optimizer)
    before = link.W.array.copy()
    link.cleargrads()
    link.W.grad = numpy.zeros_like(before)
    link.b.grad = numpy.zeros_like(link.b.array)
    optimizer.update()  # no gradient of a loss: only the decay moves the weights
    numpy.testing.assert_allclose(link.W.array, before * (1 - 0.05 * 5e-4), rtol=1e-6)
    assert lr_policy.WEIGHT_DECAY == 5e-4
    with pytest.raises(CourseError, match="already has a WeightDecay hook") as raised:
        lr_policy.add_weight_decay(optimizer)
    assert "remove the add_hook line" in raised.value.hint
