"""One module per API, each defining `API`; this package collects them into `REGISTRY`."""

from __future__ import annotations

import importlib
import pkgutil

from ..schema import Api


def _load() -> dict[int, Api]:
    apis: dict[int, Api] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        api = getattr(module, "API", None)
        if isinstance(api, Api):
            if api.key in apis:
                raise RuntimeError(f"API key {api.key} defined twice")
            apis[api.key] = api
    return dict(sorted(apis.items()))


REGISTRY: dict[int, Api] = _load()
