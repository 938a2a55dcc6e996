"""Providers through the real SDKs against a local server on loopback that speaks the OpenAI
and Anthropic wire formats, plus the offline providers and --model parsing."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cudamaster.errors import UserError
from cudamaster.llm.base import AnswerPending, Message, Options, ProviderError
from cudamaster.llm.registry import make_provider

FAST = Options(max_retries=3, timeout_s=10)
MESSAGES = [Message("system", "be brief"), Message("user", "write a kernel")]
ANSWER = "```cuda\nok\n```"


class Server:
    """Answers POST /v1/chat/completions and /v1/messages; fails the first `failures` calls."""

    def __init__(self, failures: list[int] | None = None) -> None:
        self.failures = list(failures or [])
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                headers = {k.lower(): v for k, v in self.headers.items()}
                outer.requests.append({"path": self.path, "body": body, "headers": headers})
                if outer.failures:
                    code = outer.failures.pop(0)
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("retry-after-ms", "10")
                    self.end_headers()
                    self.wfile.write(json.dumps({"error": {"message": f"status {code}"}}).encode())
                    return
                if self.path.endswith("/chat/completions"):
                    reply = {
                        "id": "c1", "object": "chat.completion", "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": ANSWER}}],
                        "usage": {"prompt_tokens": 120, "completion_tokens": 30,
                                  "total_tokens": 150,
                                  "prompt_tokens_details": {"cached_tokens": 100}},
                    }  # fmt: skip
                else:
                    reply = {
                        "id": "m1", "type": "message", "role": "assistant",
                        "model": body["model"], "stop_reason": "end_turn",
                        "content": [{"type": "text", "text": "plan: tile it"}],
                        "usage": {"input_tokens": 200, "output_tokens": 40,
                                  "cache_read_input_tokens": 50},
                    }  # fmt: skip
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()


@pytest.fixture
def server(request):
    s = Server(getattr(request, "param", None))
    yield s
    s.close()


def test_openai_wire_format_usage_and_cost(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    p = make_provider("openai:gpt-4o", base_url=server.url + "/v1")
    c = p.complete(MESSAGES, Options(temperature=0.2, max_retries=0), key="k")
    assert c.text == "```cuda\nok\n```"
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.cached_tokens) == (120, 30, 100)
    assert c.cost_usd is not None and c.cost_usd > 0  # gpt-4o is in the price table
    sent = server.requests[0]
    assert sent["body"]["messages"][0] == {"role": "system", "content": "be brief"}
    assert sent["body"]["temperature"] == 0.2
    assert sent["headers"]["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize("server", [[429, 500]], indirect=True)
def test_openai_retries_after_429_and_500(server):
    p = make_provider("vllm:my-model", base_url=server.url + "/v1")  # a local server: no key
    c = p.complete(MESSAGES, FAST, key="k")
    assert c.text and len(server.requests) == 3
    assert c.cost_usd is None  # no public price for a local server


@pytest.mark.parametrize("server", [[500, 500, 500, 500]], indirect=True)
def test_openai_gives_up_after_its_retries_with_one_line(server):
    p = make_provider("ollama:llama", base_url=server.url + "/v1")
    with pytest.raises(ProviderError, match="HTTP 500") as exc:
        p.complete(MESSAGES, FAST, key="k")
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("server", [[429]], indirect=True)
def test_anthropic_wire_format_system_usage_and_retry(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    p = make_provider("anthropic:claude-sonnet-4-5", base_url=server.url)
    c = p.complete(MESSAGES, FAST, key="k")
    assert c.text == "plan: tile it"
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.cached_tokens) == (200, 40, 50)
    body = server.requests[-1]["body"]
    assert body["system"] == "be brief" and body["messages"] == [
        {"role": "user", "content": "write a kernel"}
    ]
    headers = server.requests[-1]["headers"]
    assert "sk-ant-test" in headers.get("x-api-key", "") + headers.get("authorization", "")
    assert len(server.requests) == 2


def test_missing_keys_and_bad_specs_are_one_line_errors(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UserError, match="OPENAI_API_KEY is not set"):
        make_provider("openai:gpt-4o")
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
        make_provider("anthropic:claude-sonnet-4-5")
    with pytest.raises(UserError, match="PROVIDER:MODEL"):
        make_provider("gpt-4o")
    with pytest.raises(UserError, match="unknown provider"):
        make_provider("bard:x")
    with pytest.raises(UserError, match="--base-url"):
        make_provider("custom:m")


def test_replay_answers_by_key(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"key": "r1/planner", "text": "plan", "usage": {"input_tokens": 5}})
                    + "\n")  # fmt: skip
    p = make_provider(f"replay:{path}")
    assert p.complete(MESSAGES, FAST, key="r1/planner").usage.input_tokens == 5
    with pytest.raises(ProviderError, match="no answer for r1/coder"):
        p.complete(MESSAGES, FAST, key="r1/coder")


def test_exchange_writes_a_readable_prompt_then_reads_the_answer(tmp_path):
    p = make_provider(f"exchange:{tmp_path}")
    with pytest.raises(AnswerPending) as exc:
        p.complete(MESSAGES, FAST, key="vector_add/round1/planner")
    prompt = tmp_path / "vector_add__round1__planner.prompt.md"
    assert str(prompt) == exc.value.request_path
    assert "## user\n\nwrite a kernel" in prompt.read_text()
    (tmp_path / "vector_add__round1__planner.answer.md").write_text("the plan")
    assert p.complete(MESSAGES, FAST, key="vector_add/round1/planner").text == "the plan"
