"""What a report page shows once Chromium has drawn it: read from the page itself by a probe
script appended to a copy of the page, then dumped with the DOM (no pixel comparisons)."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from typing import Any

from headless import RefusingProxy, run_chromium
from in_process_cli import cli_in_process
from pyspark.sql import SparkSession

# A page without `reportRendered` (Plotly inline, drawn at parse time) is read after its load.
PROBE = """<script>
const drawn = window.reportRendered
  || new Promise((done) => window.addEventListener("load", () => setTimeout(done, 500)));
drawn.then(() => {
  const seen = {viewport: document.documentElement.clientWidth,
                page_width: document.documentElement.scrollWidth};
  const summary = document.getElementById("summary");
  seen.summary_right = summary ? summary.getBoundingClientRect().right : null;
  seen.summary_text = summary ? summary.textContent : "";
  for (const id of ["chart-timeline", "chart-ledger-map"]) {
    const gd = document.getElementById(id);
    const layers = gd.querySelectorAll(".scatterlayer .trace");
    seen[id] = {
      x_type: gd._fullLayout.xaxis.type,
      x_title: [...gd.querySelectorAll(".g-x3title, .g-xtitle")].map((t) => t.textContent),
      x_ticks: [...gd.querySelectorAll(".xaxislayer-above .xtick text, .x3tick text")]
        .map((t) => t.textContent),
      subplot_titles: [...gd.querySelectorAll(".annotation-text")].map((t) => t.textContent),
      traces: gd.data.map((t, i) => ({
        name: t.name,
        points: (t.x || []).length,
        values: (t.y || []).filter((v) => v !== null && v !== undefined).length,
        drawn: layers[i] ? layers[i].querySelectorAll("path.point").length : 0,
        line: layers[i] && layers[i].querySelector("path.js-line")
          ? (layers[i].querySelector("path.js-line").getAttribute("d") || "").length : 0,
        max: Math.max(...(t.y || []).filter((v) => typeof v === "number"), 0),
      })),
    };
  }
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
});
</script>"""


def cli_report(spark: SparkSession, lakehouse: Path, run_id: str, out: Path) -> tuple[Path, dict]:
    """`pulsar-audit report RUN --out OUT --json`, through the CLI's entry point (in this
    process, on the tests' Spark session)."""
    argv = ("report", run_id, "--out", str(out), "--json", "--lakehouse", str(lakehouse))
    code, printed, err = cli_in_process(spark, *argv)
    assert code == 0, err[-3000:]
    return out, json.loads(printed)


FOUND = re.compile(r'<pre id="probe">(.*?)</pre>', re.S)


def probe(page: Path, work: Path, width: int = 1024) -> dict[str, Any]:
    """Open a probed copy of `page` at `width` pixels; what it drew (raises if it drew nothing)."""
    probed = work / f"probed-{page.name}"
    shutil.copyfile(page, probed)
    text = probed.read_text()
    probed.write_text(text.replace("</body>", PROBE + "</body>"))
    proxy = RefusingProxy()
    try:
        done = run_chromium(
            probed, work / f"profile-{page.stem}", proxy, "--virtual-time-budget=20000",
            f"--window-size={width},900", "--dump-dom",
        )  # fmt: skip
    finally:
        proxy.close()
    found = FOUND.search(done.stdout)
    assert found, f"the page drew no charts: {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def screenshot(page: Path, work: Path, width: int = 1400, height: int = 2200) -> Path:
    """A full-length screenshot of `page`."""
    shot = work / f"{page.stem}.png"
    proxy = RefusingProxy()
    try:
        done = run_chromium(
            page, work / f"profile-shot-{page.stem}", proxy, "--virtual-time-budget=20000",
            f"--window-size={width},{height}", f"--screenshot={shot}",
        )  # fmt: skip
    finally:
        proxy.close()
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    return shot
