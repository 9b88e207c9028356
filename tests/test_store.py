"""The incident store against real databases: round trips, idempotence, filters, paging.

Every store test runs on a SQLite file and on PostgreSQL (FABRIC_RCA_TEST_PG, see
tests/conftest.py), each time on fresh, empty tables.
"""
from __future__ import annotations

import importlib.util
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text
from sqlmodel import Session, func, select

from api.store import repository as repo
from api.store.db import (
    DEFAULT_DB_URL,
    StoreError,
    create_schema,
    make_engine,
    resolve_db_url,
)
from api.store.tables import AffectedJobRow, IncidentRow, RootCauseRow, SymptomRow

T0 = datetime(2025, 11, 29, 7, 0, tzinfo=timezone.utc)


def at(minutes: float) -> str:
    """The contract's time format for T0 + minutes."""
    moment = T0 + timedelta(minutes=minutes)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_incident(
    n: int,
    *,
    opened: float = 0.0,
    resolved: float | None = None,
    cause: str = "pfc_storm",
    entity: str = "gpu017:eth0",
    also: tuple[tuple[str, str], ...] = (),
    jobs: tuple[tuple[str, str], ...] = (("4242", "acme"),),
    symptom_entity: str | None = None,
) -> dict:
    """An incident in the contract section 6 shape; `also` adds lower-ranked causes."""
    symptom_entity = symptom_entity or entity
    kind = "link" if "--" in entity else "interface"
    causes = [(cause, entity), *also]
    return {
        "id": f"inc-{n:012x}",
        "status": "open" if resolved is None else "resolved",
        "severity": ("critical", "major", "minor")[n % 3],
        "opened_at": at(opened),
        "updated_at": at(opened + 1),
        "resolved_at": None if resolved is None else at(resolved),
        "detected_at": at(opened + 0.05),
        "title": f"{cause} on {entity} ({len(jobs)} jobs)",
        "maintenance": False,  # (stored and served since maintenance windows: contract section 6 plus)
        "maintenance_reason": None,
        "root_causes": [
            {
                "rank": rank,
                "cause": c,
                "entity": {"kind": "link" if "--" in e else "interface", "id": e},
                "score": round(0.9 - 0.2 * rank, 4),
                "evidence": [{"symptom": "pfc_pause_tx", "entity": e, "at": at(opened),
                              "metrics": {"tx_pause_rate": 12000.0 + n}}],
            }
            for rank, (c, e) in enumerate(causes, start=1)
        ],
        "affected_jobs": [
            {"job_id": job, "tenant": tenant, "impact": f"traffic crosses {entity}", "hosts": [f"gpu-{job}"]}
            for job, tenant in jobs
        ],
        "symptoms": [
            {
                "key": f"rule:{symptom_entity}:{n}:{i}",
                "kind": "pfc_pause_tx",
                "family": "pfc",
                "entity": {"kind": kind, "id": symptom_entity},
                "device": symptom_entity.split(":", 1)[0],
                "start": at(opened + i),
                "last": at(opened + i + 0.5),
                "end": None if resolved is None else at(resolved),
                "severity": 0.8,
                "metrics": {"tx_pause_rate": 12000.0, "rx_pause_rate": 3.5},
                "rule": "pfc_tx_pause",
                "samples": {"tx_pause_rate": [[1764400000.0 + i, 11000.0], [1764400001.5 + i, 12000.0]]},
            }
            for i in range(2)
        ],
    }


