"""What turns tracing on and which trace an answer joins, read without a collector: the
standard variables, W3C traceparent headers, the span ids drawn for an answer, and the
settings' errors naming the variable and the fix."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbacks.tracing.context import TraceContext, child_span_id, parse_traceparent
from callbacks.tracing.settings import TraceSettings
from callbacks.tracing.tracer import _sampler
from pipelines.core.errors import ConfigurationError
from pipelines.core.settings import load_settings

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
         TraceSettings("http://127.0.0.1:4318")),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces",
          "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318"},
         TraceSettings("http://c:4318/v1/traces", signal_endpoint=True)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
         TraceSettings("http://c:4317", "grpc")),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, None),
    ],
)  # fmt: skip
def test_the_standard_variables_turn_tracing_on_and_off(
    environ: dict[str, str], expected: TraceSettings | None
) -> None:
    assert TraceSettings.from_environ(environ) == expected


def test_a_protocol_we_cannot_send_by_is_named_with_the_fix() -> None:
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
    }
    with pytest.raises(ConfigurationError, match=r"'http/json'.*use http/protobuf or grpc"):
        TraceSettings.from_environ(environ)


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"OTEL_TRACES_SAMPLER": "sometimes"}, "'sometimes' is not a sampler we know"),
        ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "not a ratio"),
        ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"}, "not a ratio"),
    ],
)
def test_a_sampler_we_do_not_know_is_named(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        _sampler(environ)


def test_a_trace_url_without_its_place_for_the_id_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="no \\{trace_id\\}"):
        load_settings(trace_url="http://phoenix:6006/traces/")


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (f"00-{TRACE}-{SPAN}-01", (TRACE, SPAN, True)),
        (f"00-{TRACE}-{SPAN}-00", (TRACE, SPAN, False)),
        (f" 00-{TRACE}-{SPAN}-01 ", (TRACE, SPAN, True)),
        (f"01-{TRACE}-{SPAN}-01-later", (TRACE, SPAN, True)),  # a later version's extra field
        (f"00-{TRACE}-{SPAN}-01-later", None),  # version 00 has four fields
        (f"ff-{TRACE}-{SPAN}-01", None),
        (f"00-{'0' * 32}-{SPAN}-01", None),
        (f"00-{TRACE}-{'0' * 16}-01", None),
        (f"00-{TRACE.upper()}-{SPAN}-01", None),
        ("", None),
        (None, None),
    ],
)
def test_traceparent_headers_as_the_w3c_reads_them(
    header: str | None, expected: tuple[str, str, bool] | None
) -> None:
    found = parse_traceparent(header)
    assert (None if found is None else (found.trace_id, found.span_id, found.sampled)) == expected


@given(st.text(max_size=80))
def test_no_header_text_breaks_the_reader(header: str) -> None:
    found = parse_traceparent(header)
    if found is not None:
        assert len(found.trace_id) == 32
        assert len(found.span_id) == 16


def test_a_new_trace_and_a_continued_one() -> None:
    fresh = TraceContext.new()
    assert len(fresh.trace_id) == 32
    assert fresh.parent_span_id is None
    continued = TraceContext.new((TRACE, SPAN), "vendor=1")
    assert (continued.trace_id, continued.parent_span_id) == (TRACE, SPAN)
    assert continued.trace_state == "vendor=1"
    assert continued.span_id not in (SPAN, fresh.span_id)


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_span_ids_are_the_same_for_the_same_answer_and_differ_by_what_they_stand_for(
    first: str, second: str
) -> None:
    assert child_span_id(SPAN, first) == child_span_id(SPAN, first)
    assert len(child_span_id(SPAN, first)) == 16
    if first != second:
        assert child_span_id(SPAN, first) != child_span_id(SPAN, second)
