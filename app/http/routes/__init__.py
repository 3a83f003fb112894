"""One module per HTTP surface, each with its router; :func:`app.http.factory.include_surfaces`
includes them all."""

__all__: list[str] = []
