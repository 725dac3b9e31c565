"""Child process for the kill -9 tests: ingest FOLDER into DB/COLLECTION and SIGKILL itself at embedding call N.

Batches hold 4 chunks and are embedded 2 at a time, so call 3 starts batch 2 (batch 1 is inserted: "between
batches") and call 4 is the second half of batch 2 (half embedded, nothing of it inserted: "during a batch").
"""

import os
import signal
import sys

from llama_index_convrag.milvus.client import MilvusTarget
from llama_index_convrag.embeddings.local import LocalMiniLMEmbedding
from llama_index_convrag.ingest import ingest
from llama_index_convrag.errors import MilvusConnectionError
from llama_index_convrag.milvus.client import connect_milvus, forget_clients
from tests.fakes import EmbeddingWrapper


class KillAtCall(EmbeddingWrapper):
    def __init__(self, model, at_call):
        super().__init__(model)
        self.at_call, self.calls = at_call, 0

    def get_text_embedding_batch(self, texts, **kw):
        self.calls += 1
        if self.calls == self.at_call:
            print(f"killing at call {self.calls}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().get_text_embedding_batch(texts)


if __name__ == "__main__":
    folder, db, collection, at_call = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    for attempt in range(3):  # Milvus Lite's embedded server can fail to start on an overloaded machine
        try:
            client = connect_milvus(MilvusTarget(uri=db), timeout=60)
            break
        except MilvusConnectionError:
            forget_clients()
            if attempt == 2:
                raise
    ingest([folder], collection_name=collection, client=client, chunk_size=64, chunk_overlap=8, batch_size=4,
           embed_model=KillAtCall(LocalMiniLMEmbedding(), at_call))
    print("finished without being killed", flush=True)
