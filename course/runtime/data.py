"""CIFAR-10 for the course: the real data, a learnable synthetic stand-in, and variants of either.

Every data set is one ``.npz`` file in Chainer's own CIFAR layout (uint8 images flattened to
N x 3*S*S, uint8 labels, keys ``train_x``, ``train_y``, ``test_x``, ``test_y``) in Chainer's
data folder ``$CHAINER_DATASET_ROOT/pfnet/chainer/cifar``. The real one is ``cifar-10.npz``,
the very file ``chainer.datasets.get_cifar10()`` reads; the others are ``<name>.npz``.
One more key, ``meta``, holds a JSON description (source, seed, image size). Files are
written to a temporary name and renamed, so a crash never leaves half a data set.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from course import i18n
from course.errors import CourseError, DatasetError
from course.fileio import sha256_file
from course.i18n import _

REAL = "cifar10"
SYNTHETIC = "synthetic"
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR_ARCHIVE = "cifar-10-python.tar.gz"
KEYS = ("train_x", "train_y", "test_x", "test_y")
N_CLASSES = 10  # CIFAR-10's labels are 0..9


def prepare_hint(name: str) -> str:
    if name == REAL:
        return _(
            "download {url} and run:  python -m course data cifar10 --from /path/to/{archive}   "
            "(or use the synthetic set: python -m course data synthetic)"
        ).format(url=CIFAR_URL, archive=CIFAR_ARCHIVE)
    if name == SYNTHETIC:
        return _("run:  python -m course data synthetic")
    variant = parse_variant(name)
    if variant:
        base, size, percent = variant
        return _(
            "run:  python -m course data variant --base {base} --size {size} --percent "
            "{percent:g}   (needs the {name} data set first)"
        ).format(base=base, size=size, percent=percent, name=repr(base))
    return _("run:  python -m course data list   to see which data sets exist")


def _delete_then(name: str) -> str:
    """The fix for a damaged data set file: delete it, then make it again."""
    return _("delete it, then {hint}").format(hint=prepare_hint(name))


def data_dir(root: str | None = None) -> Path:
    """Chainer's CIFAR folder in `root`, by default CHAINER_DATASET_ROOT as Chainer reads it."""
    root = (
        root
        or os.environ.get("CHAINER_DATASET_ROOT")
        or os.path.join(os.path.expanduser("~"), ".chainer", "dataset")
    )
    return Path(root) / "pfnet" / "chainer" / "cifar"


def path_for(name: str) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
        raise DatasetError(
            _("{name} is not a data set name").format(name=repr(name)),
            _("use letters, digits, '.', '_' and '-'"),
        )
    return data_dir() / ("cifar-10.npz" if name == REAL else f"{name}.npz")


def variant_name(base: str, size: int, percent: float) -> str:
    """The Reedbush-H hands-on's naming: 5% of CIFAR-10 at 256 px is cifar10_256px_5p."""
    return f"{base}_{size}px_{percent:g}p"


def parse_variant(name: str) -> tuple[str, int, float] | None:
    """(base, size, percent) of a variant's name, None for other names."""
    match = re.fullmatch(r"(.+)_(\d+)px_(\d+(?:\.\d+)?)p", name)
    return (match.group(1), int(match.group(2)), float(match.group(3))) if match else None


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    path: Path
    n_train: int
    n_test: int
    image_size: int
    meta: dict

    def describe(self) -> str:
        source = self.meta.get("source", _("unknown source"))
        return _(
            "{name}: {train} training / {test} test images, {size} px ({source}) in {path}"
        ).format(
            name=self.name,
            train=self.n_train,
            test=self.n_test,
            size=self.image_size,
            source=source,
            path=self.path,
        )


@dataclass(frozen=True)
class Arrays:
    train_x: np.ndarray  # uint8 (N, 3*S*S)
    train_y: np.ndarray  # uint8 (N,)
    test_x: np.ndarray
    test_y: np.ndarray
    meta: dict

    @property
    def image_size(self) -> int:
        return int(round((self.train_x.shape[1] / 3) ** 0.5))


def name_of(path: Path) -> str:
    """The data set a file in the data folder holds (the inverse of path_for)."""
    return REAL if path.name == "cifar-10.npz" else path.stem


