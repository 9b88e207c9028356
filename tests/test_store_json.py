"""The store's JSON columns are written by `api.store.db.json_text` (orjson, the standard
library for what orjson refuses): whatever strict JSON goes in comes back as the
standard library would have given it back."""
from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from sqlmodel import Session

from api.store import repository as repo
from api.store.db import create_schema, json_text, make_engine
from tests.test_store import make_incident

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(max_size=8)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=6) | st.integers(-5, 5), inner, max_size=4), max_leaves=20)


@given(values)
def test_json_text_reads_back_as_the_standard_librarys_text(value):
    assert json.loads(json_text(value)) == json.loads(json.dumps(value))


def test_an_incident_with_an_integer_past_64_bits_is_stored_and_read_back():
    engine = make_engine("sqlite://")
    create_schema(engine)
    inc = make_incident(1)
    inc["symptoms"][0]["metrics"]["huge"] = 2**70
    inc["root_causes"][0]["evidence"][0]["metrics"]["huge"] = -(2**70)
    with Session(engine) as session:
        repo.upsert_incidents(session, incidents=[inc])
        got = repo.get_incident(session, incident_id=inc["id"])
    assert got["symptoms"][0]["metrics"]["huge"] == 2**70
    assert got["root_causes"][0]["evidence"][0]["metrics"]["huge"] == -(2**70)
    engine.dispose()
