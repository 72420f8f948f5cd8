"""Checks, in seconds, that Tinker can be used before anything costs money.

The SDK retries an unreachable service for five minutes (tinker.md §2.6), and
``.result(timeout=...)`` does not bound that. So before a run: a local key
check, a TCP connect to the service with a short timeout, then one SDK call
(the server's capabilities: checks the key and the base model) in a daemon
thread that we stop waiting for after ``timeout`` seconds.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Literal
from urllib.parse import urlsplit

from machine_git.core.errors import TinkerServiceError
from machine_git.train import service

KEY_ENV = "TINKER_API_KEY"
TIMEOUT_ENV = service.TIMEOUT_ENV
_PROXY_ENVS = (
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
)

Purpose = Literal["train", "sample"]


@dataclass
class ServiceInfo:
    """What the preflight learned: where Tinker is and what it serves."""

    base_url: str
    models: list[str]
    seconds: float


def timeout_seconds() -> float:
    """The preflight's patience: the same per-call limit as every Tinker call."""
    return service.timeout_seconds()


def check(
    base_model: str | None, purpose: Purpose, timeout: float | None = None
) -> ServiceInfo:
    """Key set, service reachable and answering, model served; else one line."""
    started = time.monotonic()
    limit = timeout if timeout is not None else timeout_seconds()
    check_key()
    url = base_url()
    _probe(url, limit)
    caps = _bounded(url, limit, _capabilities)
    models = _check_model(caps, base_model, purpose)
    return ServiceInfo(url, models, time.monotonic() - started)


def check_key() -> None:
    """A key is configured where the SDK looks for one (no request made)."""
    key = os.environ.get(KEY_ENV, "").strip()
    if key:
        if not (key.startswith("tml-") or key.startswith("eyJ")):
            raise TinkerServiceError(
                f"{KEY_ENV} does not look like a Tinker key (they start with 'tml-')"
            )
        return
    if os.environ.get("TINKER_CREDENTIAL_CMD"):
        return
    if (Path.home() / ".tinker" / "credentials.json").is_file():
        return
    raise TinkerServiceError(
        f"no Tinker API key: set {KEY_ENV} (or run 'tinker auth login')"
    )


def base_url() -> str:
    """Where the SDK will connect: ``$TINKER_BASE_URL`` or Tinker's default."""
    from tinker.lib.base_url import resolve_base_url

    return resolve_base_url(None)


def _probe(url: str, timeout: float) -> None:
    # Through a proxy a direct connect proves nothing; the bounded SDK call
    # below still keeps the wait short.
    if any(os.environ.get(name) for name in _PROXY_ENVS):
        return
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=min(timeout, 5.0)):
            pass
    except socket.gaierror:
        reason = f"cannot resolve {host}"
    except ConnectionRefusedError:
        reason = "connection refused"
    except TimeoutError:
        reason = f"no answer within {min(timeout, 5.0):g} s"
    except OSError as e:
        reason = e.strerror or str(e)
    else:
        return
    raise TinkerServiceError(
        f"Tinker is unreachable at {url}: {reason} (check the network or "
        "TINKER_BASE_URL)"
    )


def _capabilities() -> Any:
    client = service.service_client()
    # The deprecated ServiceClient method keeps every request on the one
    # client seam (service.py); RestClient would be a second one.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return client.get_server_capabilities()


def _bounded(url: str, timeout: float, call: Callable[[], Any]) -> Any:
    try:
        return service.bounded("the capabilities check", call, timeout=timeout)
    except TinkerServiceError as e:
        text = str(e)
        if text.startswith("Tinker did not answer"):
            raise TinkerServiceError(
                f"Tinker at {url} did not answer within {timeout:g} s "
                f"(set {TIMEOUT_ENV} to wait longer)"
            ) from None
        raise TinkerServiceError(f"Tinker refused the check: {text}") from None


def _check_model(caps: Any, base_model: str | None, purpose: Purpose) -> list[str]:
    served = {
        m.model_name: m
        for m in getattr(caps, "supported_models", None) or []
        if getattr(m, "model_name", None)
    }
    if base_model is None or not served:
        return sorted(served)
    model = served.get(base_model)
    if model is None:
        shown = ", ".join(sorted(served)[:8])
        raise TinkerServiceError(
            f"Tinker does not serve {base_model} (it serves {shown})"
        )
    able = model.trainable if purpose == "train" else model.sampleable
    if able is False:
        verb = "train" if purpose == "train" else "sample"
        raise TinkerServiceError(f"Tinker cannot {verb} {base_model} right now")
    return sorted(served)


def one_line(error: BaseException) -> str:
    """An exception as one short line (an HTTP error names its status)."""
    return service.describe(error)
