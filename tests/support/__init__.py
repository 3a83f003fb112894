"""What the tests and benchmarks share, one job a module.

- ``citation_tables``: the citation contract's rows, which the finalizer and live tests share.
- ``cli``: the installed command, run in a subprocess.
- ``fake_pipeline``: a pipeline with a fake retriever and fake models, and its documents.
- ``fakes``: a chat model whose stream is a script.
- ``fake_openai``: an OpenAI-compatible chat server on 127.0.0.1 that can be told to fail.
- ``forged``: a corpus written to forge frames, markers and markup.
- ``invariants``: what must hold on every stream (``check_stream``).
- ``marked_answers``: generated answers whose citation markers are known by construction.
- ``markup``: alphabets for property tests of marker handling.
- ``refusal_questions``: questions always refused (own care) and never refused.
- ``servers``: real servers on 127.0.0.1 (uvicorn in a thread, or the ``serve`` command).
- ``sse``: a strict reader of our Server-Sent Events.
"""
