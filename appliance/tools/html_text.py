"""HTML to readable text for the model: blocks as lines, links as [text](url), scripts left out."""

from __future__ import annotations

import logging
import re
from html.parser import HTMLParser
from urllib.parse import urljoin

log = logging.getLogger(__name__)


_SKIP = frozenset({"script", "style", "noscript", "svg", "template", "head", "iframe", "object"})
# Blocks set off by a blank line, and blocks that only start a new line.
_PARAGRAPH = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "table", "ul", "ol", "dl", "hr"})
_SECTION = frozenset({"section", "article", "header", "footer", "nav", "main", "aside", "figure", "form", "details"})
_LINE = frozenset({"br", "div", "li", "tr", "dt", "dd", "figcaption", "summary", "caption", "body", "fieldset"})
# Placeholders for breaks while collecting: whitespace between two blocks must not add a blank line.
_LINE_BREAK, _PARAGRAPH_BREAK = "\x01", "\x02"
_BREAKS = re.compile(r"\s*[\x01\x02][\x01\x02\s]*")


class _TextExtractor(HTMLParser):
    """Collects the readable text of a page: blocks as lines, scripts and styles left out."""

    def __init__(self, base_url: str, links: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.links = links
        self.parts: list[str] = []
        self.title = ""
        self._title: list[str] | None = None
        self._skip: list[str] = []
        self._anchors: list[tuple[str, int]] = []
        self._pre = 0
        self._cells = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self.title and "svg" not in self._skip:
            self._title = []
            return
        if tag == "body" and "head" in self._skip:  # a page that never closes its <head>
            del self._skip[self._skip.index("head") :]
        if tag in _SKIP:
            self._skip.append(tag)
            return
        if self._skip:
            return
        self._break(tag)
        if tag == "pre":
            self._pre += 1
        elif tag == "li":
            self.parts.append("- ")
        elif tag == "tr":
            self._cells = 0
        elif tag in ("td", "th"):
            self.parts.append(" | " if self._cells else "")
            self._cells += 1
        elif len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self.parts.append("#" * int(tag[1]) + " ")
        elif tag == "a":
            href = dict(attrs).get("href") or ""
            self._anchors.append((href, len(self.parts)))

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._title is not None:
            self.title = " ".join("".join(self._title).split())
            self._title = None
            return
        if tag in self._skip:
            del self._skip[len(self._skip) - 1 - self._skip[::-1].index(tag) :]
            return
        if self._skip:
            return
        if tag == "pre" and self._pre:
            self._pre -= 1
        if tag == "a" and self._anchors:
            self._close_anchor(*self._anchors.pop())
        self._break(tag)

    def handle_data(self, data: str) -> None:
        if self._title is not None:
            self._title.append(data)
        elif not self._skip:
            data = data.replace(_LINE_BREAK, "").replace(_PARAGRAPH_BREAK, "")
            self.parts.append(data if self._pre else re.sub(r"\s+", " ", data))

    def _break(self, tag: str) -> None:
        if tag in _PARAGRAPH or tag in _SECTION:
            self.parts.append(_PARAGRAPH_BREAK)
        elif tag in _LINE:
            self.parts.append(_LINE_BREAK)

    def _close_anchor(self, href: str, start: int) -> None:
        text = " ".join(re.sub(r"[\x01\x02]", " ", "".join(self.parts[start:])).split())
        if not self.links or not text or not href or href.startswith("#"):
            return
        target = urljoin(self.base_url, href.strip())
        if not target.startswith(("http://", "https://")) or target in (text, self.base_url):
            return
        self.parts[start:] = [f"[{text}]({target})"]

    def text(self) -> str:
        """The collected text: breaks that meet merge into one (a blank line if any was a paragraph)."""
        joined = _BREAKS.sub(lambda m: "\n\n" if _PARAGRAPH_BREAK in m.group() else "\n", "".join(self.parts))
        lines = [" ".join(line.split()) for line in joined.split("\n")]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def html_to_text(html: str, *, base_url: str = "", links: bool = True) -> tuple[str, str]:
    """The title and readable text of an HTML page; links as [text](url) when ``links``."""
    extractor = _TextExtractor(base_url, links)
    try:
        extractor.feed(html)
        extractor.close()
    except (AssertionError, ValueError):  # html.parser gives up on some broken markup: keep what it read
        log.debug("html parser stopped early on %s", base_url)
    return extractor.title, extractor.text()
