"""Whether answers are traced, read from OpenTelemetry's own variables.

The OTLP exporters read their endpoint, headers, timeout and compression themselves; this
reads only what decides whether there is anything to export and how: an endpoint
(``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``), not
``OTEL_SDK_DISABLED``, not ``OTEL_TRACES_EXPORTER=none``, and the protocol. Reading it imports
nothing of OpenTelemetry: with no endpoint, an answer costs no more than before.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pipelines.core.errors import ConfigurationError

__all__ = ["OtlpProtocol", "TraceSettings"]

OtlpProtocol = Literal["http/protobuf", "grpc"]
_PROTOCOLS: tuple[OtlpProtocol, ...] = ("http/protobuf", "grpc")


@dataclass(frozen=True)
class TraceSettings:
    """Where spans go: ``endpoint`` as given (the exporter adds ``/v1/traces`` to the
    general variable's, as the specification says), by ``protocol``."""

    endpoint: str
    protocol: OtlpProtocol = "http/protobuf"
    signal_endpoint: bool = False  # the endpoint is the traces one, used as it is

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> TraceSettings | None:
        """The settings the variables give; None when they turn tracing off or name no
        endpoint. A protocol we cannot send by is a :class:`ConfigurationError`."""
        env = os.environ if environ is None else environ
        if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return None
        exporters = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
        if exporters == "none":
            return None
        traces_endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        endpoint = traces_endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        if not endpoint:
            return None
        protocol = (
            env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "").strip()
            or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip()
            or "http/protobuf"
        )
        if protocol not in _PROTOCOLS:
            raise ConfigurationError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL {protocol[:40]!r} is not one we export by",
                fix="use http/protobuf or grpc, or unset it (http/protobuf)",
            )
        return cls(endpoint, protocol, signal_endpoint=bool(traces_endpoint))
