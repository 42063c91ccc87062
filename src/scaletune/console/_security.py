"""Who may read the console and who may change anything through it.

- Reading: on loopback, anyone on this machine (as optuna-dashboard and Jupyter's --no-token
  do); on any other address, only with the console's token: given once in the URL, as Jupyter
  does, then kept in an HttpOnly, SameSite=Strict cookie (or sent as `Authorization: Bearer`).
  Compared in constant time.
- Changing (Stop): POST only, with the page's CSRF token (a form field or `X-CSRF-Token`),
  and from this console's own pages: a browser's `Origin` must be this console's and its
  `Sec-Fetch-Site` same-origin. Refused with 403 under --read-only.
- The Host header must be one this console answers to (no DNS rebinding), and pages carry a
  content security policy that allows only the console's own scripts.
- A change's body is a small form: one past `MAX_BODY_BYTES`, or of no stated length, is
  refused before it is read."""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlencode

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_COOKIE = "scaletune_console_token"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_BODY_BYTES = 16 * 1024  # a Stop form is a CSRF token
_CONTENT_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Access:
    """The console's rules, fixed when it starts."""

    token: str | None  # None: no token asked (loopback only)
    read_only: bool = False
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @classmethod
    def for_bind(cls, host: str, token: str | None, read_only: bool) -> Access:
        """A non-loopback bind always has a token: the one given, else a random one."""
        if token is None and not is_loopback(host):
            token = secrets.token_urlsafe(32)
        return cls(token=token, read_only=read_only)

    def token_matches(self, given: str | None) -> bool:
        if self.token is None:
            return True
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def csrf_matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.csrf_token.encode())


class AccessMiddleware:
    """Token, CSRF, origin and read-only checks for every request, and security headers on
    every response. Pure ASGI, so that server-sent events stream through it unbuffered."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refused = self._refusal(scope, headers)
        if refused is not None:
            await _with_security_headers(refused)(scope, receive, send)
            return
        query = parse_qs(scope.get("query_string", b"").decode())
        if self.access.token is not None and "token" in query:
            # the token leaves the URL (and the history) for a cookie at once
            rest = urlencode({k: v for k, v in query.items() if k != "token"}, doseq=True)
            redirect = RedirectResponse(scope["path"] + (f"?{rest}" if rest else ""), 303)
            redirect.set_cookie(
                TOKEN_COOKIE, self.access.token, httponly=True, samesite="strict", path="/"
            )
            await _with_security_headers(redirect)(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, secured)

    def _refusal(self, scope: Scope, headers: Headers) -> Response | None:
        if not self.access.token_matches(_given_token(scope, headers)):
            return PlainTextResponse(
                "401: this console needs its token: open the URL it printed at start-up "
                "(?token=...)",
                status_code=401,
            )
        if scope["method"] in _SAFE_METHODS:
            return None
        if self.access.read_only:
            return PlainTextResponse("403: this console is read-only", status_code=403)
        length = headers.get("content-length")
        if length is None and "transfer-encoding" in headers:
            return PlainTextResponse("411: a change states its length", status_code=411)
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return PlainTextResponse(
                f"413: a change's body is at most {MAX_BODY_BYTES} bytes", status_code=413
            )
        origin = headers.get("origin")
        if origin is not None and origin != _own_origin(scope, headers):
            return PlainTextResponse(f"403: cross-origin request from {origin}", 403)
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return PlainTextResponse(f"403: cross-site request ({site})", 403)
        return None  # the CSRF token itself is checked by the handler, which reads the form


def _given_token(scope: Scope, headers: Headers) -> str | None:
    authorization = headers.get("authorization", "")
    if authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    query: dict[str, list[str]] = parse_qs(scope.get("query_string", b"").decode())
    if "token" in query:
        return query["token"][0]
    cookie = SimpleCookie(headers.get("cookie", ""))
    if TOKEN_COOKIE not in cookie:
        return None
    value: str = cookie[TOKEN_COOKIE].value
    return value


def _own_origin(scope: Scope, headers: Headers) -> str:
    return f"{scope.get('scheme', 'http')}://{headers.get('host', '')}"


_SECURITY_HEADERS = [
    (b"content-security-policy", _CONTENT_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]


def _with_security_headers(response: Response) -> Response:
    for name, value in _SECURITY_HEADERS:
        response.headers[name.decode()] = value.decode()
    return response
