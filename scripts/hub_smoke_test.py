"""Smoke test of the classroom route: a real JupyterHub on 127.0.0.1 runs a lesson for a learner.

What it does, each step bounded in time:

1. writes a throwaway hub configuration (DummyAuthenticator, SimpleLocalProcessSpawner, the
   configurable-http-proxy found by ``--proxy``, every file under one temporary folder);
2. starts ``jupyterhub`` in its own process group and waits for its REST API;
3. creates the user ``learner`` and spawns their single-user server (``--allow-root`` so that it
   also runs as root in a container), with ``HISPARSE_NUMBA_BACKEND=simulator``;
4. uploads the lesson into the learner's home through the server's contents API, as the hub's
   postStart hook would have copied it, and reads it back;
5. starts a kernel through the server's kernels API and executes every code cell over the
   kernel's websocket; a cell tagged ``raises-exception`` must raise, any other must not;
6. stops the kernel, the server and the hub, then ends any process it started that is still
   alive (found by a marker in its environment), and removes the folder.

Usage (from the repository root)::

    python scripts/hub_smoke_test.py lessons/00-hot-buffer.ipynb
    python scripts/hub_smoke_test.py lessons/00-*.ipynb --proxy .hub-node/node_modules/.bin/configurable-http-proxy

Needs ``pip install jupyterhub`` and ``npm install --prefix .hub-node configurable-http-proxy``
(docs/workshop.md). Exit status 0 when every cell ran as expected, 1 otherwise.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from process_marks import marked_processes  # scripts/, beside this file

ROOT = Path(__file__).resolve().parents[1]
USER = "learner"
MARKER = "HISPARSE_HUB_SMOKE_ID"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_proxy(given: str | None) -> str:
    candidates = [given] if given else [
        str(ROOT / ".hub-node/node_modules/.bin/configurable-http-proxy"),
        shutil.which("configurable-http-proxy") or "",
    ]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    sys.exit("configurable-http-proxy not found: npm install --prefix .hub-node configurable-http-proxy "
             "(or pass --proxy PATH)")


HUB_CONFIG = """
c = get_config()  # noqa: F821
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.pid_file = {work!r} + "/proxy.pid"
c.JupyterHub.db_url = "sqlite:///" + {work!r} + "/hub.sqlite"
c.JupyterHub.cookie_secret_file = {work!r} + "/cookie_secret"
c.JupyterHub.pid_file = {work!r} + "/hub.pid"
c.JupyterHub.cleanup_servers = True
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {work!r} + "/home/{{username}}"
c.Spawner.cmd = [{singleuser!r}]
c.Spawner.args = ["--allow-root", "--ServerApp.ip=127.0.0.1"]
c.Spawner.start_timeout = {step_timeout}
c.Spawner.http_timeout = {step_timeout}
c.Spawner.environment = {{
    "HISPARSE_NUMBA_BACKEND": "simulator",
    "PYTHONPATH": {root!r},
    {marker!r}: {smoke_id!r},
}}
c.JupyterHub.services = [{{"name": "smoke", "api_token": {token!r}}}]
c.JupyterHub.load_roles = [{{
    "name": "smoke",
    "scopes": ["admin:users", "admin:servers", "access:servers", "read:users"],
    "services": ["smoke"],
}}]
"""


class Hub:
    def __init__(self, base: str, token: str):
        self.base, self.token = base.rstrip("/"), token

    def request(self, method: str, path: str, body=None, timeout: float = 30):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as response:
            text = response.read().decode()
            return response.status, (json.loads(text) if text.strip() else None)


def wait_for(what: str, check, timeout: float, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (urllib.error.URLError, ConnectionError, OSError) as e:
            last = e
        time.sleep(interval)
    raise TimeoutError(f"{what}: not ready after {timeout:.0f} s" + (f" ({last})" if last else ""))


def execute_cells(hub: Hub, ws_base: str, notebook: dict, kernel_name: str, cell_timeout: float) -> list[str]:
    """Run every code cell of ``notebook`` in a new kernel of the learner's server; the failures."""
    import websocket  # websocket-client (a jupyter_server dependency)

    _, kernel = hub.request("POST", f"/user/{USER}/api/kernels", {"name": kernel_name})
    session = uuid.uuid4().hex
    ws = websocket.create_connection(f"{ws_base}/user/{USER}/api/kernels/{kernel['id']}/channels",
                                     header=[f"Authorization: token {hub.token}"], timeout=cell_timeout)
    failures = []
    try:
        code_cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        for n, cell in enumerate(code_cells, 1):
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            expect_error = "raises-exception" in cell.get("metadata", {}).get("tags", [])
            msg_id = uuid.uuid4().hex
            ws.send(json.dumps({
                "header": {"msg_id": msg_id, "username": USER, "session": session,
                           "msg_type": "execute_request", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": source, "silent": False, "store_history": True,
                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
            }))
            started, status, error, idle, outputs = time.monotonic(), None, None, False, 0
            while status is None or not idle:
                if time.monotonic() - started > cell_timeout:
                    raise TimeoutError(f"cell {n}: no reply after {cell_timeout:.0f} s")
                msg = json.loads(ws.recv())
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind = msg["header"]["msg_type"]
                if kind == "execute_reply":
                    status = msg["content"]["status"]
                elif kind == "error":
                    error = f"{msg['content']['ename']}: {msg['content']['evalue']}"
                elif kind in ("stream", "display_data", "execute_result"):
                    outputs += 1
                elif kind == "status" and msg["content"]["execution_state"] == "idle":
                    idle = True
            raised = status == "error"
            verdict = "ok" if raised == expect_error else "FAIL"
            note = f" (raised {error})" if raised else ""
            print(f"  cell {n}/{len(code_cells)}: {verdict}, {outputs} outputs, "
                  f"{time.monotonic() - started:.1f} s{note}", flush=True)
            if raised != expect_error:
                failures.append(f"cell {n}: " + (error or "expected an exception, none raised"))
    finally:
        ws.close()
        try:
            hub.request("DELETE", f"/user/{USER}/api/kernels/{kernel['id']}")
        except (urllib.error.URLError, OSError):
            pass
    return failures


def stop(pids: list[int], grace: float = 5.0):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lesson", nargs="?", help="lesson notebook (default: lessons/00-*.ipynb)")
    parser.add_argument("--proxy", help="configurable-http-proxy executable")
    parser.add_argument("--step-timeout", type=float, default=120, help="seconds per hub step")
    parser.add_argument("--cell-timeout", type=float, default=300, help="seconds per lesson cell")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for the whole test")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    args = parser.parse_args(argv)

    lesson = Path(args.lesson or (sorted(glob.glob(str(ROOT / "lessons/00-*.ipynb"))) or [""])[0])
    if not lesson.is_file():
        sys.exit(f"no lesson notebook at {lesson!s}")
    proxy = find_proxy(args.proxy)
    bindir = Path(sys.executable).parent
    jupyterhub, singleuser = bindir / "jupyterhub", bindir / "jupyterhub-singleuser"
    if not jupyterhub.exists():
        sys.exit(f"jupyterhub is not installed beside {sys.executable}: pip install jupyterhub")

    def overall_timeout(signum, frame):
        raise TimeoutError(f"the whole smoke test took more than {args.timeout:.0f} s")

    signal.signal(signal.SIGALRM, overall_timeout)
    signal.alarm(int(args.timeout))

    work = tempfile.mkdtemp(prefix="hisparse-hub-")
    token, smoke_id = secrets.token_hex(16), uuid.uuid4().hex
    port = free_port()
    config = HUB_CONFIG.format(port=port, hub_port=free_port(), proxy_api_port=free_port(),
                               proxy=proxy, work=work, singleuser=str(singleuser),
                               step_timeout=int(args.step_timeout), root=str(ROOT),
                               marker=MARKER, smoke_id=smoke_id, token=token)
    (Path(work) / "jupyterhub_config.py").write_text(config)
    log = open(Path(work) / "hub.log", "w")
    env = dict(os.environ, **{MARKER: smoke_id})
    print(f"hub: starting on http://127.0.0.1:{port} (work folder {work})", flush=True)
    started = time.monotonic()
    hub_process = subprocess.Popen([str(jupyterhub), "-f", "jupyterhub_config.py"], cwd=work, env=env,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    hub = Hub(f"http://127.0.0.1:{port}", token)
    failures: list[str] = []
    try:
        def step(name, fn):
            t = time.monotonic()
            result = fn()
            print(f"{name}: {time.monotonic() - t:.1f} s", flush=True)
            return result

        step("hub: API up", lambda: wait_for(
            "hub API", lambda: hub_process.poll() is None and hub.request("GET", "/hub/api/")[0] == 200,
            args.step_timeout))
        step(f"hub: user {USER} created", lambda: hub.request("POST", f"/hub/api/users/{USER}"))
        step("hub: spawn requested", lambda: hub.request("POST", f"/hub/api/users/{USER}/server",
                                                         timeout=args.step_timeout))
        step("hub: server ready", lambda: wait_for(
            "single-user server",
            lambda: hub.request("GET", f"/hub/api/users/{USER}")[1]["servers"].get("", {}).get("ready"),
            args.step_timeout))

        notebook = json.loads(lesson.read_text())
        target = f"lessons/{lesson.name}"
        hub.request("PUT", f"/user/{USER}/api/contents/lessons", {"type": "directory"})
        step(f"server: {target} uploaded", lambda: hub.request(
            "PUT", f"/user/{USER}/api/contents/{target}",
            {"type": "notebook", "format": "json", "content": notebook}))
        _, model = hub.request("GET", f"/user/{USER}/api/contents/{target}?content=1")
        assert model["content"]["cells"], "the uploaded lesson came back empty"

        _, specs = hub.request("GET", f"/user/{USER}/api/kernelspecs")
        wanted = notebook.get("metadata", {}).get("kernelspec", {}).get("name")
        kernel_name = wanted if wanted in specs["kernelspecs"] else specs["default"]
        print(f"server: executing {lesson.name} in kernel {kernel_name!r}", flush=True)
        failures = step("server: lesson executed", lambda: execute_cells(
            hub, f"ws://127.0.0.1:{port}", model["content"], kernel_name, args.cell_timeout))
        step("hub: server stopped", lambda: hub.request("DELETE", f"/hub/api/users/{USER}/server",
                                                        timeout=args.step_timeout))
    except Exception as e:  # report, then clean up whatever happened
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        signal.alarm(0)
        stop([hub_process.pid])
        try:
            hub_process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(hub_process.pid, signal.SIGKILL)
        # the hub, its proxy, the server and the kernel all inherit the marker
        leftovers = marked_processes(MARKER, smoke_id)
        if leftovers:
            print(f"cleanup: ending leftover processes {leftovers}", flush=True)
            stop(leftovers)
        log.close()
        if failures:
            print("hub log tail:\n" + "".join(open(Path(work) / "hub.log").readlines()[-30:]))
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    elapsed = time.monotonic() - started
    if failures:
        print(f"FAILED after {elapsed:.0f} s:\n  " + "\n  ".join(failures))
        return 1
    print(f"PASSED: {lesson.name} ran through JupyterHub in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