@pytest.fixture
def engine(db_url: str):
    engine = make_engine(db_url)
    create_schema(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def session(engine):
    with Session(engine) as session:
        yield session


def ids(incidents: list[dict]) -> list[str]:
    return [incident["id"] for incident in incidents]


def row_counts(session: Session) -> tuple[int, ...]:
    tables = (IncidentRow, RootCauseRow, AffectedJobRow, SymptomRow)
    return tuple(session.exec(select(func.count()).select_from(t)).one() for t in tables)


# ---------------------------------------------------------------- round trip, upsert


def test_round_trip_gives_back_the_same_dict(session):
    incident = make_incident(
        1, resolved=30, also=(("congestion", "leaf02:swp1"),), jobs=(("4242", "acme"), ("77", "beta"))
    )
    assert repo.upsert_incidents(session, incidents=[incident]) == 1
    assert repo.get_incident(session, incident_id=incident["id"]) == incident
    assert list(repo.get_incident(session, incident_id=incident["id"])) == list(incident)


def test_times_come_back_utc_with_milliseconds_whatever_offset_went_in(session):
    incident = make_incident(2)
    incident["opened_at"] = "2025-11-29T08:00:00.123+01:00"
    repo.upsert_incidents(session, incidents=[incident])
    assert repo.get_incident(session, incident_id=incident["id"])["opened_at"] == "2025-11-29T07:00:00.123Z"
    row = session.get(IncidentRow, incident["id"])
    assert row.opened_at == datetime(2025, 11, 29, 7, 0, 0, 123000, tzinfo=timezone.utc)
    assert row.opened_at.utcoffset() == timedelta(0)


def test_root_causes_come_back_ranked_best_first(session):
    incident = make_incident(3, also=(("congestion", "leaf02:swp1"),))
    incident["root_causes"].reverse()
    repo.upsert_incidents(session, incidents=[incident])
    stored = repo.get_incident(session, incident_id=incident["id"])
    assert [rc["rank"] for rc in stored["root_causes"]] == [1, 2]
    assert session.get(IncidentRow, incident["id"]).top_cause == "pfc_storm"


def test_upserting_twice_leaves_the_same_content_and_no_duplicates(session):
    incidents = [make_incident(n, opened=n) for n in range(5)]
    repo.upsert_incidents(session, incidents=incidents)
    first, counts = repo.list_incidents(session), row_counts(session)
    assert repo.upsert_incidents(session, incidents=incidents) == 5
    assert repo.list_incidents(session) == first
    assert row_counts(session) == counts == (5, 5, 5, 10)


def test_upsert_replaces_the_incident_and_its_children(session):
    repo.upsert_incidents(session, incidents=[make_incident(1, jobs=(("1", "a"), ("2", "b")))])
    newer = make_incident(1, resolved=9, cause="congestion", entity="leaf01:swp3", jobs=(("3", "c"),))
    newer["symptoms"] = newer["symptoms"][:1]
    repo.upsert_incidents(session, incidents=[newer])
    assert repo.get_incident(session, incident_id=newer["id"]) == newer
    assert row_counts(session) == (1, 1, 1, 1)
    assert repo.list_incidents(session, job="1") == []


def test_the_last_copy_of_an_id_in_one_batch_wins(session):
    old, new = make_incident(1), make_incident(1, resolved=5)
    assert repo.upsert_incidents(session, incidents=[old, new]) == 1
    assert repo.get_incident(session, incident_id=old["id"]) == new


def test_a_malformed_incident_names_itself_and_writes_nothing(session):
    bad = make_incident(2)
    del bad["title"]
    with pytest.raises(StoreError, match=r"inc-000000000002.*'title'"):
        repo.upsert_incidents(session, incidents=[make_incident(1), bad])
    bad = make_incident(3)
    bad["opened_at"] = "yesterday"
    with pytest.raises(StoreError, match=r"inc-000000000003.*opened_at 'yesterday'"):
        repo.upsert_incidents(session, incidents=[bad])
    assert row_counts(session) == (0, 0, 0, 0)


def make_broken(n: int, where: str, value: float) -> dict:
    incident = make_incident(n)
    if where == "metrics":
        incident["symptoms"][1]["metrics"]["tx_pause_rate"] = value
    elif where == "evidence":
        incident["root_causes"][0]["evidence"][0]["metrics"]["tx_pause_rate"] = value
    elif where == "score":
        incident["root_causes"][0]["score"] = value
    else:
        incident["symptoms"][0]["severity"] = value
    return incident


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("metrics", float("nan"), "symptom metrics: not strict JSON"),
        ("evidence", float("inf"), "root cause evidence: not strict JSON"),
        ("score", float("nan"), "root cause score nan is not a finite number"),
        ("severity", float("-inf"), "symptom severity -inf is not a finite number"),
    ],
)
def test_non_finite_numbers_are_refused_the_same_on_every_backend(session, where, value, message):
    """Not JSON, so not servable; PostgreSQL's json type refuses them, SQLite would not."""
    with pytest.raises(StoreError, match=rf"inc-000000000002.*{message}"):
        repo.upsert_incidents(session, incidents=[make_incident(1), make_broken(2, where, value)])
    assert row_counts(session) == (0, 0, 0, 0)
    with pytest.raises(StoreError, match="topology document: not strict JSON"):
        repo.save_topology(session, document={"links": [{"speed": float("nan")}]})
    assert repo.load_topology(session) is None


