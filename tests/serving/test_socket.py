"""task=serve's listening socket: a free port for port 0, one line naming task.host / task.port when
it cannot listen, and connections without Nagle's algorithm (with it, every answer on a kept-alive
connection waited 40 ms for the client's delayed ACK: 44 ms for GET /health, against 0.4 ms)."""

import asyncio
import socket

import pytest

from transformer_mt.errors import ConfigError
from transformer_mt.tasks.serve import bound_socket, loopback


def test_connections_to_the_bound_socket_have_tcp_nodelay():
    async def scenario() -> int:
        found = asyncio.get_running_loop().create_future()

        def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            found.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        sock = bound_socket("127.0.0.1", 0)
        server = await asyncio.start_server(connected, sock=sock)
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        value = await asyncio.wait_for(found, 10)
        writer.close()
        server.close()
        return value

    assert asyncio.run(scenario()) != 0


def test_a_port_taken_is_one_line_naming_the_keys():
    taken = bound_socket("127.0.0.1", 0)
    taken.listen()
    port = taken.getsockname()[1]
    with pytest.raises(ConfigError, match=rf"^task.host=127.0.0.1 task.port={port}: cannot listen there"):
        # SO_REUSEADDR lets a second socket bind a port no one listens on; a listening one is refused
        bound_socket("127.0.0.1", port)
    taken.close()


def test_only_loopback_addresses_count_as_this_machine():
    assert [loopback(h) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "192.168.1.5", "example.org")] == \
        [True, True, True, False, False, False]
