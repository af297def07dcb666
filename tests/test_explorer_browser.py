"""Headless-Chromium checks of the static explorer on the built chapter 9 (offline, no kernel).

Opens ``09-explore.html`` from the local http server of ``conftest.py`` and checks that the explorer drawn by
``book/_static/explorer.js`` starts at the embedded initial point, that moving each slider (arrow keys, and
jumps with ``fill``) changes the figure and that the numbers of the readout, the slider labels and the marker
in the phase diagram are those of the embedded data at the slider positions. The embedded data are checked
against attnlib (the linear baseline in closed form) and against chapter 6's phase table: the thresholds and
branch ends it embeds are the table's (interpolated in omega), a branch exists only inside its range there, the
curves are drawn only where it exists, and the global minimum is the existing branch of lower training loss.
The page, with everything it loads, must download as less than 3 MB and load nothing from other hosts.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pandas as pd
import pytest
from conftest import BOOK, KNOWN_JS_ERRORS, SHOTS

from attnlib import TaskParams, linear_baseline_error
from attnlib.book.phase_table import END_KINDS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAGE = "09-explore"
MAX_PAGE_BYTES = 3_000_000
TEXT_SUFFIXES = {".html", ".js", ".css", ".json", ".svg", ".txt"}
DASHES = {"\u2014", "no branch here", "not converged"}

STATE_JS = r"""
() => {
  const root = document.querySelector('.attnlib-explorer');
  const cells = {};
  root.querySelectorAll('td[data-key], span[data-key]').forEach(td => { cells[td.dataset.key] = td.textContent.trim(); });
  const names = {};
  root.querySelectorAll('tr[data-branch]').forEach(tr => { names[tr.dataset.branch] = tr.querySelector('td').textContent; });
  const star = root.querySelector('[data-panel="phase"] [data-marker="point"]');
  const panels = {};
  root.querySelectorAll('svg[data-panel]').forEach(s => { panels[s.dataset.panel] = s.innerHTML; });
  const maps = {};
  root.querySelectorAll('[data-map]').forEach(t => { maps[t.dataset.map] = t.textContent; });
  // points drawn per curve and panel (polylines; a curve may be split into several runs)
  const points = {};
  root.querySelectorAll('svg[data-panel]').forEach(sv => {
    const per = {};
    sv.querySelectorAll('polyline[data-curve]').forEach(pl => {
      const n = pl.getAttribute('points').trim().split(/\s+/).length;
      per[pl.dataset.curve] = (per[pl.dataset.curve] || []).concat([n]);
    });
    sv.querySelectorAll('line[data-curve]').forEach(l => { per[l.dataset.curve] = (per[l.dataset.curve] || []).concat([0]); });
    sv.querySelectorAll('[data-region]').forEach(r => { per['region:' + r.dataset.region] = [0]; });
    points[sv.dataset.panel] = per;
  });
  const gapMarker = root.querySelector('[data-panel="gap"] [data-marker="gap"]');
  const labels = Array.from(root.querySelectorAll('svg [data-label]')).map(t => [t.closest('svg').dataset.panel,
    t.dataset.label, t.textContent]);
  return {
    i: Number(root.dataset.omegaIndex), j: Number(root.dataset.alphaIndex),
    omegaLabel: root.querySelector('[data-value="omega"]').textContent,
    alphaLabel: root.querySelector('[data-value="alpha"]').textContent,
    sliders: {omega: Number(root.querySelector('[data-slider="omega"]').value),
              alpha: Number(root.querySelector('[data-slider="alpha"]').value)},
    cells, names, panels, maps, points, labels,
    gapMarker: gapMarker ? {fill: gapMarker.getAttribute('fill'), off: gapMarker.dataset.offScale} : null,
    star: {omega: Number(star.dataset.omega), alpha: Number(star.dataset.alpha), fill: star.getAttribute('fill'),
           cx: Number(star.dataset.cx), cy: Number(star.dataset.cy)},
    phaseLabels: Array.from(root.querySelectorAll('[data-panel="phase"] .ax-label')).map(e => ({
      text: e.textContent, vertical: e.getAttribute('data-axis') === 'y'})),
  };
}
"""


@pytest.fixture(scope="module")
def explorer(server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: None if str(e) in KNOWN_JS_ERRORS else errors.append(str(e)))
    page.goto(f"{server}/{PAGE}.html", wait_until="load", timeout=60_000)
    page.wait_for_selector(".attnlib-explorer.ready", timeout=30_000)
    page.wait_for_load_state("networkidle", timeout=30_000)
    data = page.evaluate("() => JSON.parse(document.querySelector('script.attnlib-explorer-data').textContent)")
    yield page, data, requests, errors, server
    page.close()


def state(page) -> dict:
    return page.evaluate(STATE_JS)


def check_view(s: dict, data: dict) -> None:
    """The readout, labels, star and attention maps show the embedded data at the slider indices."""
    i, j = s["i"], s["j"]
    assert (s["sliders"]["omega"], s["sliders"]["alpha"]) == (i, j)
    assert s["omegaLabel"] == f"\u03c9 = {data['omega'][i]:.2f}"
    assert s["alphaLabel"] == f"\u03b1 = {data['alpha'][j]:.3f}"
    glob = data["global"][i][j]
    for b in ("semantic", "positional"):
        entry = data["branches"][b]
        assert ("global minimum" in s["names"][b]) == (glob == b), (b, i, j)
        for key in ("eps_g", "eps_t", "q", "m", "theta"):   # four significant digits each
            shown = s["cells"][f"{b}.{key}"]
            if not entry["exists"][i][j]:
                assert shown in DASHES, (b, key, shown)
                continue
            scale = data["params"]["sigma"] ** 2 if key in ("m", "theta") else 1   # shown as m/sigma^2, theta/sigma^2
            if entry[key][i][j] == 0:          # a symmetry's exact zero is shown as 0
                assert shown == "0", (b, key, shown)
                continue
            assert float(shown) == pytest.approx(entry[key][i][j] / scale, rel=6e-4), (b, key, i, j)
            assert len(shown.lstrip("-\u2212").replace("0.", "", 1).lstrip("0").replace(".", "")) == 4, (b, key, shown)
    assert float(s["cells"]["linear.eps_lin"]) == pytest.approx(data["eps_lin"][i], rel=6e-4)   # four digits
    # the thresholds and ends below the table: the embedded (phase-table) values at this omega
    for key in ("alpha_c", "alpha_l", "semantic_end", "positional_end"):
        shown, want = s["cells"].get(f"table.{key}"), data[key][i]
        if key == "positional_end" and want is None:
            assert shown is None              # "throughout the grid"
        elif want is None:
            assert shown == "\u2014", (key, i)
        else:
            assert float(shown) == pytest.approx(want, abs=6e-4), (key, i)
    # curves only where the branch exists (each run of two or more consecutive grid points is one polyline)
    both = [e1 and e2 for e1, e2 in zip(data["branches"]["semantic"]["exists"][i],
                                        data["branches"]["positional"]["exists"][i])]
    for b in ("semantic", "positional"):
        assert s["points"]["errors"].get(b, []) == runs(data["branches"][b]["exists"][i]), (b, i)
    assert s["points"]["gap"].get("gap", []) == runs(both), i
    # the gap marker (when both branches exist at the point) has the global minimum's colour
    if both[j]:
        assert s["gapMarker"]["fill"] == COLOURS[glob]
    else:
        assert s["gapMarker"] is None
    assert s["star"]["omega"] == data["omega"][i] and s["star"]["alpha"] == data["alpha"][j]
    # attention maps: row r (teacher, semantic, positional), column k (average, input 1, input 2), entry (u, v)
    diag = {0: [data["teacher"]["mean"][i]] + data["teacher"]["ex"][i]}
    for r, b in ((1, "semantic"), (2, "positional")):
        diag[r] = [data["branches"][b]["S_mean"][i][j]] + data["branches"][b]["S_ex"][i][j]
    for r in range(3):
        for k in range(3):
            d = diag[r][k]
            full = [[d[0], 1 - d[0]], [1 - d[1], d[1]]]
            for u in range(2):
                for v in range(2):
                    assert float(s["maps"][f"{r},{k},{u},{v}"]) == pytest.approx(full[u][v], abs=0.0051)


COLOURS = {"semantic": "#1f77b4", "positional": "#d62728"}


def runs(flags) -> list[int]:
    """Lengths of the runs of consecutive true flags that are two or more long (the polylines drawn)."""
    out, n = [], 0
    for f in list(flags) + [False]:
        if f:
            n += 1
        else:
            if n > 1:
                out.append(n)
            n = 0
    return out


def test_initial_view_matches_data(explorer):
    page, data, _, errors, _ = explorer
    s = state(page)
    assert (s["i"], s["j"]) == (data["initial"]["omega_index"], data["initial"]["alpha_index"])
    check_view(s, data)
    assert set(s["panels"]) == {"errors", "gap", "phase", "maps"}
    # the phase panel draws the table's lines and the region where both branches exist; (a) and (b) mark
    # alpha_c (and alpha_l) at the chosen omega, labelled
    phase = s["points"]["phase"]
    assert {"alpha_c", "alpha_l", "semantic_end", "region:both"} <= set(phase)
    assert ("positional_end" in phase) == (sum(v is not None for v in data["positional_end"]) > 1)
    assert {"alpha_c", "alpha_l", "linear"} <= set(s["points"]["errors"])
    assert {"alpha_c", "zero"} <= set(s["points"]["gap"])
    assert sorted(lab[1] for lab in s["labels"] if lab[0] == "errors") == ["alpha_c", "alpha_l"]
    assert not errors, errors
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(".attnlib-explorer").screenshot(path=str(SHOTS / f"{PAGE}-explorer-initial.png"))


@pytest.mark.parametrize("slider, key, presses", [("alpha", "ArrowRight", 3), ("alpha", "ArrowLeft", 5),
                                                  ("omega", "ArrowRight", 2), ("omega", "ArrowLeft", 4)])
def test_keyboard_moves_slider_and_figure(explorer, slider, key, presses):
    page, data, _, errors, _ = explorer
    before = state(page)
    page.focus(f'[data-slider="{slider}"]')
    for _ in range(presses):
        page.keyboard.press(key)
    after = state(page)
    idx = "j" if slider == "alpha" else "i"
    step = presses if key == "ArrowRight" else -presses
    n = len(data[slider])
    assert after[idx] == max(0, min(n - 1, before[idx] + step))
    assert after[idx] != before[idx]
    # the figure changes: the cursor/markers of (a), (b) and the star of (c) move; omega redraws the curves
    for panel in ("errors", "gap", "phase"):
        assert after["panels"][panel] != before["panels"][panel], (slider, panel)
    check_view(after, data)
    assert not errors, errors


def test_jumps_cover_the_grid(explorer):
    page, data, _, errors, _ = explorer
    n_w, n_a = len(data["omega"]), len(data["alpha"])
    seen_global, seen_absent = set(), False
    for i, j in [(0, 0), (n_w - 1, 0), (n_w - 1, n_a - 1), (0, n_a - 1), (n_w // 2, 20), (n_w - 2, 30), (1, 8),
                 (0, 12)]:
        page.fill('[data-slider="omega"]', str(i))
        page.fill('[data-slider="alpha"]', str(j))
        s = state(page)
        assert (s["i"], s["j"]) == (i, j)
        check_view(s, data)
        seen_global.add(data["global"][i][j])
        seen_absent |= not data["branches"]["semantic"]["exists"][i][j]
    assert {"semantic", "positional"} <= seen_global and seen_absent
    page.fill('[data-slider="omega"]', str(n_w // 2))
    page.fill('[data-slider="alpha"]', "24")
    page.locator(".attnlib-explorer").screenshot(path=str(SHOTS / f"{PAGE}-explorer-moved.png"))
    assert not errors, errors


def test_phase_panel_orientation_matches_chapter_6(explorer):
    """Like the phase diagram of chapter 6: alpha across (the star moves right as alpha grows), omega up."""
    page, data, _, errors, _ = explorer
    labels = {("y" if lab["vertical"] else "x"): lab["text"] for lab in state(page)["phaseLabels"]}
    assert "\u03b1" in labels["x"] and "\u03c9" in labels["y"], labels
    page.fill('[data-slider="omega"]', "4")
    page.fill('[data-slider="alpha"]', "10")
    s0 = state(page)
    page.fill('[data-slider="alpha"]', "20")
    s1 = state(page)
    assert s1["star"]["cx"] > s0["star"]["cx"] and s1["star"]["cy"] == pytest.approx(s0["star"]["cy"])
    page.fill('[data-slider="omega"]', "8")
    s2 = state(page)
    assert s2["star"]["cy"] < s1["star"]["cy"] and s2["star"]["cx"] == pytest.approx(s1["star"]["cx"])
    assert not errors, errors


def table_at(table: pd.DataFrame, col: str, w: float):
    """The table's ``col`` at ``omega = w``: a row's value, or linear between the two rows around ``w`` when both
    have one; None otherwise (written here independently of attnlib.book.phase_table.phase_lines)."""
    t = table.sort_values("omega")
    x, f = t.omega.to_numpy(float), t[col].to_numpy(float)
    hit = np.flatnonzero(np.isclose(x, w, rtol=0, atol=1e-9))
    if hit.size:
        v = f[hit[0]]
    else:
        k = int(np.searchsorted(x, w))
        assert 0 < k < len(x), f"omega {w} outside the table"
        v = np.interp(w, x[k - 1:k + 1], f[k - 1:k + 1]) if np.isfinite(f[k - 1:k + 1]).all() else np.nan
    return None if not np.isfinite(v) else float(v)


def test_embedded_data_agree_with_attnlib_and_chapter_6(explorer):
    _, data, _, _, _ = explorer
    omegas, alphas = data["omega"], np.array(data["alpha"])
    for w, lin in zip(omegas, data["eps_lin"]):
        params = TaskParams(sigma=data["params"]["sigma"], lam=data["params"]["lam"], omega=w)
        assert lin == pytest.approx(linear_baseline_error(params), rel=1e-6)
    # thresholds and ends: the phase table's, to round-off (7 significant digits in the page)
    ref = pd.read_csv(BOOK / "data" / "phase_standard.csv")
    assert min(omegas) >= ref.omega.min() - 1e-12 and max(omegas) <= ref.omega.max() + 1e-12
    pos_ends = ref.assign(positional_end=ref.positional_upper_alpha.where(
        ref.positional_upper_kind.isin(END_KINDS)), semantic_end=ref.semantic_lower_alpha)
    for key in ("alpha_c", "alpha_l", "semantic_end", "positional_end"):
        for w, got in zip(omegas, data[key]):
            want = table_at(pos_ends, key, w)
            assert (got is None) == (want is None), (key, w)
            if want is not None:
                assert got == pytest.approx(want, rel=1e-6, abs=1e-12), (key, w)
    assert sum(v is not None for v in data["alpha_c"]) >= 3
    for i, w in enumerate(omegas):
        sem, pos = (np.array(data["branches"][b]["exists"][i], bool) for b in ("semantic", "positional"))
        # a branch exists only inside its range in the table
        assert not sem[alphas < data["semantic_end"][i]].any(), w
        if data["positional_end"][i] is not None:
            assert not pos[alphas > data["positional_end"][i]].any(), w
        # the global minimum is the existing branch of lower training loss
        for j in range(len(alphas)):
            live = {b: data["branches"][b]["eps_t"][i][j] for b in ("semantic", "positional")
                    if data["branches"][b]["exists"][i][j]}
            assert data["global"][i][j] == (min(live, key=live.get) if live else None)
        # physics: the grid's own losses cross where the table says, to within one grid step (8 %): more than a
        # step below alpha_c the positional branch is the global minimum where it exists, more than a step above
        # the semantic one
        ac, ratio = data["alpha_c"][i], alphas[1] / alphas[0]
        if ac is not None:
            for j, a in enumerate(alphas):
                if a < ac / ratio and pos[j]:
                    assert data["global"][i][j] == "positional", (w, a)
                if a > ac * ratio and sem[j]:
                    assert data["global"][i][j] == "semantic", (w, a)
        # and the global minimum beats the linear baseline to the right of alpha_l, not to its left (one step)
        al = data["alpha_l"][i]
        if al is not None:
            for j, a in enumerate(alphas):
                g = data["global"][i][j]
                if g is None or abs(np.log(a / al)) < np.log(ratio):
                    continue
                below = data["branches"][g]["eps_g"][i][j] < data["eps_lin"][i]
                assert below == (a > al), (w, a)


def test_grid_finds_the_branches_where_the_table_has_them(explorer):
    """Where the table has a branch (from its semantic end up and up to its positional end, each beyond two of the
    end's standard errors, the spread over the table's scramblings; a positional end of any kind: where seed sets
    stop agreeing, the end of the range, or where the search lost it), the grid's fixed
    point converged with its overlap not collapsed: else the page shows a hole in a branch the table has, and
    the grid and the table disagree beyond the table's error. (At omega = 0.3 the grid still finds a semantic
    fixed point down to alpha 0.68, in the tail of small theta; the table places the end at 0.733 +- 0.006, where
    independent seed sets of the pooled rule stop agreeing on theta.)"""
    _, data, _, _, _ = explorer
    alphas = np.array(data["alpha"])
    ref = pd.read_csv(BOOK / "data" / "phase_standard.csv")
    missing = []
    for i, w in enumerate(data["omega"]):
        traced = table_at(ref, "positional_upper_alpha", w)
        end_err = table_at(ref, "semantic_lower_alpha_err", w) or 0.0
        pos_err = table_at(ref, "positional_upper_alpha_err", w) or 0.0
        inside = {"semantic": alphas >= data["semantic_end"][i] + 2 * end_err,
                  "positional": alphas <= (traced - 2 * pos_err if traced is not None else -np.inf)}
        for b, sel in inside.items():
            ex = np.array(data["branches"][b]["exists"][i], bool)
            missing += [(w, b, float(a)) for a in alphas[sel & ~ex]]
    assert not missing, f"table's branch not found on the grid at (omega, branch, alpha): {missing}"


def test_page_is_small_and_offline(explorer, built_book: Path):
    """What a reader downloads for the page (GitHub Pages serves text gzip-compressed) stays under 3 MB, and the
    explorer itself (the page's HTML with the embedded grid, explorer.js and .css) adds well under 1 MB.

    Uncompressed, the theme's assets alone (fontawesome.js 1.5 MB, MathJax 1.2 MB, CSS) weigh over 3 MB on every
    page of the book; the total is recorded in _build/explorer_page_size.json."""
    _, _, requests, _, server = explorer
    external = [u for u in requests if not u.startswith((server, "data:", "blob:"))]
    assert not external, f"requests to other hosts: {external}"
    raw = gz = 0
    files = {}
    for url in set(requests):
        if url.startswith(server):
            path = built_book / urlparse(url).path.lstrip("/")
            if path.is_file():
                blob = path.read_bytes()
                files[path.relative_to(built_book).as_posix()] = len(blob)
                raw += len(blob)
                gz += len(gzip.compress(blob)) if path.suffix in TEXT_SUFFIXES else len(blob)
    own = sum(n for f, n in files.items() if f in (f"{PAGE}.html", "_static/explorer.js", "_static/explorer.css"))
    assert {"_static/explorer.js", "_static/explorer.css", f"{PAGE}.html"} <= set(files)
    (built_book.parent / "explorer_page_size.json").write_text(json.dumps(
        {"uncompressed_bytes": raw, "gzip_bytes": gz, "explorer_own_bytes": own}, indent=1))
    assert gz < MAX_PAGE_BYTES, f"{PAGE}.html downloads {gz / 1e6:.2f} MB (gzip)"
    assert own < 1_000_000, f"the explorer's own files weigh {own / 1e6:.2f} MB"
