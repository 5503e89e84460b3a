"""Results that survive crashes: one JSON line per finished episode, appended atomically.

Only the coordinating process writes (workers send rows back), each line is written whole,
flushed and fsync'ed before the next episode is counted, and a torn last line (a crash mid-write)
is ignored on load, so a rerun resumes exactly where the last complete line left off."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path


class ResultStore:
    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "results.jsonl"
        self._lock = threading.Lock()
        self.rows: dict[str, dict] = {}
        self.torn = 0
        if self.path.exists():
            raw = self.path.read_bytes()
            lines = raw.split(b"\n")
            good = 0
            for line in lines:
                if not line.strip():
                    good += len(line) + 1
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    self.torn += 1
                    break
                self.rows.setdefault(row["key"], row)
                good += len(line) + 1
            if self.torn:   # drop the torn tail so the next append starts on a clean line
                with open(self.path, "r+b") as f:
                    f.truncate(min(good, len(raw)))

    def done(self, key: str) -> bool:
        return key in self.rows

    def append(self, row: dict) -> bool:
        """Append one row unless its key is already recorded. Returns True when written."""
        with self._lock:
            if row["key"] in self.rows:
                return False
            data = (json.dumps(row, default=str) + "\n").encode()
            with open(self.path, "ab") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            self.rows[row["key"]] = row
            return True
