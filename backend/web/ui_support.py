"""What every page of the browser UI shares: templates, markdown, auth by cookie, CSRF.

Everything shown comes from users, models or memories and is untrusted: templates are
rendered with autoescaping on (``Environment(autoescape=True)``), markdown is rendered
with raw HTML disabled (markdown-it-py escapes it, and refuses ``javascript:`` and other
unsafe link schemes), and every page is sent with a Content-Security-Policy that only
allows this app's own scripts, so an injection that slipped through still could not run.

Auth: with ``server.api_keys`` configured, the UI needs a key like the API does. The
login page stores it in an HttpOnly, ``SameSite=Strict`` cookie; a ``Bearer`` header is
accepted too. Requests that change something are checked against cross-site use: their
``Origin`` / ``Sec-Fetch-Site`` must be this site, and, with auth on, they must carry a
CSRF token (``X-CSRF-Token`` header from htmx, or a ``csrf_token`` form field) derived
from the key, which a page of another site can neither read nor compute.

Failure policy: a missing/wrong key → the login page (a redirect; ``HX-Redirect`` for
htmx requests); a cross-site or token-less write → 403 with an explanation; a bad
request → ``UiError`` rendered as an inline error fragment (htmx) or an error page.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

import jinja2
from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markdown_it import MarkdownIt
from markupsafe import Markup
from starlette.templating import Jinja2Templates

from backend.engine.services import Services
from backend.web.api_keys import user_for_key
from backend.web.deps import LOCAL_USER
from backend.web.ui_feeling import panel_feeling

COOKIE = "limbic_key"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
COOKIE_MAX_AGE_S = 30 * 24 * 3600  # a month: a personal app, re-login is a nuisance
_CSRF_CONTEXT = b"limbic-memory ui csrf v1"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# Only this app's files; inline scripts, eval and remote images are refused.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


class LoginRequired(Exception):
    """No valid key on a UI request while auth is on."""


class CrossSiteRequest(Exception):
    """A write without this site's origin or CSRF token."""


