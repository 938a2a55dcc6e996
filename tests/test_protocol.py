"""The worker protocol's wire form: every request and reply comes back as it was sent, and a
message that does not match its definition is refused, naming what is wrong."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cudamaster.bench import protocol as p
from cudamaster.bench.client import WorkerClient, WorkerDied
from cudamaster.profile.target import TargetSpec

ARGS = (p.ArgSpec("A", "input", "f32", 4096), p.ArgSpec("C", "output", "bf16", 2048),
        p.ArgSpec("N", "scalar", "i32"))  # fmt: skip
SETUP = p.Setup("/tmp/case", 3, ARGS, ((1024, 0.5), (1024, -2.0), (7, 16256)), "/tmp/slots")
REQUESTS: list[p.Request] = [
    p.Init(),
    p.Init(device=1, comparer="/lib/compare.so"),
    p.Load("/lib/impl.so", "vector_add", ARGS),
    SETUP,
    p.Run(2),
    p.Time(9, "cold", (0, 1), start=1),
    p.Time(3, "hot", (0, 1)),
    p.Save(),
    p.Release(),
    p.ProfiledCall(0),
]
SLOT = p.OutputSlot("/tmp/slots/slot1.bin", unpinned=True)
REPLIES: list[p.Reply] = [
    p.InitReply(sm_count=132, l2_bytes=50 << 20, cc="90", cudart="/usr/lib/libcudart.so.13"),
    p.LoadReply(loaded=["libcublas.so.13"]),
    p.LoadReply(verdict="missing_symbol", error='the library does not define extern "C" f'),
    p.SetupReply({"C": (0, 2048), "D": (4096, 4)}),
    p.RunReply(0.25, ["A"], [], ["C"], SLOT),
    p.TimeReply([0.125, 0.5, 3.0], placements=8),
    p.SaveReply(SLOT),
    p.Done(),
]


def test_every_request_and_reply_has_a_case_here():
    assert {type(r) for r in REQUESTS} == set(p.Request.__subclasses__())
    assert {type(r) for r in REPLIES} == set(p.Reply.__subclasses__())


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: repr(r)[:40])
def test_every_request_round_trips_through_one_json_line(req):
    line = p.encode_request(req)
    assert "\n" not in line and json.loads(line)["cmd"] == req.cmd
    assert p.decode_request(line) == req
    assert p.decode_request(line.encode()) == req  # as the worker reads it, or as bytes


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: repr(r)[:40])
def test_every_reply_round_trips_through_one_json_line(reply):
    line = p.encode_reply(reply)
    assert "\n" not in line
    assert p.decode_reply(line, type(reply)) == reply


def test_each_request_names_the_reply_it_gets():
    assert p.Setup.cmd == "setup" and SETUP.reply_type() is p.SetupReply
    assert p.Time(1, "cold", (0,)).reply_type() is p.TimeReply
    assert p.ProfiledCall(0).reply_type() is p.Done and p.ProfiledCall.cmd == "profiled_call"


def test_scalars_keep_their_type_so_bf16_bits_stay_integers():
    (back,) = [p.decode_request(p.encode_request(SETUP))]
    assert isinstance(back, p.Setup)
    assert [type(x) for row in back.scalars for x in row] == [int, float] * 2 + [int, int]


def test_exit_and_a_fatal_reply_have_their_own_forms():
    assert p.decode_request(p.encode_request(p.Exit())) == p.Exit()
    fatal = p.Fatal("runtime_error", "cudaMalloc failed", "Traceback ...")
    line = p.encode_reply(fatal)
    assert json.loads(line)["fatal"] is True
    assert p.decode_reply(line, p.TimeReply) == fatal  # whatever reply was expected


def test_an_unknown_field_is_refused_and_named():
    # the bug that motivated the protocol: setup called with out= where it takes another name
    line = json.dumps({**json.loads(p.encode_request(SETUP)), "out": "/tmp/o"})
    with pytest.raises(p.ProtocolError, match=r"setup: unknown field\(s\) out \(fields: case_dir"):
        p.decode_request(line)
    reply = json.dumps({"times_ms": [1.0], "placements": 1, "ok": True})
    with pytest.raises(p.ProtocolError, match=r"TimeReply: unknown field\(s\) ok"):
        p.decode_reply(reply, p.TimeReply)
    nested = json.loads(p.encode_request(p.Load("x.so", "f", ARGS)))
    nested["args"][1]["bytes"] = 4
    with pytest.raises(p.ProtocolError, match=r"load\.args\[1\]: unknown field\(s\) bytes"):
        p.decode_request(json.dumps(nested))


def test_missing_or_mistyped_fields_and_unknown_commands_are_refused():
    with pytest.raises(p.ProtocolError, match=r"run: missing field\(s\) input_set"):
        p.decode_request('{"cmd": "run"}')
    with pytest.raises(p.ProtocolError, match=r"time\.mode: 'warm' is not one of 'cold', 'hot'"):
        p.decode_request('{"cmd": "time", "n": 3, "mode": "warm", "sets": [0]}')
    with pytest.raises(p.ProtocolError, match=r"run\.input_set: expected int, got '2'"):
        p.decode_request('{"cmd": "run", "input_set": "2"}')
    with pytest.raises(p.ProtocolError, match=r"SetupReply\.layout\['C'\]: expected 2 items"):
        p.decode_reply('{"layout": {"C": [0, 1, 2]}}', p.SetupReply)
    with pytest.raises(p.ProtocolError, match="unknown command 'launch'"):
        p.decode_request('{"cmd": "launch"}')
    with pytest.raises(p.ProtocolError, match="not JSON"):
        p.decode_request("{cmd: run}")


def test_the_profile_targets_spec_is_read_as_it_was_written(tmp_path):
    spec = TargetSpec(load=p.Load("impl.so", "vector_add", ARGS), setup=SETUP, input_set=1)
    spec.write(tmp_path / "target.json")
    assert TargetSpec.read(tmp_path / "target.json") == spec
    data = json.loads((tmp_path / "target.json").read_text())
    data["setup"]["out"] = data["setup"].pop("slot_dir")  # the old spelling of the slots' folder
    (tmp_path / "target.json").write_text(json.dumps(data))
    with pytest.raises(p.ProtocolError, match=r"TargetSpec\.setup: unknown field\(s\) out"):
        TargetSpec.read(tmp_path / "target.json")


def test_a_worker_refuses_a_message_it_cannot_read_with_a_fatal_reply_and_exits():
    line = json.dumps({"cmd": "setup", "dir": "/tmp/case", "out": "/tmp/o"}) + "\n"
    proc = subprocess.run([sys.executable, "-m", "cudamaster.bench.worker"], input=line,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    (reply,) = proc.stdout.splitlines()
    fatal = p.decode_reply(reply, p.SetupReply)
    assert isinstance(fatal, p.Fatal) and fatal.verdict == "runtime_error"
    assert "unknown field(s) dir, out" in fatal.error


def test_a_failing_command_makes_the_client_raise_worker_died_and_the_worker_exit():
    worker = WorkerClient("protocol-test")
    try:
        with pytest.raises(WorkerDied) as died:
            worker.request(60, p.Run(0))  # no init: the worker has no CUDA runtime to call
        assert died.value.verdict == "runtime_error"
        assert not worker.alive
    finally:
        worker.close()
