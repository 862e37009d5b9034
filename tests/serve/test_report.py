"""The HTML reports of the runs in examples/: self-contained and under 1 MB, rendered in headless
Chromium with their outage bands, unload marker, dated time axis, latency points, poll skips and a
summary table within the page, and not one request leaving the file."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from headless import CHROMIUM, RefusingProxy, run_chromium
from json_schema_check import validate
from PIL import Image
from report_probe import cli_report, probe
from serve_examples import SYNTHETIC_RUN, UNLOAD_RUN

from serve.report import write_report
from serve.report_data import MIN_SENDS_PER_SLICE
from serve.report_figures import UNLOAD_COLOR
from serve.report_plotly import bundle_version

URL_ATTRIBUTES = {"src", "href", "action", "data", "poster", "srcset", "formaction"}
# rgba(214, 39, 40, 0.28) over white, as the screenshot shows an outage band.
BAND_RGB = (243, 195, 195)
OUTAGE_BAND_STYLE = "fill: rgb(214, 39, 40); fill-opacity: 0.28"
VIOLET_RGB = tuple(int(v) for v in UNLOAD_COLOR.removeprefix("rgb(").rstrip(")").split(","))
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Debian's chromium is not installed (scripts/setup.sh installs it when run as root "
    "with apt-get)",
)


class _Links(HTMLParser):
    """Every URL-valued attribute and every <script>/<link>/<img>/<iframe> tag of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.urls += [v for k, v in attrs if k in URL_ATTRIBUTES and v]


def _pixels_near(image: Image.Image, rgb: tuple[int, ...], tolerance: int = 8) -> int:
    colors = image.convert("RGB").getcolors(maxcolors=1 << 24) or []
    return sum(
        n for n, c in colors if all(abs(a - b) <= tolerance for a, b in zip(c, rgb, strict=True))
    )


