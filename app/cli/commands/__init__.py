"""The commands of ``reactome-answers``, one module each, listed by :mod:`app.cli.registry`."""

__all__: list[str] = []
