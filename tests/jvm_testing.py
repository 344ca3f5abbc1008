"""The JVMs the tests start, cheaper: client JVMs (the official and classic Java drivers,
``mqadmin``) and Spark drivers run C1 only, with the serial collector, from a class-data-sharing
archive of their class path.

Short-lived JVMs on a 2-core machine shared by parallel tests spend most of their CPU loading and
verifying classes and compiling with C2. Measured on this machine (CPU seconds of the JVM):
``mqadmin topicList`` 2.3 by default, 1.2 with ``JVM_FLAGS``, 0.6 with the archive too; a local
Spark session with three small queries 79, 68 and 17.

- ``jvm_flags(classpath, training)``: the options for ``java -cp CLASSPATH MAIN``.
- ``use_for_spark()``: sets ``$SPARK_SUBMIT_OPTS`` (what spark-submit's launcher adds to the driver
  JVM: every local PySpark session, ``spark-submit`` run and Spark job the tests start from this
  process) for this process and its children.

An archive (``<cache>/jvm-cds/<key>.jsa``; the key hashes the class path, each jar's size and
modification time and the JVM's version) is dumped on first use by one training run
(``-XX:ArchiveClassesAtExit``), one process at a time (an flock beside it), and renamed into
place whole; a process that finds another one training goes on without the archive rather
than wait, and a marker records the try (retried after ``RETRY_S``). A JDK 17 archive cannot
hold classes of a non-empty directory, so the training must load its main class from a jar (the
official v5 driver's classes are a directory: it runs with the flags alone).

Invariant: these options change how fast a JVM runs, never what it does; a missing, failed or
mismatched archive only makes the JVMs slower (the JVM ignores an archive whose class path or JDK
does not match, silently with ``-Xlog:cds=off``).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

JVM_FLAGS = (
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "-Xshare:auto",
    "-Xlog:cds=off",
    "-Xlog:cds+dynamic=off",
)
"""C1 only (a JVM that runs seconds to minutes never repays C2's compile time, which on 2 shared
cores competes with the brokers), the serial collector (no parallel GC threads for a small
heap), no perf-data file under /tmp, class-data sharing when an archive is usable, and no CDS
warning mixed into the outputs the tests read."""
ARCHIVE_TIMEOUT_S = 300.0
"""Longest training run that dumps an archive, seconds (it holds up one test module): a Spark
session takes about a minute on a quiet machine, 9 minutes under load 20 and more under load 38;
then the tests run without the archive and the training is tried again after ``RETRY_S``."""
RETRY_S = 3600.0
"""Seconds after a training run that produced no archive before the next one is tried."""
SPARK_OPTS_ENV = "SPARK_SUBMIT_OPTS"
"""The variable spark-submit's launcher adds to the driver JVM's options."""
_SPARK_TRAINING = """
import sys, tempfile
from examples.spark import stream_to_parquet
spark = stream_to_parquet.session("ariane-cds-training")
frame = spark.range(2000).selectExpr("id % 7 AS k", "id")
frame.groupBy("k").count().collect()
with tempfile.TemporaryDirectory() as out:
    frame.write.parquet(out + "/p")
    spark.read.parquet(out + "/p").count()
