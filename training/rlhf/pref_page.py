"""The preference page: an operator compares two candidate plans for one instruction, each shown as its executed
trajectory in the twin, and clicks the better one. The pairs are the store's (real phrasings: corpus lines without
the training's made-up words, or field instructions; prefs.collect_pairs); with a model (`sampler`), the rater can
also type an instruction: the page samples two plans for it (prefs.PairSampler) and shows that pair next.

Security: the server binds 127.0.0.1 unless told otherwise; every request needs the session token (random per
start unless given), in the page URL's `token` query parameter and in the X-Token header of the API call, compared
in constant time; a bad token gets 403 and no data. Responses carry a strict Content-Security-Policy (the only
script is the page's own, by nonce), no-referrer (the token never leaks in a Referer) and no-store.
"""

from __future__ import annotations

import html
import json
import secrets
import sys
from collections.abc import Callable

from fastapi import FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel

from edge.instruct.plan import FIELDS, PlanError, parse_plan
from training.rlhf.plot import trajectory_svg
from training.rlhf.prefs_store import Pair, PreferenceStore

MAX_TYPED_CHARS = 200
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class Choice(BaseModel):
    pair_id: int
    choice: str


class Typed(BaseModel):
    instruction: str


def create_app(store: PreferenceStore, token: str, rater: str = "operator", sampler: Callable | None = None) -> FastAPI:
    """`sampler`: a prefs.PairSampler (or None: no typed instructions)."""
    app = FastAPI(title="RLHF preferences", docs_url=None, redoc_url=None, openapi_url=None)

    def check(given: str | None) -> None:
        if not given or not secrets.compare_digest(given.encode(), token.encode()):
            raise HTTPException(status_code=403, detail="bad or missing token")

    @app.middleware("http")
    async def headers(request: Request, call_next):
        response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        return response

    @app.exception_handler(HTTPException)
    async def refuse(request: Request, exc: HTTPException):
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
        return HTMLResponse(
            f"<!doctype html><title>{exc.status_code}</title><h1>{html.escape(str(exc.detail))}</h1>",
            status_code=exc.status_code,
        )

    @app.get("/", response_class=HTMLResponse)
    def page(
        token_param: str | None = Query(None, alias="token"),
        after: int = 0,
        pair_id: int | None = Query(None, alias="pair"),
    ) -> HTMLResponse:
        check(token_param)
        pair = store.pair(pair_id) if pair_id is not None else store.next_unrated("human", after=after)
        nonce = secrets.token_urlsafe(12)
        csp = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; connect-src 'self'; "
            "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
        page = _render(pair, token, nonce, store.counts(), typing=sampler is not None)
        return HTMLResponse(page, headers={"Content-Security-Policy": csp})

    @app.post("/api/preference")
    def prefer(body: Choice, x_token: str | None = Header(None)) -> dict:
        check(x_token)
        if body.choice not in ("a", "b"):
            raise HTTPException(status_code=422, detail="choice must be 'a' or 'b'")
        try:
            stored = store.add_preference(body.pair_id, body.choice, rater, "human")
        except KeyError:
            raise HTTPException(status_code=404, detail=f"no pair {body.pair_id}") from None
        return {"stored": stored, "pair_id": body.pair_id, "choice": body.choice}

    @app.post("/api/instruction")
    def typed(body: Typed, x_token: str | None = Header(None)) -> dict:
        check(x_token)
        if sampler is None:
            raise HTTPException(status_code=404, detail="this page was started without a model to sample plans")
        text = body.instruction.strip()
        if not text or len(text) > MAX_TYPED_CHARS:
            raise HTTPException(status_code=422, detail=f"type an instruction of 1 to {MAX_TYPED_CHARS} characters")
        pair_id = sampler(store, text)
        if pair_id is None:
            raise HTTPException(status_code=422, detail="the model wrote the same plan every time (or it is a stop)")
        return {"pair_id": pair_id}

    return app


def serve(
    db: str,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    rater: str = "operator",
    sampler: Callable | None = None,
) -> None:
    """`sampler`: a prefs.PairSampler that samples two plans for an instruction the rater types (None: no typing)."""
    import uvicorn

    token = token or secrets.token_urlsafe(18)
    if host not in LOOPBACK:
        print(
            f"WARNING: serving on {host}: anyone who can reach this port and learns the token can rate; use an SSH "
            "tunnel to 127.0.0.1 instead where you can",
            file=sys.stderr,
        )
    print(
        f"preference page: http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}/?token={token}",
        flush=True,
    )
    app = create_app(PreferenceStore(db), token, rater, sampler)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def _plan_table(text: str) -> str:
    try:
        plan = parse_plan(text)
    except PlanError:
        return f"<p class=bad>not a plan: <code>{html.escape(text[:200])}</code></p>"
    head = "".join(f"<th>{f}</th>" for f in FIELDS)
    rows = "".join("<tr>" + "".join(f"<td>{getattr(s, f):.2f}</td>" for f in FIELDS) + "</tr>" for s in plan)
    return f"<table><tr>{head}</tr>{rows}</table>"


