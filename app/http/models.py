"""The native API's request body, and the limits on a conversation every surface keeps.

:data:`MAX_TURNS` and :data:`MAX_TURN_CHARS` are defined here and nowhere else: the native
body refuses more (422), the chat protocols (``app/http/protocols/chat.py``) keep the last
:data:`MAX_TURNS` turns, and ``GET /v1/limits`` tells clients (the web client) both, with the
question length the pipeline refuses beyond (``Settings.max_question_chars``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, field_validator

from pipelines.core.errors import InputError
from pipelines.core.options import RequestOptions, checked_language
from pipelines.language import SUPPORTED_LANGUAGES

__all__ = [
    "MAX_TURNS",
    "MAX_TURN_CHARS",
    "AnswerRequest",
    "LanguageTag",
    "Limits",
    "Turn",
    "answer_request_model",
]

# The history one request may carry: the native body refuses more turns or longer ones; the
# chat protocols, whose clients send the whole conversation, keep the last MAX_TURNS.
MAX_TURNS = 50
MAX_TURN_CHARS = 20_000


def _language_option(value: str) -> str:
    # A ValueError is a 422 (or a 400) in the protocol's shape, naming the value and the
    # languages there are.
    try:
        return checked_language(value)
    except InputError as error:
        raise ValueError(str(error)) from None


# A body's ``language``, as every protocol's body takes it: the supported tag it names.
LanguageTag = Annotated[str, Field(max_length=35), AfterValidator(_language_option)]


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str = Field(max_length=MAX_TURN_CHARS)


class AnswerRequest(BaseModel):
    """One question, with optional chat history and options."""

    model_config = ConfigDict(extra="forbid")

    # The pattern (some character that is not white space) is what the schema tells clients;
    # the validator says the same in words.
    question: str = Field(min_length=1, pattern=r"\S", examples=["What causes Tangier disease?"])
    history: list[Turn] = Field(default_factory=list, max_length=MAX_TURNS)
    collections: list[str] | None = Field(
        default=None, description="search these instead of letting the expander route"
    )
    cite_urls: bool | None = Field(default=None, description="cite user-guide pages by url")
    live_citations: bool = Field(
        default=False,
        description="tokens carry their final markers, and a reference event precedes the "
        "token that first cites each source",
    )
    language: LanguageTag | None = Field(
        default=None,
        description="the asker's language as a BCP 47 tag (es, pt-BR, zh-Hans), which the "
        f"answer and its fixed texts are in: one of {', '.join(SUPPORTED_LANGUAGES)}; "
        "unset: detected from the question",
        examples=["es"],
    )

    @field_validator("question", mode="before")
    @classmethod
    def _not_blank(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            raise ValueError("is empty or only white space; ask a question")
        return value

    def options(self) -> RequestOptions:
        return RequestOptions(
            history=tuple((turn.role, turn.content) for turn in self.history),
            collections=None if self.collections is None else tuple(self.collections),
            cite_urls=self.cite_urls,
            live_citations=self.live_citations,
            language=self.language,
        )


def answer_request_model(names: Sequence[str]) -> type[AnswerRequest]:
    """:class:`AnswerRequest` whose ``collections`` accepts exactly ``names`` (the declared
    collections), so that the OpenAPI document lists them and anything else is a 422."""
    allowed: Any = Literal[tuple(names)]
    field: Any = (
        list[allowed] | None,
        Field(default=None, description="search these instead of letting the expander route"),
    )
    return create_model("AnswerRequest", __base__=AnswerRequest, collections=field)


class Limits(BaseModel):
    """What a request must keep to: a client checks a question and its history against these
    before sending them, rather than keep its own copy of the numbers."""

    max_question_chars: int = Field(description="longer questions are refused")
    max_turns: int = Field(description="turns of history a request may carry")
    max_turn_chars: int = Field(description="characters in one turn of history")
    feedback: bool = Field(
        default=True,
        description="whether answers can be rated (POST /v1/answers/{request_id}/feedback): "
        "not with event logs off, since a rating is kept beside its answer's log",
    )
