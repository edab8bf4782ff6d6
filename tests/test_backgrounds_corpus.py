"""``grasp-s2r backgrounds``: the corpus of real photos built from packages, through the real CLI, offline (tiny .deb
files built here with ``dpkg-deb --build``): its manifest, the allowlist, the reserved KDE / Plasma packages, and
that corpus photos only ever enter training (the held-out photos stay the embedded ones)."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import subprocess

import cv2
import numpy as np
import pytest
import skimage.data

from grasp_s2r.cli import main
from grasp_s2r.runtime.conditions import load_photos
from grasp_s2r.vision.images.backgrounds import (
    EMBEDDED_HELDOUT,
    EMBEDDED_TRAIN,
    BackgroundError,
    draw_photo,
    load_backgrounds,
    photo_weights,
    split_names,
)
from grasp_s2r.vision.images.corpus_manifest import CORPUS_FORMAT, CORPUS_FORMAT_VERSION, IMAGE_FIELDS, manifest_digest
from grasp_s2r.vision.images.corpus_sources import read_allowlist

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb to build test packages")

PKG = "corpus-test-photos"
ROOT = "usr/share/backgrounds/test"
COPYRIGHT = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/

Files: *
Copyright: nobody
License: CC0-1.0

Files: test/wide.jpg
Copyright: somebody
License: CC-BY-4.0
"""
ALLOWED = ("noise.png", "wide.jpg", "coffee.png")
"""coffee.png is an embedded held-out photo: allowed here, yet it must stay out."""


