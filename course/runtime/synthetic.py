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
_CYCLES = np.array(
    [2.5, 4.0, 2.5, 4.0, 2.5, 4.0, 2.5, 4.0, 2.5, 4.0]
)  # stripes across a 32 px image
_HUE = np.arange(N_CLASSES) // 2 / (N_CLASSES // 2)  # pairs of classes share a colour

CHUNK_PIXELS = (
    1000 * 32 * 32
)  # made at once (1000 32-px images): their float64 intermediates take about 100 MB


def _hue_to_rgb(hue: np.ndarray) -> np.ndarray:
    """Saturated colours on the hue circle, (n,) -> (n, 3) in [0, 1]."""
    k = (np.array([5.0, 3.0, 1.0]) + hue[:, None] * 6.0) % 6.0
    return 1.0 - np.clip(np.minimum(k, 4.0 - k), 0.0, 1.0)


def generate(n: int, *, size: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`n` images as uint8 (n, 3, size, size) and their labels as uint8 (n,).

    The per-image draws come first, for all images; then the pixel noise, the last draw, is drawn
    chunk by chunk. NumPy's generator gives the same numbers in one call or in several consecutive
    calls of the same total, so the images do not depend on the chunks, and memory stays small.
    """
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, N_CLASSES, n).astype(np.uint8)
    draws = {
        "angle": _ORIENTATION[labels] + rng.normal(0.0, np.deg2rad(8.0), n),
        "cycles": _CYCLES[labels] * rng.uniform(0.85, 1.15, n),
        "phase": rng.uniform(0.0, 2 * np.pi, n),
        "contrast": rng.uniform(0.1, 0.35, n),
        "bg_angle": rng.uniform(0.0, np.pi, (n, 2)),
        "bg_phase": rng.uniform(0.0, 2 * np.pi, (n, 2, 1, 1)),
        "colour": _hue_to_rgb((_HUE[labels] + rng.normal(0.0, 0.08, n)) % 1.0),  # (n, 3)
        "base": rng.uniform(0.35, 0.65, (n, 1, 1, 1)),
    }
    chunk = max(1, CHUNK_PIXELS // (size * size))
    images = np.empty((n, 3, size, size), dtype=np.uint8)
    for start in range(0, n, chunk):
        part = {name: values[start : start + chunk] for name, values in draws.items()}
        images[start : start + chunk] = _render(part, rng, size)
    return images, labels


def _render(d: dict[str, np.ndarray], rng: np.random.Generator, size: int) -> np.ndarray:
    """uint8 images of one chunk from its per-image draws, adding pixel noise drawn from `rng`."""
    n = len(d["angle"])
    coords = (np.arange(size, dtype=np.float32) + 0.5) / size - 0.5
    yy, xx = np.meshgrid(coords, coords, indexing="ij")
    along = np.cos(d["angle"])[:, None, None] * xx + np.sin(d["angle"])[:, None, None] * yy
    stripes = np.sin(2 * np.pi * d["cycles"][:, None, None] * along + d["phase"][:, None, None])

    # A random blotchy background, unrelated to the class.
    bg_along = (
        np.cos(d["bg_angle"])[:, :, None, None] * xx + np.sin(d["bg_angle"])[:, :, None, None] * yy
    )
    background = 0.12 * np.sin(2 * np.pi * 1.2 * bg_along + d["bg_phase"]).sum(axis=1)

    images = (
        d["base"]
        + d["contrast"][:, None, None, None]
        * stripes[:, None]
        * (d["colour"][:, :, None, None] - 0.5)
        * 2.0
        + background[:, None]
        + rng.normal(0.0, 0.12, (n, 3, size, size))
    )
    return (np.clip(images, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
