"""The networks the course trains. Pick one by name: ``course.models.build("vgg", width=16)``."""

from __future__ import annotations

import chainer

from course.runtime.models.resnet import ResNet
from course.runtime.models.vgg import VGG

MODELS = {"vgg": VGG, "resnet": ResNet}


def build(name: str, *, n_class: int = 10, width: int | None = None) -> chainer.Chain:
    """A new, randomly initialised network; `width` scales its channels (None: the model's
    default)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; the course has {', '.join(sorted(MODELS))}")
    kwargs = {} if width is None else {"width": width}
    return MODELS[name](n_class=n_class, **kwargs)


def count_parameters(model: chainer.Link) -> int:
    """Number of scalars in the model's parameters (initialised ones)."""
    return sum(p.size for p in model.params() if p.array is not None)


__all__ = ["MODELS", "ResNet", "VGG", "build", "count_parameters"]