def test_a_batch_larger_than_one_id_chunk(session):
    incidents = [make_incident(n, opened=n / 60) for n in range(repo._CHUNK + 1)]
    assert repo.upsert_incidents(session, incidents=incidents) == len(incidents)
    assert repo.upsert_incidents(session, incidents=incidents) == len(incidents)
    n = len(incidents)
    assert row_counts(session) == (n, n, n, 2 * n)
    assert repo.list_incidents(session, limit=None) == incidents[::-1]


def test_empty_batch_and_unknown_id(session):
    assert repo.upsert_incidents(session, incidents=[]) == 0
    assert repo.get_incident(session, incident_id="inc-nope") is None
    assert repo.list_incidents(session) == []
    assert repo.count_incidents(session) == 0


# ---------------------------------------------------------------- filters and paging


@pytest.fixture
def stored(session) -> dict[str, dict]:
    incidents = [
        make_incident(1, opened=0, resolved=10, cause="link_flap", entity="gpu001:eth0--leaf01:swp1",
                      jobs=(("100", "acme"),), symptom_entity="leaf01:swp1"),
        make_incident(2, opened=20, cause="pfc_storm", entity="gpu017:eth0",
                      also=(("congestion", "leaf02:swp1"),), jobs=(("200", "beta"), ("100", "acme"))),
        make_incident(3, opened=40, resolved=50, cause="storage_slow", entity="stor01",
                      jobs=(("300", "beta"),), symptom_entity="stor01:nvme0"),
        make_incident(4, opened=60, cause="congestion", entity="leaf03:swp9", jobs=()),
    ]
    repo.upsert_incidents(session, incidents=incidents)
    return {incident["id"]: incident for incident in incidents}


def inc(n: int) -> str:
    return f"inc-{n:012x}"


def test_list_is_newest_first_and_whole(session, stored):
    listed = repo.list_incidents(session)
    assert ids(listed) == [inc(4), inc(3), inc(2), inc(1)]
    assert listed == [stored[i] for i in ids(listed)]


def test_same_opened_at_orders_by_id_descending(session):
    repo.upsert_incidents(session, incidents=[make_incident(n, opened=5) for n in (7, 9, 8)])
    assert ids(repo.list_incidents(session)) == [inc(9), inc(8), inc(7)]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"status": "open"}, [4, 2]),
        ({"status": "resolved"}, [3, 1]),
        ({"cause": "congestion"}, [4, 2]),  # rank 2 of incident 2 counts too
        ({"cause": "microburst"}, []),
        ({"entity": "gpu001:eth0--leaf01:swp1"}, [1]),  # a root cause entity
        ({"entity": "leaf01:swp1"}, [1]),  # a symptom entity
        ({"entity": "stor01"}, [3]),  # a symptom device
        ({"entity": "leaf02:swp1"}, [2]),  # a lower-ranked root cause entity
        ({"job": "100"}, [2, 1]),
        ({"tenant": "beta"}, [3, 2]),
        ({"tenant": "beta", "status": "open"}, [2]),
        ({"job": "100", "cause": "link_flap"}, [1]),
        ({"job": "999"}, []),
    ],
)
def test_filters(session, stored, filters, expected):
    assert ids(repo.list_incidents(session, **filters)) == [inc(n) for n in expected]
    assert repo.count_incidents(session, **filters) == len(expected)