@pytest.fixture(scope="module")
def unload_report(examples_lakehouse, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """`pulsar-audit report` of the unload run, through the command line."""
    out = tmp_path_factory.mktemp("report") / "unload.html"
    lakehouse = examples_lakehouse.config.lakehouse_path
    return cli_report(examples_lakehouse.spark, lakehouse, UNLOAD_RUN, out)


@pytest.fixture(scope="module")
def synthetic_report(examples_lakehouse, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """`pulsar-audit report` of the synthetic run (no infrastructure events at all)."""
    out = tmp_path_factory.mktemp("report") / "synthetic.html"
    lakehouse = examples_lakehouse.config.lakehouse_path
    return cli_report(examples_lakehouse.spark, lakehouse, SYNTHETIC_RUN, out)


def assert_self_contained(out: Path, summary: dict) -> None:
    """One file under 1 MB that names no other resource, Plotly embedded in it."""
    validate(summary, "report")
    page = out.read_text()
    links = _Links()
    links.feed(page)
    assert [u for u in links.urls if not u.startswith(("#", "data:"))] == []
    assert {"link", "img", "iframe"}.isdisjoint(links.tags)
    # Plotly's basic bundle is embedded compressed (~0.53 MB), not fetched.
    assert 500_000 < summary["bytes"] < 1_000_000
    assert 'id="plotly-bundle"' in page and "Plotly.newPlot" in page


def test_the_report_is_one_self_contained_file_under_a_megabyte(unload_report) -> None:
    out, summary = unload_report
    assert_self_contained(out, summary)
    assert summary["verdict"] is True
    assert summary["outages"] >= 1 and summary["markers"] >= 1
    # 4000 sends in 1.18 s: 20 ms slices, not 600 slices of 2 ms (a batch each).
    assert summary["slice_ms"] == 20 and summary["points"] == 59


def test_the_embedded_bundle_is_the_plotly_js_the_python_package_draws_for() -> None:
    import plotly

    shipped = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert f"plotly.js v{bundle_version()}" in shipped.read_text()[:200]


def _hosts_asked(page: Path, profile: Path) -> set[str]:
    proxy = RefusingProxy()
    try:
        done = run_chromium(page, profile, proxy, "--virtual-time-budget=10000", "--dump-dom")
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        proxy.close()
    return proxy.hosts()


@needs_chromium
def test_opening_the_report_asks_no_host_a_blank_page_does_not(
    unload_report, tmp_path: Path
) -> None:
    out, _ = unload_report
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body>blank</body></html>")
    leaky = tmp_path / "leaky.html"
    leaky.write_text('<!DOCTYPE html><html><body><img src="http://report-leak.invalid/x.png">')
    browser_own = _hosts_asked(blank, tmp_path / "p1")
    # The proxy does see what a page asks for ...
    assert "report-leak.invalid" in _hosts_asked(leaky, tmp_path / "p2") - browser_own
    # ... and the report asks for nothing beyond the browser's own calls.
    assert _hosts_asked(out, tmp_path / "p3") - browser_own == set()


@needs_chromium
def test_chromium_renders_both_charts_with_the_outage_bands_and_the_unload_marker(
    unload_report, tmp_path: Path
) -> None:
    out, summary = unload_report
    proxy = RefusingProxy()
    try:
        dom = run_chromium(
            out, tmp_path / "profile-dom", proxy, "--virtual-time-budget=20000", "--dump-dom"
        )
        shot = tmp_path / "report.png"
        taken = run_chromium(
            out,
            tmp_path / "profile-shot",
            proxy,
            "--virtual-time-budget=20000",
            "--window-size=1400,1500",
            f"--screenshot={shot}",
        )
    finally:
        proxy.close()
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]

    rendered = dom.stdout
    for chart in ("chart-timeline", "chart-ledger-map"):
        start = rendered.index(f'id="{chart}"')
        assert "main-svg" in rendered[start : start + 5000], f"{chart} has no plot drawn"
    # Every outage is a drawn band; the chaos unload is a labelled line.
    assert rendered.count(OUTAGE_BAND_STYLE) == summary["outages"]
    assert "unload (chaos)" in rendered
    assert "no lost, duplicated, reordered, redelivered or poll-skipped message" in rendered

    image = Image.open(shot)
    assert len(image.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 100  # not blank
    assert _pixels_near(image, BAND_RGB) > 2000  # the outage bands, through every chart
    assert _pixels_near(image, VIOLET_RGB, tolerance=30) > 300  # the unload lines


def test_the_ledger_map_of_the_synthetic_run_places_every_anomalous_copy(
    examples_lakehouse, tmp_path: Path
) -> None:
    summary = write_report(examples_lakehouse.read, SYNTHETIC_RUN, tmp_path / "synthetic.html")
    assert summary["verdict"] == "false"
    from serve.report_data import ledger_map

    cells = ledger_map(
        examples_lakehouse.read("anomalies"),
        examples_lakehouse.read("message_history"),
        SYNTHETIC_RUN,
    )
    per_kind: dict[str, int] = {}
    for cell in cells:
        per_kind[cell["kind"]] = per_kind.get(cell["kind"], 0) + cell["count"]
    # 3 lost at their ack; 5 duplicated, each stored twice; 2 redelivered; 1 reordered; the
    # consumer's MessageIds jumped over 4 stored messages (seq 50-52 and 200).
    assert per_kind == {
        "lost": 3, "duplicated": 10, "redelivered": 2, "out_of_order": 1, "poll_skip": 4,
    }  # fmt: skip
    assert {c["ledger_id"] for c in cells if c["kind"] == "duplicated"} == {10, 11}


def test_the_synthetic_report_is_small_and_sliced_to_its_300_sends(synthetic_report) -> None:
    out, summary = synthetic_report
    assert_self_contained(out, summary)
    assert summary["markers"] == 0 and summary["verdict"] is False
    # 300 sends over 3 s: 100 ms slices, 10 sends in each.
    assert summary["slice_ms"] == 100 and summary["points"] == 30
    assert 300 / summary["points"] >= MIN_SENDS_PER_SLICE


@needs_chromium
def test_a_run_without_infrastructure_events_has_a_time_axis_latency_and_poll_skips(
    synthetic_report, tmp_path: Path
) -> None:
    out, summary = synthetic_report
    seen = probe(out, tmp_path, width=1024)
    timeline = seen["chart-timeline"]
    # A time axis with its unit, not a unitless -1 .. 6.
    assert timeline["x_type"] == "date"
    assert timeline["x_title"][-1].startswith("time of day (")
    assert timeline["x_ticks"] and all(":" in tick for tick in timeline["x_ticks"])
    assert "no infrastructure event or chaos action during the run" in timeline["subplot_titles"]
    traces = {t["name"]: t for t in timeline["traces"]}
    # Latency is drawn at each slice with acks: 27 of 30 (none completed in the outage).
    for name in ("latency p50", "latency p99", "latency max"):
        latency = traces[name]
        assert latency["points"] == summary["points"] and latency["values"] == 27
        assert latency["drawn"] == 27 and latency["line"] > 0
    assert traces["send rate"]["max"] == 100  # 1 send every 10 ms, at 100 ms slices
    ledger = {t["name"]: t["points"] for t in seen["chart-ledger-map"]["traces"]}
    assert ledger == {"lost": 3, "duplicated": 10, "out_of_order": 1, "redelivered": 2,
                      "poll_skip": 4}  # fmt: skip
    # The summary table, its reasons included, fits a 1024-pixel window.
    assert seen["page_width"] <= seen["viewport"] == 1024
    assert seen["summary_right"] <= seen["viewport"]
    assert "reasons: lost=3; out_of_order=1; poll_skip=4" in seen["summary_text"]
