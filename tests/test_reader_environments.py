"""The book as its readers meet it outside the build: a downloaded chapter notebook, and Binder.

* **Downloaded notebook.** The download menu of the published page serves the executed notebook
  ``_build/html/_sources/<chapter>.ipynb``. Its first cell (``scripts/notebook_header.py``) says how to install
  ``attnlib``: ``pip install "attnlib[notebooks] @ git+<repository.url of _config.yml>"``. The test copies one
  downloaded notebook out of the tree, creates a fresh virtual environment, runs that pip line there -- with
  the local checkout (a copy of it, as a ``file://`` URL) substituted for the git URL, since the test has no
  network -- and executes the notebook with nbclient in its own folder; the data files it reads must come from
  the installed package (``attnlib.use_book_data``).
* **Binder.** repo2docker builds the image from ``requirements.txt`` at the repository root (there is no
  ``binder/`` folder) and then runs ``postBuild``. The test mirrors that in a fresh virtual environment, checks
  what ``postBuild`` configured (JupyterLab opens ``.md`` chapters as Jupytext notebooks), and executes every
  chapter as JupyterLab would after the Binder link ``lab/tree/book/<chapter>.md``: jupytext reads the ``.md``,
  the kernel runs in ``book/``, and every cell runs (as with "Run All", including ``skip-execution`` cells).

Both use pip's wheel cache and a temporary attnlib cache (cold: every result is computed again), and execute the
chapters with ``notebook_runner.py`` (the same nbclient, with no wait longer than needed: each cell's timeout is
sized from measured durations, a stalled or dead kernel is reported with its last messages and retried once in a
fresh kernel, as a warning in the test summary), two chapters at a time, each in its own kernel. Every command
they start has a time limit. Marked ``slow``: each takes minutes (the Binder mirror executes the whole book).
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from book_toc import toc_files
from conftest import BOOK, ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import notebook_header  # noqa: E402

pytestmark = pytest.mark.slow

DOWNLOADED_CHAPTER = "06-phase-diagram"   # reads six data files, executes in seconds
REPORT = ROOT / "_build" / "reader_environments.json"

RUNNER = Path(__file__).with_name("notebook_runner.py")   # executes chapters in the fresh environment
# Timeouts of what the tests start, sized from measured durations on 2 cores (CI's machine): creating a
# venv ~5 s, installing requirements.txt ~1.5-4 min, the whole book's chapters 5-6.5 min one at a time (slowest,
# chapter 1: 73 s on an Intel Xeon, 120 s on an AMD EPYC);
# each limit is several times the measurement, so that a stall fails in minutes, not at CI's 90-minute limit.
VENV_TIMEOUT_S = 300
INSTALL_TIMEOUT_S = 1200
EXECUTE_TIMEOUT_S = 1800
#: Runner processes executing chapters at once (one per core of CI's 2-core machine; each chapter its own kernel).
STREAMS = 2


def run(cmd, timeout: float = VENV_TIMEOUT_S, **kwargs) -> subprocess.CompletedProcess:
    """Run ``cmd``; fail with its output when it fails or runs past ``timeout`` seconds."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"")[-4000:], (exc.stderr or b"")[-6000:]
        pytest.fail(f"{cmd} ran past its {timeout:.0f}-s limit:\n{out[0]!r}\n{out[1]!r}")
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    return proc


def copy_repository(dst: Path) -> Path:
    """The repository's files as a clone has them (tracked plus new, not ignored), copied to ``dst``."""
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT).stdout
    for name in filter(None, listed.split("\0")):
        src = ROOT / name
        if src.is_file() or src.is_symlink():
            target = dst / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target, follow_symlinks=False)
    return dst


def fresh_venv(path: Path) -> tuple[Path, dict]:
    """A new virtual environment and the environment variables of a shell with it activated."""
    run([sys.executable, "-m", "venv", str(path)])
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "ATTNLIB_CACHE_DIR")}
    env.update(VIRTUAL_ENV=str(path), PATH=f"{path / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    run([str(path / "bin" / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"], env=env)
    return path / "bin" / "python", env


