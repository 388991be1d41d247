"""The runnable example of docs/embeddings.md runs and finds what it says it finds."""

import contextlib
import io
import re
from pathlib import Path

from .helpers import needs_st

DOC = Path(__file__).resolve().parents[2] / "docs" / "embeddings.md"


@needs_st
def test_docs_example_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    example = next(b for b in blocks if "duckdb_nearest" in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example, str(DOC), "exec"), {"__name__": "docs_example"})
    lines = out.getvalue().splitlines()
    assert eval(lines[0]) == {"total": 4, "unique_texts": 4, "embedded": 4, "reused": 0}
    numpy_one, numpy_set, sql_one, sql_raw = (eval(line) for line in lines[1:5])
    assert {i for i, _ in numpy_one} == {0, 1}
    assert [i for i, _ in numpy_set] == [3]
    assert [i for i, _ in sql_one] == [i for i, _ in numpy_one] == [i for i, _ in sql_raw]
