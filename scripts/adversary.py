#!/usr/bin/env python3
"""Hostile-client checks against a real errbook binary: each attack starts the servers
it needs on loopback, attacks, measures, and prints `held` or `broke` with its figures.

    scripts/adversary.sh [--bin target/release/errbook] [--kb kb] [--only 1,2] [--quick]

Numbers follow the hardening issue's list. Standard library only; every loop is bounded
in count and time, and every server started here is stopped before the script ends.
"""

import argparse
import base64
import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import zlib

RESULTS = []


def report(number, name, held, figures):
    RESULTS.append((number, held))
    print(f"{number:>2}. {'held ' if held else 'BROKE'}  {name}: {figures}", flush=True)


# ---- a server of our own -------------------------------------------------------------


class Server:
    def __init__(self, args, extra=(), kb=None, prefix=(), env=None):
        self.cache = tempfile.mkdtemp(prefix="errbook-adversary-cache-")
        cmd = list(prefix) + [args.bin, "serve", "--kb", kb or args.kb, "--addr", "127.0.0.1:0"]
        cmd += list(extra)
        environment = dict(os.environ, ERRBOOK_INDEX_CACHE=self.cache, NO_COLOR="1",
                           RUST_LOG="errbook=info")
        environment.update(env or {})
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=environment, text=True)
        self.log = []
        self.addr = None
        deadline = time.time() + 60
        for line in self.proc.stdout:
            self.log.append(line)
            m = re.search(r"listening on http://(\S+)", line)
            if m:
                host, port = m.group(1).rsplit(":", 1)
                self.addr = (host, int(port))
                break
            if time.time() > deadline:
                break
        if self.addr is None:
            raise SystemExit("the server did not start:\n" + "".join(self.log))
        threading.Thread(target=self._drain, daemon=True).start()
        # Let the signature matcher and jieba's dictionary load.
        time.sleep(0.5)

    def _drain(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def logged(self, needle):
        return sum(needle in line for line in self.log)

    def rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.cache, ignore_errors=True)


def request(addr, method, path, body=b"", headers=(), timeout=20.0):
    """One request on a fresh connection: (status, headers dict, body bytes, seconds)."""
    started = time.perf_counter()
    with socket.create_connection(addr, timeout=timeout) as s:
        head = f"{method} {path} HTTP/1.1\r\nHost: {addr[0]}:{addr[1]}\r\nConnection: close\r\n"
        for name, value in headers:
            head += f"{name}: {value}\r\n"
        if body or method == "POST":
            head += f"Content-Length: {len(body)}\r\n"
        s.sendall(head.encode("latin-1") + b"\r\n" + body)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
    elapsed = time.perf_counter() - started
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        status = 0
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    if fields.get("transfer-encoding") == "chunked":
        rest = dechunk(rest)
    return status, fields, rest, elapsed


def dechunk(data):
    out = b""
    while data:
        size, _, data = data.partition(b"\r\n")
        try:
            n = int(size.split(b";")[0], 16)
        except ValueError:
            break
        if n == 0:
            break
        out += data[:n]
        data = data[n + 2:]
    return out


def diagnose_body(text):
    return json.dumps({"text": text}).encode()


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def latencies(addr, rounds, new_paste_every=True):
    """p50/p99 in ms of /healthz, the home page and a new diagnosis, taken in turn."""
    out = {"healthz": [], "page": [], "diagnose": []}
    deadline = time.time() + 45
    for i in range(rounds):
        if time.time() > deadline:
            break
        for name, (method, path, body, headers) in {
            "healthz": ("GET", "/healthz", b"", ()),
            "page": ("GET", "/", b"", ()),
            "diagnose": ("POST", "/api/v1/diagnose",
                         diagnose_body(f"RuntimeError: NCCL error in run {random.random()}: "
                                       "unhandled system error, NCCL version 2.18.1"),
                         (("Content-Type", "application/json"),)),
        }.items():
            try:
                status, _, _, t = request(addr, method, path, body, headers, timeout=20)
            except OSError:
                status, t = 0, 20.0
            out[name].append(t * 1000 if status == 200 else 20_000)
    return {k: (percentile(v, 50), percentile(v, 99)) for k, v in out.items()}


