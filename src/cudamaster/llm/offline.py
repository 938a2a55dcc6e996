"""Offline providers: replay a recorded transcript, or exchange files with a person or agent."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .base import AnswerPending, Completion, Message, Options, Provider, ProviderError, Usage

#: The first line of an exchanged prompt, before its key.
REQUEST = "# request "


def safe_name(key: str) -> str:
    """A request key as a file name (the run directory names its steps the same way)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "__", key)


class Replay(Provider):
    """Answers by key from a transcript: a file of JSON lines {"key", "text", "model"?, "usage"?,
    "cost_usd"?}, or an exchange directory (DIR/KEY.prompt.md and its .answer.md, as `exchange:`
    left it; the key is the prompt's first line, the usage its two files' tokens). A replayed
    answer costs what the transcript recorded, else nothing."""

    def __init__(self, path: str) -> None:
        self.name, self.model = "replay", path
        self.answers = _exchanged(Path(path)) if Path(path).is_dir() else _lines(Path(path))

    def complete(self, messages: list[Message], options: Options, key: str) -> Completion:
        entry = self.answers.get(key)
        if entry is None:
            raise ProviderError(f"replay transcript {self.model} has no answer for {key}")
        u = entry.get("usage", {})
        usage = Usage(u.get("input_tokens", 0), u.get("output_tokens", 0),
                      u.get("cached_tokens", 0))  # fmt: skip
        recorded = entry.get("cost_usd")  # what the answer cost when it was recorded
        return Completion(text=entry["text"], model=entry.get("model", "replay"), usage=usage,
                          cost_usd=self.cost(usage) if recorded is None else recorded)  # fmt: skip


def _lines(path: Path) -> dict[str, dict]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ProviderError(f"cannot read replay transcript {path}: {exc.strerror}") from None
    answers: dict[str, dict] = {}
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                entry = json.loads(line)
                answers[entry["key"]] = entry
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ProviderError(f"{path}:{n}: not a transcript line") from None
    return answers


def _exchanged(folder: Path) -> dict[str, dict]:
    """An exchange directory's answers by key, each with the usage Exchange counted for it."""
    answers: dict[str, dict] = {}
    for prompt in sorted(folder.glob("*.prompt.md")):
        answer = prompt.with_name(prompt.name.removesuffix(".prompt.md") + ".answer.md")
        asked = prompt.read_text()
        head = asked.partition("\n")[0]
        if not answer.exists() or not head.startswith(REQUEST):
            continue
        text = answer.read_text()
        usage = {"input_tokens": _tokens(asked), "output_tokens": _tokens(text)}
        answers[head.removeprefix(REQUEST).strip()] = {"text": text, "model": "exchange",
                                                       "usage": usage}  # fmt: skip
    if not answers:
        raise ProviderError(f"replay: {folder} has no answered prompt (KEY.prompt.md and "
                            f"KEY.answer.md, as exchange:DIR writes them)")  # fmt: skip
    return answers


class Exchange(Provider):
    """Each request becomes DIR/KEY.prompt.md; the answer is read from DIR/KEY.answer.md. Its
    usage is the tokens of the two files, counted here.

    With no answer yet, AnswerPending stops the run cleanly; `cudamaster resume` goes on once
    the answer file is there."""

    def __init__(self, directory: str) -> None:
        self.name, self.model = "exchange", directory
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def complete(self, messages: list[Message], options: Options, key: str) -> Completion:
        prompt = self.dir / f"{safe_name(key)}.prompt.md"
        answer = self.dir / f"{safe_name(key)}.answer.md"
        if not prompt.exists():
            body = "\n\n".join(f"## {m.role}\n\n{m.content}" for m in messages)
            prompt.write_text(f"{REQUEST}{key}\n\nWrite the answer to {answer.name}.\n\n{body}\n")
        if not answer.exists():
            raise AnswerPending(str(prompt))
        text = answer.read_text()
        usage = Usage(_tokens(prompt.read_text()), _tokens(text))  # counted here (cl100k_base)
        return Completion(text=text, model="exchange", usage=usage, cost_usd=self.cost(usage))


def _tokens(text: str) -> int:
    """Tokens in ``text`` as tiktoken's cl100k_base counts them (a third of its characters
    where tiktoken is missing): an exchanged answer reports no usage of its own."""
    from ..profile.summary import count_tokens

    return count_tokens(text) or len(text) // 3