jvm = spark.sparkContext._gateway.proc
spark.stop()
jvm.stdin.close()  # the gateway JVM exits on EOF, dumping the archive; wait for the whole file
sys.exit(jvm.wait())
"""
"""A local session (the tests' settings, ``rocketmq`` registered), a shuffle and a parquet round
trip: the classes most Spark tests load."""


@functools.cache
def jvm_flags(classpath: str, training: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``JVM_FLAGS`` and, with a ``training`` main class (from a jar) and its arguments, this
    class path's archive once it exists (dumped by ``java -cp CLASSPATH TRAINING``). Cached per
    process."""
    if not training:
        return JVM_FLAGS

    def dump(partial: pathlib.Path) -> bool:
        logs = partial.parent / "training-logs"
        return _train(
            [
                "java",
                *JVM_FLAGS,
                f"-XX:ArchiveClassesAtExit={partial}",
                *(f"-Drocketmq.client.logRoot={logs}", f"-Drocketmq.log.root={logs}"),
                *("-cp", classpath, *training),
            ],
            env={"PATH": "/usr/bin:/bin", "HOME": str(partial.parent)},
            cwd=partial.parent,
        )

    archive = _archive(classpath, dump)
    return JVM_FLAGS if archive is None else (*JVM_FLAGS, f"-XX:SharedArchiveFile={archive}")


@functools.cache
def use_for_spark() -> None:
    """Set ``$SPARK_SUBMIT_OPTS`` to ``JVM_FLAGS`` and pyspark's archive (dumped on first use by
    a training session, ``_SPARK_TRAINING``), unless it is set already. Once per process."""
    if SPARK_OPTS_ENV in os.environ:
        return
    import pyspark

    home = pathlib.Path(pyspark.__file__).parent
    classpath = f"{home / 'conf'}{os.pathsep}{home / 'jars' / '*'}"

    def dump(partial: pathlib.Path) -> bool:
        opts = " ".join((*JVM_FLAGS, f"-XX:ArchiveClassesAtExit={partial}"))
        env = {**os.environ, SPARK_OPTS_ENV: opts, "PYTHONPATH": os.pathsep.join(sys.path)}
        with tempfile.TemporaryDirectory() as cwd:
            return _train([sys.executable, "-c", _SPARK_TRAINING], env=env, cwd=pathlib.Path(cwd))

    archive = _archive(classpath, dump)
    extra = () if archive is None else (f"-XX:SharedArchiveFile={archive}",)
    os.environ[SPARK_OPTS_ENV] = " ".join((*JVM_FLAGS, *extra))


def _train(argv: list[str], *, env: dict[str, str], cwd: pathlib.Path) -> bool:
    """Run a training command in its own process group, bounded by ``ARCHIVE_TIMEOUT_S``: past
    it the whole group (a Spark training's JVM is a grandchild) is SIGKILLed and reaped. Whether
    it ended in time with exit code 0 (only then is its archive whole)."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        return proc.wait(timeout=ARCHIVE_TIMEOUT_S) == 0
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return False


def _archive(classpath: str, dump: Callable[[pathlib.Path], bool]) -> pathlib.Path | None:
    """The archive of ``classpath``, dumped by ``dump(partial)`` (true: the training ended well
    and the file is whole) on first use (see the module
    docstring); ``None`` when there is none yet: another process is dumping it (this one goes
    on without rather than wait), or a training run in the last ``RETRY_S`` produced none."""
    archive = _archive_path(classpath)
    tried = archive.with_suffix(".tried")
    if archive.exists():
        return archive
    if tried.exists() and time.time() - tried.stat().st_mtime < RETRY_S:
        return None
    archive.parent.mkdir(parents=True, exist_ok=True)
    with archive.with_suffix(".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        if not archive.exists():
            partial = archive.with_suffix(f".{os.getpid()}.partial")
            try:
                if dump(partial) and partial.exists():
                    partial.rename(archive)
            finally:
                partial.unlink(missing_ok=True)
            tried.touch()
    return archive if archive.exists() else None


def _archive_path(classpath: str) -> pathlib.Path:
    """Where the archive of ``classpath`` lives (its key: see the module docstring)."""
    digest = hashlib.sha256(classpath.encode())
    for entry in classpath.split(os.pathsep):
        path = pathlib.Path(entry)
        jars = sorted(path.parent.glob("*.jar")) if path.name == "*" else [path]
        for jar in jars:
            stat = jar.stat() if jar.exists() else None
            digest.update(f"{jar}|{stat and stat.st_size}|{stat and stat.st_mtime_ns}".encode())
    version = subprocess.run(
        ["java", "-version"], capture_output=True, text=True, timeout=60, check=False
    )
    digest.update(version.stderr.encode())
    cache = pathlib.Path(os.environ.get("ARIANE_CACHE", pathlib.Path.home() / ".cache/ariane"))
    return cache / "jvm-cds" / f"{digest.hexdigest()[:24]}.jsa"
