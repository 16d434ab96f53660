"""The audience writes the REST API and the dashboard share, over a real spool: segments,
topics and contact properties created, changed and deleted with the API's refusals; a
contact added from a create body; a dashboard import kept as a draft, then started."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from postwire._core import WriteBatch
from postwire.audiences.contacts import add_contact
from postwire.audiences.csv_rows import parse_column_map
from postwire.audiences.import_uploads import ImportUpload, import_job
from postwire.audiences.properties import change_fallback, create_property, remove_property
from postwire.audiences.records import require_segment
from postwire.audiences.segments import create_segment, remove_segment, rename_segment
from postwire.audiences.topics import create_topic, remove_topic, update_topic
from postwire.errors import ApiError
from postwire.store import contact_imports as imports
from postwire.store.contact_properties import team_properties
from postwire.store.spool import Spool

TEAM = "team-a"
OTHER = "team-b"
NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


async def refusal(call: object) -> ApiError:
    with pytest.raises(ApiError) as refused:
        await call  # type: ignore[misc]
    return refused.value


async def test_segments_topics_and_properties(spool: Spool) -> None:
    segment = await create_segment(spool, TEAM, {"name": "Readers"}, NOW)
    renamed = await rename_segment(spool, TEAM, segment.id, {"name": "All readers"})
    assert require_segment(spool, TEAM, segment.id).name == "All readers" == renamed.name
    assert (await refusal(rename_segment(spool, OTHER, segment.id, {"name": "x"}))).status == 404
    assert (await refusal(create_segment(spool, TEAM, {"name": " "}, NOW))).status == 422
    await remove_segment(spool, TEAM, segment.id)
    assert (await refusal(remove_segment(spool, TEAM, segment.id))).status == 404

    topic = await create_topic(
        spool, TEAM, {"name": "News", "default_subscription": "opt_out"}, NOW
    )
    assert topic.visibility == "private"
    changed = await update_topic(
        spool,
        TEAM,
        topic.id,
        {"name": "Product news", "description": "Monthly", "visibility": "public"},
    )
    assert (changed.name, changed.description, changed.visibility) == (
        "Product news", "Monthly", "public",
    )  # fmt: skip
    fixed = await refusal(update_topic(spool, TEAM, topic.id, {"default_subscription": "opt_in"}))
    assert "cannot be changed" in fixed.message
    long = await refusal(
        create_topic(spool, TEAM, {"name": "n" * 51, "default_subscription": "opt_in"}, NOW)
    )
    assert long.status == 422
    assert (await refusal(remove_topic(spool, OTHER, topic.id))).status == 404
    await remove_topic(spool, TEAM, topic.id)

    prop = await create_property(spool, TEAM, {"key": "seats", "type": "number"}, NOW)
    twice = await refusal(create_property(spool, TEAM, {"key": "seats", "type": "string"}, NOW))
    assert "already exists" in twice.message
    assert (await change_fallback(spool, TEAM, prop.id, {"fallback_value": 1})).fallback_value == 1
    wrong = await refusal(change_fallback(spool, TEAM, prop.id, {"fallback_value": "one"}))
    assert "must be a number" in wrong.message
    await remove_property(spool, TEAM, prop.id)
    assert team_properties(spool, TEAM) == {}


async def test_a_contact_from_a_create_body(spool: Spool) -> None:
    await create_property(spool, TEAM, {"key": "plan", "type": "string"}, NOW)
    segment = await create_segment(spool, TEAM, {"name": "Readers"}, NOW)
    ada = await add_contact(
        spool,
        TEAM,
        {"email": " ada@example.org ", "first_name": "Ada", "segments": [segment.id],
         "properties": {"plan": "pro"}},
        NOW,
    )  # fmt: skip
    assert (ada.email, ada.segment_ids, ada.properties) == (
        "ada@example.org", [segment.id], {"plan": "pro"},
    )  # fmt: skip
    again = await refusal(add_contact(spool, TEAM, {"email": "ADA@example.org"}, NOW))
    assert "already exists" in again.message
    unknown = await refusal(
        add_contact(spool, TEAM, {"email": "b@example.org", "properties": {"age": 3}}, NOW)
    )
    assert "does not exist" in unknown.message
    foreign = await refusal(
        add_contact(spool, OTHER, {"email": "c@example.org", "segments": [segment.id]}, NOW)
    )
    assert foreign.status == 404


async def test_a_draft_import_is_kept_then_started(spool: Spool) -> None:
    upload = ImportUpload(spool, TEAM, "0190f0f0-0000-7000-8000-000000000001", lambda: 1000)
    await upload.write(
        b"\xef\xbb\xbfE-mail,Name,Notes\nada@example.org,Ada,x\n\nbob@example.org,Bob,y\n"
    )
    header = upload.header()
    assert header.cells == ["E-mail", "Name", "Notes"]
    assert upload.sample_rows(5) == [
        ["ada@example.org", "Ada", "x"],
        ["bob@example.org", "Bob", "y"],
    ]
    draft = imports.ImportDraft(
        upload.import_id, TEAM, "2026-11-25 10:00:00.000000+00", 1000, "people.csv",
        upload.size, header.cells, header.end, upload.sample_rows(5),
    )  # fmt: skip
    batch = WriteBatch()
    upload.finish(batch)
    imports.put_draft(batch, draft)
    await spool.commit(batch)
    await upload.discard()  # the draft is on disk: nothing is removed
    assert imports.get_draft(spool, TEAM, draft.id) == draft
    assert imports.get_draft(spool, OTHER, draft.id) is None
    # A fresh draft's file outlives a restart's sweep; one a day old does not.
    assert imports.stale_uploads(spool, 2000) == []
    assert [i for i, _ in imports.stale_uploads(spool, 1000 + imports.DRAFT_TTL_MS + 1)] == [
        draft.id
    ]

    record = import_job(
        spool, TEAM, draft.id, header, upload.size,
        targets=parse_column_map({"email": "E-mail", "first_name": "Name"}),
        on_conflict="upsert", segments=None, topics=None, now=NOW,
    )  # fmt: skip
    assert record.columns == {"email": 0, "first_name": 1} and record.row == 2
    batch = WriteBatch()
    imports.start_draft(batch, draft, record)
    await spool.commit(batch)
    assert imports.get_draft(spool, TEAM, draft.id) is None
    assert imports.queued_imports(spool) == [(TEAM, draft.id)]
    assert imports.stale_uploads(spool, 10**15) == []
    bad = await refusal_sync(lambda: import_job(
        spool, TEAM, draft.id, header, upload.size, targets={}, on_conflict="merge",
        segments=None, topics=None, now=NOW,
    ))  # fmt: skip
    assert "on_conflict" in bad.message


async def refusal_sync(call: object) -> ApiError:
    with pytest.raises(ApiError) as refused:
        call()  # type: ignore[operator]
    return refused.value