@pytest.mark.parametrize(
    ("since", "until", "expected"),
    [
        (None, 30, [2, 1]),  # opened at or before until
        (15, None, [4, 3, 2]),  # incident 1 was resolved at 10, before since
        (10, 10, [1]),  # resolved exactly at since still counts; 2 opens later
        (45, 55, [3, 2]),  # 3 is active in the window, 2 is still open
        (51, 55, [2]),
        (None, -1, []),
    ],
)
def test_time_window_keeps_incidents_active_in_it(session, stored, since, until, expected):
    window = {
        "since": None if since is None else T0 + timedelta(minutes=since),
        "until": None if until is None else T0 + timedelta(minutes=until),
    }
    assert ids(repo.list_incidents(session, **window)) == [inc(n) for n in expected]
    assert repo.count_incidents(session, **window) == len(expected)


def test_time_window_accepts_other_offsets_and_naive_utc(session, stored):
    paris = timezone(timedelta(hours=1))
    until = (T0 + timedelta(minutes=30)).astimezone(paris)
    assert ids(repo.list_incidents(session, until=until)) == [inc(2), inc(1)]
    naive = (T0 + timedelta(minutes=30)).replace(tzinfo=None)
    assert ids(repo.list_incidents(session, until=naive)) == [inc(2), inc(1)]


def test_paging(session, stored):
    pages = [repo.list_incidents(session, limit=3, offset=offset) for offset in (0, 3, 6)]
    assert [ids(page) for page in pages] == [[inc(4), inc(3), inc(2)], [inc(1)], []]
    assert repo.list_incidents(session, limit=None) == repo.list_incidents(session)
    with pytest.raises(ValueError, match="offset"):
        repo.list_incidents(session, offset=-1)


def test_reads_refuse_what_no_database_can_answer(session, stored):
    assert repo.list_incidents(session, offset=repo.MAX_OFFSET, limit=repo.MAX_OFFSET) == []
    with pytest.raises(ValueError, match=r"in \[0, 2147483647\].*offset=9223372036854775808"):
        repo.list_incidents(session, offset=2**63)
    with pytest.raises(ValueError, match="limit"):
        repo.list_incidents(session, limit=2**31)
    for filters in ({"entity": "gpu\x00"}, {"job": "\x00"}, {"tenant": "a\x00b"}):
        with pytest.raises(ValueError, match=f"{next(iter(filters))} .* NUL character"):
            repo.list_incidents(session, **filters)
    with pytest.raises(ValueError, match="incident_id .* NUL"):
        repo.get_incident(session, incident_id="inc-\x00")
    with pytest.raises(ValueError, match="job .* NUL"):
        repo.job_incidents(session, job_id="\x00")
    late = datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-1)))
    with pytest.raises(ValueError, match="since 9999-12-31T23:59:00-01:00 is outside"):
        repo.count_incidents(session, since=late)
    early = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    with pytest.raises(ValueError, match="until 0001-01-01T00:00:00\\+01:00 is outside"):
        repo.list_incidents(session, until=early)
    assert ids(repo.list_incidents(session, until=datetime.min.replace(tzinfo=timezone.utc))) == []


def test_job_incidents(session, stored):
    assert ids(repo.job_incidents(session, job_id="100")) == [inc(2), inc(1)]
    assert repo.job_incidents(session, job_id="nope") == []


def test_topology_snapshot_is_replaced(session):
    assert repo.load_topology(session) is None
    repo.save_topology(session, document={"nodes": ["leaf01"], "links": []})
    repo.save_topology(session, document={"nodes": ["leaf01", "spine01"], "links": [["a", "b"]]})
    assert repo.load_topology(session) == {"nodes": ["leaf01", "spine01"], "links": [["a", "b"]]}


