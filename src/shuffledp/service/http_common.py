"""Shared HTTP plumbing: RFC 9457 problem documents, auth helpers, bounded body reads, quiet errors.

Request bodies are read with :func:`read_body` (byte cap checked against ``Content-Length`` before
reading and while streaming; an idle timeout and an overall deadline) and, for the shuffler →
analyzer batch PUT, :func:`read_signed_body`, which authenticates the ``Authorization`` header
(it carries the body's length and SHA-256 under the HMAC) before a single body byte is read.
Unhandled exceptions and client aborts are logged as one line without a traceback or request data.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from ..core.errors import ValidationError

__all__ = ["Problem", "install_problem_handlers", "sign_request", "sign_digest", "verify_signature", "check_signature_header",
           "check_bearer", "read_body", "read_signed_body", "OneLineLogs", "logging_config", "PROBLEM_TYPES",
           "BODY_TIMEOUT", "BODY_MIN_RATE"]

log = logging.getLogger("shuffledp.service")

PROBLEM_TYPES = ("invalidMessage", "unrecognizedTask", "outdatedConfig", "reportTooLarge", "rateLimited",
                 "batchMismatch", "unauthorized", "notReady", "insufficientReports", "taskExpired",
                 "invalidRequest", "budgetExhausted", "noData", "notFound", "internal", "batchTooLarge",
                 "requestTimeout")

#: seconds a request body may go without receiving a byte (and the base of its overall deadline)
BODY_TIMEOUT = 30.0
#: bytes/s: the overall deadline of a body is ``BODY_TIMEOUT + expected_length / BODY_MIN_RATE``
BODY_MIN_RATE = float(1 << 20)

#: answers sent before the request body was read completely close the connection (nothing of the
#: rest of the body is read or buffered)
_CLOSE = {"Connection": "close"}

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

    @app.exception_handler(ClientDisconnect)
    async def _disconnect(_req: Request, _exc: ClientDisconnect):
        log.warning("client disconnected before the request body was complete")  # one line, no request data
        return _problem_response(400, "invalidRequest", "client disconnected", headers=_CLOSE)

    @app.exception_handler(Exception)
    async def _internal(_req: Request, exc: Exception):
        log.error("internal error: %s", type(exc).__name__)  # one line, no traceback, no request data
        return _problem_response(500, "internal", "internal error")

    # Starlette's ServerErrorMiddleware answers an unhandled exception with ``_internal`` and then
    # re-raises it "so that servers can log it": uvicorn would add "Exception in ASGI application"
    # and a full traceback for every 500. The outermost layer below ends that exception instead.
    build = app.build_middleware_stack

    def build_quiet() -> Any:
        return _AnsweredErrors(build())

    app.build_middleware_stack = build_quiet  # type: ignore[method-assign]


class _AnsweredErrors:
    """Outermost ASGI layer: an exception that reaches it from an HTTP request has already been
    answered (500 problem) and logged on one line by the app's exception handler; it is not re-raised
    to the server. Lifespan (start-up) errors still propagate."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        except Exception:  # noqa: BLE001 - answered and logged by ``_internal``
            pass


class OneLineLogs(logging.Filter):
    """Logging filter: every record becomes one line, with no traceback or stack.

    A record carrying an exception keeps its first message line and the exception's type name
    (never its text, which may quote request data), e.g. uvicorn's
    ``Invalid HTTP request received. (RemoteProtocolError)``.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        lines = msg.splitlines()
        first = lines[0] if lines else ""
        if record.exc_info and record.exc_info[1] is not None:
            first = f"{first} ({type(record.exc_info[1]).__name__})"
        if first != msg or record.exc_info or record.exc_text or record.stack_info:
            record.msg, record.args = first, None
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def logging_config(level: str = "WARNING") -> dict:
    """``logging.config.dictConfig`` settings for a service process: one stderr handler with
    :class:`OneLineLogs` for the root logger and uvicorn's loggers (access log off)."""
    return {
        "version": 1, "disable_existing_loggers": False,
        "filters": {"one_line": {"()": OneLineLogs}},
        "formatters": {"plain": {"format": "%(levelname)s %(name)s: %(message)s"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr",
                                "formatter": "plain", "filters": ["one_line"]}},
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {name: {"level": level, "handlers": [], "propagate": True}
                    for name in ("uvicorn", "uvicorn.error", "uvicorn.asgi", "uvicorn.access")},
    }


_SIG = re.compile(r"SDP-HMAC-SHA256 len=([0-9]{1,15}),sha256=([0-9a-f]{64}),mac=([0-9a-f]{64})")


def _mac(secret: bytes, method: str, path: str, length: int, digest: bytes) -> str:
    msg = (method.upper().encode() + b"\n" + path.encode() + b"\n" + str(length).encode() + b"\n" + digest)
    return hmac.new(secret, msg, hashlib.sha256).hexdigest()


def sign_request(secret: bytes, method: str, path: str, body: bytes) -> str:
    """The shuffler → analyzer authenticator (``Authorization`` header value).

    ``SDP-HMAC-SHA256 len=<n>,sha256=<hex>,mac=<hex>`` with ``mac = HMAC-SHA256(secret, METHOD \\n
    path \\n n \\n SHA-256(body))``: the MAC covers the body's length and digest, which the header
    carries, so the receiver authenticates the request (and knows how many bytes it will get)
    before reading the body, then checks that the body has that length and digest.
    """
    return sign_digest(secret, method, path, len(body), hashlib.sha256(body).digest())


def sign_digest(secret: bytes, method: str, path: str, length: int, digest: bytes) -> str:
    """:func:`sign_request` for a body known by its length and SHA-256 ``digest`` only."""
    return f"SDP-HMAC-SHA256 len={length},sha256={digest.hex()},mac={_mac(secret, method, path, length, digest)}"


