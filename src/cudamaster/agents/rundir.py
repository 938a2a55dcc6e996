"""The run directory: the whole truth of an optimization run, written as it happens.

Every LLM call is a *step* stored under its key once its answer has arrived (prompt, answer,
usage, cost); every candidate's code, build log and evaluation is stored by content. Running
the same loop again on the same directory replays finished steps from disk, so a run killed at
any point resumes where it stopped, redoing nothing that had finished and losing nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..llm.base import Completion
from ..llm.offline import safe_name as safe

_lock = threading.Lock()


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


class RunDir:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    # -- run-level --------------------------------------------------------------------------
    @property
    def manifest(self) -> Path:
        return self.root / "run.json"

    def write_manifest(self, data: dict[str, Any]) -> None:
        _atomic_write(self.manifest, json.dumps(data, indent=1))

    def read_manifest(self) -> dict[str, Any]:
        return json.loads(self.manifest.read_text())

    def ledger(self) -> list[dict[str, Any]]:
        path = self.root / "ledger.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def spent(self) -> tuple[float, int]:
        """(USD, tokens) spent by every LLM call recorded so far."""
        rows = self.ledger()
        cost = sum(r.get("cost_usd") or 0.0 for r in rows)
        tokens = sum(r["input_tokens"] + r["output_tokens"] for r in rows)
        return cost, tokens

    # -- per task ---------------------------------------------------------------------------
    def task_dir(self, task: str, variant: str) -> Path:
        return self.root / f"{task}-{variant}"

    def step(self, task_dir: Path, key: str) -> dict[str, Any] | None:
        path = task_dir / "steps" / f"{safe(key)}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def record_step(
        self, task_dir: Path, key: str, prompt: list[dict], completion: Completion, label: str
    ) -> dict[str, Any]:
        usage = asdict(completion.usage)
        entry = {
            "key": key,
            "model": label,
            "prompt": prompt,
            "text": completion.text,
            "stop_reason": completion.stop_reason,
            "usage": usage,
            "cost_usd": completion.cost_usd,
            "latency_s": completion.latency_s,
            "time": time.time(),
        }
        _atomic_write(task_dir / "steps" / f"{safe(key)}.json", json.dumps(entry, indent=1))
        (task_dir / "steps" / f"{safe(key)}.md").write_text(
            "\n\n".join(f"## {m['role']}\n\n{m['content']}" for m in prompt)
            + f"\n\n## answer ({label})\n\n{completion.text}\n"
        )
        with _lock, open(self.root / "ledger.jsonl", "a") as f:
            f.write(json.dumps({"task": task_dir.name, "key": key, **usage,
                                "cost_usd": completion.cost_usd}) + "\n")  # fmt: skip
        return entry

    def save_code(self, task_dir: Path, name: str, source: str) -> Path:
        path = task_dir / "code" / f"{safe(name)}.cu"
        _atomic_write(path, source)
        return path

    def save_json(self, task_dir: Path, rel: str, data: Any) -> None:
        _atomic_write(task_dir / rel, json.dumps(data, indent=1, default=str))

    def load_json(self, task_dir: Path, rel: str) -> Any | None:
        path = task_dir / rel
        return json.loads(path.read_text()) if path.exists() else None


def code_hash(source: str, flags: tuple[str, ...]) -> str:
    return hashlib.sha256((source + "\0" + " ".join(flags)).encode()).hexdigest()[:16]