def raise_own_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ---- the attacks ---------------------------------------------------------------------


def attack_bodiless(args):
    server = Server(args)
    try:
        figures = []
        held = True
        held_sockets = []
        for count in (300, 2000):
            while len(held_sockets) < count:
                s = socket.create_connection(server.addr, timeout=5)
                s.sendall(b"POST /api/v1/diagnose HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
                held_sockets.append(s)
            time.sleep(0.5)
            got = latencies(server.addr, 30 if args.quick else 60)
            worst = max(p99 for _, p99 in got.values())
            held &= worst < 100
            figures.append(f"{count} stalled uploads: " + ", ".join(
                f"{k} p50 {p50:.1f} p99 {p99:.1f} ms" for k, (p50, p99) in got.items()))
        for s in held_sockets:
            s.close()
        report(1, "bodiless uploads", held, "; ".join(figures))
    finally:
        server.stop()


REDIRECT_PAYLOADS = [
    "/%09/evil.example/", "/%0A/evil.example", "/%0D/evil.example", "//evil.example",
    "/\\evil.example", "\\\\evil.example", "/%5Cevil.example", "%2F%2Fevil.example",
    "https://evil.example", "http:evil.example", "javascript:alert(1)", "/%20/evil.example",
    "%20//evil.example", "%09//evil.example", "/%00/evil.example", "/%7F/evil.example",
    "///evil.example", "/%2F/evil.example", "//%09evil.example", "/%E3%80%80/evil.example",
    "%0A/%0A/evil.example", "data:text/html,x", "/./%2F/evil.example", "/..//evil.example",
]


def browser_target(location):
    """Where a browser goes for `Location: location` from http://errbook.local/lang/en,
    after the URL parser's clean-up (WHATWG): leading and trailing C0 controls and
    spaces trimmed, tabs and newlines removed, `\\` read as `/`."""
    cleaned = location.strip("".join(chr(c) for c in range(0x21)))
    cleaned = re.sub(r"[\t\n\r]", "", cleaned).replace("\\", "/")
    return urllib.parse.urlsplit(urllib.parse.urljoin("http://errbook.local/lang/en", cleaned))


def attack_redirect(args):
    server = Server(args)
    try:
        off_site = []
        for payload in REDIRECT_PAYLOADS:
            status, fields, _, _ = request(server.addr, "GET", f"/lang/en?next={payload}")
            location = fields.get("location", "")
            if status >= 500:
                off_site.append(f"{payload} -> {status}")
                continue
            target = browser_target(location)
            if target.scheme != "http" or target.netloc != "errbook.local":
                off_site.append(f"{payload} -> {location!r}")
        report(2, "open redirect", not off_site,
               f"{len(REDIRECT_PAYLOADS)} payloads, {len(off_site)} leave the origin"
               + (f" ({'; '.join(off_site[:4])})" if off_site else ""))
    finally:
        server.stop()


CONTROL_ROUTES = ["/lang/en?next=/", "/lang/zh-CN?next=/x", "/?page=", "/search?q=",
                  "/search?tag=", "/tags/nccl?page=", "/diagnose?p=", "/api/v1/search?q=",
                  "/api/v1/search?q=nccl&limit=", "/entries/x?y="]


def attack_control_bytes(args):
    server = Server(args)
    try:
        failures = []
        count = 0
        for route in CONTROL_ROUTES:
            for byte in list(range(0x20)) + [0x7F]:
                count += 1
                status, _, body, _ = request(server.addr, "GET", f"{route}%{byte:02X}")
                if status >= 500 or status == 0:
                    failures.append(f"{route}%{byte:02X} -> {status} {body[:40]!r}")
        errors = server.logged("ERROR")
        report(3, "control bytes in query strings", not failures and not errors,
               f"{count} addresses, {len(failures)} answered 5xx, {errors} ERROR lines logged"
               + (f" ({failures[0]})" if failures else ""))
    finally:
        server.stop()


def peak_rss_of(cmd, feed, seconds=None):
    """Runs `cmd`, writing what `feed(stdin)` writes, or reading its own input for
    `seconds`; returns the child's peak RSS in MB."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if feed else None,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if feed:
        try:
            feed(proc.stdin)
            proc.stdin.close()
        except BrokenPipeError:
            pass
    if seconds is not None:
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return usage.ru_maxrss / 1024


def attack_cli_memory(args):
    scale = 4 if args.quick else 1
    cmd = [args.bin, "diagnose", "--kb", args.kb, "--no-index-cache", "-"]

    def tqdm(stdin, total=(300 << 20) // scale):
        frame = "".join(f"\rEpoch 3:  {p:3d}%|{'#' * (p // 10):<10}| {p * 37}/3700 "
                        f"[00:{p % 60:02d}<01:00, 12.{p % 10}it/s]" for p in range(100)).encode()
        written = 0
        while written < total:
            stdin.write(frame)
            written += len(frame)
        stdin.write(b"\nRuntimeError: CUDA error: an illegal memory access was encountered\n")

    def zeros(stdin, total=(1 << 30) // scale):
        block = b"0" * (1 << 20)
        for _ in range(total >> 20):
            stdin.write(block)

    tqdm_mb = peak_rss_of(cmd, tqdm)
    zeros_mb = peak_rss_of(cmd, zeros)
    dev_zero_s = 15 if args.quick else 60
    dev_zero_mb = peak_rss_of([args.bin, "diagnose", "--kb", args.kb, "--no-index-cache",
                               "/dev/zero"], None, seconds=dev_zero_s)
    held = max(tqdm_mb, zeros_mb, dev_zero_mb) < 150
    report(4, "diagnose memory with long lines", held,
           f"{300 // scale} MB redrawn with \\r: {tqdm_mb:.0f} MB peak; {1024 // scale} MB "
           f"without a line break: {zeros_mb:.0f} MB; {dev_zero_s} s of /dev/zero: "
           f"{dev_zero_mb:.0f} MB")


def write_small_kb(folder, title):
    os.makedirs(folder)
    with open(os.path.join(folder, "probe.md"), "w") as f:
        f.write(f"""---
slug: probe
title: "{title}"
title_zh: 探针条目
summary: A probe entry for reload checks.
summary_zh: 用于重新加载检查的探针条目。
tags: [probe]
signatures:
  - "ProbeErrorForReloads"
symptoms:
  - probe symptom
  - 探针症状
examples:
  - "RuntimeError: ProbeErrorForReloads happened"
sources:
  - https://example.com/probe
---

## Symptom

Probe.

## Cause

Probe.

## Fix

Probe.

## Verify

Probe.
""")


def title_of(server):
    status, _, body, _ = request(server.addr, "GET", "/api/v1/entries/probe")
    return json.loads(body).get("title") if status == 200 else None


def wait_for(check, within):
    started = time.perf_counter()
    while time.perf_counter() - started < within:
        if check():
            return time.perf_counter() - started
        time.sleep(0.05)
    return None


def attack_symlink_watch(args):
    root = tempfile.mkdtemp(prefix="errbook-adversary-kb-")
    server = None
    try:
        write_small_kb(os.path.join(root, "kbA"), "Version A")
        write_small_kb(os.path.join(root, "kbB"), "Version B")
        link = os.path.join(root, "kb")
        os.symlink("kbA", link)
        server = Server(args, ["--watch"], kb=link)
        swap = os.path.join(root, "kb.new")
        os.symlink("kbB", swap)
        os.replace(swap, link)
        swapped = wait_for(lambda: title_of(server) == "Version B", 5)
        shutil.rmtree(os.path.join(root, "kbA"))
        time.sleep(0.5)
        probe = os.path.join(root, "kbB", "probe.md")
        with open(probe) as f:
            text = f.read()
        with open(probe, "w") as f:
            f.write(text.replace("Version B", "Version B2"))
        edited = wait_for(lambda: title_of(server) == "Version B2", 5)
        status, _, body, _ = request(server.addr, "GET", "/healthz")
        watch = json.loads(body).get("watch", "not reported") if status == 200 else "no answer"
        held = swapped is not None and swapped < 2 and edited is not None and edited < 2
        fmt = lambda t: "never (5 s)" if t is None else f"{t:.2f} s"
        report(5, "--watch over a swapped symlink", held,
               f"swap reloaded after {fmt(swapped)}; after removing the old target, an edit "
               f"reloaded after {fmt(edited)}; /healthz watch: {watch}")
    finally:
        if server:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


def random_words(n):
    return " ".join("".join(random.choice(string.ascii_lowercase) for _ in range(random.randint(4, 10)))
                    for _ in range(n))


def attack_memory(args):
    server = Server(args)
    try:
        idle = server.rss_mb()
        count = args.requests // 4 if args.quick else args.requests
        done = [0]

        def worker(share):
            with socket.create_connection(server.addr, timeout=20) as s:
                reader = s.makefile("rb")
                for i in range(share):
                    if i % 4 == 3:
                        path = "/api/v1/search?q=" + urllib.parse.quote(random_words(6))
                        head = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
                        s.sendall(head)
                    else:
                        body = diagnose_body("RuntimeError: " + random_words(20))
                        s.sendall(b"POST /api/v1/diagnose HTTP/1.1\r\nHost: x\r\n"
                                  b"Content-Type: application/json\r\n"
                                  + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                    length = 0
                    while True:
                        line = reader.readline()
                        if line in (b"\r\n", b""):
                            break
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    reader.read(length)
                    done[0] += 1

        threads = [threading.Thread(target=worker, args=(count // 8,)) for _ in range(8)]
        started = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.time() - started
        time.sleep(2)
        after = server.rss_mb()
        report(6, "memory under varied traffic", after < 150,
               f"idle {idle:.0f} MB; after {done[0]} requests with random words "
               f"(diagnoses of 20 words, searches of 6) in {elapsed:.0f} s: {after:.0f} MB")
    finally:
        server.stop()


def attack_fd_limit(args):
    raise_own_fd_limit()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    prefix = ["prlimit", f"--nofile=1024:{hard}", "--"]
    if shutil.which("prlimit") is None:
        report(7, "file descriptors", False, "prlimit is not installed")
        return
    server = Server(args, prefix=prefix)
    held_sockets = []
    try:
        for _ in range(1500):
            try:
                held_sockets.append(socket.create_connection(server.addr, timeout=2))
            except OSError:
                break
        time.sleep(1)
        os.kill(server.proc.pid, signal.SIGHUP)
        answered = 0
        for _ in range(5):
            try:
                status, _, body, _ = request(server.addr, "GET", "/healthz", timeout=3)
                answered += status == 200
            except OSError:
                pass
        time.sleep(2)
        warnings = server.logged("accepting a connection failed")
        failed = server.logged("reload failed")
        reloaded = server.logged("knowledge base reloaded")
        report(7, "file descriptors at ulimit -n 1024", answered == 5 and not warnings
               and not failed and reloaded >= 1,
               f"{len(held_sockets)} idle connections: /healthz answered {answered}/5, "
               f"{warnings} accept warnings, SIGHUP reload {'ok' if reloaded else 'not done'}"
               f"{', failed' if failed else ''}")
    finally:
        for s in held_sockets:
            s.close()
        server.stop()


def attack_stopping(args):
    figures = []
    held = True
    for second in (False, True):
        server = Server(args)
        s = socket.create_connection(server.addr, timeout=5)
        s.sendall(b"POST /api/v1/diagnose HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                  b"\r\nContent-Length: 1000\r\n\r\n{\"text\": \"half")
        time.sleep(0.3)
        started = time.perf_counter()
        server.proc.send_signal(signal.SIGTERM)
        if second:
            time.sleep(0.3)
            server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        took = time.perf_counter() - started
        s.close()
        server.stop()
        if second:
            held &= took < 1.5
            figures.append(f"a second SIGTERM 0.3 s later: exit after {took:.1f} s")
        else:
            held &= took < 10
            figures.append(f"SIGTERM with a half-sent request: exit after {took:.1f} s")
    report(8, "stopping", held, "; ".join(figures))


def attack_mcp_origin(args):
    server = Server(args)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
        json_type = ("Content-Type", "application/json")
        evil, _, _, _ = request(server.addr, "POST", "/mcp", body,
                                (json_type, ("Origin", "http://evil.example")))
        rebound, _, _, _ = request(server.addr, "POST", "/mcp", body,
                                   (json_type, ("Origin", "http://attacker.example:8080")))
        local, _, _, _ = request(server.addr, "POST", "/mcp", body,
                                 (json_type, ("Origin", "http://localhost:8080")))
        none, _, _, _ = request(server.addr, "POST", "/mcp", body, (json_type,))
        plain, _, _, _ = request(server.addr, "POST", "/mcp", body,
                                 (("Content-Type", "text/plain"),))
        held = evil == 403 and rebound == 403 and local == 200 and none == 200 and plain == 415
        report(9, "MCP Origin and content type", held,
               f"foreign Origin {evil}, rebinding-style Origin {rebound}, localhost {local}, "
               f"no Origin {none}, text/plain {plain}")
    finally:
        server.stop()


def attack_rejection_bodies(args):
    server = Server(args)
    try:
        rows = []
        held = True
        for fields in (101, 150, 500):
            headers = tuple((f"X-Filler-{i}", "1") for i in range(fields))
            status, _, body, _ = request(server.addr, "GET", "/healthz", headers=headers)
            rows.append(f"{fields} header fields -> {status} with {len(body)} bytes of body")
            held &= bool(body)
        status, _, body, _ = request(server.addr, "GET", "/healthz",
                                     headers=(("X-Big", "a" * 40_000),))
        rows.append(f"40 KB of header -> {status} with {len(body)} bytes")
        held &= bool(body)
        report(10, "bodies on rejections", held, "; ".join(rows))
    finally:
        server.stop()


def attack_share_links(args):
    server = Server(args)
    try:
        paste = ("[rank0]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, "
                 "unhandled system error\n" * 12_000)[: 1 << 20]
        packed = base64.urlsafe_b64encode(zlib.compress(paste.encode(), 9)[2:-4]).decode().rstrip("=")
        link = "/diagnose?p=" + packed
        stop = threading.Event()
        served = [0, 0]

        def flood():
            while not stop.is_set():
                try:
                    status, _, body, _ = request(server.addr, "GET", link, timeout=20)
                    served[0] += 1
                    served[1] = max(served[1], len(body))
                except OSError:
                    pass

        threads = [threading.Thread(target=flood) for _ in range(16)]
        for t in threads:
            t.start()
        time.sleep(1)
        health = []
        deadline = time.time() + (5 if args.quick else 15)
        while time.time() < deadline:
            try:
                status, _, _, t = request(server.addr, "GET", "/healthz", timeout=20)
                health.append(t * 1000)
            except OSError:
                health.append(20_000)
            time.sleep(0.02)
        stop.set()
        for t in threads:
            t.join()
        p50, p99 = percentile(health, 50), percentile(health, 99)
        report(11, "share-link amplification", p99 < 100,
               f"a {len(link) / 1024:.1f} KB link of a 1 MiB paste, 16 connections: "
               f"{served[0]} answered (largest {served[1] / 1e6:.2f} MB); /healthz p50 "
               f"{p50:.1f} ms, p99 {p99:.1f} ms")
    finally:
        server.stop()


ATTACKS = {
    1: attack_bodiless,
    2: attack_redirect,
    3: attack_control_bytes,
    4: attack_cli_memory,
    5: attack_symlink_watch,
    6: attack_memory,
    7: attack_fd_limit,
    8: attack_stopping,
    9: attack_mcp_origin,
    10: attack_rejection_bodies,
    11: attack_share_links,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default="target/release/errbook")
    parser.add_argument("--kb", default="kb")
    parser.add_argument("--only", default="", help="attack numbers, comma-separated")
    parser.add_argument("--quick", action="store_true", help="smaller loads, shorter runs")
    parser.add_argument("--requests", type=int, default=100_000,
                        help="requests of random words in attack 6")
    args = parser.parse_args()
    args.bin = os.path.abspath(args.bin)
    raise_own_fd_limit()
    chosen = [int(n) for n in args.only.split(",") if n] or sorted(ATTACKS)
    print(f"errbook adversary: {args.bin}", flush=True)
    for number in chosen:
        ATTACKS[number](args)
    broke = [n for n, held in RESULTS if not held]
    print(f"{len(RESULTS) - len(broke)} held, {len(broke)} broke"
          + (f" ({', '.join(map(str, broke))})" if broke else ""))
    return 1 if broke else 0


if __name__ == "__main__":
    sys.exit(main())
