"""Who may talk to the review server, and what the browser may do with its pages.

One ASGI middleware in front of every route, static files included:

- the ``Host`` header must be the loopback address and port the server
  listens on (or ``localhost``), which defeats DNS rebinding: a page on
  another site whose name was re-pointed at 127.0.0.1 sends its own name;
- the random token printed in the URL (as Jupyter does) is needed once; it is
  then kept in an HttpOnly, SameSite=Strict cookie named for the port, and
  every later request must carry it;
- a state-changing request is a form POST (``application/x-www-form-
  urlencoded``, at most 1 MiB, or three times the largest row the store holds,
  which is what that row's text costs percent-encoded) from our own origin
  whose ``csrf`` field is the server's CSRF token; any other method is refused;
- every response forbids inline script and anything from another origin
  (Content-Security-Policy), framing, MIME sniffing, and a Referer sent to
  another site.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from urllib.parse import parse_qsl
from urllib.parse import quote
from urllib.parse import urlencode

from starlette.datastructures import Headers
from starlette.datastructures import MutableHeaders
from starlette.requests import cookie_parser
from starlette.types import ASGIApp
from starlette.types import Message
from starlette.types import Receive
from starlette.types import Scope
from starlette.types import Send

# A form post's least limit; larger if the store holds larger rows.
MAX_BODY = 1024 * 1024
CEILING = 256 * 1024 * 1024
FORM = "application/x-www-form-urlencoded"
CSRF_FIELD = "csrf"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # Not no-referrer: with it, browsers send "Origin: null" on our own form
    # posts, and the origin check could not tell them from a sandboxed page.
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}


def cookie_name(port: int) -> str:
    """One cookie per port: cookies ignore ports, two servers must not collide."""
    return f"machine_review_{port}"


def form_fields(body: bytes) -> dict[str, str]:
    """The fields of an urlencoded form body (the last value of a repeated name)."""
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


class Guard:
    """The middleware: Host, token or cookie, CSRF, then security headers."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        csrf: str,
        port: int,
        limit: Callable[[], int] = lambda: MAX_BODY,
    ) -> None:
        self.app = app
        self.limit = limit
        self.token = token
        self.csrf = csrf
        self.port = port
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.origins = {f"http://{h}" for h in self.hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # none are served
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if headers.get("host", "").lower() not in self.hosts:
            await _plain(send, 403, "machine review: wrong Host header (only loopback)")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query:
            await self._login(scope, query, send)
            return
        if not self._has_cookie(headers):
            await _plain(
                send,
                403,
                "machine review: open the link that `machine review` printed "
                "(it carries the access token)",
            )
            return
        method = scope["method"]
        if method in ("GET", "HEAD"):
            await self.app(scope, receive, _secured(send))
            return
        if method != "POST":
            await _plain(send, 405, "machine review: method not allowed")
            return
        await self._post(scope, receive, send, headers)

    def _has_cookie(self, headers: Headers) -> bool:
        # Starlette's parser reads cookies as browsers send them: the stdlib's
        # SimpleCookie drops every cookie after one it finds malformed, such
        # as another local app's on the same host.
        value = cookie_parser(headers.get("cookie", "")).get(cookie_name(self.port))
        return value is not None and _same(value, self.token)

    async def _login(self, scope: Scope, query: dict[str, str], send: Send) -> None:
        if not _same(query["token"], self.token):
            await _plain(send, 403, "machine review: wrong token")
            return
        # The token leaves the address bar at once. A page that refreshes to
        # the clean address (not a 303) makes the next request same-site, so
        # the SameSite=Strict cookie is sent even when the link was opened
        # from another site.
        rest = urlencode({k: v for k, v in query.items() if k != "token"})
        target = local_path(str(scope["path"])) + (f"?{rest}" if rest else "")
        body = (
            '<!doctype html><meta charset="utf-8">'
            '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">'
            f'<meta http-equiv="refresh" content="0;url={_attr(target)}">'
            f'<title>machine review</title><a href="{_attr(target)}">continue</a>\n'
        ).encode()
        cookie = (
            f"{cookie_name(self.port)}={self.token}; HttpOnly; SameSite=Strict; Path=/"
        )
        await _respond(
            _secured(send),
            200,
            body,
            "text/html; charset=utf-8",
            [(b"set-cookie", cookie.encode())],
        )

    async def _post(
        self, scope: Scope, receive: Receive, send: Send, headers: Headers
    ) -> None:
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self.origins:
            await _plain(send, 403, "machine review: cross-origin request refused")
            return
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != FORM:
            await _plain(send, 415, "machine review: only form posts are accepted")
            return
        body = await _read_body(receive, min(max(MAX_BODY, self.limit()), CEILING))
        if body is None:
            await _plain(send, 413, "machine review: request too large")
            return
        if not _same(form_fields(body).get(CSRF_FIELD, ""), self.csrf):
            await _plain(send, 403, "machine review: missing or wrong CSRF token")
            return
        await self.app(scope, _replay(body, receive), _secured(send))


def local_path(path: str) -> str:
    """``path`` as an address on this server, never on another site.

    The path arrives percent-decoded: quoted again, a tab, a newline or a
    backslash (which browsers drop or read as ``/``) cannot make it
    protocol-relative; leading slashes are then one, so ``//evil.example/x``
    is ``/evil.example/x`` here.
    """
    quoted = quote(path, safe="/:@!$'()*+,;=-._~")
    return "/" + quoted.lstrip("/")


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _attr(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace('"', "&quot;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
    )


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


def _secured(send: Send) -> Send:
    async def with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in HEADERS.items():
                headers[name] = value
        await send(message)

    return with_headers


async def _plain(send: Send, status: int, text: str) -> None:
    await _respond(
        _secured(send), status, (text + "\n").encode(), "text/plain; charset=utf-8"
    )


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: str,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
