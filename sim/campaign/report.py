"""The campaign report: one self-contained HTML file (matplotlib PNGs embedded as base64, the JSON summary
embedded as data), readable offline and attachable to a CI run.

Sections: verdict and checks, KPI statistics, one heatmap per axis (KPI means per axis value, coloured by how
close they are to their gate), failure rate over pairs of axes, the worst cases with their trajectories (and, for
a robot with sensed feet, the footfall diagram of the worst one), and the deltas against another artifact when one
was compared.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import json
import textwrap

import numpy as np

from sim.campaign.config import CampaignConfig
from sim.campaign.gates import failed_kpis
from sim.gait import DIAGONALS
from sim.kpis import KPI_UNITS

MAX_PAIRS = 6
FOOTFALL_ZOOM_S = 2.0  # the footfall diagram's second panel: the last seconds before the episode ends or falls
CMAP = "RdYlGn_r"  # green: far within the gate, red: at twice the limit or beyond

STYLE = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1100px;
       color: #222; line-height: 1.4; }
h1 { margin-bottom: 4px; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 32px; }
.badge { display: inline-block; padding: 4px 14px; border-radius: 6px; color: white; font-weight: bold; }
.pass { background: #2e7d32; } .fail { background: #c62828; }
table { border-collapse: collapse; margin: 8px 0; font-size: 14px; }
td, th { border: 1px solid #ddd; padding: 4px 10px; text-align: right; } th { background: #f5f5f5; }
td:first-child, th:first-child { text-align: left; }
tr.bad td { background: #ffebee; }
.meta { color: #555; font-size: 14px; } .meta code { font-size: 13px; }
img { max-width: 100%; display: block; margin: 8px 0; }
pre { background: #f7f7f7; padding: 8px; overflow-x: auto; font-size: 12px; }
"""


def png_base64(fig, tight: bool = True) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight" if tight else None)  # tight: a second draw pass
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def img_tag(fig, alt: str, tight: bool = True) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{png_base64(fig, tight)}">'


def _fmt(v) -> str:
    if isinstance(v, str):
        return v
    return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.3e}"


def _cell_colours(values: np.ndarray, limits: list[float | None]):
    """RGBA per cell of a (rows, KPI columns) table. A gated column runs green -> red as its value goes from 0
    to twice the limit; an ungated column is shaded blue by its place within the column (context, not a verdict)."""
    import matplotlib

    gated, neutral = matplotlib.colormaps[CMAP], matplotlib.colormaps["Blues"]
    out = np.zeros(values.shape + (4,))
    for j, limit in enumerate(limits):
        col = values[:, j]
        if limit is not None:
            share = np.clip(col / (2 * limit), 0, 1) if limit > 0 else (col > 0).astype(float)
            out[:, j] = gated(share)
        else:
            lo, hi = np.nanmin(col), np.nanmax(col)
            out[:, j] = neutral(0.1 + 0.4 * (col - lo) / (hi - lo) if hi - lo > 1e-12 else np.full(len(col), 0.1))
    return out


def _annotate(ax, values: np.ndarray, colours: np.ndarray, percent_cols: tuple[int, ...] = ()) -> None:
    for (i, j), v in np.ndenumerate(values):
        text = "-" if np.isnan(v) else (f"{100 * v:.0f}%" if j in percent_cols else _fmt(v))
        dark = np.dot(colours[i, j, :3], (0.299, 0.587, 0.114)) < 0.45  # white text on dark cells
        ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")


def axis_heatmap(axis: str, entries: list[dict], names: list[str], cfg: CampaignConfig):
    """Rows: the axis's values; columns: failing-episode share and each KPI's mean."""
    import matplotlib.pyplot as plt

    columns = ["failing\nepisodes"] + [
        textwrap.fill(k.replace("_", " "), 12, break_long_words=False) + f"\n({KPI_UNITS[k]})" for k in names
    ]
    values = np.array([[e["failure_rate"]] + [e["kpis"].get(k, np.nan) for k in names] for e in entries])
    rate, kpi_limits = cfg.gates.axis_rate(axis), [cfg.gates.kpis.get(k) for k in names]
    limits = [rate, *kpi_limits]
    colours = _cell_colours(values, limits)
    fig, ax = plt.subplots(figsize=(1.5 + 1.02 * len(columns), 0.9 + 0.38 * len(entries)))
    ax.imshow(colours, aspect="auto")
    _annotate(ax, values, colours, percent_cols=(0,))
    labels = [f"{columns[0]}\n≤ {100 * rate:.0f}%"] + [
        f"{c}\n≤ {_fmt(lim)}" if lim is not None else c for c, lim in zip(columns[1:], kpi_limits, strict=True)
    ]
    ax.set_xticks(range(len(columns)), labels, fontsize=7)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(entries)), [_fmt(e["value"]) for e in entries], fontsize=8)
    ax.set_ylabel(axis)
    return fig


