"""How the flights job reaches its cluster: the endpoints, and on a secure cluster the CA its
TLS clients verify with and the user they sign as.

``make run`` runs on ``ariane dev --secure`` (issue 21): TLS enforcing on every port, ACL 2.0 on.
The job then uses the generated Super user only to create what the application needs — the
topic, the group, and a Normal user ``flights-app`` whose ACL allows exactly ``Pub`` and ``Sub``
on the topic ``flights`` and ``Sub`` on the groups it reads with — and every client of the data
path (the official producers and consumers, the Spark connector, the slave's figures) signs as
``flights-app``: least privilege, as a platform team would hand out credentials.
``--plain`` runs the same job on a plaintext cluster without ACLs.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

import grpc

from ariane import client
from ariane.grpcwire import tls as grpc_tls
from ariane.security import keys

APP_USER = "flights-app"
"""The Normal user the data path signs as on a secure cluster."""


@dataclasses.dataclass(frozen=True, slots=True)
class Access:
    """Endpoints plus, on a secure cluster, TLS and one user's credentials."""

    namesrv: str
    """The name server ``HOST:PORT`` every client starts from."""

    ca_path: str = ""
    """The CA the TLS clients verify the servers with; "" = plaintext."""

    access_key: str = ""
    """The user signed as; "" = unsigned."""

    secret_key: str = dataclasses.field(default="", repr=False)
    """Its secret key (never printed)."""

    @property
    def secure(self) -> bool:
        """Whether the clients dial TLS."""
        return bool(self.ca_path)

    def as_user(self, access_key: str, secret_key: str) -> Access:
        """The same cluster, signed as another user."""
        return dataclasses.replace(self, access_key=access_key, secret_key=secret_key)

    def admin_args(self) -> list[str]:
        """``ariane admin`` flags: endpoints, TLS, credentials."""
        args = ["--endpoints", self.namesrv]
        args += ["--tls", "--ca-file", self.ca_path] if self.secure else []
        if self.access_key:
            args += [f"--access-key={self.access_key}", f"--secret-key={self.secret_key}"]
        return args

    def worker_args(self) -> list[str]:
        """``examples.flights.worker`` flags for the official Python client."""
        args = ["--endpoints", self.namesrv]
        args += ["--tls"] if self.secure else []
        if self.access_key:
            args += [f"--access-key={self.access_key}", f"--secret-key={self.secret_key}"]
        return args

    def worker_env(self) -> dict[str, str]:
        """Environment the official client's grpcio needs: our CA as its roots (it verifies
        with the system's roots otherwise, security.md §8.3)."""
        return {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": self.ca_path} if self.secure else {}

    def spark_options(self) -> dict[str, str]:
        """The ``rocketmq`` source's options for TLS and credentials."""
        options: dict[str, str] = {}
        if self.secure:
            options.update(tls="true", caFile=self.ca_path)
        if self.access_key:
            options.update(accessKey=self.access_key, secretKey=self.secret_key)
        return options

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """grpcio credentials for direct broker calls; ``None`` = plaintext."""
        return grpc_tls.channel_credentials(self.ca_path) if self.secure else None

    def call_headers(self) -> tuple[tuple[str, str], ...]:
        """The signed headers of one call (none when unsigned)."""
        if not self.access_key:
            return ()
        return client.Credentials(self.access_key, self.secret_key).headers()


def from_dev(namesrv: str, ca_path: str, credentials_path: str) -> Access:
    """The Super user's access to an ``ariane dev`` cluster (plain when ``ca_path`` is "")."""
    if not ca_path:
        return Access(namesrv)
    saved = json.loads(pathlib.Path(credentials_path).read_text())
    return Access(namesrv, ca_path, str(saved["access_key"]), str(saved["secret_key"]))


def app_secret() -> str:
    """A fresh secret key for ``APP_USER`` (one per run)."""
    return keys.generate_secret_key(24)
