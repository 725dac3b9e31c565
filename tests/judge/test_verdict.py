import pytest

from llama_index_convrag.judge.verdict import Verdict, verdict_from_args, verdict_from_text


@pytest.mark.parametrize("args, expected", [
    ({"grade": 2, "reason": "says 1889"}, Verdict(2, "says 1889")),
    ({"grade": "1", "reason": " partial ", "follow_up": " When? "}, Verdict(1, "partial", "When?")),
    ({"grade": 1.0, "follow_up_question": "Who?"}, Verdict(1, "", "Who?")),
    ({"grade": 0, "reason": "off topic", "follow_up": "ignored for grade 0"}, Verdict(0, "off topic")),
    ({"grade": 2, "follow_up": "ignored for grade 2"}, Verdict(2, "")),
    ({"grade": 1, "follow_up": "  "}, Verdict(1, "", None)),
])
def test_args_are_read(args, expected):
    assert verdict_from_args(args) == expected


@pytest.mark.parametrize("args, error", [
    ({"grade": 3}, "grade 3 is out of range; accepted: [0, 1, 2]"),
    ({"grade": -1}, "grade -1 is out of range; accepted: [0, 1, 2]"),
    ({"grade": "two"}, "grade 'two' is not an integer; accepted: [0, 1, 2]"),
    ({"grade": True}, "grade True is not an integer; accepted: [0, 1, 2]"),
    ({"grade": 1.5}, "grade 1.5 is not an integer; accepted: [0, 1, 2]"),
    ({"reason": "no grade"}, "reply has no 'grade': \"{'reason': 'no grade'}\""),
    (["grade", 2], "expected an object with 'grade', got list: \"['grade', 2]\""),
])
def test_malformed_or_out_of_range_args_are_grade_zero_with_the_reason(args, error):
    assert verdict_from_args(args) == Verdict(0, "malformed judge reply", None, error)


def test_text_reply_uses_the_first_json_object_even_inside_prose_and_fences():
    text = 'Sure! ```json\n{"grade": 1, "reason": "only the city", "follow_up": "When was it built?"}\n``` {"grade": 2}'
    assert verdict_from_text(text) == Verdict(1, "only the city", "When was it built?")


def test_text_reply_without_json_falls_back_to_labelled_lines():
    text = "Grade: 1\nReason: names the city only\nFollow-up question: \"When was the tower built?\"\n"
    assert verdict_from_text(text) == Verdict(1, "names the city only", "When was the tower built?")


@pytest.mark.parametrize("text, error", [
    ("", "empty reply"),
    ("   ", "empty reply"),
    ("I think it is relevant.", "no grade found in reply: 'I think it is relevant.'"),
    ("grade: 7", "grade 7 is out of range; accepted: [0, 1, 2]"),
    ('{"grade": "x"}', "grade 'x' is not an integer; accepted: [0, 1, 2]"),
])
def test_unreadable_text_is_grade_zero_with_the_reason(text, error):
    verdict = verdict_from_text(text)
    assert (verdict.grade, verdict.error) == (0, error)


def test_long_replies_are_shortened_in_the_error():
    verdict = verdict_from_text("x" * 1000)
    assert verdict.error == f"no grade found in reply: {'x' * 200 + '...'!r}"


# Qwen2.5-0.5B behind llama.cpp, offered the tool with tool_choice="required": prose, no tool call (exact text)
QWEN_PROSE_CALL = ('```json\n{\n  "name": "grade_chunk",\n  "arguments": {\n    "grade": 0,\n'
                   '    "reason": "The passage is irrelevant.",\n    "follow_up": ""\n  }\n}\n```')


def test_a_tool_call_written_as_prose_is_unwrapped():
    assert verdict_from_text(QWEN_PROSE_CALL) == Verdict(0, "The passage is irrelevant.")
    assert verdict_from_args({"name": "grade_chunk", "arguments": '{"grade": 2, "reason": "r"}'}) == Verdict(2, "r")


@pytest.mark.parametrize("args", [
    {"name": "grade_chunk", "arguments": "{not json"},
    {"name": "grade_chunk", "arguments": ["grade", 2]},
    {"name": "grade_chunk", "arguments": {"grade": 2}, "extra": 1},
])
def test_only_a_well_formed_call_object_is_unwrapped(args):
    verdict = verdict_from_args(args)
    assert (verdict.grade, verdict.error) == (0, f"reply has no 'grade': {repr(args)!r}")
