"""Property-based fuzzing of every operation of the OpenAPI schema (schemathesis) against a real server process:
never a 5xx, and every error in the one JSON shape. Bounded (few examples per operation, derandomised); a longer
run is ``bench/serve_fuzz.py --examples N``."""

from __future__ import annotations

from typing import Iterator

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="pip install 'llama-index-convrag[test]' (schemathesis)")
from hypothesis import HealthCheck, given, settings  # noqa: E402

from tests.serve.conftest import Server  # noqa: E402

ERROR_KEYS = {"type", "code", "message", "param"}


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("fuzz"), env={"CONVRAG_TEST_TOKEN_DELAY": "0"}).wait()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def api_schema(fuzz_server: Server) -> object:
    return schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json")


def test_no_5xx_and_one_error_shape(api_schema: "schemathesis.BaseSchema") -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 15  # every route of docs/SERVE.md is in the schema
    statuses: list = []
    for operation in operations:

        @settings(max_examples=6, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case: "schemathesis.Case") -> None:
            response = case.call(timeout=60)
            statuses.append(response.status_code)
            where = f"{case.method} {case.formatted_path}"
            assert response.status_code < 500, f"{where}: {response.status_code} {response.text}"
            if response.status_code >= 400:
                body = response.json()
                assert set(body) == {"error"} and set(body["error"]) == ERROR_KEYS, f"{where}: {response.text}"

        check()
    assert any(s < 300 for s in statuses) and any(400 <= s < 500 for s in statuses), sorted(set(statuses))
    print(f"{len(statuses)} calls over {len(operations)} operations; statuses {sorted(set(statuses))}")
