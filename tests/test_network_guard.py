import socket

import pytest

from tests.conftest import NetworkBlocked, is_loopback


@pytest.mark.parametrize("address", [("10.0.0.1", 80), ("93.184.216.34", 443), ("example.com", 443), ("192.168.1.1", 53)])
def test_non_loopback_connect_is_blocked(address):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        with pytest.raises(NetworkBlocked, match="non-loopback"):
            sock.connect(address)


def test_dns_lookup_of_public_name_is_blocked():
    with pytest.raises(NetworkBlocked, match="resolve non-loopback host 'pypi.org'"):
        socket.getaddrinfo("pypi.org", 443)


def test_connect_ex_is_blocked_too():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        with pytest.raises(NetworkBlocked):
            sock.connect_ex(("8.8.8.8", 53))


@pytest.mark.parametrize(
    "address,expected",
    [(("127.0.0.1", 1), True), (("127.5.5.5", 1), True), (("::1", 1, 0, 0), True), (("localhost", 1), True),
     ("/tmp/some.sock", True), (("10.1.1.1", 1), False), (("::ffff:8.8.8.8", 1, 0, 0), False)],
)
def test_is_loopback(address, expected):
    assert is_loopback(address) is expected


def test_loopback_connect_is_allowed():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=2):
            pass


def test_openai_client_to_public_host_is_blocked():
    from llama_index.llms.openai import OpenAI

    llm = OpenAI(model="gpt-4o-mini", api_key="sk-test", max_retries=0, timeout=2)
    with pytest.raises(Exception) as info:
        llm.complete("hi")
    chain = []
    exc = info.value
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    assert any(isinstance(e, NetworkBlocked) for e in chain), chain
