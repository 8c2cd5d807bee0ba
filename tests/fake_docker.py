#!/usr/bin/env python3
"""fake_docker: a stand-in `docker` client (docker 28's output formats) whose containers are local
processes: `run -d` starts a tiny fake OpenAI server (/health, /v1/models, chat) on the published
port, its output kept as docker's json-file driver keeps it (a JSON line per line, stamped, one longer
than 16 KiB in stamped parts) in a file that `logs` reads (-f, -t, --tail, --since as docker does:
its -t prints each part's stamp, inside a long line too); `stop`/`rm` end it. GET /spam?n=N on the
server logs N more lines (and one of 40,000 bytes). State in $FAKE_DOCKER_STATE (JSON).

Faults, from the environment: FAKE_DOCKER_HANG=VERB (that verb sleeps an hour), FAKE_DOCKER_RUN_ERR=
conflict|port|denied, FAKE_DOCKER_PULL_ERR=denied, FAKE_DOCKER_CONTAINER=oom|restarting|binary|huge|chatty
(what the container does), FAKE_DOCKER_NO_IMAGES=1 (every image missing until pulled).
Link it as `docker` first on PATH (tests: write a tiny shell wrapper)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

STATE = Path(os.environ.get("FAKE_DOCKER_STATE", "/tmp/fake-docker-state.json"))
VALUE_FLAGS = {
    "--name",
    "--label",
    "--gpus",
    "--ipc",
    "--ulimit",
    "--log-opt",
    "-p",
    "-v",
    "-e",
    "--network",
    "--restart",
    "--entrypoint",
    "--type",
    "--format",
    "-t",
    "--filter",
    "--tail",
}


@contextlib.contextmanager
def locked() -> Any:
    STATE.parent.mkdir(parents=True, exist_ok=True)
    with open(str(STATE) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(STATE.read_text()) if STATE.exists() else {"images": [], "containers": {}}
        yield data
        STATE.write_text(json.dumps(data))


def load() -> dict[str, Any]:
    return json.loads(STATE.read_text()) if STATE.exists() else {"images": [], "containers": {}}


def err(msg: str, rc: int = 1) -> None:
    sys.stderr.write(msg + "\n")
    sys.exit(rc)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def find(data: dict[str, Any], ref: str) -> dict[str, Any] | None:
    for c in data["containers"].values():
        if ref in (c["name"], c["id"]) or (len(ref) >= 12 and c["id"].startswith(ref)):
            return c
    return None


def state_of(c: dict[str, Any]) -> dict[str, Any]:
    running = alive(c["pid"])
    ec_file = Path(c["log"] + ".exit")
    code = int(ec_file.read_text() or 0) if ec_file.exists() and not running else 0
    st = {
        "Status": "running" if running else "exited",
        "Running": running,
        "Restarting": False,
        "OOMKilled": False,
        "Dead": False,
        "Pid": c["pid"] if running else 0,
        "ExitCode": code,
        "Error": "",
        "StartedAt": "2026-11-29T20:35:11.000000000Z",
        "FinishedAt": "0001-01-01T00:00:00Z",
    }
    if c.get("mode") == "oom" and not running:
        st.update(OOMKilled=True, ExitCode=137)
    if c.get("mode") == "restarting" and not running and not c.get("stopped"):
        st.update(Status="restarting", Running=True, Restarting=True, ExitCode=1, Pid=0)
    return st


def cmd_version(args: list[str]) -> None:
    print(
        json.dumps(
            {
                "Client": {"Version": "28.2.2", "ApiVersion": "1.50"},
                "Server": {"Version": "28.2.2", "ApiVersion": "1.50"},
            }
        )
    )


def cmd_info(args: list[str]) -> None:
    print('"json-file"')


def cmd_image(args: list[str]) -> None:
    image = args[-1]
    if args[0] == "inspect":
        if image in load()["images"] or not os.environ.get("FAKE_DOCKER_NO_IMAGES"):
            print("sha256:" + "ab" * 32)
            return
        print("[]")
        err(f"Error response from daemon: No such image: {image}")


def cmd_pull(args: list[str]) -> None:
    image = args[-1]
    if os.environ.get("FAKE_DOCKER_PULL_ERR") == "denied":
        repo = image.split(":")[0]
        err(
            f"Error response from daemon: pull access denied for {repo}, repository does not exist or "
            "may require 'docker login': denied: requested access to the resource is denied"
        )
    tag = image.rsplit(":", 1)[-1]
    print(f"{tag}: Pulling from {image.split(':')[0]}", flush=True)
    layers = ["84ed7d2f608f", "be2bf1c4a48d", "a5bdc6303093"]
    for layer in layers:
        print(f"{layer}: Pulling fs layer", flush=True)
    for layer in layers:
        time.sleep(0.3)
        print(f"{layer}: Pull complete", flush=True)
    print("Digest: sha256:" + "cd" * 32)
    print(f"Status: Downloaded newer image for {image}")
    print(f"docker.io/{image}")
    with locked() as data:
        data["images"].append(image)


def parse_run(args: list[str]) -> tuple[dict[str, list[str]], set[str], list[str]]:
    opts: dict[str, list[str]] = {}
    bools: set[str] = set()
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] in VALUE_FLAGS:
            opts.setdefault(args[i], []).append(args[i + 1])
            i += 2
        else:
            bools.add(args[i])
            i += 1
    return opts, bools, args[i:]


def cmd_run(args: list[str]) -> None:
    opts, bools, rest = parse_run(args)
    image, command = rest[0], rest[1:]
    if "--entrypoint" in opts:
        print("0.22.0")
        return
    fault = os.environ.get("FAKE_DOCKER_RUN_ERR")
    name = opts.get("--name", ["x"])[0]
    port = int(opts.get("-p", ["0:8000"])[0].rsplit(":", 1)[-1])
    with locked() as data:
        old = find(data, name)
        if fault == "conflict" or old is not None:
            cid = old["id"] if old else "f" * 64
            err(
                f'docker: Error response from daemon: Conflict. The container name "/{name}" is already '
                f'in use by container "{cid}". You have to remove (or rename) that container to be able '
                "to reuse that name.\n\nRun 'docker run --help' for more information",
                125,
            )
        if fault == "port":
            err(
                "docker: Error response from daemon: failed to set up container networking: driver failed "
                f"programming external connectivity on endpoint {name}: Bind for 0.0.0.0:{port} failed: "
                "port is already allocated\n\nRun 'docker run --help' for more information",
                125,
            )
        if image not in data["images"] and os.environ.get("FAKE_DOCKER_NO_IMAGES"):
            sys.stderr.write(f"Unable to find image '{image}' locally\n")
            data["images"].append(image)
        cid = os.urandom(32).hex()
        logdir = STATE.parent / "logs"
        logdir.mkdir(parents=True, exist_ok=True)
        log = str(logdir / f"{cid}.log")
        env = dict(os.environ)
        for e in opts.get("-e", []):
            k, eq, v = e.partition("=")
            if eq:
                env[k] = v
        mode = os.environ.get("FAKE_DOCKER_CONTAINER", "ok")
        argv = [sys.executable, __file__, "_container", log, mode, *command]
        if "-d" not in bools:
            os.environ.update(env)
            os.execv(sys.executable, [*argv[:3], "-", mode, *command])
        Path(log).touch()
        proc = subprocess.Popen(
            [sys.executable, __file__, "_copier", log, *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # not `docker run`'s: its reader waits for their end
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        labels = dict(x.split("=", 1) for x in opts.get("--label", []))
        data["containers"][cid] = {
            "id": cid,
            "name": name,
            "pid": proc.pid,
            "log": log,
            "port": port,
            "image": image,
            "labels": labels,
            "mode": mode,
        }
    print(cid)


def cmd_inspect(args: list[str]) -> None:
    ref = args[-1]
    c = find(load(), ref)
    if c is None:
        print("[]")
        err(f"Error response from daemon: No such container: {ref}")
    with locked() as data:
        if c.get("mode") == "restarting" and not alive(c["pid"]):
            data["containers"][c["id"]]["restarts"] = c.get("restarts", 0) + 1
    obj = {
        "Id": c["id"],
        "Name": "/" + c["name"],
        "State": state_of(c),
        "Image": "sha256:" + "ab" * 32,
        "RestartCount": c.get("restarts", 0),
        "Config": {"Image": c["image"], "Labels": c["labels"]},
    }
    print(json.dumps([obj], indent=4))


def cmd_ps(args: list[str]) -> None:
    for c in load()["containers"].values():
        st = state_of(c)
        labels = ",".join(f"{k}={v}" for k, v in c["labels"].items())
        status = "Up 2 minutes" if st["Running"] else f"Exited ({st['ExitCode']}) 1 second ago"
        print(
            json.dumps(
                {
                    "ID": c["id"],
                    "Names": c["name"],
                    "Image": c["image"],
                    "Labels": labels,
                    "State": st["Status"],
                    "Status": status,
                    "Ports": "",
                    "CreatedAt": "",
                    "RunningFor": "2 minutes ago",
                }
            )
        )


PART = 16 * 1024  # docker's copier keeps a longer line in parts of this size


def copier(log: str, argv: list[str]) -> None:
    """docker's json-file logger: the container's two streams, each line a JSON entry stamped when read."""
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lock = threading.Lock()
    out = open(log, "ab")  # noqa: SIM115 (open as long as the container runs)

    def pump(stream: Any, name: str) -> None:
        for line in iter(stream.readline, b""):
            ns = time.time_ns()
            ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + f".{ns % 10**9:09d}Z"
            body, end = (line[:-1], b"\n") if line.endswith(b"\n") else (line, b"")
            parts = [body[i : i + PART] for i in range(0, len(body), PART)] or [b""]
            parts[-1] += end
            entries = [{"log": p.decode("utf-8", "replace"), "stream": name, "time": ts} for p in parts]
            with lock:
                out.write(b"".join(json.dumps(e).encode() + b"\n" for e in entries))
                out.flush()

    pumps = [
        threading.Thread(target=pump, args=(s, n))
        for s, n in ((child.stdout, "stdout"), (child.stderr, "stderr"))
    ]
    for t in pumps:
        t.start()
    for t in pumps:
        t.join()
    sys.exit(child.wait())


def _entries(path: str, pos: int) -> tuple[list[dict[str, Any]], int]:
    """The whole JSON entries of the log after ``pos``, and the position after them."""
    with open(path, "rb") as fh:
        fh.seek(pos)
        data = fh.read()
    whole = data[: data.rfind(b"\n") + 1]
    return [json.loads(x) for x in whole.splitlines()], pos + len(whole)


def _print(entries: list[dict[str, Any]], stamps: bool) -> None:
    for e in entries:
        stream = sys.stdout.buffer if e["stream"] == "stdout" else sys.stderr.buffer
        stream.write(((e["time"] + " ") if stamps else "").encode() + e["log"].encode())
        stream.flush()


def cmd_logs(args: list[str]) -> None:
    follow, stamps = "-f" in args or "--follow" in args, "-t" in args or "--timestamps" in args
    tail = args[args.index("--tail") + 1] if "--tail" in args else "all"
    since = args[args.index("--since") + 1] if "--since" in args else ""
    c = find(load(), args[-1])
    if c is None:
        err(f"Error response from daemon: No such container: {args[-1]}")
    entries, pos = _entries(c["log"], 0)
    entries = [e for e in entries if e["time"] >= since]
    if tail != "all":
        entries = entries[len(entries) - int(tail) :] if int(tail) else []
    _print(entries, stamps)
    while follow:
        new, pos = _entries(c["log"], pos)
        _print(new, stamps)
        if not new and not alive(c["pid"]):
            return
        time.sleep(0.2)


def _end(c: dict[str, Any], grace: float) -> None:
    if not alive(c["pid"]):
        return
    with contextlib.suppress(OSError):
        os.killpg(c["pid"], signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive(c["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(c["pid"]):
        with contextlib.suppress(OSError):
            os.killpg(c["pid"], signal.SIGKILL)
        Path(c["log"] + ".exit").write_text("137")


def cmd_stop(args: list[str]) -> None:
    opts, _, rest = parse_run(args)
    c = find(load(), rest[-1])
    if c is None:
        err(f"Error response from daemon: No such container: {rest[-1]}")
    time.sleep(float(os.environ.get("FAKE_DOCKER_STOP_S", "0")))  # a busy engine: the stop takes a while
    _end(c, float(opts.get("-t", ["10"])[0]))
    with locked() as data:
        data["containers"][c["id"]]["stopped"] = True
    print(rest[-1])


def cmd_kill(args: list[str]) -> None:
    c = find(load(), args[-1])
    if c is None:
        err(f"Error response from daemon: No such container: {args[-1]}")
    _end(c, 0)
    print(args[-1])


def cmd_rm(args: list[str]) -> None:
    c = find(load(), args[-1])
    if c is None:
        err(f"Error response from daemon: No such container: {args[-1]}")
    if alive(c["pid"]) and "-f" not in args:
        err(f'Error response from daemon: cannot remove container "/{c["name"]}": container is running')
    _end(c, 0)
    with locked() as data:
        data["containers"].pop(c["id"], None)
    print(args[-1])


def container(log: str, mode: str, command: list[str]) -> None:
    """The container's main process: vLLM-like lines, then a fake OpenAI server on --port."""
    from http.server import ThreadingHTTPServer

    from http_fakes import JsonHandler  # this script's folder (tests/) is first on its import path

    def arg(flag: str, default: str) -> str:
        return command[command.index(flag) + 1] if flag in command else default

    port, served = int(arg("--port", "8000")), arg("--served-model-name", "model")
    key = os.environ.get("VLLM_API_KEY")
    print("INFO 11-29 20:35:12 [api_server.py:1] vLLM API server version 0.22.0", flush=True)
    print(f"INFO 11-29 20:35:12 [utils.py:1] non-default args: {command}", flush=True)
    if mode in ("oom", "restarting"):
        time.sleep(1.5)
        print("ERROR: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
        if mode == "oom":
            Path(log + ".exit").write_text("137") if log != "-" else None
            os.kill(os.getpid(), signal.SIGKILL)
        sys.exit(1)
    if mode == "loading":  # a start-up that never ends (a model still loading): never ready
        while True:
            time.sleep(0.2)
    if mode == "binary":
        sys.stdout.buffer.write(b"bad bytes \xff\xfe\x80 here \x1b[31mred\x1b[0m\n")
        sys.stdout.flush()
    if mode == "chatty":  # a start-up that logs more than `docker logs --tail 2000` holds
        for i in range(3000):
            print(f"INFO 11-29 20:35:13 [loader.py:1] start-up line {i:04d}", flush=i % 500 == 0)
        sys.stdout.flush()
    if mode == "huge":
        line = b"INFO spam " + b"x" * 200 + b"\n"
        sys.stdout.buffer.write(line * 400_000)  # ~84 MB
        sys.stdout.buffer.write(b"y" * (30 << 20) + b"\n")  # one 30 MB line
        sys.stdout.flush()

    class H(JsonHandler):
        def log_message(self, fmt: str, *a: Any) -> None:  # vLLM's access line, for `docker logs`
            print(
                f'INFO:     127.0.0.1 - "{self.command} {self.path}" {a[1] if len(a) > 1 else ""}', flush=True
            )

        def _authed(self) -> bool:
            if key and self.headers.get("Authorization") != f"Bearer {key}":
                self._json(401, {"error": "Unauthorized"})
                return False
            return True

        def do_GET(self) -> None:
            if self.path.startswith("/spam?n="):  # lines logged while serving, one past docker's 16 KiB
                for i in range(int(self.path.split("=", 1)[1])):
                    print(f"INFO 11-29 20:40:00 [serving.py:1] later line {i:05d}")
                print("INFO long " + "z" * 40_000)
                sys.stdout.flush()
                self._json(200, {})
            elif self.path == "/health":
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/version":
                self._json(200, {"version": "0.22.0"})
            elif self.path == "/v1/models" and self._authed():
                self._json(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {
                                "id": served,
                                "object": "model",
                                "max_model_len": int(arg("--max-model-len", "4096")),
                                "root": command[0] if command else served,
                            }
                        ],
                    },
                )
            elif self.path == "/metrics":
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path != "/v1/models":
                self._json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length", "0") or 0)
            body = json.loads(self.rfile.read(n) or b"{}")
            if not self._authed():
                return
            if body.get("stream"):
                delta = {
                    "id": "x",
                    "object": "chat.completion.chunk",
                    "model": served,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}],
                }
                end = {
                    "id": "x",
                    "object": "chat.completion.chunk",
                    "model": served,
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                }
                data = "".join(f"data: {json.dumps(e)}\n\n" for e in (delta, end)) + "data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())
                return
            self._json(
                200,
                {
                    "id": "x",
                    "object": "chat.completion",
                    "model": served,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "Hi"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                },
            )

    def on_term(signum: int, frame: Any) -> None:
        print("INFO:     Shutting down", flush=True)
        if log != "-":
            Path(log + ".exit").write_text("0")
        sys.exit(0 if signum == signal.SIGTERM else 130)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    server = ThreadingHTTPServer(("127.0.0.1", port), H)
    print(f"INFO 11-29 20:35:20 [api_server.py:2] Starting vLLM API server 0 on http://0.0.0.0:{port}")
    print("INFO:     Application startup complete.", flush=True)
    server.serve_forever()


def main() -> None:
    argv = sys.argv[1:]
    if argv and argv[0] == "_container":
        container(argv[1], argv[2], argv[3:])
        return
    if argv and argv[0] == "_copier":
        copier(argv[1], argv[2:])
        return
    verb = argv[0] if argv else ""
    if os.environ.get("FAKE_DOCKER_HANG") == verb:
        time.sleep(3600)
    STATE.parent.mkdir(parents=True, exist_ok=True)
    with open(STATE.parent / "calls.log", "a") as fh:
        fh.write(json.dumps(sys.argv[1:]) + "\n")
    handlers = {
        "version": cmd_version,
        "info": cmd_info,
        "image": cmd_image,
        "pull": cmd_pull,
        "run": cmd_run,
        "inspect": cmd_inspect,
        "ps": cmd_ps,
        "logs": cmd_logs,
        "stop": cmd_stop,
        "kill": cmd_kill,
        "rm": cmd_rm,
    }
    if verb not in handlers:
        err(f"docker: unknown command: docker {verb}", 1)
    handlers[verb](argv[1:])


if __name__ == "__main__":
    main()
