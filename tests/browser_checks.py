"""What the browser suites check on a page: nothing covered, nothing scrolling sideways, no card over another,
and the page's own requests (its session cookie and CSRF token) for reading and changing the daemon's state."""

from __future__ import annotations

from typing import Any

import pytest

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: `make install`")
expect = sync_api.expect


def no_horizontal_scroll(page: sync_api.Page) -> None:
    """The page is no wider than its window."""
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{page.url} scrolls sideways by {overflow}px at {page.viewport_size}"


def uncovered(page: sync_api.Page, locator: sync_api.Locator) -> None:
    """The element is what a person's tap at its centre reaches: visible and not under something else."""
    expect(locator).to_be_visible()
    locator.scroll_into_view_if_needed()
    box = locator.bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    hit = page.evaluate("([x, y]) => document.elementFromPoint(x, y)?.textContent ?? ''", [x, y])
    assert hit == locator.text_content(), f"the point ({x:.0f}, {y:.0f}) shows {hit!r}, not {locator.text_content()!r}"


# Finds, for one card's heading, what a tap at its centre reaches once it is scrolled into view.
HEADING_HIT = """(id) => {
  const heading = document.getElementById(id);
  const card = heading.closest("section.card");
  const r = heading.getBoundingClientRect();
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const hit = document.elementFromPoint(x, y);
  const owner = hit && hit.closest("section.card, header");
  const name = owner
    ? owner.querySelector("h2")?.textContent || owner.tagName.toLowerCase()
    : String(hit && hit.tagName);
  return {
    // within a pixel: scrolled into view at the bottom edge, a heading may end 0.4 px below it (sub-pixel layout)
    inView: r.top >= -1 && r.left >= -1 && r.bottom <= window.innerHeight + 1 && r.right <= window.innerWidth + 1,
    ours: !!hit && card.contains(hit),
    shows: name,
    at: [Math.round(x), Math.round(y)],
  };
}"""

# Every pair of cards whose boxes intersect (a grid area shared by two cards draws one over the other).
CARDS_OVERLAPPING = """() => {
  const cards = [...document.querySelectorAll("section.card")].filter((c) => c.offsetParent !== null);
  const pairs = [];
  for (let i = 0; i < cards.length; i++)
    for (let j = i + 1; j < cards.length; j++) {
      const a = cards[i].getBoundingClientRect(), b = cards[j].getBoundingClientRect();
      if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
        pairs.push(`${cards[i].querySelector("h2").textContent} / ${cards[j].querySelector("h2").textContent}`);
    }
  return pairs;
}"""


def no_card_covers_another(page: sync_api.Page) -> None:
    """Every card's heading is on screen once scrolled to and is what a tap there reaches; no two cards intersect."""
    ids = page.evaluate("() => [...document.querySelectorAll('section.card h2')].map((h) => h.id)")
    assert len(ids) >= 8, ids
    for heading_id in ids:
        heading = page.locator(f"#{heading_id}")
        expect(heading).to_be_visible()
        heading.scroll_into_view_if_needed()
        found = page.evaluate(HEADING_HIT, heading_id)
        assert found["inView"], (
            f"{heading.text_content()!r} is off screen after scrolling to it at {page.viewport_size}"
        )
        assert found["ours"], (
            f"the {heading.text_content()!r} heading is covered at {page.viewport_size}: "
            f"a tap at {found['at']} reaches {found['shows']!r}"
        )
    overlapping = page.evaluate(CARDS_OVERLAPPING)
    assert not overlapping, f"cards drawn over each other at {page.viewport_size}: {overlapping}"


# Requests from inside the page (the browser's own cookies and, over HTTPS, its trust in the daemon's key).
FETCH = """async ([path, body]) => {
  const csrf = (await (await fetch("/api/session")).json()).csrf;
  const init = body === null ? {} : {
    method: "POST", headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf}, body: JSON.stringify(body),
  };
  const response = await fetch(path, init);
  return {status: response.status, body: await response.json()};
}"""


def get_json(page: sync_api.Page, path: str) -> Any:
    """GET as the signed-in page does."""
    answer = page.evaluate(FETCH, [path, None])
    assert answer["status"] == 200, answer
    return answer["body"]


def post_json(page: sync_api.Page, path: str, body: dict[str, object]) -> Any:
    """POST as the signed-in page does: the session cookie and its CSRF token."""
    answer = page.evaluate(FETCH, [path, body])
    assert answer["status"] in (200, 201), answer
    return answer["body"]
