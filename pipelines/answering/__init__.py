"""From sources to answer text: the answer prompt (``prompts``), the offline extractive model
(``extractive``, which quotes the sources' stored sentences) and the models each setting
chooses (``providers``, with the HTTP client an OpenAI-compatible model is given).

The sentence splitter is :mod:`pipelines.index.sentences`, where ingestion stores each
chunk's sentences; the evidence of each citation is :mod:`pipelines.evidence`.
"""

from pipelines.answering.extractive import NOTHING_RELEVANT, ExtractiveChatModel, split_sentences
from pipelines.answering.prompts import PromptBlock, answer_messages, read_answer_prompt
from pipelines.answering.providers import default_gguf, make_models, openai_http_client

__all__ = [
    "NOTHING_RELEVANT",
    "ExtractiveChatModel",
    "PromptBlock",
    "answer_messages",
    "default_gguf",
    "make_models",
    "openai_http_client",
    "read_answer_prompt",
    "split_sentences",
]
