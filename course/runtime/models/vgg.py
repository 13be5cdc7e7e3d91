"""A VGG-style CIFAR-10 network (Simonyan and Zisserman, 2015), with batch normalisation."""

from __future__ import annotations

import chainer
import chainer.functions as F
import chainer.links as L


class ConvBN(chainer.Chain):
    """3x3 convolution, batch normalisation, ReLU."""

    def __init__(self, out_channels: int) -> None:
        super().__init__()
        with self.init_scope():
            self.conv = L.Convolution2D(None, out_channels, 3, pad=1, nobias=True)
            self.bn = L.BatchNormalization(out_channels)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class VGG(chainer.Chain):
    """Five blocks of 3x3 convolutions, each block ending in 2x2 max pooling, then a classifier.

    `width` is the channel count of the first block; later blocks use 2, 4, 8 and 8 times it.
    At width 64 this is the size of Chainer's own CIFAR example (about 15M parameters); width 16
    (about 1M) keeps CPU runs short. Global average pooling before the classifier lets the same
    network take 32 px images or the 256 px variant.
    """

    BLOCKS = ((1, 2), (2, 2), (4, 3), (8, 3), (8, 3))  # (channels / width, convolutions)

    def __init__(self, n_class: int = 10, width: int = 64, dropout: float = 0.5) -> None:
        super().__init__()
        self.dropout = dropout
        with self.init_scope():
            self.blocks = chainer.ChainList(
                *[
                    chainer.Sequential(*[ConvBN(scale * width) for _ in range(n_conv)])
                    for scale, n_conv in self.BLOCKS
                ]
            )
            self.fc1 = L.Linear(None, 8 * width, nobias=True)
            self.bn1 = L.BatchNormalization(8 * width)
            self.fc2 = L.Linear(None, n_class)

    def forward(self, x):
        for block in self.blocks:
            x = F.max_pooling_2d(block(x), 2, stride=2, cover_all=False)
        x = F.average(x, axis=(2, 3))
        x = F.dropout(F.relu(self.bn1(self.fc1(x))), self.dropout)
        return self.fc2(x)
