"""The pipeline as tools of the Model Context Protocol, on the official ``mcp`` SDK: a thin
adapter like the OpenAI and AI SDK ones (decision 0017).

- ``ask_reactome``: a cited answer. Its text content is the answer with its final markers
  and then its Sources list; its structured content (with an output schema) is the ``done``
  data: ``state``, ``text``, ``references``, ``evidence``. A refusal or nothing found is an
  ordinary result saying so; a failure is a tool error with our one-line message. When the
  client sends a progress token, progress notifications say when retrieval is done (with how
  many sources) and then carry the answer as it streams.
- ``search_reactome``: the sources the retriever keeps for a query, numbered as an answer's
  ``citation`` events would be, with a snippet and the collection, and no answer.
- the resource ``reactome://collections``: what is ingested, with releases.

Arguments that do not fit a tool's schema are the protocol's invalid-params error (-32602)
naming them, not a tool error, so an assistant knows to fix the call rather than the question.
"""

# No ``from __future__ import annotations``: the SDK builds each tool's schema from its
# signature, whose annotations name a description made when the server is built.
import asyncio
import json
import shlex
import uuid
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.http.models import MAX_TURN_CHARS, MAX_TURNS
from app.http.trace_headers import traced_options
from app.links import reference_link, sources_markdown
from callbacks.events import (
    CitationEvent,
    DoneData,
    DoneEvent,
    ErrorEvent,
    EvidenceData,
    Reference,
    ReferenceEvent,
    TokenEvent,
)
from pipelines.catalog.catalog import Catalog
from pipelines.citations.sources import Source, number_sources
from pipelines.core.errors import (
    ErrorCode,
    InputError,
    NotIngestedError,
    PersonalAdviceError,
    ReactomeAnswersError,
)
from pipelines.core.options import RequestOptions, checked_language
from pipelines.core.redaction import one_line, redact_secrets
from pipelines.core.validation import validation_line, validation_problems
from pipelines.language import SUPPORTED_LANGUAGES, detect_language, fixed_text
from pipelines.pipeline import AnswerPipeline

__all__ = ["COLLECTIONS_URI", "mcp_server"]

COLLECTIONS_URI = "reactome://collections"
_SNIPPET_CHARS = 300

_INSTRUCTIONS = (
    "Reactome is a curated, peer-reviewed knowledgebase of human biological pathways and "
    "reactions: how molecules interact, which genes and proteins take part, and what goes "
    "wrong in disease. Use ask_reactome for questions about human biology, genes, proteins, "
    "pathways, reactions and the diseases that disturb them, and for how to use the Reactome "
    "website; every [n] marker in its answer points at a real Reactome entity listed under "
    "Sources. Use search_reactome to find Reactome entities to cite in an answer of your own."
)


class McpTurn(BaseModel):
    """One earlier turn of the conversation, as the tool takes it."""

    model_config = ConfigDict(title="Turn")

    role: Literal["user", "assistant"] = Field(description="who said it")
    # The native API's limit on a turn (app/http/models.py), so no surface takes more.
    content: str = Field(min_length=1, max_length=MAX_TURN_CHARS, description="what was said")


class LinkedReference(Reference):
    link: str = Field(
        description="where to read it: its Reactome page (or user-guide page), an absolute URL"
    )


class SearchHit(BaseModel):
    n: int = Field(description="its number, as an answer's citation events number it")
    st_id: str | None = Field(description="its Reactome stable id (R-HSA-...), if it has one")
    url: str | None = Field(description="its user-guide page, for user-guide sources")
    link: str = Field(description="its Reactome page (or user-guide page), an absolute URL")
    title: str = Field(description="its name in Reactome")
    collection: str = Field(description="the collection it was found in")
    snippet: str = Field(description="the start of the text it was found by")
    relevance: float | None = Field(description="its similarity to the query, 0 to 1")


class SearchResult(BaseModel):
    query: str
    sources: list[SearchHit] = Field(description="best first")
    refused: str | None = Field(
        default=None, description="why the query was not searched (personal medical advice)"
    )


class Answer(BaseModel):
    state: str = Field(description="answered, nothing_found, refused or failed")
    text: str = Field(description="the answer; its [n] markers are the references' n")
    references: list[LinkedReference] = Field(
        description="the sources the answer cites, by n, each with its link"
    )
    evidence: list[EvidenceData] = Field(
        default_factory=list, description="for each (sentence, cited source), the passage"
    )
    request_id: str = Field(description="the answer's log on the server is under this id")
    language: str = Field(
        default="en",
        description="the asker's language (BCP 47 primary tag) the answer and its fixed texts "
        "are in: the language argument, else the one detected in the question",
    )


def _package_version() -> str:
    try:
        return version("reactome-answers")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def _linked(reference: Reference) -> LinkedReference:
    return LinkedReference(**reference.model_dump(), link=reference_link(reference))


def _describe(catalog: Catalog) -> str:
    return "; ".join(f"{definition.name}: {definition.description}" for definition in catalog)


