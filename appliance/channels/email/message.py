"""Reading a mail into what the assistant was asked, and writing its answer as a mail: standard library only.

:func:`read_mail` turns raw RFC 5322 bytes into an :class:`InboundMail`: who wrote (the From address,
lower case), what they wrote *this time* (the plain-text body, else the HTML's text, without the quoted
mail below it or the signature), the thread it continues (Message-ID, References), the attachments it
carries (not read: the answer says so) and whether a machine sent it (:func:`automatic`: an auto-reply,
a bounce, a list; answering those starts mail loops, so they are never answered).

:func:`answer_mail` and :func:`new_mail` write the assistant's mails: plain text plus a simple HTML
part (paragraphs; each ``reply /approve 3f2a`` a mailto link that starts that reply), an answer in the
same thread (``In-Reply-To``, ``References``, "Re: subject"), and ``Auto-Submitted`` so that other
machines do not answer them in turn (RFC 3834).

Header values are cleaned twice: where a mail is read (:func:`clean_header`: the subject and names on
one line without control characters; addresses and Message-IDs that are not plainly one are dropped)
and where a mail is built (what an outbox row stored before, or a notification's first line, may hold
anything). RFC 2047 lets a subject decode to CR LF: kept, it would have let a sender add headers to
the answer, and it made building the answer raise, which stopped the e-mail outbox (issue 31).
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import hashlib
import html
import re
import urllib.parse
from dataclasses import dataclass
from email.message import EmailMessage, Message
from html.parser import HTMLParser

REFERENCES_KEPT = 10  # the newest ids of a long thread are enough for mail clients to thread it
SENDER_NAME = "picoagent"
_REPLY_PREFIX = re.compile(r"^\s*((re|aw|sv|fw|fwd|wg)\s*(\[\d+\])?\s*:\s*)+", re.IGNORECASE)
_QUOTE_HEADER = re.compile(
    r"^(on\b.{0,200}\bwrote:|am\b.{0,200}\bschrieb\b.*:|-{2,}\s*original message\s*-{2,}|_{10,})\s*$",
    re.IGNORECASE,
)
_REPLY_COMMAND = re.compile(r"reply (/[a-z]+(?: [\w.:-]+)?)")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # control characters and Unicode line breaks
_ADDRESS = re.compile(r"[^\s@<>()\[\],;:\"\\]+@[^\s@<>()\[\],;:\"\\]+")
_MESSAGE_ID = re.compile(r"<[!-;=?-~]{1,250}>")  # printable ASCII, no space and no angle brackets inside
HEADER_CHARS = 200  # a subject or a name longer than this is cut
_MACHINE_SENDERS = ("mailer-daemon", "postmaster", "noreply", "no-reply", "donotreply", "do-not-reply")


@dataclass(frozen=True)
class InboundMail:
    """One received mail, as the channel needs it."""

    sender: str  # the From address, lower case ("" when there is none)
    sender_name: str  # the From display name, else the address
    subject: str  # without "Re:"/"Fwd:" prefixes
    text: str  # what was asked: a command line, the new body text, else the subject
    message_id: str  # "<id@host>", "" when the mail has none
    references: tuple[str, ...]  # the thread before it, oldest first
    attachments: tuple[str, ...]  # names of the parts that were not read
    automatic: str  # why a machine sent it ("Auto-Submitted: auto-replied"); "" for a person's mail

    @property
    def thread(self) -> str:
        """The first mail of its thread (the conversation's key), or its own id."""
        return self.references[0] if self.references else self.message_id


def read_mail(raw: bytes) -> InboundMail:
    """Parse a mail; never raises for a malformed one (whatever cannot be read stays empty)."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    name, sender = _from(message)
    subject = _REPLY_PREFIX.sub("", clean_header(_header(message, "Subject"))).strip()
    body = _new_text(_body_text(message))
    own_id = _ids(_header(message, "Message-ID"))
    return InboundMail(
        sender=sender,
        sender_name=name or sender,
        subject=subject,
        text=_asked(body, subject),
        message_id=own_id[0] if own_id else "",
        references=_thread(message),
        attachments=_attachments(message),
        automatic=automatic(message, sender),
    )


def automatic(message: Message, sender: str) -> str:
    """Why a mail was sent by a machine (RFC 3834 and common practice), or "" for a person's mail."""
    auto = _header(message, "Auto-Submitted").strip().lower()
    if auto and auto != "no":
        return f"Auto-Submitted: {auto}"
    precedence = _header(message, "Precedence").strip().lower()
    if precedence in ("bulk", "list", "junk", "auto_reply"):
        return f"Precedence: {precedence}"
    for header in ("X-Autoreply", "X-Autorespond", "List-Id", "List-Unsubscribe"):
        if message.get(header) is not None:
            return f"{header} header"
    if message.get_content_type() == "multipart/report":
        return "a delivery report"
    local = sender.partition("@")[0]
    if not sender or local in _MACHINE_SENDERS or local.startswith(("bounce", "mailer-daemon")):
        return f"sent by {sender or 'nobody'}"
    if _header(message, "Return-Path").strip() == "<>":
        return "Return-Path: <> (a bounce)"
    return ""


def clean_header(value: str, limit: int = HEADER_CHARS) -> str:
    """A header value on one line: control characters and line breaks (also RFC 2047-encoded) become spaces."""
    return re.sub(r"\s+", " ", _CONTROL.sub(" ", value)).strip()[:limit]


def clean_address(value: str) -> str:
    """``value`` when it is plainly one address (``name@host``, nothing else), else ""."""
    address = value.strip()
    return address if _ADDRESS.fullmatch(address) and not _CONTROL.search(address) else ""


def _header(message: Message, name: str) -> str:
    try:
        value = message.get(name)
    except Exception:  # a malformed header the policy cannot parse
        value = None
    return str(value) if value is not None else ""


def _from(message: Message) -> tuple[str, str]:
    name, address = email.utils.parseaddr(clean_header(_header(message, "From"), 1000))
    return clean_header(name), clean_address(address).lower()


def _ids(value: str) -> list[str]:
    return _MESSAGE_ID.findall(value)


def _thread(message: Message) -> tuple[str, ...]:
    references = _ids(_header(message, "References")) or _ids(_header(message, "In-Reply-To"))
    return tuple(references)


def _body_text(message: Message) -> str:
    if not isinstance(message, EmailMessage):
        return ""
    try:
        part = message.get_body(preferencelist=("plain", "html"))
        if part is None:
            return ""
        content = part.get_content()
    except (LookupError, ValueError, KeyError, AttributeError):  # an unknown charset or a broken part
        return ""
    if not isinstance(content, str):
        return ""
    return html_text(content) if part.get_content_type() == "text/html" else content


def _new_text(body: str) -> str:
    """The part of a body the sender wrote now: above the quoted mail and the signature."""
    kept: list[str] = []
    for line in body.replace("\r\n", "\n").split("\n"):
        stripped = line.strip()
        if line.rstrip() == "--" or _QUOTE_HEADER.match(stripped):
            break
        if stripped.startswith(">"):
            continue
        kept.append(line.rstrip())
    return "\n".join(kept).strip()


def _asked(body: str, subject: str) -> str:
    """A command is one line: the body's first line when it is one, else the subject when it is one."""
    first = body.split("\n", 1)[0].strip()
    if first.startswith("/"):
        return first
    if subject.startswith("/"):
        return subject
    return body or subject


def _attachments(message: Message) -> tuple[str, ...]:
    if not isinstance(message, EmailMessage):
        return ()
    names = []
    for part in message.iter_attachments():
        names.append(clean_header(part.get_filename() or part.get_content_type()))
    return tuple(names)


class _TextOfHtml(HTMLParser):
    """The readable text of an HTML body: block elements as line breaks, no scripts or styles."""

    BLOCKS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "blockquote", "pre", "table"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "head"):
            self.skip += 1
        elif tag == "blockquote":
            self.parts.append("\n> ")  # quoted mail: dropped like a plain-text quote
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head"):
            self.skip = max(0, self.skip - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(re.sub(r"\s+", " ", data))


def html_text(markup: str) -> str:
    """The text of an HTML mail body, one line per block."""
    parser = _TextOfHtml()
    parser.feed(markup)
    parser.close()
    lines = [line.strip() for line in "".join(parser.parts).split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


# --- the assistant's mails ------------------------------------------------------------------------------


def answer_mail(
    *,
    sender: str,
    to: str,
    text: str,
    subject: str,
    in_reply_to: str,
    references: list[str],
    message_id: str,
    attachments: list[str] | None = None,
) -> EmailMessage:
    """The answer to a mail, in its thread; ``attachments``: the names it ignored (the answer says so)."""
    if attachments:
        text = f"(I cannot open attachments, so I did not read {', '.join(attachments)}.)\n\n{text}"
    message = _mail(sender, to, f"Re: {subject}" if subject else "Re: your message", text, message_id)
    replied = _ids(in_reply_to)
    if replied:
        message["In-Reply-To"] = replied[0]
        message["References"] = " ".join([*_ids(" ".join(references)), replied[0]][-REFERENCES_KEPT:])
    message["Auto-Submitted"] = "auto-replied"
    return message


def new_mail(*, sender: str, to: str, text: str, message_id: str) -> EmailMessage:
    """A mail the assistant starts (a proactive message): its first line is the subject."""
    first = text.strip().split("\n", 1)[0]
    subject = first if len(first) <= 70 else first[:69].rstrip() + "…"
    message = _mail(sender, to, subject or "A message from your Pi", text, message_id)
    message["Auto-Submitted"] = "auto-generated"
    return message


def _mail(sender: str, to: str, subject: str, text: str, message_id: str) -> EmailMessage:
    message = EmailMessage(policy=email.policy.SMTP)
    recipient = clean_address(to)
    if not recipient:
        raise ValueError(f"{to!r} is not an e-mail address")
    message["From"] = email.utils.formataddr((SENDER_NAME, sender))
    message["To"] = recipient
    message["Subject"] = clean_header(subject) or "A message from your Pi"
    message["Date"] = email.utils.formatdate(localtime=True)
    message["Message-ID"] = message_id
    message.set_content(text)
    message.add_alternative(html_part(text, sender), subtype="html")
    return message


def html_part(text: str, sender: str) -> str:
    """A simple HTML rendering: paragraphs and line breaks; each "reply /command" a link that writes it."""

    def line(raw: str) -> str:
        escaped = html.escape(raw)
        return _REPLY_COMMAND.sub(lambda m: "reply " + _command_link(m.group(1), sender), escaped)

    paragraphs = [p for p in text.strip().split("\n\n") if p.strip()]
    body = "\n".join("<p>" + "<br>\n".join(line(x) for x in p.split("\n")) + "</p>" for p in paragraphs)
    return f'<!DOCTYPE html>\n<html><body style="font-family: sans-serif; line-height: 1.4">\n{body}\n</body></html>\n'


def _command_link(command: str, sender: str) -> str:
    subject = urllib.parse.quote(html.unescape(command), safe="/")
    return f'<a href="mailto:{html.escape(sender)}?subject={html.escape(subject)}">{command}</a>'


def message_id(domain: str, *key: object) -> str:
    """A Message-ID: from ``key`` when given (the same outbox message sent again keeps its id, so mail
    clients show a resend once), else unique."""
    if not key:
        return email.utils.make_msgid("picoagent", domain=domain or None)
    digest = hashlib.sha256("\0".join(map(str, key)).encode()).hexdigest()[:24]
    return f"<picoagent.{digest}@{domain or 'localhost'}>"
