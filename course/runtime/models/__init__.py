"""The networks the course trains. Pick one by name: ``course.models.build("vgg", width=16)``."""

from __future__ import annotations

import hashlib

import chainer
import numpy as np

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


def weights_sha256(model: chainer.Link) -> str:
    """A digest of the model's weights, name by name (bit for bit: two runs with the same digest
    trained to the same model)."""
    digest = hashlib.sha256()
    for name, param in sorted(model.namedparams(), key=lambda pair: pair[0]):
        if param.array is not None:
            array = np.ascontiguousarray(chainer.backends.cuda.to_cpu(param.array))
            digest.update(f"{name}:{array.dtype.str}:{array.shape}\n".encode())
            digest.update(array.tobytes())
    return digest.hexdigest()


__all__ = ["MODELS", "ResNet", "VGG", "build", "count_parameters", "weights_sha256"]
