"""The report in a real browser: headless Chromium (Debian's chromium + chromium-driver) via Selenium.

Every page of a site built from the committed results loads with no console error and draws its
plots; hovering a point shows its value and interval, clicking it opens its privacy ledger; a legend
entry hides its method; the axis switch changes the scale; the page fits 1280 x 800 and a 400 px
window; the claims table and the index need no sideways scrolling and keep ids and verdicts on one
line; a log axis labels powers of ten (or full values), never a bare digit; axis titles fit.
Screenshots for a person to look at go to $DPBENCH_SCREENSHOTS when it is set. Without Chromium
the test is skipped with the command that installs it, except where DPBENCH_REQUIRE_BROWSER is set
(.ci/run installs Chromium and sets it, so in CI a missing browser is a failure, not a skip).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from dpbench.report import site as report
from dpbench.spec.experiment import load

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
INSTALL = "apt-get install chromium chromium-driver (Debian/Ubuntu), and pip install -e '.[test]' for selenium"
# small experiments keep the test at a few seconds: quickstart has DP-SGD (RDP and PLD in its ledgers),
# a non-private baseline and hyperparameter selection; audit has the 212 audits; my_algorithm a plugin
# dpsco the excess population risk, on a log axis over a log n axis
EXPERIMENTS = ("experiments/quickstart.yaml", "experiments/audit.yaml", "examples/my_algorithm/experiment.yaml",
               "experiments/dpsco.yaml")

try:
    import selenium  # noqa: F401
    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False

if not (CHROMIUM and CHROMEDRIVER and HAVE_SELENIUM):
    why = f"headless Chromium not available (chromium: {CHROMIUM}, chromedriver: {CHROMEDRIVER}, " \
          f"selenium: {HAVE_SELENIUM}); install it: {INSTALL}"
    if os.environ.get("DPBENCH_REQUIRE_BROWSER"):
        raise RuntimeError(f"{why} -- DPBENCH_REQUIRE_BROWSER is set (.ci/run installs Chromium and sets it)")
    pytest.skip(why, allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    report.build([load(ROOT / e) for e in EXPERIMENTS], results=ROOT / "results", out=out,
                 baseline=False)  # the majority line reads the data sets (tests/test_report.py checks it)
    return out


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,800"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _open(driver, path: Path, timeout: float = 60.0, width: int = 1280) -> None:
    driver.set_window_size(width, 800)
    driver.get(path.as_uri())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = driver.execute_script("return document.body && document.body.dataset.ready")
        if state:
            assert state == "1", f"{path.name}: a figure failed to draw"
            return
        time.sleep(0.05)
    raise AssertionError(f"{path.name}: not drawn within {timeout:g} s")


def _shot(driver, name: str) -> None:
    """A screenshot for a person to look at, into $DPBENCH_SCREENSHOTS when set (nothing asserts on it)."""
    folder = os.environ.get("DPBENCH_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))


def _errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _fits(driver) -> bool:
    return driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_every_page_loads_draws_and_fits(site, browser):
    pages = sorted(site.glob("*.html"))
    assert {p.name for p in pages} == {"index.html", "quickstart.html", "audit.html", "my_algorithm.html",
                                       "dpsco.html"}
    for page in pages:
        _open(browser, page)
        assert _errors(browser) == [], page.name
        if page.name == "index.html":
            links = browser.find_elements(By.CSS_SELECTOR, "a.experiment-link")
            assert len(links) == len(pages) - 1
            continue
        plots = browser.find_elements(By.CSS_SELECTOR, ".plot")
        assert plots, page.name
        for plot in plots:  # every panel drew an SVG with at least one line or marker path
            drawn = plot.find_elements(By.CSS_SELECTOR, "svg.main-svg .scatterlayer .trace path")
            assert drawn, f"{page.name}: panel {plot.get_attribute('data-panel')} of " \
                          f"{plot.get_attribute('data-figure')} is empty"
        assert _fits(browser), f"{page.name} overflows 1280 px"
        _shot(browser, f"{page.stem}-1280.png")
        browser.set_window_size(400, 800)
        time.sleep(0.3)
        assert _fits(browser), f"{page.name} overflows a 400 px window"
        _shot(browser, f"{page.stem}-400.png")
        assert _errors(browser) == [], page.name


def _point(driver, selector: str = ".plot .scatterlayer .trace .points path"):
    points = driver.find_elements(By.CSS_SELECTOR, selector)
    assert points
    return points


def test_hover_shows_the_point_and_click_opens_its_ledger(site, browser):
    _open(browser, site / "quickstart.html")
    first = browser.find_element(By.CSS_SELECTOR, ".plot")
    # a private curve's point: the last line drawn (on top, so the mouse reaches it), ε = 0.3
    traces = first.find_elements(By.CSS_SELECTOR, ".scatterlayer .trace")
    index = browser.execute_script(
        "var d = arguments[0], last = -1; d.data.forEach(function (t, i) {"
        " if (!t.meta && t.name && t.x.length === 5) last = i; }); return last;", first)
    assert index >= 0
    label = browser.execute_script("return arguments[0].data[arguments[1]].name.split(' — ')[0];", first, index)
    point = traces[index].find_elements(By.CSS_SELECTOR, ".points path")[2]
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", point)
    ActionChains(browser).move_to_element(point).perform()
    deadline = time.monotonic() + 5
    hover = ""
    while time.monotonic() < deadline and "95% CI" not in hover:
        hover = browser.execute_script("var h = document.querySelector('.hoverlayer .hovertext');"
                                       " return h ? h.textContent : '';")
        time.sleep(0.05)
    for part in (label, "ε = 0.3", "95% CI", "10 seeds", "hyperparameters", "selected by", "candidates",
                 "guarantee"):
        assert part in hover, (part, hover)
    _shot(browser, "quickstart-hover.png")
    ActionChains(browser).move_to_element(point).click().perform()
    ledger = browser.find_element(By.ID, "ledger")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not ledger.is_displayed():
        time.sleep(0.05)
    assert ledger.is_displayed()
    text = ledger.text
    assert browser.find_element(By.CSS_SELECTOR, "#ledger h2").text == label
    for field in ("ε = 0.3", "curve's guarantee", "candidates", "privacy ledger", "seeds 0", "mechanism",
                  "adjacency", "sensitivity", "ε spent (rdp)", "ε spent (pld)", "noise multiplier", "steps",
                  "sampling", "every ledger field"):
        assert field in text, (field, text[:2000])
    _shot(browser, "quickstart-ledger.png")
    browser.find_element(By.CSS_SELECTOR, "#ledger .close").click()
    assert not ledger.is_displayed()
    assert _errors(browser) == []


def test_legend_hides_a_method_and_axes_switch_scale(site, browser):
    _open(browser, site / "quickstart.html")
    figure = browser.find_element(By.CSS_SELECTOR, "section.figure")
    item = figure.find_element(By.CSS_SELECTOR, ".legend li")
    group = item.get_attribute("data-group")
    script = ("var n = 0, g = arguments[1]; arguments[0].querySelectorAll('.plot').forEach(function (d) {"
              " d.data.forEach(function (t) { if (t.legendgroup === g && t.visible !== false) n++; }); }); return n;")
    before = browser.execute_script(script, figure, group)
    assert before > 0
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", item)
    item.click()
    assert browser.execute_script(script, figure, group) == 0
    item.click()
    assert browser.execute_script(script, figure, group) == before
    button = figure.find_element(By.CSS_SELECTOR, ".scale[data-axis='y'] button[data-scale='log']")
    button.click()
    types = browser.execute_script("return Array.from(arguments[0].querySelectorAll('.plot'))"
                                   ".map(function (d) { return d.layout.yaxis.type; });", figure)
    assert types and set(types) == {"log"}
    for axis in browser.execute_script(LOG_TICKS):  # accuracy on a log axis: its labels say their values
        _check_log_labels(axis)
    figure.find_element(By.CSS_SELECTOR, ".scale[data-axis='y'] button[data-scale='linear']").click()
    assert browser.execute_script("return Array.from(arguments[0].querySelectorAll('.plot')).every("
                                  "function (d) { return d.layout.yaxis.type === 'linear' && !d.layout.yaxis.tickvals; });",
                                  figure)
    assert _errors(browser) == []


def test_audit_row_opens_its_fields(site, browser):
    _open(browser, site / "audit.html")
    row = browser.find_elements(By.CSS_SELECTOR, "table.audits tr[data-audit]")[3]
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", row)
    row.click()
    ledger = browser.find_element(By.ID, "ledger")
    assert ledger.is_displayed() and "epsilon_lower_bound" in ledger.text and "claimed_epsilon" in ledger.text


#: each drawn panel's plot area, title and modebar (client rectangles), and the claims table's widths
LAYOUT = """
var boxes = [];
document.querySelectorAll('.plot').forEach(function (d) {
  var r = function (s) { var e = d.querySelector(s); if (!e) return null; var b = e.getBoundingClientRect();
    return b.width && b.height ? {left: b.left, right: b.right, top: b.top, bottom: b.bottom} : null; };
  boxes.push({id: d.getAttribute('data-figure') + '/' + d.getAttribute('data-panel'),
              plot: r('.nsewdrag') || r('.bglayer rect') || r('svg.main-svg'), title: r('.gtitle'),
              modebar: r('.modebar'),
              points: Math.max.apply(null, Array.from(d.querySelectorAll('.scatterlayer .points path'))
                .map(function (p) { return p.getBoundingClientRect().right; }).concat([-1]))});
});
var t = document.querySelector('table.claims'), w = t && t.closest('.table-wrap');
return {width: document.documentElement.clientWidth, boxes: boxes,
        claims: w ? [w.scrollWidth, w.clientWidth] : (t ? [t.scrollWidth, t.clientWidth] : null)};
