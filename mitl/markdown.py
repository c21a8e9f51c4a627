"""A small, safe Markdown renderer for release datasheets (README.md) shown on a web page.

Pure Python, no Markdown package: the datasheets are written by `mitl.release_bundle` and
use only headings, paragraphs, lists, pipe tables, fenced code and inline `code`,
**bold** and *italic*. Everything else stays text. Every character of the input is
escaped before any tag is added, so raw HTML, links and scripts in a datasheet show as
text, never as markup.
"""

from __future__ import annotations

import html
import re

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s*\d+[.)]\s+(.*)$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$")
_CODE_SPAN = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC = re.compile(r"(?<![*\w])\*(?=\S)([^*]+?)(?<=\S)\*(?![*\w])")


def markdown_render(text: str) -> str:
    """Return the Markdown text as an HTML fragment in which all of the input is escaped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            index += 1
        elif line.lstrip().startswith("```"):
            index = _code_block(lines, index, out)
        elif heading := _HEADING.match(line):
            level = len(heading.group(1))
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
            index += 1
        elif _BULLET.match(line) or _NUMBERED.match(line):
            index = _list_block(lines, index, out)
        elif _table_starts(lines, index):
            index = _table_block(lines, index, out)
        else:
            index = _paragraph(lines, index, out)
    return "\n".join(out)


def _inline(text: str) -> str:
    """Escape a line's text, then mark up code spans, bold and italic."""
    parts = _CODE_SPAN.split(text)
    # Odd parts are code spans: escaped, never emphasised.
    rendered = [
        f"<code>{html.escape(part)}</code>" if odd else _emphasis(html.escape(part))
        for odd, part in ((i % 2 == 1, p) for i, p in enumerate(parts))
    ]
    return "".join(rendered)


def _emphasis(escaped: str) -> str:
    escaped = _BOLD.sub(r"<strong>\1</strong>", escaped)
    return _ITALIC.sub(r"<em>\1</em>", escaped)


def _code_block(lines: list[str], start: int, out: list[str]) -> int:
    """Render a fenced code block from `start`; return the index after its closing fence."""
    body: list[str] = []
    index = start + 1
    while index < len(lines) and not lines[index].lstrip().startswith("```"):
        body.append(lines[index])
        index += 1
    out.append(f"<pre><code>{html.escape(chr(10).join(body))}</code></pre>")
    return index + 1


def _list_block(lines: list[str], start: int, out: list[str]) -> int:
    """Render consecutive list items (bulleted or numbered, by the first) as one list."""
    pattern, tag = (_BULLET, "ul") if _BULLET.match(lines[start]) else (_NUMBERED, "ol")
    items: list[str] = []
    index = start
    while index < len(lines) and lines[index].strip():
        item = pattern.match(lines[index])
        if item:
            items.append(item.group(1).strip())
        elif items and lines[index].startswith((" ", "\t")):
            items[-1] += " " + lines[index].strip()  # a wrapped item's continuation
        else:
            break
        index += 1
    out.append(f"<{tag}>" + "".join(f"<li>{_inline(item)}</li>" for item in items) + f"</{tag}>")
    return index


def _table_starts(lines: list[str], index: int) -> bool:
    """Say whether a pipe table (a row, then a rule of dashes) starts at `index`."""
    return (
        "|" in lines[index] and index + 1 < len(lines) and bool(_TABLE_RULE.match(lines[index + 1]))
    )


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|"):
        line = line[:-1]
    return [cell.strip() for cell in line.split("|")]


def _table_block(lines: list[str], start: int, out: list[str]) -> int:
    """Render a pipe table: a header row, the rule under it, and the rows up to a blank line."""
    header = _cells(lines[start])
    rows: list[list[str]] = []
    index = start + 2
    while index < len(lines) and "|" in lines[index] and lines[index].strip():
        rows.append(_cells(lines[index]))
        index += 1
    head = "".join(f"<th>{_inline(cell)}</th>" for cell in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{_inline(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    return index


def _paragraph(lines: list[str], start: int, out: list[str]) -> int:
    """Render lines up to a blank line or another block's start as one paragraph."""
    text: list[str] = []
    index = start
    while index < len(lines):
        line = lines[index]
        starts_block = (
            not line.strip()
            or line.lstrip().startswith("```")
            or _HEADING.match(line)
            or (text and (_BULLET.match(line) or _NUMBERED.match(line)))
            or _table_starts(lines, index)
        )
        if starts_block and text:
            break
        text.append(line.strip())
        index += 1
    out.append(f"<p>{_inline(' '.join(text))}</p>")
    return index
