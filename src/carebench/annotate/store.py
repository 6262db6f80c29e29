"""The annotation database: projects, items, annotators, assignments, labels, sessions.

One SQLAlchemy Core schema serves SQLite (the default, one file) and any other
SQLAlchemy URL (PostgreSQL for a team server). Durability is the point: on SQLite
every connection runs in WAL mode with ``synchronous=FULL``, and a label is
committed in its own write transaction before the page that submitted it is told
to advance, so a server killed at any moment loses no acknowledged label.

Labels are keyed by assignment, and an assignment belongs to exactly one
annotator, so two annotators never write the same row; the same annotator
re-submitting a case replaces their own earlier answer.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    func,
    inspect,
    select,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError

from carebench.annotate.auth import hash_token, new_token
from carebench.types import CarebenchError

ROLES = ("peer", "clinician", "reviewer")

metadata = MetaData()

projects = Table(
    "projects",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("kind", String(20), nullable=False),  # policy | review | criterion | rubric-walk
    Column("source", Text, nullable=False, default=""),
    Column("created_at", Float, nullable=False),
)

items = Table(
    "items",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("project_id", Integer, ForeignKey("projects.id"), nullable=False),
    Column("key", String(300), nullable=False),  # the sheet's own id (case id, item id)
    Column("position", Integer, nullable=False),
    Column("payload", Text, nullable=False),  # the sheet row as JSON
    UniqueConstraint("project_id", "key"),
)

annotators = Table(
    "annotators",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("role", String(20), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float),
    Column("withdrawn_at", Float),
    Column("notice_ack_at", Float),
)

assignments = Table(
    "assignments",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("annotator_id", Integer, ForeignKey("annotators.id"), nullable=False),
    Column("item_id", Integer, ForeignKey("items.id"), nullable=False),
    UniqueConstraint("annotator_id", "item_id"),
)

labels = Table(
    "labels",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("assignment_id", Integer, ForeignKey("assignments.id"), nullable=False, unique=True),
    Column("skipped", Boolean, nullable=False, default=False),
    Column("payload", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("revision", Integer, nullable=False, default=1),
)

sessions = Table(
    "sessions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("annotator_id", Integer, ForeignKey("annotators.id"), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("csrf", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("block_done", Integer, nullable=False, default=0),  # cases since the last break
)


def eligible(kind: str, role: str, name: str, payload: dict[str, Any]) -> bool:
    """Who is assigned an item: practitioners label every calibration case
    (VEILED-SH, §5.1), a rewrite goes to the reviewer the sheet names (VEILED-SH,
    Appendix A.5), clinicians label every criterion (DistressBench, Appendix B.1) and walk
    the rubric over conversations (how many per conversation: :meth:`Store._assign`)."""
    if kind == "policy":
        return role in ("peer", "clinician")
    if kind == "review":
        return role == "reviewer" and str(payload.get("reviewer")) == name
    if kind in ("criterion", "rubric-walk"):
        return role == "clinician"
    return False


@dataclass(frozen=True)
class Annotator:
    id: int
    name: str
    role: str
    notice_ack: bool


@dataclass(frozen=True)
class Session:
    id: int
    csrf: str
    block_done: int
    annotator: Annotator


@dataclass(frozen=True)
class Case:
    """One assignment as an annotator sees it: the item, its project, their own label."""

    assignment_id: int
    annotator_id: int
    project_id: int
    project: str
    kind: str
    key: str
    position: int  # 1-based among this annotator's cases in the project
    total: int
    done: int
    item: dict[str, Any]
    label: dict[str, Any] | None
    skipped: bool
    n_skipped: int = 0  # this annotator's skipped cases in the project (not counted in done)


@dataclass(frozen=True)
class ProjectProgress:
    id: int
    name: str
    kind: str
    total: int
    done: int  # answered; a skipped case is not done
    next_assignment: int | None
    skipped: int = 0


@dataclass(frozen=True)
class ExportRow:
    annotator: str
    role: str
    key: str
    item: dict[str, Any]
    label: dict[str, Any]
    skipped: bool


def _is_url(db: str) -> bool:
    return "://" in db


def make_engine(db: str | Path) -> Engine:
    """An engine for a SQLite file path or any SQLAlchemy URL."""
    db = str(db)
    if not _is_url(db):
        path = Path(db)
        if path.parent and not path.parent.exists():
            raise CarebenchError(f"{db}: directory {path.parent} does not exist")
        db = f"sqlite:///{path}"
    try:
        engine = create_engine(db, connect_args={"check_same_thread": False, "timeout": 30}
                               if db.startswith("sqlite") else {})
    except (ArgumentError, ImportError) as e:
        raise CarebenchError(f"--db {db!r}: {e}") from None
    if engine.dialect.name == "sqlite":
        _make_sqlite_durable(engine)
    return engine


def _make_sqlite_durable(engine: Engine) -> None:
    """WAL + synchronous FULL on every connection; write transactions take the
    write lock up front (BEGIN IMMEDIATE) so concurrent submissions queue on the
    busy timeout instead of failing on a read-to-write upgrade."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "")
        conn.exec_driver_sql(f"BEGIN {mode}".strip())


