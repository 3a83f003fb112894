"""The pure pieces that put an answer's evidence on the OpenAI-compatible endpoint (as
``url_citation`` annotations) and under ``ask --evidence``'s Sources list."""

from __future__ import annotations

from app.cli.terminal.evidence import evidence_lines, no_evidence_line
from app.http.protocols.openai_annotations import evidence_json, url_citations
from app.links import sources_markdown
from callbacks.events import DoneData, EvidenceData, Reference, Timings
from pipelines.citations.model_sources import without_model_sources

TEXT = (
    "ABCA1 moves cholesterol onto apoA-I [1]. Its loss causes Tangier disease [2]. "
    "It also binds\n  phospholipid [1].\n\nReferences:\n[1] ABCA1 page\n[2] TGD page"
)
REFERENCES = [
    Reference(n=1, source_n=2, st_id="R-HSA-5682113", display_name="Defective ABCA1 causes TGD",
              collection="reactome"),
    Reference(n=2, source_n=1, url="/userguide/pathway-browser", display_name="The browser",
              collection="userguide"),
]  # fmt: skip


def _span(piece: str) -> tuple[int, int]:
    start = TEXT.index(piece)
    return start, start + len(piece)


def _item(n: int, sentence: str, quote: str, *, supported: bool) -> EvidenceData:
    return EvidenceData(
        n=n, sentence=_span(sentence), quote=quote, quote_span=(0, len(quote)),
        score=0.9 if supported else 0.1, supported=supported,
    )  # fmt: skip


FIRST = "ABCA1 moves cholesterol onto apoA-I [1]."
SECOND = "Its loss causes Tangier disease [2]."
THIRD = "It also binds\n  phospholipid [1]."
DONE = DoneData(
    state="answered",
    text=TEXT,
    references=REFERENCES,
    evidence=[
        _item(1, FIRST, "ABCA1 moves cholesterol.", supported=True),
        _item(2, SECOND, "Click a pathway.", supported=False),
        _item(1, THIRD, "ABCA1 moves cholesterol.", supported=True),
        # A marker in the Sources list the model wrote, which the endpoint removes.
        _item(1, "[1] ABCA1 page", "ABCA1 moves cholesterol.", supported=True),
    ],
    timings=Timings(total_ms=1),
)


def test_each_supported_citation_spans_its_sentence_in_the_content_sent() -> None:
    content = without_model_sources(TEXT) + sources_markdown(REFERENCES)
    annotations = url_citations(DONE, content)
    assert [a["type"] for a in annotations] == ["url_citation", "url_citation"]
    cited = [a["url_citation"] for a in annotations]
    assert [content[c["start_index"] : c["end_index"]] for c in cited] == [FIRST, THIRD]
    assert {(c["url"], c["title"]) for c in cited} == {
        ("https://reactome.org/content/detail/R-HSA-5682113", "Defective ABCA1 causes TGD")
    }
    # The unsupported one is kept in our own field; the removed list's is in neither.
    assert [item["sentence"] for item in evidence_json(DONE, content)] == [
        list(_span(FIRST)), list(_span(SECOND)), list(_span(THIRD))
    ]  # fmt: skip


def test_no_evidence_no_annotations() -> None:
    refused = DoneData(state="refused", text="Ask a doctor.", timings=Timings(total_ms=1))
    assert url_citations(refused, refused.text) == []
    assert evidence_json(refused, refused.text) == []


def test_a_source_lists_each_backing_quote_once_and_marks_the_unsupported() -> None:
    assert evidence_lines(TEXT, DONE.evidence, 1) == ['    "ABCA1 moves cholesterol."']
    assert evidence_lines(TEXT, DONE.evidence, 2) == [
        '    unsupported: "Click a pathway."',
        '      does not back: "Its loss causes Tangier disease [2]."',
    ]
    wrapped = DONE.evidence[2].model_copy(update={"supported": False})
    assert evidence_lines(TEXT, [wrapped], 1)[1] == (
        '      does not back: "It also binds phospholipid [1]."'
    )
    assert "off" in no_evidence_line("off")
    assert "log" in no_evidence_line("flag")
