"""Does anything in the gateway grow with the requests? A long mixed load, the gateway's footprint sampled.

Starts two fake upstreams (``fake_upstream.py``), a gateway config with two routes (``pair``: both
backends; ``flaky``: the second one, which the failure modes are sent to), keys (one plain, one at 60
requests a minute, one revoked mid-run, and a new one made and the last one revoked every 20 s), then
``llmdeck gateway up`` (the real one, in its own state folder), and drives it with a mix: complete
streams and plain replies on the four APIs, streams the client drops mid-way, clients that never read a
4 MB stream, upstream 500s, 400s, hangs (first-byte timeout), resets and streams broken mid-way; unknown
models, bad and revoked keys, a rate-limited key, distinct model names, paths, user agents and header
values (an attacker's cardinality), unknown response ids, request heads never finished.

Every ``--every`` seconds it samples the gateway's RSS, open fds, threads, asyncio tasks and gc objects
(a ``sitecustomize`` on the gateway's PYTHONPATH writes them, ``LLMDECK_SOAK_PROBE``), the /metrics page
(bytes, series), the in-flight gauge, the backends' outstanding counts (/gateway/status), the fakes' open
connections, the log files and the state folder; prints a table and writes ``--out`` (JSON).

  python benchmarks/gateway_growth_soak.py --minutes 10 --out benchmarks/results/gateway_growth_soak.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBE = """
import os, sys, threading, time, json
_out = os.environ.get("LLMDECK_SOAK_PROBE")
_trace = os.environ.get("LLMDECK_SOAK_TRACEMALLOC")
def _probe():
    import asyncio.tasks, gc, tracemalloc
    base, started, last, grown = None, time.monotonic(), 0.0, None
    while True:
        time.sleep(2)
        if not sys.argv[0].endswith("serve.py"):
            return  # the `gateway up` CLI, not the gateway
        for _ in range(5):
            try:
                tasks = list(asyncio.tasks._all_tasks)
                break
            except RuntimeError:
                continue
        else:
            tasks = []
        info = {"tasks": sum(not t.done() for t in tasks), "gc": len(gc.get_objects())}
        if _trace and not tracemalloc.is_tracing():  # from now on: the start (imports) is not slowed
            tracemalloc.start(int(_trace))
        if _trace and time.monotonic() - started > 60 and time.monotonic() - last > 30:
            snap = tracemalloc.take_snapshot()  # allocations grown since the first minute, every 30 s
            last = time.monotonic()
            if base is None:
                base = snap
            top = snap.compare_to(base, "traceback" if int(_trace) > 1 else "lineno")[:12]
            grown = [[s.size_diff, s.count_diff, s.traceback.format()[-12:]] for s in top]
        info["grown"] = grown
        with open(_out + ".tmp", "w") as f:
            json.dump(info, f)
        os.replace(_out + ".tmp", _out)
if _out:
    threading.Thread(target=_probe, daemon=True).start()
