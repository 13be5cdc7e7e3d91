"""Making the course's data sets: the synthetic set, real CIFAR-10 from its official archive, and
class-balanced, resized variants of either (the file layout is course.runtime.data's)."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import tarfile
from pathlib import Path

import numpy as np

from course.errors import DatasetError
from course.fileio import atomic_file, file_digest
from course.i18n import _
from course.runtime import synthetic
from course.runtime.data import (
    CIFAR_ARCHIVE,
    CIFAR_URL,
    REAL,
    SYNTHETIC,
    Arrays,
    DatasetInfo,
    check_arrays,
    data_dir,
    info,
    name_of,
    parse_variant,
    path_for,
    prepare_hint,
    read_arrays,
    variant_name,
)

CIFAR_ARCHIVE_MD5 = "c58f30108f718f92721af3b95e74349a"
# The synthetic set's default size: enough for a few CPU epochs of a width-16 VGG in minutes.
SYNTHETIC_TRAIN, SYNTHETIC_TEST = 4000, 1000


def prepare(name: str, source: Path | None = None) -> DatasetInfo:
    """Make the data set `name` (and the one it derives from) unless it is already there."""
    if path_for(name).exists():
        return info(name)
    if name == SYNTHETIC:
        return prepare_synthetic()
    if name == REAL:
        return prepare_real(source)
    variant = parse_variant(name)
    if variant is None:
        raise DatasetError(
            _("the kit does not know how to make {name}").format(name=repr(name)),
            prepare_hint(name),
        )
    base, size, percent = variant
    prepare(base, source)
    return prepare_variant(base, percent=percent, size=size)


def _save(path: Path, arrays: Arrays, compress: bool) -> None:
    check_arrays(arrays, _("not writing {path}").format(path=path), name_of(path))
    with atomic_file(path) as f:
        save = np.savez_compressed if compress else np.savez
        save(
            f,
            train_x=arrays.train_x,
            train_y=arrays.train_y,
            test_x=arrays.test_x,
            test_y=arrays.test_y,
            meta=np.array(json.dumps(arrays.meta, sort_keys=True)),
        )


def prepare_synthetic(
    n_train: int = SYNTHETIC_TRAIN,
    n_test: int = SYNTHETIC_TEST,
    *,
    seed: int = 0,
    name: str = SYNTHETIC,
) -> DatasetInfo:
    """Generate the synthetic set (32 px); the same seed always gives the same file contents."""
    if n_train < 10 or n_test < 10:
        raise DatasetError(
            _("too few images ({train} training, {test} test)").format(train=n_train, test=n_test),
            _("ask for at least 10 of each"),
        )
    _save(path_for(name), _synthetic_arrays(n_train, n_test, seed), compress=True)
    return info(name)  # the generated arrays are freed by now: only the copy read back is in memory


def _synthetic_arrays(n_train: int, n_test: int, seed: int) -> Arrays:
    train_x, train_y = synthetic.generate(n_train, seed=seed)
    test_x, test_y = synthetic.generate(n_test, seed=seed + 1_000_003)
    meta = {"source": f"synthetic (seed {seed})", "seed": seed, "generator": "course.synthetic v1"}
    return Arrays(train_x.reshape(n_train, -1), train_y, test_x.reshape(n_test, -1), test_y, meta)


class _CifarUnpickler(pickle.Unpickler):
    """Reads the pickled batches of the official archive, refusing anything but plain data."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),
    }  # how Python 3 writes bytes into protocol-2 pickles

    def find_class(self, module: str, name: str):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(
                _("unexpected object {name} in a CIFAR batch").format(name=f"{module}.{name}")
            )
        return super().find_class(module, name)


def _read_batch(
    archive: tarfile.TarFile, member: str, source: Path
) -> tuple[np.ndarray, np.ndarray]:
    try:
        f = archive.extractfile(member)
    except KeyError:
        f = None
    if f is None:
        raise DatasetError(
            _("{source} has no {member}: it is not the CIFAR-10 python archive").format(
                source=source, member=member
            ),
            _("download {url} (the 'python version')").format(url=CIFAR_URL),
        )
    batch = _CifarUnpickler(io.BytesIO(f.read()), encoding="bytes").load()
    x = np.asarray(batch[b"data"], dtype=np.uint8)
    y = np.asarray(batch[b"labels"], dtype=np.uint8)
    if x.ndim != 2 or x.shape[1] != 3072 or y.shape != (x.shape[0],):
        raise DatasetError(
            # TRANSLATORS: {images} and {labels} are array shapes, e.g. (10000, 3072)
            _(
                "{source}: {member} holds {images} images and {labels} labels, not CIFAR-10's "
                "3072-byte rows"
            ).format(source=source, member=member, images=x.shape, labels=y.shape),
            _("download {url} again").format(url=CIFAR_URL),
        )
    return x, y


