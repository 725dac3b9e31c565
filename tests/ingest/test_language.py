"""Picking the BM25 analyzer of a new collection from its documents' language."""

import pytest

from llama_index_convrag.ingest.language import AnalyzerChoice, chinese_share, choose_analyzer


@pytest.mark.parametrize(
    "text, share",
    [
        ("长城很长", 1.0),
        ("The Great Wall is long", 0.0),
        ("长城 is long", 0.5),  # two Chinese characters, two Latin words
        ("", 0.0),
        ("... !!", 0.0),
    ],
)
def test_chinese_share_counts_a_character_as_a_word(text, share):
    assert chinese_share(text) == share


def test_choose_chinese_english_and_the_majority_of_a_mixed_folder(tmp_path):
    zh = tmp_path / "zh.txt"
    zh.write_text("长城是中国古代的军事防御工程，全长两万多公里。", encoding="utf-8")
    en = tmp_path / "en.txt"
    en.write_text("The Great Wall is an ancient fortification in northern China. " * 3, encoding="utf-8")
    assert choose_analyzer([zh]) == AnalyzerChoice("chinese", 1.0, 1)
    assert choose_analyzer([en]).analyzer == "english"
    mixed = choose_analyzer([zh, en])  # 21 Chinese characters, 30 English words
    assert mixed == AnalyzerChoice("chinese", 21 / 51, 2)
    assert str(mixed) == ("BM25 analyzer: chinese (detected: 41% of the words in 2 sampled files are Chinese; "
                          "--analyzer to choose)")


def test_unreadable_files_are_left_to_the_ingest_report(tmp_path):
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    assert choose_analyzer([binary, tmp_path / "missing.txt"]) == AnalyzerChoice("english", 0.0, 0)


def test_cli_ingest_says_the_analyzer_and_a_chinese_question_finds_its_passage(capsys, tmp_path):
    from llama_index_convrag.cli import main

    folder = tmp_path / "zh"
    folder.mkdir()
    (folder / "changcheng.txt").write_text("长城是中国古代的军事防御工程，全长两万多公里。", encoding="utf-8")
    (folder / "panda.txt").write_text("大熊猫主要生活在四川的山区，以竹子为食。", encoding="utf-8")
    (folder / "gugong.txt").write_text("故宫位于北京市中心，是明清两代的皇家宫殿。", encoding="utf-8")
    db = str(tmp_path / "x.db")
    assert main(["ingest", str(folder), "--uri", db]) == 0
    err = capsys.readouterr().err
    assert "BM25 analyzer: chinese (detected: 100% of the words in 3 sampled files are Chinese" in err
    assert main(["ingest", str(folder), "--uri", db]) == 0  # an existing collection keeps its analyzer
    assert "BM25 analyzer" not in capsys.readouterr().err
    assert main(["ask", str(folder), "大熊猫吃什么？", "--uri", db]) == 0
    out = capsys.readouterr().out
    assert "answer> 大熊猫主要生活在四川的山区，以竹子为食。 [1]\n" in out
