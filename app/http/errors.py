"""One error shape per protocol for every HTTP answer that is not a success.

Ours is ``{"error": {code, message}}``. The OpenAI-compatible routes (:data:`OPENAI_PATHS`) answer
in OpenAI's, ``{"error": {message, type, param, code}}``, whoever refuses: the route, FastAPI, or a
middleware before the request is read (:func:`refusal` picks by path), so an OpenAI client reads a
401 or a 429 as it reads its own; at ``/mcp`` a refusal is a JSON-RPC error
(:func:`app.http.protocols.mcp_wire.mcp_refusal`), which an MCP client shows. Both applications
(``serve`` and ``replay --serve``) install the same handlers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from app.http.protocols.mcp_wire import MCP_PATH, mcp_refusal
from pipelines.core.errors import ErrorCode, ReactomeAnswersError
from pipelines.core.redaction import redact_secrets
from pipelines.core.validation import validation_line

__all__ = [
    "HTTP_STATUS",
    "OPENAI_PATHS",
    "add_error_handlers",
    "answer_not_logged",
    "error_response",
    "http_status_for",
    "openai_error_body",
    "openai_error_response",
    "refusal",
]

# The routes of the OpenAI protocol (app/http/routes/openai_chat.py): their errors have OpenAI's
# shape.
OPENAI_PATHS = ("/v1/chat/completions", "/v1/models")

# What an error code answers over HTTP: the caller's fault (4xx) or ours and our dependencies'
# (5xx). 499 is nginx's "client closed request": the answer stopped because its caller left.
HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.INTERNAL: 500,
    ErrorCode.BAD_CONFIG: 500,
    ErrorCode.BAD_INPUT: 422,
    ErrorCode.NOT_INGESTED: 503,
    ErrorCode.STORE_UNAVAILABLE: 503,
    ErrorCode.MODEL_FAILED: 502,
    ErrorCode.DOWNLOAD_FAILED: 502,
    ErrorCode.HANDLER_FAILED: 500,
    ErrorCode.EVENT_LOG: 500,
    ErrorCode.PERSONAL_ADVICE: 422,
    ErrorCode.TIMEOUT: 504,
    ErrorCode.CANCELLED: 499,
}


def http_status_for(code: str) -> int:
    """The HTTP status for an error event's ``code`` (500 for a code this version does not
    know, as from a newer log)."""
    try:
        return HTTP_STATUS[ErrorCode(code)]
    except ValueError:
        return 500


def answer_not_logged(request_id: str, hint: str) -> JSONResponse:
    """The 404 for a request id no log in the folder has (feedback, the log page); the id
    shown shortened and redacted, since it is whatever the caller put in the path."""
    shown = redact_secrets(request_id if len(request_id) <= 80 else request_id[:79] + "…")
    return error_response(
        404,
        "not_found",
        f"no answer with request id {shown!r} is logged here; {hint} (answers are kept for "
        "the log retention only)",
    )


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def openai_error_body(status: int, message: str, code: str, param: str | None) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def openai_error_response(
    status: int,
    message: str,
    code: str,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = openai_error_body(status, message, code, param)
    return JSONResponse(body, status_code=status, headers=headers)


def _speaks_openai(path: str) -> bool:
    return any(path == route or path.startswith(route + "/") for route in OPENAI_PATHS)


def refusal(
    scope: Scope, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """An error answer in the shape of the protocol ``scope``'s path speaks."""
    path = str(scope.get("path", ""))
    if _speaks_openai(path):
        return openai_error_response(status, message, code, None, headers)
    if path == MCP_PATH:
        return mcp_refusal(status, code, message, headers)
    return error_response(status, code, message, headers)


def add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        return refusal(
            request.scope,
            422,
            "bad_input",
            validation_line(error, nothing="body", skip=("body",)),
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        # Starlette's own refusals (an unparsable body, an unknown path or method) in the
        # same shape as ours, so a client reads every error one way.
        code = "bad_input" if error.status_code in (400, 422) else f"http_{error.status_code}"
        return refusal(request.scope, error.status_code, code, str(error.detail), error.headers)

    @app.exception_handler(ReactomeAnswersError)
    async def _ours(request: Request, error: ReactomeAnswersError) -> JSONResponse:
        status = http_status_for(error.code)
        return refusal(request.scope, status, error.code, redact_secrets(str(error)))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, _: Exception) -> JSONResponse:
        # A bug, not the client's doing: the traceback goes to the server's log (Starlette
        # prints it after this answer), the client gets our shape rather than plain text.
        message = "the server failed while answering this request; its log has the details"
        return refusal(request.scope, 500, "internal", message)
