"""The operator's only Kubernetes API I/O: server-side apply of manifests and status patches.

Everything else in the operator is pure (``model``, ``status``) and goes through ``Kube``, so
tests can run the same steps against the real apiserver of ``e2e/testenv``.

Invariants:
- Writes are server-side apply with one field manager (``FIELD_MANAGER``) and forced conflicts:
  the operator owns the fields it renders, so a hand edit of them is reverted (drift revert),
  while fields it does not render (e.g. other managers' annotations) are left alone.
"""

from __future__ import annotations

from typing import Any, Final

import kubernetes  # type: ignore[import-untyped]

from ariane.operator import resources

FIELD_MANAGER: Final = "ariane-operator"


class Kube:
    """Thin wrapper over the ``kubernetes`` dynamic client (synchronous; run it in a thread)."""

    def __init__(self, api_client: Any) -> None:
        """Wraps a configured ``kubernetes.client.ApiClient``."""
        self._dynamic = kubernetes.dynamic.DynamicClient(api_client)

    def apply(self, manifest: resources.Manifest) -> resources.Manifest:
        """Server-side applies ``manifest`` (with ``metadata.namespace``); returns the live object.

        Raises:
            kubernetes.client.ApiException: the apiserver refused it (the body says why).
            kubernetes.dynamic.exceptions.ResourceNotFoundError: its kind is not served
                (e.g. ServiceMonitor without prometheus-operator).
        """
        api = self._dynamic.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
        live = self._dynamic.server_side_apply(
            api,
            body=manifest,
            name=manifest["metadata"]["name"],
            namespace=manifest["metadata"]["namespace"],
            field_manager=FIELD_MANAGER,
            force_conflicts=True,
        )
        return dict(live.to_dict())

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether the apiserver serves ``kind`` in ``api_version`` (a CRD may be missing)."""
        try:
            self._dynamic.resources.get(api_version=api_version, kind=kind)
        except kubernetes.dynamic.exceptions.ResourceNotFoundError:
            return False
        return True

    def patch_status(
        self, kind: str, namespace: str, name: str, status: dict[str, Any]
    ) -> resources.Manifest:
        """Merge-patches the ``status`` subresource of an Ariane CR; returns the live object."""
        api = self._dynamic.resources.get(api_version=resources.API_VERSION, kind=kind)
        live = self._dynamic.patch(
            api.subresources["status"],
            body={"status": status},
            name=name,
            namespace=namespace,
            content_type="application/merge-patch+json",
        )
        return dict(live.to_dict())

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> resources.Manifest:
        """The live object, or ``{}`` when it does not exist.

        Raises:
            kubernetes.client.ApiException: any refusal other than 404.
        """
        api = self._dynamic.resources.get(api_version=api_version, kind=kind)
        try:
            live = self._dynamic.get(api, name=name, namespace=namespace)
        except kubernetes.dynamic.exceptions.NotFoundError:
            return {}
        return dict(live.to_dict())

    def list_objects(
        self, api_version: str, kind: str, namespace: str, selector: dict[str, str]
    ) -> list[resources.Manifest]:
        """The live objects of ``kind`` in ``namespace`` whose labels include ``selector``."""
        api = self._dynamic.resources.get(api_version=api_version, kind=kind)
        text = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        found = self._dynamic.get(api, namespace=namespace, label_selector=text)
        return [dict(item.to_dict()) for item in found.items]

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        """Deletes one object (gone already is fine).

        Raises:
            kubernetes.client.ApiException: any refusal other than 404.
        """
        api = self._dynamic.resources.get(api_version=api_version, kind=kind)
        try:
            self._dynamic.delete(api, name=name, namespace=namespace)
        except kubernetes.dynamic.exceptions.NotFoundError:
            return


def api_client_from_environment() -> Any:
    """A ``kubernetes.client.ApiClient`` for the in-cluster ServiceAccount, else ``KUBECONFIG``.

    Raises:
        kubernetes.config.ConfigException: neither is available.
    """
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        return kubernetes.config.new_client_from_config()
    return kubernetes.client.ApiClient()