def _side(label: str, plan: str, execution: dict | None) -> str:
    plot = trajectory_svg(execution["path"], f"plan {label}") if execution else "<p>(not executed)</p>"
    metrics = ""
    if execution:
        m = execution["metrics"]
        metrics = f"<p class=m>executed: {m['distance_m']:.2f} m, {m['angle_rad']:.2f} rad, {m['duration_s']:.1f} s</p>"
    return (
        f'<section class=side id="side-{label}"><h2>Plan {label.upper()}</h2>{plot}{metrics}'
        f'{_plan_table(plan)}<button id="prefer-{label}" data-choice="{label}">{label.upper()} is better'
        "</button></section>"
    )


def _render(pair: Pair | None, token: str, nonce: str, counts: dict, typing: bool = False) -> str:
    style = (
        "body{font-family:sans-serif;max-width:900px;margin:1em auto}.pair{display:flex;gap:2em}"
        ".side{flex:1}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px}"
        "button{font-size:16px;margin-top:.6em;padding:.4em 1em}.m{color:#555;font-size:13px}.bad{color:#b00}"
        "#typed{width:60%;font-size:16px}"
    )
    done = counts.get("human", 0)
    form = (
        "<p><label>Or type an instruction: <input id=typed maxlength=200 "
        'placeholder="e.g. back up a little, then turn right"></label> <button id=sample>Sample two plans</button> '
        "<span id=typed-status></span></p>"
        if typing
        else ""
    )
    script = f"""
const TOKEN = {json.dumps(token)}, PAIR = {json.dumps(pair.id if pair else None)};
async function post(path, body) {{
  return fetch(path, {{method: 'POST', headers: {{'Content-Type': 'application/json', 'X-Token': TOKEN}},
    body: JSON.stringify(body)}});
}}
async function send(choice) {{
  const r = await post('/api/preference', {{pair_id: PAIR, choice: choice}});
  const status = document.getElementById('status');
  if (r.ok) {{
    status.textContent = 'stored: ' + choice;
    setTimeout(() => {{
      const u = new URL(location.href); u.searchParams.delete('pair'); location.href = u.toString(); }}, 300);
  }} else {{ status.textContent = 'not stored: ' + (await r.json()).error; }}
}}
for (const b of document.querySelectorAll('button[data-choice]'))
  b.addEventListener('click', () => send(b.dataset.choice));
const skip = document.getElementById('skip');
if (skip) skip.addEventListener('click', () => {{
  const u = new URL(location.href); u.searchParams.delete('pair'); u.searchParams.set('after', PAIR);
  location.href = u.toString(); }});
const sample = document.getElementById('sample');
if (sample) sample.addEventListener('click', async () => {{
  const status = document.getElementById('typed-status');
  status.textContent = 'sampling two plans ...';
  const r = await post('/api/instruction', {{instruction: document.getElementById('typed').value}});
  const body = await r.json();
  if (r.ok) {{
    const u = new URL(location.href); u.searchParams.set('pair', body.pair_id); location.href = u.toString(); }}
  else {{ status.textContent = 'no pair: ' + body.error; }}
}});
"""
    tail = f'{form}<script nonce="{nonce}">{script}</script>'
    if pair is None:
        body = f"<h1>Nothing left to rate</h1><p id=status>{done} preferences stored by people.</p>{tail}"
        return f"<!doctype html><meta charset=utf-8><title>RLHF preferences</title><style>{style}</style>{body}"
    body = (
        f"<h1>Which plan does what the instruction says?</h1>"
        f"<p>Instruction: <strong id=instruction>{html.escape(pair.instruction)}</strong> "
        f"<span class=m>(robot state: {html.escape(pair.state)}; pair {pair.id})</span></p>"
        f"<div class=pair>{_side('a', pair.plan_a, pair.exec_a)}{_side('b', pair.plan_b, pair.exec_b)}</div>"
        f"<p><button id=skip>Skip</button> <span id=status>{done} preferences stored by people.</span></p>{tail}"
    )
    return f"<!doctype html><meta charset=utf-8><title>RLHF preferences</title><style>{style}</style>{body}"
