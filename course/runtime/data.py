"""CIFAR-10 for the course: the real data, a learnable synthetic stand-in, and variants of either.

Every data set is one ``.npz`` file in Chainer's own CIFAR layout (uint8 images flattened to
N x 3*S*S, uint8 labels, keys ``train_x``, ``train_y``, ``test_x``, ``test_y``) in Chainer's
data folder ``$CHAINER_DATASET_ROOT/pfnet/chainer/cifar``. The real one is ``cifar-10.npz``,
the very file ``chainer.datasets.get_cifar10()`` reads; the others are ``<name>.npz``.
One more key, ``meta``, holds a JSON description (source, seed, image size). Files are
written to a temporary name and renamed, so a crash never leaves half a data set.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import re
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from course.errors import DatasetError
from course.fileio import atomic_file, file_digest
from course.runtime import synthetic

REAL = "cifar10"
SYNTHETIC = "synthetic"
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR_ARCHIVE_MD5 = "c58f30108f718f92721af3b95e74349a"
KEYS = ("train_x", "train_y", "test_x", "test_y")
N_CLASSES = 10  # CIFAR-10's labels are 0..9
# The synthetic set's default size: enough for a few CPU epochs of a width-16 VGG in minutes.
SYNTHETIC_TRAIN, SYNTHETIC_TEST = 4000, 1000


def _prepare_hint(name: str) -> str:
    if name == REAL:
        return (
            f"download {CIFAR_URL} and run:  python -m course data cifar10 --from "
            f"/path/to/{CIFAR_ARCHIVE}   (or use the synthetic set: python -m course data synthetic)"
        )
    if name == SYNTHETIC:
        return "run:  python -m course data synthetic"
    variant = parse_variant(name)
    if variant:
        base, size, percent = variant
        return (
            f"run:  python -m course data variant --base {base} --size {size} --percent {percent:g}"
            f"   (needs the {base!r} data set first)"
        )
    return "run:  python -m course data list   to see which data sets exist"


def data_dir() -> Path:
    """Chainer's CIFAR folder, honouring CHAINER_DATASET_ROOT as Chainer does."""
    root = os.environ.get("CHAINER_DATASET_ROOT") or os.path.join(
        os.path.expanduser("~"), ".chainer", "dataset"
    )
    return Path(root) / "pfnet" / "chainer" / "cifar"


def path_for(name: str) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
        raise DatasetError(
            f"{name!r} is not a data set name", "use letters, digits, '.', '_' and '-'"
        )
    return data_dir() / ("cifar-10.npz" if name == REAL else f"{name}.npz")


def variant_name(base: str, size: int, percent: float) -> str:
    """The seed hands-on's naming: 5% of CIFAR-10 at 256 px is cifar10_256px_5p."""
    return f"{base}_{size}px_{percent:g}p"


