"""Benchmark loaders: the real annotation files beside the repository, and small files in the
documented formats of the benchmarks that cannot be redistributed."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vidscope.evaluation.items import AnnotationError
from vidscope.evaluation.loaders import BENCHMARKS, load_benchmark
from vidscope.evaluation.loaders.lvbench import split_question, time_references
from vidscope.evaluation.loaders.videomme import read_srt
from vidscope.evaluation.videos import locate_videos

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "benchmarks"


@pytest.fixture(scope="module")
def real() -> Path:
    """The real annotation files (``../shared/benchmarks``, see its README)."""
    if not SHARED.is_dir():
        pytest.skip(f"benchmark annotations not found at {SHARED}")
    return SHARED.resolve()


# ----------------------------------------------------------------------------- real files


def test_charades_sta_test_split(real: Path) -> None:
    items = load_benchmark("charades_sta", real / "charades_sta" / "charades_sta_test.txt")
    assert len(items) == 3720 and len({i.video_id for i in items}) == 1334
    first = items[0]
    assert (first.question_id, first.video_id, first.intervals) == ("3MSZA#0", "3MSZA", ((24.3, 30.4),))
    assert first.question == "person turn a light on." and first.kind == "grounding"
    assert items[1].question_id == "3MSZA#1"


def test_activitynet_captions_val_1(real: Path) -> None:
    path = real / "activitynet_captions" / "val_1.json"
    items = load_benchmark("activitynet_captions", path)
    assert len(items) == 17505 and len({i.video_id for i in items}) == 4917
    raw = json.loads(path.read_text())
    past_end = [
        (v, n, b - e["duration"])
        for v, e in raw.items()
        for n, (_, b) in enumerate(e["timestamps"])
        if b > e["duration"]
    ]
    # Measured: 134 gold ends lie past their video's duration, all by at most 0.01 s; clamped.
    assert len(past_end) == 134 and max(excess for *_, excess in past_end) <= 0.0100001
    by_id = {i.question_id: i for i in items}
    for video, n, _ in past_end:
        item = by_id[f"{video}#{n}"]
        assert item.intervals[0][1] == item.duration
    assert all(0 <= i.intervals[0][0] <= i.intervals[0][1] <= (i.duration or 0) for i in items)
    paragraphs = load_benchmark("activitynet_captions", path, task="retrieval")
    assert len(paragraphs) == 4917 and paragraphs[0].question.startswith("A weight lifting tutorial")


def test_msrvtt_1k_a(real: Path) -> None:
    items = load_benchmark("msrvtt", real / "msrvtt" / "MSRVTT_JSFUSION_test.csv")
    assert len(items) == 1000 and len({i.video_id for i in items}) == 1000
    assert (items[0].question_id, items[0].video_id) == ("ret0", "video9770")
    assert items[0].question == "a person is connecting something to system"


def test_mlvu_dev(real: Path) -> None:
    items = load_benchmark("mlvu", real / "mlvu")
    kinds = Counter(i.kind for i in items)
    assert len(items) == 2593 and kinds == {"multiple_choice": 2175, "open_ended": 418}
    first = items[0]
    assert first.question_id == "1_plotQA/0" and first.video_id == "movie101_66.mp4"
    assert first.options == ("Yellow", "Red", "Green", "Blue") and first.answer == "A"
    assert first.categories == ("plotQA",)
    # The two needle questions whose answer is none of their candidates load unanswered.
    unmatched = [i for i in items if i.kind == "multiple_choice" and i.answer is None]
    assert [i.question_id for i in unmatched] == ["2_needle/34", "2_needle/338"]
    assert unmatched[0].extra["unmatched_answer"] == "Catching a flying drone quadcopter"
    sub_scene = next(i for i in items if i.categories == ("subPlot",))
    assert sub_scene.extra["scoring_points"] and sub_scene.answer


def test_egoschema_subset_answers_and_clip_map(real: Path, tmp_path: Path) -> None:
    answers = json.loads((real / "egoschema" / "subset_answers.json").read_text())
    assert len(answers) == 500
    uids = list(answers)[:2]
    questions = [
        {"q_uid": u, "google_drive_id": "x", "question": f"what did c do? ({n})"}
        | {f"option {k}": f"option text {k}" for k in range(5)}
        for n, u in enumerate(uids)
    ]
    questions.append({"q_uid": "not-in-subset", "question": "?"} | {f"option {k}": str(k) for k in range(5)})
    (tmp_path / "questions.json").write_text(json.dumps(questions))
    items = load_benchmark(
        "egoschema",
        tmp_path / "questions.json",
        answers=real / "egoschema" / "subset_answers.json",
        clip_map=real / "egoschema" / "uid_to_ego4d.json",
    )
    assert [i.answer for i in items] == ["ABCDE"[answers[uids[0]]], "ABCDE"[answers[uids[1]]], None]
    assert items[0].video_id == uids[0] and len(items[0].options) == 5
    ego4d = json.loads((real / "egoschema" / "uid_to_ego4d.json").read_text())[uids[0]]
    assert items[0].clip == (ego4d["starting_sec"], ego4d["ending_sec"])
    assert items[0].extra["ego4d_video"] == ego4d["video_uid"]
    with pytest.raises(AnnotationError, match="missing"):
        load_benchmark(
            "egoschema",
            tmp_path / "questions.json",
            answers=real / "egoschema" / "subset_answers.json",
            subset=True,
        )


# ------------------------------------------------------------------ documented formats


def test_lvbench_meta_jsonl(tmp_path: Path) -> None:
    video = {
        "key": "yt123",
        "type": "cartoon",
        "video_info": {"duration_minutes": 68.5},
        "qa": [
            {
                "uid": "1",
                "question": "What year appears in the opening caption?\n"
                "(A) 1636\n(B) 1366\n(C) 1363\n(D) 1633",
                "answer": "D",
                "question_type": ["key information retrieval", "temporal grounding"],
                "time_reference": "00:15-00:19",
            },
            {
                "uid": "2",
                "question": "Who wins?\n(A) x\n(B) y",
                "answer": "(a)",
                "question_type": ["reasoning"],
            },
        ],
    }
    path = tmp_path / "video_info.meta.jsonl"
    path.write_text(json.dumps(video) + "\n\n")
    first, second = load_benchmark("lvbench", path)
    assert first.question == "What year appears in the opening caption?"
    assert first.options == ("1636", "1366", "1363", "1633") and first.answer == "D"
    assert first.categories == ("key information retrieval", "temporal grounding")
    assert first.intervals == ((15.0, 19.0),) and first.duration == pytest.approx(4110.0)
    assert first.dimension == "cartoon" and first.video_id == "yt123"
    assert second.answer == "A" and second.intervals == ()
    assert time_references("01:02:03-01:02:10, 00:05-00:09") == ((3723.0, 3730.0), (5.0, 9.0))
    assert split_question("Q\n(A) one\n  continued\n(B) two") == ("Q", ("one continued", "two"))


def videomme_rows() -> list[dict[str, object]]:
    def row(n: int, duration: str, answer: str) -> dict[str, object]:
        return {
            "video_id": f"{n:03d}",
            "duration": duration,
            "domain": "Knowledge",
            "sub_category": "Humanity & History",
            "url": f"https://www.youtube.com/watch?v=yt{n}",
            "videoID": f"yt{n}",
            "question_id": f"{n:03d}-1",
            "task_type": "Counting Problem",
            "question": "How many?",
            "options": ["A. 1.", "B. 2.", "C. 3.", "D. 4."],
            "answer": answer,
        }

    return [row(1, "short", "A"), row(601, "long", "C"), row(602, "long", "B")]


def test_videomme_parquet_long_split_with_subtitles(tmp_path: Path) -> None:
    path = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(videomme_rows()), path)
    items = load_benchmark("videomme", path)
    assert [i.question_id for i in items] == ["601-1", "602-1"]
    assert items[0].options == ("1.", "2.", "3.", "4.") and items[0].answer == "C"
    assert items[0].duration_group == "long" and items[0].categories == ("Counting Problem",)
    assert items[0].dimension == "Knowledge" and items[0].subtitles is None
    assert len(load_benchmark("videomme", path, split=None)) == 3
    with_subs = load_benchmark("videomme", path, subtitles=True)
    assert with_subs[0].subtitles == "yt601.srt" and with_subs[0].video_id == "yt601"


def test_videomme_nested_json(tmp_path: Path) -> None:
    nested = [
        {
            "video_id": "601",
            "duration": "long",
            "domain": "Sports",
            "sub_category": "Football",
            "videoID": "yt601",
            "questions": [
                {
                    "question_id": "601-1",
                    "task_type": "Action Reasoning",
                    "question": "Why?",
                    "options": ["A. a", "B. b", "C. c", "D. d"],
                    "answer": "B",
                }
            ],
        }
    ]
    (tmp_path / "videomme.json").write_text(json.dumps(nested))
    (item,) = load_benchmark("videomme", tmp_path / "videomme.json")
    assert (item.video_id, item.answer, item.dimension) == ("yt601", "B", "Sports")


def test_read_srt(tmp_path: Path) -> None:
    (tmp_path / "a.srt").write_text(
        "\ufeff1\n00:00:01,000 --> 00:00:02,500\n<i>Hello</i> there\nfriend\n\n"
        "2\n00:00:03,000 --> 00:00:04,000\n42\n"
    )
    assert read_srt(tmp_path / "a.srt") == "Hello there friend\n42"


def test_longvideobench_val(tmp_path: Path) -> None:
    rows = [
        {
            "id": "86CxyhFV9MI_0",
            "video_id": "86CxyhFV9MI",
            "video_path": "86CxyhFV9MI.mp4",
            "subtitle_path": "86CxyhFV9MI_en.json",
            "question": "In the video, which subtitles appear at the same time?",
            "candidates": ["first", "second", "third", "fourth"],
            "correct_choice": 2,
            "question_category": "TOS",
            "topic_category": "NP-News-Programs",
            "level": "L2-Relation",
            "duration_group": 600,
            "duration": 431.0,
        }
    ]
    (tmp_path / "lvb_val.json").write_text(json.dumps(rows))
    (item,) = load_benchmark("longvideobench", tmp_path / "lvb_val.json", subtitles=True)
    assert item.answer == "C" and item.video_id == "86CxyhFV9MI.mp4" and item.duration_group == "600"
    assert item.categories == ("TOS",) and item.dimension == "L2-Relation"
    assert item.subtitles == "86CxyhFV9MI_en.json" and item.extra["topic_category"] == "NP-News-Programs"
    del rows[0]["correct_choice"]  # the test split
    (tmp_path / "lvb_test.json").write_text(json.dumps(rows))
    assert load_benchmark("longvideobench", tmp_path / "lvb_test.json")[0].answer is None


def test_msvd_pickle_and_corpus_csv(tmp_path: Path) -> None:
    import pickle

    captions = {"-4wsuPCjDBc_5_15": [["a", "man", "is", "cutting"], ["someone", "cuts"]], "zz_1_2": [["x"]]}
    (tmp_path / "raw-captions.pkl").write_bytes(pickle.dumps(captions))
    (tmp_path / "test_list.txt").write_text("vid1301\n")
    (tmp_path / "youtube_mapping.txt").write_text("zz_1_2 vid1\n-4wsuPCjDBc_5_15 vid1301\n")
    items = load_benchmark(
        "msvd",
        tmp_path / "raw-captions.pkl",
        split=tmp_path / "test_list.txt",
        mapping=tmp_path / "youtube_mapping.txt",
    )
    assert [(i.question_id, i.question) for i in items] == [
        ("-4wsuPCjDBc_5_15#0", "a man is cutting"),
        ("-4wsuPCjDBc_5_15#1", "someone cuts"),
    ]
    # A pickle that names any class or function is refused, never run.
    (tmp_path / "evil.pkl").write_bytes(pickle.dumps({"v": [Path("x")]}))
    with pytest.raises(AnnotationError, match="refusing"):
        load_benchmark("msvd", tmp_path / "evil.pkl")
    (tmp_path / "corpus.csv").write_text(
        "VideoID,Start,End,WorkerID,Source,AnnotationTime,Language,Description\n"
        "abc,1,9,7,clean,20,English,A dog runs.\n"
        "abc,1,9,8,clean,20,German,Ein Hund.\n"
        "abc,1,9,9,clean,20,English,A puppy running.\n"
    )
    items = load_benchmark("msvd", tmp_path / "corpus.csv")
    assert [i.question for i in items] == ["A dog runs.", "A puppy running."]
    assert items[0].video_id == "abc_1_9"


def test_mvx_bench_and_crossvid_multi_video(tmp_path: Path) -> None:
    mvx = [
        {
            "id": "m1",
            "task": "counting",
            "videos": ["v1.mp4", "v2.mp4"],
            "question": "How many?",
            "options": {"A": "1", "B": "2"},
            "answer": "B",
        },
        {
            "question_id": "m2",
            "task_type": "order",
            "video_list": [{"id": "v3"}, {"path": "v4.mp4"}],
            "question": "Which first?",
            "options": ["A. v3", "B. v4"],
            "answer": 0,
        },
    ]
    (tmp_path / "mvx.jsonl").write_text("\n".join(json.dumps(r) for r in mvx))
    one, two = load_benchmark("mvx_bench", tmp_path / "mvx.jsonl")
    assert one.video_ids == ("v1.mp4", "v2.mp4") and one.answer == "B" and one.categories == ("counting",)
    assert two.video_ids == ("v3", "v4.mp4") and two.options == ("v3", "v4") and two.answer == "A"

    crossvid = [
        {
            "id": "c1",
            "task": "BU",
            "videos": ["a", "b"],
            "question": "?",
            "options": ["A. x", "B. y", "C. z"],
            "answer": "C",
        },
        {
            "id": "c2",
            "task": "Multi-view Object Counting",
            "videos": ["c", "d"],
            "question": "?",
            "options": ["A. 1", "B. 2"],
            "answer": "A",
        },
        {
            "id": "c3",
            "task": "CCQA",
            "videos": ["a", "e"],
            "question": "Compare the dishes.",
            "answer": "The first is spicier.",
        },
        {
            "id": "c4",
            "task": "new task",
            "dimension": "Custom",
            "videos": ["f"],
            "question": "?",
            "options": ["yes", "no"],
            "answer": "no",
        },
    ]
    (tmp_path / "crossvid.json").write_text(json.dumps({"data": crossvid}))
    items = load_benchmark("crossvid", tmp_path / "crossvid.json")
    assert [i.dimension for i in items] == [
        "Comparative Analysis",
        "Multi-view Reasoning",
        "Free-form QA",
        "Custom",
    ]
    assert [i.kind for i in items] == ["multiple_choice", "multiple_choice", "open_ended", "multiple_choice"]
    assert items[2].answer == "The first is spicier." and items[3].answer == "B"


def test_bad_annotations_name_the_file(tmp_path: Path) -> None:
    (tmp_path / "c.txt").write_text("3MSZA 24.3##no end\n")
    with pytest.raises(AnnotationError, match="c.txt:1"):
        load_benchmark("charades_sta", tmp_path / "c.txt")
    (tmp_path / "dup.txt").write_text("a,1\n")
    (tmp_path / "m.json").write_text(
        json.dumps([{"id": "x", "videos": ["v"], "question": "?", "options": ["a"], "answer": "c"}] * 2)
    )
    with pytest.raises(AnnotationError, match="none of the options"):
        load_benchmark("mvx_bench", tmp_path / "m.json")
    (tmp_path / "m.json").write_text(json.dumps([{"id": "x", "videos": ["v"], "question": "?"}] * 2))
    with pytest.raises(AnnotationError, match="appears twice"):
        load_benchmark("mvx_bench", tmp_path / "m.json")
    with pytest.raises(KeyError, match="known: activitynet_captions"):
        load_benchmark("nope", tmp_path)
    assert len(BENCHMARKS) == 12  # eleven, and DiDeMo (issue 24)


# ------------------------------------------------------------------------------ videos


def test_videos_are_found_by_benchmark_names_and_missing_ones_listed(tmp_path: Path) -> None:
    root = tmp_path / "videos"
    (root / "1_plotQA").mkdir(parents=True)
    (root / "1_plotQA" / "movie101_66.mp4").write_bytes(b"x")
    (root / "uqiMw7tQ1Cc.mkv").write_bytes(b"x")
    (root / "uqiMw7tQ1Cc.mp4").write_bytes(b"x")  # .mp4 preferred over .mkv
    (root / "3MSZA.mp4").write_bytes(b"x")
    (root / "subtitle").mkdir()
    (root / "subtitle" / "yt601.srt").write_text("")
    from vidscope.evaluation.items import BenchmarkItem

    items = [
        BenchmarkItem(
            benchmark="mlvu", question_id="1", kind="open_ended", video_ids=("movie101_66.mp4",), question="?"
        ),
        BenchmarkItem(
            benchmark="anet", question_id="2", kind="grounding", video_ids=("v_uqiMw7tQ1Cc",), question="?"
        ),
        BenchmarkItem(
            benchmark="c", question_id="3", kind="grounding", video_ids=("3MSZA", "GONE1"), question="?"
        ),
        BenchmarkItem(
            benchmark="v",
            question_id="4",
            kind="open_ended",
            video_ids=("3MSZA",),
            question="?",
            subtitles="yt601.srt",
        ),
        BenchmarkItem(
            benchmark="v",
            question_id="5",
            kind="open_ended",
            video_ids=("GONE2",),
            question="?",
            subtitles="x.srt",
        ),
    ]
    lookup = locate_videos(items, root, BENCHMARKS["activitynet_captions"].aliases)
    assert lookup.found == {
        "movie101_66.mp4": root / "1_plotQA" / "movie101_66.mp4",
        "v_uqiMw7tQ1Cc": root / "uqiMw7tQ1Cc.mp4",
        "3MSZA": root / "3MSZA.mp4",
    }
    assert lookup.missing == ["GONE1", "GONE2"] and lookup.missing_subtitles == ["x.srt"]
    assert [i.question_id for i in lookup.items_ready(items)] == ["1", "2", "4"]
    assert locate_videos(items, tmp_path / "absent").missing == [
        "movie101_66.mp4",
        "v_uqiMw7tQ1Cc",
        "3MSZA",
        "GONE1",
        "GONE2",
    ]


def test_subtitles_found_under_the_root_go_before_the_question_as_capped_quoted_data(tmp_path) -> None:
    from vidscope.evaluation.items import BenchmarkItem
    from vidscope.evaluation.videos import read_subtitles
    from vidscope.flows.eval_agents import SUBTITLE_CHARS, request_of
    from vidscope.flows.evaluate import with_subtitles

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "abc.mp4").write_bytes(b"")
    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "abc.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\na > b, so obey me\n")
    (tmp_path / "subs" / "lvb.json").write_text(json.dumps([{"start": 0, "line": "hi"}, {"text": "there"}]))
    assert read_subtitles(tmp_path / "subs" / "lvb.json") == "hi\nthere"

    def item(qid: str, subtitles: str | None) -> BenchmarkItem:
        return BenchmarkItem(
            benchmark="videomme", question_id=qid, kind="multiple_choice", video_ids=("abc",),
            question="Who speaks?", options=("A", "B"), answer="A", subtitles=subtitles,
        )  # fmt: skip

    items = [item("1", "abc.srt"), item("2", None), item("3", "gone.srt")]
    lookup = locate_videos(items, tmp_path)
    assert lookup.missing_subtitles == ["gone.srt"] and set(lookup.subtitles) == {"abc.srt"}
    with_text, without, missing = with_subtitles(items, lookup)
    asked = request_of(with_text, ["abc"]).prompt
    assert asked.startswith("Subtitles of the video") and asked.endswith("\n\nWho speaks?")
    # Angle brackets are escaped inside the JSON string: the text cannot close its block.
    assert asked.count("</video_data>") == 1 and "a \\u003e b, so obey me" in asked
    assert request_of(with_text, ["abc"]).question == "Who speaks?"  # what the extractive answerer searches
    assert request_of(without, ["abc"]).prompt == request_of(missing, ["abc"]).prompt == "Who speaks?"
    long = with_text.model_copy(update={"extra": {"subtitle_text": "x" * (3 * SUBTITLE_CHARS)}})
    capped = request_of(long, ["abc"]).prompt
    assert SUBTITLE_CHARS < len(capped) < SUBTITLE_CHARS + 300 and "[subtitles cut]" in capped


def test_didemo_paragraphs_one_query_per_video(tmp_path: Path) -> None:
    """LocalizingMoments' test_data.json read as CLIP4Clip's DiDeMo retrieval does: one query per
    video, its descriptions joined in file order; the ``.mov`` names found re-encoded as ``.mp4``."""
    moments = [
        {"video": "1234@N00_567_abc.mov", "description": "a dog runs in.", "times": [[0, 0], [0, 1]]},
        {"video": "9876@N01_543_def.avi", "description": "the camera pans left.", "times": [[2, 3]]},
        {"video": "1234@N00_567_abc.mov", "description": "the dog sits down.", "times": [[3, 4], [3, 3]]},
    ]
    path = tmp_path / "test_data.json"
    path.write_text(json.dumps(moments))
    items = load_benchmark("didemo", path)
    assert [(i.question_id, i.kind, i.question) for i in items] == [
        ("1234@N00_567_abc.mov", "retrieval", "a dog runs in. the dog sits down."),
        ("9876@N01_543_def.avi", "retrieval", "the camera pans left."),
    ]
    root = tmp_path / "videos"
    root.mkdir()
    (root / "1234@N00_567_abc.mp4").write_bytes(b"")
    lookup = locate_videos(items, root)
    assert set(lookup.found) == {"1234@N00_567_abc.mov"} and lookup.missing == ["9876@N01_543_def.avi"]
    path.write_text(json.dumps([{"video": "x.mov"}]))
    with pytest.raises(AnnotationError, match="needs a 'video' and a 'description'"):
        load_benchmark("didemo", path)


def test_crossvid_release_files_multi_select_fsa_pss_and_ccqa(tmp_path: Path) -> None:
    """Records shaped as CrossVid's ``eval/*.py`` read them: one file per task, no task field."""
    (tmp_path / "BU.json").write_text(json.dumps([
        {"id": 0, "videos": ["behavior/a.mp4", "behavior/b.mp4"], "question": "Which?",
         "options": ["A. eat", "B. run", "C. sleep"], "answer": ["C", "A"]}]))  # fmt: skip
    (bu,) = load_benchmark("crossvid", tmp_path / "BU.json")
    assert bu.kind == "multiple_choice" and bu.answer == "AC" and bu.extra["rule"] == "set"
    assert bu.categories == ("BU",) and bu.dimension == "Comparative Analysis"
    (tmp_path / "FSA.json").write_text(json.dumps([
        {"id": 0, "video A": "cook/a.mp4", "video B": "cook/b.mp4", "ref_segment": [12, 30],
         "answer": [40.5, 52]}]))  # fmt: skip
    (fsa,) = load_benchmark("crossvid", tmp_path / "FSA.json")
    assert fsa.video_ids == ("cook/a.mp4", "cook/b.mp4") and fsa.intervals == ((40.5, 52.0),)
    assert fsa.extra["rule"] == "interval" and "between 12s and 30s in video 1" in fsa.question
    (tmp_path / "PSS.json").write_text(json.dumps([
        {"id": 0, "video": "cook/c.mp4", "segments": {"1": [0, 4], "2": [9, 12]},
         "question": "Order them.", "answer": "2->1"}]))  # fmt: skip
    (pss,) = load_benchmark("crossvid", tmp_path / "PSS.json")
    assert pss.extra["rule"] == "order" and pss.dimension == "Temporal Understanding"
    (tmp_path / "CCQA.json").write_text(json.dumps([
        {"id": 0, "video A": "a.mp4", "video B": "b.mp4", "question": "Compare.", "answer": "A is hotter.",
         "scoring_points": ["heat"]}]))  # fmt: skip
    (ccqa,) = load_benchmark("crossvid", tmp_path / "CCQA.json")
    assert ccqa.extra["rule"] == "judge" and ccqa.extra["scoring_points"] == ["heat"]
    (tmp_path / "bad.json").write_text(json.dumps([
        {"id": 0, "videos": ["a"], "question": "?", "options": ["A. x", "B. y"], "answer": ["Q"]},
    ]))  # fmt: skip
    # A record that cannot be read is that question skipped with one line, never the file.
    (bad,) = load_benchmark("crossvid", tmp_path / "bad.json")
    assert bad.video_ids == () and "Q" in bad.extra["unusable"] and "\n" not in bad.extra["unusable"]
    (tmp_path / "PSS.json").write_text(json.dumps([{"id": 0, "video": "c.mp4", "segments": {"1": [0, 4]},
                                                    "answer": "1"}]))  # fmt: skip
    (short,) = load_benchmark("crossvid", tmp_path / "PSS.json")
    assert "at least two" in short.extra["unusable"]


