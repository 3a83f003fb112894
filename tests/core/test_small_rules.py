"""The small rules kept in one home each: JSON from outside read by ``parse_json`` whichever
way it fails, a validation error in one line by ``validation_line`` (pipelines/core), and a
request body read by one loop, ``read_body`` (app/http/middleware/transport.py)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError, field_validator

from app.http.middleware.transport import ReadBody, read_body
from pipelines.core.json_text import UnreadableJSONError, parse_json
from pipelines.core.validation import validation_line, validation_problems


@pytest.mark.parametrize(
    ("text", "kind", "reason"),
    [
        (b'{"a": "caf\xe9"}', "encoding", "not UTF-8 text (byte 11)"),
        ('{"a": 1,}', "syntax", "Expecting property name enclosed in double quotes: line 1"),
        ("[" * 100_000, "nesting", "nested too deeply"),
        ("9" * 5_000, "number", "a number of over 4,300 digits"),
    ],
    ids=["not-utf8", "syntax", "nested", "long-number"],
)
def test_every_way_json_fails_is_one_error_saying_which(
    text: str | bytes, kind: str, reason: str
) -> None:
    with pytest.raises(UnreadableJSONError) as caught:
        parse_json(text)
    assert caught.value.kind == kind
    assert caught.value.reason.startswith(reason)
    assert isinstance(caught.value, ValueError)  # a caller catching ValueError still does


def test_json_that_reads_is_returned_from_text_or_bytes() -> None:
    assert (
        parse_json('{"a": [1, "é"]}') == parse_json('{"a": [1, "é"]}'.encode()) == {"a": [1, "é"]}
    )


class _Body(BaseModel):
    question: str = Field(min_length=1)
    k: int = 10

    @field_validator("k")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError("k must be at least 1")
        return value


def _error(**given: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        _Body.model_validate(given)
    return caught.value


def test_a_validation_error_is_one_line_naming_each_field() -> None:
    error = _error(question="", k=0)
    line = validation_line(error)
    assert "\n" not in line
    assert line.startswith("question: String should have at least 1 character; k: ")
    assert line.endswith("k: k must be at least 1")  # without pydantic's "Value error, "
    assert validation_line(error, first=1).count(";") == 0
    assert [where for where, _ in validation_problems(error)] == [("question",), ("k",)]


def test_a_problem_of_the_whole_value_is_named_and_skipped_parts_left_out() -> None:
    with pytest.raises(ValidationError) as caught:
        _Body.model_validate("not an object")
    assert validation_line(caught.value, nothing="body").startswith("body: ")
    # FastAPI's RequestValidationError puts ``body`` first in each location.
    assert validation_line(_RequestError(), skip=("body",)) == "k: bad"


class _RequestError:
    def errors(self) -> list[dict[str, object]]:
        return [{"loc": ("body", "k"), "msg": "bad"}]


def _messages(*messages: dict[str, object]) -> Any:
    pending = list(messages)

    async def receive() -> dict[str, object]:
        return pending.pop(0)

    return receive


async def test_one_loop_reads_a_body_in_chunks_to_its_end_its_limit_or_a_disconnect() -> None:
    chunked = _messages(
        {"type": "http.request", "body": b'{"question": ', "more_body": True},
        {"type": "http.request", "body": b'"ABCA1?"}', "more_body": False},
    )
    assert await read_body(chunked) == ReadBody(b'{"question": "ABCA1?"}')
    over = _messages({"type": "http.request", "body": b"x" * 10, "more_body": True})
    assert (await read_body(over, max_bytes=9)).over
    left = _messages(
        {"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}
    )
    read = await read_body(left)
    assert (read.body, read.after) == (b"{", ({"type": "http.disconnect"},))
