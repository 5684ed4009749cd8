"""Validation of dynamic broker properties (AlterConfigs on a BROKER resource)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .definitions import BROKER_CONFIGS, broker_def, is_sensitive_name, listener_prefixed
from .values import ConfigError, UpdateMode


def validate_dynamic_broker_configs(props: Mapping[str, str], *, per_broker: bool) -> None:
    """Check that properties may be altered at run time (AlterConfigs on a BROKER resource).

    Mirrors Kafka: known read-only properties are refused, per-broker-only ones are refused at
    the cluster-default level, known properties must parse; unknown names are allowed.
    Passwords cannot be stored: Odradek has no password encoder yet.
    """
    non_dynamic = sorted(
        n
        for n in props
        if n in BROKER_CONFIGS and BROKER_CONFIGS[n].update_mode is UpdateMode.READ_ONLY
    )
    if non_dynamic:
        raise ConfigError(
            non_dynamic[0], f"Cannot update these configs dynamically: {_set(non_dynamic)}"
        )
    if not per_broker:
        only_broker = sorted(
            n
            for n in props
            if ((d := broker_def(n)) is not None and d.update_mode is UpdateMode.PER_BROKER)
            or listener_prefixed(n) is not None
        )
        if only_broker:
            raise ConfigError(
                only_broker[0],
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_set(only_broker)}",
            )
    for name, raw in props.items():
        defn = broker_def(name)
        if defn is not None and raw is not None:
            defn.parse(raw)
        if is_sensitive_name(name) and raw is not None:
            raise ConfigError(name, "Password encoder secret not configured")


def _set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(names) + ")"
