"""The docs' sources are written one sentence per line, so that a wording change touches one
line and never reflows a paragraph (STYLE.md, "Docs source").

Prose is what docutils parses as a paragraph, outside tables: code blocks, directive options,
comments and titles are not checked. In a paragraph, a line must not hold a sentence's end
followed by another sentence, and every line but the last must end a sentence (or at a colon).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path

import pytest

try:
    from docutils import nodes
    from docutils.core import publish_doctree
    from docutils.parsers.rst import Directive, directives
except ImportError:  # docutils comes with Sphinx, in the ``docs`` extra
    if os.environ.get("CI"):
        raise
    pytest.skip("docutils is not installed", allow_module_level=True)

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(path.name for path in DOCS.glob("*.rst"))

# A sentence's end (closing quotes, brackets and emphasis included) and the next one's start;
# not "e.g.", "i.e.", "etc.", "vs." or an ellipsis, which go on.
NOT_AN_END = r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)(?<!\.\.)"
TWO_SENTENCES = re.compile(NOT_AN_END + r"[.!?][)\"'*]*\s+[A-Z(\"`*]")
# A line may also end at a colon, before what it introduces (an error message, say).
SENTENCE_END = re.compile(r"[.!?:][)\"'*]*$")
INLINE_LITERAL = re.compile(r"``.+?``")
# A run-in heading, "- **Known before INSERT.** The key exists ...", stays with its sentence.
RUN_IN_HEADING = re.compile(r"^\*\*[^*]+\*\* ")


class Prose(Directive):
    """Sphinx's directives whose content is prose, parsed as such (autodoc's content is the
    page's own text around the docstring); docutils leaves every other unknown directive out."""

    has_content = True
    optional_arguments = 1
    final_argument_whitespace = True
    # Any option (:members:, :show-inheritance:, ...); an unknown one would drop the content.
    option_spec = defaultdict(lambda: directives.unchanged, members=directives.unchanged)

    def run(self) -> list[nodes.Node]:
        node = nodes.container()
        self.state.nested_parse(self.content, self.content_offset, node)
        return [node]


for _name in ("autoclass", "autoexception", "autofunction", "automodule", "data"):
    directives.register_directive(_name, Prose)


def paragraphs(path: Path) -> list[tuple[int, list[str]]]:
    """(first line, lines) of each prose paragraph of the page at ``path``."""
    tree = publish_doctree(
        path.read_text(),
        source_path=str(path),
        # Sphinx's roles (:doc:, :class:) are unknown to docutils: quiet, not fatal.
        settings_overrides={"report_level": 5, "halt_level": 5},
    )
    found = []
    for paragraph in tree.findall(nodes.paragraph):
        parent = paragraph.parent
        while parent is not None and not isinstance(parent, (nodes.table, nodes.system_message)):
            parent = parent.parent
        if parent is None and paragraph.line is not None and paragraph.rawsource:
            found.append((paragraph.line, paragraph.rawsource.splitlines()))
    return found


def problems(path: Path) -> list[str]:
    """``docs/page.rst:line: what`` for each line that breaks the rule."""
    found = []
    for first, lines in paragraphs(path):
        for number, line in enumerate(lines, start=first):
            text = RUN_IN_HEADING.sub("", INLINE_LITERAL.sub("``x``", line.strip()))
            if TWO_SENTENCES.search(text):
                found.append(f"docs/{path.name}:{number}: two sentences on one line")
            if number < first + len(lines) - 1 and not SENTENCE_END.search(text):
                found.append(f"docs/{path.name}:{number}: a sentence goes on at the next line")
    return found


@pytest.mark.parametrize("page", PAGES)
def test_one_sentence_per_line(page: str) -> None:
    found = problems(DOCS / page)
    assert not found, "\n".join(found)


def test_the_check_finds_both_kinds(tmp_path: Path) -> None:
    page = tmp_path / "page.rst"
    page.write_text(
        "Title\n=====\n\n"
        "One sentence, e.g. this one, with ``INSERT ... VALUES`` and 1, 2, ... (so on). Another.\n"
        "A sentence broken\nover two lines.\n\n"
        "- **Run-in.** Fine.\n\n"
        "::\n\n   Code. Is not prose.\n\n"
        ".. autoclass:: Thing\n   :show-inheritance:\n\n   Its text. Is prose.\n"
    )
    assert problems(page) == [
        "docs/page.rst:4: two sentences on one line",
        "docs/page.rst:5: a sentence goes on at the next line",
        "docs/page.rst:17: two sentences on one line",
    ]
