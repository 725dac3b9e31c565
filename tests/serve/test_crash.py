"""Crash recovery of a real ``convrag serve`` process: ``kill -9`` in the middle of a streamed answer, then a restart
on the same store and port. The question and the text saved so far are kept, the answer reads ``interrupted``, and
it can be regenerated at once (the restarted worker, under the same ``host:port``, frees its earlier claims).

The answering LLM is :class:`LocalOpenAIServer` in this process, streaming slowly; the server is started as
``python -m llama_index_convrag.cli serve`` in its own process group, so the kill takes its Milvus Lite child too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import httpx

from llama_index_convrag.testing import LocalOpenAIServer
from tests.web.conftest import REPO, Responder, _wait_healthy, free_port

DOCS = {"zebras.md": "# Zebras\n\nZebras sleep standing up in short naps. A herd keeps watch for lions at night.\n"}
#: short sentences, so the stream's text shows sentence by sentence (each cited as it ends)
ANSWER = " ".join(f"Zebras nap standing up, note {i}." for i in range(30))


def _serve(work: Path, port: int, llm: LocalOpenAIServer, docs: List[Path]) -> subprocess.Popen:
    env = dict(os.environ, OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="test-key", CONVRAG_LLM_MODEL="scripted",
               PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    env.pop("CONVRAG_MILVUS_URI", None)
    cmd = [sys.executable, "-m", "llama_index_convrag.cli", "serve", *map(str, docs), "--host", "127.0.0.1",
           "--port", str(port), "--uri", str(work / "milvus.db"), "--store", str(work / "chats.db"),
           "--upload-dir", str(work / "uploads"), "--partial-save-s", "0.2", "-q"]
    with (work / "serve.log").open("ab") as log:
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # its own group: the kill takes Milvus Lite with it
    _wait_healthy(proc, f"http://127.0.0.1:{port}", work / "serve.log")
    return proc


def test_kill_9_mid_answer_then_restart_keeps_the_text_and_regenerates(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    port, url = free_port(), ""
    url = f"http://127.0.0.1:{port}"
    responder = Responder()
    responder.answer = ANSWER
    with LocalOpenAIServer(chat_responder=responder) as llm:
        llm.slow_stream(0.05)
        proc = _serve(tmp_path, port, llm, [docs])
        try:
            with httpx.Client(base_url=url, timeout=60) as c, httpx.Client(base_url=url, timeout=60) as watcher:
                cid = c.post("/v1/conversations", json={"title": "crash"}).json()["id"]
                with c.stream("POST", f"/v1/conversations/{cid}/messages",
                              json={"content": "How do zebras sleep?"}) as r:
                    mid, deltas = None, 0
                    for line in r.iter_lines():
                        if line.startswith("data: ") and mid is None:
                            mid = json.loads(line[6:])["assistant_message_id"]
                        deltas += line.startswith("event: delta")
                        if deltas >= 2:
                            break
                    saved = ""
                    deadline = time.monotonic() + 30
                    while not saved and time.monotonic() < deadline:  # the text so far reaches the store
                        m = watcher.get(f"/v1/messages/{mid}").json()
                        assert m["status"] == "pending", m
                        saved = m["content"]
                        time.sleep(0.05)
                    assert saved and ANSWER.startswith(saved[:20])
                    os.killpg(proc.pid, signal.SIGKILL)  # mid-answer: no cleanup runs
                    proc.wait()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        llm.slow_stream(0.0)
        proc = _serve(tmp_path, port, llm, [])  # the same store, Milvus file and host:port
        try:
            with httpx.Client(base_url=url, timeout=60) as c:
                messages = c.get(f"/v1/conversations/{cid}").json()["messages"]
                assert [(m["role"], m["status"]) for m in messages] == [("user", "complete"),
                                                                        ("assistant", "interrupted")]
                user, answer = messages
                assert user["content"] == "How do zebras sleep?" and answer["id"] == mid
                assert answer["content"].startswith(saved) and len(answer["content"]) < len(ANSWER)
                assert "interrupted" in answer["error"]
                r = c.post(f"/v1/messages/{mid}/regenerate", json={"stream": False})  # at once: no 409
                assert r.status_code == 200 and r.json()["status"] == "complete", r.text
                versions = c.get(f"/v1/messages/{mid}/versions").json()["data"]
                assert [(v["status"], v["version"]) for v in versions] == [("interrupted", 1), ("complete", 2)]
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
