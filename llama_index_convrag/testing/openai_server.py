"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests, notebooks and benches.

Endpoints: ``POST /v1/chat/completions`` (plain, SSE streaming, tool calls), ``POST /v1/embeddings``,
``POST /v1/rerank`` (Cohere/Jina shape), ``GET /v1/models`` (with ``model_meta`` on its entry) and, when ``props``
is set, llama.cpp's ``GET /props``; with ``tokenize`` on, llama.cpp's ``POST /tokenize``. Replies come from replaceable responder functions; every request is recorded;
failures can be injected to test timeouts and retries.

Limits as a real server keeps them: a reply is cut at the request's ``max_tokens`` (``finish_reason "length"``), and
with ``context_window`` set a request whose prompt tokens plus ``max_tokens`` exceed it is answered HTTP 400 as
llama-cpp-python answers it. Tokens are counted with tiktoken's ``cl100k_base`` (``config.tokens``), plus
:data:`TOKENS_PER_MESSAGE` per message for the chat template, times ``token_scale`` (a served model whose vocabulary
needs more tokens for the same text than tiktoken's).
"""

from __future__ import annotations

import json
import math
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from llama_index_convrag.config.tokens import count_tokens, cut_to_tokens
from llama_index_convrag.errors import ConfigurationError
from llama_index_convrag.testing.scripted_llm import split_deltas

ChatResponder = Callable[[Dict[str, Any]], Dict[str, Any]]
EmbedFn = Callable[[Sequence[str]], List[List[float]]]
RerankFn = Callable[[str, Sequence[str]], List[float]]
#: Tokens a chat template adds around each message (role markers), counted by the window check.
TOKENS_PER_MESSAGE = 4


def _message_text(message: Dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def prompt_tokens(body: Dict[str, Any]) -> int:
    """Prompt tokens of a chat request: every message's text plus :data:`TOKENS_PER_MESSAGE` each, and the tools."""
    messages = body.get("messages", [])
    tools = json.dumps(body["tools"]) if body.get("tools") else ""
    return sum(count_tokens(_message_text(m)) + TOKENS_PER_MESSAGE for m in messages) + count_tokens(tools)


def cut_to(text: str, max_tokens: Optional[int]) -> Tuple[str, bool]:
    """``text`` cut to its first ``max_tokens`` tokens (None: not cut), and whether it was cut."""
    return (text, False) if max_tokens is None else cut_to_tokens(text, int(max_tokens))


def echo_chat(body: Dict[str, Any]) -> Dict[str, Any]:
    """Default chat responder: the last user message, prefixed; a tool call with ``{}`` when tools are offered."""
    if body.get("tools"):
        name = body["tools"][0]["function"]["name"]
        return {"tool_calls": [{"name": name, "arguments": "{}"}]}
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1]["content"] if users else ""
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content)
    return {"content": f"echo: {content}"}


@dataclass
class RecordedRequest:
    path: str
    body: Dict[str, Any]


