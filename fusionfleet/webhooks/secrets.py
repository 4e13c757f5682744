"""Each tenant's webhook secret, kept in the stack's secret store (never in a manifest or a record).

One secret per tenant (`<prefix>/<tenant>`; a single-tenant stack's `jobs/` drops use
`<prefix>/_default`, which no tenant name can be), made on first use by whichever party needs it
first: the deliverer, the tenant API, or `fusionfleet local webhook-secret`. Two that race both end
with the one that was created.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from fusionfleet.adapters.secrets import SecretStore
from fusionfleet.errors import FusionFleetError
from fusionfleet.webhooks.signing import WebhookSecret

DEFAULT_TENANT_SECRET = "_default"
CACHE_S = 300.0  # a rotated secret is used within this


def secret_name(prefix: str, tenant: str | None) -> str:
    return f"{prefix.rstrip('/')}/{tenant or DEFAULT_TENANT_SECRET}"


class TenantSecrets:
    def __init__(
        self, store: SecretStore, prefix: str, cache_s: float = CACHE_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._prefix = prefix
        self._cache_s = cache_s
        self._clock = clock
        self._cached: dict[str, tuple[float, WebhookSecret]] = {}
        self._lock = threading.Lock()

    def secret_for(self, tenant: str | None) -> WebhookSecret:
        """The tenant's secret, made now if it has none yet."""
        name = secret_name(self._prefix, tenant)
        with self._lock:
            cached = self._cached.get(name)
            if cached is not None and self._clock() - cached[0] < self._cache_s:
                return cached[1]
        value = self._store.get(name)
        if value is None:
            fresh = WebhookSecret.generate()
            what = f"FusionFleet webhook signing secret of tenant {tenant or '(none: jobs/ drops)'}"
            self._store.create(name, str(fresh), what)
            value = self._store.get(name)
            if value is None:
                raise FusionFleetError(f"the webhook secret {name} could not be created or read")
        secret = WebhookSecret.parse(value)
        with self._lock:
            self._cached[name] = (self._clock(), secret)
        return secret
