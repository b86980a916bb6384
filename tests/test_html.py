"""The HTML report (reports/html.py) built from real H200 run folders: self-contained, the
numbers formatted as in the terminal table, one plot per chart; then rendered by headless
Chromium (marker `browser`, skipped without /usr/bin/chromium: scripts/install-chromium.sh),
which must build the same DOM, log no console error, request nothing from the network, and
leave a screenshot in test-artifacts/html-report.png."""

from __future__ import annotations

import json
import re
import struct
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from orchestrator import load_run
from orchestrator.proc import run as run_tool
from reports.html import render_html, table_html, write_html

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_TIMEOUT_S = 20
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (scripts/install-chromium.sh)"
)

PLOTS = ["time_median_us", "pct_of_peak_bw", "time_median_us", "pct_of_peak_bw", "sweep_time", "sweep_gb_s"]
# anything that would make a browser fetch: an attribute or CSS url() naming http(s) or a
# scheme-relative //host, or a CSS @import
NETWORK_REF = re.compile(
    r"""\b(?:src|srcset|href|xlink:href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//"""
    r"""|url\(\s*["']?\s*(?:https?:)?//|@import""",
    re.I,
)
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Dom(HTMLParser):
    """The elements of a page, its tables as rows of cell text, the text in each SVG, and any
    end tag that does not close the element open at that point."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.tables: list[list[list[str]]] = []
        self.svg_text: list[list[str]] = []
        self.mismatched: list[str] = []
        self._open: list[str] = []
        self._cell: list[str] | None = None
        self._in_svg_text = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        self.elements.append((tag, a))
        if tag not in VOID:
            self._open.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "svg":
            self.svg_text.append([])
        elif tag == "text":
            self._in_svg_text = True
            self.svg_text[-1].append("")

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self._open or self._open[-1] != tag:
            self.mismatched.append(f"</{tag}> closes <{self._open[-1] if self._open else ''}>")
        else:
            self._open.pop()
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "text":
            self._in_svg_text = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._in_svg_text:
            self.svg_text[-1][-1] += data

    def having(self, cls: str) -> list[tuple[str, dict[str, str]]]:
        return [(t, a) for t, a in self.elements if cls in a.get("class", "").split()]

    def count(self, tag: str) -> int:
        return sum(t == tag for t, _ in self.elements)

    def table(self, i: int) -> dict[str, dict[str, str]]:
        """Table i as {first cell of a row: {header: cell}}."""
        header, *rows = self.tables[i]
        return {r[0]: dict(zip(header, r)) for r in rows}


def sweep_frame() -> pd.DataFrame:
    """A small size sweep: launch latency plus bytes over a bandwidth, as an H200 measures."""
    rows = []
    for variant, gb_s, latency_us in [("torch_square", 4150.0, 4.5), ("triton", 4200.0, 6.0)]:
        for dtype, size in [("float32", 4), ("bfloat16", 2)]:
            for numel in [10**k for k in range(4, 9)]:
                nbytes = 2 * size * numel
                t = latency_us + nbytes / gb_s / 1e3
                rows.append(
                    {
                        "variant": variant,
                        "numel": numel,
                        "dtype": dtype,
                        "time_median_us": t,
                        "achieved_gb_s": nbytes / t / 1e3,
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture
def runs(h200_run):
    return {name: load_run(h200_run(name)) for name in ("time-square", "ncu-square")}


@pytest.fixture
def page(runs) -> str:
    time_run = runs["time-square"]
    return render_html(
        "square on the H200: time & ncu",
        [(n, r.table) for n, r in runs.items()],
        sweep=sweep_frame(),
        meta={"gpu": "NVIDIA H200", "workload": "square", "iters": 100},
        notes=time_run.footer(),
    )


def test_the_page_loads_nothing_from_the_network(page):
    assert NETWORK_REF.search(page) is None
    assert "http://" not in page and "https://" not in page
    dom = Dom(page)
    assert not [t for t, _ in dom.elements if t in ("script", "link", "img", "iframe", "object", "embed")]
    assert all(a["href"].startswith("#") for t, a in dom.elements if "href" in a)
    assert "@font-face" not in page


def test_the_page_is_well_formed(page):
    dom = Dom(page)
    assert page.startswith("<!DOCTYPE html>")
    assert dom.mismatched == []
    assert dom.count("html") == dom.count("head") == dom.count("body") == 1


def test_tables_hold_the_runs_numbers_formatted(page):
    dom = Dom(page)
    assert len(dom.having("gprof-table")) == 3  # two runs and the sweep's times by size
    t = dom.table(0)  # time-square
    assert list(t) == ["torch_square", "mul", "pow", "triton", "numba"]
    row = t["torch_square"]
    assert (row["median us"], row["IQR us"], row["GB/s"], row["% peak BW"], row["speedup"]) == (
        "193.15",
        "0.69",
        "4142",
        "86.3",
        "1.00x",
    )
    assert row["status"] == "ok" and row["note"] == "-"  # an empty note shows as "-"
    assert t["numba"]["speedup"] == "0.75x"
    assert t["numba"]["note"] == "high spread: IQR is 34% of the median"
    assert "kernels" not in row  # time's table has no kernel names: the empty column is left out
    n = dom.table(1)  # ncu-square
    assert n["torch_square"]["median us"] == "187.07"
    # time-weighted over numba's launches (46.59), not their median (46.7)
    assert n["numba"]["SM % peak"] == "46.6" and n["triton"]["regs"] == "24"
    assert n["mul"]["kernels"] == "vectorized_elementwise_kernel<MulFunctor>"
    assert n["pow"]["same kernel as"] == "torch_square" and n["mul"]["same kernel as"] == "-"
    assert n["numba"]["bound"] == "memory"
    sweep = dom.table(2)
    assert sweep["10000"]["torch_square us"] == "4.5"
    # the page says what the time table said
    assert "warning: numba: IQR is 34% of the median" in page


def test_one_plot_per_chart_each_an_svg_image_with_a_label(page):
    dom = Dom(page)
    plots = dom.having("gprof-plot")
    assert [a["data-plot"] for _, a in plots] == PLOTS
    svgs = [a for t, a in dom.elements if t == "svg"]
    assert len(svgs) == len(PLOTS)
    assert all(a.get("role") == "img" and len(a.get("aria-label", "")) > 20 for a in svgs)
    ids = [a["id"] for _, a in dom.elements if "id" in a]
    assert len(ids) == len(set(ids))  # each chart's ids carry its own prefix
    # bars: one per variant in each bar chart (5 variants, 2 charts, 2 runs), none shared
    for section in ("section-1", "section-2"):
        for chart in ("time", "peak-bw"):
            assert sorted(i for i in ids if i.startswith(f"{section}-{chart}-bar-")) == [
                f"{section}-{chart}-bar-{k}" for k in range(5)
            ]
    for chart in ("time", "gb-s"):  # a line for each of 2 variants x 2 dtypes, in each sweep plot
        assert sorted(i for i in ids if i.startswith(f"sweep-{chart}-series-")) == [
            f"sweep-{chart}-series-{k}" for k in range(4)
        ]
    time_labels = dom.svg_text[0]
    assert {"torch_square", "mul", "pow", "triton", "numba", "193.2 us"} <= set(time_labels)
    assert "median time (us); whisker: IQR, centred on the median" in time_labels  # the axis title
    assert "86.3%" in dom.svg_text[1] and "peak" in dom.svg_text[1]  # torch_square's bar and the 100% line
    assert "% of peak DRAM bandwidth (dashed line: 100%)" in dom.svg_text[1]
    sweep = dom.svg_text[4]
    assert {"1e4", "1e5", "1e6", "1e7", "1e8", "size (elements) (log)", "median time (us) (log)"} <= set(
        sweep
    )
    assert {
        "torch_square (float32)",
        "torch_square (bfloat16)",
        "triton (float32)",
        "triton (bfloat16)",
    } <= set(sweep)
    assert "GB/s" in dom.svg_text[5]


def test_text_is_escaped():
    table = pd.DataFrame(
        {
            "variant": ["<img src=x onerror=alert(1)>", "b&c"],
            "status": ["ok", "failed"],
            "time_median_us": [1.0, np.nan],
            "note": ['say "hi"', "boom </table>"],
        }
    )
    page = render_html(
        '<script>alert("t")</script>', [("<b>bold</b>", table)], meta={"<k>": "<v>"}, notes=["<i>note</i>"]
    )
    dom = Dom(page)
    assert dom.mismatched == []
    assert not [t for t, _ in dom.elements if t in ("script", "img", "b", "i", "k", "v")]
    assert "&lt;script&gt;alert(&quot;t&quot;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "b&amp;c" in page
    assert dom.table(0)["b&c"]["note"] == "boom </table>"
    # the failed variant has no bar: its row says so
    assert "failed" in dom.svg_text[0]
    assert [a["id"] for _, a in dom.elements if "-bar-" in a.get("id", "")] == ["section-1-time-bar-0"]
    assert "<img src=x onerror=alert(1)>" in dom.svg_text[0]  # the variant's name, as text


def test_a_merged_table_shows_every_column():
    merged = pd.DataFrame(
        {
            "variant": ["torch_square", "triton", "torch_square"],
            "backend": ["time", "time", "nsys"],
            "time_median_us": [193.152, 193.088, 190.5],
            "time_median_us_ncu": [187.072, 186.816, np.nan],
            "launches": [1, 1, 2],
            "ratio": [1.0, 0.99967, 0.98631],
            "big": [4141.8, 12345.6, np.nan],
            "tag": ["a", "", None],
            "count": pd.array([3, None, 5], dtype="Int64"),
            "speedup_vs_baseline": [1.0, 1.2, "n/a"],
        }
    )
    dom = Dom(table_html(merged))
    header, *rows = dom.tables[0]
    assert header == [
        "variant",
        "backend",
        "median us",
        "median us [ncu]",
        "launches",
        "ratio",
        "big",
        "tag",
        "count",
        "speedup",
    ]
    assert rows[0] == ["torch_square", "time", "193.15", "187.07", "1", "1.000", "4142", "a", "3", "1.00x"]
    assert rows[1][-2:] == ["-", "1.20x"]
    assert rows[2] == ["torch_square", "nsys", "190.50", "-", "2", "0.986", "-", "-", "5", "n/a"]
    assert [a["class"] for t, a in dom.elements if t == "td" and "faster" in a["class"]] == ["num faster"]
    page = Dom(render_html("merged", [("merged", merged)]))
    assert [a["data-plot"] for _, a in page.having("gprof-plot")] == ["time_median_us"]
    # repeated variants are told apart by their backend in the plot
    assert {"torch_square [time]", "torch_square [nsys]"} <= set(page.svg_text[0])


def test_an_empty_section_and_a_bad_sweep():
    page = render_html("empty", [("nothing", pd.DataFrame(columns=["variant", "time_median_us"]))])
    assert "no variants" in page and Dom(page).having("gprof-plot") == []
    with pytest.raises(ValueError, match="numel"):
        render_html("bad", [], sweep=pd.DataFrame({"variant": ["a"], "time_median_us": [1.0]}))


def test_write_html(tmp_path, runs):
    path = write_html(tmp_path / "deep" / "report.html", "t", [("time", runs["time-square"].table)])
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


# ---------------------------------------------------------------------------------------------
# in a browser


def chromium(tmp_path: Path, *args: str, name: str) -> tuple[str, str, list[str]]:
    """Run headless Chromium (process group, timeout) and return its stdout, its stderr and the
    http(s) URLs the page itself asked for, read from Chromium's network log."""
    netlog = tmp_path / f"{name}.netlog.json"
    argv = [
        str(CHROMIUM),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={tmp_path / f'{name}-profile'}",
        "--enable-logging=stderr",
        "--v=0",
        f"--log-net-log={netlog}",
        *args,
    ]
    result = run_tool(argv, log_dir=tmp_path / "logs", name=name, timeout=CHROMIUM_TIMEOUT_S)
    out, err = result.stdout.read_text(errors="replace"), result.stderr.read_text(errors="replace")
    assert result.returncode == 0, err[-3000:]
    return out, err, page_requests(netlog)