"""


def _overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


@pytest.mark.parametrize("width", [400, 1280])
def test_charts_fit_the_window_and_the_toolbar_leaves_the_titles(site, browser, width):
    """At 400 and 1280 px every panel's plot area lies inside the window (the last ε is not cut),
    plotly's toolbar never covers a panel's title, and the claims table needs no horizontal
    scrolling at 1280 px (its quote column wraps)."""
    for name in ("quickstart.html", "audit.html", "my_algorithm.html"):
        _open(browser, site / name, width=width)  # loaded at that width, not resized to it
        layout = browser.execute_script(LAYOUT)
        _shot(browser, f"{name}-{width}.png")
        assert layout["boxes"], name
        for box in layout["boxes"]:
            assert box["plot"], (name, box)
            assert box["plot"]["left"] >= -1 and box["plot"]["right"] <= layout["width"] + 1, (name, width, box)
            assert box["points"] <= min(box["plot"]["right"], layout["width"]) + 6, (name, width, box)  # the last x
            if box["modebar"] and box["title"]:
                assert not _overlap(box["modebar"], box["title"]), (name, width, box)
        if name == "quickstart.html":  # the legend draws the panels' markers: the non-private line's open square
            symbols = browser.execute_script(
                "return Array.from(document.querySelectorAll('.legend li')).map(function (li) {"
                " var p = li.querySelector('path[data-symbol]'); return [li.textContent, p && p.dataset.symbol]; });")
            assert ["nonprivate", "square-open"] in symbols, symbols
            assert any("drawn at the floor" in s and sym == "triangle-down-open" for s, sym in symbols), symbols
        if width == 1280 and layout["claims"]:
            scroll, client = layout["claims"]
            assert scroll <= client, f"{name}: the claims table scrolls sideways at 1280 px ({scroll} > {client})"


#: the claims tables' and the index's widths, and each id / verdict / experiment cell's lines
TABLES = """
var out = {doc: [document.documentElement.scrollWidth, document.documentElement.clientWidth], tables: [], cells: []};
document.querySelectorAll('table.claims, table.index').forEach(function (t) {
  var w = t.closest('.table-wrap') || t;
  out.tables.push([t.className, w.scrollWidth, w.clientWidth, document.documentElement.scrollWidth]);
});
document.querySelectorAll('table.claims td.col-id > div, table.claims td.col-verdict > div,'
                          + ' table.index td.col-experiment > div').forEach(function (c) {
  var tops = {}, walk = document.createTreeWalker(c, NodeFilter.SHOW_TEXT), node;
  while ((node = walk.nextNode())) {
    var range = document.createRange(); range.selectNodeContents(node);
    Array.from(range.getClientRects()).forEach(function (b) { if (b.width) tops[Math.round(b.top)] = 1; });
  }
  var style = getComputedStyle(c), line = parseFloat(style.lineHeight) || 1.2 * parseFloat(style.fontSize);
  out.cells.push([c.textContent, Object.keys(tops).length, c.getBoundingClientRect().height, line]);
});
return out;
"""


@pytest.mark.parametrize("width", [400, 1280])
def test_claims_and_index_fit_and_keep_words_whole(site, browser, width):
    """At 400 px (stacked: one card per row) and at 1280 px neither the claims tables nor the index
    scroll sideways, and every claim id, verdict and experiment name renders on one line (one line
    box, and no taller than 1.6 line heights): never "re/pr/od/uc/ed"."""
    for name in ("index.html", "audit.html", "quickstart.html", "dpsco.html"):
        _open(browser, site / name, width=width)
        found = browser.execute_script(TABLES)
        _shot(browser, f"tables-{name}-{width}.png")
        scroll, client = found["doc"]
        assert scroll <= client, f"{name} scrolls sideways at {width} px ({scroll} > {client})"
        assert found["tables"], name
        for css, scroll, client, _ in found["tables"]:
            assert scroll <= client, f"{name}: table.{css} scrolls sideways at {width} px ({scroll} > {client})"
        assert len(found["cells"]) >= 3, name
        for text, lines, height, line in found["cells"]:
            assert lines == 1 and height <= 1.6 * line, (name, width, text, lines, height, line)


#: every log axis drawn: its labelled ticks (log10 position, label) and whether its ticks are decades
LOG_TICKS = """
var out = [];
document.querySelectorAll('.plot').forEach(function (d) {
  ['x', 'y'].forEach(function (a) {
    var ax = d.layout[a + 'axis'];
    if (!ax || ax.type !== 'log') return;
    var labels = Array.from(d.querySelectorAll('.' + a + 'tick text')).map(function (t) {
      return [t.__data__.x, t.__data__.text]; }).filter(function (l) { return l[1] !== ''; });
    out.push({id: d.getAttribute('data-figure') + '/' + d.getAttribute('data-panel') + '/' + a, labels: labels,
              decades: ax.tickmode === 'array' && ax.tickvals.every(function (v) {
                return Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9; })});
  });
});
return out;
"""

#: each panel's axis titles, SVG and plot area (client rectangles: left, top, right, bottom)
TITLES = """
var out = [], box = function (e) { var b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
document.querySelectorAll('.plot').forEach(function (d) {
  ['x', 'y'].forEach(function (a) {
    var t = d.querySelector('.g-' + a + 'title');
    if (!t || !t.textContent) return;
    out.push({id: d.getAttribute('data-figure') + '/' + d.getAttribute('data-panel') + '/' + a, axis: a,
              text: t.textContent, title: box(t), svg: box(d.querySelector('svg.main-svg')),
              plot: box(d.querySelector('.nsewdrag'))});
  });
});
return out;
"""


def _label_value(text: str) -> float:
    """The number a tick label says: 0.01, 10<sup>−5</sup>, 2×10<sup>−5</sup> (charts.tick_label)."""
    text = text.replace("−", "-").replace("\u200b", "")
    found = re.fullmatch(r"(?:(\d)×)?10<sup>(-?\d+)</sup>", text)
    return float(found.group(1) or 1) * 10.0 ** int(found.group(2)) if found else float(text)


def _check_log_labels(axis: dict) -> None:
    """Every label of a log axis says the value at its position (not "2" at 0.02), and where its ticks
    are decades every label sits at a power of ten."""
    assert axis["labels"], axis
    for position, text in axis["labels"]:
        assert _label_value(text) == pytest.approx(10.0 ** position, rel=1e-6), (axis["id"], position, text)
        if axis["decades"]:
            assert abs(position - round(position)) < 1e-9, (axis["id"], position, text)


@pytest.mark.parametrize("width", [400, 1280])
def test_log_axes_label_powers_of_ten_and_titles_fit(site, browser, width):
    """On every log axis (quickstart's optimality gap and ε, dpsco's risk over n) the labelled ticks
    are powers of ten, or full values where a panel spans less than two decades, never a bare digit;
    every axis title lies inside its SVG and takes at most 85 % of its side of the plot area (room
    for a wider font than this machine's: the review saw "imality gap L(θ; D_train) − L*")."""
    decades = 0
    for name in ("quickstart.html", "dpsco.html", "audit.html", "my_algorithm.html"):
        _open(browser, site / name, width=width)
        _shot(browser, f"axes-{name}-{width}.png")
        for axis in browser.execute_script(LOG_TICKS):
            _check_log_labels(axis)
            decades += axis["decades"]
        for t in browser.execute_script(TITLES):
            (left, top, right, bottom), svg, plot = t["title"], t["svg"], t["plot"]
            assert left >= svg[0] - 1 and top >= svg[1] - 1 and right <= svg[2] + 1 and bottom <= svg[3] + 1, (name, t)
            side = (plot[3] - plot[1], bottom - top) if t["axis"] == "y" else (plot[2] - plot[0], right - left)
            assert side[1] <= 0.85 * side[0], (name, width, t)
    assert decades >= 4, decades  # quickstart's gap and ε axes, dpsco's n and risk