def check_signature_header(secret: bytes, method: str, path: str, header: str | None) -> tuple[int, bytes]:
    """Authenticate a signed request from its header alone: ``(body length, body SHA-256)``.

    Raises ``Problem(401)`` (closing the connection) when the header is missing, malformed or its
    MAC does not verify. The body itself must then be checked against the returned length and digest.
    """
    m = _SIG.fullmatch(header or "")
    if m is None or not hmac.compare_digest(
            _mac(secret, method, path, int(m[1]), bytes.fromhex(m[2])).encode(), m[3].encode()):
        raise Problem(401, "unauthorized", "missing or invalid request signature", headers=_CLOSE)
    return int(m[1]), bytes.fromhex(m[2])


def verify_signature(secret: bytes, method: str, path: str, body: bytes, header: str | None) -> None:
    """Check a signed request whose body is already in memory (Problem 401 when it does not verify)."""
    length, digest = check_signature_header(secret, method, path, header)
    if length != len(body) or not hmac.compare_digest(hashlib.sha256(body).digest(), digest):
        raise Problem(401, "unauthorized", "missing or invalid request signature")


async def read_body(request: Request, limit: int, task_id: bytes | None = None, *,
                    too_large: str = "reportTooLarge") -> bytes:
    """Read a request body of at most ``limit`` bytes, bounded in size and in time.

    - A ``Content-Length`` above ``limit`` is refused (413 ``too_large``) before any byte is read;
      a body that grows past ``limit`` while streaming (chunked, or lying) is refused as soon as it
      does, so at most ``limit`` bytes (plus one transport chunk) are ever held.
    - Time: each wait for the next chunk is bounded by the app's ``body_timeout`` (default
      :data:`BODY_TIMEOUT`) and the whole body by ``body_timeout + expected / body_min_rate``
      (``expected``: ``Content-Length`` or ``limit``; default rate :data:`BODY_MIN_RATE`), set by
      ``serve`` on ``app.state``. Past either: 408 ``requestTimeout``.
    Early answers carry ``Connection: close``: the server closes the connection without reading
    (or buffering) the rest. A client that disconnects mid-body raises ``ClientDisconnect``
    (answered and logged on one line by :func:`install_problem_handlers`).
    """
    declared = request.headers.get("content-length")
    expected = limit
    if declared is not None:
        if not (declared.isascii() and declared.isdigit() and len(declared) <= 18):
            raise Problem(400, "invalidRequest", "Content-Length must be a decimal integer", task_id, headers=_CLOSE)
        if int(declared) > limit:
            raise Problem(413, too_large, f"body larger than {limit} bytes", task_id, headers=_CLOSE)
        expected = int(declared)
    st = request.app.state
    idle = float(getattr(st, "body_timeout", BODY_TIMEOUT))
    rate = float(getattr(st, "body_min_rate", BODY_MIN_RATE))
    deadline = anyio.current_time() + idle + expected / rate
    receive = request.receive
    chunks: list[bytes] = []
    size = 0
    while True:
        wait = min(idle, deadline - anyio.current_time())
        message = None
        if wait > 0:
            with anyio.move_on_after(wait):
                message = await receive()
        if message is None:
            log.warning("request body not received in time")  # one line, no request data
            raise Problem(408, "requestTimeout", "request body not received in time", task_id, headers=_CLOSE)
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Problem(413, too_large, f"body larger than {limit} bytes", task_id, headers=_CLOSE)
        if chunk:
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def read_signed_body(request: Request, secret: bytes, limit: int, task_id: bytes | None = None, *,
                           too_large: str = "batchTooLarge") -> bytes:
    """Authenticate a signed request, then read its body (:func:`read_body`) and check it.

    Order: the ``Authorization`` header's MAC (401, before any body byte is read), the signed length
    against ``limit`` (413, also before reading), then the body is read capped at the signed length
    and must have exactly that length and SHA-256 (else 401).
    """
    length, digest = check_signature_header(secret, request.method, request.url.path,
                                            request.headers.get("authorization"))
    if length > limit:
        raise Problem(413, too_large, f"body larger than {limit} bytes", task_id, headers=_CLOSE)
    body = await read_body(request, length, task_id, too_large=too_large)
    if len(body) != length or not hmac.compare_digest(hashlib.sha256(body).digest(), digest):
        raise Problem(401, "unauthorized", "body does not match the request signature", task_id)
    return body


def check_bearer(token: str, header: str | None) -> None:
    if not header or not hmac.compare_digest(f"Bearer {token}".encode(), header.encode()):
        raise Problem(401, "unauthorized", "missing or invalid bearer token")


def service_app(title: str, state: Any, name: str) -> FastAPI:
    """The scaffolding both services share: a FastAPI app without docs pages, the problem+json
    handlers, ``state.start``/``state.stop`` on start-up and shutdown, ``app.state.<name> = state``."""
    app = FastAPI(title=title, docs_url=None, redoc_url=None, on_startup=[state.start], on_shutdown=[state.stop])
    install_problem_handlers(app)
    setattr(app.state, name, state)
    return app


def task_id_from_hex(task_hex: str) -> bytes:
    """A task id from its URL form (64 hex characters); 404 ``unrecognizedTask`` otherwise."""
    try:
        t = bytes.fromhex(task_hex)
    except ValueError as e:
        raise Problem(404, "unrecognizedTask", "task id must be 64 hex characters") from e
    if len(t) != 32:
        raise Problem(404, "unrecognizedTask", "task id must be 64 hex characters")
    return t
