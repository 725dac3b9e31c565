"""ingest/limits.py: the bounds of one run, validated once, chosen per run when not given."""

import pytest

from llama_index_convrag.ingest.limits import DEFAULT_EMBED_CONCURRENCY, PipelineLimits


class ServerModel:
    """Stands for any model that is not the in-process local one (an embedding server's client)."""


@pytest.mark.parametrize("name, value", [("embed_concurrency", 0), ("read_workers", -1), ("read_ahead", 0),
                                         ("write_queue", 0), ("embed_concurrency", 1.5), ("read_workers", True)])
def test_bad_bounds_are_refused_naming_the_value(name, value):
    with pytest.raises(ValueError, match=rf"{name} must be an integer >= \d, got {value!r}"):
        PipelineLimits(**{name: value})


def test_the_local_model_gets_one_request_a_server_several_and_reading_stays_in_this_process(embed_model):
    local, server = PipelineLimits().resolved(embed_model), PipelineLimits().resolved(ServerModel())
    assert (local.embed_concurrency, local.read_workers) == (1, 0)
    assert (server.embed_concurrency, server.read_workers) == (DEFAULT_EMBED_CONCURRENCY, 0)


def test_given_bounds_are_kept():
    got = PipelineLimits(embed_concurrency=7, read_workers=3, read_ahead=5, write_queue=2).resolved(ServerModel())
    assert got == PipelineLimits(embed_concurrency=7, read_workers=3, read_ahead=5, write_queue=2)


def test_extra_dense_fields_keep_reading_in_this_process():
    assert PipelineLimits().resolved(ServerModel(), needs_nodes=True).read_workers == 0
    with pytest.raises(ValueError, match="read_workers must be 0 with extra_dense_fields, got 2"):
        PipelineLimits(read_workers=2).resolved(ServerModel(), needs_nodes=True)