class UiError(Exception):
    """A user-facing error: shown inline (htmx) or as a page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# --- markdown ----------------------------------------------------------------------------


def make_markdown() -> MarkdownIt:
    """CommonMark plus tables and strikethrough; raw HTML is escaped (``html=False``),
    links open in a new tab without referrer, and unsafe schemes are refused by
    markdown-it's ``validateLink``."""
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])

    def link_open(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("target", "_blank")
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        return str(renderer.renderToken(tokens, idx, options, env))

    md.add_render_rule("link_open", link_open)
    return md


# --- templates ---------------------------------------------------------------------------


def _iso(moment: datetime | str | None) -> str:
    if moment is None:
        return ""
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(moment)
        except ValueError:
            return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def _when(moment: datetime | str | None) -> str:
    """A readable UTC fallback; app.js rewrites ``<time>`` elements to local time."""
    iso = _iso(moment)
    return iso[:16].replace("T", " ") + " UTC" if iso else ""


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{round(float(value) * 100)}%"


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{float(value):.{digits}f}"


def make_templates(directory: Path) -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        autoescape=True,  # every template, whatever its extension
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    md = make_markdown()
    env.filters["markdown"] = lambda text: Markup(md.render(text or ""))
    env.filters["iso"] = _iso
    env.filters["when"] = _when
    env.filters["pct"] = _pct
    env.filters["num"] = _num
    env.filters["short_id"] = lambda value: (value or "")[:8]
    env.filters["feeling"] = panel_feeling
    return Jinja2Templates(env=env)


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def render(
    request: Request,
    name: str,
    context: Mapping[str, Any] | None = None,
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> HTMLResponse:
    """A template with the security headers and the page's common context."""
    templates: Jinja2Templates = request.app.state.ui_templates
    response = templates.TemplateResponse(
        request, name, {**_base_context(request), **(context or {})}, status_code=status
    )
    response.headers.update({**SECURITY_HEADERS, **(headers or {})})
    return response  # type: ignore[return-value]


def fragment(request: Request, name: str, **context: Any) -> str:
    """A template rendered to a string (for SSE events)."""
    templates: Jinja2Templates = request.app.state.ui_templates
    template = templates.env.get_template(name)
    return template.render({**_base_context(request), "request": request, **context})


def _base_context(request: Request) -> dict[str, Any]:
    auth: UiAuth | None = getattr(request.state, "ui_auth", None)
    return {
        "csrf": auth.csrf if auth else "",
        "auth_on": bool(auth and auth.key),
        "path": request.url.path,
    }


# --- auth --------------------------------------------------------------------------------


def csrf_token(key: str) -> str:
    """The CSRF token of a key: an HMAC only someone holding the key can compute."""
    return hmac.new(key.encode(), _CSRF_CONTEXT, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class UiAuth:
    user: str
    key: str | None = None  # the key in use; None when auth is off
    via_header: bool = False  # Authorization header (not a cookie: no CSRF risk)

    @property
    def csrf(self) -> str:
        return "" if self.key is None else csrf_token(self.key)


def services_of(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]


def _authenticate(request: Request) -> UiAuth:
    server = services_of(request).settings.server
    if not server.api_keys:
        return UiAuth(LOCAL_USER)
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        key = header[7:].strip()
        user = user_for_key(server.api_keys, key)
        if user is not None:
            return UiAuth(user, key, via_header=True)
    key = request.cookies.get(COOKIE, "")
    user = user_for_key(server.api_keys, key) if key else None
    if user is None:
        raise LoginRequired
    return UiAuth(user, key)


def same_origin(request: Request) -> bool:
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    own = urlsplit(str(request.base_url))
    theirs = urlsplit(origin)
    host = request.headers.get("host", own.netloc)
    return theirs.scheme == own.scheme and theirs.netloc == host


async def ui_reader(request: Request) -> UiAuth:
    """The signed-in user of a page or fragment (GET)."""
    auth = _authenticate(request)
    request.state.ui_auth = auth
    return auth


async def ui_writer(request: Request) -> UiAuth:
    """The signed-in user of a request that changes something, checked against CSRF."""
    auth = await ui_reader(request)
    if request.method in _SAFE_METHODS or auth.via_header:
        return auth
    if not same_origin(request):
        raise CrossSiteRequest
    if auth.key is not None:
        sent = request.headers.get(CSRF_HEADER)
        if sent is None and request.headers.get("content-type", "").startswith(
            ("application/x-www-form-urlencoded", "multipart/form-data")
        ):
            form = await request.form()
            value = form.get(CSRF_FIELD)
            sent = value if isinstance(value, str) else None
        if not sent or not hmac.compare_digest(sent, auth.csrf):
            raise CrossSiteRequest
    return auth


UiReader = Annotated[UiAuth, Depends(ui_reader)]
UiWriter = Annotated[UiAuth, Depends(ui_writer)]


def safe_next(target: str | None) -> str:
    """A local path to go back to after login (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def redirect(request: Request, url: str) -> Response:
    """303 for a plain form, ``HX-Redirect`` for htmx."""
    if is_htmx(request):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


def install_ui_handlers(app: Any) -> None:
    async def login_required(request: Request, _exc: Exception) -> Response:
        target = request.url.path
        if request.url.query:
            target += "?" + request.url.query
        if is_htmx(request):  # a fragment: come back to the page that asked for it
            page = urlsplit(request.headers.get("hx-current-url", "/"))
            target = page.path + (f"?{page.query}" if page.query else "")
        login = "/login?next=" + quote(safe_next(target), safe="")
        if "text/event-stream" in request.headers.get("accept", ""):
            return Response(status_code=204)  # 204: an EventSource stops reconnecting
        if is_htmx(request):
            return Response(status_code=401, headers={"HX-Redirect": login})
        return RedirectResponse(login, status_code=303)

    async def cross_site(request: Request, _exc: Exception) -> Response:
        message = (
            "This request was refused because it did not come from this app's own pages "
            "(or the page is out of date). Reload the page and try again."
        )
        return _error(request, 403, message)

    async def ui_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, UiError)
        return _error(request, exc.status, exc.message)

    app.add_exception_handler(LoginRequired, login_required)
    app.add_exception_handler(CrossSiteRequest, cross_site)
    app.add_exception_handler(UiError, ui_error)


def _error(request: Request, status: int, message: str) -> Response:
    name = "_error.html" if is_htmx(request) else "error.html"
    return render(request, name, {"status": status, "message": message}, status=status)
