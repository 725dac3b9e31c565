"""ingest/writer.py: one writer in order against real Milvus Lite; a replaced document's old chunks go just before
its first new chunk; an insert error reaches the caller; a write onto a full disk fails within the write timeout."""

import json
import os
import shutil
import subprocess
import sys
from typing import Any, List

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from llama_index_convrag.cli_commands.common import EXIT_NO_SPACE
from llama_index_convrag.ingest.embed_stage import EmbeddedBatch
from llama_index_convrag.ingest.prepare import to_chunks
from llama_index_convrag.ingest.writer import BatchWriter
from llama_index_convrag.milvus.schema import create_collection, default_spec

SPEC = default_spec(2)


def batch(doc: str, ids: List[str]) -> EmbeddedBatch:
    nodes = [TextNode(id_=i, text=f"text {i}", metadata={"chunk": n},
                      relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)})
             for n, i in enumerate(ids)]
    return EmbeddedBatch(to_chunks(SPEC, nodes, keep_nodes=False), {"embedding": [[1.0, 0.0]] * len(ids)}, 0.0, None,
                         0)


def ids_of(client: Any, name: str) -> List[str]:
    return sorted(r["id"] for r in client.query(name, filter='id != ""', output_fields=["id"]))


def test_batches_are_stored_in_order_and_old_chunks_go_before_the_first_new_one(milvus_client, collection_name):
    create_collection(milvus_client, collection_name, SPEC)
    milvus_client.insert(collection_name, [{"id": "old", "doc_id": "d1", "text": "old", "metadata": {},
                                            "embedding": [0.0, 1.0]}])
    seen: List[dict] = []
    writer = BatchWriter(milvus_client, collection_name, SPEC, queue_size=1, on_stored=lambda c: seen.append(dict(c)))
    writer.replace("d1")
    writer.put(batch("d1", ["a", "b"]))
    writer.put(batch("d1", ["c"]))  # the same document's second batch must not delete the first
    writer.put(batch("d2", ["x"]))
    writer.close()
    assert ids_of(milvus_client, collection_name) == ["a", "b", "c", "x"]
    assert dict(writer.stored) == {"d1": 3, "d2": 1} and seen == [{"d1": 2}, {"d1": 1}, {"d2": 1}]
    assert writer.insert_seconds > 0


def test_an_insert_error_is_raised_to_the_caller(milvus_client, collection_name):
    writer = BatchWriter(milvus_client, collection_name, SPEC, queue_size=1)  # the collection does not exist
    writer.put(batch("d", ["a"]))
    with pytest.raises(Exception, match="collection not found"):
        writer.close()


FULL_DISK = r"""
set -e
mount -t tmpfs -o size=8m tmpfs "$1"
exec "$2" -c '
import json, sys
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from pymilvus import MilvusClient
from llama_index_convrag.cli_commands.common import no_space_error
from llama_index_convrag.cli_commands.common import EXIT_NO_SPACE
from llama_index_convrag.ingest.embed_stage import EmbeddedBatch
from llama_index_convrag.ingest.prepare import to_chunks
from llama_index_convrag.ingest.writer import BatchWriter
from llama_index_convrag.milvus.client import MilvusTarget
from llama_index_convrag.milvus.schema import create_collection, default_spec

uri = sys.argv[1] + "/x.db"
spec = default_spec(384)
client = MilvusClient(uri)
create_collection(client, "c", spec)
writer = BatchWriter(client, "c", spec, queue_size=1, write_timeout=2.0)
error, stored = None, 0
try:
    for b in range(400):  # 64 chunks of 2 kB and 384 floats a batch: the 8 MB disk fills after about 25 batches
        nodes = [TextNode(id_=f"{b}-{i}", text="x" * 2000, relationships={
                 NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"d{b}")}) for i in range(64)]
        writer.put(EmbeddedBatch(to_chunks(spec, nodes, keep_nodes=False), {"embedding": [[0.5] * 384] * 64}, 0.0,
                                 None, 0))
    writer.close()
except Exception as exc:
    error = exc
mapped = no_space_error(MilvusTarget(uri), error) if error is not None else None
print(json.dumps({"error": str(error), "stored": sum(writer.stored.values()),
                  "code": mapped.code if mapped else None, "message": str(mapped) if mapped else None}))
' "$1"
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_an_insert_onto_a_full_disk_fails_after_the_write_timeout_not_after_pymilvus_retries(tmp_path):
    """A real 8 MB tmpfs in a user and mount namespace, filled by real Milvus Lite inserts: the insert that hits the
    full disk fails with pymilvus's retry timeout (the writer's 2 s, not its 75 retries over minutes), and the CLI's
    mapping names the path with exit 9."""
    probe = subprocess.run(["unshare", "-Urm", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {tmp_path}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a user namespace here: {probe.stderr.strip()}")
    disk = tmp_path / "disk"
    disk.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(["unshare", "-Urm", "sh", "-c", FULL_DISK, "sh", str(disk), sys.executable],
                          capture_output=True, text=True, env=env, timeout=170)  # pymilvus's retries take 210 s
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "[insert_rows] Retry timeout: 2.0s" in result["error"] and "Unexpected error in RPC handling" in result["error"]
    assert result["stored"] > 0 and result["stored"] % 64 == 0
    assert result["code"] == EXIT_NO_SPACE
    assert result["message"].startswith(f"the disk holding the Milvus Lite file {str(disk / 'x.db')!r} is full (")

