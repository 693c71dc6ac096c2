"""Fuzz tier (issue 15): seeded, bounded mutation fuzzing at the protobuf/method level.

For every method of every service in Protos/ubiquity/v1/*.proto (enumerated from the
generated descriptors, so a new method is covered without touching this file) the fuzzer
builds valid-ish requests — real store, context and object IDs, real tokens, entity and
attribute names of the model, predicates — serializes them, mutates the bytes (bit flips,
truncation, insertions, corrupted length fields, huge repeated fields, long strings, random
field numbers) and sends them as raw bytes through grpcio. A second fuzzer sends predicates
from a small grammar, mutated, through Stores.Fetch.

Every case must end with a status before its deadline (DEADLINE_EXCEEDED is a hang) and
never with INTERNAL or UNKNOWN. At the end the server's RSS must be back near where it
started and it must still answer Admin.Ping.

test_abuse.py fuzzes HTTP/2 frames; this file keeps the framing valid and fuzzes what is
inside the messages.

Reproducible: UBIQ_FUZZ_SEED (default 15) and UBIQ_FUZZ_CASES (default 2400: the total
over all methods, plus the predicate cases) pick the run; every failure names the seed,
the method and the case index, and the bytes sent.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import time
import uuid

import grpc
import pytest
from google.protobuf import json_format, message_factory

import conftest
import ubiq_harness
from conftest import make_channel
from ubiq_client import Client, cx, md, ob, st, v
from ubiq_harness import REPO_ROOT, RSS_FACTOR
from ubiquity.v1 import admin_pb2_grpc

MiB = 1024 * 1024
SEED = int(os.environ.get("UBIQ_FUZZ_SEED", "15"))
CASES = int(os.environ.get("UBIQ_FUZZ_CASES", "2400"))
CASE_DEADLINE = 10.0
# Growth over the warmed-up baseline allowed at the end (generous: this catches leaks of
# hundreds of MiB, not allocator slack).
RSS_SLACK = 128 * MiB * RSS_FACTOR
# Largest request the fuzzer builds; the server's default receive limit is 4 MiB, and a few
# cases go past it on purpose.
MAX_REQUEST = 5 * MiB

FORBIDDEN = (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED)
# Server-streaming methods that stream until the client leaves (Changes.Subscribe): a case is
# done at its first response (its caught-up marker) or its error.
LIVE_STREAMS = {"ubiquity.v1.Changes.Subscribe"}


def _methods():
    """(path, method descriptor) of every RPC in Protos/ubiquity/v1/*.proto."""
    out = []
    for proto in sorted((REPO_ROOT / "Protos" / "ubiquity" / "v1").glob("*.proto")):
        module = importlib.import_module(f"ubiquity.v1.{proto.stem}_pb2")
        for service in module.DESCRIPTOR.services_by_name.values():
            for m in service.methods:
                out.append((f"/{service.full_name}/{m.name}", m))
    return out


METHODS = _methods()
PREDICATE_CASES = max(20, CASES // 4)
CASES_PER_METHOD = max(4, (CASES - PREDICATE_CASES) // max(1, len(METHODS)))

MODEL_JSON = REPO_ROOT / "examples" / "notes-model.json"


def _notes_model():
    return json_format.ParseDict(json.loads(MODEL_JSON.read_text()), md.Model())


class World:
    """The real things the fuzzer's requests point at: stores, a context, objects, tokens."""

    def __init__(self, srv: ubiq_harness.Ubiquityd):
        self.srv = srv
        self.channel = make_channel(srv.address)
        c = Client(self.channel)
        self.store = c.open(name="fuzz-main", model=_notes_model())
        self.other = c.open(name="fuzz-other", model=_notes_model())
        self.victim = c.open(name="fuzz-victim", model=_notes_model())  # DestroyStore/ReplaceStore
        r = c.save(self.store, inserts=[
            ob.Insert(temporary_id="p1", entity="Person", values={"name": v("Ann"), "age": v(30, kind="int32"),
                                                                 "email": v("ann@x.test")}),
            ob.Insert(temporary_id="p2", entity="Person", values={"name": v("Bob"), "age": v(40, kind="int32")}),
            ob.Insert(temporary_id="n1", entity="Note", values={"title": v("hello")},
                      relationships={"owner": ob.ObjectRefList(refs=[ob.ObjectRef(temporary_id="p1")])}),
        ])
        self.object_ids = list(r.permanent_ids.values())
        self.token = r.token
        self.other_token = c.current(self.other).token
        self.context = c.contexts.CreateContext(cx.CreateContextRequest(
            store_id=self.store, name="fuzz"), timeout=30).context_id
        self.admin = admin_pb2_grpc.AdminStub(self.channel)
        self._client = c

    def sacrificial_context(self) -> str:
        """A fresh context of the main store, for CloseContext to close."""
        return self._client.contexts.CreateContext(cx.CreateContextRequest(
            store_id=self.store, name="closing"), timeout=30).context_id

    def close(self):
        self.channel.close()


# -- building valid-ish messages -----------------------------------------------------------

ENTITIES = ["Person", "Note"]
# Fields a request is useless without: always set (to a plausible value, which may be wrong).
ALWAYS_SET = {"store_id", "source_store_id", "context_id", "entity", "fetch", "model", "values",
              "unique_key", "seed_id", "inserts", "temporary_id", "object_id", "name", "type"}
ATTRIBUTES = ["name", "age", "email", "title", "createdAt", "notes", "owner"]
SAMPLE_PREDICATES = ['age > 3', 'name BEGINSWITH[c] "a"', 'ANY notes.title == "hello"',
                     'owner.name == $n', 'age IN {1, 2, 30}', 'TRUEPREDICATE', 'email == nil']


def _string_for(field_name: str, rng: random.Random, world: World) -> str:
    n = field_name.lower()
    if n in ("store_id", "source_store_id"):
        return rng.choice([world.store] * 6 + [world.other, str(_uuid(rng)), "not-a-uuid", ""])
    if n in ("context_id", "parent_context_id"):
        return rng.choice([world.context] * 6 + [str(_uuid(rng)), ""])
    if n in ("object_id", "object_ids", "winner_object_id", "removed_object_ids"):
        return rng.choice(world.object_ids + [f"x-ubiquity://{world.store}/Person/p999",
                                              f"x-ubiquity://{world.store}/Nope/p1", "p1", ""])
    if n in ("entity", "destination", "parent"):
        return rng.choice(ENTITIES + ["Nope", ""])
    if n in ("predicate", "having_predicate"):
        return rng.choice(SAMPLE_PREDICATES)
    if n in ("key_path", "properties", "properties_to_fetch", "properties_to_group_by", "unique_key",
             "relationship_key_paths_for_prefetching", "inverse"):
        return rng.choice(ATTRIBUTES + ["owner.name", "notes.title", "nope"])
    if n == "seed_id":
        return rng.choice(["seed-1", "seed-2", ""])
    if n in ("temporary_id",):
        return rng.choice(["t1", "t2", "p1", ""])
    if n == "decimal_value":
        return rng.choice(["1.5", "-0", "1e400", "abc", ""])
    if n == "uuid_value":
        return rng.choice([str(_uuid(rng)), "zzz"])
    return rng.choice(["", "a", "fuzz", "ünïcødé", "x" * rng.randrange(1, 300)])


def _uuid(rng: random.Random):
    return uuid.UUID(int=rng.getrandbits(128), version=4)


def _int_for(field, rng: random.Random) -> int:
    T = field.type
    unsigned = T in (field.TYPE_UINT32, field.TYPE_UINT64, field.TYPE_FIXED32, field.TYPE_FIXED64)
    bits = 32 if T in (field.TYPE_INT32, field.TYPE_UINT32, field.TYPE_SINT32, field.TYPE_FIXED32,
                       field.TYPE_SFIXED32) else 64
    if rng.random() < 0.8:
        choice = rng.choice([0, 1, 2, 7, 100, 500])
    else:
        choice = rng.choice([10_000, 2**31 - 1, -1, -(2**31), 2**bits - 1])
    if unsigned:
        return abs(choice) % (2**bits)
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return max(lo, min(hi, choice))


def fill(msg, rng: random.Random, world: World, depth: int = 0):
    """Sets a random subset of msg's fields to plausible values (recursively, bounded)."""
    for field in msg.DESCRIPTOR.fields:
        if rng.random() < 0.35 and field.name not in ALWAYS_SET:
            continue
        if field.containing_oneof is not None and msg.WhichOneof(field.containing_oneof.name):
            continue
        mt = field.message_type
        if field.is_repeated and mt is not None and mt.GetOptions().map_entry:
            key_f, val_f = mt.fields_by_name["key"], mt.fields_by_name["value"]
            target = getattr(msg, field.name)
            for _ in range(rng.randrange(0, 4)):
                key = (rng.choice(ATTRIBUTES + ["n", "p1", "zz"]) if key_f.type == key_f.TYPE_STRING
                       else _int_for(key_f, rng))
                if val_f.message_type is not None:
                    if depth < 4:
                        fill(target[key], rng, world, depth + 1)
                elif val_f.type == val_f.TYPE_STRING:
                    target[key] = _string_for(field.name, rng, world)
                else:
                    target[key] = _int_for(val_f, rng)
            continue
        count = rng.randrange(0, 4) if field.is_repeated else 1
        for _ in range(count):
            if mt is not None:
                if depth >= 4:
                    break
                sub = getattr(msg, field.name).add() if field.is_repeated else getattr(msg, field.name)
                if mt.full_name == "ubiquity.v1.Model" and rng.random() < 0.7:
                    sub.CopyFrom(_notes_model())  # a valid model, sometimes changed below
                    if rng.random() < 0.5:
                        fill(sub.entities[rng.randrange(len(sub.entities))].attributes.add(), rng, world, depth + 2)
                    continue
                if mt.full_name == "google.protobuf.Timestamp":
                    sub.seconds = rng.choice([0, 1_700_000_000, 2**40, -(2**40)])
                    sub.nanos = rng.choice([0, 999_999_999])
                else:
                    fill(sub, rng, world, depth + 1)
                    if not field.is_repeated and sub.ByteSize() == 0:
                        sub.SetInParent()
                continue
            value = _scalar(field, rng, world)
            if field.is_repeated:
                getattr(msg, field.name).append(value)
            else:
                setattr(msg, field.name, value)
    return msg


def _scalar(field, rng: random.Random, world: World):
    T = field.type
    if T == field.TYPE_STRING:
        return _string_for(field.name, rng, world)
    if T == field.TYPE_BYTES:
        if field.name == "token":
            return rng.choice([world.token, world.token, world.other_token, b"", b"\x01garbage",
                               world.token[:-1] + bytes([world.token[-1] ^ 1])])
        return rng.choice([b"", b"\x00", bytes(rng.getrandbits(8) for _ in range(16))])
    if T == field.TYPE_BOOL:
        return rng.random() < 0.5
    if T in (field.TYPE_DOUBLE, field.TYPE_FLOAT):
        return rng.choice([0.0, 1.5, -2.25, 1e300 if T == field.TYPE_DOUBLE else 3e38, float("inf"),
                           float("nan"), -0.0])
    if T == field.TYPE_ENUM:
        values = [e.number for e in field.enum_type.values]
        return rng.choice(values + [max(values) + 1, 99])
    return _int_for(field, rng)


# -- mutating serialized bytes -----------------------------------------------------------

def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint((number << 3) | wire)


def _length_positions(data: bytes) -> list[int]:
    """Offsets of the length varints of top-level length-delimited fields (best effort)."""
    out, i = [], 0
    while i < len(data):
        try:
            key, i = _read_varint(data, i)
        except IndexError:
            break
        wire = key & 7
        if wire == 0:
            try:
                _, i = _read_varint(data, i)
            except IndexError:
                break
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            out.append(i)
            try:
                length, i = _read_varint(data, i)
            except IndexError:
                break
            i += length
        else:
            break
    return out


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 70:
            raise IndexError("varint too long")


def mutate(data: bytes, rng: random.Random, descriptor) -> tuple[bytes, str]:
    """1-3 mutations of a serialized request; returns the bytes and what was done."""
    data = bytearray(data)
    done = []
    for _ in range(rng.randrange(1, 4)):
        m = rng.randrange(9)
        if m == 0 and data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
            done.append(f"flip@{i}")
        elif m == 1 and data:
            cut = rng.randrange(len(data))
            data = data[:cut]
            done.append(f"truncate@{cut}")
        elif m == 2:
            i = rng.randrange(len(data) + 1)
            junk = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 16)))
            data[i:i] = junk
            done.append(f"insert{len(junk)}@{i}")
        elif m == 3:
            positions = _length_positions(bytes(data))
            if positions:
                i = rng.choice(positions)
                try:
                    _, end = _read_varint(bytes(data), i)
                except IndexError:  # the length itself was cut off by an earlier mutation
                    end = len(data)
                new = rng.choice([0, 1, 0x7F, 2**31 - 1, 2**32 + 5, 2**63, len(data) * 2])
                data[i:end] = _varint(new)
                done.append(f"length@{i}={new}")
        elif m == 4:
            # a huge repeated field: one real field of the message, thousands of times
            fields = [f for f in descriptor.fields if f.is_repeated] or list(descriptor.fields)
            if fields:
                f = rng.choice(fields)
                elem = _tag(f.number, 2) + _varint(3) + b"abc" if f.type in (f.TYPE_STRING, f.TYPE_BYTES, f.TYPE_MESSAGE) \
                    else _tag(f.number, 0) + _varint(1)
                n = rng.choice([1_000, 20_000, 200_000])
                data += elem * n
                done.append(f"repeat-{f.name}x{n}")
        elif m == 5:
            # a long string in a real string field (or a new one)
            fields = [f for f in descriptor.fields if f.type in (f.TYPE_STRING, f.TYPE_BYTES)]
            number = rng.choice(fields).number if fields else rng.randrange(1, 30)
            size = rng.choice([10_000, 100_000, 1 * MiB, 3 * MiB])
            filler = rng.choice([b"a", b"\xf0\x9f\x98\x80", b"%", b"\x00", b"\xff"])
            body = (filler * (size // len(filler) + 1))[:size]
            data += _tag(number, 2) + _varint(len(body)) + body
            done.append(f"long-string#{number}:{size}x{filler!r}")
        elif m == 6:
            number = rng.choice([rng.randrange(1, 20), rng.randrange(20, 2**29), 0, 19000, 2**29 - 1])
            wire = rng.randrange(8)
            payload = {0: _varint(rng.getrandbits(64)), 1: bytes(8), 2: _varint(3) + b"xyz",
                       5: bytes(4)}.get(wire, b"")
            data += _tag(number, wire) + payload
            done.append(f"field#{number}/wire{wire}")
        elif m == 7 and len(data) > 1:
            i, j = sorted(rng.sample(range(len(data)), 2))
            data[i:j] = data[i:j] * 2
            done.append(f"dup[{i}:{j}]")
        elif m == 8:
            # a nested message field, nested very deep (recursion limits)
            msg_fields = [f for f in descriptor.fields if f.message_type is not None]
            if msg_fields:
                f = rng.choice(msg_fields)
                inner = b""
                for _ in range(rng.choice([50, 200, 2000])):
                    inner = _tag(1, 2) + _varint(len(inner)) + inner
                data += _tag(f.number, 2) + _varint(len(inner)) + inner
                done.append(f"deep-{f.name}")
    if len(data) > MAX_REQUEST:
        data = data[:MAX_REQUEST]
        done.append("capped")
    return bytes(data), ",".join(done)


# -- the server the fuzzer owns ----------------------------------------------------------

@pytest.fixture(scope="module")
def fuzz_server(server_binary, tmp_path_factory):
    srv = ubiq_harness.Ubiquityd(server_binary, tmp_path_factory.mktemp("fuzz"), name="fuzz",
                                 args=["--shutdown-grace-seconds", str(conftest.GRACE_SECONDS),
                                       "--synchronous", "normal"])
    conftest._register(srv)
    srv.start()
    world = World(srv)
    # Warm every method once with its default message, so lazy allocations precede the baseline.
    for path, m in METHODS:
        call = _callable(world.channel, path, m)
        try:
            _invoke(call, m, b"", CASE_DEADLINE)
        except grpc.RpcError:
            pass
    srv.fuzz_world = world
    srv.fuzz_rss_start = srv.rss_bytes()
    print(f"\nfuzz: seed={SEED} cases={CASES} ({CASES_PER_METHOD} per method x {len(METHODS)} "
          f"methods + {PREDICATE_CASES} predicates); rss at start {srv.fuzz_rss_start / MiB:.1f} MiB")
    yield srv
    world.close()
    if srv.alive():
        rc = srv.stop(timeout=conftest.EXIT_BOUND_SECONDS)
        assert rc == 0, f"fuzz ubiquityd exited {rc} after SIGTERM\n{srv.stderr_tail()}"
    srv.cleanup_data()
    if srv in conftest._SERVERS:
        conftest._SERVERS.remove(srv)


def _callable(channel, path, m):
    if path == "/ubiquity.v1.Accounts/SignOut":
        # with the world's own session it would sign that out and end the run: fuzz it with a
        # well-formed token of no session instead
        call = channel.unary_unary(path)
        fake = [("authorization", "Bearer ubs_" + "A" * 43)]
        return lambda *a, **kw: call(*a, **{**kw, "metadata": fake})
    if m.client_streaming and m.server_streaming:
        return channel.stream_stream(path)
    if m.client_streaming:
        return channel.stream_unary(path)
    if m.server_streaming:
        return channel.unary_stream(path)
    return channel.unary_unary(path)


def _invoke(call, m, data: bytes, deadline: float):
    """Sends data (raw bytes: no serializer) and drains the answer; raises grpc.RpcError."""
    if m.client_streaming:
        request = iter([data])
    else:
        request = data
    if m.server_streaming:
        n = 0
        responses = call(request, timeout=deadline)
        for _ in responses:
            n += 1
            if n >= 10_000 or m.full_name in LIVE_STREAMS:
                # a subscription that answered is in place, and never ends by itself
                responses.cancel()
                break
        return n
    return call(request, timeout=deadline)


def _check(srv, label: str, data: bytes, fn, failures: list):
    """Runs one case; a forbidden status is recorded in `failures` (the run goes on, so one
    report lists every kind of failure); a dead server fails at once."""
    t0 = time.monotonic()
    code, details = grpc.StatusCode.OK, ""
    try:
        fn()
    except grpc.RpcError as e:
        code, details = e.code(), e.details() or ""
    elapsed = time.monotonic() - t0
    where = (f"seed={SEED} {label}: {code.name} after {elapsed:.2f}s {details[:300]!r}; "
             f"request ({len(data)} bytes) starts {data[:120]!r}")
    assert srv.alive(), f"ubiquityd died on {where}\n{srv.stderr_tail()}"
    if code in FORBIDDEN:
        failures.append(where)
    return code


def _report(failures: list, cases: int):
    assert not failures, (f"{len(failures)} of {cases} cases ended INTERNAL, UNKNOWN or past "
                          f"their deadline:\n" + "\n".join(failures[:8]))


@pytest.mark.parametrize("path,method", METHODS, ids=[p for p, _ in METHODS])
def test_fuzz_method(fuzz_server, path, method):
    world = fuzz_server.fuzz_world
    # One generator per method, seeded from the run's seed and the path, so a method's cases
    # do not depend on which other methods ran.
    rng = random.Random(f"{SEED}:{path}")
    cls = message_factory.GetMessageClass(method.input_type)
    call = _callable(world.channel, path, method)
    codes: dict[str, int] = {}
    failures: list[str] = []
    for k in range(CASES_PER_METHOD):
        msg = fill(cls(), rng, world)
        if path.endswith(("/DestroyStore", "/ReplaceStore", "/RegisterModel")) and msg.store_id == world.store:
            msg.store_id = world.victim  # keep the store (and model) the other cases point at
        if path.endswith("/CloseContext") and msg.context_id == world.context:
            msg.context_id = world.sacrificial_context()
        data = msg.SerializeToString()
        how = "valid"
        if rng.random() < 0.75:
            data, how = mutate(data, rng, method.input_type)
        code = _check(fuzz_server, f"{path} case {k} [{how}]", data,
                      lambda: _invoke(call, method, data, CASE_DEADLINE), failures)
        codes[code.name] = codes.get(code.name, 0) + 1
    print(f"{path}: {codes}")
    _report(failures, CASES_PER_METHOD)


# -- predicates ----------------------------------------------------------------------------

KEYS = {"Person": ["name", "age", "email", "notes.@count", "SELF"],
        "Note": ["title", "createdAt", "owner.name", "owner.age", "owner"]}
TO_MANY = {"Person": ["notes.title"], "Note": []}
LITERALS = ['"Ann"', "'b'", "1", "-2", "3.5", "nil", "TRUE", "NO", "$n", "$list", '"a\\"b"',
            'CAST(0, "NSDate")', "{1, 2, 3}", '{"a", "b"}', "{}", "$missing"]
OPS = ["==", "!=", "<", "<=", ">", ">=", "=", "<>", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE",
       "MATCHES", "IN", "BETWEEN"]
MODIFIERS = ["", "", "[c]", "[d]", "[cd]", "[x]"]
REGEXES = ['".*"', '"a+"', '"(a|b)*c"', '"[A-Z][a-z]+"', '"(a+)+$"', '"\\\\d{1,3}"', '"(("']


def gen_predicate(rng: random.Random, entity: str, depth: int = 0) -> str:
    r = rng.random()
    if depth < 4 and r < 0.15:
        return f"NOT {gen_predicate(rng, entity, depth + 1)}"
    if depth < 4 and r < 0.35:
        joiner = rng.choice([" AND ", " OR ", " && ", " || "])
        return "(" + joiner.join(gen_predicate(rng, entity, depth + 1) for _ in range(rng.randrange(2, 4))) + ")"
    if r < 0.4:
        return rng.choice(["TRUEPREDICATE", "FALSEPREDICATE"])
    if TO_MANY[entity] and r < 0.5:
        q = rng.choice(["ANY", "ALL", "NONE", "SOME"])
        return f'{q} {rng.choice(TO_MANY[entity])} {rng.choice(OPS[:6])} {rng.choice(LITERALS)}'
    key = rng.choice(KEYS[entity])
    op = rng.choice(OPS)
    if op == "MATCHES":
        rhs = rng.choice(REGEXES)
    elif op == "BETWEEN":
        rhs = rng.choice(["{1, 5}", "{$n, 3}", "{1}", '{"a", "z"}'])
    else:
        rhs = rng.choice(LITERALS)
    if rng.random() < 0.2:
        key, rhs = rhs, key
    return f"{key} {op}{rng.choice(MODIFIERS)} {rhs}"


PRED_JUNK = ["(", ")", "{", "}", '"', "'", "\\", "$", "@", ",", " AND", " OR ", "NOT ", "!", "[c]",
             "\x00", "\u00e9", "\U0001F600", "==", ".", "..", "ANY ", "@count", "%", "\n", "%@"]


def mutate_predicate(p: str, rng: random.Random) -> str:
    for _ in range(rng.randrange(1, 4)):
        m = rng.randrange(5)
        i = rng.randrange(len(p) + 1)
        if m == 0 and p:
            j = min(len(p), i + rng.randrange(1, 6))
            p = p[:i] + p[j:]
        elif m == 1:
            p = p[:i] + rng.choice(PRED_JUNK) + p[i:]
        elif m == 2 and p:
            j = min(len(p), i + rng.randrange(1, 12))
            p = p[:i] + p[i:j] * rng.randrange(2, 5) + p[j:]
        elif m == 3:
            p = p[:i]
        else:
            p = p[:i] + rng.choice(["(" * 70, "NOT " * 70, "a." * 50, "1" * 40, "x" * 5000]) + p[i:]
    return p


def test_fuzz_predicates(fuzz_server):
    world = fuzz_server.fuzz_world
    stores = Client(world.channel).stores
    rng = random.Random(f"{SEED}:predicates")
    codes: dict[str, int] = {}
    failures: list[str] = []
    for k in range(PREDICATE_CASES):
        entity = rng.choice(ENTITIES)
        p = gen_predicate(rng, entity)
        if rng.random() < 0.6:
            p = mutate_predicate(p, rng)
        variables = {}
        if rng.random() < 0.7:
            variables["n"] = ob.Argument(value=rng.choice([v("Ann"), v(3), v(None), v(2.5)]))
            variables["list"] = ob.Argument(list=ob.ValueList(values=[v(1), v("x")]))
        spec = ob.FetchSpec(entity=entity, predicate=p, variables=variables,
                            result_type=rng.choice([ob.RESULT_TYPE_OBJECTS, ob.RESULT_TYPE_COUNT,
                                                    ob.RESULT_TYPE_OBJECT_IDS]))
        if rng.random() < 0.3:
            spec.sort_descriptors.add(key_path=rng.choice(KEYS[entity]), descending=rng.random() < 0.5,
                                      case_insensitive=rng.random() < 0.5)
        req = st.FetchRequest(store_id=world.store, fetch=spec)
        code = _check(fuzz_server, f"predicate case {k} {p[:200]!r}", req.SerializeToString(),
                      lambda: stores.Fetch(req, timeout=CASE_DEADLINE), failures)
        codes[code.name] = codes.get(code.name, 0) + 1
    print(f"predicates: {codes}")
    _report(failures, PREDICATE_CASES)
    # The grammar produces valid predicates too: the fuzzer reached the engine, not only the parser.
    assert codes.get("OK", 0) > 0, codes


def test_fuzz_server_recovers(fuzz_server):
    """After all of it: the server answers Ping on a new connection, holds no leftover
    streams, and its memory is back near where it started."""
    srv = fuzz_server
    conftest.ping_ok(srv.address)
    ch = make_channel(srv.address)
    try:
        ubiq_harness.wait_until(lambda: conftest.get_stats(ch).open_streams <= 1, 15,
                                message="every fuzz call released")
    finally:
        ch.close()
    rss = srv.rss_bytes()
    growth = rss - srv.fuzz_rss_start
    print(f"fuzz: rss {srv.fuzz_rss_start / MiB:.1f} -> {rss / MiB:.1f} MiB (seed {SEED})")
    assert growth < RSS_SLACK, (
        f"RSS after the fuzz run {rss / MiB:.1f} MiB, {growth / MiB:.1f} MiB above the start "
        f"({srv.fuzz_rss_start / MiB:.1f} MiB; seed {SEED})")