def check_arrays(arrays: Arrays, where: str, name: str) -> None:
    """DatasetError unless both splits hold images in Chainer's layout, each with a CIFAR-10
    label."""
    for split in ("train", "test"):
        x, y = getattr(arrays, f"{split}_x"), getattr(arrays, f"{split}_y")
        size = int(round((x.shape[1] / 3) ** 0.5)) if x.ndim == 2 else 0
        if x.dtype != np.uint8 or x.ndim != 2 or 3 * size * size != x.shape[1]:
            raise DatasetError(
                # TRANSLATORS: {split} is train or test (the arrays train_x, test_x), as it is
                _("{where}: {split} images are {dtype} {shape}, expected uint8 N x 3*S*S").format(
                    where=where, split=split, dtype=x.dtype, shape=x.shape
                ),
                prepare_hint(name),
            )
        if x.shape[0] == 0:  # training would divide by the number of images
            raise DatasetError(
                # TRANSLATORS: {split} is train or test (the arrays train_x, test_x), as it is
                _("{where}: the {split} set has 0 images").format(where=where, split=split),
                prepare_hint(name),
            )
        if y.shape != (x.shape[0],):
            raise DatasetError(
                # TRANSLATORS: {split} is train or test (the arrays train_x, test_x), as it is
                _(
                    "{where}: {split} labels have shape {shape}, expected one label for each of "
                    "the {count} images"
                ).format(where=where, split=split, shape=y.shape, count=x.shape[0]),
                prepare_hint(name),
            )
        wrong = np.unique(y[(y < 0) | (y >= N_CLASSES)])
        if wrong.size:
            shown = i18n.listed(
                [*(str(v) for v in wrong[:5]), *(["..."] if wrong.size > 5 else [])]
            )
            raise DatasetError(
                # TRANSLATORS: {split} is train or test (the arrays train_x, test_x), as it is
                _(
                    "{where}: {split} labels must be 0..{last} (CIFAR-10's ten classes), found "
                    "{found}"
                ).format(where=where, split=split, last=N_CLASSES - 1, found=shown),
                prepare_hint(name),
            )


def read_arrays(name: str) -> Arrays:
    """The raw uint8 arrays of a prepared data set; DatasetError if missing, damaged or empty."""
    path = path_for(name)
    if not path.exists():
        raise DatasetError(
            _("data set {name} is not prepared: {path} does not exist").format(
                name=repr(name), path=path
            ),
            prepare_hint(name),
        )
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in KEYS if k not in npz.files]
            if missing:
                raise DatasetError(
                    _("{path} lacks {keys}: it is not a CIFAR data set file").format(
                        path=path, keys=i18n.listed(missing)
                    ),
                    _delete_then(name),
                )
            # Reading every member checks its CRC, so a corrupt file fails here, not mid-training.
            loaded = {k: npz[k] for k in KEYS}
            meta = json.loads(str(npz["meta"])) if "meta" in npz.files else {"source": "chainer"}
    except DatasetError:
        raise
    except (zipfile.BadZipFile, EOFError, ValueError, OSError, KeyError, json.JSONDecodeError) as e:
        raise DatasetError(
            _("{path} is truncated or corrupt ({error})").format(
                path=path, error=f"{type(e).__name__}: {e}"
            ),
            _delete_then(name),
        ) from None
    arrays = Arrays(meta={**meta, "name": name}, **loaded)
    check_arrays(arrays, str(path), name)
    return arrays


def info(name: str) -> DatasetInfo:
    arrays = read_arrays(name)
    return DatasetInfo(
        name,
        path_for(name),
        len(arrays.train_y),
        len(arrays.test_y),
        arrays.image_size,
        arrays.meta,
    )


def available() -> list[str]:
    """Names of the data sets present in the data folder (not checked)."""
    folder = data_dir()
    if not folder.is_dir():
        return []
    names = [name_of(p) for p in sorted(folder.glob("*.npz"))]
    return sorted(names)


def resolve(name: str) -> str:
    """'auto' means the real CIFAR-10 where it is prepared, else the synthetic set."""
    if name != "auto":
        return name
    for candidate in (REAL, SYNTHETIC):
        if path_for(candidate).exists():
            return candidate
    raise DatasetError(
        _("no data set is prepared (neither real CIFAR-10 nor the synthetic set)"),
        _(
            "run:  python -m course data synthetic   (real CIFAR-10: python -m course data "
            "cifar10 --from cifar-10-python.tar.gz)"
        ),
    )


def fingerprint(name: str | None) -> str | None:
    """The digest of the file a data set name stands for now (None: no such file): a set remade
    under the same name is another set."""
    try:
        path = path_for(resolve(name)) if name else None
    except CourseError:
        return None
    return sha256_file(path) if path is not None and path.is_file() else None


FLOAT_IN_MEMORY_BYTES = 1 << 30  # a larger set stays uint8 in memory


class _ToFloat:
    """uint8 example -> float32 example; a class, not a lambda: scatter_dataset pickles data
    sets."""

    def __init__(self, factor: np.float32):
        self.factor = factor

    def __call__(self, example):
        return example[0].astype(np.float32) * self.factor, example[1]


def load(name: str = "auto", *, scale: float = 1.0) -> tuple:
    """(train, test) as Chainer TupleDatasets of float32 (3, S, S) images in [0, scale] and int32
    labels.

    Large variants stay uint8 in memory and are converted one example at a time.
    """
    from chainer.datasets import TransformDataset, TupleDataset

    arrays = read_arrays(resolve(name))
    size = arrays.image_size

    def dataset(x: np.ndarray, y: np.ndarray):
        images = x.reshape(-1, 3, size, size)
        labels = y.astype(np.int32)
        if images.nbytes * 4 <= FLOAT_IN_MEMORY_BYTES:
            return TupleDataset((images.astype(np.float32) * (scale / 255.0)), labels)
        return TransformDataset(TupleDataset(images, labels), _ToFloat(np.float32(scale / 255.0)))

    return dataset(arrays.train_x, arrays.train_y), dataset(arrays.test_x, arrays.test_y)
