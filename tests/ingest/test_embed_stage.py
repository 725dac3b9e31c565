"""ingest/embed_stage.py: results in submission order, at most ``concurrency`` batches in flight, stop requests."""

import threading
from typing import List, Optional

import pytest
from llama_index.core.schema import TextNode

from llama_index_convrag.ingest.embed_stage import EmbedStage, embed_batch, embed_texts
from llama_index_convrag.ingest.prepare import to_chunks
from llama_index_convrag.milvus.schema import default_spec

SPEC = default_spec(1)
from llama_index_convrag.ingest.progress import StopRequest


class Gate:
    """An embed function that blocks each batch until released, recording how many run at once."""

    def __init__(self) -> None:
        self.running = self.most = 0
        self.lock = threading.Lock()
        self.release = {i: threading.Event() for i in range(6)}

    def __call__(self, nodes: List[TextNode]) -> Optional[str]:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        self.release[int(nodes[0].text)].wait(30)
        with self.lock:
            self.running -= 1
        return nodes[0].text


def test_batches_come_back_in_order_with_at_most_concurrency_in_flight():
    gate = Gate()
    stage = EmbedStage(gate, concurrency=2)
    assert stage.submit([TextNode(text="0")]) == [] and stage.submit([TextNode(text="1")]) == []
    gate.release[1].set()  # the second finishes first: nothing comes back before the first
    threading.Timer(0.2, gate.release[0].set).start()
    assert stage.submit([TextNode(text="2")]) == ["0", "1"]  # blocked until the oldest was done
    for i in (2, 3):
        gate.release[i].set()
    got = stage.submit([TextNode(text="3")]) + stage.drain()
    stage.close()
    assert got == ["2", "3"] and gate.most == 2


def test_an_embedding_error_is_raised_by_the_stage():
    def fail(nodes: List[TextNode]) -> None:
        raise ConnectionError("server went away")

    stage = EmbedStage(fail, concurrency=1)
    with pytest.raises(ConnectionError, match="server went away"):
        stage.submit([TextNode(text="a")])  # raised by this call when the batch failed at once, else by drain
        stage.drain()
    stage.close()
    with pytest.raises(ValueError, match="embed_concurrency must be >= 1, got 0"):
        EmbedStage(fail, concurrency=0)


class Recorder:
    embed_batch_size = 2

    def __init__(self, stop: StopRequest, stop_after: int) -> None:
        self.calls: List[List[str]] = []
        self.stop, self.stop_after = stop, stop_after

    def get_text_embedding_batch(self, texts: List[str]) -> List[List[float]]:
        self.calls.append(texts)
        if len(self.calls) == self.stop_after:
            self.stop.request()
        return [[float(len(t))] for t in texts]


def test_texts_go_in_the_models_batch_size_and_a_stop_ends_between_sub_batches():
    stop = StopRequest()
    model = Recorder(stop, stop_after=0)
    assert embed_texts(model, ["a", "bb", "ccc"], stop) == [[1.0], [2.0], [3.0]]
    assert model.calls == [["a", "bb"], ["ccc"]]
    model = Recorder(stop, stop_after=1)
    chunks = to_chunks(SPEC, [TextNode(text=t) for t in ("a", "bb", "ccc")], keep_nodes=False)
    assert embed_batch(model, ["embedding"], {}, chunks, stop) is None and model.calls == [["a", "bb"]]


def test_embed_batch_fills_each_dense_field():
    model = Recorder(StopRequest(), stop_after=0)
    nodes = [TextNode(text="abc", metadata={"title": "t"}), TextNode(text="de", metadata={"title": "tt"})]
    titles = {"title_embedding": lambda n: n.metadata["title"]}
    batch = embed_batch(model, ["embedding", "title_embedding"], titles, to_chunks(SPEC, nodes, keep_nodes=True),
                        StopRequest())
    assert batch is not None and [c.text for c in batch.chunks] == ["abc", "de"]
    assert batch.vectors == {"embedding": [[3.0], [2.0]], "title_embedding": [[1.0], [2.0]]}
    assert batch.window is None and batch.over_window == 0 and batch.seconds >= 0
    with pytest.raises(ValueError, match="read_workers must be 0 with extra_dense_fields"):
        embed_batch(model, ["embedding", "title_embedding"], titles, to_chunks(SPEC, nodes, keep_nodes=False),
                    StopRequest())
