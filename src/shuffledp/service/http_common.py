"""Shared HTTP plumbing: RFC 9457 problem documents, auth helpers, app hardening."""

from __future__ import annotations

import hashlib
import hmac
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..core.errors import ValidationError

__all__ = ["Problem", "install_problem_handlers", "sign_request", "verify_signature", "check_bearer",
           "PROBLEM_TYPES"]

log = logging.getLogger("shuffledp.service")

PROBLEM_TYPES = ("invalidMessage", "unrecognizedTask", "outdatedConfig", "reportTooLarge", "rateLimited",
                 "batchMismatch", "unauthorized", "notReady", "insufficientReports", "taskExpired",
                 "invalidRequest", "budgetExhausted", "noData", "notFound", "internal")


class Problem(Exception):
    """An error returned as ``application/problem+json`` with a typed URN."""

    def __init__(self, status: int, type_: str, detail: str, task_id: bytes | None = None,
                 headers: dict | None = None) -> None:
        super().__init__(detail)
        assert type_ in PROBLEM_TYPES, type_
        self.status, self.type, self.detail, self.task_id, self.headers = status, type_, detail, task_id, headers


def _problem_response(status: int, type_: str, detail: str, task_id: bytes | None = None,
                      headers: dict | None = None) -> JSONResponse:
    body = {"type": f"urn:shuffledp:error:{type_}", "title": type_, "status": status, "detail": detail}
    if task_id is not None:
        body["taskid"] = task_id.hex()
    return JSONResponse(body, status_code=status, media_type="application/problem+json", headers=headers)


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def _problem(_req: Request, exc: Problem):
        return _problem_response(exc.status, exc.type, exc.detail, exc.task_id, exc.headers)

    @app.exception_handler(ValidationError)
    async def _validation(_req: Request, exc: ValidationError):
        return _problem_response(422, "invalidRequest", str(exc))

    @app.exception_handler(RequestValidationError)
    async def _reqval(_req: Request, exc: RequestValidationError):
        # never echo the body back: only the locations of the errors
        locs = ["/".join(str(p) for p in e.get("loc", ())) for e in exc.errors()]
        return _problem_response(422, "invalidRequest", f"invalid request fields: {locs}")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_req: Request, exc: StarletteHTTPException):
        t = {404: "notFound", 401: "unauthorized", 405: "invalidRequest"}.get(exc.status_code, "invalidRequest")
        return _problem_response(exc.status_code, t, str(exc.detail))

    @app.exception_handler(Exception)
    async def _internal(_req: Request, exc: Exception):
        log.error("internal error: %s", type(exc).__name__)  # no request data in logs
        return _problem_response(500, "internal", "internal error")


def sign_request(secret: bytes, method: str, path: str, body: bytes) -> str:
    """HMAC-SHA256 over (method, path, SHA-256(body)) — the shuffler→analyzer authenticator."""
    msg = method.upper().encode() + b"\n" + path.encode() + b"\n" + hashlib.sha256(body).digest()
    return "SDP-HMAC-SHA256 " + hmac.new(secret, msg, hashlib.sha256).hexdigest()


def verify_signature(secret: bytes, method: str, path: str, body: bytes, header: str | None) -> None:
    if not header or not hmac.compare_digest(sign_request(secret, method, path, body).encode(), header.encode()):
        raise Problem(401, "unauthorized", "missing or invalid request signature")


def check_bearer(token: str, header: str | None) -> None:
    if not header or not hmac.compare_digest(f"Bearer {token}".encode(), header.encode()):
        raise Problem(401, "unauthorized", "missing or invalid bearer token")
