"""The HTML report of the real unload run in examples/: self-contained, rendered in headless
Chromium with its outage band and unload marker, and not one request leaving the file."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from headless import CHROMIUM, RefusingProxy, run_chromium
from json_schema_check import validate
from PIL import Image
from serve_examples import SYNTHETIC_RUN, UNLOAD_RUN

from serve.report import write_report
from serve.report_figures import UNLOAD_COLOR

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
    exe = Path(sys.executable).parent / "pulsar-audit"
    done = subprocess.run(
        [str(exe), "report", UNLOAD_RUN, "--out", str(out), "--json",
         "--lakehouse", str(examples_lakehouse.config.lakehouse_path)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out, json.loads(done.stdout)


def test_the_report_is_one_self_contained_file(unload_report) -> None:
    out, summary = unload_report
    validate(summary, "report")
    assert summary["verdict"] is True
    assert summary["outages"] >= 1 and summary["markers"] >= 1
    assert 0 < summary["points"] <= 600
    page = out.read_text()
    links = _Links()
    links.feed(page)
    assert [u for u in links.urls if not u.startswith(("#", "data:"))] == []
    assert {"link", "img", "iframe"}.isdisjoint(links.tags)
    # Plotly's library is embedded (megabytes), not fetched.
    assert summary["bytes"] > 3_000_000 and "Plotly.newPlot" in page


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
    assert "no lost, duplicated, reordered or redelivered message" in rendered

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
    # 3 lost at their ack; 5 duplicated, each stored twice; 2 redelivered; 1 reordered.
    assert per_kind == {"lost": 3, "duplicated": 10, "redelivered": 2, "out_of_order": 1}
    assert {c["ledger_id"] for c in cells if c["kind"] == "duplicated"} == {10, 11}
