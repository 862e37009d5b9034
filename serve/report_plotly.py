"""Plotly in the report page without asking any host, in a fraction of the full bundle's size.

The page carries plotly.js' "basic" bundle (scatter, bar and pie: all the report draws; MIT
licence, serve/vendor/LICENSE.plotly.js), of the plotly.js version that the Python plotly
package ships, gzip-compressed and base64-encoded: 0.53 MB where the full bundle is 4.8 MB.
The browser unpacks it with DecompressionStream, then draws each chart. `window.reportRendered`
settles once every chart is drawn. Update: `npm pack plotly.js-basic-dist-min@VERSION`, then
gzip its plotly-basic.min.js into serve/vendor/plotly-basic.min.js.gz.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

BUNDLE = Path(__file__).parent / "vendor" / "plotly-basic.min.js.gz"
LOADER = """<script>
window.plotlyReady = (async () => {
  const packed = document.getElementById("plotly-bundle").textContent.trim();
  const bytes = Uint8Array.from(atob(packed), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  const script = document.createElement("script");
  script.textContent = await new Response(stream).text();
  document.head.appendChild(script);
  return window.Plotly;
})();
window.reportCharts = [];
</script>"""
DONE = "<script>window.reportRendered = Promise.all(window.reportCharts);</script>"


@lru_cache(maxsize=1)
def bundle_version() -> str:
    """The plotly.js version of the embedded bundle, from its header."""
    head = gzip.decompress(BUNDLE.read_bytes())[:200].decode()
    found = re.search(r"v(\d+\.\d+\.\d+)", head)
    return found.group(1) if found else "unknown"


@lru_cache(maxsize=1)
def plotly_loader() -> str:
    """The compressed bundle and the script that unpacks it: once, before the first chart."""
    packed = base64.b64encode(BUNDLE.read_bytes()).decode("ascii")
    return f'<script type="application/octet-stream" id="plotly-bundle">{packed}</script>\n{LOADER}'


def chart(fig: go.Figure, div_id: str, config: dict[str, Any]) -> str:
    """A div and the script that draws `fig` in it once Plotly is unpacked."""
    # "</" would end the script element early; "<\\/" is the same JSON string.
    spec = fig.to_json().replace("</", "<\\/")
    return (
        f'<div id="{html.escape(div_id)}" class="chart"></div>\n<script>\n'
        f"window.reportCharts.push(window.plotlyReady.then((Plotly) => {{\n"
        f"  const fig = {spec};\n"
        f'  return Plotly.newPlot("{html.escape(div_id)}", fig.data, fig.layout, '
        f"{json.dumps(config)});\n}}));\n</script>"
    )
