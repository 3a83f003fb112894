"""Credentials never reach a message, an event or a log."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from callbacks.events import DoneEvent, StartEvent
from pipelines.core.redaction import (
    _SHAPE_NEEDS_RE,
    _may_hold_shape,
    one_line,
    redact_secrets,
    secret_redactor,
)
from tests.support.servers import serve_command
from tests.support.sse import parse_sse


@pytest.mark.parametrize(
    "text",
    [
        "auth failed for sk-proj-abcdefghijklmnop",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "cannot reach https://alice:hunter2secret@models.example/v1",
        "GET /v1/models?api_key=abc123secret&x=1",
        "Redis at redis://:hunter2secret@cache:6379/0 refused",
        "rediss://cache:6380/0?password=abc123secret",
    ],
)
def test_credentials_shaped_like_credentials_are_redacted(text: str) -> None:
    redacted = redact_secrets(text)
    assert "[redacted]" in redacted
    for secret in ("abcdefghijklmnop", "eyJhbGci", "dXNlcjpw", "hunter2secret", "abc123secret"):
        assert secret not in redacted


def test_values_of_credential_variables_are_redacted_even_across_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "line-one-secret\nline-two-secret")
    monkeypatch.setenv("SOME_TOKEN", "plainvalue42")
    error = RuntimeError("server said:\nline-one-secret\nline-two-secret and plainvalue42")
    text = one_line(error)
    assert "secret" not in text
    assert "plainvalue42" not in text
    assert "\n" not in text
    assert text.startswith("RuntimeError: server said:")


def test_a_credential_set_changed_or_unset_meanwhile_is_redacted_as_it_is_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Which names hold credentials is remembered between redactions; their values are not.
    text = "first-secret-value second-secret-value third-secret-value"
    monkeypatch.setenv("ROTATED_API_KEY", "first-secret-value")
    assert redact_secrets(text).startswith("[redacted] second-secret-value")
    monkeypatch.setenv("ROTATED_API_KEY", "second-secret-value")
    assert redact_secrets(text) == "first-secret-value [redacted] third-secret-value"
    monkeypatch.setenv("LATER_TOKEN", "third-secret-value")
    assert redact_secrets(text) == "first-secret-value [redacted] [redacted]"
    monkeypatch.delenv("ROTATED_API_KEY")
    assert redact_secrets(text) == "first-secret-value second-secret-value [redacted]"


def test_ordinary_text_is_left_alone() -> None:
    text = "ABCA1 exports cholesterol [1]; see https://reactome.org/content/detail/R-HSA-5682113"
    assert redact_secrets(text) == text


# Pieces of what every credential shape needs, some spelled with letters a case-blind match
# takes for theirs (the long s, the Kelvin sign, the dotted and dotless i), among other text.
_NEAR_SHAPES = st.lists(
    st.sampled_from(
        ["sk-", "\u017fk-", "s\u212a-", "Bearer ", "bas\u0130c ", "bas\u0131c ", "BASIC ", ":/",
         "/", "=", "x", " ", "\n"]
    ),
    max_size=8,
).map("".join)  # fmt: skip


@given(st.one_of(_NEAR_SHAPES, st.text()))
def test_the_quick_scan_finds_what_the_expression_finds(text: str) -> None:
    assert _may_hold_shape(text) == (_SHAPE_NEEDS_RE.search(text) is not None)


@given(
    st.lists(
        st.one_of(
            _NEAR_SHAPES,
            st.sampled_from(["sk-abcdefghij", "Bearer tok123", "x=1&token=abc", "plainvalue42"]),
        ),
        max_size=6,
    )
)
def test_a_batch_redactor_redacts_as_each_text_alone_would(texts: list[str]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SOME_TOKEN", "plainvalue42")
        redact = secret_redactor()
        assert [redact(text) for text in texts] == [redact_secrets(text) for text in texts]
        # Texts joined that nothing in would change: no text alone changes either.
        if not redact.touches("\n".join(texts)):
            assert [redact(text) for text in texts] == texts


@pytest.mark.slow  # a `serve` subprocess
def test_a_servers_own_key_pasted_into_a_question_is_kept_out_of_its_stream_and_log(
    sample_home: Path, tmp_path: Path
) -> None:
    # From a key file: neither the key's shape nor a variable's value would give it away.
    key = "team-7f3a9c2e41d8"
    keys = tmp_path / "keys.txt"
    keys.write_text(f"other-key-5b6d0e\n{key}\n", encoding="utf-8")
    env = {"REACTOME_ANSWERS_API_KEYS": f"@{keys}"}
    with serve_command(sample_home, env=env) as served:
        response = httpx.post(
            f"{served.base}/v1/answer/stream",
            json={"question": f"What causes Tangier disease? (my key is {key})"},
            headers={"Authorization": f"Bearer {key}"},
            timeout=120,
        )
    assert response.status_code == 200, response.text
    events = parse_sse(response.text)
    start, done = events[0], events[-1]
    assert isinstance(start, StartEvent)
    assert isinstance(done, DoneEvent)
    assert done.data.state == "answered"
    assert start.data.question == "What causes Tangier disease? (my key is [redacted])"
    assert key not in response.text
    (log,) = (sample_home / "logs").glob(f"*-{start.request_id}.jsonl")
    logged = log.read_text(encoding="utf-8")
    assert "[redacted]" in logged
    assert key not in logged