def _find_archive(source: Path | None) -> Path:
    if source is not None:
        if not Path(source).is_file():
            raise DatasetError(
                _("{path} does not exist").format(path=source),
                _("give the path of {archive}").format(archive=CIFAR_ARCHIVE),
            )
        return Path(source)
    root = data_dir().parent.parent.parent
    candidates = [
        data_dir() / CIFAR_ARCHIVE,
        root / "_dl_cache" / hashlib.md5(CIFAR_URL.encode()).hexdigest(),
    ]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise DatasetError(
        _("the CIFAR-10 archive was not given and is not in Chainer's cache"), prepare_hint(REAL)
    )


def prepare_real(source: Path | None = None) -> DatasetInfo:
    """Convert the official cifar-10-python.tar.gz into cifar-10.npz (also read by get_cifar10).

    Without `source`, uses the archive in Chainer's data folder or download cache, or keeps a
    cifar-10.npz that Chainer itself already made.
    """
    if source is None and path_for(REAL).exists():
        return info(REAL)
    archive_path = _find_archive(source)
    try:
        md5 = file_digest(archive_path, "md5")
        with tarfile.open(archive_path, "r:gz") as archive:
            train = [
                _read_batch(archive, f"cifar-10-batches-py/data_batch_{i}", archive_path)
                for i in range(1, 6)
            ]
            test_x, test_y = _read_batch(archive, "cifar-10-batches-py/test_batch", archive_path)
    except DatasetError:
        raise
    except (tarfile.TarError, EOFError, OSError, pickle.UnpicklingError, KeyError, ValueError) as e:
        raise DatasetError(
            _("{path} is truncated or not the CIFAR-10 python archive ({error})").format(
                path=archive_path, error=f"{type(e).__name__}: {e}"
            ),
            _("download {url} again").format(url=CIFAR_URL),
        ) from None
    meta = {
        "source": f"CIFAR-10 ({archive_path.name})",
        "archive_md5": md5,
        "official_archive": md5 == CIFAR_ARCHIVE_MD5,
    }
    arrays = Arrays(
        np.concatenate([x for x, _ in train]),
        np.concatenate([y for _, y in train]),
        test_x,
        test_y,
        meta,
    )
    _save(path_for(REAL), arrays, compress=True)
    return info(REAL)


def _resize(images: np.ndarray, size: int) -> np.ndarray:
    """Bilinear resize of uint8 (N, 3, S, S) images to (N, 3, size, size), pixel centres aligned."""
    old = images.shape[-1]
    pos = (np.arange(size) + 0.5) * old / size - 0.5
    lo = np.clip(np.floor(pos).astype(int), 0, old - 1)
    hi = np.clip(lo + 1, 0, old - 1)
    w = np.clip(pos - lo, 0.0, 1.0).astype(np.float32)
    out = np.empty(images.shape[:2] + (size, size), dtype=np.uint8)
    for start in range(0, len(images), 256):  # chunks keep the float copy small
        x = images[start : start + 256].astype(np.float32)
        rows = x[:, :, lo, :] * (1 - w)[:, None] + x[:, :, hi, :] * w[:, None]
        cols = rows[:, :, :, lo] * (1 - w) + rows[:, :, :, hi] * w
        out[start : start + 256] = np.clip(cols + 0.5, 0, 255).astype(np.uint8)
    return out


def _stratified_subset(labels: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    picked = []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        take = max(1, int(round(len(members) * fraction)))
        picked.append(rng.choice(members, take, replace=False))
    return np.sort(np.concatenate(picked))


def prepare_variant(
    base: str, *, percent: float = 100.0, size: int = 32, seed: int = 0, name: str | None = None
) -> DatasetInfo:
    """A class-balanced `percent` of `base`, resized to `size` px (the Reedbush-H hands-on used 5%
    at 256 px)."""
    if not 0 < percent <= 100:
        raise DatasetError(
            _("percent must be in (0, 100], not {percent}").format(percent=percent),
            _("e.g. --percent 5"),
        )
    if not 32 <= size <= 1024:  # the course's VGG halves the image five times
        raise DatasetError(
            _("image size {size} px is out of range").format(size=size),
            _("use 32 to 1024 px, e.g. --size 256"),
        )
    name = name or variant_name(base, size, percent)
    if name == base:
        raise DatasetError(
            _("the variant would overwrite {name}").format(name=repr(base)),
            _("give a different --percent, --size or --name"),
        )
    arrays = read_arrays(base)
    rng = np.random.default_rng(seed)
    out = {}
    for split in ("train", "test"):
        x, y = getattr(arrays, f"{split}_x"), getattr(arrays, f"{split}_y")
        keep = _stratified_subset(y, percent / 100.0, rng)
        images = x[keep].reshape(-1, 3, arrays.image_size, arrays.image_size)
        if size != arrays.image_size:
            images = _resize(images, size)
        out[f"{split}_x"], out[f"{split}_y"] = images.reshape(len(keep), -1), y[keep]
    meta = {
        "source": f"{percent:g}% of {base} at {size} px",
        "base": base,
        "percent": percent,
        "seed": seed,
        "base_source": arrays.meta.get("source", ""),
    }
    # Large variants stay uncompressed: they are read at every job start.
    _save(path_for(name), Arrays(meta=meta, **out), compress=size <= 64)
    return info(name)
