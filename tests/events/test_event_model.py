"""The event model: every type round-trips through JSON, JSONL and a real SSE parser."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import pytest
from httpx_sse import EventSource
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from callbacks.events import (
    EVENT_TYPES,
    CitationData,
    CitationEvent,
    DoneData,
    DoneEvent,
    ErrorData,
    ErrorEvent,
    Event,
    Reference,
    ReferenceEvent,
    StartData,
    StartEvent,
    Timings,
    TokenData,
    TokenEvent,
    Usage,
    event_json_schema,
    parse_event,
    to_jsonl,
    to_sse,
)

RID = "req-7f3a"


def one_request() -> list[Event]:
    """A whole answer's stream, with the awkward strings a real answer can carry."""
    return [
        StartEvent(
            seq=1,
            request_id=RID,
            t_ms=0,
            data=StartData(
                question="What does ABCA1 do in Tangier disease?",
                collections=["reactome", "disease_variants"],
                options={"cite_urls": False},
            ),
        ),
        CitationEvent(
            seq=2,
            request_id=RID,
            t_ms=41.5,
            data=CitationData(
                n=1,
                st_id="R-HSA-5682113",
                display_name="Defective ABCA1 causes TGD",
                collection="reactome",
            ),
        ),
        CitationEvent(
            seq=3,
            request_id=RID,
            t_ms=41.6,
            data=CitationData(
                n=2,
                url="/userguide/pathway-browser",
                display_name="Pathway Browser",
                collection="userguide",
            ),
        ),
        TokenEvent(seq=4, request_id=RID, t_ms=50, data=TokenData(text="line one\r\n\r\n")),
        TokenEvent(seq=5, request_id=RID, t_ms=51, data=TokenData(text="event: done\ndata: {}")),
        ReferenceEvent(
            seq=6,
            request_id=RID,
            t_ms=51.5,
            data=Reference(
                n=1,
                source_n=1,
                st_id="R-HSA-5682113",
                display_name="Defective ABCA1 causes TGD",
                collection="reactome",
            ),
        ),
        TokenEvent(seq=7, request_id=RID, t_ms=52, data=TokenData(text="</script> \u2028 é [1]")),
        ErrorEvent(
            seq=8, request_id=RID, t_ms=60, data=ErrorData(code="timeout", message="too slow")
        ),
        DoneEvent(
            seq=9,
            request_id=RID,
            t_ms=61,
            data=DoneData(
                state="answered",
                text="ABCA1 exports cholesterol [1].",
                references=[
                    Reference(
                        n=1,
                        source_n=1,
                        st_id="R-HSA-5682113",
                        display_name="Defective ABCA1 causes TGD",
                        collection="reactome",
                    )
                ],
                usage=Usage(answer_tokens=7),
                timings=Timings(first_token_ms=50, total_ms=61),
            ),
        ),
    ]


def test_every_event_type_is_covered() -> None:
    assert {event.type for event in one_request()} == set(EVENT_TYPES)


@pytest.mark.parametrize("event", one_request(), ids=lambda e: f"{e.seq}-{e.type}")
def test_json_round_trip(event: Event) -> None:
    assert parse_event(event.model_dump_json()) == event
    assert parse_event(json.loads(event.model_dump_json())) == event


def test_wire_shape_is_the_documented_envelope() -> None:
    line = to_jsonl(one_request()[1])
    assert line.endswith("\n")
    assert line.count("\n") == 1
    record = json.loads(line)
    assert list(record) == ["seq", "type", "request_id", "t_ms", "data"]
    # A citation carries exactly one identifier: the absent one is not even null.
    assert record["data"] == {
        "n": 1,
        "st_id": "R-HSA-5682113",
        "display_name": "Defective ABCA1 causes TGD",
        "collection": "reactome",
    }


def test_jsonl_round_trip_keeps_one_record_per_line() -> None:
    events = one_request()
    lines = "".join(to_jsonl(event) for event in events).splitlines()
    assert [parse_event(line) for line in lines] == events


def test_sse_frames_parse_back_with_a_real_sse_parser() -> None:
    events = one_request()
    body = "".join(to_sse(event) for event in events).encode()
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
    parsed = list(EventSource(response).iter_sse())

    assert [frame.event for frame in parsed] == [event.type for event in events]
    assert [frame.id for frame in parsed] == [str(event.seq) for event in events]
    assert [parse_event(frame.data) for frame in parsed] == events


def test_every_emitted_event_validates_against_the_exported_schema() -> None:
    schema = event_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for event in one_request():
        validator.validate(json.loads(to_jsonl(event)))


