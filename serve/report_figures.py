"""The report's Plotly figures, from the small aggregates of `serve.report_data`."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

OUTAGE_COLOR = "rgba(214, 39, 40, 0.28)"
OUTAGE_EDGE = "rgb(214, 39, 40)"
UNLOAD_COLOR = "rgb(148, 0, 211)"
EVENT_LINE_COLOR = "rgb(90, 90, 90)"
KIND_COLORS = {
    "lost": "rgb(214, 39, 40)",
    "duplicated": "rgb(255, 127, 14)",
    "out_of_order": "rgb(31, 119, 180)",
    "redelivered": "rgb(44, 160, 44)",
    "poll_skip": "rgb(140, 86, 75)",
}
# One fact can be two kinds (a lost message is also poll-skipped): distinct shapes keep both
# visible where they overlap.
KIND_SYMBOLS = {
    "lost": "x",
    "duplicated": "circle",
    "out_of_order": "diamond",
    "redelivered": "square",
    "poll_skip": "circle-open",
}
# Events drawn as a labelled vertical line across every chart (the others are markers only).
LINE_EVENTS = {
    "bundle_unload_started": "unload",
    "topic_unloading": "unload",
    "bundle_ownership_lost": "ownership lost",
    "bundle_ownership_acquired": "ownership",
    "broker_lost": "broker lost",
    "bookie_lost": "bookie lost",
    "ledger_created": "ledger rolled",
}
LABEL_GAP = timedelta(milliseconds=500)
FEW_POINTS = 120


def _line_label(marker: dict[str, Any]) -> str | None:
    kind = marker["event_type"]
    if kind.startswith("chaos: "):
        return kind.removeprefix("chaos: ") + " (chaos)"
    return LINE_EVENTS.get(kind)


def _event_lines(fig: go.Figure, markers: list[dict[str, Any]]) -> None:
    """One vertical line per key event; one label per kind within LABEL_GAP."""
    last_label: dict[str, Any] = {}
    for marker in markers:
        label = _line_label(marker)
        if label is None:
            continue
        is_unload = "unload" in label
        color = UNLOAD_COLOR if is_unload else EVENT_LINE_COLOR
        fig.add_shape(
            type="line",
            xref="x",
            yref="paper",
            x0=marker["ts"],
            x1=marker["ts"],
            y0=0,
            y1=1,
            line={"color": color, "width": 3 if is_unload else 1, "dash": "solid"},
            name=label,
        )
        previous = last_label.get(label)
        if previous is not None and marker["ts"] - previous < LABEL_GAP:
            continue
        last_label[label] = marker["ts"]
        fig.add_annotation(
            x=marker["ts"],
            xref="x",
            y=1.0,
            yref="paper",
            yanchor="bottom",
            text=label,
            showarrow=False,
            yshift=14,
            font={"color": color, "size": 12},
            textangle=-30,
        )


def _outage_bands(fig: go.Figure, outages: list[dict[str, Any]]) -> None:
    for outage in outages:
        fig.add_shape(
            type="rect",
            xref="x",
            yref="paper",
            x0=outage["start"],
            x1=outage["end"],
            y0=0,
            y1=1,
            fillcolor=OUTAGE_COLOR,
            line={"width": 1, "color": OUTAGE_EDGE},
            layer="below",
            name=f"outage {outage['duration_ms']:.0f} ms",
        )


def time_axis_title() -> str:
    """The shared x axis: the report's times are the client clock's, in this process's zone
    (Spark hands timestamps to Python as local time)."""
    return f"time of day ({datetime.now().astimezone().tzname()}, client clock)"


def _slice_text(slice_ms: float) -> str:
    return f"{slice_ms / 1000:g} s" if slice_ms >= 1000 else f"{slice_ms:g} ms"


def _run_range(data: dict[str, Any]) -> list[datetime]:
    """The run's window and a little more: a chaos action's end a minute later (out of view,
    there on zooming out) does not squeeze the run into a corner."""
    window = data["window"]
    pad = max((window.end - window.start) * 0.02, timedelta(milliseconds=data["slice_ms"]))
    return [window.start - pad, window.end + pad]


def timeline_figure(data: dict[str, Any]) -> go.Figure:
    """Ack latency and send/ack rates over time, outage bands, infrastructure markers."""
    series, markers = data["series"], data["markers"]
    slices = _slice_text(data["slice_ms"])
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.42, 0.33, 0.25],
        vertical_spacing=0.06,
        subplot_titles=(
            f"ack latency (ms) by ack time, per {slices} slice",
            f"send and ack rate (messages/s) per {slices} slice",
            "infrastructure events (corrected clock) and chaos",
        ),
    )
    t = [p["t"] for p in series]
    for name, key, dash in (("p50", "p50_ms", "solid"), ("p99", "p99_ms", "dot"),
                            ("max", "max_ms", "dash")):  # fmt: skip
        fig.add_trace(
            go.Scatter(x=t, y=[p[key] for p in series], name=f"latency {name}",
                       mode="lines+markers", marker={"size": 4}, line={"dash": dash}),
            row=1, col=1,
        )  # fmt: skip
    # Dots too where a slice's point could be alone (a short run): a line of one point is unseen.
    rate_mode = "lines+markers" if len(series) <= FEW_POINTS else "lines"
    for name, key in (("send rate", "send_rate"), ("ack rate", "ack_rate")):
        fig.add_trace(
            go.Scatter(x=t, y=[p[key] for p in series], name=name, mode=rate_mode), row=2, col=1
        )
    fig.add_trace(
        go.Scatter(
            x=[m["ts"] for m in markers],
            y=[m["event_type"] for m in markers],
            mode="markers",
            name="infrastructure event",
            marker={"symbol": "diamond", "size": 9, "color": EVENT_LINE_COLOR},
            hovertext=[f"{m['source']} {m['host']}: {m['detail'] or ''}" for m in markers],
        ),
        row=3,
        col=1,
    )
    if not markers:
        fig.add_annotation(
            text="no infrastructure event or chaos action during the run",
            xref="x3 domain", yref="y3 domain", x=0.5, y=0.5, showarrow=False,
        )  # fmt: skip
        fig.update_yaxes(showticklabels=False, row=3, col=1)
    _outage_bands(fig, data["outages"])
    _event_lines(fig, markers)
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_yaxes(dtick=1, row=3, col=1)  # every event type named
    fig.update_layout(
        height=820,
        margin={"t": 110, "l": 200, "r": 30, "b": 70},
        legend={"orientation": "h", "y": -0.1},
        plot_bgcolor="white",
    )
    # Explicitly dates: with no infrastructure event the last axis has no data to guess from
    # and the matched axes would fall back to a unitless linear scale.
    fig.update_xaxes(
        type="date", range=_run_range(data), showgrid=True, gridcolor="rgb(235,235,235)"
    )
    fig.update_xaxes(title_text=time_axis_title(), row=3, col=1)
    fig.update_yaxes(showgrid=True, gridcolor="rgb(235,235,235)")
    return fig


def ledger_map_figure(cells: list[dict[str, Any]]) -> go.Figure:
    """Where lost, duplicated, reordered, redelivered and poll-skipped messages were stored."""
    fig = go.Figure()
    biggest = max([c["count"] for c in cells], default=1)
    for kind, color in KIND_COLORS.items():
        mine = [c for c in cells if c["kind"] == kind]
        if not mine:
            continue
        fig.add_trace(
            go.Scatter(
                x=[(c["entry_from"] + c["entry_to"]) / 2 for c in mine],
                y=[f"ledger {c['ledger_id']}" for c in mine],
                mode="markers",
                name=kind,
                marker={
                    "color": color,
                    "symbol": KIND_SYMBOLS[kind],
                    "size": [8 + 22 * (c["count"] / biggest) ** 0.5 for c in mine],
                    "opacity": 0.75,
                },
                hovertext=[
                    f"{kind}: {c['count']} at ledger {c['ledger_id']} entries "
                    f"{c['entry_from']}–{c['entry_to']}"
                    for c in mine
                ],
            )
        )
    if not cells:
        fig.add_annotation(
            text="no lost, duplicated, reordered, redelivered or poll-skipped message in this run",
            xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False, font={"size": 14},
        )  # fmt: skip
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    fig.update_layout(
        height=360,
        margin={"t": 30, "l": 200, "r": 30, "b": 50},
        xaxis_title="entry id",
        plot_bgcolor="white",
    )
    return fig
