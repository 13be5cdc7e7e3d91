"""ngshare, the hub's authenticated exchange (COURSE_HUB_EXCHANGE=ngshare), run as a hub service:
`python -m course.instructor.ngshare_service <ngshare's own options>` (course/instructor/hub.py).

ngshare 0.6.0, its newest release, was written for SQLAlchemy 1.x, which put a new object in the
session of the object it was attached to ("cascade_backrefs"). SQLAlchemy 2 (the kit's, as nbgrader
and JupyterHub use it) no longer does: ngshare then answers "success" to a release, a hand-in or a
feedback upload and stores nothing of it (measured: an empty assignment list after a release). Here
an object attached to one that is in a session joins that session, as SQLAlchemy 1.x did, before
ngshare starts. Nothing of ngshare itself is changed.
"""

from __future__ import annotations

import sys

from sqlalchemy import event
from sqlalchemy.orm import object_session


def _join_session(target: object, value: object, *_: object) -> None:
    """On a relationship's append or set: the side not in a session joins the other side's."""
    for held, new in ((target, value), (value, target)):
        session = object_session(held) if held is not None else None
        if session is not None and new is not None and object_session(new) is None:
            session.add(new)


def attach_cascades(base: type) -> None:
    """SQLAlchemy 1.x's cascade along relationships, for every mapped class of `base`."""
    for mapper in base.registry.mappers:  # type: ignore[attr-defined]
        for relation in mapper.relationships:
            attribute = getattr(mapper.class_, relation.key)
            for kind in ("append", "set"):
                if not event.contains(attribute, kind, _join_session):
                    event.listen(attribute, kind, _join_session)


def main(argv: list[str] | None = None) -> None:
    from ngshare import ngshare
    from ngshare.database.database import Base

    attach_cascades(Base)
    ngshare.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