def page_requests(netlog: Path) -> list[str]:
    """URLs of network requests made on behalf of a file:// page. Chromium's own background
    requests (updates, time, accounts) have no file:// isolation key and are not counted."""
    log = json.loads(netlog.read_text())
    return sorted(
        {
            e["params"]["url"]
            for e in log["events"]
            if isinstance(e.get("params"), dict)
            and str(e["params"].get("url", "")).startswith(("http", "ws"))
            and "file://"
            in str(e["params"].get("network_isolation_key", ""))
            + str(e["params"].get("site_for_cookies", ""))
        }
    )


def console_problems(stderr: str) -> list[str]:
    """Lines where the page's console spoke: the page has no script, so any message is a fault."""
    return [
        line
        for line in stderr.splitlines()
        if ":CONSOLE" in line or "Uncaught" in line or "SyntaxError" in line
    ]


@pytest.mark.browser
@needs_chromium
def test_the_browser_checks_catch_a_bad_page(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><body><img src="https://example.invalid/canary.png">'
        '<script>console.error("canary-console")</script><script>throw new Error("canary-uncaught")'
        "</script><script>var = ;</script></body></html>"
    )
    _, err, requested = chromium(tmp_path, "--dump-dom", bad.as_uri(), name="canary")
    problems = "\n".join(console_problems(err))
    assert "canary-console" in problems and "Uncaught Error: canary-uncaught" in problems
    assert "SyntaxError" in problems
    assert requested == ["https://example.invalid/canary.png"]