"""
APIS = {
    "chat": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    "completions": ("/v1/completions", {"prompt": "hi"}),
    "messages": ("/v1/messages", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}),
    "responses": ("/v1/responses", {"input": "hi"}),
}
# scenario -> weight
MIX = {
    "stream": 30, "plain": 20, "drop_mid": 6, "no_read": 1, "e500": 3, "e400": 3, "hang": 1, "reset": 2,
    "up_drop": 2, "unknown_model": 6, "bad_key": 4, "revoked_key": 2, "rate_limited": 4, "odd_path": 4,
    "resp_id": 3, "churn_key": 4, "half_head": 1, "metrics": 1,
}  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(env: dict[str, str], *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "llmdeck", *args], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"llmdeck {' '.join(args)}: {out.stderr}")
    return out.stdout.strip()


class Soak:
    def __init__(self, a: argparse.Namespace, work: Path) -> None:
        self.a, self.work = a, work
        self.state = work / "state"
        self.env = {
            **os.environ,
            "LLMDECK_STATE_DIR": str(self.state),
            "LLMDECK_SOAK_PROBE": str(work / "probe.json"),
        }
        probe = work / "probe"
        probe.mkdir()
        (probe / "sitecustomize.py").write_text(PROBE)
        if a.tracemalloc:
            self.env["LLMDECK_SOAK_TRACEMALLOC"] = str(a.tracemalloc)
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(probe), os.environ.get("PYTHONPATH")]))
        self.outcomes: Counter[str] = Counter()
        self.done = 0
        self.keys: dict[str, str] = {}
        self.churn: list[tuple[str, str]] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        self.no_read = asyncio.Semaphore(8)
        self.hangs = asyncio.Semaphore(4)

    # -- set-up
    def start(self) -> None:
        self.fakes = [free_port(), free_port()]
        for i, port in enumerate(self.fakes):
            argv = [
                sys.executable,
                str(HERE / "fake_upstream.py"),
                "--port",
                str(port),
                "--model",
                f"fake-{i}",
            ]
            self.procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        b1, b2 = (f"http://127.0.0.1:{p}" for p in self.fakes)
        config = self.work / "gateway.yaml"
        config.write_text(
            f"routes:\n  - model: pair\n    backends: [{b1}, {b2}]\n  - model: flaky\n    backends: [{b2}]\n"
            "timeouts: {connect_s: 2, first_byte_s: 2, response_s: 4, idle_s: 5}\n"
            "health: {interval_s: 5, timeout_s: 2}\n"
        )
        for name, extra in (("good", []), ("limited", ["--rpm", "60"]), ("victim", [])):
            self.keys[name] = cli(self.env, "keys", "create", name, *extra).splitlines()[-1]
        time.sleep(1.0)
        self.port = free_port()
        cli(self.env, "gateway", "up", "--config", str(config), "--port", str(self.port))
        record = json.loads((self.state / "gateway" / "gateway.json").read_text())
        self.pid = int(record["pid"])

    def stop(self) -> None:
        subprocess.run(
            [sys.executable, "-m", "llmdeck", "gateway", "down"], env=self.env, capture_output=True
        )
        for p in self.procs:
            p.terminate()
            p.wait(10)

    def rotate_churn_key(self, i: int) -> None:
        name = f"churn-{i}"
        self.churn.append((name, cli(self.env, "keys", "create", name).splitlines()[-1]))
        if len(self.churn) > 1:
            old, _ = self.churn.pop(0)
            cli(self.env, "keys", "revoke", old)

    # -- one request, raw HTTP/1.1 (Connection: close)
    async def send(
        self,
        method: str,
        path: str,
        body: object,
        key: str | None,
        headers: dict[str, str],
        *,
        read: str = "all",
    ) -> int:
        raw = json.dumps(body).encode() if body is not None else b""
        lines = [
            f"{method} {path} HTTP/1.1",
            "host: soak",
            "connection: close",
            f"content-length: {len(raw)}",
        ]
        if body is not None:
            lines.append("content-type: application/json")
        if key is not None:
            lines.append(f"authorization: Bearer {key}")
        lines += [f"{k}: {v}" for k, v in headers.items()]
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + raw)
            if read == "none":  # a client that never reads what it asked for
                await asyncio.sleep(20)
                return 0
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            status = int(head.split(b" ", 2)[1])
            if read == "some":
                await asyncio.wait_for(reader.read(300), 10)
                writer.transport.abort()
                return status
            while await asyncio.wait_for(reader.read(65536), 30):
                pass
            return status
        finally:
            writer.close()

    async def one(self, i: int) -> None:
        kind = random.choices(list(MIX), weights=list(MIX.values()))[0]
        api = random.choice(list(APIS))
        path, base = APIS[api]
        body: dict[str, object] = {**base, "model": "pair"}
        key: str | None = self.keys["good"]
        headers = {
            "user-agent": f"soak/{random.getrandbits(32):x}",
            f"x-soak-{i % 97}": f"{random.getrandbits(64):x}",
        }
        read = "all"
        if kind == "stream":
            body["stream"] = True
        elif kind == "drop_mid":
            body["stream"], headers["x-fake"], read = True, "slow", "some"
        elif kind in ("e500", "e400", "reset", "up_drop", "hang", "no_read"):
            body["model"] = "flaky"
            headers["x-fake"] = {"up_drop": "drop", "no_read": "big"}.get(kind, kind)
            body["stream"] = kind in ("up_drop", "no_read") or random.random() < 0.5
            read = "none" if kind == "no_read" else "all"
        elif kind == "unknown_model":
            body["model"] = f"m-{random.getrandbits(64):x}"
        elif kind == "bad_key":
            key = f"sk-llmdeck-{random.getrandbits(128):x}"
        elif kind == "revoked_key":
            key = self.keys.get("victim-revoked", self.keys["victim"])
        elif kind == "rate_limited":
            key = self.keys["limited"]
        elif kind == "odd_path":
            path = f"/v1/x{random.getrandbits(40):x}/{random.getrandbits(40):x}"
        elif kind == "resp_id":
            path, body = f"/v1/responses/resp_{random.getrandbits(64):x}", None
        elif kind == "churn_key":
            key = self.churn[-1][1] if self.churn else key
        elif kind == "half_head":
            return await self.half_head()
        elif kind == "metrics":
            path, body, key = "/metrics", None, None
        method = "GET" if body is None else "POST"
        gate = self.no_read if kind == "no_read" else self.hangs if kind == "hang" else None
        try:
            if gate is not None:
                if gate.locked():
                    return
                async with gate:
                    status = await self.send(method, path, body, key, headers, read=read)
            else:
                status = await self.send(method, path, body, key, headers, read=read)
            self.outcomes[f"{kind}:{status}"] += 1
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
            self.outcomes[f"{kind}:{type(exc).__name__}"] += 1
        self.done += 1

    async def half_head(self) -> None:
        _, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: soak\r\n")
        await asyncio.sleep(random.uniform(1, 5))
        writer.transport.abort()
        self.outcomes["half_head:aborted"] += 1

    async def worker(self, i: int, until: float) -> None:
        n = 0
        while time.monotonic() < until:
            n += 1
            await self.one(i * 100003 + n)

    # -- sampling
    async def get(self, path: str, port: int | None = None) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port or self.port)
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nhost: soak\r\nconnection: close\r\n\r\n".encode())
            data = await asyncio.wait_for(reader.read(-1), 60)
            return data.split(b"\r\n\r\n", 1)[1]
        finally:
            writer.close()

    async def sample(self, t0: float) -> dict[str, object]:
        proc = Path(f"/proc/{self.pid}")
        status = dict(
            line.split(":", 1) for line in (proc / "status").read_text().splitlines() if ":" in line
        )
        metrics = (await self.get("/metrics")).decode()
        series = [line for line in metrics.splitlines() if line and not line.startswith("#")]
        in_flight = sum(
            float(s.rsplit(" ", 1)[1]) for s in series if s.startswith("llmdeck_gateway_in_flight{")
        )
        routes = json.loads(await self.get("/gateway/status"))["routes"]
        outstanding = {b["url"]: b.get("outstanding") for r in routes for b in r["backends"]}
        fakes = [json.loads(await self.get("/stats", p))["open"] for p in self.fakes]
        logs = sorted((self.state / "logs").glob("gateway.log*"))
        try:
            probe = json.loads((self.work / "probe.json").read_text())
        except (OSError, ValueError):
            probe = {}
        return {
            "t_s": round(time.monotonic() - t0, 1),
            "requests": self.done,
            "rss_mib": round(int(status["VmRSS"].split()[0]) / 1024, 1),
            "fds": len(os.listdir(proc / "fd")),
            "threads": int(status["Threads"]),
            "tasks": probe.get("tasks"),
            "gc_objects": probe.get("gc"),
            "grown": probe.get("grown"),
            "metrics_bytes": len(metrics),
            "series": len(series),
            "in_flight": in_flight,
            "outstanding": sum(v or 0 for v in outstanding.values()),
            "fake_conns": sum(fakes),
            "log_bytes": sum(p.stat().st_size for p in logs),
            "state_bytes": sum(p.stat().st_size for p in self.state.rglob("*") if p.is_file()),
        }

    async def run(self) -> list[dict[str, object]]:
        t0 = time.monotonic()
        until = t0 + self.a.minutes * 60
        workers = [asyncio.create_task(self.worker(i, until)) for i in range(self.a.concurrency)]
        samples, churned, revoked = [], 0, False
        while time.monotonic() < until:
            await asyncio.sleep(self.a.every)
            now = time.monotonic() - t0
            if now >= 20 * (churned + 1):
                churned += 1
                await asyncio.to_thread(self.rotate_churn_key, churned)
            if not revoked and now > self.a.minutes * 20:  # a third of the way: the victim key is revoked
                revoked = True
                await asyncio.to_thread(cli, self.env, "keys", "revoke", "victim")
                self.keys["victim-revoked"] = self.keys["victim"]
            samples.append(await self.sample(t0))
            print(row(samples[-1]), flush=True)
        await asyncio.gather(*workers)
        await asyncio.sleep(self.a.every)  # the last streams and held clients are over: what is left
        samples.append(await self.sample(t0))
        print(row(samples[-1]), flush=True)
        return samples


COLUMNS = ("t_s", "requests", "rss_mib", "fds", "threads", "tasks", "gc_objects", "series", "metrics_bytes",
           "in_flight", "outstanding", "fake_conns", "log_bytes", "state_bytes")  # fmt: skip


def row(s: dict[str, object]) -> str:
    return " ".join(f"{s[c]!s:>10}" for c in COLUMNS)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--concurrency", type=int, default=16, help="client workers, each one request at a time")
    p.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    p.add_argument("--out", type=Path, default=None, help="the samples and outcomes as JSON")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        help="frames: the gateway under tracemalloc, its growth since minute 1",
    )
    a = p.parse_args()
    random.seed(a.seed)
    with tempfile.TemporaryDirectory(prefix="llmdeck-soak-") as tmp:
        soak = Soak(a, Path(tmp))
        try:
            soak.start()
            print(" ".join(f"{c:>10}" for c in COLUMNS), flush=True)
            samples = asyncio.run(soak.run())
        finally:
            soak.stop()
    outcomes = dict(sorted(soak.outcomes.items()))
    print(json.dumps(outcomes, indent=1))
    if a.out is not None:
        result = {
            "schema": "gateway_growth_soak/1",
            "args": {k: str(v) for k, v in vars(a).items()},
            "samples": samples,
            "outcomes": outcomes,
        }
        a.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
