"""A test server never outlives the test run that started it (`--exit-on-stdin-eof`).

The harness starts every ubiquityd in a session of its own (so a Ctrl-C aimed at pytest does not
reach it mid-teardown) with a pipe on its stdin that it never writes. Here a separate Python
process plays the test run: it starts a server through the harness, reports the server's pid,
and is then killed with SIGKILL, so no teardown of its own runs. The server must see the pipe
close, drain and exit by itself, and release its data directory to the next server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from ubiq_harness import Ubiquityd, wait_until

HERE = Path(__file__).resolve().parent

# The stand-in test run: start a server, print its pid and data directory, wait to be killed.
CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from ubiq_harness import Ubiquityd
srv = Ubiquityd(Path(sys.argv[2]), Path(sys.argv[3]), name="orphan").start()
print(json.dumps({"pid": srv.pid, "data_dir": str(srv.data_dir)}), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose (its parent, the killed child, cannot reap it; init will).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_server_stops_when_the_process_that_started_it_is_killed(server_binary, tmp_path):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(HERE), str(server_binary), str(tmp_path)],
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        started = json.loads(child.stdout.readline())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    pid = started["pid"]
    try:
        wait_until(lambda: not _alive(pid), timeout=60, message=f"orphaned ubiquityd {pid} to exit")
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    # It drained rather than died: the log says so, and the data directory's lock is free.
    log = (tmp_path / "orphan.stderr.log").read_text()
    assert "graceful shutdown started" in log, log[-2000:]
    again = Ubiquityd(server_binary, tmp_path, name="orphan").start()
    try:
        assert again.data_dir == Path(started["data_dir"])
    finally:
        assert again.stop() == 0
