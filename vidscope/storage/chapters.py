"""The ``chapters`` table: what a video is about, written by the ``chapters`` stage.

One table for the three things a summary is made of, told apart by ``kind``:

- ``summary``: one row, the whole video (``text`` the summary, ``why`` a note such as why the
  video is one chapter);
- ``chapter``: consecutive spans covering the video (``title``, ``text`` the chapter's summary,
  ``why`` how the title was made: ``title slide`` or ``distinctive words``);
- ``highlight``: the most distinctive moments (``text`` what is said or shown there, ``why`` the
  words that make it stand out);
- ``sentence``: with a planner, each sentence the model wrote for a chapter summary (``text``),
  the clips it cites (``clips``) and its chapter (``why`` = ``chapter N``), so every written
  sentence is traceable.

Every text is the video's own words (speech, on-screen text, captions) or, with a planner, the
model's checked sentences about them, stored as plain text; the
``clips`` column names the clips each row was made from, so a sentence can be traced back.
"""

from __future__ import annotations

import pyarrow as pa

from vidscope.storage.schema import TableSpec, versioned

KIND_SUMMARY = "summary"
KIND_CHAPTER = "chapter"
KIND_HIGHLIGHT = "highlight"
KIND_SENTENCE = "sentence"

CHAPTERS = TableSpec(
    name="chapters",
    schema=versioned(
        [
            pa.field("video_id", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),  # summary | chapter | highlight | sentence
            pa.field("item_index", pa.int32(), nullable=False),  # order within its kind
            pa.field("start", pa.float64(), nullable=False),
            pa.field("end", pa.float64(), nullable=False),
            pa.field("title", pa.string()),
            pa.field("text", pa.string()),
            pa.field("why", pa.string()),
            pa.field("clips", pa.list_(pa.int32())),
        ]
    ),
    keys=("video_id", "kind", "item_index"),
)
