from __future__ import annotations

from collections.abc import Iterator

from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from cardrag.app.guard import SECURITY_HEADERS, Guard


def _client(max_body: int) -> TestClient:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"bytes": len(await request.body())}

    app.add_middleware(Guard, max_body=max_body)
    return TestClient(app)


def test_a_body_at_the_limit_passes_whole_and_one_byte_more_is_a_413() -> None:
    client = _client(10)
    assert client.post("/echo", content=b"x" * 10).json() == {"bytes": 10}
    over = client.post("/echo", content=b"x" * 11)
    assert (over.status_code, over.json()) == (
        413,
        {"detail": "the request body is larger than 10 bytes"},
    )


def test_a_stream_without_a_length_is_counted_as_it_arrives() -> None:
    def chunks(n: int) -> Iterator[bytes]:
        for _ in range(n):
            yield b"xxxx"

    client = _client(10)
    assert client.post("/echo", content=chunks(2)).json() == {"bytes": 8}
    assert client.post("/echo", content=chunks(3)).status_code == 413


def test_every_response_carries_the_headers_the_413_included() -> None:
    client = _client(10)
    for response in (client.post("/echo", content=b"x"), client.post("/echo", content=b"x" * 99)):
        assert {k: response.headers[k] for k in SECURITY_HEADERS} == SECURITY_HEADERS
