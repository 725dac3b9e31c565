"""ingest/limits.py: the bounds of one run, validated once, chosen per run when not given."""

import pytest

from llama_index_convrag.ingest import limits
from llama_index_convrag.ingest.limits import DEFAULT_EMBED_CONCURRENCY, PROCESS_MIN_FILES, PipelineLimits


class ServerModel:
    """Stands for any model that is not the in-process local one (an embedding server's client)."""


@pytest.mark.parametrize("name, value", [("embed_concurrency", 0), ("read_workers", -1), ("read_ahead", 0),
                                         ("write_queue", 0), ("embed_concurrency", 1.5), ("read_workers", True)])
def test_bad_bounds_are_refused_naming_the_value(name, value):
    with pytest.raises(ValueError, match=rf"{name} must be an integer >= \d, got {value!r}"):
        PipelineLimits(**{name: value})


def test_the_local_model_gets_one_request_and_no_reader_processes(embed_model, monkeypatch):
    monkeypatch.setattr(limits.os, "cpu_count", lambda: 16)
    got = PipelineLimits().resolved(embed_model, 10 * PROCESS_MIN_FILES)
    assert (got.embed_concurrency, got.read_workers) == (1, 0)


def test_a_server_model_gets_several_requests_and_processes_only_for_large_runs_on_enough_cores(monkeypatch):
    monkeypatch.setattr(limits.os, "cpu_count", lambda: 16)
    small = PipelineLimits().resolved(ServerModel(), PROCESS_MIN_FILES - 1)
    large = PipelineLimits().resolved(ServerModel(), PROCESS_MIN_FILES)
    assert (small.embed_concurrency, small.read_workers) == (DEFAULT_EMBED_CONCURRENCY, 0)
    assert (large.embed_concurrency, large.read_workers) == (DEFAULT_EMBED_CONCURRENCY, 4)
    monkeypatch.setattr(limits.os, "cpu_count", lambda: 2)
    assert PipelineLimits().resolved(ServerModel(), PROCESS_MIN_FILES).read_workers == 0


def test_given_bounds_are_kept():
    got = PipelineLimits(embed_concurrency=7, read_workers=3, read_ahead=5, write_queue=2).resolved(ServerModel(), 1)
    assert got == PipelineLimits(embed_concurrency=7, read_workers=3, read_ahead=5, write_queue=2)
