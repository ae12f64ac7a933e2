"""The README as a user follows it: its example command, then its Python snippet as a script, in
the folder the command ran in, so the README cannot drift from what the package does."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import distprove

README = Path(__file__).parents[1] / "README.md"


def fenced_blocks(text: str, language: str) -> list[str]:
    """The bodies of the README's ```language fenced blocks, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.S | re.M)


def example_command(text: str) -> list[str]:
    """The README's ``distprove example ...`` command line, split as the shell splits it."""
    lines = [ln for block in fenced_blocks(text, "bash") for ln in block.splitlines() if ln.startswith("distprove example")]
    assert len(lines) == 1, lines
    return shlex.split(lines[0])


def api_snippet(text: str) -> str:
    """The README's Python block that calls ``distprove.batch``."""
    blocks = [b for b in fenced_blocks(text, "python") if "distprove.batch(" in b]
    assert len(blocks) == 1, blocks
    return blocks[0]


def test_readme_snippet_runs_where_the_example_ran(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    snippet = api_snippet(text)
    assert 'if __name__ == "__main__":' in snippet
    for call in ("distprove.batch(", "distprove.open_key(", "distprove.prove(", "distprove.verify(", "distprove.prove_many("):
        assert call in snippet, call
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(Path(distprove.__file__).parents[1]), os.environ.get("PYTHONPATH")]))}
    cmd = example_command(text)
    assert cmd[0] == "distprove"
    res = subprocess.run([sys.executable, "-m", "distprove.cli", *cmd[1:]], capture_output=True, text=True,
                         timeout=600, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    script = tmp_path / "readme_snippet.py"
    script.write_text(snippet)
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert "proved 3, failed 0, skipped 0" in res.stdout, res.stdout
    out = tmp_path / cmd[cmd.index("--out") + 1]
    assert sorted(p.name for p in (out / "witnesses" / "proofs").glob("*.proof.json")) == [
        f"input_{i}.proof.json" for i in range(3)]
    # the proof the snippet wrote has the public signals of the example's own proof of that witness
    assert json.loads((tmp_path / "input_0.public.json").read_text()) == json.loads((out / "input_0.public.json").read_text())
    printed = [ln for ln in res.stdout.splitlines() if ln.startswith("[")]
    assert printed == [str([int(v) for v in json.loads((out / f"input_{i}.public.json").read_text())]) for i in (1, 2)]
