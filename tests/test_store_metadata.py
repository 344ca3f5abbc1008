"""Metadata files are replaced atomically and bounded in size."""

from __future__ import annotations

import os
import pathlib

import pytest

from ariane.store import file_layer, metadata


def test_write_replaces_content_and_leaves_no_temp_file(tmp_path: pathlib.Path) -> None:
    """A second write replaces the first; no temporary file is left beside the target."""
    target = tmp_path / "config" / "topics.json"
    metadata.write_atomically(target, b'{"a": 1}')
    metadata.write_atomically(target, b'{"a": 2}')
    assert metadata.read_optional(target) == b'{"a": 2}'
    assert sorted(os.listdir(target.parent)) == ["topics.json"]


def test_a_crash_before_rename_keeps_the_old_content(tmp_path: pathlib.Path) -> None:
    """A leftover temp file from a crashed write does not change what readers see."""
    target = tmp_path / "offsets.json"
    metadata.write_atomically(target, b"old")
    (tmp_path / ".offsets.json.tmp").write_bytes(b"half-writ")
    assert metadata.read_optional(target) == b"old"
    metadata.write_atomically(target, b"new")
    assert metadata.read_optional(target) == b"new"


def test_missing_file_reads_as_none_and_oversize_is_refused(tmp_path: pathlib.Path) -> None:
    """Absent files read as None; content above the bound is refused before writing."""
    assert metadata.read_optional(tmp_path / "nope.json") is None
    with pytest.raises(ValueError, match="exceeds"):
        metadata.write_atomically(tmp_path / "big", b"x" * (metadata.METADATA_FILE_BYTES_MAX + 1))
    assert not (tmp_path / "big").exists()


def test_metadata_goes_through_the_file_layer_and_its_crash_model() -> None:
    """Written through the in-memory layer, a metadata file is durable at once (a power loss
    keeps the new content) and an oversize one is refused when read back."""
    layer = file_layer.MemoryFileLayer()
    target = pathlib.Path("/store/config/offsets.json")
    metadata.write_atomically(target, b"old", layer=layer)
    metadata.write_atomically(target, b"new", layer=layer)
    layer.crash()
    assert metadata.read_optional(target, layer=layer) == b"new"
    assert metadata.read_optional(target.with_name("absent.json"), layer=layer) is None
    layer.write_small_file(target, b"x" * (metadata.METADATA_FILE_BYTES_MAX + 1))
    with pytest.raises(ValueError, match="at most"):
        metadata.read_optional(target, layer=layer)