def pair_heatmaps(rows: list[dict], cfg: CampaignConfig):
    """Failure rate over pairs of varied axes (None when fewer than two axes vary)."""
    import matplotlib.pyplot as plt

    varied = [a for a, v in cfg.axes.items() if len(v) > 1]
    pairs = list(itertools.combinations(varied, 2))[:MAX_PAIRS]
    if not pairs:
        return None
    cols = min(3, len(pairs))
    fig, axes = plt.subplots(
        -(-len(pairs) // cols), cols, figsize=(4.2 * cols, 3.4 * -(-len(pairs) // cols)), squeeze=False
    )
    limits = cfg.gates.kpis
    for ax, (a, b) in zip(axes.flat, pairs, strict=False):
        va, vb = cfg.axes[a], cfg.axes[b]
        rate = np.zeros((len(vb), len(va)))
        for i, y in enumerate(vb):
            for j, x in enumerate(va):
                sub = [r for r in rows if r["axes"][a] == x and r["axes"][b] == y]
                rate[i, j] = np.mean([bool(failed_kpis(r, limits)) for r in sub]) if sub else np.nan
        colours = _cell_colours(rate.T, [cfg.gates.failure_rate] * len(vb)).transpose(1, 0, 2)
        ax.imshow(colours, aspect="auto", origin="lower")
        _annotate(ax, rate, colours, percent_cols=tuple(range(len(va))))
        ax.set_xticks(range(len(va)), [_fmt(v) for v in va], fontsize=8)
        ax.set_yticks(range(len(vb)), [_fmt(v) for v in vb], fontsize=8)
        ax.set_xlabel(a)
        ax.set_ylabel(b)
    for ax in list(axes.flat)[len(pairs) :]:
        ax.axis("off")
    fig.suptitle("Failing episodes over pairs of axes", fontsize=11)
    fig.tight_layout()
    return fig


def trajectory_figure(trace: dict[str, np.ndarray]):
    import matplotlib.pyplot as plt

    t = trace["t"]
    fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(10.5, 5.6), sharex=True)
    a1.plot(t, trace["cmd_vx"], "k--", lw=1, label="vx command")
    a1.plot(t, trace["vx"], "C0", label="vx (m/s)")
    a1.plot(t, trace["cmd_wz"], "--", color="grey", lw=1, label="wz command")
    a1.plot(t, trace["wz"], "C1", label="wz (rad/s)")
    outside = {"fontsize": 7, "loc": "upper left", "bbox_to_anchor": (1.09, 1.0)}  # never over the data
    a1.legend(**outside)
    a1.set_ylabel("velocity")
    a2.plot(t, trace["tilt_deg"], "C3")
    a2.set_ylabel("tilt (deg)", color="C3")
    h = a2.twinx()
    h.plot(t, trace["base_height"], "C2", lw=1)
    h.set_ylabel("base height (m)", color="C2")
    a3.plot(t, trace["torque_ratio"], "C4", label="peak |torque| / limit")
    a3.fill_between(
        t, 0, np.nan_to_num(trace["intervention"]), color="C1", alpha=0.3, step="mid", label="safety filter intervened"
    )
    a3.set_ylim(0, max(1.05, float(np.nanmax(trace["torque_ratio"], initial=0)) * 1.05))
    a3.legend(**outside)
    a3.set_xlabel("time (s)")
    fig.subplots_adjust(left=0.07, right=0.76, top=0.97, bottom=0.09, hspace=0.12)  # tight_layout costs 2x
    return fig


