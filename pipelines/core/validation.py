"""A pydantic validation error in one line, the same way wherever one is shown: the CLI's
settings error, each HTTP protocol's 422, an MCP tool's invalid arguments, a log's event that
does not read. pydantic's own message takes several lines and repeats its documentation URL.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

__all__ = ["HasErrors", "validation_line", "validation_problems"]


class HasErrors(Protocol):
    """pydantic's ``ValidationError`` and FastAPI's ``RequestValidationError`` alike."""

    def errors(self) -> Sequence[Mapping[str, Any]]: ...


def validation_problems(
    error: HasErrors, *, skip: Collection[str] = ()
) -> list[tuple[tuple[str, ...], str]]:
    """Each problem as (where, why): the location's parts (those in ``skip`` left out, such
    as FastAPI's ``body``) and pydantic's message without its ``Value error,`` prefix."""
    return [
        (
            tuple(str(part) for part in problem.get("loc", ()) if str(part) not in skip),
            str(problem.get("msg", "invalid")).removeprefix("Value error, "),
        )
        for problem in error.errors()
    ]


def validation_line(
    error: HasErrors,
    *,
    first: int | None = None,
    nothing: str = "value",
    skip: Collection[str] = (),
) -> str:
    """``where: why; where: why``, for the ``first`` problems (all when None); ``nothing``
    names a problem of the whole value (an empty location)."""
    problems = validation_problems(error, skip=skip)[:first]
    return "; ".join(f"{'.'.join(where) or nothing}: {why}" for where, why in problems)
