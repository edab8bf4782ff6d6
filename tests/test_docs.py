"""The README and docs hold: every relative link and #anchor resolves, and every ``grasp-s2r`` command shown in a
code block parses with the real parser (its options exist, its values are accepted)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from collections import Counter
from pathlib import Path

import pytest

from grasp_s2r.cli import build_parser

REPO = Path(__file__).resolve().parent.parent
DOCS = sorted([REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("docs/*/*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
SYNOPSIS = re.compile(r"\[|\.\.\.|…|\w\|\w|[A-Z]{3,}")
"""What marks a synopsis or a placeholder (``[--x N]``, ``a|b``, ``DIR``) rather than a command to run."""


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the lines outside fenced code blocks."""
    out, fenced = [], False
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append((i, line))
    return out


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of ``path``'s headings: lower case, markup dropped, punctuation but ``-`` and ``_`` removed,
    spaces to hyphens, repeats numbered."""
    seen: Counter[str] = Counter()
    out = set()
    for _, line in prose_lines(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m[1]).replace("`", "").replace("*", "")
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        out.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of the relative links of ``path``'s prose (inline code left out), across line breaks too."""
    prose = prose_lines(path)
    text = "\n".join(line for _, line in prose)
    numbers = [i for i, _ in prose]
    found = []
    for m in LINK.finditer(re.sub(r"`[^`\n]*`", lambda c: " " * len(c[0]), text)):
        target = m[1]
        if not re.match(r"[a-z]+:", target):
            found.append((numbers[text[:m.start()].count("\n")], target))
    return found


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for doc in DOCS:
        for line, target in links(doc):
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                broken.append(f"{doc.relative_to(REPO)}:{line}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{doc.relative_to(REPO)}:{line}: {target}: no such heading")
    assert not broken, "\n".join(broken)


def shown_commands() -> list[tuple[str, list[str]]]:
    """("file:line", argv) of each complete ``grasp-s2r`` command in the docs' code blocks (continued lines joined,
    comments and redirections cut, synopses with placeholders left out)."""
    out = []
    for doc in DOCS:
        fenced, joined, start = False, "", 0
        for i, line in enumerate(doc.read_text().splitlines(), 1):
            if line.strip().startswith("```"):
                fenced = not fenced
                continue
            if not fenced:
                continue
            start = start or i
            if line.rstrip().endswith("\\"):
                joined += line.rstrip()[:-1] + " "
                continue
            command, joined, where, start = joined + line, "", f"{doc.relative_to(REPO)}:{start}", 0
            for part in re.split(r"&&|;|\|", re.sub(r"\s#.*$", "", command)):
                m = re.search(r"(?:^|\s)grasp-s2r\s+(.*)$", re.sub(r"\s\d?>>?.*$", "", part))
                if m and not SYNOPSIS.search(m[1]):
                    out.append((where, shlex.split(m[1])))
    return out


def test_the_docs_show_commands_to_check():
    # a guard for the test below: the docs show dozens of runnable commands (a broken scan would find none)
    assert len(shown_commands()) >= 30


@pytest.mark.parametrize(("where", "argv"), shown_commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_command_the_docs_show_parses(where, argv):
    # a GPU machine's commands (docs/gpu.md) parse here too: --device is checked against this machine's devices
    argv = ["cpu" if a == "cuda" and argv[i - 1] == "--device" else a for i, a in enumerate(argv)]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"{where}: grasp-s2r {shlex.join(argv)}: exit {e.code}: {err.getvalue().strip()}")


COMMAND_DOCS = ("docs/commands.md", "docs/command-behaviour.md")
"""Where a command's options are documented: its section of commands.md, or the options several commands share."""


@pytest.mark.parametrize("command", sorted(build_parser().command_parsers))  # type: ignore[attr-defined]
def test_every_option_of_every_command_is_documented(command):
    """Each option a command's parser accepts is named in its ``### command`` section of docs/commands.md or in
    docs/command-behaviour.md (one of its spellings: ``--no-next-obs`` documents ``--next-obs``)."""
    text = (REPO / COMMAND_DOCS[0]).read_text()
    start = text.index(f"\n### {command}\n")
    end = text.find("\n### ", start + 1)
    documented = text[start:end if end > 0 else None] + (REPO / COMMAND_DOCS[1]).read_text()
    parser = build_parser(only=command).command_parsers[command]  # type: ignore[attr-defined]
    missing = [action.option_strings[-1] for action in parser._actions
               if action.option_strings and "--help" not in action.option_strings
               and not any(re.search(re.escape(o) + r"(?![\w-])", documented) for o in action.option_strings)]
    assert not missing, f"grasp-s2r {command}: options documented in neither {' nor '.join(COMMAND_DOCS)}: {missing}"
