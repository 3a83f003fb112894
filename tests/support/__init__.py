"""What the tests and benchmarks share, one job a module.

- ``browser``: Debian's Chromium driven by Playwright.
- ``citation_tables``: the citation contract's rows, which the finalizer and live tests share.
- ``cli``: the installed command, run in a subprocess.
- ``collector``: an OTLP/HTTP trace receiver on 127.0.0.1 that can be told to refuse.
- ``fake_pipeline``: a pipeline with a fake retriever and fake models, and its documents.
- ``fakes``: a chat model whose stream is a script.
- ``fake_openai``: an OpenAI-compatible chat server on 127.0.0.1 that can be told to fail.
- ``forged``: a corpus written to forge frames, markers and markup.
- ``held_requests``: answers held in progress, and requests on a socket of their own.
- ``invariants``: what must hold on every stream (``check_stream``).
- ``keys``: API keys for a server that asks for one.
- ``logs``: finding the event logs a test's answers wrote, and writing a refused one.
- ``marked_answers``: generated answers whose citation markers are known by construction.
- ``marker_evidence``: which evidence item backs each marker, read the server's way.
- ``markup``: alphabets for property tests of marker handling.
- ``mcp_app``: the app served for the MCP tests, and a model held until released.
- ``phoenix``: a real Arize Phoenix on 127.0.0.1, and its own client reading spans back.
- ``processes``: what a running process holds (its resident memory).
- ``refusal_questions``: questions always refused (own care) and never refused.
- ``scripted_server``: a real server over a scripted pipeline, and its metrics' samples.
- ``servers``: real servers on 127.0.0.1 (uvicorn in a thread, or the ``serve`` command).
- ``sse``: a strict reader of our Server-Sent Events.
- ``unnamed``: an embedding model under no name, each text embedded alone.
- ``waiting``: waiting for a condition, not for a time.
"""