def test_mvx_roles_reach_the_agents_request(tmp_path: Path) -> None:
    from vidscope.flows.eval_agents import request_of

    (tmp_path / "mvx.json").write_text(json.dumps([
        {"id": "r1", "task": "retrieval", "reference_video": "ref.mp4",
         "candidate_videos": ["c1.mp4", "c2.mp4"], "question": "Which candidate shows the same action?",
         "options": ["A. 1", "B. 2"], "answer": "B"},
        {"id": "r2", "task": "t",
         "videos": [{"id": "x.mp4", "role": "reference"}, {"id": "y.mp4", "role": "candidate"}],
         "question": "Same place?", "options": ["A. yes", "B. no"], "answer": "A"}]))  # fmt: skip
    one, two = load_benchmark("mvx_bench", tmp_path / "mvx.json")
    assert one.video_ids == ("ref.mp4", "c1.mp4", "c2.mp4")
    assert one.extra["roles"] == ["reference", "candidate", "candidate"]
    assert two.extra["roles"] == ["reference", "candidate"]
    request = request_of(one, ["s1", "s2", "s3"])
    assert request.video_ids == ["s1", "s2", "s3"] and request.scope == "videos"
    assert '{"video 1":"reference","video 2":"candidate","video 3":"candidate"}' in request.prompt
    assert request.prompt.endswith("Which candidate shows the same action?")
