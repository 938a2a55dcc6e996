"""Providers through the real SDKs against a local server on loopback that speaks the OpenAI
and Anthropic wire formats (plain JSON and SSE streams), whole answers through complete(),
prices, plus the offline providers and --model parsing."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cudamaster.errors import UserError
from cudamaster.llm.base import AnswerPending, Message, Options, ProviderError
from cudamaster.llm.caps import REASONING_MIN_CAP, is_reasoning
from cudamaster.llm.complete import CONTINUE, complete
from cudamaster.llm.prices import parse_price
from cudamaster.llm.registry import make_provider

FAST = Options(max_retries=3, timeout_s=10)
MESSAGES = [Message("system", "be brief"), Message("user", "write a kernel")]
ANSWER = "```cuda\nok\n```"


@dataclass
class Reply:
    """One scripted answer; `cut` ends it at the output cap ('length' / 'max_tokens')."""

    text: str = ANSWER
    cut: bool = False
    input_tokens: int = 120
    output_tokens: int = 30
    cached_tokens: int = 100
    thinking: str = ""  # Anthropic: a thinking block before the text
    broken: bool = False  # the stream breaks with an error event after the first piece


class Server:
    """Answers POST /v1/chat/completions and /v1/messages, as an SSE stream when the request
    says stream: true. `script` is played in order, one item a request: an int answers with
    that HTTP error status, a Reply with that reply; then every request gets Reply()."""

    def __init__(self, script: list[int | Reply] | None = None) -> None:
        self.script = list(script or [])
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                headers = {k.lower(): v for k, v in self.headers.items()}
                outer.requests.append({"path": self.path, "body": body, "headers": headers})
                item = outer.script.pop(0) if outer.script else Reply()
                if isinstance(item, int):
                    self.send_response(item)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("retry-after-ms", "10")
                    self.end_headers()
                    self.wfile.write(json.dumps({"error": {"message": f"status {item}"}}).encode())
                    return
                openai_wire = self.path.endswith("/chat/completions")
                if body.get("stream"):
                    events = (openai_events if openai_wire else anthropic_events)(item, body)
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for name, data in events:
                        line = f"event: {name}\n" if name else ""
                        payload = data if isinstance(data, str) else json.dumps(data)
                        self.wfile.write(f"{line}data: {payload}\n\n".encode())
                        self.wfile.flush()
                    return
                reply = (openai_json if openai_wire else anthropic_json)(item, body)
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def openai_usage(r: Reply) -> dict:
    return {"prompt_tokens": r.input_tokens, "completion_tokens": r.output_tokens,
            "total_tokens": r.input_tokens + r.output_tokens,
            "prompt_tokens_details": {"cached_tokens": r.cached_tokens}}  # fmt: skip


def openai_json(r: Reply, body: dict) -> dict:
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "length" if r.cut else "stop",
                         "message": {"role": "assistant", "content": r.text}}],
            "usage": openai_usage(r)}  # fmt: skip


def openai_events(r: Reply, body: dict) -> list[tuple[str | None, dict | str]]:
    """chat.completion.chunk events as OpenAI sends them: the text in two pieces, the finish
    reason, and the usage chunk only when stream_options.include_usage asks for it."""

    def chunk(delta: dict, finish: str | None = None, **extra) -> dict:
        return {"id": "c1", "object": "chat.completion.chunk", "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra}  # fmt: skip

    half = len(r.text) // 2
    events: list[tuple[str | None, dict | str]] = [
        (None, chunk({"role": "assistant", "content": ""})),
        (None, chunk({"content": r.text[:half]})),
    ]
    if r.broken:
        return [*events, (None, {"error": {"message": "overloaded\nplease retry"}})]
    events += [
        (None, chunk({"content": r.text[half:]})),
        (None, chunk({}, "length" if r.cut else "stop")),
    ]
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append((None, {**chunk({}), "choices": [], "usage": openai_usage(r)}))
    return [*events, (None, "[DONE]")]


def anthropic_json(r: Reply, body: dict) -> dict:
    return {"id": "m1", "type": "message", "role": "assistant", "model": body["model"],
            "stop_reason": "max_tokens" if r.cut else "end_turn",
            "content": [{"type": "text", "text": r.text}],
            "usage": {"input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
                      "cache_read_input_tokens": r.cached_tokens}}  # fmt: skip


def anthropic_events(r: Reply, body: dict) -> list[tuple[str | None, dict | str]]:
    """Messages API stream events: message_start, an optional thinking block, the text in two
    deltas, message_delta with the stop reason and output tokens, message_stop."""
    start = {**anthropic_json(r, body), "content": [], "stop_reason": None}
    start["usage"] = {**start["usage"], "output_tokens": 1}
    events: list[tuple[str | None, dict | str]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    index = 0
    if r.thinking:
        events += [
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "thinking", "thinking": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "thinking_delta",
                                               "thinking": r.thinking}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ]  # fmt: skip
        index = 1
    half = len(r.text) // 2

    def delta(text: str) -> tuple[str, dict]:
        return ("content_block_delta", {"type": "content_block_delta", "index": index,
                                        "delta": {"type": "text_delta", "text": text}})  # fmt: skip

    events += [
        ("content_block_start", {"type": "content_block_start", "index": index,
                                 "content_block": {"type": "text", "text": ""}}),
        delta(r.text[:half]),
    ]  # fmt: skip
    if r.broken:
        error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return [*events, ("error", error)]
    return [
        *events,
        delta(r.text[half:]),
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "max_tokens" if r.cut else "end_turn",
                                     "stop_sequence": None},
                           "usage": {"output_tokens": r.output_tokens}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip


@pytest.fixture
def server(request):
    s = Server(getattr(request, "param", None))
    yield s
    s.close()


def cap_of(body: dict) -> int:
    return body.get("max_tokens") or body["max_completion_tokens"]


# -- one call: wire formats, streaming, retries, errors -----------------------------------------
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


def test_openai_wire_answers_are_streamed_with_usage_from_the_final_chunk(server):
    p = make_provider("vllm:my-model", base_url=server.url + "/v1")
    c = p.complete(MESSAGES, FAST, key="k")
    body = server.requests[0]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert c.text == ANSWER  # joined from the content deltas
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.cached_tokens) == (120, 30, 100)
    assert (c.stop_reason, c.truncated) == ("stop", False)


@pytest.mark.parametrize("server", [[429, 500]], indirect=True)
def test_openai_retries_after_429_and_500(server):
    p = make_provider("vllm:my-model", base_url=server.url + "/v1")  # a local server: no key
    c = p.complete(MESSAGES, FAST, key="k")
    assert c.text and len(server.requests) == 3
    assert c.cost_usd == 0.0  # a local server costs nothing


@pytest.mark.parametrize("server", [[500, 500, 500, 500]], indirect=True)
def test_openai_gives_up_after_its_retries_with_one_line(server):
    p = make_provider("ollama:llama", base_url=server.url + "/v1")
    with pytest.raises(ProviderError, match="HTTP 500") as exc:
        p.complete(MESSAGES, FAST, key="k")
    assert "\n" not in str(exc.value) and exc.value.status == 500


@pytest.mark.parametrize("server", [[429]], indirect=True)
def test_anthropic_wire_format_system_usage_and_retry(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    p = make_provider("anthropic:claude-sonnet-4-5", base_url=server.url)
    c = p.complete(MESSAGES, Options(max_retries=3, timeout_s=10, max_output_tokens=1000), "k")
    assert c.text == "```cuda\nok\n```"
    # Anthropic's input_tokens (120) leaves out the 100 read from its cache; ours counts them
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.cached_tokens) == (220, 30, 100)
    body = server.requests[-1]["body"]
    assert body["system"] == "be brief" and body["messages"] == [
        {"role": "user", "content": "write a kernel"}
    ]
    assert body["stream"] is True and body["max_tokens"] == 1000
    assert (c.stop_reason, c.truncated) == ("end_turn", False)
    headers = server.requests[-1]["headers"]
    assert "sk-ant-test" in headers.get("x-api-key", "") + headers.get("authorization", "")
    assert len(server.requests) == 2


@pytest.mark.parametrize("server", [[Reply(thinking="first, the tiles")]], indirect=True)
def test_anthropic_thinking_gets_room_and_stays_out_of_the_answer(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    p = make_provider("anthropic:claude-sonnet-4-5", base_url=server.url)
    c = p.complete(MESSAGES, Options(reasoning_effort="high", max_retries=0), "k")
    assert c.text == ANSWER
    body = server.requests[0]["body"]
    budget = body["thinking"]["budget_tokens"]
    assert body["max_tokens"] >= REASONING_MIN_CAP and body["max_tokens"] > budget
    assert p.output_cap(Options(reasoning_effort="high")) == body["max_tokens"]


@pytest.mark.parametrize("server", [[Reply(broken=True)]], indirect=True)
def test_an_openai_wire_stream_that_breaks_is_a_one_line_error(server):
    p = make_provider("vllm:my-model", base_url=server.url + "/v1")
    with pytest.raises(ProviderError, match="stream broke: overloaded please retry") as exc:
        p.complete(MESSAGES, FAST, key="k")
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("server", [[Reply(broken=True)]], indirect=True)
def test_an_anthropic_stream_that_breaks_is_a_one_line_error(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    p = make_provider("anthropic:claude-sonnet-4-5", base_url=server.url)
    with pytest.raises(ProviderError, match="stream broke") as exc:
        p.complete(MESSAGES, FAST, key="k")
    assert "\n" not in str(exc.value) and "Overloaded" in str(exc.value)


# -- the output cap: its parameter and its size ---------------------------------------------
def test_the_cap_goes_in_max_completion_tokens_for_openai_only(server):
    sent = {}
    for name in ["openai", "deepseek", "openrouter", "vllm", "ollama", "lmstudio", "custom"]:
        p = make_provider(f"{name}:some-model", base_url=server.url + "/v1")
        p.complete(MESSAGES, FAST, key="k")
        body = server.requests[-1]["body"]
        sent[name] = [f for f in ("max_tokens", "max_completion_tokens") if f in body]
        assert cap_of(body) == 16384
    assert sent == {"openai": ["max_completion_tokens"], "deepseek": ["max_tokens"],
                    "openrouter": ["max_tokens"], "vllm": ["max_tokens"],
                    "ollama": ["max_tokens"], "lmstudio": ["max_tokens"],
                    "custom": ["max_tokens"]}  # fmt: skip


def test_reasoning_models_get_room_to_reason(server):
    caps = {}
    for spec, effort in [
        ("openai:o3-mini", None), ("openai:o1", None), ("openai:gpt-5", None),
        ("deepseek:deepseek-reasoner", None), ("ollama:deepseek-r1:14b", None),
        ("vllm:Qwen/QwQ-32B", None), ("openrouter:qwen/qwen3-235b-a22b-thinking-2507", None),
        ("vllm:plain-model", "low"),  # any model, once --reasoning-effort is given
        ("openai:gpt-4o", None), ("openai:gpt-5-chat-latest", None),
        ("deepseek:deepseek-chat", None), ("ollama:llama3.1", None),
    ]:  # fmt: skip
        p = make_provider(spec, base_url=server.url + "/v1")
        p.complete(MESSAGES, Options(max_retries=0, reasoning_effort=effort), key="k")
        caps[spec if effort is None else f"{spec} effort={effort}"] = cap_of(server.bodies()[-1])
    reasoning = {s for s, cap in caps.items() if cap >= REASONING_MIN_CAP}
    assert reasoning == {"openai:o3-mini", "openai:o1", "openai:gpt-5",
                         "deepseek:deepseek-reasoner", "ollama:deepseek-r1:14b",
                         "vllm:Qwen/QwQ-32B", "openrouter:qwen/qwen3-235b-a22b-thinking-2507",
                         "vllm:plain-model effort=low"}  # fmt: skip
    assert caps["openai:gpt-4o"] == 16384
    assert not is_reasoning("gpt-4.1", Options()) and is_reasoning("o4-mini", Options())


# -- whole answers: cut replies are asked again, then continued -----------------------------
@pytest.mark.parametrize("server", [[Reply("```cuda\nhal", cut=True, output_tokens=16384),
                                     Reply(output_tokens=20000)]], indirect=True)  # fmt: skip
def test_a_reply_cut_at_the_cap_is_asked_again_with_a_larger_cap(server, caplog):
    p = make_provider("vllm:my-model", base_url=server.url + "/v1", price=(1.0, 1.0))
    with caplog.at_level(logging.WARNING, logger="cudamaster.llm"):
        c = complete(p, MESSAGES, FAST, key="k")
    first, second = server.bodies()
    assert (cap_of(first), cap_of(second)) == (16384, 32768)
    assert second["messages"] == first["messages"]  # the same question, with more room
    assert c.text == ANSWER and not c.truncated and c.stop_reason == "stop"
    assert (c.usage.input_tokens, c.usage.output_tokens, c.usage.cached_tokens) == (240, 36384, 200)
    assert c.cost_usd == pytest.approx((240 + 36384) / 1e6) and c.latency_s > 0
    assert "cut at 16384 output tokens" in caplog.text


@pytest.mark.parametrize("server", [[Reply("```cuda\nhal", cut=True)]], indirect=True)
def test_one_call_says_that_its_reply_was_cut(server):
    p = make_provider("vllm:my-model", base_url=server.url + "/v1")
    c = p.complete(MESSAGES, FAST, key="k")
    assert (c.text, c.stop_reason, c.truncated) == ("```cuda\nhal", "length", True)


@pytest.mark.parametrize("server", [[Reply("", output_tokens=32768)]], indirect=True)
def test_an_empty_reply_whose_cap_went_to_reasoning_is_cut(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    p = make_provider("openai:o3-mini", base_url=server.url + "/v1")
    c = p.complete(MESSAGES, FAST, key="k")  # the server said 'stop', yet no answer came
    assert c.stop_reason == "stop" and c.truncated


AT_CEILING = Options(max_retries=0, timeout_s=10, max_output_tokens=1000, max_output_cap=1000)


@pytest.mark.parametrize("server", [[Reply("```cuda\nhal", cut=True),
                                     Reply("f\n```")]], indirect=True)  # fmt: skip
def test_a_reply_cut_at_the_ceiling_is_continued_from_the_partial_answer(server):
    p = make_provider("vllm:my-model", base_url=server.url + "/v1")
    c = complete(p, MESSAGES, AT_CEILING, key="k")
    first, second = server.bodies()
    assert cap_of(first) == cap_of(second) == 1000
    assert second["messages"] == [*first["messages"],
                                  {"role": "assistant", "content": "```cuda\nhal"},
                                  {"role": "user", "content": CONTINUE}]  # fmt: skip
    assert c.text == "```cuda\nhalf\n```" and not c.truncated
    assert c.usage.output_tokens == 60


@pytest.mark.parametrize("server", [[Reply("a", cut=True), Reply("b", cut=True),
                                     Reply("c", cut=True), Reply("d")]], indirect=True)  # fmt: skip
def test_a_reply_still_cut_after_two_continuations_is_an_error(server):
    p = make_provider("vllm:my-model", base_url=server.url + "/v1")
    with pytest.raises(ProviderError, match="still cut at the output cap after 3 calls") as exc:
        complete(p, MESSAGES, AT_CEILING, key="round1/coder")
    assert "\n" not in str(exc.value) and len(server.requests) == 3
    assert server.bodies()[2]["messages"][-2] == {"role": "assistant", "content": "ab"}


ALL_REASONING = [Reply("", output_tokens=32768), Reply("", cut=True, output_tokens=65536)]


@pytest.mark.parametrize("server", [ALL_REASONING], indirect=True)
def test_a_reply_that_is_all_reasoning_at_the_ceiling_is_not_continued(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    p = make_provider("openai:o3-mini", base_url=server.url + "/v1")
    with pytest.raises(ProviderError, match="nothing but reasoning") as exc:
        complete(p, MESSAGES, FAST, key="k")
    assert [cap_of(b) for b in server.bodies()] == [32768, 65536]  # no continuation of nothing
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("server", [[Reply("```cuda\nhal", cut=True), 400,
                                     Reply("f\n```")]], indirect=True)  # fmt: skip
def test_a_refused_larger_cap_turns_into_a_continuation(server):
    p = make_provider("vllm:my-model", base_url=server.url + "/v1")
    c = complete(p, MESSAGES, FAST, key="k")  # 32768 is over this model's limit
    caps_sent = [cap_of(b) for b in server.bodies()]
    assert caps_sent == [16384, 32768, 16384]
    assert server.bodies()[2]["messages"][-1] == {"role": "user", "content": CONTINUE}
    assert c.text == "```cuda\nhalf\n```"


@pytest.mark.parametrize("server", [[Reply("plan: ti", cut=True), Reply("plan: ti", cut=True),
                                     Reply("plan: tile it")]], indirect=True)  # fmt: skip
def test_anthropic_max_tokens_stop_is_a_cut_reply(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    p = make_provider("anthropic:claude-sonnet-4-5", base_url=server.url)
    one = p.complete(MESSAGES, FAST, key="k")
    assert (one.stop_reason, one.truncated) == ("max_tokens", True)
    c = complete(p, MESSAGES, FAST, key="k")
    assert [b["max_tokens"] for b in server.bodies()] == [16384, 16384, 32768]
    assert c.text == "plan: tile it" and c.stop_reason == "end_turn"


# -- prices ---------------------------------------------------------------------------------
def test_a_user_price_replaces_the_price_table(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    p = make_provider("openai:gpt-4o", base_url=server.url + "/v1", price=(2.0, 8.0))
    c = p.complete(MESSAGES, FAST, key="k")
    assert p.priced and c.cost_usd == pytest.approx((120 * 2.0 + 30 * 8.0) / 1e6)
    assert p.label == "openai:gpt-4o"


def test_an_unknown_hosted_model_is_not_priced(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    p = make_provider("openai:gpt-unheard-of", base_url=server.url + "/v1")
    assert not p.priced and p.complete(MESSAGES, FAST, key="k").cost_usd is None
    assert make_provider("openai:gpt-4o", base_url=server.url + "/v1").priced
    assert not make_provider("custom:m", base_url=server.url + "/v1").priced
    custom = make_provider("custom:m", base_url=server.url + "/v1", price=(1.0, 1.0))
    assert custom.priced and custom.complete(MESSAGES, FAST, key="k").cost_usd == 150 / 1e6


def test_local_servers_and_offline_providers_cost_nothing(server, tmp_path):
    for name in ["vllm", "ollama", "lmstudio"]:
        p = make_provider(f"{name}:m", base_url=server.url + "/v1")
        assert p.priced and p.complete(MESSAGES, FAST, key="k").cost_usd == 0.0
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"key": "k", "text": "plan"}) + "\n")
    assert make_provider(f"replay:{path}").complete(MESSAGES, FAST, key="k").cost_usd == 0.0
    (tmp_path / "k.answer.md").write_text("plan")
    exchange = make_provider(f"exchange:{tmp_path}")
    assert exchange.priced and exchange.complete(MESSAGES, FAST, key="k").cost_usd == 0.0


def test_parse_price_reads_in_and_out_and_refuses_the_rest_in_one_line():
    assert parse_price("3,15") == (3.0, 15.0)
    assert parse_price(" 0.27 , 1.1 ") == (0.27, 1.1)
    for bad in ["3", "3,15,1", "a,b", "-1,2", "nan,1", "1,inf", "", "3;15"]:
        with pytest.raises(UserError, match="--price") as exc:
            parse_price(bad)
        assert "\n" not in str(exc.value)


# -- --model parsing and the offline providers ----------------------------------------------
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
    c = complete(p, MESSAGES, FAST, key="r1/planner")  # offline answers are never cut
    assert (c.text, c.truncated) == ("plan", False)
    with pytest.raises(ProviderError, match="no answer for r1/coder"):
        p.complete(MESSAGES, FAST, key="r1/coder")


def test_replay_of_an_exchange_directory_gives_its_answers_and_their_tokens(tmp_path):
    exchange = make_provider(f"exchange:{tmp_path}")
    with pytest.raises(AnswerPending):
        complete(exchange, MESSAGES, FAST, key="vector_add-fp32/round1/planner")
    with pytest.raises(AnswerPending):  # asked, never answered: not in the replay
        complete(exchange, MESSAGES, FAST, key="RELU-fp32/round1/planner")
    (tmp_path / "vector_add-fp32__round1__planner.answer.md").write_text("the plan")
    live = exchange.complete(MESSAGES, FAST, key="vector_add-fp32/round1/planner")
    replay = make_provider(f"replay:{tmp_path}")
    again = replay.complete(MESSAGES, FAST, key="vector_add-fp32/round1/planner")
    assert (again.text, again.usage, again.cost_usd) == ("the plan", live.usage, 0.0)
    with pytest.raises(ProviderError, match="no answer for RELU-fp32/round1/planner"):
        replay.complete(MESSAGES, FAST, key="RELU-fp32/round1/planner")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="has no answered prompt"):
        make_provider(f"replay:{tmp_path / 'empty'}")


def test_exchange_writes_a_readable_prompt_then_reads_the_answer(tmp_path):
    p = make_provider(f"exchange:{tmp_path}")
    with pytest.raises(AnswerPending) as exc:
        complete(p, MESSAGES, FAST, key="vector_add/round1/planner")
    prompt = tmp_path / "vector_add__round1__planner.prompt.md"
    assert str(prompt) == exc.value.request_path
    assert "## user\n\nwrite a kernel" in prompt.read_text()
    (tmp_path / "vector_add__round1__planner.answer.md").write_text("the plan")
    assert p.complete(MESSAGES, FAST, key="vector_add/round1/planner").text == "the plan"
