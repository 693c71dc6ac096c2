"""kill -9 during ArchiveAccount, RestoreAccount and DeleteAccount, then a restart: every object
is exactly once where it should be (live or archived, never both, never lost), nothing of a
deleted account is readable or on disk, and the server starts and serves. Every WILL_CHANGE the
transition wrote is closed by its DID_CHANGE — plain if the transition is recorded (it resumes
forwards), cancelled if the kill came before (docs/lifecycle.md "Every WILL_CHANGE is closed").

Where the kill lands: mostly exactly between two steps of the transition, through the test-only
`UBIQUITYD_TEST_CRASH_AT=<step>[:<n>]` (ubiquityd kills itself with SIGKILL the n-th time it
reaches the step; AccountTransitions.swift and AccountsService+Lifecycle.swift name them), cycling through every step in a shuffled
order; and a few runs per transition killed from outside after a random delay, which may land
before the transition began, inside a step, or after it finished. The seed is printed (and
`UBIQ_CRASH_SEED` sets it) so a failing run can be replayed.
"""

from __future__ import annotations

import os
import random
import signal
import threading

import grpc
import pytest

from test_account_lifecycle import Lifecycle, announced, files_of, populated, replay, snapshot, with_token
from test_accounts import CHANNEL_OPTIONS, Tenant, bearer, failure
from test_lifecycle_transitions import DID, WILL
from ubiquity.v1 import accounts_pb2 as ac, changes_pb2 as ch, keyvalue_pb2_grpc as kvg, stores_pb2 as st

SEED = int(os.environ.get("UBIQ_CRASH_SEED", "190426"))
STORES = 2
HOOK_RUNS = 30
TIMER_RUNS = 2
REMOVED, ADDED = ch.StoreEvent.TRANSITION_ACCOUNT_REMOVED, ch.StoreEvent.TRANSITION_ACCOUNT_ADDED
CONTENT_REMOVED = ch.StoreEvent.TRANSITION_CONTENT_REMOVED
STEPS = {
    # archive.will: after WILL_CHANGE and the chance to save, before the account is recorded
    # archiving; archive.did: after DID_CHANGE, before the files move
    "archive": ["archive.will", "archive.begun", "archive.did"] + [f"archive.store:{i}" for i in range(1, STORES + 1)],
    "restore": ["restore.begun"] + [f"restore.store:{i}" for i in range(1, STORES + 1)]
               + [f"restore.announced:{i}" for i in range(1, STORES + 1)],
    "delete": ["delete.will", "delete.begun"] + [f"delete.store:{i}" for i in range(1, STORES + 1)]
              + ["delete.files", "delete.catalog", "delete.keyvalue"],
}


class Run:
    """One server restarted again and again on the same data directory."""

    def __init__(self, srv):
        self.srv = srv
        self.channel: grpc.Channel | None = None

    def start(self, crash_at: str | None = None) -> grpc.Channel:
        if self.channel is not None:
            self.channel.close()
        self.srv.kill()  # the previous instance, if it still runs (kill -9 as well: nothing is pending)
        if crash_at:
            os.environ["UBIQUITYD_TEST_CRASH_AT"] = crash_at
        try:
            self.srv.start()
        finally:
            os.environ.pop("UBIQUITYD_TEST_CRASH_AT", None)
        self.channel = grpc.insecure_channel(self.srv.address, options=CHANNEL_OPTIONS)
        grpc.channel_ready_future(self.channel).result(timeout=15)
        return self.channel

    def killed(self, call) -> None:
        """Runs `call`, which the server's crash point ends with SIGKILL; waits for the exit."""
        with pytest.raises(grpc.RpcError) as e:
            call()
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
        assert self.srv.wait(timeout=30) == -signal.SIGKILL
        self.srv.kill()  # closes the harness's files of the dead process

    def killed_after(self, delay: float, call) -> None:
        """Runs `call` and SIGKILLs the server `delay` seconds after sending it (it may finish first)."""
        done = threading.Event()

        def go():
            try:
                call()
            except grpc.RpcError:
                pass
            done.set()

        t = threading.Thread(target=go)
        t.start()
        done.wait(delay)
        self.srv.send_signal(signal.SIGKILL)
        t.join()
        self.srv.wait(timeout=30)
        self.srv.kill()


def rebound(t: Tenant, channel, srv) -> Tenant:
    """The tenant's account through a new channel, signed in again (a restart ends nothing on
    disk, but the test's stubs are of the old connection)."""
    fresh = Tenant(srv, channel, "", account_id=t.account_id)
    fresh.kv = kvg.KeyValueStub(channel)
    return fresh


def paired(events: list[tuple[int, int, bool]]) -> list[tuple[int, bool]]:
    """Every WILL_CHANGE closed by the DID_CHANGE of its transition right after it (nothing else
    happens on these stores meanwhile); returns each transition with whether it was cancelled."""
    assert len(events) % 2 == 0, events
    out = []
    for (p1, t1, c1), (p2, t2, c2) in zip(events[::2], events[1::2]):
        assert (p1, p2, t1, c1) == (WILL, DID, t2, False), events
        out.append((t1, c2))
    return out


