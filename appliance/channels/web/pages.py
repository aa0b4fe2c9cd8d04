"""The web face's HTML pages: one shell (``static/shell.html``: head, skip link, top bar) around each page's main.

A page's ``static/NAME.html`` holds only its ``<main>``; what differs in the shell (title, scripts, where the
skip link goes, the nav's current page) is a row of :data:`PAGES`, so the top bar and the head are written once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from string import Template

STATIC = Path(__file__).parent / "static"


@dataclass(frozen=True)
class Page:
    """One page: where it is served, its name in the nav and title, and the scripts it loads after page.js."""

    path: str
    label: str
    scripts: tuple[str, ...]
    skip_to: str = "main"  # the id the skip link goes to
    skip_words: str = "Skip to content"
    body_class: str = ""
    viewport: str = ""  # added to the viewport meta's content
    in_nav: bool = True  # listed in the top bar (the setup is reached by the first sign-in, and from Settings)

    @property
    def file(self) -> str:
        """The file in static/ holding its ``<main>``."""
        return f"{self.label.lower()}.html"


PAGES = (
    Page("/", "Status", ("status-controls.js", "status.js")),
    Page(
        "/chat",
        "Chat",
        ("chat.js",),
        skip_to="input",
        skip_words="Skip to message box",
        body_class="chat-body",
        # the on-screen keyboard shrinks the page, so the message box stays above it
        viewport=", interactive-widget=resizes-content",
    ),
    Page("/settings", "Settings", ("settings-extra.js", "settings.js")),
    Page("/setup", "Setup", ("setup.js",), in_nav=False),
)


def _nav_link(page: Page, current: Page) -> str:
    marked = ' aria-current="page"' if page is current else ""
    return f'      <a href="{page.path}"{marked}>{page.label}</a>'


def render(page: Page) -> str:
    """The page's whole HTML document."""
    return Template((STATIC / "shell.html").read_text()).substitute(
        title=page.label.lower(),
        viewport=page.viewport,
        scripts="\n".join(f'<script src="/static/{script}" defer></script>' for script in page.scripts),
        body_class=f' class="{page.body_class}"' if page.body_class else "",
        skip_to=page.skip_to,
        skip_words=page.skip_words,
        nav="\n".join(_nav_link(other, page) for other in PAGES if other.in_nav),
        main=(STATIC / page.file).read_text(),
    )
