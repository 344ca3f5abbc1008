"""The flights job's Spark image (examples/spark/Dockerfile) and its SparkApplication agree with
each other, with pyproject and with the job, checked statically, and the job runs from its main
file with the manifest's own arguments against real broker processes and real PySpark.

No Docker engine is at hand: the image is never built or run here (the Dockerfile's header says
what that leaves unchecked). The manifest against the spark-operator's CRD on a real apiserver
is e2e/test_e2e_spark.py. The job runs against the session's shared cluster (``shared_cluster``),
whose flights topic (``pipeline.TOPIC``) only this module writes.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import re
import subprocess
import sys
import tomllib
from typing import Any

import pytest
from examples import spark as spark_examples
from examples.flights import dataset, pipeline

import dockerfile_testing
from ariane import client, dev
from live_testing import wait_routed

pytestmark = pytest.mark.usefixtures("spark_jvm")

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
IMAGE_ROOT = "/opt/ariane"
"""Where the Dockerfile puts the venv and the examples tree."""
JOB_FLIGHTS = 300
"""Flights the job test sends and checks (the first ones of the data set)."""
SPARK_SUBMIT = pathlib.Path(sys.executable).parent / "spark-submit"
"""pyspark's spark-submit (what the spark-operator runs in the driver pod)."""
SUBMITTED_MASTER = "local[3]"
"""The master the test submits with: not ``stream_to_parquet.LOCAL_MASTER``, so the run shows
whose master the job used."""
JOB_TIMEOUT_S = 540.0
"""Longest the job may take on a loaded 2-core machine (JVM start, 4 micro-batches, read back)."""


def _instructions() -> list[tuple[str, str]]:
    return dockerfile_testing.instructions(spark_examples.DOCKERFILE)


def _env() -> dict[str, str]:
    """The ENV instructions' variables."""
    found: dict[str, str] = {}
    for word, args in _instructions():
        if word == "ENV":
            found.update(re.findall(r"(\w+)=(\S+)", args))
    return found


def _pyspark_pin() -> str:
    extra: list[str] = PYPROJECT["project"]["optional-dependencies"]["spark"]
    pins = [p for p in extra if "pyspark" in p]
    assert len(pins) == 1 and pins[0].startswith("pyspark=="), pins
    return pins[0].removeprefix("pyspark==")


def _spec() -> dict[str, Any]:
    spec: dict[str, Any] = spark_examples.spark_application()["spec"]
    return spec


def test_hadolint_finds_nothing() -> None:
    """hadolint reports nothing at any level for the Spark image's Dockerfile."""
    result = dockerfile_testing.hadolint(spark_examples.DOCKERFILE)

    assert result.returncode == 0, result.stdout + result.stderr


def test_spark_version_is_one_everywhere() -> None:
    """The official base image's tag, the pyspark pin of the ``spark`` extra and the manifest's
    ``sparkVersion`` name the same Spark release."""
    final_from = [args for word, args in _instructions() if word == "FROM"][-1]

    assert final_from == f"spark:{_pyspark_pin()}-python3"
    assert _spec()["sparkVersion"] == _pyspark_pin()


def test_image_installs_this_version_with_the_spark_extra_into_a_311_venv() -> None:
    """The final stage installs ``ariane[spark,...]==<pyproject version>`` from the wheel built
    from this tree into a venv made by Python 3.11 (what ``requires-python`` allows)."""
    run = " ".join(args for word, args in _instructions() if word == "RUN")
    pinned = re.search(r'"ariane\[([a-z,]+)\]==([^"]+)"', run)

    assert pinned is not None
    assert "spark" in pinned.group(1).split(",")
    assert pinned.group(2) == PYPROJECT["project"]["version"]
    assert f"python3.11 -m venv {IMAGE_ROOT}/venv" in run
    assert PYPROJECT["project"]["requires-python"] == ">=3.11"
    assert "pip wheel --no-cache-dir --no-deps --wheel-dir /wheels ." in run


def test_manifest_runs_the_image_venv_as_the_images_user() -> None:
    """``spark.pyspark.python`` (driver and executors) is the image's venv interpreter, and the
    pods' ``runAsUser`` is the image's numeric USER (the base image's ``spark``, uid 185)."""
    spec = _spec()
    venv_python = f"{IMAGE_ROOT}/venv/bin/python"
    users = [args for word, args in _instructions() if word == "USER"]

    assert spec["sparkConf"]["spark.pyspark.python"] == venv_python
    assert spec["sparkConf"]["spark.pyspark.driver.python"] == venv_python
    assert _env()["PYSPARK_PYTHON"] == venv_python
    assert users[-1] == "185"
    for role in ("driver", "executor"):
        assert spec[role]["securityContext"]["runAsUser"] == int(users[-1])
        assert spec[role]["securityContext"]["runAsNonRoot"] is True


def test_main_file_is_the_flights_job_copied_into_the_image() -> None:
    """``mainApplicationFile`` is ``examples/flights/spark_job.py`` as the image copies it, and
    the image puts the examples' root on PYTHONPATH (the job imports ``examples.flights``)."""
    main = _spec()["mainApplicationFile"]

    assert main == f"local://{IMAGE_ROOT}/examples/flights/spark_job.py"
    assert ("COPY", f"examples {IMAGE_ROOT}/examples") in _instructions()
    assert (ROOT / main.removeprefix(f"local://{IMAGE_ROOT}/")).is_file()
    assert _env()["PYTHONPATH"] == IMAGE_ROOT


