"""The GitHub Actions workflows run exactly README's quick-start commands, with the official actions.

Parses ``.github/workflows/book.yml`` (build + deploy to GitHub Pages) and ``tests.yml`` (tests on push and pull
request), and README's quick-start code block: the workflows' ``run`` steps must be README's two commands, so
the three cannot drift apart. ``.ci/run`` must run README's test command too. The files are also validated
against the GitHub workflow JSON schema vendored in ``check-jsonschema`` (no network needed).
"""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
OFFICIAL = {"actions/checkout", "actions/setup-python", "actions/cache", "actions/configure-pages",
            "actions/upload-pages-artifact", "actions/deploy-pages"}


def readme_commands() -> list[str]:
    """Commands of README's quick-start code block (comments and blank lines dropped)."""
    text = (ROOT / "README.md").read_text()
    section = re.search(r"^## Quick start\n(.*?)^## ", text, flags=re.S | re.M)
    assert section, "README has no '## Quick start' section"
    blocks = re.findall(r"^```bash\n(.*?)^```", section.group(1), flags=re.S | re.M)
    assert len(blocks) == 1, "README's quick start must have exactly one bash block"
    commands = [line.split("#", 1)[0].strip() for line in blocks[0].splitlines()]
    return [c for c in commands if c]


def load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def triggers(workflow: dict) -> dict:
    # YAML 1.1 reads the key `on` as the boolean True
    on = workflow.get("on", workflow.get(True))
    return {k: (v or {}) for k, v in on.items()} if isinstance(on, dict) else {k: {} for k in on}


def steps(job: dict) -> tuple[list[str], list[str]]:
    """(``run`` commands, ``uses`` actions without version) of a job."""
    runs = [s["run"].strip() for s in job["steps"] if "run" in s]
    uses = [s["uses"].split("@")[0] for s in job["steps"] if "uses" in s]
    return runs, uses


def test_readme_quick_start_has_two_commands():
    assert readme_commands() == ["bash scripts/build_book.sh", "bash scripts/test.sh"]


def test_only_the_two_workflows():
    assert sorted(p.name for p in WORKFLOWS.iterdir()) == ["book.yml", "tests.yml"]


def test_book_workflow_builds_and_deploys_to_pages():
    build_cmd, _ = readme_commands()
    wf = load("book.yml")
    on = triggers(wf)
    assert on["push"] == {"branches": ["main"]}
    assert set(on) <= {"push", "workflow_dispatch"}
    assert wf["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    build, deploy = wf["jobs"]["build"], wf["jobs"]["deploy"]
    runs, uses = steps(build)
    assert runs == [build_cmd], "the book workflow must run exactly README's build command"
    assert uses == ["actions/checkout", "actions/setup-python", "actions/cache", "actions/configure-pages",
                    "actions/upload-pages-artifact"]
    cache = next(s for s in build["steps"] if s.get("uses", "").startswith("actions/cache@"))
    paths = set(cache["with"]["path"].split())
    assert {"_build/.jupyter_cache", "_build/.attnlib_cache"} <= paths
    key = cache["with"]["key"]
    for part in ("'attnlib/**'", "'book/**'", "'requirements.txt'"):
        assert part in key, f"cache key must hash {part}: {key}"
    upload = next(s for s in build["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert upload["with"]["path"] == "_build/html"
    assert deploy["needs"] == "build"
    assert deploy["environment"]["name"] == "github-pages"
    assert steps(deploy)[1] == ["actions/deploy-pages"]


def test_tests_workflow_runs_readme_test_command_on_push_and_pull_request():
    _, test_cmd = readme_commands()
    wf = load("tests.yml")
    assert set(triggers(wf)) == {"push", "pull_request"}
    (job,) = wf["jobs"].values()
    runs, uses = steps(job)
    assert runs == [test_cmd], "the test workflow must run exactly README's test command"
    assert uses == ["actions/checkout", "actions/setup-python"]
    assert job.get("timeout-minutes", 360) <= 90


def test_ci_run_uses_readme_test_command():
    _, test_cmd = readme_commands()
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    execs = [ln for ln in lines if ln.startswith("exec ")]
    assert len(execs) == 1
    words = shlex.split(execs[0].split("<", 1)[0])[1:]
    assert words[:len(shlex.split(test_cmd))] == shlex.split(test_cmd)


def test_workflows_use_official_actions_pinned_to_a_major_version():
    for path in WORKFLOWS.glob("*.yml"):
        for job in load(path.name)["jobs"].values():
            for step in job["steps"]:
                if "uses" in step:
                    name, _, version = step["uses"].partition("@")
                    assert name in OFFICIAL, f"{path.name}: {name} is not one of the official actions"
                    assert re.fullmatch(r"v\d+", version), f"{path.name}: pin {name} to a major version"


def test_workflows_match_github_schema():
    """Validate against the GitHub workflow schema that check-jsonschema ships (offline)."""
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    proc = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                           *files], capture_output=True, text=True, timeout=300)   # takes ~2 s
    assert proc.returncode == 0, proc.stdout + proc.stderr
