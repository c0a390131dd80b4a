"""docs/limits.md's tenant fairness example runs as written and prints what the page says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "limits.md"


def blocks() -> list[tuple[str, str]]:
    return re.findall(r"^```(\w*)\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def test_the_tenant_fairness_example_prints_what_the_page_says(tmp_path: Path) -> None:
    found = blocks()
    (index,) = [
        i for i, (lang, body) in enumerate(found) if lang == "python" and 'group="a"' in body
    ]
    code = found[index][1]
    expected = next(body for lang, body in found[index + 1 :] if lang == "text")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    assert expected == "a0 b0 a1 b1 a2 a3 a4 a5\n"


def test_the_limits_example_builds_the_limits_it_names() -> None:
    (code,) = [body for lang, body in blocks() if lang == "python" and "Limits(" in body]
    namespace: dict[str, object] = {}
    exec(compile(code, "limits.md", "exec"), namespace)
    scheduler = namespace["scheduler"]
    assert scheduler.limiter.limits.group == 2  # type: ignore[attr-defined]