def footfall_figure(contact: np.ndarray, feet: list[str], dt: float):
    """Stance bars per foot over the scored steps of one episode (contact: (steps, feet) bool), and a zoom on
    the last FOOTFALL_ZOOM_S seconds."""
    import matplotlib.pyplot as plt

    steps = len(contact)
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 0.6 + 0.42 * len(feet)), width_ratios=(3, 1), sharey=True)
    for ax, start in zip(axes, (0, max(0, steps - int(round(FOOTFALL_ZOOM_S / dt)))), strict=True):
        for j in range(len(feet)):
            c = np.concatenate([[0], contact[start:, j].astype(np.int8), [0]])
            ups, downs = np.flatnonzero(np.diff(c) == 1), np.flatnonzero(np.diff(c) == -1)
            spans = [((start + u) * dt, (d - u) * dt) for u, d in zip(ups, downs, strict=True)]
            ax.broken_barh(spans, (j - 0.4, 0.8), color="C1" if len(feet) == 4 and j in DIAGONALS[1] else "C0")
        ax.set_xlim(start * dt, steps * dt)
        ax.set_xlabel("time (s)")
    axes[0].set_yticks(range(len(feet)), feet, fontsize=8)
    axes[0].invert_yaxis()
    axes[0].set_title("footfalls: bars are stance (same colour: a diagonal pair)", fontsize=9, loc="left")
    axes[1].set_title(f"last {FOOTFALL_ZOOM_S:g} s", fontsize=9, loc="left")
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.25 if len(feet) < 3 else 0.2, wspace=0.05)
    return fig


def html_table(header: list[str], rows: list[list], bad: list[bool] | None = None) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for i, r in enumerate(rows):
        cls = ' class="bad"' if bad and bad[i] else ""
        cells = (html.escape(_fmt(c)).replace("|", "|<wbr>") for c in r)  # let long scenario ids wrap
        body.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def render(
    summary: dict, rows: list[dict], cfg: CampaignConfig, traces: dict[str, dict], comparison: dict | None = None
) -> bytes:
    """The HTML report. `traces`: episode id -> trace channels for the worst cases."""
    import matplotlib

    matplotlib.use("Agg")
    passed = summary["passed"]
    names = list(summary["kpis"])
    parts = [
        f"<h1>Validation campaign <code>{html.escape(cfg.name)}</code> "
        f'<span class="badge {"pass" if passed else "fail"}">{"PASS" if passed else "FAIL"}</span></h1>',
        f'<p class="meta">policy <code>{html.escape(summary["artifact"])}</code> (onnx sha256 '
        f"<code>{summary['policy_sha256'][:16]}</code>), robot {html.escape(summary['robot'])}, backend "
        f"{html.escape(summary['backend'])}, {summary['episodes']} episodes of {cfg.episode_s:g} s "
        f"({len(cfg.seeds)} seed(s)), {summary['failing_episodes']} failing</p>",
        "<h2>Gates</h2>",
        "<p>An episode fails when a KPI exceeds its limit: "
        + ", ".join(f"{html.escape(k)} ≤ {_fmt(v)}" for k, v in cfg.gates.kpis.items())
        + ". The share of failing episodes must stay within the allowed rate overall and at each axis value.</p>",
        html_table(
            ["check", "failing share", "allowed", "episodes", "result"],
            [
                [
                    c["gate"],
                    f"{100 * c['value']:.1f}%",
                    f"{100 * c['limit']:.1f}%",
                    str(c["episodes"]),
                    "pass" if c["passed"] else "FAIL",
                ]
                for c in summary["checks"]
            ],
            [not c["passed"] for c in summary["checks"]],
        ),
        "<h2>KPIs over all episodes</h2>",
        html_table(
            ["KPI", "unit", "mean", "p95", "max", "gate"],
            [
                [
                    k,
                    s["unit"],
                    s["mean"],
                    s["p95"],
                    s["max"],
                    f"≤ {_fmt(cfg.gates.kpis[k])}" if k in cfg.gates.kpis else "-",
                ]
                for k, s in summary["kpis"].items()
            ],
        ),
        "<h2>Scenario axes</h2>",
    ]
    for axis, entries in summary["axes"].items():
        parts.append(f"<h3>{html.escape(axis)}</h3>")
        parts.append(img_tag(axis_heatmap(axis, entries, names, cfg), f"heatmap: {axis}"))
    pairs = pair_heatmaps(rows, cfg)
    if pairs is not None:
        parts += ["<h2>Axis pairs</h2>", img_tag(pairs, "failure rate over axis pairs")]
    parts.append("<h2>Worst cases</h2>")
    parts += _footfalls(summary, rows, cfg, traces)
    for case in summary["worst_cases"]:
        failed = ", ".join(case["failed"]) or "none (passes)"
        parts.append(f"<h3>{html.escape(case['id'])}</h3><p>failed: {html.escape(failed)}</p>")
        parts.append(html_table(list(case["kpis"]), [list(case["kpis"].values())]))
        if case["id"] in traces:
            parts.append(img_tag(trajectory_figure(traces[case["id"]]), f"trajectory: {case['id']}", tight=False))
    if comparison is not None:
        parts += _comparison(comparison, cfg.gates.kpis)
    data = json.dumps(summary, indent=1)
    embedded = data.replace("</", "<\\/")  # a "</script>" inside a string must not end the script element
    parts += [
        "<h2>JSON summary</h2>",
        f"<details><summary>summary.json</summary><pre>{html.escape(data)}</pre></details>",
        f'<script type="application/json" id="campaign-summary">{embedded}</script>',
    ]
    doc = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Campaign {html.escape(cfg.name)}: "
        f"{'PASS' if passed else 'FAIL'}</title><style>{STYLE}</style></head><body>{''.join(parts)}</body></html>"
    )
    return doc.encode()


