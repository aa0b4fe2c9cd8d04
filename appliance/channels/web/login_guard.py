"""Who may try the web password now: a limit per address, one for all addresses together, and scrypt slots.

A password check is scrypt: 16 MiB of memory and tens of milliseconds of CPU each. Limiting per address
alone let anyone with an IPv6 network guess without end (a home gets a /64 or more: 2**64 addresses, one
per guess) and run as many checks at once as the thread pool has threads. So: IPv6 clients are counted by
their /64 (IPv4 ones by address), every attempt also counts against a limit for all addresses together
(`web.login_attempts_per_minute_total`), and at most ``SCRYPT_SLOTS`` checks run at once while the
others wait their turn (at most the total limit's worth, since refused attempts never queue).

The total limit is also the owner's: while it is full nobody can log in with the password. Browser
sessions and API tokens keep working, and the CLI on the appliance needs no login.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from appliance.ratelimit import RateLimiter

log = logging.getLogger(__name__)

SCRYPT_SLOTS = 2  # 32 MiB of scrypt at most, and two cores of a Pi left for the model and the rest
WINDOW_S = 60.0


def client_key(remote: str | None) -> str:
    """The address a login attempt counts against: IPv4 as it is, IPv6 by its /64 (one network's hosts)."""
    if not remote:
        return "unknown"
    try:
        address = ipaddress.ip_address(remote.split("%", 1)[0])  # a link-local address may carry %interface
    except ValueError:
        return remote  # not an IP (a Unix socket): as it is
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # an IPv4 client on a dual-stack socket
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@dataclass(frozen=True)
class Refusal:
    """An attempt that must wait: how long, and whose limit it hit."""

    wait_s: float
    everyone: bool  # the limit for all addresses together, not this address's own

    def message(self) -> str:
        """What the login page says."""
        seconds = math.ceil(self.wait_s)
        who = "from all addresses together" if self.everyone else "from your address"
        return f"Too many attempts {who}. Try again in {seconds} seconds."


class LoginGuard:
    """The login limits of one web server (per address, total) and its scrypt slots."""

    def __init__(
        self,
        per_address: int,
        total: int,
        *,
        scrypt_slots: int = SCRYPT_SLOTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_address = RateLimiter(per_address, WINDOW_S, clock)
        self.total = RateLimiter(total, WINDOW_S, clock)
        self.clock = clock
        self.scrypt_slots = scrypt_slots
        self._slots = asyncio.Semaphore(scrypt_slots)  # bound to the loop that first waits on it
        self.waiting = 0  # checks queued for a slot (tests and logs read it)
        self._total_full_until = 0.0

    def admit(self, remote: str | None) -> Refusal | None:
        """Count an attempt from ``remote``; a Refusal when it must wait, else None."""
        # This address's own limit first: one address can use at most its share of the total.
        wait = self.per_address.hit(client_key(remote))
        if wait:
            return Refusal(wait, everyone=False)
        wait = self.total.hit("all")
        if not wait:
            return None
        now = self.clock()
        if now >= self._total_full_until:  # once per episode, not once per refused guess
            log.warning("web login: the limit for all addresses together is reached (latest from %s)", remote)
            self._total_full_until = now + wait
        return Refusal(wait, everyone=True)

    async def check(self, password_check: Callable[[], bool]) -> bool:
        """Run a password check in a thread once a scrypt slot is free."""
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        running = asyncio.ensure_future(asyncio.to_thread(password_check))
        # The slot is free when scrypt is done, not when the client goes away: a thread cannot be
        # stopped, and releasing at cancellation would let hang-ups start any number of runs.
        running.add_done_callback(self._release)
        return await asyncio.shield(running)

    def _release(self, done: asyncio.Future[bool]) -> None:
        self._slots.release()
        if not done.cancelled() and done.exception() is not None:  # retrieved, even with nobody waiting
            log.debug("a password check failed: %s", done.exception())
