"""From sources to answer text: the answer prompt (``prompts``), the offline extractive model
(``extractive``) and the sentence splitter it shares with the finalizer's callers
(``sentences``), and the models each setting chooses (``providers``).
"""

from pipelines.answering.extractive import NOTHING_RELEVANT, ExtractiveChatModel, split_sentences
from pipelines.answering.prompts import PromptBlock, answer_messages, read_answer_prompt
from pipelines.answering.providers import default_gguf, make_models
from pipelines.answering.sentences import (
    is_fragment,
    points_back,
    split_paragraphs,
    strip_literature,
)

__all__ = [
    "NOTHING_RELEVANT",
    "ExtractiveChatModel",
    "PromptBlock",
    "answer_messages",
    "default_gguf",
    "is_fragment",
    "make_models",
    "points_back",
    "read_answer_prompt",
    "split_paragraphs",
    "split_sentences",
    "strip_literature",
]
