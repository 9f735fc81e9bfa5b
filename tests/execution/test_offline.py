"""The offline guard of converted runtimes' workers (anpred.execution.offline).

The guard is an audit hook, which cannot be removed: each check runs in a fresh process.
"""

from __future__ import annotations

import json
import subprocess
import sys

from anpred.execution.offline import is_installer, offline_environment

PROBE = r"""
import json, os, socket, subprocess, sys, threading
from anpred.execution.offline import install_guard
guard = install_guard()
results = {}
def attempt(name, call):
    try:
        call()
        results[name] = "done"
    except OSError as err:
        results[name] = type(err).__name__
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
attempt("loopback", lambda: socket.create_connection(server.getsockname(), timeout=2).close())
attempt("localhost lookup", lambda: socket.getaddrinfo("localhost", 80))
attempt("remote connect", lambda: socket.create_connection(("198.51.100.7", 443), timeout=2))
attempt("remote lookup", lambda: socket.getaddrinfo("pypi.org", 443))
attempt("pip", lambda: subprocess.run([sys.executable, "-m", "pip", "--version"], check=True))
attempt("pip3 shell", lambda: os.system("pip3 install aliyun-log-python-sdk"))
attempt("other process", lambda: subprocess.run(["true"], check=True))
print(json.dumps({"results": results, "record": guard.record(),
                  "no_index": os.environ.get("PIP_NO_INDEX")}))
"""


def test_the_guard_refuses_network_and_installers_and_records_them() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["results"] == {
        "loopback": "done",
        "localhost lookup": "done",
        "remote connect": "NetworkBlocked",
        "remote lookup": "gaierror",
        "pip": "InstallBlocked",
        "pip3 shell": "InstallBlocked",
        "other process": "done",
    }
    assert out["record"]["refused"] == 4
    assert [b["target"] for b in out["record"]["blocked"]][:2] == ["198.51.100.7:443", "pypi.org"]
    assert out["no_index"] == "1"


def test_installer_commands_are_recognised() -> None:
    assert is_installer(["/usr/bin/python3", "-m", "pip", "install", "x"])
    assert is_installer("pip install -U aliyun-log-python-sdk")
    assert is_installer(["/venv/bin/pip3.11", "install", "x"])
    assert is_installer("uv pip install x") and is_installer(["conda", "install", "x"])
    assert not is_installer(["pnnx", "model.pt", "inputshape=[1,3,640,640]"])
    assert not is_installer("python -m anpred.execution.worker job.json")
    assert offline_environment()["PIP_NO_INDEX"] == "1"