def parse_variant(name: str) -> tuple[str, int, float] | None:
    """(base, size, percent) of a variant's name, None for other names."""
    match = re.fullmatch(r"(.+)_(\d+)px_(\d+(?:\.\d+)?)p", name)
    return (match.group(1), int(match.group(2)), float(match.group(3))) if match else None


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
        raise DatasetError(f"the kit does not know how to make {name!r}", _prepare_hint(name))
    base, size, percent = variant
    prepare(base, source)
    return prepare_variant(base, percent=percent, size=size)


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    path: Path
    n_train: int
    n_test: int
    image_size: int
    meta: dict

    def describe(self) -> str:
        source = self.meta.get("source", "unknown source")
        return (
            f"{self.name}: {self.n_train} training / {self.n_test} test images, "
            f"{self.image_size} px ({source}) in {self.path}"
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


def _name_of(path: Path) -> str:
    """The data set a file in the data folder holds (the inverse of path_for)."""
    return REAL if path.name == "cifar-10.npz" else path.stem


def _save(path: Path, arrays: Arrays, compress: bool) -> None:
    _check_arrays(arrays, f"not writing {path}", _name_of(path))
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


def _check_arrays(arrays: Arrays, where: str, name: str) -> None:
    """DatasetError unless both splits hold images in Chainer's layout, each with a CIFAR-10 label."""
    for split in ("train", "test"):
        x, y = getattr(arrays, f"{split}_x"), getattr(arrays, f"{split}_y")
        size = int(round((x.shape[1] / 3) ** 0.5)) if x.ndim == 2 else 0
        if x.dtype != np.uint8 or x.ndim != 2 or 3 * size * size != x.shape[1]:
            raise DatasetError(
                f"{where}: {split} images are {x.dtype} {x.shape}, expected uint8 N x 3*S*S",
                _prepare_hint(name),
            )
        if x.shape[0] == 0:  # training would divide by the number of images
            raise DatasetError(f"{where}: the {split} set has 0 images", _prepare_hint(name))
        if y.shape != (x.shape[0],):
            raise DatasetError(
                f"{where}: {split} labels have shape {y.shape}, expected one label for each "
                f"of the {x.shape[0]} images",
                _prepare_hint(name),
            )
        wrong = np.unique(y[(y < 0) | (y >= N_CLASSES)])
        if wrong.size:
            shown = ", ".join(str(v) for v in wrong[:5]) + (", ..." if wrong.size > 5 else "")
            raise DatasetError(
                f"{where}: {split} labels must be 0..{N_CLASSES - 1} (CIFAR-10's ten classes), "
                f"found {shown}",
                _prepare_hint(name),
            )


def read_arrays(name: str) -> Arrays:
    """The raw uint8 arrays of a prepared data set; DatasetError if missing, damaged or empty."""
    path = path_for(name)
    if not path.exists():
        raise DatasetError(
            f"data set {name!r} is not prepared: {path} does not exist", _prepare_hint(name)
        )
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in KEYS if k not in npz.files]
            if missing:
                raise DatasetError(
                    f"{path} lacks {', '.join(missing)}: it is not a CIFAR data set file",
                    "delete it, then " + _prepare_hint(name),
                )
            # Reading every member checks its CRC, so a corrupt file fails here, not mid-training.
            loaded = {k: npz[k] for k in KEYS}
            meta = json.loads(str(npz["meta"])) if "meta" in npz.files else {"source": "chainer"}
    except DatasetError:
        raise
    except (zipfile.BadZipFile, EOFError, ValueError, OSError, KeyError, json.JSONDecodeError) as e:
        raise DatasetError(
            f"{path} is truncated or corrupt ({type(e).__name__}: {e})",
            "delete it, then " + _prepare_hint(name),
        ) from None
    arrays = Arrays(meta={**meta, "name": name}, **loaded)
    _check_arrays(arrays, str(path), name)
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
    names = [_name_of(p) for p in sorted(folder.glob("*.npz"))]
    return sorted(names)


def resolve(name: str) -> str:
    """'auto' means the real CIFAR-10 where it is prepared, else the synthetic set."""
    if name != "auto":
        return name
    for candidate in (REAL, SYNTHETIC):
        if path_for(candidate).exists():
            return candidate
    raise DatasetError(
        "no data set is prepared (neither real CIFAR-10 nor the synthetic set)",
        "run:  python -m course data synthetic   (or see datasets/README.md for real data)",
    )


FLOAT_IN_MEMORY_BYTES = 1 << 30  # a larger set stays uint8 in memory


class _ToFloat:
    """uint8 example -> float32 example; a class, not a lambda: scatter_dataset pickles data sets."""

    def __init__(self, factor: np.float32):
        self.factor = factor

    def __call__(self, example):
        return example[0].astype(np.float32) * self.factor, example[1]


