"""Small helpers over the generated stubs for the data-service tests (Models, Stores, Contexts).

Everything goes through stock grpcio and the stubs generated from Protos/ at test time; error
details are decoded with grpcio-status + googleapis-common-protos, as any Python client would.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from ubiquity.v1 import (
    changes_pb2_grpc as chg,
    contexts_pb2 as cx,
    contexts_pb2_grpc as cxg,
    keyvalue_pb2_grpc as kvg,
    models_pb2 as md,
    models_pb2_grpc as mdg,
    objects_pb2 as ob,
    stores_pb2 as st,
    stores_pb2_grpc as stg,
)

__all__ = ["cx", "md", "ob", "st", "Client", "v", "unpack", "error_of", "person_model"]


def v(x=None, *, kind: str | None = None) -> ob.Value:
    """A typed Value from a Python value (kind overrides the guess, e.g. kind='int32')."""
    if kind == "null" or (x is None and kind is None):
        return ob.Value(null_value=0)
    if kind:
        if kind == "date":
            val = ob.Value()
            val.date_value.FromDatetime(x)
            return val
        return ob.Value(**{f"{kind}_value": x})
    if isinstance(x, bool):
        return ob.Value(bool_value=x)
    if isinstance(x, int):
        return ob.Value(int64_value=x)
    if isinstance(x, float):
        return ob.Value(double_value=x)
    if isinstance(x, str):
        return ob.Value(string_value=x)
    if isinstance(x, bytes):
        return ob.Value(binary_value=x)
    if isinstance(x, uuid.UUID):
        return ob.Value(uuid_value=str(x))
    if isinstance(x, datetime):
        val = ob.Value()
        val.date_value.FromDatetime(x.astimezone(timezone.utc))
        return val
    raise TypeError(f"no Value for {x!r}")


def unpack(val: ob.Value):
    """The Python value of a Value."""
    kind = val.WhichOneof("kind")
    if kind in (None, "null_value"):
        return None
    if kind == "date_value":
        return val.date_value.ToDatetime(tzinfo=timezone.utc)
    return getattr(val, kind)


def values(obj) -> dict:
    return {k: unpack(x) for k, x in obj.values.items()}


def error_of(err: grpc.RpcError):
    """(code, message, ErrorInfo.reason, [BadRequest violations], ConflictDetails or None)."""
    status = rpc_status.from_call(err)
    reason, violations, conflicts = None, [], None
    if status is not None:
        for d in status.details:
            if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                d.Unpack(info)
                reason = info.reason
            elif d.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                br = error_details_pb2.BadRequest()
                d.Unpack(br)
                violations = list(br.field_violations)
            elif d.Is(ob.ConflictDetails.DESCRIPTOR):
                conflicts = ob.ConflictDetails()
                d.Unpack(conflicts)
    return err.code(), err.details(), reason, violations, conflicts


def person_model(version: str = "v1", extra_person_attrs=()) -> md.Model:
    """Person (name required, age indexed, email unique) ↔ Note (to-many, cascade)."""
    A, T = md.Attribute, md
    person = md.Entity(
        name="Person",
        attributes=[
            A(name="name", type=T.ATTRIBUTE_TYPE_STRING, required=True),
            A(name="age", type=T.ATTRIBUTE_TYPE_INT32),
            A(name="email", type=T.ATTRIBUTE_TYPE_STRING),
            A(name="score", type=T.ATTRIBUTE_TYPE_DOUBLE),
            *extra_person_attrs,
        ],
        relationships=[md.Relationship(name="notes", destination="Note", to_many=True, inverse="owner",
                                       delete_rule=md.DELETE_RULE_CASCADE)],
        indexes=[md.PropertyList(properties=["age"])],
        uniqueness_constraints=[md.PropertyList(properties=["email"])],
    )
    note = md.Entity(
        name="Note",
        attributes=[A(name="title", type=T.ATTRIBUTE_TYPE_STRING)],
        relationships=[md.Relationship(name="owner", destination="Person", inverse="notes",
                                       delete_rule=md.DELETE_RULE_NULLIFY)],
    )
    return md.Model(version_identifier=version, entities=[person, note])


class Client:
    """One client: its own channel (own TCP connection) and stubs."""

    def __init__(self, channel: grpc.Channel, metadata=()):
        self.channel = channel
        self.stores = stg.StoresStub(channel)
        self.models = mdg.ModelsStub(channel)
        self.contexts = cxg.ContextsStub(channel)
        self.kv = kvg.KeyValueStub(channel)
        self.changes = chg.ChangesStub(channel)
        self.md = list(metadata)

    def open(self, name: str | None = None, model: md.Model | None = None) -> str:
        name = name or f"store-{uuid.uuid4()}"
        sid = self.stores.OpenStore(st.OpenStoreRequest(name=name), timeout=30).store.store_id
        if model is not None:
            self.models.RegisterModel(md.RegisterModelRequest(store_id=sid, model=model), timeout=60)
        return sid

    def save(self, sid, inserts=(), updates=(), deletes=(), policy=ob.MERGE_POLICY_ERROR, **kw) -> ob.SaveResult:
        return self.stores.Save(st.SaveRequest(store_id=sid, inserts=inserts, updates=updates, deletes=deletes,
                                               merge_policy=policy, **kw), metadata=self.md, timeout=30)

    def insert_people(self, sid, people) -> list[str]:
        inserts = [ob.Insert(temporary_id=f"p{i}", entity="Person", values={k: v(x) if not isinstance(x, ob.Value) else x
                                                                              for k, x in p.items()})
                   for i, p in enumerate(people)]
        r = self.save(sid, inserts=inserts)
        return [r.permanent_ids[f"p{i}"] for i in range(len(people))]

    def get(self, sid, ids, token: bytes = b"") -> st.GetObjectsResponse:
        return self.stores.GetObjects(st.GetObjectsRequest(store_id=sid, object_ids=ids,
                                                           at=ob.ReadGeneration(token=token)), timeout=30)

    def fetch(self, sid, entity, predicate="", token: bytes = b"", **spec) -> ob.FetchResults:
        return self.stores.Fetch(st.FetchRequest(store_id=sid, fetch=ob.FetchSpec(entity=entity, predicate=predicate, **spec),
                                                 at=ob.ReadGeneration(token=token)), timeout=30)

    def current(self, sid) -> st.CurrentGenerationResponse:
        return self.stores.CurrentGeneration(st.CurrentGenerationRequest(store_id=sid), timeout=30)
