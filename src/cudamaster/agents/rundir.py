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

from ..errors import UserError
from ..llm.base import Completion
from ..llm.offline import safe_name as safe
from .state import TaskState

_lock = threading.Lock()
STATE_FILE = "state.json"  # in each task's directory


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


class RunDir:
    """A run directory; nothing is created on disk until something is written into it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def existing(cls, root: Path) -> RunDir:
        """An existing run's directory, or a UserError saying what the path is instead (a
        mistyped path creates nothing)."""
        root = Path(root)
        if not root.exists():
            raise UserError(f"no run directory at {root}: check the path (runs are under runs/ "
                            "unless --run named another place)")  # fmt: skip
        if not root.is_dir():
            raise UserError(f"{root} is a file, not a run directory: name the run's directory")
        run = cls(root)
        if not run.manifest.is_file():
            raise UserError(f"{root} is not a run directory (no run.json): name the directory "
                            "that `cudamaster optimize` printed")  # fmt: skip
        run.read_manifest()  # a corrupt run.json fails here, as one line
        return run

    # -- run-level --------------------------------------------------------------------------
    @property
    def manifest(self) -> Path:
        return self.root / "run.json"

    def write_manifest(self, data: dict[str, Any]) -> None:
        _atomic_write(self.manifest, json.dumps(data, indent=1))

    def read_manifest(self) -> dict[str, Any]:
        """run.json, checked: a corrupt, empty or foreign file is a UserError, not a traceback."""
        fix = ("restore it from a copy, or start a new run with `cudamaster optimize --run` "
               "elsewhere")  # fmt: skip
        try:
            data = json.loads(self.manifest.read_text())
        except FileNotFoundError:
            raise UserError(f"{self.root} is not a run directory (no run.json)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            why = (
                "it is empty"
                if isinstance(exc, json.JSONDecodeError) and not exc.doc.strip()
                else f"{type(exc).__name__}: {exc}"
            )
            raise UserError(f"{self.manifest} cannot be read ({why}): {fix}") from None
        tasks = data.get("tasks") if isinstance(data, dict) else None
        ok = (
            isinstance(tasks, list)
            and all(isinstance(t, list) and len(t) == 2 for t in tasks)
            and isinstance(data.get("options"), dict)
            and isinstance(data.get("model"), str)
        )
        if not ok:
            raise UserError(f"{self.manifest} is not a run manifest (it needs model, tasks and "
                            f"options): {fix}")  # fmt: skip
        return data

    def ledger(self) -> list[dict[str, Any]]:
        path = self.root / "ledger.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def record_gpu(self, task_dir: Path, kind: str, seconds: float, count: int) -> None:
        """One GPU session of a task (screen, full, profile) and its wall time, in gpu.jsonl."""
        with _lock, open(self.root / "gpu.jsonl", "a") as f:
            f.write(json.dumps({"task": task_dir.name, "kind": kind, "seconds": round(seconds, 2),
                                "count": count}) + "\n")  # fmt: skip

    def gpu_seconds(self) -> dict[str, float]:
        """The GPU sessions' wall time so far, per task."""
        path = self.root / "gpu.jsonl"
        out: dict[str, float] = {}
        for line in path.read_text().splitlines() if path.exists() else []:
            row = json.loads(line)
            out[row["task"]] = out.get(row["task"], 0.0) + row["seconds"]
        return out

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

    def load_state(self, task_dir: Path) -> TaskState:
        """The task's saved state; a fresh one where it has none yet."""
        saved = self.load_json(task_dir, STATE_FILE)
        return TaskState.from_dict(saved) if saved else TaskState()

    def save_state(self, task_dir: Path, state: TaskState) -> None:
        self.save_json(task_dir, STATE_FILE, asdict(state))


def code_hash(source: str, flags: tuple[str, ...]) -> str:
    return hashlib.sha256((source + "\0" + " ".join(flags)).encode()).hexdigest()[:16]