def check_whole(srv, channel, t: Tenant, before: dict, ops: Lifecycle) -> list[list[tuple[int, bool]]]:
    """The account is active or archived, its stores all in one place, and (restored if it was
    archived) its every object and key-value entry as before. The stores' feeds since then hold
    store events only — each WILL_CHANGE closed by its DID_CHANGE, cancelled or not — and the
    baseline is the one before at the last event's token. Returns each store's transitions."""
    sids = sorted(before["stores"])
    state = ops.get(t.account_id).state
    files = files_of(srv, t.account_id)
    names = sorted(f"{s}.sqlite" for s in sids)
    if state == ac.ACCOUNT_STATE_ARCHIVED:
        assert files == {"stores": [], "archive": names}, files
        ops.restore(t.account_id)
    else:
        assert state == ac.ACCOUNT_STATE_ACTIVE, state
        assert files == {"stores": names, "archive": []}, files
    assert files_of(srv, t.account_id) == {"stores": names, "archive": []}
    fresh = rebound(t, channel, srv)
    seen, stores = [], {}
    for sid, chunks in before["stores"].items():
        got = replay(channel, sid, fresh.token, st.BaselineChunk.FromString(chunks[0]).token)
        seen.append(paired(announced(got)))
        stores[sid] = [with_token(c, got[-1].resume_token) for c in chunks] if got else chunks
    assert snapshot(fresh, sids) == {"stores": stores, "kv": before["kv"]}
    return seen


def check_gone(srv, t: Tenant, ops: Lifecycle) -> None:
    assert failure(ops.get, t.account_id).code() == grpc.StatusCode.NOT_FOUND
    assert not (srv.data_dir / "accounts" / t.account_id).exists()
    e = failure(t.accounts.SignIn, ac.SignInRequest(api_key=t.api_key, device_id="after"), timeout=30)
    assert e.code() == grpc.StatusCode.UNAUTHENTICATED
    needle = t.account_id.encode()
    for p in srv.data_dir.rglob("*"):
        if p.is_file():
            assert needle not in p.read_bytes(), f"the deleted account's ID is still in {p}"


def plan(transition: str, rng: random.Random) -> list[tuple[str | None, float]]:
    """(crash step, 0) for the hook runs — every step, then random ones, shuffled — and (None,
    delay) for the timer runs."""
    steps = STEPS[transition]
    hooks = [steps[i % len(steps)] if i < len(steps) else rng.choice(steps) for i in range(HOOK_RUNS)]
    rng.shuffle(hooks)
    return [(s, 0.0) for s in hooks] + [(None, rng.uniform(0.0, 0.03)) for _ in range(TIMER_RUNS)]


# 32 runs with two server starts each: 50–75 s per transition on a shared 2-core machine, so
# above the suite's default 180 s bound only with room to spare
@pytest.mark.timeout(600)
@pytest.mark.parametrize("transition", ["archive", "restore", "delete"])
def test_kill_9_during_an_account_transition(start_server, transition):
    rng = random.Random(f"{SEED}-{transition}")
    print(f"UBIQ_CRASH_SEED={SEED} ({transition})")
    srv = start_server(name=f"crash-{transition}")
    run = Run(srv)
    c = run.start()
    control, control_before = populated(srv, c, "B", stores=1, keys=1)

    for i, (step, delay) in enumerate(plan(transition, rng)):
        c = run.start(step)
        ops = Lifecycle(srv, c)
        a, before = populated(srv, c, f"A{i}", stores=STORES, keys=2)
        if transition == "restore":
            ops.archive(a.account_id)
        call = {"archive": ops.archive, "restore": ops.restore, "delete": ops.delete}[transition]
        if step is not None:
            run.killed(lambda: call(a.account_id))
        else:
            run.killed_after(delay, lambda: call(a.account_id))

        c = run.start()
        ops = Lifecycle(srv, c)
        context = f"run {i}: {step or f'kill after {delay * 1000:.1f} ms'} (UBIQ_CRASH_SEED={SEED})"
        a.accounts = Lifecycle(srv, c).stub
        try:
            if transition == "delete":
                exists = ops.stub.ListAccounts(ac.ListAccountsRequest(), metadata=ops.ops, timeout=30).accounts
                if step in (None, "delete.will") and any(x.account_id == a.account_id for x in exists):
                    # killed before the tombstone was written: the account whole, the start
                    # closed its WILL_CHANGE as cancelled
                    seen = check_whole(srv, c, a, before, ops)
                    # a timer's kill may also land before the WILL_CHANGE: nothing announced
                    allowed = [[(CONTENT_REMOVED, True)]] + ([[]] if step is None else [])
                    assert all(x in allowed for x in seen), seen
                else:
                    assert step != "delete.will"
                    check_gone(srv, a, ops)
            else:
                if step is not None:
                    before_recorded = step == "archive.will"
                    want = ac.ACCOUNT_STATE_ARCHIVED if transition == "archive" and not before_recorded else ac.ACCOUNT_STATE_ACTIVE
                    assert ops.get(a.account_id).state == want  # resumed forwards before serving
                seen = check_whole(srv, c, a, before, ops)
                if step == "archive.will":
                    # not recorded yet: it did not happen, and the next archive works
                    assert all(x == [(REMOVED, True)] for x in seen), seen
                    ops.archive(a.account_id)
                    seen = check_whole(srv, c, a, before, ops)
                    assert all(x == [(REMOVED, True), (REMOVED, False), (ADDED, False)] for x in seen), seen
                elif step is not None:
                    assert all(x == [(REMOVED, False), (ADDED, False)] for x in seen), seen
        except AssertionError as e:
            raise AssertionError(f"{context}: {e}") from e

    # the account no run touched is as it was, and the server serves
    control = rebound(control, c, srv)
    assert snapshot(control, sorted(control_before["stores"])) == control_before
    run.channel.close()
