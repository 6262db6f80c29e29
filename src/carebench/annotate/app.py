"""The annotation web app: server-rendered pages, plain HTML forms, no JavaScript.

Every page needs a browser session opened from a personal link; every page shows
only the signed-in annotator's own assignments and labels; every form carries the
session's CSRF token; every piece of dataset text goes through Jinja2's
autoescaping, and the Content-Security-Policy forbids scripts outright, so a
prompt containing ``<script>`` is shown as text and never runs.

A label is committed to the database before the redirect that moves the
annotator on, so an acknowledged answer survives a killed server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from carebench.annotate import kinds, walks
from carebench.annotate.auth import SESSION_COOKIE, same_secret
from carebench.annotate.forms import Form, FormError
from carebench.annotate.settings import Settings
from carebench.annotate.store import Case, Session, Store
from carebench.taxonomy import Context, Taxonomy, load_contexts, load_taxonomy
from carebench.wording import label

SECURITY_HEADERS = {
    # no script of any kind, no framing, forms post only here, no referrer (links carry tokens)
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


def _paragraphs(text: str | None) -> list[str]:
    """Plain text split at blank lines (rendered escaped, one <p> each)."""
    return [p.strip() for p in (text or "").replace("\r\n", "\n").split("\n\n") if p.strip()]


def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resources.files("carebench.annotate").joinpath("templates"))),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["paragraphs"] = _paragraphs
    env.filters["label"] = label  # persona attribute keys: age_band -> Age band
    return env


class AnnotateApp:
    """Routes bound to one store and one set of settings."""

    def __init__(self, store: Store, settings: Settings, taxonomy: Taxonomy,
                 contexts: dict[str, Context]):
        self.store = store
        self.settings = settings
        self.taxonomy = taxonomy
        self.contexts = contexts
        self.env = _templates()

    # ---- plumbing ---------------------------------------------------------------------

    def page(self, template: str, status: int = 200, session: Session | None = None,
             **ctx: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(settings=self.settings, session=session, **ctx)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def message(self, status: int, title: str, text: str, session: Session | None = None) -> HTMLResponse:
        return self.page("message.html.j2", status, session, title=title, text=text)

    def redirect(self, url: str) -> RedirectResponse:
        return RedirectResponse(url, status_code=303, headers=SECURITY_HEADERS)

    async def session(self, request: Request) -> Session | None:
        return await run_in_threadpool(self.store.session, request.cookies.get(SESSION_COOKIE))

    def signed_out(self) -> HTMLResponse:
        return self.message(401, "Please sign in",
                            "Open the personal link you were given to sign in. If it no longer "
                            "works, ask your study coordinator for a new one.")

    async def form(self, request: Request, session: Session) -> Form:
        """The URL-encoded body, size-limited, with a valid CSRF token, or raise."""
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype != "application/x-www-form-urlencoded":
            raise FormError("the form could not be read (unexpected content type)")
        limit = self.settings.max_form_bytes
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            raise FormError(f"the form is larger than {limit} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise FormError(f"the form is larger than {limit} bytes")
        form = Form.parse(bytes(body))
        if not same_secret(form.one("csrf_token"), session.csrf):
            raise PermissionError("csrf")
        return form

    async def posted(self, request: Request, session: Session) -> Form | Response:
        try:
            return await self.form(request, session)
        except FormError as e:
            return self.message(400, "The form was not accepted", "; ".join(e.messages), session)
        except PermissionError:
            return self.forbidden_form(session)

    def forbidden_form(self, session: Session | None) -> HTMLResponse:
        return self.message(403, "The form was not accepted",
                            "The form's security token is missing or out of date. Go back, "
                            "reload the page and submit again.", session)

    # ---- pages ------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        opened = await run_in_threadpool(self.store.open_session, request.path_params["token"])
        if opened is None:
            return self.message(403, "This link does not work",
                                "The link is unknown or no longer valid. Ask your study "
                                "coordinator for a new one.")
        session_token, _ = opened
        resp = self.redirect("/")
        resp.set_cookie(SESSION_COOKIE, session_token, httponly=True, samesite="lax", path="/",
                        secure=request.url.scheme == "https")
        return resp

    async def home(self, request: Request) -> Response:
        s = await self.session(request)
        if s is None:
            return self.signed_out()
        if not s.annotator.notice_ack:
            return self.redirect("/notice")
        progress = await run_in_threadpool(self.store.progress, s.annotator.id)
        return self.page("home.html.j2", session=s, projects=progress, kinds=kinds.TITLES,
                         finished=bool(progress) and all(p.next_assignment is None for p in progress),
                         on_break=s.block_done >= self.settings.session_cases)

    async def _signed_in_page(self, request: Request, template: str | None,
                              on_post: Callable[[Session, Form], Awaitable[Response]]) -> Response:
        """GET shows ``template``; POST (CSRF-checked) runs ``on_post``."""
        s = await self.session(request)
        if s is None:
            return self.signed_out()
        if request.method != "POST" and template is not None:
            return self.page(template, session=s)
        form = await self.posted(request, s)
        if isinstance(form, Response):
            return form
        return await on_post(s, form)

    async def notice(self, request: Request) -> Response:
        async def acknowledge(s: Session, form: Form) -> Response:
            await run_in_threadpool(self.store.ack_notice, s.annotator.id)
            return self.redirect("/")

        return await self._signed_in_page(request, "notice.html.j2", acknowledge)

    async def rest(self, request: Request) -> Response:
        async def next_block(s: Session, form: Form) -> Response:
            await run_in_threadpool(self.store.start_block, s.id)
            return self.redirect("/")  # back to the list: the annotator picks what to continue

        return await self._signed_in_page(request, "break.html.j2", next_block)

    def _signed_off(self, title: str, text: str) -> Response:
        resp = self.message(200, title, text)
        resp.delete_cookie(SESSION_COOKIE, path="/")
        return resp

    async def withdraw(self, request: Request) -> Response:
        async def confirmed(s: Session, form: Form) -> Response:
            if form.all("confirm") != ["yes"]:
                return self.redirect("/")
            await run_in_threadpool(self.store.withdraw, s.annotator.id)
            return self._signed_off("You have withdrawn",
                                    "Your labels have been deleted and your link no longer works. "
                                    "Thank you for your time; nothing further is expected of you.")

        return await self._signed_in_page(request, "withdraw.html.j2", confirmed)

    async def logout(self, request: Request) -> Response:
        async def sign_out(s: Session, form: Form) -> Response:
            await run_in_threadpool(self.store.end_session, s.id)
            return self._signed_off("Signed out", "You can come back any time with your personal link.")

        return await self._signed_in_page(request, None, sign_out)

    async def _own_case(self, request: Request, s: Session) -> Case | Response:
        try:
            aid = int(request.path_params["aid"])
        except ValueError:
            aid = 0
        if not 0 < aid < 2**63:  # beyond SQLite's integers (an OverflowError, once a 500)
            return self.message(404, "No such case", "There is no case at this address.", s)
        case = await run_in_threadpool(self.store.case, aid)
        if case is None:
            return self.message(404, "No such case", "There is no case at this address.", s)
        if case.annotator_id != s.annotator.id:
            return self.message(403, "Not your case", "This case is not assigned to you.", s)
        return case

    async def _next_url(self, annotator_id: int, project_id: int) -> str:
        progress = await run_in_threadpool(self.store.progress, annotator_id)
        ordered = [p for p in progress if p.id == project_id] + [p for p in progress if p.id != project_id]
        for p in ordered:
            if p.next_assignment is not None:
                return f"/a/{p.next_assignment}"
        return "/"

    async def _signed_in_case(self, request: Request) -> tuple[Session, Case] | Response:
        s = await self.session(request)
        if s is None:
            return self.signed_out()
        if not s.annotator.notice_ack:
            return self.redirect("/notice")
        case = await self._own_case(request, s)
        if isinstance(case, Response):
            return case
        return s, case

    async def case(self, request: Request) -> Response:
        """GET (and HEAD, which Starlette routes here and answers without a body): the
        case page. Never stores anything."""
        got = await self._signed_in_case(request)
        if isinstance(got, Response):
            return got
        s, case = got
        if s.block_done >= self.settings.session_cases:
            return self.redirect("/break")
        return self.case_page(s, case, case.label, [])

    async def save(self, request: Request) -> Response:
        """POST only (routed by method): a submitted label, CSRF-checked."""
        got = await self._signed_in_case(request)
        if isinstance(got, Response):
            return got
        s, case = got
        form = await self.posted(request, s)
        if isinstance(form, Response):
            return form
        if case.kind == walks.KIND:
            return await self._walk_step(s, case, form)
        try:
            answer = kinds.parse_answer(case.kind, form, self.settings.max_notes_chars, self.taxonomy)
        except FormError as e:
            return self.case_page(s, case, _echo(case.kind, form), e.messages, status=400)
        await run_in_threadpool(self.store.save_label, s.id, case.assignment_id, s.annotator.id,
                                answer.payload, answer.skipped)
        if s.block_done + 1 >= self.settings.session_cases:
            return self.redirect("/break")
        return self.redirect(await self._next_url(s.annotator.id, case.project_id))

    async def _walk_step(self, s: Session, case: Case, form: Form) -> Response:
        """A rubric-walk submission: the next question, a step back, or (stored) the
        finished walk or a skip. Only a save or a skip writes anything."""
        rubric = walks.rubric_of(case.item)
        try:
            step = walks.parse(form, rubric, self.settings.max_notes_chars)
        except FormError as e:
            reason = form.all("reason")
            return self.case_page(s, case, {"reason": reason[0] if len(reason) == 1 else ""}, e.messages,
                                  status=400, walk=walks.kept(form, rubric))
        if step.action in ("next", "back"):
            return self.case_page(s, case, {"reason": step.reason}, [], walk=step.state)
        if step.action == "skip":
            payload, skipped = {"reason": step.reason}, True
        else:
            payload, skipped = walks.payload(step.state, step.reason), False
        await run_in_threadpool(self.store.save_label, s.id, case.assignment_id, s.annotator.id,
                                payload, skipped)
        if s.block_done + 1 >= self.settings.session_cases:
            return self.redirect("/break")
        return self.redirect(await self._next_url(s.annotator.id, case.project_id))

    def case_page(self, s: Session, case: Case, values: dict[str, Any] | None, errors: list[str],
                  status: int = 200, walk: walks.WalkState | None = None) -> HTMLResponse:
        ctx: dict[str, Any] = {"case": case, "values": values or {}, "errors": errors,
                               "instructions": getattr(self.settings.instructions, case.kind.replace("-", "_"))}
        if case.kind == walks.KIND:
            rubric = walks.rubric_of(case.item)
            if walk is None:
                walk = walks.stored_state(rubric, case.label, case.skipped)
                if values is not None and "reason" in values:
                    ctx["values"] = {"reason": values["reason"]}
            ctx.update(walk=walk, rubric=rubric, pending=walk.pending(),
                       asked=[(st, rubric[st.question_id]) for st in walk.steps],
                       ratings=walk.ratings() if walk.done else {})
        if case.kind in ("policy", "review"):
            context = self.contexts.get(str(case.item.get("context")))
            ctx["context_name"] = context.label if context is not None else str(case.item.get("context"))
            ctx["contract"] = context.contract_text() if context is not None else ""
        if case.kind == "policy":
            tax = self.taxonomy
            ctx.update(intent=tax.intent, function=tax.function, response=tax.response,
                       severity_for=kinds.severity_fields(tax))
        if case.kind == "review":
            ctx.update(gates=kinds.GATES, ratings=kinds.RATINGS, scale=kinds.SCALE)
        return self.page(f"{case.kind}.html.j2", status, s, **ctx)

    async def health(self, request: Request) -> Response:
        return PlainTextResponse("ok", headers=SECURITY_HEADERS)


def _echo(kind: str, form: Form) -> dict[str, Any]:
    """What the annotator had entered, to show again beside the error."""
    notes = form.all("notes")
    values: dict[str, Any] = {"notes": notes[0] if len(notes) == 1 else ""}
    if kind == "policy":
        for field in ("intent", "function", "response"):
            values[field] = form.all(field)
        for field in ("nssi_severity", "suicidal_severity"):
            v = form.all(field)
            values[field] = int(v[0]) if len(v) == 1 and v[0].isdigit() else None
    elif kind == "review":
        for field, _ in kinds.GATES:
            v = form.all(field)
            values[field] = {"yes": True, "no": False}.get(v[0]) if len(v) == 1 else None
        for field, _ in kinds.RATINGS:
            v = form.all(field)
            values[field] = int(v[0]) if len(v) == 1 and v[0] in kinds.SCALE else None
    return values


def create_app(store: Store, settings: Settings, taxonomy: Taxonomy | None = None,
               contexts: dict[str, Context] | None = None) -> Starlette:
    """The app; the taxonomy and contexts default to carebench's packaged ones."""
    a = AnnotateApp(store, settings, taxonomy or load_taxonomy(),
                    contexts if contexts is not None else load_contexts())
    routes = [
        Route("/", a.home, methods=["GET"]),
        Route("/login/{token}", a.login, methods=["GET"]),
        Route("/notice", a.notice, methods=["GET", "POST"]),
        Route("/break", a.rest, methods=["GET", "POST"]),
        Route("/withdraw", a.withdraw, methods=["GET", "POST"]),
        Route("/logout", a.logout, methods=["POST"]),
        Route("/a/{aid}", a.case, methods=["GET"]),  # HEAD is answered like GET
        Route("/a/{aid}", a.save, methods=["POST"]),
        Route("/healthz", a.health, methods=["GET"]),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        title = "No such page" if status == 404 else "Not allowed"
        resp = a.message(status, title, "There is nothing to do at this address with this request.")
        resp.headers.update(getattr(exc, "headers", None) or {})  # e.g. Allow on a 405
        return resp

    async def server_error(request: Request, exc: Exception) -> Response:
        return a.message(500, "Something went wrong", "The server could not answer. Your saved labels are safe; "
                                                      "go back and try again.")

    # error pages carry the same security headers as every other page
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found, 500: server_error})
