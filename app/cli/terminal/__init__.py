"""What the command line prints to a terminal: the output guard, the candidates table,
evidence lines, a replayed answer's text and the first-token plot."""

__all__: list[str] = []
