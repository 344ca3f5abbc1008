"""The options of the JVMs the tests start (``tests/jvm_testing.py``): a class path's
class-data-sharing archive is dumped once, whole, by one process, and a JVM without a usable
archive runs silently without one.
"""

from __future__ import annotations

import fcntl
import pathlib
import subprocess

import pytest

import jvm_testing


def test_an_archive_is_dumped_once_through_a_partial_file_then_reused(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first lookup dumps the archive under a temporary name and renames it into place;
    later lookups return it without dumping again."""
    monkeypatch.setenv("ARIANE_CACHE", str(tmp_path))
    dumped: list[pathlib.Path] = []

    def dump(partial: pathlib.Path) -> bool:
        dumped.append(partial)
        partial.write_bytes(b"archive")
        return True

    first = jvm_testing._archive("/nowhere/a.jar", dump)
    again = jvm_testing._archive("/nowhere/a.jar", dump)
    assert first is not None and first == again and first.read_bytes() == b"archive"
    assert len(dumped) == 1 and dumped[0] != first and not dumped[0].exists()
    assert first.parent == tmp_path / "jvm-cds"


def test_no_archive_after_a_failed_training_or_while_another_process_trains(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training run that fails (its torn file is dropped) is not tried again within
    ``RETRY_S``, and a lookup
    that finds the lock held goes on without an archive instead of waiting."""
    monkeypatch.setenv("ARIANE_CACHE", str(tmp_path))
    tries: list[pathlib.Path] = []

    def killed(partial: pathlib.Path) -> bool:
        tries.append(partial)
        partial.write_bytes(b"torn")  # a training killed while it wrote
        return False

    assert jvm_testing._archive("/nowhere/b.jar", killed) is None
    assert jvm_testing._archive("/nowhere/b.jar", killed) is None
    assert len(tries) == 1 and not tries[0].exists()
    busy = jvm_testing._archive_path("/nowhere/c.jar").with_suffix(".lock")
    with busy.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert jvm_testing._archive("/nowhere/c.jar", killed) is None
    assert len(tries) == 1


def test_the_flags_run_a_jvm_silently_without_a_usable_archive(tmp_path: pathlib.Path) -> None:
    """``java`` with ``JVM_FLAGS`` and an archive that does not exist starts, prints nothing to
    stdout (where the tests read the drivers' events and mqadmin's answers) and exits 0."""
    missing = tmp_path / "missing.jsa"
    done = subprocess.run(
        ["java", *jvm_testing.JVM_FLAGS, f"-XX:SharedArchiveFile={missing}", "-version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "warning" not in done.stderr.lower(), done.stderr
