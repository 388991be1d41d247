"""No "movies"/"books" literal decides behaviour outside the domains' own code: every later step and the env
read the domain's terms from the manifest (nouns, taste prior, prompt family, rater scale), so a corpus with
any name goes through them (tests/corpus/test_described.py proves it on a made-up domain).

Checked: comparisons (``==``, ``!=``, ``in (...)``) of a value with those literals, in ``suber_data`` and
``env/suber_env``, outside ``suber_data/movies``, ``suber_data/books`` and their two pipeline modules.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWN_CODE = (
    "suber_data/movies/",
    "suber_data/books/",
    "suber_data/pipelines/movies.py",
    "suber_data/pipelines/books.py",
)
DECISION = re.compile(
    r"""(==|!=)\s*["'](movies|books)["']|["'](movies|books)["']\s*(==|!=)|\bin\s*\((\s*["'](items|movies|books)["'],)*\s*["'](movies|books)["']"""
)
# Lines that compare a prompt family (the manifest's terms.descriptions: movies, books or items), not a domain.
FAMILY_CHECKS = {
    "suber_data/descriptions/program.py": 'if domain in ("books", "items"):',
    "suber_data/descriptions/generate.py": 'if domain not in ("movies", "books", "items"):',
}


def _decisions() -> list[str]:
    found = []
    for base in ("suber_data", "env/suber_env"):
        for path in sorted((ROOT / base).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(OWN_CODE):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if DECISION.search(line) and FAMILY_CHECKS.get(rel, "\0") not in line:
                    found.append(f"{rel}:{number}: {line.strip()}")
    return found


def test_no_domain_name_decides_behaviour_outside_its_own_code():
    assert _decisions() == []


def test_the_check_finds_what_it_looks_for(tmp_path):
    for line in ('if ds.domain == "movies":', 'x = 1 if "books" != d else 2', 'if domain in ("movies", "books"):'):
        assert DECISION.search(line), line
    assert not DECISION.search('DOMAIN = "movies"  # a name, not a decision')
    for rel, line in FAMILY_CHECKS.items():  # the allowed lines still exist (an exception cannot outlive its line)
        assert line in (ROOT / rel).read_text(encoding="utf-8"), rel