def _make_deb(folder, package, images, copyright_text=COPYRIGHT):
    """A real .deb (xz, as Debian's) holding ``images`` {name: RGB array} under ROOT and a copyright file."""
    tree = folder / f"tree-{package}"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(f"Package: {package}\nVersion: 1.0-1\nArchitecture: all\n"
                                             f"Maintainer: test <t@example.org>\nDescription: test photos\n")
    (tree / ROOT).mkdir(parents=True)
    for name, rgb in images.items():
        cv2.imwrite(str(tree / ROOT / name), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    doc = tree / "usr/share/doc" / package
    doc.mkdir(parents=True)
    (doc / "copyright").write_text(copyright_text)
    deb = folder / f"{package}_1.0-1_all.deb"
    subprocess.run(["dpkg-deb", "-Zxz", "--root-owner-group", "--build", str(tree), str(deb)], check=True,
                   capture_output=True)
    shutil.rmtree(tree)
    return deb


def _allowlist(path, package=PKG, kind="deb", files=ALLOWED):
    path.write_text(json.dumps({"sources": [{"package": package, "kind": kind, "root": ROOT, "files": list(files),
                                             "note": "test"}]}))
    return path


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("debs")
    rng = np.random.default_rng(0)
    _make_deb(folder, PKG, {
        "noise.png": rng.integers(0, 256, (40, 60, 3), dtype=np.uint8),
        "wide.jpg": np.tile(np.linspace(0, 255, 800, dtype=np.uint8)[None, :, None], (300, 1, 3)),
        "abstract.png": np.full((30, 30, 3), 200, np.uint8),  # in the package, not in the allowlist
        "coffee.png": skimage.data.coffee(),
    })
    return folder


@pytest.fixture(scope="module")
def corpus(debs, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corpus")
    out = tmp / "corpus"
    code = main(["backgrounds", "--out", str(out), "--debs", str(debs), "--allowlist",
                 str(_allowlist(tmp / "allow.json")), "--cache", str(tmp / "cache"), "--no-progress"])
    assert code == 0
    return out


def test_manifest_fields_and_sha256(corpus):
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert (manifest["format"], manifest["format_version"]) == (CORPUS_FORMAT, CORPUS_FORMAT_VERSION)
    assert manifest["config"]["packages"] == [PKG] and manifest["config"]["max_side_px"] == 512
    assert manifest["config"]["image_format"] == "jpg" and "sha256" in manifest["config"]["allowlist"]
    (pkg,) = manifest["packages"]
    assert (pkg["package"], pkg["version"], pkg["images"]) == (PKG, "1.0-1", 2)
    rows = {r["path"].rsplit("/", 1)[1]: r for r in manifest["images"]}
    assert set(rows) == {"noise.png", "wide.jpg"}
    for row in rows.values():
        assert set(row) == set(IMAGE_FIELDS)
        f = corpus / row["file"]
        assert hashlib.sha256(f.read_bytes()).hexdigest() == row["sha256"]
        img = cv2.imread(str(f))
        assert (img.shape[1], img.shape[0]) == (row["width"], row["height"]) and max(img.shape[:2]) <= 512
    assert (rows["wide.jpg"]["source_width"], rows["wide.jpg"]["width"]) == (800, 512)
    assert rows["wide.jpg"]["license"].startswith("CC-BY-4.0") and rows["noise.png"]["license"].startswith("CC0")
    with open(corpus / "manifest.csv", newline="") as f:
        assert [r["sha256"] for r in csv.DictReader(f)] == [r["sha256"] for r in manifest["images"]]


def test_allowlist_applied_and_heldout_photos_left_out(corpus):
    files = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file())
    assert files == sorted(["contact_sheet.png", "manifest.csv", "manifest.json", f"{PKG}/noise.jpg", f"{PKG}/wide.jpg"])
    (pkg,) = json.loads((corpus / "manifest.json").read_text())["packages"]
    assert pkg["heldout_lookalikes"] == [f"{ROOT}/coffee.png"]


def test_corpus_photos_enter_training_only(corpus):
    split = split_names(corpus)
    corpus_files = [f"{PKG}/noise.jpg", f"{PKG}/wide.jpg"]
    assert split["train"] == [*EMBEDDED_TRAIN, *corpus_files]
    assert split["heldout"] == list(EMBEDDED_HELDOUT)
    assert f"manifest sha256 {manifest_digest(corpus)}" in split["source"][-1]
    heldout = load_backgrounds("heldout", corpus)
    assert all(np.array_equal(a, b) for a, b in zip(heldout, load_backgrounds("heldout"), strict=True))
    assert len(load_backgrounds("train", corpus)) == len(EMBEDDED_TRAIN) + 2


def test_embedded_photo_share_weights_the_draws(corpus):
    """``--embedded-photo-share``: the embedded training photos together drawn that share of the time, the corpus's the
    rest, each group's photos equally often; 0 keeps the uniform draw (and its random stream)."""
    photos = load_backgrounds("train", corpus)
    weights = photo_weights("train", corpus, 0.5)
    n = len(EMBEDDED_TRAIN)
    assert weights.shape == (n + 2,) and np.isclose(weights.sum(), 1.0)
    assert np.allclose(weights[:n], 0.5 / n) and np.allclose(weights[n:], 0.25)
    rng = np.random.default_rng(0)
    index = {id(p): i for i, p in enumerate(photos)}
    drawn = [index[id(draw_photo(photos, rng, weights))] for _ in range(4000)]
    assert abs(np.mean(np.array(drawn) >= n) - 0.5) < 0.04  # the corpus's 2 photos: half the draws, not 2 in 17
    assert photo_weights("train", corpus, 0.0) is None
    uniform, same = np.random.default_rng(1), np.random.default_rng(1)
    assert all(draw_photo(photos, uniform) is photos[int(same.integers(len(photos)))] for _ in range(20))


@pytest.mark.parametrize("share, where", [(0.5, None), (0.5, "folder"), (1.0, "corpus"), (-0.1, "corpus")])
def test_embedded_photo_share_refused_without_a_corpus_or_out_of_range(share, where, corpus, tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    cv2.imwrite(str(folder / "a.png"), np.zeros((40, 40, 3), np.uint8))
    directory = {"folder": folder, "corpus": corpus, None: None}[where]
    with pytest.raises(BackgroundError, match="corpus|share"):
        photo_weights("train", directory, share)


def test_train_vision_refuses_an_embedded_share_without_a_corpus(tmp_path, capsys):
    code = main(["train-vision", "--out", str(tmp_path / "run"), "--steps", "2", "--embedded-photo-share", "0.5"])
    assert code == 2 and "needs --backgrounds to be a corpus" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_grasping_tests_refuse_a_corpus(corpus):
    with pytest.raises(ValueError, match="corpus of training photos"):
        load_photos(str(corpus))


def test_changed_corpus_file_is_refused(corpus, tmp_path):
    copy = tmp_path / "corpus"
    shutil.copytree(corpus, copy)
    cv2.imwrite(str(copy / PKG / "noise.jpg"), np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(BackgroundError, match="differs from its manifest"):
        load_backgrounds("train", copy)


def _refused(args, capsys):
    code = main(["backgrounds", "--no-progress", *args])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "reserved for an independent test" in err, err


@pytest.mark.parametrize("how", ["packages", "allowlist", "pypi", "debs-folder", "control-file"])
def test_reserved_packages_refused(how, debs, tmp_path, capsys):
    out, reserved = tmp_path / "out", "plasma-workspace-wallpapers"
    args = ["--out", str(out), "--cache", str(tmp_path / "cache")]
    if how == "packages":
        args += ["--packages", reserved]
    elif how in ("allowlist", "pypi"):
        args += ["--allowlist", str(_allowlist(tmp_path / "a.json", "kde-wallpapers",
                                               "pypi" if how == "pypi" else "deb"))]
    else:  # a deb of a reserved package in --debs: by its file name, or hidden under another name
        folder = tmp_path / "debs"
        folder.mkdir()
        deb = _make_deb(folder, reserved, {"x.png": np.zeros((4, 4, 3), np.uint8)})
        if how == "control-file":
            deb.rename(folder / f"{PKG}_1.0-1_all.deb")
        args += ["--debs", str(folder), "--allowlist", str(_allowlist(tmp_path / "a.json"))]
    _refused(args, capsys)
    assert not out.exists() and not list(tmp_path.glob(".out.partial-*"))


def test_curated_allowlist_is_clean():
    sources = read_allowlist()  # checks kinds and reserved names
    names = [s.package for s in sources]
    assert len(names) == len(set(names)) and len(names) >= 8
    for s in sources:
        assert s.kind in ("deb", "pypi") and s.files and len(set(s.files)) == len(s.files) and s.note


def test_missing_deb_and_missing_apt_give_one_line(debs, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    code = main(["backgrounds", "--out", str(out), "--debs", str(tmp_path), "--packages", "mate-backgrounds",
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "apt-get download mate-backgrounds" in err
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # a machine without apt-get
    code = main(["backgrounds", "--out", str(out), "--cache", str(tmp_path / "cache"), "--packages",
                 "mate-backgrounds", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "apt-get not found" in err and "--debs DIR" in err
    assert not out.exists() and not list(tmp_path.glob(".out.partial-*"))


def test_textures_packed_in_a_zip_of_a_package(tmp_path):
    """A package whose textures lie in a zip of its data tree (0 A.D.'s public.zip), some DirectDraw (.dds): the
    allowlist's ``archive`` names the zip, the files are read out of it, decoded and licensed as the zip."""
    import io
    import zipfile

    from PIL import Image

    rng = np.random.default_rng(1)
    dds_rgb = rng.integers(0, 256, (64, 96, 3), dtype=np.uint8)
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as z:
        buf = io.BytesIO()
        Image.fromarray(dds_rgb).save(buf, format="DDS")  # uncompressed RGB: decoded back exactly
        z.writestr("art/terrain/sand_01.png.cached.dds", buf.getvalue())
        z.writestr("art/terrain/rock.png", cv2.imencode(".png", np.full((50, 50, 3), 90, np.uint8))[1].tobytes())
        z.writestr("art/terrain/bad.dds", b"not a texture")
    tree = tmp_path / "tree"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text("Package: game-data\nVersion: 2.0-1\nArchitecture: all\n"
                                             "Maintainer: test <t@example.org>\nDescription: packed textures\n")
    (tree / "usr/share/games/g").mkdir(parents=True)
    (tree / "usr/share/games/g/public.zip").write_bytes(packed.getvalue())
    (tree / "usr/share/doc/game-data").mkdir(parents=True)
    (tree / "usr/share/doc/game-data/copyright").write_text(COPYRIGHT.replace("CC0-1.0", "CC-BY-SA-3.0"))
    debs = tmp_path / "debs"
    debs.mkdir()
    subprocess.run(["dpkg-deb", "-Zxz", "--root-owner-group", "--build", str(tree), str(debs / "game-data_2.0-1_all.deb")],
                   check=True, capture_output=True)

    def build(files, out, allowlists="{}"):
        allow = tmp_path / f"{out}.json"
        allow.write_text(json.dumps({"sources": [{"package": "game-data", "kind": "deb", "root": "art/terrain",
                                                  "archive": "usr/share/games/g/public.zip", "files": files,
                                                  "note": "test"}]}))
        return main(["backgrounds", "--out", str(tmp_path / out), "--debs", str(debs), "--allowlist",
                     allowlists.format(allow), "--packages", "game-data", "--cache", str(tmp_path / "cache"),
                     "--format", "png", "--no-progress"])

    assert build(["sand_01.png.cached.dds", "rock.png"], "corpus", "curated,{}") == 0  # joined to the curated one
    manifest = json.loads((tmp_path / "corpus" / "manifest.json").read_text())
    assert manifest["config"]["allowlist"].startswith("curated ") and manifest["config"]["allowlist"].count("sha256") == 2
    rows = {r["file"]: r for r in manifest["images"]}
    assert set(rows) == {"game-data/sand_01.png", "game-data/rock.png"}
    assert rows["game-data/sand_01.png"]["license"].startswith("CC-BY-SA-3.0")
    assert (rows["game-data/sand_01.png"]["width"], rows["game-data/sand_01.png"]["height"]) == (96, 64)
    written = cv2.imread(str(tmp_path / "corpus" / "game-data" / "sand_01.png"))[:, :, ::-1]
    np.testing.assert_array_equal(written, dds_rgb)
    assert build(["bad.dds"], "broken") == 2  # an unreadable texture is refused, no corpus left behind
    assert not (tmp_path / "broken").exists()
    assert build(["rock.png"], "twice", "{0},{0}") == 2  # a package in two allowlists: which files?
    assert not (tmp_path / "twice").exists()
    bad = tmp_path / "pypi.json"
    bad.write_text(json.dumps({"sources": [{"package": "x", "kind": "pypi", "root": "a", "archive": "b.zip",
                                            "files": ["c.png"]}]}))
    from grasp_s2r.vision.images.corpus_sources import AllowlistError

    with pytest.raises(AllowlistError, match="Debian packages only"):
        read_allowlist(bad)


def test_an_allowlist_that_finds_no_file_writes_no_corpus(debs, tmp_path, capsys):
    # GIVEN an allowlist whose files are not in its package
    allow = _allowlist(tmp_path / "allow.json", files=["not-there.png"])
    # WHEN the corpus is built, THEN it is refused in one line and no corpus (of nothing) is written
    code = main(["backgrounds", "--out", str(tmp_path / "corpus"), "--debs", str(debs), "--allowlist", str(allow),
                 "--cache", str(tmp_path / "cache"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "none of the allowlist's files was found" in err, err
    assert not (tmp_path / "corpus").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".corpus")]