@pytest.mark.browser
@needs_chromium
def test_chromium_renders_the_page(tmp_path, page):
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "html-report.html"
    path.write_text(page, encoding="utf-8")
    dom_text, err, requested = chromium(tmp_path, "--dump-dom", path.as_uri(), name="dump-dom")
    assert console_problems(err) == []
    assert requested == []
    source, dom = Dom(page), Dom(dom_text)
    # the browser's parser kept every element where the markup put it
    for tag in ("svg", "table", "tr", "td", "g", "path", "use", "text", "figure"):
        assert dom.count(tag) == source.count(tag), tag
    assert [a["data-plot"] for _, a in dom.having("gprof-plot")] == PLOTS
    assert len(dom.having("gprof-table")) == 3
    assert dom.tables == source.tables
    assert all(a.get("role") == "img" and a.get("aria-label") for t, a in dom.elements if t == "svg")

    shot = ARTIFACTS / "html-report.png"
    shot.unlink(missing_ok=True)
    _, err, requested = chromium(
        tmp_path,
        "--hide-scrollbars",
        "--window-size=1600,2300",
        f"--screenshot={shot}",
        path.as_uri(),
        name="screenshot",
    )
    assert console_problems(err) == [] and requested == []
    width, height, distinct = png_summary(shot)
    assert (width, height) == (1600, 2300)
    assert distinct > 50  # not a blank page: text, bars and lines in several colours


def png_summary(path: Path) -> tuple[int, int, int]:
    """Width, height and the number of distinct byte values in the decoded image data."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))