def test_image_name_is_the_one_the_dockerfile_says_to_build() -> None:
    """The manifest's ``image`` is the tag of the build command in the Dockerfile's header and
    in the README, and that tag is the package version."""
    image = _spec()["image"]
    build = f"docker build -f examples/spark/Dockerfile -t {image} ."

    assert build in spark_examples.DOCKERFILE.read_text()
    assert build in (ROOT / "README.md").read_text()
    assert image == f"ariane-spark:{PYPROJECT['project']['version']}"


def test_output_directory_is_mounted_shared_on_driver_and_executors() -> None:
    """``--out`` lies on the volume both the driver and the executors mount, and that volume is
    the manifest's ReadWriteMany claim (the executors write the tables, the driver reads them)."""
    spec = _spec()
    out = spec["arguments"][spec["arguments"].index("--out") + 1]
    claims = {
        o["metadata"]["name"]: o["spec"]
        for o in spark_examples.manifest_objects()
        if o["kind"] == "PersistentVolumeClaim"
    }
    (volume,) = [v for v in spec["volumes"] if "persistentVolumeClaim" in v]

    assert claims[volume["persistentVolumeClaim"]["claimName"]]["accessModes"] == ["ReadWriteMany"]
    for role in ("driver", "executor"):
        (mount,) = [m for m in spec[role]["volumeMounts"] if m["name"] == volume["name"]]
        assert out.startswith(mount["mountPath"].rstrip("/") + "/")


def test_ca_file_is_the_sample_brokers_bundle_mounted_on_driver_and_executors() -> None:
    """``--tls --ca-file F``: F is ``ca.crt`` of the sample Broker's name-server Secret (the one
    the chart's ``helm test`` pod trusts when the sample's ACL is off), mounted read-only where
    the driver and the executors (which pull the queues) look for it."""
    spec = _spec()
    arguments = spec["arguments"]
    ca_file = pathlib.PurePosixPath(arguments[arguments.index("--ca-file") + 1])
    (volume,) = [v for v in spec["volumes"] if "secret" in v]
    smoke = (ROOT / "charts" / "ariane" / "templates" / "tests" / "smoke.yaml").read_text()

    assert "--tls" in arguments
    assert volume["secret"]["secretName"] == "demo-namesrv-tls"
    assert volume["secret"]["items"] == [{"key": "ca.crt", "path": ca_file.name}]
    assert "{{ .Values.sampleBroker.name }}-namesrv-tls{{ end }}" in smoke  # ACL off: this CA
    for role in ("driver", "executor"):
        (mount,) = [m for m in spec[role]["volumeMounts"] if m["name"] == volume["name"]]
        assert mount["mountPath"] == str(ca_file.parent)
        assert mount["readOnly"] is True


def _fill_flights_topic(namesrv: str, flights: list[dataset.Flight]) -> None:
    """The ``flights`` topic as ``make run`` creates it, holding ``flights``' bodies."""

    async def main() -> None:
        async with client.AdminClient(namesrv) as admin:
            await admin.create_topic(pipeline.TOPIC, write_queue_nums=pipeline.QUEUES)
            await wait_routed(admin, pipeline.TOPIC)
        async with client.Producer(namesrv) as producer:
            await producer.send_batch(
                pipeline.TOPIC, [client.OutgoingMessage(f.body, tag=f.carrier) for f in flights]
            )

    asyncio.run(main())


@pytest.mark.slow
def test_job_runs_from_its_main_file_with_the_manifests_arguments(
    shared_cluster: dev.DevEndpoints, tmp_path: pathlib.Path
) -> None:
    """``spark-submit --master local[3] <main file> <manifest arguments>`` (the name server and
    the output directory swapped for local ones, ``--limit`` added), as the spark-operator
    submits it, runs on the submitted master (not the job's local default), reads the topic
    through Spark, prints the tables and exits 0 because they match the flights sent."""
    flights = dataset.load_flights()[:JOB_FLIGHTS]
    arguments = list(_spec()["arguments"])
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),  # the image's PYTHONPATH
        "PYSPARK_PYTHON": sys.executable,  # the manifest's spark.pyspark.python
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    _fill_flights_topic(shared_cluster.namesrv, flights)
    # The shared cluster serves plain TCP: the TLS arguments (the sample Broker's) go.
    tls_at = arguments.index("--tls")
    del arguments[tls_at : tls_at + 3]  # --tls --ca-file FILE
    arguments[arguments.index("--endpoints") + 1] = shared_cluster.namesrv
    arguments[arguments.index("--out") + 1] = str(out)
    main = ROOT / _spec()["mainApplicationFile"].removeprefix(f"local://{IMAGE_ROOT}/")
    done = subprocess.run(
        [
            str(SPARK_SUBMIT),
            "--master",
            SUBMITTED_MASTER,
            str(main),
            *arguments,
            "--limit",
            str(JOB_FLIGHTS),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=JOB_TIMEOUT_S,
        check=False,
    )

    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    assert f"matches the data set: {JOB_FLIGHTS} flights" in done.stdout
    assert f"on Spark master {SUBMITTED_MASTER}" in " ".join(done.stdout.split())
    assert (out / "mean_delay_by_carrier.png").is_file()
    assert list((out / "carriers").glob("*.parquet"))
