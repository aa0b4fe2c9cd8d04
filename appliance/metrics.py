"""Prometheus metrics in the text exposition format (version 0.0.4), without a client library.

A handful of counters, gauges and histograms is all the appliance needs; writing the format is
simpler than carrying a dependency onto the Pi.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

LabelValues = tuple[str, ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help_text
        self.label_names = tuple(labels)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]

    def lines(self) -> Iterable[str]:
        raise NotImplementedError


class Counter(_Metric):
    """A value that only goes up."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, labels)
        self.values: dict[LabelValues, float] = {}

    def inc(self, amount: float = 1.0, *labels: str) -> None:
        """Add ``amount`` to the series with these label values."""
        self.values[labels] = self.values.get(labels, 0.0) + amount

    def lines(self) -> Iterable[str]:
        for labels, value in sorted(self.values.items()):
            yield f"{self.name}{_labels(self.label_names, labels)} {_number(value)}"


class Gauge(_Metric):
    """A value read when scraped (from a callback) or set directly."""

    kind = "gauge"

    def __init__(self, name: str, help_text: str, read: Callable[[], float | None] | None = None) -> None:
        super().__init__(name, help_text)
        self.read = read
        self.value: float | None = None

    def set(self, value: float | None) -> None:
        """Set the current value (None: not available, not exported)."""
        self.value = value

    def lines(self) -> Iterable[str]:
        value = self.read() if self.read else self.value
        if value is not None:
            yield f"{self.name} {_number(value)}"


_INF = 'le="+Inf"'


class Histogram(_Metric):
    """Observations counted into cumulative buckets."""

    kind = "histogram"

    def __init__(self, name: str, help_text: str, buckets: Sequence[float], labels: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, labels)
        self.buckets = sorted(buckets)
        self.series: dict[LabelValues, tuple[list[int], float, int]] = {}

    def observe(self, value: float, *labels: str) -> None:
        """Count one observation."""
        counts, total, n = self.series.get(labels, ([0] * len(self.buckets), 0.0, 0))
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                counts[i] += 1
        self.series[labels] = (counts, total + value, n + 1)

    def lines(self) -> Iterable[str]:
        for labels, (counts, total, n) in sorted(self.series.items()):
            for bound, count in zip(self.buckets, counts, strict=True):
                le = f'le="{_number(bound)}"'
                yield f"{self.name}_bucket{_labels(self.label_names, labels, le)} {count}"
            yield f"{self.name}_bucket{_labels(self.label_names, labels, _INF)} {n}"
            yield f"{self.name}_sum{_labels(self.label_names, labels)} {_number(total)}"
            yield f"{self.name}_count{_labels(self.label_names, labels)} {n}"


M = TypeVar("M", bound=_Metric)


class Registry:
    """The metrics one process exports."""

    def __init__(self) -> None:
        self.metrics: list[_Metric] = []

    def add(self, metric: M) -> M:
        """Register a metric; returns it for chaining."""
        self.metrics.append(metric)
        return metric

    def render(self) -> str:
        """The text exposition of every metric."""
        out: list[str] = []
        for metric in self.metrics:
            lines = list(metric.lines())
            if not lines and isinstance(metric, Gauge):
                continue  # nothing to read here (no thermal zone on this machine): not listed at all
            out += metric.header()
            out += lines
        return "\n".join(out) + "\n"


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
