"""Execute chapter notebooks with nbclient as JupyterLab's *Run All* does, with no wait longer than it needs.

A standalone script: the reader-environment tests run it with the Python of a fresh virtual environment
(``python notebook_runner.py JOBS_JSON``), so it imports only what ``requirements.txt`` installs.

Why it exists (measured, see the docstring of ``SlicedChannel``): nbclient sends the comm messages of an
``ipywidgets.Output`` widget (chapter 9's live explorer) on the shell socket while it awaits the cell's
``execute_reply`` on that same socket. pyzmq watches a socket through its edge-triggered ``ZMQ_FD``; when the
reply lands while that send runs, the wake-up is consumed and the reply sits unread in the socket until the
poll's own timeout fires, which is the whole cell timeout. With ``timeout=1800`` that was a 30-minute stall of an
idle kernel, after which the chapter "passed".

What this runner does about it:

* the kernel client's channels poll in slices of at most ``SLICE_S`` seconds: a missed wake-up costs at most one
  slice, and every message that arrives more than ``LATE_S`` after the kernel sent it is counted as *late*;
* every cell has a timeout sized from the measured durations (``CELL_TIMEOUT_S``; chapters take 4-120 s in all);
* a chapter whose cell times out or whose kernel dies is reported with the kernel's last messages as they were at
  the timeout (its last status tells an idle kernel with a lost reply, ``idle``, from a busy one) and retried once
  in a fresh kernel; the report lists every retry, so a retried chapter is never silent.

Output (last line of stdout): JSON ``{"times": {path: seconds}, "attempts": {path: n}, "incidents": [...],
"late": [...]}``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from queue import Empty

import nbformat
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from traitlets import Type, default

SLICE_S = 1.0            # longest single wait on a socket; bounds the cost of a missed wake-up
LATE_S = 0.5             # a message read this long after the kernel sent it is reported as late
CELL_TIMEOUT_S = 300     # per cell; the slowest whole chapter takes 73-120 s (cold cache, 2 cores)
RETRIES = 1              # a chapter that times out or loses its kernel runs once more in a fresh kernel

LATE: list[dict] = []            # late messages of the current chapter
LAST: dict[str, dict] = {}       # the last message read on each channel, and the last status (type, state, age)
AT_TIMEOUT: dict = {}            # LAST as it was when a cell timed out, with the time ("at")


class SlicedChannel(AsyncZMQSocketChannel):
    """A kernel channel that never waits on its socket longer than ``SLICE_S``.

    Measured on this project's machine (2 cores, ipykernel 6.31, pyzmq 27.3, nbclient 0.11, jupyter_client
    8.10): chapter 9 executed in a loop with a 90-s cell timeout stalled in 1 of 27 runs, on the cell that
    builds the explorer: the kernel's debug log shows the ``execute_reply`` sent at 07:13:47.152, the client's
    ``comm_msg`` (the Output widget's state) sent on the shell socket 3 ms later, and the reply read by the
    client only when the poll's 90-s timer fired (pyzmq then polls once without waiting and finds it).
    A fresh poll checks ``ZMQ_EVENTS`` before it waits, so polling in slices recovers such a message within
    one slice.
    """

    name = "?"   # set by SlicedClient.start_channels

    async def get_msg(self, timeout: float | None = None) -> dict:  # type: ignore[override]
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            step = SLICE_S if left is None else min(SLICE_S, left)
            if await self.socket.poll(int(step * 1000)):
                msg = await self._recv()
                self._note(msg)
                return msg
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty

    def _note(self, msg: dict) -> None:
        """Keep the message as this channel's last one, and as late when read ``LATE_S`` after its sending."""
        sent = msg.get("header", {}).get("date")
        age = None
        if isinstance(sent, datetime):
            age = round((datetime.now(timezone.utc) - sent.astimezone(timezone.utc)).total_seconds(), 3)
        kind = msg.get("msg_type", "?")
        LAST[self.name] = {"msg_type": kind, "execution_state": msg.get("content", {}).get("execution_state"),
                           "read_at": time.time(), "age_s": age}
        if kind == "status":   # the kernel's last announced state, busy or idle, kept apart from later messages
            LAST["status"] = dict(LAST[self.name], channel=self.name)
        if age is not None and age > LATE_S:
            LATE.append({"channel": self.name, "msg_type": kind, "late_s": age})


class SlicedClient(AsyncKernelClient):
    """The async kernel client with every channel a ``SlicedChannel``."""

    shell_channel_class = Type(SlicedChannel)
    iopub_channel_class = Type(SlicedChannel)
    stdin_channel_class = Type(SlicedChannel)
    control_channel_class = Type(SlicedChannel)

    def start_channels(self, *args, **kwargs):
        super().start_channels(*args, **kwargs)
        for name in ("shell", "iopub", "stdin", "control"):
            channel = getattr(self, f"_{name}_channel", None)
            if channel is not None:
                channel.name = name


class SlicedKernelManager(AsyncKernelManager):
    """The async kernel manager whose clients are ``SlicedClient``."""

    @default("client_factory")
    def _sliced_client_factory(self):
        return SlicedClient


class ReportingClient(NotebookClient):
    """nbclient's client that keeps the kernel's last messages as they were when a cell timed out (before the
    client's clean-up sends the kernel its shutdown request, whose replies would overwrite them)."""

    async def _async_handle_timeout(self, timeout, cell=None):
        AT_TIMEOUT.clear()
        AT_TIMEOUT.update({k: dict(v) for k, v in LAST.items()}, at=time.time())
        return await super()._async_handle_timeout(timeout, cell)


def read_notebook(path: str):
    """A chapter as JupyterLab opens it: ``.md`` through jupytext (Binder), ``.ipynb`` as it is (download)."""
    if path.endswith(".md"):
        import jupytext   # only here: a downloaded notebook's environment (attnlib[notebooks]) has no jupytext
        return jupytext.read(path)
    return nbformat.read(path, as_version=4)


def run_once(path: str, cwd: str, cell_timeout: float) -> tuple[object, dict | None]:
    """Execute the chapter once in a fresh kernel; return (notebook, None) or (None, incident)."""
    nb = read_notebook(path)
    current = {"index": None, "t0": None}

    def on_cell_execute(cell, cell_index):
        current.update(index=cell_index, t0=time.monotonic())

    LAST.clear()
    AT_TIMEOUT.clear()
    # skip_cells_with_tag: a tag no cell has, so every cell runs, "skip-execution" ones included (Run All)
    client = ReportingClient(nb, timeout=cell_timeout, kernel_name="python3", startup_timeout=120,
                            kernel_manager_class=SlicedKernelManager, on_cell_execute=on_cell_execute,
                            skip_cells_with_tag="run-all-runs-everything", resources={"metadata": {"path": cwd}})
    try:
        client.execute()
    except (CellTimeoutError, DeadKernelError) as exc:
        index = current["index"]
        source = nb.cells[index].source if index is not None else ""
        seen = AT_TIMEOUT or dict(LAST, at=time.time())   # a dead kernel has no timeout: its messages as they are
        last = {k: {**{f: x for f, x in v.items() if f != "read_at"}, "read_s_ago": round(seen["at"] - v["read_at"], 1)}
                for k, v in seen.items() if k != "at"}
        return None, {"chapter": path, "error": type(exc).__name__, "cell": index,
                      "cell_head": source.splitlines()[0][:80] if source else "",
                      "cell_s": None if current["t0"] is None else round(time.monotonic() - current["t0"], 1),
                      "last_messages": last}
    return nb, None


def execute(jobs: list[tuple[str, str]], cell_timeout: float = CELL_TIMEOUT_S, retries: int = RETRIES) -> dict:
    """Execute every (notebook, folder) job; write ``<notebook>.executed.ipynb`` beside each."""
    report = {"times": {}, "attempts": {}, "incidents": [], "late": []}
    for path, cwd in jobs:
        for attempt in range(1, retries + 2):
            LATE.clear()
            t0 = time.perf_counter()
            nb, incident = run_once(path, cwd, cell_timeout)
            report["late"] += [{"chapter": path, "attempt": attempt, **m} for m in LATE]
            if incident is None:
                break
            incident["attempt"] = attempt
            report["incidents"].append(incident)
            print(f"notebook_runner: {json.dumps(incident)}", file=sys.stderr, flush=True)
        else:
            raise RuntimeError(f"{path} failed {retries + 1} times in fresh kernels: "
                               f"{json.dumps(report['incidents'][-1])}")
        report["times"][path] = round(time.perf_counter() - t0, 1)
        report["attempts"][path] = attempt
        nbformat.write(nb, path + ".executed.ipynb")
    return report


def main(argv: list[str] | None = None) -> None:
    """``python notebook_runner.py JOBS_JSON [--cell-timeout S] [--slice S] [--repeat N]``.

    ``--repeat N`` executes the jobs N times (the loop that reproduced the stall); ``--slice`` sets the longest
    wait on a socket (``--slice`` equal to the cell timeout gives nbclient's own behaviour, one wait per cell).
    """
    global SLICE_S
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("jobs", help="JSON list of [notebook, folder]")
    parser.add_argument("--cell-timeout", type=float, default=CELL_TIMEOUT_S)
    parser.add_argument("--slice", type=float, default=SLICE_S)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--fresh-cache", action="store_true",
                        help="a new empty ATTNLIB_CACHE_DIR for every repetition (cold, as in a fresh clone)")
    args = parser.parse_args(argv)
    SLICE_S = args.slice
    jobs = [tuple(j) for j in json.loads(args.jobs)]
    for _ in range(args.repeat):
        if args.fresh_cache:
            os.environ["ATTNLIB_CACHE_DIR"] = tempfile.mkdtemp(prefix="attnlib-cache-")
        print(json.dumps(execute(jobs, cell_timeout=args.cell_timeout)), flush=True)


if __name__ == "__main__":
    main()