class LocalOpenAIServer:
    """Start with ``start()`` (or as a context manager); ``base_url`` ends in ``/v1``."""

    def __init__(
        self,
        *,
        chat_responder: ChatResponder = echo_chat,
        embed_fn: Optional[EmbedFn] = None,
        rerank_fn: Optional[RerankFn] = None,
        host: str = "127.0.0.1",
    ) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ConfigurationError(f"host must be a loopback address, got {host!r}")
        self.chat_responder = chat_responder
        self.embed_fn = embed_fn
        self.rerank_fn = rerank_fn
        self.host = host
        self.requests: List[RecordedRequest] = []
        self.delay_s = 0.0
        self.stream_delay_s = 0.0
        self.reset_stream_after: Optional[int] = None
        #: Served window: a chat request whose prompt tokens + ``max_tokens`` exceed it is answered HTTP 400.
        self.context_window: Optional[int] = None
        #: Extra keys of the ``GET /v1/models`` entry (``{"max_model_len": 4096}`` as vLLM says its window).
        self.model_meta: Dict[str, Any] = {}
        #: llama.cpp's ``GET /props`` payload (``{"default_generation_settings": {"n_ctx": 4096}}``); None: 404.
        self.props: Optional[Dict[str, Any]] = None
        #: Tokens per tiktoken token of the served "model" (1.3: its tokenizer needs 30% more for the same text).
        self.token_scale = 1.0
        #: Serve llama.cpp's ``POST /tokenize`` (``{"content"}`` -> ``{"tokens"}``), counting as the window check does.
        self.tokenize = False
        #: Paths of the requests outside the API (``GET /props``, ``GET /v1/models``, ``POST /tokenize``: a client's
        #: probes of the limits), in order; ``requests`` holds the API calls only, and failures apply to those.
        self.probes: List[str] = []
        #: ``"TypeName: message"`` of every exception that escaped a request handler (a bug in a responder, say);
        #: a client that went away (its timeout, a closed stream) is not one.
        self.handler_errors: List[str] = []
        #: Connections whose handler has returned (the client closed them, or went away mid-reply).
        self.handled = 0
        self._failures: List[int] = []
        self._lock = threading.Lock()
        self._httpd: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    # lifecycle -------------------------------------------------------------------------------
    def start(self) -> "LocalOpenAIServer":
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer((self.host, 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="local-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "LocalOpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # controls --------------------------------------------------------------------------------
    def slow_stream(self, seconds_per_chunk: float) -> None:
        """Streamed replies wait ``seconds_per_chunk`` before each chunk (a slow model; room to kill a client)."""
        self.stream_delay_s = seconds_per_chunk

    def reset_streams_after(self, chunks: Optional[int]) -> None:
        """Streamed replies send ``chunks`` chunks, then the connection is reset (TCP RST); None turns it off."""
        self.reset_stream_after = chunks

    def fail_next(self, status: int, times: int = 1) -> None:
        """The next ``times`` requests answer with HTTP ``status``."""
        with self._lock:
            self._failures.extend([status] * times)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self._failures.clear()
            self.handler_errors.clear()
            self.probes.clear()
        self.delay_s = 0.0
        self.stream_delay_s = 0.0
        self.reset_stream_after = None
        self.context_window = None
        self.model_meta = {}
        self.props = None
        self.token_scale = 1.0
        self.tokenize = False

    def scaled(self, tokens: int) -> int:
        """``tokens`` (tiktoken) as the served model counts them (``token_scale``)."""
        return math.ceil(tokens * self.token_scale)

    def window_error(self, body: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """llama-cpp-python's error for a request past ``context_window`` (its words, type and code), or None."""
        if self.context_window is None:
            return None
        prompt, output = self.scaled(prompt_tokens(body)), int(body.get("max_tokens") or 0)
        if prompt + output <= self.context_window:
            return None
        return {"message": f"This model's maximum context length is {self.context_window} tokens. However, you "
                           f"requested {prompt + output} tokens ({prompt} in the messages, {output} in the "
                           f"completion). Please reduce the length of the messages or completion.",
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}

    def paths(self) -> List[str]:
        return [r.path for r in self.requests]

    def _take_failure(self) -> Optional[int]:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def _record(self, path: str, body: Dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(RecordedRequest(path=path, body=body))


def _cut_reply(body: Dict[str, Any], reply: Dict[str, Any]) -> Tuple[Dict[str, Any], bool]:
    """The reply cut at the request's ``max_tokens`` (text replies only), and whether it was cut."""
    if reply.get("tool_calls") or reply.get("content") is None:
        return reply, False
    text, cut = cut_to(str(reply["content"]), body.get("max_tokens"))
    return {**reply, "content": text}, cut


def _chat_completion(body: Dict[str, Any], reply: Dict[str, Any]) -> Dict[str, Any]:
    reply, cut = _cut_reply(body, reply)
    message: Dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    finish = "length" if cut else "stop"
    if reply.get("tool_calls"):
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for i, c in enumerate(reply["tool_calls"])
        ]
        finish = "tool_calls"
    text = json.dumps(body.get("messages", []))
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "local"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": len(reply.get("content") or "") // 4,
                  "total_tokens": (len(text) + len(reply.get("content") or "")) // 4},
    }


def _stream_chunks(body: Dict[str, Any], reply: Dict[str, Any]) -> List[Dict[str, Any]]:
    base = {"id": "chatcmpl-local", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": body.get("model", "local")}
    chunks: List[Dict[str, Any]] = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                          "finish_reason": None}]}]
    if reply.get("tool_calls"):
        for i, call in enumerate(reply["tool_calls"]):
            chunks.append({**base, "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
                {"index": i, "id": f"call_{i}", "type": "function",
                 "function": {"name": call["name"], "arguments": call["arguments"]}}]}}]})
        finish = "tool_calls"
    else:
        reply, cut = _cut_reply(body, reply)
        for delta in split_deltas(reply.get("content") or ""):
            chunks.append({**base, "choices": [{"index": 0, "delta": {"content": delta}, "finish_reason": None}]})
        finish = "length" if cut else "stop"
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return chunks