def test_topology_saved_by_two_processes_at_once(engine, session):
    """Two workers starting together both save the topology: the other one inserts the
    row between this one's read and its insert (a worker crashed on it at start)."""
    from sqlalchemy import event

    from api.store.tables import TopologyRow

    fired = []

    @event.listens_for(session, "before_flush")
    def other_process(sess, ctx, instances):
        if not fired:
            fired.append(1)
            with Session(engine) as other:
                other.add(TopologyRow(id=1, document={"nodes": ["other"]}))
                other.commit()

    repo.save_topology(session, document={"nodes": ["mine"]})
    assert fired
    assert repo.load_topology(session) == {"nodes": ["mine"]}


# ---------------------------------------------------------------- URLs and engines


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        (None, {}, DEFAULT_DB_URL),
        ("", {"FABRIC_RCA_DB": ""}, DEFAULT_DB_URL),
        (None, {"FABRIC_RCA_DB": "postgresql+psycopg://u@h/db"}, "postgresql+psycopg://u@h/db"),
        ("sqlite:///a.db", {"FABRIC_RCA_DB": "sqlite:///b.db"}, "sqlite:///a.db"),
        ("out/x.db", {}, "sqlite:///out/x.db"),
        ("/tmp/abs.db", {}, "sqlite:////tmp/abs.db"),
        (None, {"FABRIC_RCA_DB": "env.db"}, "sqlite:///env.db"),
    ],
)
def test_resolve_db_url(flag, env, expected):
    assert resolve_db_url(flag, env) == expected


def test_sqlite_engine_makes_its_directory_and_uses_wal(tmp_path):
    engine = make_engine(resolve_db_url(str(tmp_path / "a" / "b" / "x.db"), {}))
    create_schema(engine)
    create_schema(engine)  # idempotent
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    assert (tmp_path / "a" / "b" / "x.db").exists()
    engine.dispose()


def test_in_memory_sqlite_is_shared_by_sessions():
    engine = make_engine("sqlite://")
    create_schema(engine)
    with Session(engine) as session:
        repo.upsert_incidents(session, incidents=[make_incident(1)])
    with Session(engine) as session:
        assert repo.count_incidents(session) == 1


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("not a url", "not a URL"),
        ("nosuchdb://host/db", "unknown database dialect"),
        ("postgresql+nosuchdriver://u@h/db", "unknown database dialect or driver"),
    ],
)
def test_bad_url_says_which_url_and_why(url, reason):
    with pytest.raises(StoreError, match=reason) as caught:
        make_engine(url)
    assert url in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.skipif(importlib.util.find_spec("pymysql") is not None, reason="pymysql is installed")
def test_missing_driver_is_named_and_the_password_hidden():
    with pytest.raises(StoreError, match="driver is not installed") as caught:
        make_engine("mysql+pymysql://user:s3cret@db.example/rca")
    assert "s3cret" not in str(caught.value)
    assert "mysql+pymysql://user:***@db.example/rca" in str(caught.value)


def test_sqlite_directory_that_cannot_be_made(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreError, match="cannot create directory"):
        make_engine(f"sqlite:///{tmp_path}/file/sub/x.db")


def test_a_store_created_before_samples_opens_and_keeps_them_from_then_on(engine, session):
    """A store written by the release before: its symptom table has no `samples` column.
    Opening it adds the column; its old rows read with no samples, new writes keep them."""
    old = make_incident(1)
    repo.upsert_incidents(session, incidents=[old])
    session.commit()
    with engine.begin() as conn:
        conn.execute(text('ALTER TABLE "symptom" DROP COLUMN "samples"'))
    create_schema(engine)  # what the new release does on start
    with Session(engine) as fresh:
        before = repo.get_incident(fresh, incident_id=old["id"])
        assert [s["samples"] for s in before["symptoms"]] == [{}, {}]
        assert before == {**old, "symptoms": [{**s, "samples": {}} for s in old["symptoms"]]}
        repo.upsert_incidents(fresh, incidents=[make_incident(2)])
        fresh.commit()
        assert repo.get_incident(fresh, incident_id=make_incident(2)["id"]) == make_incident(2)
