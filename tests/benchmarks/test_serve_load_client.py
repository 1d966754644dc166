"""The load generator's own HTTP client (benchmarks/serve_load.py `Connection`): an error it counts
is the server's, not a kept-alive connection that the server closed between two requests."""

import asyncio
import sys
from pathlib import Path

from tests.conftest import HANG_S

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from serve_load import Connection  # noqa: E402

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


async def against(answer_then_close: bool) -> tuple[list[int], int]:
    """Two requests on one Connection to a server that answers each connection's first request
    and then closes it (`answer_then_close`), or closes it unanswered; -> statuses, connections."""
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        if answer_then_close:
            writer.write(ANSWER)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, Connection(f"http://127.0.0.1:{port}", timeout=HANG_S) as http:
        statuses = [await http.post("/v1/translate", {"text": "A dog."}) for _ in range(2)]
    return statuses, connections


def test_a_connection_closed_between_requests_is_opened_again():
    statuses, connections = asyncio.run(asyncio.wait_for(against(answer_then_close=True), HANG_S))
    assert statuses == [200, 200]
    assert connections == 2


def test_a_request_the_server_drops_counts_as_an_error_without_retrying_for_ever():
    statuses, connections = asyncio.run(asyncio.wait_for(against(answer_then_close=False), HANG_S))
    assert statuses == [0, 0]
    assert connections == 2  # each on a fresh connection: nothing kept alive to open again
