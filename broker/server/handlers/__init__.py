"""One module per API (or family of APIs); importing this package registers every handler."""

from __future__ import annotations

import importlib
import pkgutil

from .registry import HANDLERS, RequestContext, handles

for _info in pkgutil.iter_modules(__path__):
    if _info.name != "registry":
        importlib.import_module(f"{__name__}.{_info.name}")

__all__ = ["HANDLERS", "RequestContext", "handles"]
