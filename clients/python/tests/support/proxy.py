"""A TCP proxy on 127.0.0.1 in front of a service port (as test/support/tcp-proxy.ts), for tests that need the
network to misbehave at a chosen moment: answers that never come back, connections cut, connections refused."""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    def __init__(self, target_port: int) -> None:
        self._target_port = target_port
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._dropping = False
        self._refusing = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.accepted = 0
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            writer.transport.abort()
            return
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target_port)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, up_writer)
        self._pairs.add(pair)
        await asyncio.gather(self._pipe(reader, up_writer, False), self._pipe(up_reader, writer, True))
        self._pairs.discard(pair)
        for w in pair:
            w.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, from_service: bool) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while chunk := await reader.read(65536):
                if from_service and self._dropping:
                    continue
                writer.write(chunk)
                await writer.drain()
        writer.transport.abort()

    def drop_responses(self) -> None:
        """From now on bytes from the service are not passed on: requests arrive, their answers are lost."""
        self._dropping = True

    def cut(self) -> None:
        """Aborts every open connection, both sides; passes bytes again."""
        self._dropping = False
        for pair in list(self._pairs):
            for w in pair:
                w.transport.abort()

    def refuse(self, on: bool) -> None:
        """While on, new connections are closed as soon as they are accepted."""
        self._refusing = on

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