def _owner_only(path: Path) -> None:
    """Create the SQLite file readable by its owner only (it holds the raw labels that
    exports write 0600); SQLite gives its -wal and -shm files the database file's mode."""
    if path.parent and not path.parent.exists():
        return  # make_engine names the missing directory
    if not path.exists():
        # created here, owner-only, and never opened again by this function: closing any
        # descriptor of a file drops every POSIX lock this process holds on it, SQLite's
        # own included, which once left another process reading a stale snapshot
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
        except FileExistsError:
            pass
    for f in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if f.exists():
            os.chmod(f, 0o600)


class Store:
    """All reads and writes the CLI and the web app make."""

    def __init__(self, db: str | Path, create: bool = True):
        self.db = str(db)
        if create and not _is_url(self.db):
            _owner_only(Path(self.db))
        self.engine = make_engine(db)
        self._writer = self.engine.execution_options(sqlite_begin="IMMEDIATE")
        self._write_lock = threading.Lock() if self.engine.dialect.name == "sqlite" else nullcontext()
        try:
            if create:
                metadata.create_all(self.engine)
            elif (not _is_url(self.db) and not Path(self.db).exists()) or not inspect(
                    self.engine).has_table("annotators"):
                raise CarebenchError(f"{self.db}: no such database (run `carebench annotate load` first)")
        except OperationalError as e:
            raise CarebenchError(f"{self.db}: cannot open database ({e.orig})") from None

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        # SQLite has one writer at a time; queueing this process's writers on a lock
        # avoids SQLite's sleep-and-retry busy handler (tens of ms per retry under load).
        with self._write_lock, self._writer.begin() as conn:
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            yield conn

    # ---- administration (CLI) -------------------------------------------------------

    def add_project(self, name: str, kind: str, rows: list[tuple[str, dict[str, Any]]],
                    source: str = "") -> tuple[int, int]:
        """Store a sheet as a project and assign it to every eligible annotator.
        Returns (items, assignments)."""
        now = time.time()
        with self._write() as conn:
            if conn.execute(select(projects.c.id).where(projects.c.name == name)).first():
                raise CarebenchError(f"project {name!r} is already loaded (use --name for another)")
            pid = conn.execute(projects.insert().values(
                name=name, kind=kind, source=source, created_at=now)).inserted_primary_key[0]
            seen: set[str] = set()
            for pos, (key, payload) in enumerate(rows, 1):
                if key in seen:
                    raise CarebenchError(f"{source}: duplicate id {key!r} in the sheet")
                seen.add(key)
                conn.execute(items.insert().values(project_id=pid, key=key, position=pos,
                                                   payload=json.dumps(payload, ensure_ascii=False)))
            n = self._assign(conn, project_id=pid)
        return len(rows), n

    def add_annotator(self, name: str, role: str) -> tuple[str, int]:
        """Create an annotator; returns (their secret token, assignments made).
        Only the token's hash is stored: the token itself is shown once."""
        if role not in ROLES:
            raise CarebenchError(f"--role {role!r}: use one of {', '.join(ROLES)}")
        if not name.strip():
            raise CarebenchError("--name is empty")
        token = new_token()
        with self._write() as conn:
            try:
                aid = conn.execute(annotators.insert().values(
                    name=name, role=role, token_hash=hash_token(token),
                    created_at=time.time())).inserted_primary_key[0]
            except IntegrityError:
                raise CarebenchError(f"annotator {name!r} already exists") from None
            n = self._assign(conn, annotator_id=aid)
        return token, n

    def _assign(self, conn: Connection, project_id: int | None = None,
                annotator_id: int | None = None) -> int:
        q = select(items.c.id, items.c.payload, projects.c.kind).join(projects)
        if project_id is not None:
            q = q.where(items.c.project_id == project_id)
        a = select(annotators.c.id, annotators.c.name, annotators.c.role).where(
            annotators.c.withdrawn_at.is_(None))
        if annotator_id is not None:
            a = a.where(annotators.c.id == annotator_id)
        people = conn.execute(a).all()
        have = {(r.annotator_id, r.item_id) for r in conn.execute(
            select(assignments.c.annotator_id, assignments.c.item_id))}
        # a rubric walk goes to ``overlap`` clinicians, not to all: the least loaded first
        # (fewest walks assigned so far, then the earliest added), so work spreads evenly
        per_item: dict[int, int] = {}
        load: dict[int, int] = {}
        for r in conn.execute(select(assignments.c.annotator_id, assignments.c.item_id)
                              .select_from(assignments.join(items).join(projects))
                              .where(projects.c.kind == "rubric-walk")):
            per_item[r.item_id] = per_item.get(r.item_id, 0) + 1
            load[r.annotator_id] = load.get(r.annotator_id, 0) + 1
        n = 0
        for item in conn.execute(q.order_by(items.c.project_id, items.c.position)).all():
            payload = json.loads(item.payload)
            chosen = [p for p in people if (p.id, item.id) not in have
                      and eligible(item.kind, p.role, p.name, payload)]
            if item.kind == "rubric-walk":
                room = int(payload.get("overlap", 2)) - per_item.get(item.id, 0)
                chosen = sorted(chosen, key=lambda p: (load.get(p.id, 0), p.id))[:max(room, 0)]
            for person in chosen:
                conn.execute(assignments.insert().values(annotator_id=person.id, item_id=item.id))
                load[person.id] = load.get(person.id, 0) + 1
                per_item[item.id] = per_item.get(item.id, 0) + 1
                n += 1
        return n

    def revoke(self, name: str) -> None:
        """Invalidate an annotator's link and every session opened with it."""
        with self._write() as conn:
            row = conn.execute(select(annotators.c.id).where(annotators.c.name == name)).first()
            if row is None:
                raise CarebenchError(f"no annotator named {name!r}")
            conn.execute(annotators.update().where(annotators.c.id == row.id).values(
                revoked_at=time.time()))
            conn.execute(sessions.delete().where(sessions.c.annotator_id == row.id))

    def list_annotators(self) -> list[dict[str, Any]]:
        with self._read() as conn:
            rows = conn.execute(select(annotators).order_by(annotators.c.id)).all()
            out = []
            for r in rows:
                counts = dict(conn.execute(
                    select(labels.c.skipped, func.count()).select_from(labels.join(assignments))
                    .where(assignments.c.annotator_id == r.id).group_by(labels.c.skipped)).all())
                status = "withdrawn" if r.withdrawn_at else "revoked" if r.revoked_at else "active"
                out.append({"name": r.name, "role": r.role, "status": status,
                            "labels": int(counts.get(False, 0)), "skipped": int(counts.get(True, 0))})
            return out

    def list_projects(self) -> list[dict[str, Any]]:
        with self._read() as conn:
            rows = conn.execute(select(projects.c.id, projects.c.name, projects.c.kind,
                                       func.count(items.c.id).label("n"))
                                .join(items, isouter=True).group_by(projects.c.id)
                                .order_by(projects.c.id)).all()
            return [{"name": r.name, "kind": r.kind, "items": r.n} for r in rows]

    # ---- sign-in ----------------------------------------------------------------------

    def open_session(self, token: str) -> tuple[str, str] | None:
        """A new browser session for a valid link token: (session token, CSRF token).
        None for an unknown, revoked or withdrawn link."""
        with self._write() as conn:
            row = conn.execute(select(annotators.c.id).where(
                annotators.c.token_hash == hash_token(token),
                annotators.c.revoked_at.is_(None), annotators.c.withdrawn_at.is_(None))).first()
            if row is None:
                return None
            session_token, csrf = new_token(), new_token()
            conn.execute(sessions.insert().values(
                annotator_id=row.id, token_hash=hash_token(session_token), csrf=csrf,
                created_at=time.time(), block_done=0))
        return session_token, csrf

    def session(self, session_token: str | None) -> Session | None:
        if not session_token:
            return None
        with self._read() as conn:
            r = conn.execute(
                select(sessions.c.id, sessions.c.csrf, sessions.c.block_done, annotators.c.id.label("aid"),
                       annotators.c.name, annotators.c.role, annotators.c.notice_ack_at)
                .join(annotators)
                .where(sessions.c.token_hash == hash_token(session_token),
                       annotators.c.revoked_at.is_(None), annotators.c.withdrawn_at.is_(None))).first()
        if r is None:
            return None
        return Session(r.id, r.csrf, r.block_done,
                       Annotator(r.aid, r.name, r.role, r.notice_ack_at is not None))

    def end_session(self, session_id: int) -> None:
        with self._write() as conn:
            conn.execute(sessions.delete().where(sessions.c.id == session_id))

    def ack_notice(self, annotator_id: int) -> None:
        with self._write() as conn:
            conn.execute(annotators.update().where(annotators.c.id == annotator_id,
                                                   annotators.c.notice_ack_at.is_(None))
                         .values(notice_ack_at=time.time()))

    def start_block(self, session_id: int) -> None:
        """After a break: count the session's cases from zero again."""
        with self._write() as conn:
            conn.execute(sessions.update().where(sessions.c.id == session_id).values(block_done=0))

    def withdraw(self, annotator_id: int) -> int:
        """Withdraw an annotator: delete their labels and assignments, end their
        sessions and disable their link. Returns the number of labels removed."""
        with self._write() as conn:
            mine = select(assignments.c.id).where(assignments.c.annotator_id == annotator_id)
            n = conn.execute(labels.delete().where(labels.c.assignment_id.in_(mine))).rowcount
            conn.execute(assignments.delete().where(assignments.c.annotator_id == annotator_id))
            conn.execute(sessions.delete().where(sessions.c.annotator_id == annotator_id))
            conn.execute(annotators.update().where(annotators.c.id == annotator_id)
                         .values(withdrawn_at=time.time()))
        return n

    # ---- an annotator's work --------------------------------------------------------------

    def progress(self, annotator_id: int) -> list[ProjectProgress]:
        with self._read() as conn:
            rows = conn.execute(
                select(projects.c.id, projects.c.name, projects.c.kind, assignments.c.id.label("aid"),
                       labels.c.id.label("lid"), labels.c.skipped)
                .select_from(assignments.join(items).join(projects).join(labels, isouter=True))
                .where(assignments.c.annotator_id == annotator_id)
                .order_by(projects.c.id, items.c.position)).all()
        out: dict[int, dict[str, Any]] = {}
        for r in rows:
            p = out.setdefault(r.id, {"name": r.name, "kind": r.kind, "total": 0, "done": 0, "skipped": 0,
                                      "next": None})
            p["total"] += 1
            if r.lid is not None:
                p["skipped" if r.skipped else "done"] += 1
            elif p["next"] is None:
                p["next"] = r.aid
        return [ProjectProgress(pid, p["name"], p["kind"], p["total"], p["done"], p["next"], p["skipped"])
                for pid, p in out.items()]

    def case(self, assignment_id: int) -> Case | None:
        """An assignment with its item and label (no ownership check: callers do it)."""
        with self._read() as conn:
            r = conn.execute(
                select(assignments.c.id, assignments.c.annotator_id, items.c.project_id, items.c.key,
                       items.c.payload, projects.c.name, projects.c.kind,
                       labels.c.payload.label("label"), labels.c.skipped)
                .select_from(assignments.join(items).join(projects).join(labels, isouter=True))
                .where(assignments.c.id == assignment_id)).first()
            if r is None:
                return None
            mine = conn.execute(
                select(assignments.c.id, labels.c.id.label("lid"), labels.c.skipped)
                .select_from(assignments.join(items).join(labels, isouter=True))
                .where(assignments.c.annotator_id == r.annotator_id, items.c.project_id == r.project_id)
                .order_by(items.c.position)).all()
        order = [m.id for m in mine]
        return Case(
            assignment_id=r.id, annotator_id=r.annotator_id, project_id=r.project_id, project=r.name,
            kind=r.kind, key=r.key, position=order.index(r.id) + 1, total=len(order),
            done=sum(m.lid is not None and not m.skipped for m in mine), item=json.loads(r.payload),
            label=json.loads(r.label) if r.label is not None else None, skipped=bool(r.skipped),
            n_skipped=sum(m.lid is not None and bool(m.skipped) for m in mine))

    def save_label(self, session_id: int, assignment_id: int, annotator_id: int,
                   payload: dict[str, Any], skipped: bool) -> None:
        """Commit one answer (insert or replace the annotator's own) and count it
        towards the session's break; durable when this returns."""
        now = time.time()
        data = json.dumps(payload, ensure_ascii=False, sort_keys=True)
        with self._write() as conn:
            owner = conn.execute(select(assignments.c.annotator_id)
                                 .where(assignments.c.id == assignment_id)).scalar_one_or_none()
            if owner != annotator_id:
                raise PermissionError(assignment_id)
            old = conn.execute(select(labels.c.id, labels.c.revision)
                               .where(labels.c.assignment_id == assignment_id)).first()
            if old is None:
                conn.execute(labels.insert().values(assignment_id=assignment_id, skipped=skipped,
                                                    payload=data, updated_at=now, revision=1))
            else:
                conn.execute(labels.update().where(labels.c.id == old.id).values(
                    skipped=skipped, payload=data, updated_at=now, revision=old.revision + 1))
            conn.execute(sessions.update().where(sessions.c.id == session_id)
                         .values(block_done=sessions.c.block_done + 1))

    # ---- export ---------------------------------------------------------------------------

    def project(self, name: str | None) -> tuple[int, str, str]:
        """(id, name, kind) of the named project, or of the only one."""
        with self._read() as conn:
            rows = conn.execute(select(projects.c.id, projects.c.name, projects.c.kind)
                                .order_by(projects.c.id)).all()
        if name is None:
            if len(rows) == 1:
                return tuple(rows[0])  # type: ignore[return-value]
            if not rows:
                raise CarebenchError(f"{self.db}: no project loaded")
            raise CarebenchError(f"{self.db}: holds several projects; choose one with --project "
                                 f"({', '.join(r.name for r in rows)})")
        for r in rows:
            if r.name == name:
                return tuple(r)  # type: ignore[return-value]
        raise CarebenchError(f"--project {name!r}: no such project "
                             f"(have: {', '.join(r.name for r in rows) or 'none'})")

    def export_rows(self, project_id: int, annotator: str | None = None) -> list[ExportRow]:
        """Every current label of a project by annotators who have not withdrawn,
        in annotator then sheet order."""
        q = (select(annotators.c.name, annotators.c.role, items.c.key, items.c.payload,
                    labels.c.payload.label("label"), labels.c.skipped)
             .select_from(labels.join(assignments).join(items).join(annotators))
             .where(items.c.project_id == project_id, annotators.c.withdrawn_at.is_(None))
             .order_by(annotators.c.id, items.c.position))
        if annotator is not None:
            q = q.where(annotators.c.name == annotator)
        with self._read() as conn:
            rows = conn.execute(q).all()
        return [ExportRow(r.name, r.role, r.key, json.loads(r.payload), json.loads(r.label),
                          bool(r.skipped)) for r in rows]
