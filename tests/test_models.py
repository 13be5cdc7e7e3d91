from __future__ import annotations

import chainer
import numpy as np
import pytest

from course.runtime import models


@pytest.mark.parametrize(
    "name,width,params", [("vgg", 64, 14_987_210), ("vgg", 16, 939_770), ("resnet", 16, 272_282)]
)
def test_models_take_any_image_size(name, width, params):
    model = models.build(name, width=width)
    for size in (32, 64):
        with chainer.using_config("train", False):
            y = model(np.zeros((2, 3, size, size), np.float32))
        assert y.shape == (2, 10)
    assert models.count_parameters(model) == params


def test_unknown_model_names_the_choices():
    with pytest.raises(ValueError, match="resnet, vgg"):
        models.build("alexnet")


def test_resnet_depth_must_be_6n_plus_2():
    with pytest.raises(ValueError, match="6n\\+2"):
        models.ResNet(depth=21)
