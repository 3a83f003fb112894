"""The public event stream: one model per event type and the two wire encodings.

Every request yields ``{"seq", "type", "request_id", "t_ms", "data"}`` objects. The CLI, the
SSE endpoint and the event log all emit exactly these models, serialised by
:func:`to_jsonl` or :func:`to_sse`, and read back by :func:`parse_event`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    field_validator,
    model_serializer,
    model_validator,
)

from pipelines.core.identifiers import (
    HTTP_URL_PATTERN,
    SITE_PATH_PATTERN,
    ST_ID_PATTERN,
    st_id_problem,
    url_problem,
)
from pipelines.core.text import without_surrogates

__all__ = [
    "EVENT_TYPES",
    "CitationData",
    "CitationEvent",
    "DoneData",
    "DoneEvent",
    "DoneState",
    "ErrorData",
    "ErrorEvent",
    "Event",
    "EvidenceData",
    "Reference",
    "ReferenceEvent",
    "StartData",
    "StartEvent",
    "Timings",
    "TokenData",
    "TokenEvent",
    "Usage",
    "event_json_schema",
    "parse_event",
    "to_jsonl",
    "to_sse",
]

# JSON can only carry finite numbers and well-formed Unicode; refuse the first and repair
# the second (a lone surrogate from a broken decoder becomes U+FFFD) so every event we
# accept can be sent.
_MODEL_CONFIG = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


Text = Annotated[str, AfterValidator(without_surrogates)]
JsonScalar = str | int | float | bool | None

DoneState = Literal["answered", "nothing_found", "refused", "failed"]


class _Model(BaseModel):
    model_config = _MODEL_CONFIG


def _citation_schema(schema: dict[str, Any]) -> None:
    # The wire never carries a null identifier (see _omit_absent_identifier), so the schema
    # says "a string, and exactly one of the two" rather than "string or null".
    properties = schema["properties"]
    # (?![\s\S]) ends the match in every regex dialect; "$" also admits a final newline in
    # Python's.
    properties["st_id"] = {"type": "string", "pattern": f"^{ST_ID_PATTERN}(?![\\s\\S])"}
    properties["url"] = {
        "type": "string",
        "description": "site path or http(s) URL, never a local file path",
        "pattern": f"^(?:{SITE_PATH_PATTERN}|{HTTP_URL_PATTERN})(?![\\s\\S])",
    }
    schema["oneOf"] = [{"required": ["st_id"]}, {"required": ["url"]}]


class _CitesOneSource(_Model):
    """Validation shared by citations and references; subclasses declare the fields."""

    model_config = ConfigDict(**_MODEL_CONFIG, json_schema_extra=_citation_schema)

    @field_validator("st_id", check_fields=False)
    @classmethod
    def _check_st_id(cls, value: str | None) -> str | None:
        problem = None if value is None else st_id_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("url", check_fields=False)
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        problem = None if value is None else url_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _exactly_one_identifier(self) -> Self:
        if (getattr(self, "st_id", None) is None) == (getattr(self, "url", None) is None):
            raise ValueError("a citation carries exactly one of st_id or url")
        return self

    @model_serializer(mode="wrap")
    def _omit_absent_identifier(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # On the wire a citation *has* one identifier; a null second one would invite
        # clients to check both.
        data: dict[str, Any] = handler(self)
        for key in ("st_id", "url"):
            if key in data and data[key] is None:
                del data[key]
        return data


class CitationData(_CitesOneSource):
    n: int = Field(ge=1, description="1-based number in retrieval (fused ranking) order")
    st_id: str | None = Field(default=None, examples=["R-HSA-5682113"])
    url: str | None = Field(default=None, examples=["/userguide/pathway-browser"])
    display_name: Text = Field(min_length=1)
    collection: Text = Field(min_length=1, examples=["reactome", "disease_variants", "userguide"])


class Reference(_CitesOneSource):
    n: int = Field(ge=1, description="final number, as the markers in done.text use it")
    source_n: int = Field(ge=1, description="the n of the early citation event it came from")
    st_id: str | None = None
    url: str | None = None
    display_name: Text = Field(min_length=1)
    collection: Text = Field(min_length=1)


class StartData(_Model):
    question: Text
    collections: list[str]
    options: dict[str, JsonScalar | list[str]] = Field(default_factory=dict)


class TokenData(_Model):
    text: Text


class ErrorData(_Model):
    code: str = Field(min_length=1, examples=["timeout", "store_unavailable"])
    message: Text = Field(min_length=1)


class Usage(_Model):
    answer_tokens: int = Field(default=0, ge=0)
    prompt_tokens: int | None = Field(default=None, ge=0)


class Timings(_Model):
    first_token_ms: float | None = Field(default=None, ge=0)
    retrieval_ms: float | None = Field(
        default=None, ge=0, description="when the retrieval run ended (the citations were sent)"
    )
    total_ms: float = Field(ge=0)
    held_back_ms: float | None = Field(
        default=None, ge=0, description="live citations: the longest a character was held back"
    )
    held_back_chars: int | None = Field(
        default=None, ge=0, description="live citations: the most characters held back at once"
    )


Span = tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]]


class EvidenceData(_Model):
    """One (sentence, cited source) pair of the answer and the passage that backs it."""

    n: int = Field(ge=1, description="the reference's final number, as done.text cites it")
    sentence: Span = Field(description="[start, end) of the sentence in done.text")
    quote: Text = Field(description="the best supporting passage, exactly as in the source")
    quote_span: Span = Field(description="[start, end) of the quote in the source's text")
    score: float = Field(description="how well the quote supports the sentence (the judge's)")
    supported: bool = Field(description="whether the judge found the sentence supported")

    @model_validator(mode="after")
    def _spans_in_order(self) -> Self:
        for name in ("sentence", "quote_span"):
            start, end = getattr(self, name)
            if end < start:
                raise ValueError(f"{name} ends before it starts")
        return self


class DoneData(_Model):
    state: DoneState
    text: Text = ""
    references: list[Reference] = Field(default_factory=list)
    evidence: list[EvidenceData] = Field(
        default_factory=list,
        description="one item per (sentence, cited source); empty when nothing was judged",
    )
    usage: Usage = Field(default_factory=Usage)
    timings: Timings
    language: str = Field(
        default="en",
        pattern=r"^[a-z]{2,3}$",
        description="the asker's language, a BCP 47 primary tag: the one the request named, "
        "else the one detected in the question ('en' when unsure); the answer's fixed texts "
        "are in it, and a generative model is asked to answer in it",
    )
    trace_id: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{32}$",
        description="the answer's OpenTelemetry trace id (32 hex digits); null when it is not "
        "traced",
    )

    @model_validator(mode="after")
    def _evidence_points_inside(self) -> Self:
        for item in self.evidence:
            if item.n > len(self.references):
                raise ValueError(f"evidence cites [{item.n}], beyond the references")
            if item.sentence[1] > len(self.text):
                raise ValueError("an evidence sentence ends beyond the text")
        return self


class _EventBase(_Model):
    seq: int = Field(ge=1, description="1 for the first event of a request, no gaps")
    type: str  # narrowed to a Literal by each event class; declared here to come second
    request_id: str = Field(min_length=1)
    t_ms: float = Field(ge=0, description="milliseconds since the request started")


class StartEvent(_EventBase):
    type: Literal["start"] = "start"
    data: StartData


class CitationEvent(_EventBase):
    type: Literal["citation"] = "citation"
    data: CitationData


class ReferenceEvent(_EventBase):
    """Live citation numbering only: one final reference, sent right before the token whose
    text first cites it."""

    type: Literal["reference"] = "reference"
    data: Reference


class TokenEvent(_EventBase):
    type: Literal["token"] = "token"
    data: TokenData


class ErrorEvent(_EventBase):
    type: Literal["error"] = "error"
    data: ErrorData


class DoneEvent(_EventBase):
    type: Literal["done"] = "done"
    data: DoneData


Event = Annotated[
    StartEvent | CitationEvent | ReferenceEvent | TokenEvent | ErrorEvent | DoneEvent,
    Field(discriminator="type"),
]
_EVENT_MODELS = (StartEvent, CitationEvent, ReferenceEvent, TokenEvent, ErrorEvent, DoneEvent)
EVENT_TYPES: tuple[str, ...] = tuple(model.model_fields["type"].default for model in _EVENT_MODELS)

_EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(raw: str | bytes | dict[str, Any]) -> Event:
    """Read one event from its JSON text (a JSONL line or an SSE ``data`` field) or a dict."""
    if isinstance(raw, dict):
        return _EVENT_ADAPTER.validate_python(raw)
    return _EVENT_ADAPTER.validate_json(raw)


# Characters that JSON leaves raw but that str.splitlines() and some JavaScript tooling treat
# as line breaks; escaped, a record is one line for every reader.
_LINE_BREAKS_JSON_KEEPS = str.maketrans(
    {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def _json(event: Event) -> str:
    # Pydantic escapes control characters, so no newline in a token can end an SSE field or
    # a JSONL record early; the translation covers the remaining line separators, which are
    # not ASCII: most events are, and skip a translation that costs more than the dump.
    text = event.model_dump_json()
    return text if text.isascii() else text.translate(_LINE_BREAKS_JSON_KEEPS)


def to_jsonl(event: Event) -> str:
    """One JSONL record: the whole event as compact JSON and a newline."""
    return _json(event) + "\n"


def to_sse(event: Event) -> str:
    """One Server-Sent Events frame: ``id`` is the seq, ``event`` the type, ``data`` the event."""
    return f"id: {event.seq}\nevent: {event.type}\ndata: {_json(event)}\n\n"


def event_json_schema() -> dict[str, Any]:
    """The JSON Schema of one event (a ``oneOf`` over the six types, keyed by ``type``)."""
    # Validation mode: the wrap serializer on citations hides their fields from pydantic's
    # serialization schema, and what we accept is exactly what we emit.
    schema = _EVENT_ADAPTER.json_schema(mode="validation")
    for model in _EVENT_MODELS:
        # The default makes `type` optional for Python callers; on the wire it is the key.
        event_schema = schema["$defs"][model.__name__]
        event_schema["required"] = ["type", *event_schema["required"]]
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "reactome-answers event"
    return schema
