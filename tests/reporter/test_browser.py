"""Every page of a built site in headless Chromium: no console error, no request off the machine,
and every plot rendered. Skipped (with the reason) only where Playwright or Chromium is missing."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from reports import site

CHROMIUM = os.environ.get("DDPBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# Plots each golden page must at least render: a regression that drops a figure fails here.
MINIMUM_PLOTS = {"index.html": 0, "cpu_run.html": 9, "bucket_sweep.html": 10, "failures.html": 8, "gpu_memory.html": 9}
RENDERED = "[...document.querySelectorAll('.plotly-graph-div')].filter(d => d.querySelector('.main-svg')).length"

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install playwright")
if not Path(CHROMIUM).is_file():
    pytest.skip(
        f"no chromium at {CHROMIUM}: apt-get install chromium to run the browser tests", allow_module_level=True
    )


@dataclasses.dataclass
class Tab:
    """One browser tab that records console errors and blocks (and records) every non-file request."""

    page: object
    errors: list[str] = dataclasses.field(default_factory=list)
    outside: list[str] = dataclasses.field(default_factory=list)

    def route(self, route) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def visit(self, path: Path) -> tuple[int, int]:
        """Open a page and wait for its plots; return (plot divs, rendered plots)."""
        self.errors.clear()
        self.outside.clear()
        self.page.goto(path.as_uri(), wait_until="load")
        divs = self.page.locator(".plotly-graph-div").count()
        if divs:
            self.page.wait_for_function(f"() => {RENDERED} >= {divs}", timeout=30_000)
        return divs, self.page.evaluate(f"() => {RENDERED}")

    def links(self) -> list[tuple[str, str, int]]:
        """The open page's links: (href as written, as resolved, how many elements have the id it names)."""
        links = self.page.eval_on_selector_all("a[href]", "links => links.map(a => [a.getAttribute('href'), a.href])")
        return [(raw, absolute, self.page.locator(f"[id='{raw[1:]}']").count() if raw.startswith("#") else 0)
                for raw, absolute in links]  # fmt: skip


@dataclasses.dataclass
class Visit:
    """What one visit of a page saw: each golden page is opened once and every test below reads it."""

    divs: int
    rendered: int
    errors: list[str]
    outside: list[str]
    run_links: list[str]
    """The index's links to run pages (from its table), resolved."""
    links: list[tuple[str, str, int]]
    answer_and_plot_top: list[float] | None
    """Where the answer table and the first plot begin on the page (None where either is missing)."""


ANSWER_AND_PLOT_TOP = """() => {
    const answer = document.querySelector('#answer ~ div table');
    const plot = document.querySelector('.plotly-graph-div');
    if (!answer || !plot) return null;
    return [answer.getBoundingClientRect().top + scrollY, plot.getBoundingClientRect().top + scrollY];
}"""


@pytest.fixture(scope="module")
def built(golden_site) -> site.BuiltSite:
    return golden_site  # the golden runs' site (conftest.py), read only


@pytest.fixture(scope="module")
def tab():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        tab = Tab(page)
        page.on("console", lambda message: message.type == "error" and tab.errors.append(message.text))
        page.on("pageerror", lambda error: tab.errors.append(str(error)))
        page.route("**/*", tab.route)
        yield tab
        browser.close()


@pytest.fixture(scope="module")
def visits(built, tab) -> dict[str, Visit]:
    """The index and every golden run page, each visited once (a run page's plots take seconds to render)."""
    seen = {}
    for path in [built.index, *built.run_pages.values()]:
        divs, rendered = tab.visit(path)
        run_links = tab.page.eval_on_selector_all('table a[href^="runs/"]', "links => links.map(a => a.href)")
        seen[path.name] = Visit(divs, rendered, list(tab.errors), list(tab.outside), run_links, tab.links(),
                                tab.page.evaluate(ANSWER_AND_PLOT_TOP))  # fmt: skip
    return seen


def test_every_golden_run_has_a_page(built):
    assert sorted(built.run_pages) == ["bucket_sweep", "cpu_run", "failures", "gpu_memory"]