def _make_handler(server: LocalOpenAIServer) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output clean
            return

        def handle(self) -> None:
            """A client that goes away mid-reply ends the request quietly (no BrokenPipeError traceback from
            ``socketserver`` in the test log); anything else is recorded in ``handler_errors`` and re-raised."""
            try:
                super().handle()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            except Exception as exc:
                with server._lock:
                    server.handler_errors.append(f"{type(exc).__name__}: {exc}")
                raise
            finally:
                with server._lock:
                    server.handled += 1

        def _send_json(self, status: int, payload: Dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?")[0].rstrip("/")
            with server._lock:
                server.probes.append(path)
            if path in ("/v1/models", "/models"):
                entry = {"id": "local", "object": "model", **server.model_meta}
                self._send_json(200, {"object": "list", "data": [entry]})
            elif path == "/props" and server.props is not None:
                self._send_json(200, server.props)
            else:
                self._send_json(404, {"error": {"message": f"unknown path {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            path = self.path.split("?")[0].rstrip("/")
            if not path.endswith(("/chat/completions", "/embeddings", "/rerank")):
                with server._lock:
                    server.probes.append(path)
                if path == "/tokenize" and server.tokenize:
                    tokens = server.scaled(count_tokens(str(body.get("content", ""))))
                    self._send_json(200, {"tokens": list(range(tokens))})
                else:
                    self._send_json(404, {"error": {"message": f"unknown path {path}"}})
                return
            server._record(path, body)
            failure = server._take_failure()  # at arrival: a request still asleep from an earlier test takes none
            if server.delay_s:
                time.sleep(server.delay_s)
            if failure is not None:
                self._send_json(failure, {"error": {"message": f"injected failure {failure}", "type": "server_error"}})
                return
            try:
                if path.endswith("/chat/completions"):
                    self._chat(body)
                elif path.endswith("/embeddings"):
                    self._embeddings(body)
                else:
                    self._rerank(body)
            except (BrokenPipeError, ConnectionResetError):  # the client went away (its timeout, a closed stream)
                self.close_connection = True
            except Exception as exc:  # report responder bugs to the client, do not hang it
                self._send_json(500, {"error": {"message": f"{type(exc).__name__}: {exc}"}})

        def _chat(self, body: Dict[str, Any]) -> None:
            too_long = server.window_error(body)
            if too_long is not None:
                self._send_json(400, {"error": too_long})
                return
            reply = server.chat_responder(body)
            if not body.get("stream"):
                self._send_json(200, _chat_completion(body, reply))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for i, chunk in enumerate(_stream_chunks(body, reply)):
                if server.reset_stream_after is not None and i >= server.reset_stream_after:
                    self._reset_connection()
                    return
                if server.stream_delay_s:
                    time.sleep(server.stream_delay_s)
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def _reset_connection(self) -> None:
            """Close with SO_LINGER 0: the client sees a connection reset mid-stream."""
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()

        def _embeddings(self, body: Dict[str, Any]) -> None:
            if server.embed_fn is None:
                self._send_json(501, {"error": {"message": "no embedding function configured"}})
                return
            inputs = body.get("input", [])
            texts = [inputs] if isinstance(inputs, str) else list(inputs)
            vectors = server.embed_fn(texts)
            self._send_json(200, {
                "object": "list",
                "model": body.get("model", "local"),
                "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": sum(len(t) // 4 for t in texts), "total_tokens": sum(len(t) // 4 for t in texts)},
            })

        def _rerank(self, body: Dict[str, Any]) -> None:
            if server.rerank_fn is None:
                self._send_json(501, {"error": {"message": "no rerank function configured"}})
                return
            docs = [d if isinstance(d, str) else d.get("text", "") for d in body.get("documents", [])]
            scores = server.rerank_fn(body.get("query", ""), docs)
            order = sorted(range(len(docs)), key=lambda i: -scores[i])
            top_n = body.get("top_n")
            if top_n is not None:
                order = order[: int(top_n)]
            self._send_json(200, {
                "model": body.get("model", "local"),
                "results": [{"index": i, "relevance_score": float(scores[i])} for i in order],
            })

    return Handler
