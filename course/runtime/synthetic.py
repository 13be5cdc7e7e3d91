"""A learnable stand-in for CIFAR-10, generated on any machine without a download.

Each of the ten classes is a striped texture with its own orientation, stripe frequency and
colour. Every image draws its own phase, contrast, small shifts of those three, a random
low-frequency background and pixel noise, so a small CNN has to learn the textures rather
than memorise pixels: it beats chance (10%) clearly within a couple of CPU epochs, yet does
not reach 100% at once. Output is deterministic for a given seed.
"""
from __future__ import annotations

import numpy as np

N_CLASSES = 10
# Fixed across seeds, so that training and test sets drawn with different seeds share classes.
_ORIENTATION = np.deg2rad(np.arange(N_CLASSES) * 180.0 / N_CLASSES)
_CYCLES = np.array([2.5, 4.0, 2.5, 4.0, 2.5, 4.0, 2.5, 4.0, 2.5, 4.0])  # stripes across a 32 px image
_HUE = np.arange(N_CLASSES) // 2 / (N_CLASSES // 2)  # pairs of classes share a colour


def _hue_to_rgb(hue: np.ndarray) -> np.ndarray:
    """Saturated colours on the hue circle, (n,) -> (n, 3) in [0, 1]."""
    k = (np.array([5.0, 3.0, 1.0]) + hue[:, None] * 6.0) % 6.0
    return 1.0 - np.clip(np.minimum(k, 4.0 - k), 0.0, 1.0)


def generate(n: int, *, size: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`n` images as uint8 (n, 3, size, size) and their labels as uint8 (n,)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, N_CLASSES, n).astype(np.uint8)
    coords = (np.arange(size, dtype=np.float32) + 0.5) / size - 0.5
    yy, xx = np.meshgrid(coords, coords, indexing="ij")

    angle = _ORIENTATION[labels] + rng.normal(0.0, np.deg2rad(8.0), n)
    cycles = _CYCLES[labels] * rng.uniform(0.85, 1.15, n)
    phase = rng.uniform(0.0, 2 * np.pi, n)
    contrast = rng.uniform(0.1, 0.35, n)
    along = np.cos(angle)[:, None, None] * xx + np.sin(angle)[:, None, None] * yy
    stripes = np.sin(2 * np.pi * cycles[:, None, None] * along + phase[:, None, None])

    # A random blotchy background, unrelated to the class.
    bg_angle = rng.uniform(0.0, np.pi, (n, 2))
    bg_along = (np.cos(bg_angle)[:, :, None, None] * xx + np.sin(bg_angle)[:, :, None, None] * yy)
    bg_phase = rng.uniform(0.0, 2 * np.pi, (n, 2, 1, 1))
    background = 0.12 * np.sin(2 * np.pi * 1.2 * bg_along + bg_phase).sum(axis=1)

    colour = _hue_to_rgb((_HUE[labels] + rng.normal(0.0, 0.08, n)) % 1.0)  # (n, 3)
    base = rng.uniform(0.35, 0.65, (n, 1, 1, 1))
    images = (
        base
        + contrast[:, None, None, None] * stripes[:, None] * (colour[:, :, None, None] - 0.5) * 2.0
        + background[:, None]
        + rng.normal(0.0, 0.12, (n, 3, size, size))
    )
    return (np.clip(images, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8), labels
