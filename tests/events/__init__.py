"""The event stream: the event model, gating of tokens on citations, live numbering through the
pipeline, long answers."""
