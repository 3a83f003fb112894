"""One error shape for every HTTP answer that is not a success: ``{"error": {code, message}}``.

Both applications (``serve`` and ``replay --serve``) install the same handlers, and the
middlewares in :mod:`app._http` answer with the same shape before a request reaches FastAPI.
"""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from pipelines.errors import ReactomeAnswersError
from pipelines.redaction import redact_secrets

__all__ = ["add_error_handlers", "error_response"]


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def _validation_message(error: RequestValidationError) -> str:
    parts = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body")
        message = str(problem.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{where or 'body'}: {message}")
    return "; ".join(parts)


def add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        return error_response(422, "bad_input", _validation_message(error))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, error: StarletteHTTPException) -> JSONResponse:
        # Starlette's own refusals (an unparsable body, an unknown path or method) in the
        # same shape as ours, so a client reads every error one way.
        code = "bad_input" if error.status_code in (400, 422) else f"http_{error.status_code}"
        return error_response(error.status_code, code, str(error.detail), error.headers)

    @app.exception_handler(ReactomeAnswersError)
    async def _ours(_: Request, error: ReactomeAnswersError) -> JSONResponse:
        return error_response(error.http_status, error.code, redact_secrets(str(error)))
