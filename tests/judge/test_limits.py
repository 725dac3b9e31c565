import pytest

from llama_index_convrag.judge import SearchLimits


def test_defaults_and_dict():
    assert SearchLimits().to_dict() == {"max_depth": 2, "max_branching": 3, "max_llm_calls": 40}
    assert SearchLimits(max_depth=0, max_branching=0, max_llm_calls=0).max_llm_calls == 0


@pytest.mark.parametrize("name, value", [("max_depth", -1), ("max_branching", 1.5), ("max_llm_calls", True),
                                         ("max_depth", "2")])
def test_bad_limits_name_the_value(name, value):
    with pytest.raises(ValueError, match=f"{name} must be an integer >= 0, got {value!r}"):
        SearchLimits(**{name: value})
