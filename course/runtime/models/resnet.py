"""A ResNet-style CIFAR-10 network (He et al., 2016): three stages of basic residual blocks."""

from __future__ import annotations

import chainer
import chainer.functions as F
import chainer.links as L


class BasicBlock(chainer.Chain):
    """Two 3x3 convolutions with batch normalisation, added to a shortcut."""

    def __init__(self, out_channels: int, stride: int, project: bool) -> None:
        super().__init__()
        self.stride = stride
        with self.init_scope():
            self.conv1 = L.Convolution2D(None, out_channels, 3, stride=stride, pad=1, nobias=True)
            self.bn1 = L.BatchNormalization(out_channels)
            self.conv2 = L.Convolution2D(out_channels, out_channels, 3, pad=1, nobias=True)
            self.bn2 = L.BatchNormalization(out_channels)
            # A 1x1 projection where the shape changes, the identity elsewhere.
            self.shortcut = (
                L.Convolution2D(None, out_channels, 1, stride=stride, nobias=True)
                if project
                else None
            )

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(h + (self.shortcut(x) if self.shortcut is not None else x))


class ResNet(chainer.Chain):
    """ResNet-(6n+2) for CIFAR: a stem, three stages of n blocks (width, 2x, 4x channels), pooling.

    depth 20 with width 16 is the paper's ResNet-20 (about 0.27M parameters).
    """

    def __init__(self, n_class: int = 10, width: int = 16, depth: int = 20) -> None:
        super().__init__()
        if (depth - 2) % 6:
            raise ValueError(f"ResNet depth must be 6n+2 (20, 32, 44, ...), not {depth}")
        n = (depth - 2) // 6
        with self.init_scope():
            self.stem = L.Convolution2D(None, width, 3, pad=1, nobias=True)
            self.bn = L.BatchNormalization(width)
            blocks = []
            for stage, channels in enumerate((width, 2 * width, 4 * width)):
                for i in range(n):
                    first = i == 0 and stage > 0
                    blocks.append(BasicBlock(channels, stride=2 if first else 1, project=first))
            self.blocks = chainer.Sequential(*blocks)
            self.fc = L.Linear(None, n_class)

    def forward(self, x):
        h = self.blocks(F.relu(self.bn(self.stem(x))))
        return self.fc(F.average(h, axis=(2, 3)))
