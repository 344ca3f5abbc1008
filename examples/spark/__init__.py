"""Spark examples: the streaming job of the exactly-once tests (``stream_to_parquet``) and the
flights job on Kubernetes (``flights-sparkapplication.yaml``, its image's ``Dockerfile``).

The manifest is plain YAML for ``kubectl apply``; ``manifest_objects`` and ``spark_application``
read it for the checks (tests/test_spark_image.py, e2e/test_e2e_spark.py).
"""

from __future__ import annotations

import pathlib
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
MANIFEST = HERE / "flights-sparkapplication.yaml"
"""The flights job as a Kubeflow spark-operator ``SparkApplication`` with what it needs."""
DOCKERFILE = HERE / "Dockerfile"
"""The Spark image the manifest runs (built from the repository root)."""


def manifest_objects() -> list[dict[str, Any]]:
    """Every object of ``MANIFEST``, in file order."""
    # Imported here: the Spark image runs examples.spark.stream_to_parquet (the flights job
    # imports it), and PyYAML is no dependency of the wheel's extras it installs.
    import yaml

    return [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]


def spark_application() -> dict[str, Any]:
    """The one ``SparkApplication`` of ``MANIFEST``.

    Raises:
        ValueError: the manifest holds none or several.
    """
    found = [o for o in manifest_objects() if o["kind"] == "SparkApplication"]
    if len(found) != 1:
        raise ValueError(f"{MANIFEST} holds {len(found)} SparkApplications, want 1")
    return found[0]