def test_every_page_renders_every_plot_offline_without_errors(visits):
    assert sorted(visits) == sorted(MINIMUM_PLOTS)
    for name, visit in visits.items():
        assert not visit.errors, f"{name}: console errors {visit.errors}"
        assert not visit.outside, f"{name}: requests left the machine: {visit.outside}"
        assert visit.rendered == visit.divs >= MINIMUM_PLOTS[name], f"{name}: {visit.rendered} of {visit.divs} rendered"


def test_the_index_links_to_every_run_page(built, visits):
    hrefs = visits[built.index.name].run_links
    assert sorted(Path(href.removeprefix("file://")).name for href in hrefs) == sorted(
        p.name for p in built.run_pages.values()
    )


def test_a_request_off_the_machine_is_caught(tab, tmp_path):
    """The guard itself: a page that asks a CDN for plotly is seen, so the test above cannot pass vacuously."""
    page = tmp_path / "cdn.html"
    page.write_text('<html><head><script src="https://cdn.plot.ly/plotly-2.0.0.min.js"></script></head></html>')
    tab.visit(page)
    assert tab.outside == ["https://cdn.plot.ly/plotly-2.0.0.min.js"]


def test_a_console_error_is_caught(tab, tmp_path):
    """The guard itself: a script error on a page is recorded."""
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>throw new Error('boom')</script></body></html>")
    tab.visit(page)
    assert any("boom" in error for error in tab.errors)


def test_the_network_pages_render_offline_without_errors(tab, network_site):
    """The collectives page, a run page with the floor and the model's curves (built from the golden sweep), and
    its what-if page on a cluster, whose links resolve: the site test_netreport reads (conftest.py)."""
    _, built_site = network_site
    runs = built_site.index.parent / "runs"
    pages = (built_site.index.parent / "collectives" / "net.html", runs / "bucket_sweep.html",
             runs / "bucket_sweep.whatif.html")  # fmt: skip
    for path, least in zip(pages, (4, 4, 1), strict=True):  # a CPU run's what-if page: its communication
        divs, rendered = tab.visit(path)
        assert not tab.errors and not tab.outside, f"{path.name}: {tab.errors} {tab.outside}"
        assert rendered == divs >= least, f"{path.name}: {rendered} of {divs} plots rendered"
    hrefs = tab.page.eval_on_selector_all("nav a", "links => links.map(a => a.href)")  # the what-if page's
    assert len(hrefs) == 2 and all(Path(h.removeprefix("file://")).is_file() for h in hrefs), hrefs


def test_every_run_page_answers_before_its_first_figure(built, visits):
    """The answer table (strategies ranked with their step times) comes before any plot, as laid out."""
    for path in built.run_pages.values():
        order = visits[path.name].answer_and_plot_top
        assert order is not None and order[0] < order[1], f"{path.name}: answer at {order}"


def test_every_link_on_every_page_resolves(visits, tmp_path, tab):
    """Index, run pages, a comparison and the trace links of a profiled run: each href opens a file or an anchor."""
    from test_answer import test_a_comparison_page_opens_with_its_outcome_and_the_index_lists_it as make

    make(tmp_path)  # a site of two comparison pages, its index listing them (the golden site is visited once above)
    compared = tmp_path / "site"
    comparisons = sorted((compared / "compare").glob("*.html"))
    assert len(comparisons) == 2
    links = {name: visit.links for name, visit in visits.items()}
    for path in [compared / "index.html", *comparisons]:
        tab.visit(path)
        links[f"compare/{path.name}"] = tab.links()
    checked = 0
    for name, page_links in links.items():
        for raw, absolute, anchors in page_links:
            if raw.startswith("https://"):
                assert raw == "https://ui.perfetto.dev", f"{name}: unexpected external link {raw}"
                continue
            if raw.startswith("#"):
                assert anchors == 1, f"{name}: no anchor {raw}"
            else:
                target = Path(absolute.removeprefix("file://").split("#")[0])
                assert target.is_file(), f"{name} links to missing {raw}"
            checked += 1
    assert checked > 20
