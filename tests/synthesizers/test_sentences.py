import math

import pytest

from llama_index_convrag.synthesizers.sentences import (
    Sentence,
    answer_type,
    cheap_scores,
    compose,
    cosine,
    definition_lines,
    embed_text,
    near_best,
    question_of,
    select,
    sentences_of,
    shortlist,
    split_sentences,
    terms_of,
    type_evidence,
    with_neighbour,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("He said \"stop.\" Then he left.", ["He said \"stop.\"", "Then he left."]),
        ("Use e.g. the first. Pi is 3.14 here.", ["Use e.g. the first.", "Pi is 3.14 here."]),
        ("北京是首都。长城很长！你去过吗？好", ["北京是首都。", "长城很长！", "你去过吗？", "好"]),
        ("他说：“走吧。”然后走了。", ["他说：“走吧。”", "然后走了。"]),
        ("hard\nwrapped line. Next", ["hard wrapped line.", "Next"]),
        ("Title\n\nBody text", ["Title", "Body text"]),
        ("Wow!!! Really?!", ["Wow!!!", "Really?!"]),
        ("By Richard M. Stallman. Done", ["By Richard M. Stallman.", "Done"]),
        ("She won the U.S. Open in 2021. Then", ["She won the U.S. Open in 2021.", "Then"]),
        ("On Thursday, Nov. 12, 2020. Then", ["On Thursday, Nov. 12, 2020.", "Then"]),
        ("...  \n\n -- ", []),
        ("## Title\nBody text. More", ["## Title", "Body text.", "More"]),
        ("Faults:\n| fault | kept |\n|---|---|\n| kill -9. Then | yes |\nAfter", ["Faults:", "| fault | kept |",
                                                                             "| kill -9. Then | yes |", "After"]),
        ("- one\n  wrapped. Two\n1. first", ["- one wrapped.", "Two", "1. first"]),
        ("AUTHOR\n       Written by Mike Haertel.", ["AUTHOR", "Written by Mike Haertel."]),
        ("", []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_sentences_of_keeps_order_and_drops_repeats():
    assert sentences_of(["A one. B two.", "B two. C three."]) == [
        Sentence(0, 0, "A one.", "en"),
        Sentence(0, 1, "B two.", "en"),
        Sentence(1, 1, "C three.", "en"),
    ]


def test_cosine_handles_scale_and_zero_vectors():
    assert cosine([1.0, 0.0], [[2.0, 0.0], [0.0, 3.0], [0.0, 0.0], [1.0, 1.0]]) == pytest.approx(
        [1.0, 0.0, 0.0, 2**-0.5]
    )


def test_select_best_first_with_ties_in_document_order():
    assert select([0.1, 0.9, 0.5, 0.9], [1, 1, 1, 1], max_sentences=3) == [1, 3, 2]


def test_select_skips_what_overflows_the_token_limit():
    # 1 (0.9, 8 tokens) fits, 2 (0.8, 5) would make 13 > 10, 0 (0.5, 2) fits
    assert select([0.5, 0.9, 0.8], [2, 8, 5], max_sentences=3, max_tokens=10) == [1, 0]


def test_select_stops_below_the_cutoff():
    assert select([0.5, 0.9, 0.2], [1, 1, 1], max_sentences=3, similarity_cutoff=0.4) == [1, 0]


def test_compose_document_order_one_marker_per_run():
    chosen = [Sentence(2, 0, "C."), Sentence(0, 3, "A2."), Sentence(0, 1, "A1."), Sentence(1, 0, "B.")]
    assert compose(chosen) == "A1. A2. [1] B. [2] C. [3]"


def test_compose_joins_chinese_without_spaces():
    assert compose([Sentence(0, 1, "长城很长！"), Sentence(0, 0, "北京是首都。")]) == "北京是首都。长城很长！ [1]"
    assert compose([]) == ""


def test_terms_drop_stop_words_stem_and_use_jieba_words_for_chinese():
    assert terms_of("How do I list the hidden files with ls -a?") == ["list", "hidden", "file", "ls", "-a"]
    assert terms_of("中超冠军") == ["中超", "冠军"]
    assert terms_of("Who wrote it? Written by listing things") == ["wrote", "written", "list", "thing"]
    assert terms_of("Müller bought a café in Zürich") == ["müller", "bought", "café", "zürich"]


@pytest.mark.parametrize(
    "question, kind",
    [
        ("Who acquired WhatsApp?", "who"),
        ("When was Splatoon 2 released?", "when"),
        ("Super Bowl 2021 location", "where"),
        ("How many people live in Paris?", "count"),
        ("How do I list hidden files with ls?", "how-to"),
        ("What is a hard link?", "definition"),
        ("Tell me about tar", "other"),
        ("2020赛季中超冠军是谁", "who"),
        ("首趟RCEP班列什么时候开出", "when"),
        ("北京有多少人口", "count"),
        ("如何安装", "how-to"),
        ("Which actor won Best Actor at the ceremony?", "who"),  # which/what + a noun answered by a name
        ("What movie won the Oscar for Best Animated Film?", "who"),
        ("Which lead actress starred in it?", "who"),  # one word between
        ("哪位导演拍了这部电影", "who"),
        ("Which film festival is oldest?", "who"),
        ("How do I keep the input files when compressing with gzip?", "how-to"),  # "how do" before "when"
        ("Which year did it open?", "when"),
        ("What happens to the placeholder when it fails?", "other"),  # "when" as a conjunction asks no time
        ("When it fails, what happens?", "other"),
        ("And when did he die?", "when"),
        ("When?", "when"),
        ("Do you know when the show premieres?", "when"),
    ],
)
def test_answer_type(question, kind):
    assert answer_type(question) == kind


def test_question_terms_leave_out_chinese_question_words():
    assert question_of("冠军是谁").terms == frozenset({"冠军"})
    assert question_of("Who acquired WhatsApp?") == question_of("who ACQUIRED whatsapp")


def test_type_evidence_is_beyond_the_question_words():
    when = question_of("When did the 2021 Super Bowl take place?")
    assert type_evidence(when, "It took place on February 7, 2021.")
    assert not type_evidence(when, "The 2021 Super Bowl was big.")  # the only year is the question's own
    assert type_evidence(question_of("Who acquired WhatsApp?"), "WhatsApp was bought by Facebook.")
    assert not type_evidence(question_of("Who acquired WhatsApp?"), "whatsapp was bought.")
    assert type_evidence(question_of("How do I list hidden files?"), "-a, --all do not ignore entries")


def test_cheap_scores_weigh_rare_question_terms_rank_and_definition_lines():
    candidates = sentences_of([
        "Hidden files start with a dot. Files are shown.",
        "-a, --all do not ignore entries starting with .",
    ])
    question = question_of("How do I list hidden files?")
    scores = cheap_scores(question, candidates)
    # weights log(1 + 3 / (1 + df)): "hidden" in 1 sentence, "files" in 2, "list" in none
    hidden, files, list_ = math.log(1 + 3 / 2), math.log(1 + 3 / 3), math.log(1 + 3)
    total = hidden + files + list_
    assert scores == pytest.approx([
        (hidden + files) / total + 0.2,
        0.5 * (hidden + files) / total + 0.2,  # more than its own files / total: half the sentence before's
        0.15 + 0.2 / 2,  # no shared term: the definition-line bonus and rank 2 only
    ])
    assert shortlist(scores, 2) == [0, 1]
    assert definition_lines(question, candidates) == [2]
    assert definition_lines(question_of("Who wrote it?"), candidates) == []


def test_shortlist_ties_in_document_order_and_reserves_half_for_definition_lines():
    assert shortlist([0.5, 0.9, 0.5, 0.1], 3) == [1, 0, 2]
    assert shortlist([0.5, 0.9, 0.5, 0.1, 0.2], 4, reserved=[3, 4]) == [1, 0, 4, 3]
    assert shortlist([0.5, 0.9, 0.5, 0.1, 0.2], 3, reserved=[3, 4]) == [1, 0, 4]


def test_with_neighbour_adds_the_sentence_a_pronoun_points_to():
    candidates = sentences_of(["The Eiffel Tower is in Paris. It was finished in 1889.", "It rains."])
    assert with_neighbour(candidates, [1]) == [1, 0]
    assert with_neighbour(candidates, [0, 1]) == [0, 1]
    assert with_neighbour(candidates, [2]) == [2]  # first of its passage: nothing before it
    assert with_neighbour(candidates, []) == []


def test_embed_text_cuts_long_sentences():
    assert embed_text("a" * 500) == "a" * 200
    assert embed_text("长" * 500) == "长" * 64
    assert embed_text("short") == "short"


def test_near_best_keeps_scores_within_the_share_of_the_best():
    assert near_best([1.0, 0.59, 0.6, 0.9]) == [0, 2, 3]
    assert near_best([0.2, 0.1], share=0.4) == [0, 1]
    assert near_best([-0.5, -1.0]) == [0, 1]  # no positive best: nothing to compare with
    assert near_best([]) == []


def test_answer_types_of_dates_amounts_and_names_and_the_share_an_account_keeps():
    from llama_index_convrag.synthesizers.answer_rules import DEFAULT_ANSWER_RULES
    from llama_index_convrag.synthesizers.sentences import keep_share, type_strength

    KEEP_SHARE, OPEN_SHARE = DEFAULT_ANSWER_RULES.keep_share, DEFAULT_ANSWER_RULES.open_share

    assert answer_type("What is the release date of Cyberpunk 2077?") == "when"
    assert answer_type("What was Tesla's revenue in Q2 2020?") == "other"  # a noun is no cue: "revenue model"
    assert answer_type("What is the revenue model of open source?") == "definition"
    when = question_of("When was Splatoon 2 released?")
    assert type_strength(when, "Splatoon 2 was released in 2017.") == pytest.approx(1 / 3)  # a year alone
    assert type_strength(when, "It was released on July 21.") == pytest.approx(2 / 3)  # a day with its month
    assert type_strength(when, "It was released on July 21, 2017.") == 1.0  # a full date
    assert type_strength(when, "Splatoon 2 was released.") == 0.0
    who = question_of("Who directed the Assassin's Creed movie?")
    assert type_strength(who, "Directed by Justin Kurzel, it opened in December.") == 1.0  # a full name
    assert type_strength(who, "The film opened in December to poor reviews from Variety.") == 0.5  # one capital
    assert type_strength(question_of("《阿凡达》的导演是谁"), "导演詹姆斯·卡梅隆公司出品") == 1.0
    assert keep_share(when) == KEEP_SHARE
    assert keep_share(question_of("Why did the band break up?")) == OPEN_SHARE < KEEP_SHARE
    assert keep_share(question_of("Why did the band break up?"), on_topic=False) == KEEP_SHARE  # an unrelated passage
    assert near_best([1.0, 0.5, 0.35, 0.2], shares=[0.6, 0.6, 0.3, 0.6]) == [0, 2]  # each sentence its own share


def test_a_word_in_another_form_counts_when_the_stemmer_folds_it():
    from llama_index_convrag.synthesizers.sentences import term_overlaps

    candidates = sentences_of(["Voters chose Emmanuel Macron in the elections.", "The weather was fine."])
    first, second = term_overlaps(question_of("Who won the election?"), candidates)
    assert first > 0 and second == 0.0  # election ~ elections (Snowball), win is held by neither


def test_a_when_answer_grows_with_each_part_of_the_date():
    from llama_index_convrag.synthesizers.sentences import type_strength

    when = question_of("When was the Pixel 5a announced?")
    assert type_strength(when, "It came out in 2021.") == pytest.approx(1 / 3)
    assert type_strength(when, "It came out in August 2021.") == pytest.approx(2 / 3)  # a month and a year
    assert type_strength(when, "It came out on August 17, 2021.") == 1.0
    assert type_strength(when, "It came out on 17 August 2021.") == 1.0
    assert type_strength(when, "It came out Oct. 19, 2021.") == 1.0  # a short month with its day
    assert type_strength(when, "It came out on 19 Oct 2021.") == 1.0
    assert type_strength(question_of("Pixel 5a 什么时候发布"), "2021年8月17日发布") == 1.0


def test_a_question_word_in_another_form_is_no_evidence_of_a_name():
    from llama_index_convrag.synthesizers.sentences import type_strength

    who = question_of("Which actor won the academy award?")
    assert type_strength(who, "The ceremony of the Academy Awards.") == 0.0  # "Awards": the term "award"
    assert type_strength(who, "The ceremony of the Academy Awards, hosted in Hollywood.") == 0.5
    assert type_strength(who, "The award went to Chloé Zhao.") == 1.0  # an accented full name
    assert type_strength(who, "The award went to José Müller.") == 1.0


def test_a_question_for_a_date_place_or_amount_keeps_the_sentences_that_hold_one():
    from llama_index_convrag.synthesizers.sentences import with_evidence

    candidates = sentences_of(["Google announced the Pixel 5a phone. It was announced on August 17, 2021.",
                               "The Pixel 5a has a large battery."])
    assert with_evidence(question_of("When was the Pixel 5a announced?"), candidates, [0, 1, 2]) == [1]
    assert with_evidence(question_of("How many Pixel 5a phones?"), candidates, [0, 2]) == [0, 2]  # none holds one
    assert with_evidence(question_of("Who announced the Pixel 5a?"), candidates, [2, 0]) == [2, 0]  # names: all
    assert with_evidence(question_of("Why was the Pixel 5a announced?"), candidates, [0, 1]) == [0, 1]
    zh = sentences_of(["北京是中国的首都。北京位于华北平原，人口约2100万。"])
    assert with_evidence(question_of("北京有多少人口"), zh, [0, 1]) == [1]


def test_a_chinese_where_answer_may_say_located_without_a_place_suffix():
    from llama_index_convrag.synthesizers.sentences import with_evidence

    zh = sentences_of(["故宫是明清两代的皇宫。故宫位于北京中轴线的中心。"])
    question = question_of("故宫在哪里")
    assert question.answer_type == "where"
    assert with_evidence(question, zh, [0, 1]) == [1]
