"""CIFAR-10 data: the official archive's format, the synthetic set, variants and broken files."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest

from course.errors import DatasetError
from course.runtime import data, data_command, data_prepare, synthetic
from tests.helpers import PYTHON


def _batch(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        b"batch_label": b"fixture",
        b"labels": [int(v) for v in rng.integers(0, 10, n)],
        b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
        b"filenames": [f"img{i}.png".encode() for i in range(n)],
    }


def _add(archive: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
    info.size = len(payload)
    archive.addfile(info, io.BytesIO(payload))


def write_cifar_archive(path: Path, per_batch: int = 20) -> dict:
    """An archive laid out like the official cifar-10-python.tar.gz (protocol-2 pickles of
    dicts)."""
    batches = {f"data_batch_{i}": _batch(per_batch, i) for i in range(1, 6)}
    batches["test_batch"] = _batch(per_batch, 99)
    with tarfile.open(path, "w:gz") as archive:
        for name, batch in batches.items():
            _add(archive, name, pickle.dumps(batch, protocol=2))
        _add(
            archive, "batches.meta", pickle.dumps({b"label_names": [b"airplane"] * 10}, protocol=2)
        )
    return batches


def leftovers(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*.partial")]


def test_real_archive_converts_to_chainers_own_file(tmp_path, data_root):
    batches = write_cifar_archive(tmp_path / "cifar-10-python.tar.gz")
    info = data_prepare.prepare_real(tmp_path / "cifar-10-python.tar.gz")
    assert (info.n_train, info.n_test, info.image_size) == (100, 20, 32)
    assert info.path == data_root / "pfnet/chainer/cifar/cifar-10.npz"
    assert info.meta["official_archive"] is False  # the fixture is not the real download

    # Chainer's own loader reads the converted file (it reads CHAINER_DATASET_ROOT at import).
    probe = (
        "import chainer, json; tr, te = chainer.datasets.get_cifar10(); "
        "print(json.dumps([len(tr), len(te), list(tr[0][0].shape), int(tr[0][1]), "
        "float(tr[0][0].max())]))"
    )
    out = subprocess.run(
        [PYTHON, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CHAINER_DATASET_ROOT": str(data_root)},
    ).stdout
    n_train, n_test, shape, label, top = json.loads(out)
    assert (n_train, n_test, shape) == (100, 20, [3, 32, 32])
    assert label == batches["data_batch_1"][b"labels"][0]
    assert top == pytest.approx(batches["data_batch_1"][b"data"][0].max() / 255.0)

    train, test = data.load("cifar10")
    assert np.array_equal(
        np.round(train[0][0].ravel() * 255).astype(np.uint8), batches["data_batch_1"][b"data"][0]
    )


def test_real_archive_is_found_in_chainers_folder(tmp_path, data_root):
    folder = data.data_dir()
    folder.mkdir(parents=True)
    write_cifar_archive(folder / data.CIFAR_ARCHIVE)
    assert data_prepare.prepare_real().n_train == 100
    assert data.resolve("auto") == data.REAL


def test_missing_real_archive_says_where_to_get_it(data_root):
    with pytest.raises(DatasetError) as caught:
        data_prepare.prepare_real()
    assert data.CIFAR_URL in caught.value.hint and "course data synthetic" in caught.value.hint
    with pytest.raises(DatasetError, match="does not exist"):
        data_prepare.prepare_real(Path("/nonexistent/cifar.tgz"))


def test_truncated_archive_fails_cleanly_and_leaves_nothing(tmp_path, data_root):
    good = tmp_path / "good.tar.gz"
    write_cifar_archive(good)
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(DatasetError, match="truncated or not the CIFAR-10 python archive"):
        data_prepare.prepare_real(cut)
    assert not data.path_for(data.REAL).exists()
    assert leftovers(data_root) == []


def test_archive_with_code_in_a_pickle_is_refused(tmp_path, data_root):
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    with tarfile.open(tmp_path / "evil.tar.gz", "w:gz") as archive:
        for i in range(1, 6):
            _add(archive, f"data_batch_{i}", pickle.dumps(Exploit(), protocol=2))
    with pytest.raises(DatasetError, match="unexpected object"):
        data_prepare.prepare_real(tmp_path / "evil.tar.gz")
    assert not marker.exists()


def test_archive_of_another_shape_is_refused(tmp_path, data_root):
    with tarfile.open(tmp_path / "odd.tar.gz", "w:gz") as archive:
        for i in range(1, 6):
            batch = _batch(4, i)
            batch[b"data"] = batch[b"data"][:, :100]
            _add(archive, f"data_batch_{i}", pickle.dumps(batch, protocol=2))
    with pytest.raises(DatasetError, match="3072-byte rows"):
        data_prepare.prepare_real(tmp_path / "odd.tar.gz")


def test_synthetic_set_is_deterministic_and_balanced():
    x1, y1 = synthetic.generate(300, seed=7)
    x2, y2 = synthetic.generate(300, seed=7)
    x3, _ = synthetic.generate(300, seed=8)
    assert x1.dtype == np.uint8 and x1.shape == (300, 3, 32, 32)
    assert np.array_equal(x1, x2) and np.array_equal(y1, y2)
    assert not np.array_equal(x1, x3)
    assert set(np.unique(y1)) == set(range(10))
    assert np.bincount(y1).min() > 10  # every class is there in a fair share


def test_synthetic_file_uses_the_real_format(data_root):
    info = data_prepare.prepare_synthetic(200, 50, seed=3)
    with np.load(info.path) as npz:
        assert {"train_x", "train_y", "test_x", "test_y"} <= set(npz.files)
        assert npz["train_x"].shape == (200, 3072) and npz["train_x"].dtype == np.uint8
    train, test = data.load("synthetic")
    assert len(train) == 200 and len(test) == 50
    x, y = train[0]
    assert x.shape == (3, 32, 32) and x.dtype == np.float32 and x.min() >= 0.0 and x.max() <= 1.0
    assert y.dtype == np.int32
    # Test images come from another seed than training images.
    assert not np.array_equal(test[0][0], train[0][0])


def test_auto_prefers_real_data_and_says_what_to_run_without_any(tmp_path, data_root):
    with pytest.raises(DatasetError, match="no data set is prepared") as caught:
        data.resolve("auto")
    assert "course data synthetic" in caught.value.hint
    data_prepare.prepare_synthetic(20, 20)
    assert data.resolve("auto") == data.SYNTHETIC
    write_cifar_archive(tmp_path / "c.tar.gz")
    data_prepare.prepare_real(tmp_path / "c.tar.gz")
    assert data.resolve("auto") == data.REAL
    assert data.available() == ["cifar10", "synthetic"]


def test_variant_subset_and_upscale(data_root):
    data_prepare.prepare_synthetic(1000, 200)
    info = data_prepare.prepare_variant("synthetic", percent=5, size=64)
    assert info.name == "synthetic_64px_5p"
    assert info.image_size == 64
    assert info.n_train == pytest.approx(50, abs=5) and info.n_test == pytest.approx(10, abs=5)
    arrays = data.read_arrays(info.name)
    assert set(np.unique(arrays.train_y)) == set(range(10))  # class-balanced
    train, _ = data.load(info.name)
    assert train[0][0].shape == (3, 64, 64)


def test_upscaling_keeps_the_picture():
    small = synthetic.generate(4, seed=1)[0]
    big = data_prepare._resize(small, 96)
    back = big[:, :, 1::3, 1::3]  # the centre pixel of each 3x3 block
    assert np.abs(back.astype(int) - small.astype(int)).mean() < 2
    assert data.variant_name("cifar10", 256, 5) == "cifar10_256px_5p"


def test_variant_needs_its_base_and_sane_arguments(data_root):
    with pytest.raises(DatasetError) as caught:
        data_prepare.prepare_variant("cifar10", percent=5, size=256)
    assert "course data cifar10" in caught.value.hint
    data_prepare.prepare_synthetic(50, 20)
    with pytest.raises(DatasetError, match="percent"):
        data_prepare.prepare_variant("synthetic", percent=0)
    with pytest.raises(DatasetError, match="out of range"):
        data_prepare.prepare_variant("synthetic", size=16)


def test_a_large_set_stays_uint8_and_can_be_sent_to_other_ranks(data_root, monkeypatch):
    data_prepare.prepare_synthetic(50, 20)
    small_train, _ = data.load("synthetic")
    monkeypatch.setattr(data, "FLOAT_IN_MEMORY_BYTES", 0)
    train, _ = data.load("synthetic")
    assert train._dataset._datasets[0].dtype == np.uint8  # converted one example at a time
    sent = pickle.loads(pickle.dumps(train))  # what chainermn.scatter_dataset does with it
    image, label = sent[7]
    assert image.dtype == np.float32 and label == small_train[7][1]
    np.testing.assert_allclose(image, small_train[7][0], rtol=1e-6)


@pytest.mark.parametrize("damage", ["truncate", "flip", "not-npz", "missing-keys"])
def test_damaged_data_set_gives_the_command_to_rebuild_it(data_root, damage):
    info = data_prepare.prepare_synthetic(100, 20)
    raw = info.path.read_bytes()
    if damage == "truncate":
        info.path.write_bytes(raw[: len(raw) * 2 // 3])
    elif damage == "flip":  # one byte deep inside a compressed member: the CRC check fails
        middle = len(raw) // 2
        info.path.write_bytes(raw[:middle] + bytes([raw[middle] ^ 0xFF]) + raw[middle + 1 :])
    elif damage == "not-npz":
        info.path.write_text("hello")
    else:
        with open(info.path, "wb") as f:
            np.savez(f, train_x=np.zeros((2, 3072), np.uint8))
    with pytest.raises(DatasetError) as caught:
        data.load("synthetic")
    assert "python -m course data synthetic" in caught.value.hint


def test_a_failed_write_keeps_the_old_file(data_root, monkeypatch):
    info = data_prepare.prepare_synthetic(30, 20, seed=1)
    before = info.path.read_bytes()

    def explode(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez_compressed", explode)
    with pytest.raises(OSError, match="disk full"):
        data_prepare.prepare_synthetic(30, 20, seed=2)
    assert info.path.read_bytes() == before
    assert leftovers(data_root) == []


def test_data_files_get_the_umasks_mode_not_mkstemps(data_root):
    mask = os.umask(0o022)
    try:
        info = data_prepare.prepare_synthetic(20, 20)
    finally:
        os.umask(mask)
    assert (
        info.path.stat().st_mode & 0o777 == 0o644
    )  # readable by the other users of a shared folder


def test_unsafe_names_are_refused(data_root):
    with pytest.raises(DatasetError, match="not a data set name"):
        data.path_for("../../etc/passwd")


def test_prepare_makes_a_variant_and_the_set_it_derives_from(data_root):
    info = data_prepare.prepare("synthetic_64px_10p")
    assert (info.name, info.image_size) == ("synthetic_64px_10p", 64)
    assert data.available() == ["synthetic", "synthetic_64px_10p"]
    assert data_prepare.prepare("synthetic_64px_10p").path == info.path  # already there: kept
    with pytest.raises(DatasetError, match="does not know how to make"):
        data_prepare.prepare("imagenet")


def rewrite(path: Path, **changes: np.ndarray) -> None:
    """The data set file at `path` with some arrays replaced, as another tool might have written
    it."""
    with np.load(path) as npz:
        arrays = {key: npz[key] for key in npz.files}
    with open(path, "wb") as f:
        np.savez(f, **{**arrays, **changes})


def test_labels_out_of_range_are_named_as_such(data_root):
    info = data_prepare.prepare_synthetic(30, 20)
    with np.load(info.path) as npz:
        labels = npz["train_y"].copy()
    labels[[3, 7]] = [12, 10]
    rewrite(info.path, train_y=labels)
    with pytest.raises(
        DatasetError,
        match=r"train labels must be 0\.\.9 \(CIFAR-10's ten classes\), "
        r"found 10, 12\n",
    ) as caught:
        data.read_arrays("synthetic")
    assert str(info.path) in caught.value.message
    assert "python -m course data synthetic" in caught.value.hint


@pytest.mark.parametrize("split", ["train", "test"])
def test_an_empty_data_set_is_refused_when_read_and_listed(data_root, capsys, split):
    info = data_prepare.prepare_synthetic(30, 20)
    rewrite(
        info.path,
        **{f"{split}_x": np.zeros((0, 3072), np.uint8), f"{split}_y": np.zeros(0, np.uint8)},
    )
    with pytest.raises(DatasetError, match=f"the {split} set has 0 images") as caught:
        data.load("synthetic")
    assert str(info.path) in caught.value.message
    assert "python -m course data synthetic" in caught.value.hint
    assert data_command.main(["list"]) == 0
    assert (
        f"synthetic: BROKEN: {info.path}: the {split} set has 0 images" in capsys.readouterr().out
    )


def test_an_archive_of_other_classes_is_refused_before_anything_is_written(tmp_path, data_root):
    with tarfile.open(tmp_path / "cifar-100.tar.gz", "w:gz") as archive:
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            batch = _batch(20, len(name))
            batch[b"labels"][0] = 57  # CIFAR-100's hundred classes
            _add(archive, name, pickle.dumps(batch, protocol=2))
    with pytest.raises(DatasetError, match=r"train labels must be 0\.\.9 .*found 57") as caught:
        data_prepare.prepare_real(tmp_path / "cifar-100.tar.gz")
    assert (
        f"not writing {data.path_for(data.REAL)}" in caught.value.message
        and data.CIFAR_URL in caught.value.hint
    )
    assert not data.path_for(data.REAL).exists() and leftovers(data_root) == []


# What generate() made for these seeds when it drew every image at once: a seed must keep naming
# the same data set.
UNCHUNKED_DIGESTS = {
    0: "ed6af9d3f81d0b42644f5c3bdc255b9fd5fa3280f4cda644aa22faffc67c38e6",
    1_000_003: "e917fb61745aa35ed8d382003d50fa662c509f954f27db86d1b2f7d52346e41c",
}


@pytest.mark.parametrize("seed", sorted(UNCHUNKED_DIGESTS))
def test_the_synthetic_images_do_not_depend_on_the_chunks(seed):
    x, y = synthetic.generate(1500, seed=seed)  # a chunk and a half
    assert hashlib.sha256(x.tobytes() + y.tobytes()).hexdigest() == UNCHUNKED_DIGESTS[seed]


def test_generating_a_large_set_never_holds_every_image_as_floats():
    n = 10_000
    probe = (
        "import resource; from course.runtime import synthetic; "
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
        f"synthetic.generate({n}); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)"
    )
    grown_kb = int(
        subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, check=True).stdout
    )  # Linux
    # Less than one float64 copy of all the images (235 MiB): memory must not grow with the floats
    # of every image, or the 50000-image set (4.6 GB drawn at once) does not fit a 4 GB laptop.
    # Drawn at once, these 10000 grew by 480 to 890 MB here; in chunks by 130 MB.
    assert grown_kb * 1024 < n * 3 * 32 * 32 * 8
