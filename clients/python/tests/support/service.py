"""Starts the real service (the built CLI, dist/src/cli.js, as test/support/service.ts does) as a child process on
free loopback ports, with its own queue and data directories, and reads its JSON log lines for the ports."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[4]
CLI = REPO / "dist" / "src" / "cli.js"

LogLine = dict[str, Any]


def duel_queue(
    tick_interval_ms: int, *, outcomes: dict[str, Any] | None = None, config: dict[str, Any] | None = None
) -> str:
    """A 1v1 queue file (ruleset "duel"), as test/support/queues.ts writes it; JSON is YAML too."""
    body: dict[str, Any] = {"tick_interval_ms": tick_interval_ms, **(config or {})}
    if outcomes is not None:
        body["outcomes"] = outcomes
    body["rulesets"] = [{"id": "duel", "teams": 2, "team_size": 1}]
    return json.dumps({"config": body})


# A queue with one 2x5 ruleset that does not tick during a test (the tests count its pool).
BASIC_QUEUE = json.dumps(
    {"config": {"tick_interval_ms": 3_600_000, "rulesets": [{"id": "5v5", "teams": 2, "team_size": 5}]}}
)


def write_queues(directory: Path, queues: dict[str, str]) -> None:
    for queue_id, text in queues.items():
        (directory / f"{queue_id}.yaml").write_text(text)


class Service:
    """One service process. ``stop()`` sends SIGTERM and waits; ``kill()`` sends SIGKILL. Only this process is
    ever signalled, by its pid."""

    def __init__(
        self,
        queues: dict[str, str] | None = None,
        *,
        queue_dir: Path | None = None,
        data_dir: Path | None = None,
        env: dict[str, str] | None = None,
        start_timeout: float = 30.0,
    ) -> None:
        self.own_dirs: list[Path] = []
        if queue_dir is None:
            queue_dir = Path(tempfile.mkdtemp(prefix="mm-py-queues-"))
            self.own_dirs.append(queue_dir)
            write_queues(queue_dir, queues or {"test.basic": BASIC_QUEUE})
        if data_dir is None:
            data_dir = Path(tempfile.mkdtemp(prefix="mm-py-data-"))
            self.own_dirs.append(data_dir)
        self.queue_dir = queue_dir
        self.data_dir = data_dir
        self.logs: list[LogLine] = []
        self.stderr = ""
        self._changed = threading.Condition()
        node = os.environ.get("NODE", shutil.which("node") or "node")
        if not CLI.is_file():
            raise RuntimeError(f"{CLI} is missing: run npm install (or npm run build:ts) at the repository root first")
        self.process = subprocess.Popen(
            [node, str(CLI), "serve", "--config", str(queue_dir), "--data", str(data_dir)],
            env={
                **os.environ,
                "GRPC_PORT": "0",
                "HTTP_PORT": "0",
                "BIND_ADDRESS": "127.0.0.1",
                "LOG_LEVEL": "info",
                "CONFIG_RELOAD_DEBOUNCE_MS": "50",
                **(env or {}),
            },
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # The pipes are drained for the life of the process, or a chatty service would block on a full pipe.
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        try:
            listening = self.wait_for_log(lambda line: line.get("msg") == "listening", start_timeout)
        except Exception:
            self.kill()  # never leave a half-started service behind
            raise
        self.grpc_port: int = listening["grpcPort"]
        self.http_port: int = listening["httpPort"]
        self.grpc_address = f"127.0.0.1:{self.grpc_port}"
        self.base_url = f"http://127.0.0.1:{self.http_port}"

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for text in self.process.stdout:
            try:
                line = json.loads(text)
            except ValueError:
                line = {"msg": text.rstrip("\n")}
            if not isinstance(line, dict):
                line = {"msg": text.rstrip("\n")}
            with self._changed:
                self.logs.append(line)
                self._changed.notify_all()
        self.process.stdout.close()
        with self._changed:
            self._changed.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for text in self.process.stderr:
            self.stderr += text
        self.process.stderr.close()

    def wait_for_log(self, match: Callable[[LogLine], bool], timeout: float = 15.0) -> LogLine:
        """The first log line ``match`` accepts (blocking: call it through asyncio.to_thread from a test)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.logs:
                    if match(line):
                        return line
                if self.process.poll() is not None:
                    raise RuntimeError(f"service exited ({self.process.returncode}) first; stderr: {self.stderr}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"log line not seen within {timeout} s; stderr: {self.stderr}")
                self._changed.wait(min(left, 0.2))

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._join()
        return self.process.returncode

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._join()

    def _join(self) -> None:
        for reader in self._readers:
            reader.join(5)

    def remove_dirs(self) -> None:
        for directory in self.own_dirs:
            shutil.rmtree(directory, ignore_errors=True)

    def close(self) -> None:
        self.stop()
        self.remove_dirs()