@pytest.mark.parametrize(
    "bad",
    [
        {"seq": 0, "type": "token", "request_id": RID, "t_ms": 0, "data": {"text": "x"}},
        {"seq": 1, "type": "tokens", "request_id": RID, "t_ms": 0, "data": {"text": "x"}},
        {"seq": 1, "request_id": RID, "t_ms": 0, "data": {"text": "x"}},
        {"seq": 1, "type": "token", "request_id": RID, "t_ms": 0, "data": {"text": "x"}, "x": 1},
        {
            "seq": 2,
            "type": "citation",
            "request_id": RID,
            "t_ms": 1,
            "data": {"n": 1, "display_name": "no id", "collection": "reactome"},
        },
    ],
    ids=["seq-zero", "unknown-type", "no-type", "extra-key", "citation-without-identifier"],
)
def test_schema_and_model_agree_on_what_is_not_an_event(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse_event(bad)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, event_json_schema())


def citation(**identifier: str) -> CitationData:
    return CitationData(n=1, display_name="Page", collection="userguide", **identifier)


def test_citation_carries_exactly_one_identifier() -> None:
    with pytest.raises(ValidationError, match="exactly one of st_id or url"):
        citation(st_id="R-HSA-5682113", url="/userguide/pathway-browser")
    with pytest.raises(ValidationError, match="exactly one of st_id or url"):
        citation()


@pytest.mark.parametrize("st_id", ["R-HSA-5682113", "R-HSA-69278.3", "R-MMU-123"])
def test_real_stable_ids_are_accepted(st_id: str) -> None:
    assert citation(st_id=st_id).st_id == st_id


@pytest.mark.parametrize("st_id", ["5682113", "R-HSA-", "r-hsa-1", "R-HSA-12 ", "UniProt:P12345"])
def test_invented_looking_ids_are_refused(st_id: str) -> None:
    with pytest.raises(ValidationError, match="not a Reactome stable id"):
        citation(st_id=st_id)


@pytest.mark.parametrize(
    "url", ["/userguide/pathway-browser", "https://reactome.org/userguide/analysis"]
)
def test_site_paths_and_http_urls_are_accepted(url: str) -> None:
    assert citation(url=url).url == url


@pytest.mark.parametrize(
    "url",
    [
        "/work/shared/data/userguide/pathway-browser.mdx",
        "userguide/pathway-browser",
        "file:///etc/passwd",
        "C:\\docs\\guide.md",
        "//evil.example/x",
        "/userguide/../../etc/passwd",
    ],
)
def test_local_file_paths_are_never_urls(url: str) -> None:
    with pytest.raises(ValidationError, match="url"):
        citation(url=url)


@given(st.text())
def test_any_token_text_survives_sse_and_jsonl(text: str) -> None:
    event = TokenEvent(seq=3, request_id=RID, t_ms=1.25, data=TokenData(text=text))
    assert to_jsonl(event).splitlines() == [to_jsonl(event).removesuffix("\n")]
    assert parse_event(to_jsonl(event).splitlines()[0]) == event

    response = httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=to_sse(event).encode()
    )
    (frame,) = list(EventSource(response).iter_sse())
    assert (frame.id, frame.event) == ("3", "token")
    assert parse_event(frame.data) == event


def test_lone_surrogates_are_repaired_so_every_event_can_be_sent() -> None:
    event = TokenEvent(seq=1, request_id=RID, t_ms=0, data=TokenData(text="ab\ud800cd"))
    assert event.data.text == "ab\ufffdcd"
    assert parse_event(to_jsonl(event)) == event


@given(st.lists(st.text() | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)))
def test_any_python_string_can_be_sent(pieces: list[str]) -> None:
    event = TokenEvent(seq=2, request_id=RID, t_ms=0, data=TokenData(text="".join(pieces)))
    assert len(to_jsonl(event).splitlines()) == 1
    assert parse_event(to_jsonl(event)) == event


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_numbers_json_cannot_carry_are_refused(value: float) -> None:
    with pytest.raises(ValidationError, match="finite number"):
        TokenEvent(seq=1, request_id=RID, t_ms=value, data=TokenData(text="x"))
    with pytest.raises(ValidationError, match="finite number"):
        Timings(total_ms=value)
    with pytest.raises(ValidationError, match="finite number"):
        StartData(question="q", collections=[], options={"temperature": value})


@pytest.mark.parametrize(
    "url",
    [
        "/work/shared/data/userguide/page.html",
        "/home/u/guide.md?x=1",
        "/x/guide.mdx#top",
        "/tmp/page",
    ],
)
def test_more_local_file_paths_are_never_urls(url: str) -> None:
    with pytest.raises(ValidationError, match="local file path"):
        citation(url=url)


@pytest.mark.parametrize(
    "data",
    [
        {"n": 1, "st_id": "R-HSA-1\n", "display_name": "x", "collection": "reactome"},
        {"n": 1, "url": "C:\\docs\\guide.md", "display_name": "x", "collection": "userguide"},
        {"n": 1, "url": "userguide/x", "display_name": "x", "collection": "userguide"},
    ],
)
def test_schema_refuses_identifiers_the_model_refuses(data: dict[str, Any]) -> None:
    event = {"seq": 2, "type": "citation", "request_id": RID, "t_ms": 1, "data": data}
    with pytest.raises(ValidationError):
        parse_event(event)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(event, event_json_schema())
