from llama_index_convrag.judge import render_png, to_mermaid

from tests.judge.test_tree import sample_tree


def test_mermaid_draws_questions_chunks_and_follow_up_edges():
    assert to_mermaid(sample_tree()) == (
        "flowchart TD\n"
        '    q0["Q0: When was the tower in the French capital built?"]:::question\n'
        '    q0_c0["[1] enriched: Paris is the capital of France."]:::enriched\n'
        "    q0 --> q0_c0\n"
        "    q0_c0 -->|follow-up| q0_0\n"
        '    q0_c1["[0] dropped: BM25 is a ranking function."]:::dropped\n'
        "    q0 --> q0_c1\n"
        '    q0_0["Q1: When was the Eiffel Tower built? / A: In 1889."]:::question\n'
        '    q0_0_c0["[2] answers: The Eiffel Tower #quot;was#quot; built in 1889."]:::answers\n'
        "    q0_0 --> q0_0_c0\n"
        "    classDef answers fill:#b7e1b0\n"
        "    classDef enriched fill:#d8ecb0\n"
        "    classDef kept fill:#fbe6a4\n"
        "    classDef dropped fill:#f4b6b0\n"
        "    classDef ungraded fill:#dddddd\n"
        "    classDef pending fill:#dddddd\n"
        "    classDef question fill:#b8d4f0\n"
    )


def test_png_is_written(tmp_path):
    out = render_png(sample_tree(), tmp_path / "tree.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_render_module_imports_matplotlib_lazily():
    import subprocess
    import sys

    code = "import sys, llama_index_convrag.judge; print('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
