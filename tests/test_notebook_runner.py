"""The notebook runner of the reader-environment tests (tests/notebook_runner.py) on tiny notebooks: a chapter runs
and is written back executed; a cell past its timeout is reported with the kernel's last messages and retried once
in a fresh kernel, and a chapter that fails twice raises with the report (a stall is never silent)."""
from __future__ import annotations

import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

import notebook_runner as runner


def notebook(tmp_path, *sources: str) -> str:
    path = tmp_path / "chapter.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell(s) for s in sources]), path)
    return str(path)


def test_a_chapter_runs_and_is_written_back(tmp_path):
    path = notebook(tmp_path, "x = 6 * 7\nprint(x)", "import ipywidgets\nout = ipywidgets.Output()\nout")
    report = runner.execute([(path, str(tmp_path))], cell_timeout=60)
    assert report["attempts"] == {path: 1} and report["incidents"] == []
    executed = nbformat.read(path + ".executed.ipynb", as_version=4)
    assert executed.cells[0].outputs[0]["text"] == "42\n"
    json.dumps(report)   # the report is what the tests record


def test_a_stalled_cell_is_reported_retried_and_then_raised(tmp_path):
    path = notebook(tmp_path, "print('start')", "import time\ntime.sleep(30)")
    with pytest.raises(RuntimeError, match="failed 2 times in fresh kernels") as info:
        runner.execute([(path, str(tmp_path))], cell_timeout=2, retries=1)
    incident = json.loads(str(info.value).split("kernels: ", 1)[1])
    assert incident["error"] == "CellTimeoutError" and incident["cell"] == 1 and incident["attempt"] == 2
    assert incident["cell_head"] == "import time" and incident["cell_s"] >= 2
    # as it was at the timeout: the kernel busy on that cell (its last status), the reply of the cell before read
    last = incident["last_messages"]
    assert last["status"]["execution_state"] == "busy" and last["shell"]["msg_type"] == "execute_reply"
    assert last["shell"]["read_s_ago"] >= 2