def mcp_server(pipeline: AnswerPipeline, catalog: Catalog) -> MCPServer:
    """A server whose tools ask ``pipeline``; ``catalog`` names the collections it takes."""
    server = MCPServer(
        "reactome-answers",
        version=_package_version(),
        instructions=_INSTRUCTIONS,
        log_level="WARNING",
        middleware=[_invalid_params(lambda: server)],
    )
    names = ", ".join(catalog.names)
    max_chars = pipeline.settings.max_question_chars
    collections_help = (
        f"search only these collections ({names}); omit to let the question choose. "
        f"{_describe(catalog)}"
    )

    @server.tool(
        description="Answer a question about human biology, pathways, reactions, genes, "
        "proteins or diseases (or about using the Reactome website) from Reactome, with "
        "numbered citations that always point at real Reactome entities. Returns the answer "
        "with [n] markers followed by its Sources list; the structured result has the "
        "references and, for each cited sentence, the passage of the source behind it. "
        "Questions asking for personal medical advice are refused. User-guide answers cite "
        "nothing unless cite_urls is true.",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def ask_reactome(
        question: Annotated[
            str,
            Field(min_length=1, max_length=max_chars, description="the question, in plain words"),
        ],
        ctx: Context,
        history: Annotated[
            list[McpTurn] | None,
            Field(
                max_length=MAX_TURNS,
                description=f"earlier turns of the conversation, oldest first (at most "
                f"{MAX_TURNS}, each at most {MAX_TURN_CHARS} characters)",
            ),
        ] = None,
        collections: Annotated[list[str] | None, Field(description=collections_help)] = None,
        cite_urls: Annotated[
            bool | None,
            Field(
                # Strict: "yes" or 1 is not read as true, it is named as the bad argument.
                strict=True,
                description="number user-guide pages as sources, cited by link (true or "
                "false); omit for the server's choice",
            ),
        ] = None,
        language: Annotated[
            str | None,
            Field(
                max_length=35,
                description="the asker's language as a BCP 47 tag (es, pt-BR, zh-Hans): one "
                f"of {', '.join(SUPPORTED_LANGUAGES)}; omit to detect it from the question",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, Answer]:
        options = RequestOptions(
            history=tuple((turn.role, turn.content) for turn in history or ()),
            collections=_checked(catalog, collections),
            cite_urls=cite_urls,
            # Tokens carry their final markers, so the streamed progress reads as the result.
            live_citations=True,
            language=_checked_language(language),
        )
        # Over HTTP, the request that carried the call: its trace headers (none over stdio).
        carried = getattr(ctx.request_context, "request", None)
        options = traced_options(options, getattr(carried, "headers", None), "mcp")
        return await _answer(pipeline, question, options, ctx.report_progress)

    @server.tool(
        description="Find the Reactome entities (pathways, reactions, disease variants, "
        "user-guide pages) that match a query, best first, without writing an answer: for an "
        "assistant that writes its own answer and cites Reactome by stable id.",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def search_reactome(
        query: Annotated[
            str, Field(min_length=1, max_length=max_chars, description="what to look for")
        ],
        collections: Annotated[list[str] | None, Field(description=collections_help)] = None,
        k: Annotated[
            int | None,
            Field(
                ge=1,
                le=50,
                description="at most this many passages (several may come from one source, "
                "so fewer sources can come back); omit for as many as an answer reads",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, SearchResult]:
        options = RequestOptions(collections=_checked(catalog, collections), cite_urls=True)
        return await _search(pipeline, query, options, k)

    @server.resource(
        COLLECTIONS_URI,
        name="collections",
        description="The Reactome collections this server has ingested, with their releases",
        mime_type="application/json",
    )
    async def collections_resource() -> str:
        from pipelines.index import store

        try:
            infos = await asyncio.to_thread(
                store.collection_infos, pipeline.operator.store_client(), catalog.names
            )
        except ReactomeAnswersError as error:
            raise MCPError(code=INTERNAL_ERROR, message=redact_secrets(str(error))) from None
        return json.dumps([info.as_json() for info in infos])

    return server


def _checked(catalog: Catalog, collections: list[str] | None) -> tuple[str, ...] | None:
    if not collections:
        return None
    unknown = [name for name in collections if name not in catalog.names]
    if unknown:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"collections: no collection named {', '.join(unknown)}; "
            f"use {', '.join(catalog.names)}",
            data={"arguments": ["collections"]},
        )
    return tuple(collections)


def _checked_language(language: str | None) -> str | None:
    if language is None:
        return None
    try:
        return checked_language(language)
    except InputError as error:
        raise MCPError(
            code=INVALID_PARAMS, message=str(error), data={"arguments": ["language"]}
        ) from None


_Progress = Callable[[float, float | None, str | None], Awaitable[None]]


async def _answer(
    pipeline: AnswerPipeline, question: str, options: RequestOptions, progress: _Progress
) -> CallToolResult:
    done: DoneData | None = None
    error: str | None = None
    sources = tokens = 0
    request_id = uuid.uuid4().hex
    events = pipeline.events(question, options, request_id=request_id)
    try:
        async for event in events:
            if isinstance(event, CitationEvent):
                sources += 1
                continue
            if isinstance(event, ReferenceEvent | TokenEvent) and tokens == 0:
                tokens = 1  # the first event after retrieval's end that comes with an answer
                await progress(1, None, f"retrieval done: {sources} sources")
            if isinstance(event, TokenEvent):
                tokens += 1
                await progress(tokens, None, event.data.text)
            elif isinstance(event, ErrorEvent):
                error = event.data.message
                if event.data.code == ErrorCode.NOT_INGESTED:
                    error = _ingest_hint(error, pipeline)
            elif isinstance(event, DoneEvent):
                done = event.data
    finally:
        # A client that cancels or leaves cancels this scope; the answer's own clean-up (its
        # log's "cancelled" ending) must not be cancelled again.
        with anyio.CancelScope(shield=True):
            await events.aclose()
    if error is not None or done is None:
        message = error or "the answer ended without its done event"
        return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)
    answer = Answer(
        state=done.state,
        text=done.text,
        references=[_linked(reference) for reference in done.references],
        evidence=done.evidence,
        request_id=request_id,
        language=done.language,
    )
    text = done.text + sources_markdown(done.references, done.language)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=answer.model_dump(mode="json"),
    )


async def _search(
    pipeline: AnswerPipeline, query: str, options: RequestOptions, k: int | None
) -> CallToolResult:
    refused = pipeline.refusal(query)  # the rules and the advice gate, as an answer's
    if refused is not None:
        return _search_result(SearchResult(query=query, sources=[], refused=refused), refused)
    retriever = pipeline.own_retriever
    try:
        if retriever is None:  # one from outside takes the query alone
            documents = await pipeline.retriever.ainvoke(query)
        else:
            documents = await retriever.ainvoke(query, k=k, options=options)
    except PersonalAdviceError:  # a generative expander's own judgement
        said = fixed_text("advice_refusal", detect_language(query))
        result = SearchResult(query=query, sources=[], refused=said)
        return _search_result(result, said)
    except Exception as error:  # the store, the model: one line, as ask_reactome says it
        ours = isinstance(error, ReactomeAnswersError)
        text = redact_secrets(str(error)) if ours else one_line(error)
        if isinstance(error, NotIngestedError):
            text = _ingest_hint(text, pipeline)
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
    sources, _ = number_sources(documents, cite_urls=bool(options.cite_urls))
    hits = [
        SearchHit(
            n=source.n,
            st_id=source.st_id,
            url=source.url,
            link=_link(source),
            title=source.display_name,
            collection=source.collection,
            snippet=" ".join(source.document.page_content.split())[:_SNIPPET_CHARS],
            relevance=_relevance(source.document.metadata.get("relevance")),
        )
        for source in sources
    ]
    result = SearchResult(query=query, sources=hits)
    return _search_result(result, result.model_dump_json(indent=2))


def _link(source: Source) -> str:
    # The link a reference to it would have (the same rules on every surface).
    reference = Reference(
        n=source.n,
        source_n=source.n,
        st_id=source.st_id,
        url=source.url,
        display_name=source.display_name,
        collection=source.collection,
    )
    return reference_link(reference)


def _ingest_hint(message: str, pipeline: AnswerPipeline) -> str:
    """``message`` (nothing ingested) with the command that ingests into the home this server
    uses: an assistant starts it with a bare environment and ``--home``, which a bare
    ``reactome-answers ingest`` in a shell would not find."""
    home = shlex.quote(str(pipeline.settings.home))
    what = message.split("; ", 1)[0]  # the pipeline's own fix names no home
    return f"{what}; to ingest into it, run: reactome-answers --home {home} ingest --sample"


def _relevance(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _search_result(result: SearchResult, text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=result.model_dump(mode="json"),
    )


def _invalid_params(server: Callable[[], MCPServer]) -> Any:
    """Arguments that do not fit a tool's schema, as -32602 naming them (the SDK would make a
    tool error of them, which reads as the tool having failed)."""

    async def check(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.method == "tools/call" and ctx.params:
            tool = server()._tool_manager.get_tool(ctx.params.get("name", ""))
            given = ctx.params.get("arguments") or {}
            if tool is not None and not isinstance(given, dict):
                raise MCPError(code=INVALID_PARAMS, message="arguments: not an object")
            if tool is not None:
                metadata = tool.fn_metadata
                arguments = metadata.pre_parse_json(given)
                try:
                    metadata.arg_model.model_validate(arguments)
                except ValidationError as error:
                    problems = validation_problems(error)
                    names = sorted({where[0] for where, _ in problems if where})
                    raise MCPError(
                        code=INVALID_PARAMS,
                        message=validation_line(error, nothing="arguments"),
                        data={"arguments": names},
                    ) from None
        return await call_next(ctx)

    return check