def _footfalls(summary: dict, rows: list[dict], cfg: CampaignConfig, traces: dict[str, dict]) -> list[str]:
    """The footfall diagram of the worst episode, when its trace holds the foot contacts."""
    if not summary["worst_cases"]:
        return []
    worst = summary["worst_cases"][0]["id"]
    trace = traces.get(worst, {})
    if "foot_contact" not in trace:
        return []
    contact = trace["foot_contact"]
    scored = next(r["steps"] for r in rows if r["id"] == worst)  # the steps before its fall
    dt = cfg.episode_s / len(contact)
    fig = footfall_figure(contact[:scored], [str(f) for f in trace["feet"]], dt)
    return [
        f"<h3>Footfalls of {html.escape(worst)}</h3>",
        img_tag(fig, f"footfall diagram: {worst}", tight=False),
    ]


def _comparison(cmp: dict, gated: dict) -> list[str]:
    import matplotlib.pyplot as plt

    names = list(cmp["mean_delta"])
    out = [
        "<h2>Comparison</h2>",
        f"<p>against <code>{html.escape(cmp['other']['artifact'])}</code> (sha256 "
        f"<code>{cmp['other']['policy_sha256'][:16]}</code>) over {cmp['scenarios']} scenarios: "
        f"<b>{cmp['regressions']}</b> regressions (fail here, pass there), {cmp['fixes']} fixes. "
        "Deltas are this artifact minus the other: positive is worse.</p>",
        html_table(["KPI", "mean delta"], [[k, v] for k, v in cmp["mean_delta"].items()]),
    ]
    if cmp["per_scenario"] and names:
        cols = min(4, len(names))
        rows = -(-len(names) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.1 * rows), squeeze=False)
        for ax, k in zip(axes.flat, names, strict=False):
            ax.hist([s["deltas"][k] for s in cmp["per_scenario"]], bins=20, color="C0")
            ax.axvline(0, color="k", lw=0.8)
            ax.set_title(k, fontsize=8)
            ax.tick_params(labelsize=7)
        for ax in list(axes.flat)[len(names) :]:
            ax.axis("off")
        fig.tight_layout()
        out.append(img_tag(fig, "per-scenario KPI deltas"))
    # the gated KPIs and the tracking errors: the columns a regression is judged by (all deltas: compare.json)
    shown = [k for k in names if k in gated or k.startswith("tracking_error")]
    out.append("<h3>Largest regressions</h3>")
    out.append(
        html_table(
            ["scenario", "passes here", "passes there", *(f"delta {k}" for k in shown)],
            [
                [s["id"], str(s["passed"]), str(s["other_passed"]), *(s["deltas"][k] for k in shown)]
                for s in cmp["worst"]
            ],
            [s["other_passed"] and not s["passed"] for s in cmp["worst"]],
        )
    )
    return out
