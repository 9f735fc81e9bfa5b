"""Reading ``summary.json``: every missing or ill-typed key is a one-line UsageError."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anpred.errors import UsageError

Json = dict[str, Any]
Table = dict[str, dict[str, float | None]]


class Fields:
    """Reads one JSON object of the summary; a missing key or a wrong type is a UsageError."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, Mapping):
            raise bad(where, f"is {type(data).__name__}, not an object")
        self.data, self.where = data, where

    @classmethod
    def of(cls, data: Any, where: str = "") -> Fields:
        """``data`` itself if it is a reader already, else a reader of it."""
        return data if isinstance(data, Fields) else cls(data, where)

    def at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def need(self, key: str, kind: type | tuple[type, ...] | None = None) -> Any:
        if key not in self.data:
            raise bad(self.at(key), "is missing")
        return self.check(key, self.data[key], kind)

    def get(self, key: str, default: Any, kind: type | tuple[type, ...] | None = None) -> Any:
        return self.check(key, self.data[key], kind) if key in self.data else default

    def check(self, key: str, value: Any, kind: type | tuple[type, ...] | None) -> Any:
        if kind is not None and value is not None and not isinstance(value, kind):
            raise bad(self.at(key), f"is {type(value).__name__}")
        return value

    def fields(self, key: str) -> Fields:
        return Fields(self.need(key), self.at(key))

    def rest(self, known: tuple[str, ...]) -> Json:
        return {k: v for k, v in self.data.items() if k not in known}


def bad(where: str, what: str) -> UsageError:
    """The one-line error for a summary whose entry ``where`` is missing or ill-typed."""
    return UsageError(
        f"summary.json: {where} {what}; it was written by an incompatible anpred "
        "(re-analyse the run with `anpred report RUN_DIR`)"
    )


def table(raw: Mapping[str, Any], where: str) -> Table:
    """A participant × anchor table of numbers (each row must be an object)."""
    return {p: dict(Fields(row, f"{where}.{p}").data) for p, row in raw.items()}


def items(f: Fields, key: str) -> list[Fields]:
    """The objects of the JSON list ``key``."""
    return [Fields(r, f"{f.at(key)}[{i}]") for i, r in enumerate(f.need(key, list))]


def entries(f: Fields, key: str = "") -> list[tuple[str, Fields]]:
    """``(name, Fields)`` of a JSON object of objects (``key`` empty: ``f`` itself)."""
    raw = f.need(key, dict) if key else f.data
    where = f.at(key) if key else f.where
    return [(k, Fields(v, f"{where}.{k}")) for k, v in raw.items()]
