"""The one place machine constructs a Tinker client.

Everything that talks to Tinker (the preflight, the training loop, eval
sampling) gets its client from :func:`service_client` and uses only the SDK's
public surface on it. Tests replace this function with an in-process fake;
the code around it stays the code that runs against the real service.
"""

from __future__ import annotations

from typing import Any


def service_client(**kwargs: Any) -> Any:
    """A ``tinker.ServiceClient`` (lazy: constructing it makes no request)."""
    import tinker

    return tinker.ServiceClient(**kwargs)