def execute(python: Path, env: dict, jobs: list[tuple[Path, Path]], tmp: Path, key: str) -> dict:
    """Execute the chapters with ``notebook_runner.py`` in the fresh environment; return the seconds per chapter.

    The chapters run in ``STREAMS`` runner processes at once (every other chapter in each: the three slow ones,
    0, 1 and 10, do not end up in one), each chapter in its own kernel as before. A chapter that timed out or lost
    its kernel and passed on its retry is reported as a warning (pytest's summary shows it) and in
    ``_build/reader_environments.json``; messages read late are recorded there too."""
    runner = tmp / RUNNER.name
    shutil.copy(RUNNER, runner)
    groups = [jobs[i::STREAMS] for i in range(STREAMS) if jobs[i::STREAMS]]
    procs = [subprocess.Popen([str(python), str(runner), json.dumps([[str(n), str(c)] for n, c in group])],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for group in groups]
    deadline = time.monotonic() + EXECUTE_TIMEOUT_S
    report = {"times": {}, "attempts": {}, "incidents": [], "late": []}
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            out, err = proc.communicate()
            pytest.fail(f"executing the chapters ran past its {EXECUTE_TIMEOUT_S}-s limit:\n{out[-4000:]}\n"
                        f"{err[-6000:]}")
        assert proc.returncode == 0, f"{proc.args[:2]} failed:\n{out[-4000:]}\n{err[-6000:]}"
        part = json.loads(out.strip().splitlines()[-1])
        for k in ("times", "attempts"):
            report[k].update(part[k])
        for k in ("incidents", "late"):
            report[k] += part[k]
    record(f"{key}_runner", {k: report[k] for k in ("attempts", "incidents", "late")})
    for incident in report["incidents"]:
        warnings.warn(f"chapter retried in a fresh kernel after {incident['error']} at cell {incident['cell']} "
                      f"({incident['cell_head']!r}): {json.dumps(incident)}", stacklevel=2)
    return report["times"]


def record(key: str, value) -> None:
    data = json.loads(REPORT.read_text()) if REPORT.is_file() else {}
    data[key] = value
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(json.dumps(data, indent=1))


def test_download_menu_serves_the_header(built_book: Path):
    """Every executed notebook of the download menu starts with the install note; no HTML page shows it."""
    for name in toc_files():
        if not (BOOK / f"{name}.md").read_text().count("```{code-cell}"):
            continue
        nb = json.loads((built_book / "_sources" / f"{name}.ipynb").read_text())
        first = nb["cells"][0]
        source = "".join(first["source"])
        assert first["cell_type"] == "code" and notebook_header.install_line() in source, name
        assert "remove-cell" in first["metadata"].get("tags", []), name
        assert any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), f"{name}: not executed"
        page = (built_book / f"{name}.html").read_text()
        assert notebook_header.MARK not in page and "use_book_data" not in page, f"{name}.html shows the note"
        assert f"_sources/{name}.ipynb" in page, f"{name}.html offers no .ipynb download"


def test_downloaded_notebook_runs_outside_the_tree(built_book: Path, tmp_path: Path):
    notebook = built_book / "_sources" / f"{DOWNLOADED_CHAPTER}.ipynb"
    reader = tmp_path / "Downloads"
    reader.mkdir()
    shutil.copy(notebook, reader)
    first = "".join(json.loads(notebook.read_text())["cells"][0]["source"])
    line = next(ln.strip("# ").strip() for ln in first.splitlines() if "pip install" in ln)
    url = notebook_header.repository_url()
    assert line == notebook_header.install_line() and f"git+{url}" in line
    # The test cannot reach GitHub: it installs the same project from a copy of the local checkout.
    repo = copy_repository(tmp_path / "repo")
    local_line = line.replace(f"git+{url}", repo.as_uri())
    python, env = fresh_venv(tmp_path / "venv")
    env["ATTNLIB_CACHE_DIR"] = str(tmp_path / "attnlib-cache")
    t0 = time.perf_counter()
    run([str(python), "-m", *pip_words(local_line)], env=env, cwd=tmp_path, timeout=INSTALL_TIMEOUT_S)
    install_s = time.perf_counter() - t0
    where = run([str(python), "-c", "import attnlib; print(attnlib.__file__)"], env=env, cwd=reader).stdout
    assert str(tmp_path / "venv") in where, f"attnlib imported from {where} instead of the fresh environment"
    times = execute(python, env, [(reader / notebook.name, reader)], tmp_path, "downloaded_notebook")
    data = sorted(p.name for p in (reader / "data").iterdir())
    assert "phase_standard.csv" in data and "phase_meta.json" in data, data
    record("downloaded_notebook", {"chapter": DOWNLOADED_CHAPTER, "install_s": round(install_s, 1),
                                   "execute_s": times})


def pip_words(line: str) -> list[str]:
    """``pip install "x @ url"`` -> ``["pip", "install", "-q", "x @ url"]`` (as the shell splits it)."""
    words = shlex.split(line)
    assert words[:2] == ["pip", "install"] and len(words) == 3, line
    return [*words[:2], "-q", words[2]]


def test_binder_mirror_executes_every_chapter(tmp_path: Path):
    repo = copy_repository(tmp_path / "repo")
    assert not (repo / "binder").exists() and not (repo / ".binder").exists(), \
        "a binder/ folder would make repo2docker ignore the root requirements.txt"
    python, env = fresh_venv(tmp_path / "venv")
    t0 = time.perf_counter()
    run([str(python), "-m", "pip", "install", "-q", "-r", "requirements.txt"], env=env, cwd=repo,
        timeout=INSTALL_TIMEOUT_S)
    install_s = time.perf_counter() - t0
    home = tmp_path / "home"
    home.mkdir()
    env.update(HOME=str(home), ATTNLIB_CACHE_DIR=str(tmp_path / "attnlib-cache"))
    run(["bash", "postBuild"], env=env, cwd=repo)
    overrides = json.loads((home / ".jupyter" / "labconfig" / "default_setting_overrides.json").read_text())
    viewers = overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers.get("markdown") == "Jupytext Notebook", viewers
    server_ext = tmp_path / "venv" / "etc" / "jupyter" / "jupyter_server_config.d" / "jupytext.json"
    assert server_ext.is_file(), "jupytext's server extension (which opens .md as notebooks) is not enabled"
    chapters = [n for n in toc_files() if "```{code-cell}" in (BOOK / f"{n}.md").read_text()]
    jobs = [(repo / "book" / f"{n}.md", repo / "book") for n in chapters]
    times = execute(python, env, jobs, tmp_path, "binder_mirror")
    assert len(times) == len(chapters)
    assert not (repo / "book" / "data").is_symlink()
    record("binder_mirror", {"install_s": round(install_s, 1),
                             "execute_s": {Path(k).name: v for k, v in times.items()},
                             "execute_total_s": round(sum(times.values()), 1)})
