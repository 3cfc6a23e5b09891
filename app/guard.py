"""The web API's guard: a request-body limit and the security headers on every response.

A plain ASGI middleware (``app.add_middleware(Guard)``). The body is read here, before the app
sees it, so a stream without ``Content-Length`` is counted too: FastAPI would turn an error
raised while it reads the body into a 400, where the right answer is a 413 with the reason.
"""

from __future__ import annotations

import json
from typing import Any

MAX_BODY_BYTES = 32 * 1024
"""Largest request body accepted (a 2,000-character question is at most ~12 KB of JSON)."""
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}
"""Sent with every response: the page loads only its own files and is never framed."""


class Guard:
    """ASGI middleware: a request-body limit (413 with the reason) and the security headers."""

    def __init__(self, app: Any, max_body: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Refuse an over-long body before the app reads it; add headers to every response."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.decode() not in SECURITY_HEADERS
                ]
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            await self.too_large(send_with_headers)
            return
        # read the body here (it is small), so a stream without Content-Length is counted too
        body = b""
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            more = bool(message.get("more_body", False))
            if len(body) > self.max_body:
                await self.too_large(send_with_headers)
                return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            message: dict[str, Any] = await receive()
            return message

        await self.app(scope, replay, send_with_headers)

    async def too_large(self, send: Any) -> None:
        """The 413 reply."""
        detail = f"the request body is larger than {self.max_body} bytes"
        body = json.dumps({"detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})
