"""The README's Python API example runs as written (on the bundled example data)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_example_runs(monkeypatch, capsys):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert blocks, "README.md has no Python example"
    data = ROOT / "swgpu_tools" / "data"
    code = blocks[0].replace('"queries.fasta"', repr(str(data / "example_queries.fasta")))
    code = code.replace('"database.fasta.gz"', repr(str(data / "example_database.fasta.gz")))
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert len(namespace["result"].hits) > 0
    assert len(namespace["result"].alignments) == len(namespace["result"].hits)
    assert namespace["aln"].score > 0
    assert capsys.readouterr().out.strip()
