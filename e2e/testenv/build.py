"""Finds (or builds) the cached control-plane binaries through ``build.sh``.

``build.sh`` owns the cache layout and the version stamp; this module only runs it. A warm
``build.sh --check`` answers in well under a second; a cold build takes about 10 minutes, so the
test fixture never starts one by itself (``make e2e`` does, before pytest).
"""

from __future__ import annotations

import pathlib
import subprocess

BUILD_SCRIPT = pathlib.Path(__file__).resolve().with_name("build.sh")
"""The generator script (spec k8s-testenv §1.4)."""
CHECK_TIMEOUT_S = 30.0
"""Bound on ``build.sh --check`` (it only compares a stamp file)."""
NOT_BUILT_EXIT = 3
"""Exit status of ``build.sh --check`` when the current recipe is not built yet."""


class NotBuiltError(RuntimeError):
    """The binaries of the current recipe are not in the cache; run ``make e2e`` first."""


def cached_bin_dir() -> pathlib.Path:
    """Returns the cache's bin directory for the pinned versions, without building.

    Raises:
        NotBuiltError: the cache holds no complete build of the current recipe.
        subprocess.CalledProcessError: build.sh failed otherwise.
    """
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--check"],
        capture_output=True,
        text=True,
        timeout=CHECK_TIMEOUT_S,
        check=False,
    )
    if result.returncode == NOT_BUILT_EXIT:
        raise NotBuiltError(
            f"no cached test control plane for this recipe; build it with `make e2e` or "
            f"`{BUILD_SCRIPT}` (cold: about 10 minutes)"
        )
    result.check_returncode()
    return pathlib.Path(result.stdout.strip().splitlines()[-1])


def build() -> pathlib.Path:
    """Runs ``build.sh`` (progress on this process's stderr) and returns the bin directory.

    Raises:
        subprocess.CalledProcessError: the build failed.
    """
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, check=True
    )
    return pathlib.Path(result.stdout.strip().splitlines()[-1])


NODE_SCRIPT = BUILD_SCRIPT.with_name("build-node.sh")
"""Builds the real node's kubelet, kube-proxy, CoreDNS and pause image (and installs packages)."""
IMAGE_SCRIPT = BUILD_SCRIPT.with_name("build-image.sh")
"""Builds the Ariane image from the Dockerfile with buildah, cached by content."""
SPARK_SCRIPT = BUILD_SCRIPT.with_name("build-spark.sh")
"""Builds the spark-operator (Go module proxy), Spark's image, the flights job's image from
examples/spark/Dockerfile and the spark-operator's image, cached by content."""


def cached_output(script: pathlib.Path) -> pathlib.Path:
    """The output directory of a built ``script --check`` (build-node.sh, build-image.sh).

    Raises:
        NotBuiltError: not built for the current inputs.
        subprocess.CalledProcessError: the script failed otherwise.
    """
    result = subprocess.run(
        ["bash", str(script), "--check"],
        capture_output=True,
        text=True,
        timeout=CHECK_TIMEOUT_S,
        check=False,
    )
    if result.returncode == NOT_BUILT_EXIT:
        raise NotBuiltError(
            f"{script.name} has not built the current inputs; run `make e2e` or `bash {script}`"
        )
    result.check_returncode()
    return pathlib.Path(result.stdout.strip().splitlines()[-1])
