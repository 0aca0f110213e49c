"""The HTTP gateway's sockets send at once: Nagle's algorithm is off on every connection.

With Nagle on, a response written as headers then body waited for the client's delayed ACK
(~40 ms on Linux) on every call; see bench/bench_http_latency.py for the measure.
"""

import socket

from sagents.gateway._http_server import bind_listener
from sagents.gateway._settings import GatewaySettings


def test_the_listener_is_tcp_with_nagle_off_and_connections_inherit_it() -> None:
    listener = bind_listener(GatewaySettings(transport="http", host="127.0.0.1", port=0))
    try:
        assert listener.proto == socket.IPPROTO_TCP  # what asyncio checks before TCP_NODELAY
        listener.setblocking(True)
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            accepted, _ = listener.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
                assert accepted.proto == socket.IPPROTO_TCP
    finally:
        listener.close()