def load(name: str = "auto", *, scale: float = 1.0) -> tuple:
    """(train, test) as Chainer TupleDatasets of float32 (3, S, S) images in [0, scale] and int32 labels.

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
            f"too few images ({n_train} training, {n_test} test)", "ask for at least 10 of each"
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
            raise pickle.UnpicklingError(f"unexpected object {module}.{name} in a CIFAR batch")
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
            f"{source} has no {member}: it is not the CIFAR-10 python archive",
            f"download {CIFAR_URL} (the 'python version')",
        )
    batch = _CifarUnpickler(io.BytesIO(f.read()), encoding="bytes").load()
    x = np.asarray(batch[b"data"], dtype=np.uint8)
    y = np.asarray(batch[b"labels"], dtype=np.uint8)
    if x.ndim != 2 or x.shape[1] != 3072 or y.shape != (x.shape[0],):
        raise DatasetError(
            f"{source}: {member} holds {x.shape} images and {y.shape} labels, "
            "not CIFAR-10's 3072-byte rows",
            f"download {CIFAR_URL} again",
        )
    return x, y


def _find_archive(source: Path | None) -> Path:
    if source is not None:
        if not Path(source).is_file():
            raise DatasetError(f"{source} does not exist", f"give the path of {CIFAR_ARCHIVE}")
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
        "the CIFAR-10 archive was not given and is not in Chainer's cache", _prepare_hint(REAL)
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
            f"{archive_path} is truncated or not the CIFAR-10 python archive "
            f"({type(e).__name__}: {e})",
            f"download {CIFAR_URL} again",
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
    """A class-balanced `percent` of `base`, resized to `size` px (the seed used 5% at 256 px)."""
    if not 0 < percent <= 100:
        raise DatasetError(f"percent must be in (0, 100], not {percent}", "e.g. --percent 5")
    if not 32 <= size <= 1024:  # the course's VGG halves the image five times
        raise DatasetError(
            f"image size {size} px is out of range", "use 32 to 1024 px, e.g. --size 256"
        )
    name = name or variant_name(base, size, percent)
    if name == base:
        raise DatasetError(
            f"the variant would overwrite {base!r}", "give a different --percent, --size or --name"
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


def main(argv: list[str]) -> int:
    """`python -m course data ACTION`: prepare a data set, or list the prepared ones."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="course data",
        description="prepare CIFAR-10, the synthetic set, or a "
        "variant of either, in Chainer's data folder ($CHAINER_DATASET_ROOT)",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="the prepared data sets")
    a = actions.add_parser(
        "site", help="make the data set the applied site profile names (and its base)"
    )
    a.add_argument(
        "--from", dest="source", type=Path, default=None, help="the CIFAR-10 archive, when needed"
    )
    a = actions.add_parser("synthetic", help="generate the learnable synthetic set (no download)")
    a.add_argument("--train", type=int, default=SYNTHETIC_TRAIN)
    a.add_argument("--test", type=int, default=SYNTHETIC_TEST)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--name", default=SYNTHETIC)
    a = actions.add_parser("cifar10", help="convert the official cifar-10-python.tar.gz")
    a.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=None,
        help="the archive (default: the one in Chainer's data folder or download cache)",
    )
    a = actions.add_parser("variant", help="a class-balanced subset, resized (e.g. 5%% at 256 px)")
    a.add_argument("--base", default=REAL, help="the data set to derive from")
    a.add_argument("--percent", type=float, default=5.0)
    a.add_argument("--size", type=int, default=256)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--name", default=None, help="default: <base>_<size>px_<percent>p")
    args = parser.parse_args(argv)
    if args.action == "list":
        names = available()
        if not names:
            print(f"no data sets in {data_dir()}; make one with:  python -m course data synthetic")
        for name in names:
            try:
                print(info(name).describe())
            except DatasetError as e:
                print(f"{name}: BROKEN: {e}")
        return 0
    if args.action == "site":
        from course.cluster import siteenv

        env_file = siteenv.locate()
        if env_file is None:
            raise DatasetError(
                "no jobs/site_env.sh here or in the kit", "run it in the kit's folder"
            )
        name = siteenv.SiteSettings.read(env_file).dataset
        if not name:
            raise DatasetError(
                f"{env_file} sets no COURSE_DATASET",
                "python -m course site apply <profile> writes it",
            )
        found = prepare(name, args.source)
    elif args.action == "synthetic":
        found = prepare_synthetic(args.train, args.test, seed=args.seed, name=args.name)
    elif args.action == "cifar10":
        found = prepare_real(args.source)
    else:
        found = prepare_variant(
            args.base, percent=args.percent, size=args.size, seed=args.seed, name=args.name
        )
    print(f"ready: {found.describe()}")
    return 0
