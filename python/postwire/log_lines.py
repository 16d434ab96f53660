"""Log lines as JSON objects (`log_format = "json"`), one a line, for log collectors that parse
rather than read: Loki, Elasticsearch, journald's JSON export, CloudWatch."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime

import orjson


class JsonLineFormatter(logging.Formatter):
    """`{"time", "level", "logger", "pid", "process", "message"[, "exception"]}` per record:
    `process` is `main` or the worker's name, `time` is UTC with milliseconds."""

    def __init__(self, process: str | None) -> None:
        super().__init__()
        self.process = process or "main"

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "pid": os.getpid(),
            "process": self.process,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line).decode()
