"""Token usage through the real `serve` on 127.0.0.1: `/v1/answer` counts the prompt's tokens,
and the OpenAI endpoint's usage repeats what it reports for the same question."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.keys import KEY, serve_with_key
from tests.support.servers import Served

pytestmark = pytest.mark.slow  # a `serve` subprocess, asked with the OpenAI client

QUESTION = "What causes Tangier disease?"


@pytest.fixture(scope="module")
def keyed(sample_home: Path) -> Iterator[Served]:
    with serve_with_key(sample_home) as served:
        yield served


def test_prompt_tokens_are_counted_and_the_openai_usage_repeats_them(keyed: Served) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    ours = httpx.post(
        f"{keyed.base}/v1/answer", json={"question": QUESTION}, headers=headers, timeout=120
    ).json()
    prompt_tokens = ours["usage"]["prompt_tokens"]
    assert isinstance(prompt_tokens, int)
    assert prompt_tokens > 50  # the numbered sources and the question, at least
    client = openai.OpenAI(base_url=f"{keyed.base}/v1", api_key=KEY, max_retries=0)
    reply = client.chat.completions.create(
        model="reactome-answers", messages=[{"role": "user", "content": QUESTION}]
    )
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == prompt_tokens  # the same sources, the same prompt
    assert reply.usage.completion_tokens == ours["usage"]["answer_tokens"]
