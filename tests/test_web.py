"""The web page in headless Chromium (Debian's, driven by Playwright) against a real server.

What a new user does: search first and click a result (the player comes into view, plays the
moment's range, marks it on the timeline and stops at its end; ← / → and space work), ask and
compare (each agent step shows while the answer is on its way; earlier questions stay), and play a
video the server cannot read (the page says why). Each test saves screenshots under
``benchmarks/out/screenshots/`` (ignored by git) and asserts on them: elements in view, the
marked range drawn where the moment is.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLMServer, text, tool_call
from PIL import Image, ImageStat
from test_api import TOKEN, Library, serve, shared_library

from vidscope.api import create_app
from vidscope.core.settings import ApiSettings, Settings

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]
#: Where the screenshots go (ignored by git; the report points at them).
SHOTS = Path(__file__).resolve().parents[1] / "benchmarks" / "out" / "screenshots"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
#: The colour the page marks a playing moment's range with (style.css, #range-mark).
MARK_RGB = (245, 165, 36)

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed at /usr/bin/chromium"
)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return shared_library(tmp_path_factory)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def open_page(browser: Any, url: str, viewport: dict[str, int] = DESKTOP) -> tuple[Any, list[str]]:
    """A new page at ``url``; the list collects its script errors and console errors."""
    page = browser.new_page(viewport=viewport)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.goto(url)
    return page, problems


def screenshot(page: Any, name: str) -> Image.Image:
    """Save the viewport as ``SHOTS/name.png`` and return it for assertions."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return Image.open(io.BytesIO(path.read_bytes())).convert("RGB")


def in_view(page: Any, selector: str) -> dict[str, float]:
    """The box of ``selector``, asserted to lie wholly inside the viewport."""
    box = page.locator(selector).bounding_box()
    size = page.viewport_size
    assert box is not None, f"{selector} is not rendered"
    assert box["y"] >= -1 and box["y"] + box["height"] <= size["height"] + 1, (selector, box, size)
    assert box["x"] >= -1 and box["x"] + box["width"] <= size["width"] + 1, (selector, box, size)
    return box


def assert_marked(image: Image.Image, page: Any, start: float, end: float, duration: float) -> None:
    """The timeline's marked range is drawn (in its colour) from ``start`` to ``end``."""
    line = page.locator("#timeline").bounding_box()
    mark = page.locator("#range-mark").bounding_box()
    assert line is not None and mark is not None
    assert abs(mark["x"] - (line["x"] + line["width"] * start / duration)) < 3, (mark, line)
    assert abs(mark["width"] - line["width"] * (end - start) / duration) < 3, (mark, line)
    y = int(mark["y"] + mark["height"] / 2)
    inside = image.getpixel((int(mark["x"] + mark["width"] / 2), y))
    assert all(abs(a - b) < 30 for a, b in zip(inside, MARK_RGB, strict=True)), inside
    if end < duration - 0.5:  # past the range, the timeline is not marked
        outside = image.getpixel((int(mark["x"] + mark["width"] + 8), y))
        assert any(abs(a - b) > 60 for a, b in zip(outside, MARK_RGB, strict=True)), outside


def not_blank(image: Image.Image, box: dict[str, float]) -> None:
    """The part of ``image`` in ``box`` shows a picture, not a flat colour (a loaded thumbnail)."""
    crop = image.crop(
        (int(box["x"]), int(box["y"]), int(box["x"] + box["width"]), int(box["y"] + box["height"]))
    )
    spread = ImageStat.Stat(crop.convert("L")).stddev[0]
    assert spread > 20, f"looks uniform (stddev {spread:.1f})"


def assert_fits(page: Any, width: int) -> None:
    """Nothing is wider than the viewport: not the page, not any visible element's right edge."""
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    wide = page.evaluate(
        """(w) => [...document.querySelectorAll('body *')].filter(e => {
                const r = e.getBoundingClientRect();
                return r.width > 0 && r.height > 0 && r.right > w + 1; })
            .map(e => `${e.tagName}#${e.id}.${e.className} ${e.getBoundingClientRect().right}`)""",
        width,
    )
    assert not wide, wide


#: Command-line syntax the page must not show (a backticked command, a flag).
CLI_SYNTAX = re.compile(r"`|(^|[\s(/])--[a-z]")


def no_cli_syntax(page: Any) -> None:
    """The page's visible text carries no command-line advice."""
    shown = page.evaluate("() => document.body.innerText")
    assert not CLI_SYNTAX.search(shown), [line for line in shown.splitlines() if CLI_SYNTAX.search(line)]


def player_state(page: Any) -> dict[str, Any]:
    return page.evaluate(
        """() => { const p = document.querySelector('#player');
            return {t: p.currentTime, paused: p.paused, error: p.error && p.error.code,
                    d: p.duration, src: p.currentSrc}; }"""
    )


def wait_images(page: Any, selector: str) -> None:
    page.wait_for_function(
        f"() => [...document.querySelectorAll({json.dumps(selector)})]"
        ".every(img => img.complete && img.naturalWidth > 0)",
        timeout=20_000,
    )


def test_search_first_a_result_plays_its_range_in_view_and_stops_at_its_end(
    browser: Any, library: Library
) -> None:
    from playwright.sync_api import expect

    # A high relevance bar: "ocean" (relevance ~0.8) finds no moment over it, only under it.
    settings = Settings(
        data_dir=library.data_dir,
        api=ApiSettings(video_roots=[library.root]),
        search={"moment_min_relevance": 0.9},  # set explicitly: it wins over the calibrated bar
    )
    with serve(create_app(settings)) as url:
        page, problems = open_page(browser, url)
        expect(page.locator(".video-row", has_text="fruit and sea.mp4")).to_be_visible(timeout=20_000)
        # Search comes first: its box is at the top of the page, in view without scrolling.
        assert in_view(page, "#search-q")["y"] < 150
        # Stage states are labelled: a summary in words, a title per dot, a legend.
        row = page.locator(".video-row", has_text="fruit and sea.mp4")
        expect(row.locator(".summary")).to_have_text(
            re.compile(r"^ready( · \d+ (skipped|without a model))*$")
        )
        titles = row.locator(".stage").evaluate_all("ds => ds.map(d => d.title)")
        assert len(titles) >= 10 and all(re.match(r"^[a-z_]+: \w", t) for t in titles), titles
        expect(page.locator("#stage-legend")).to_contain_text("skipped")

        # What is off is disabled, with the reason in words (no command to type).
        features = page.evaluate("async () => (await fetch('/api/features')).json()")
        image_input = page.locator("#search-image")
        if not features["visual_search"]["on"]:
            expect(image_input).to_be_disabled()
            reason = page.get_attribute("#search-image-label", "title") or ""
            assert reason.startswith("visual search is off") and "`" not in reason, reason
            assert image_input.get_attribute("aria-description") == reason
        if not features["planner"]["on"]:  # no chat model here: the agents are off, and say why
            expect(page.locator("#ask-agent")).to_be_disabled()
            assert "no chat model" in (page.get_attribute("#ask-agent", "title") or "")

        page.fill("#search-q", "red apple")
        page.press("#search-q", "Enter")
        cards = page.locator("#search-results .card")
        expect(cards.first).to_be_visible(timeout=30_000)
        apple = cards.first
        expect(apple.locator(".title")).to_have_text("fruit and sea.mp4")
        expect(apple.locator(".time")).to_have_text("0:00.0–0:05.0")
        expect(apple.locator(".said")).to_contain_text("RED APPLE")
        expect(apple.locator(".level")).to_have_text("retrieved")
        expect(apple.locator(".relevance")).to_have_text(re.compile(r"^(relevance \d+%|score [\d.]+)$"))
        wait_images(page, "#search-results .card img")

        # Played four times as fast, the 5 s moment ends in ~1.3 s: the player stops there.
        page.evaluate("() => { document.querySelector('#player').playbackRate = 4; }")
        page.evaluate(
            "() => { const p = document.querySelector('#player');"
            " p.addEventListener('loadedmetadata', () => { p.playbackRate = 4; }); }"
        )
        apple.click()
        in_view(page, "#player")
        page.wait_for_function(
            "() => { const p = document.querySelector('#player'); return p.currentTime > 1 && p.paused; }",
            timeout=30_000,
        )
        state = player_state(page)
        assert state["error"] is None and abs(state["d"] - 8.0) < 0.3
        assert 4.8 <= state["t"] <= 5.1, state  # stopped at the moment's end, not the video's
        assert state["src"].endswith(f"/api/videos/{library.video_id}/stream")
        expect(page.locator("#now-playing")).to_have_text("fruit and sea.mp4 · 0:00.0–0:05.0")
        assert page.get_attribute("#range-mark", "data-end") == "5"
        desktop = screenshot(page, "search-play-desktop")
        assert desktop.size == (DESKTOP["width"], DESKTOP["height"])
        assert_marked(desktop, page, 0.0, 5.0, state["d"])
        not_blank(desktop, apple.locator("img").bounding_box())

        page.keyboard.press("Space")  # the keyboard alone: space plays and pauses
        assert player_state(page)["paused"] is False
        page.keyboard.press("Space")
        assert player_state(page)["paused"] is True

        # A library row plays its video from the start.
        page.evaluate("() => document.querySelector('#player').pause()")
        page.locator(".video-row", has_text="fruit and sea.mp4").click()
        expect(page.locator("#now-playing")).to_have_text("fruit and sea.mp4 from 0:00.0")
        expect(page.locator("#range-mark")).to_be_hidden()

        # By image: the server's answer (when it has visual search; else the control is off).
        frame = page.evaluate(
            f"async () => {{ const r = await fetch('/api/videos/{library.video_id}/thumbnail?t=6');"
            " return Array.from(new Uint8Array(await r.arrayBuffer())); }"
        )
        if features["visual_search"]["on"]:
            with page.expect_response("**/api/search/image*") as answered:
                page.set_input_files(
                    "#search-image",
                    files=[{"name": "ocean.jpg", "mimeType": "image/jpeg", "buffer": bytes(frame)}],
                )
            assert answered.value.ok
            expect(cards.first).to_be_visible()

        # At phone width: one column, search on top, a result's click brings the player into view.
        page.set_viewport_size(PHONE)
        page.fill("#search-q", "ocean")
        page.press("#search-q", "Enter")
        # The note about the moments under the bar, in words, offers "show" (the terminal's --all).
        note = page.locator("#search-results .note", has_text="relevance bar")
        expect(note).to_have_text(
            re.compile(r"^no moment passed the relevance bar 0\.90 for 'ocean' \(best 0\.\d\d\) show$"),
            timeout=30_000,
        )
        expect(cards).to_have_count(0)
        assert_fits(page, PHONE["width"])
        no_cli_syntax(page)
        note.locator("button.show-all").click()
        ocean = page.locator("#search-results .card", has_text="BLUE OCEAN").first
        expect(ocean).to_be_visible(timeout=30_000)
        page.evaluate("() => window.scrollTo(0, 0)")
        ocean.focus()
        page.keyboard.press("Enter")  # a focused card plays from the keyboard as from a tap
        in_view(page, "#player")
        page.wait_for_function(
            "() => Math.abs(document.querySelector('#player').currentTime - 5) < 0.5", timeout=10_000
        )
        phone = screenshot(page, "search-play-phone")
        assert phone.size == (PHONE["width"], PHONE["height"])
        assert_marked(phone, page, 5.0, 8.0, player_state(page)["d"])
        assert_fits(page, PHONE["width"])
        no_cli_syntax(page)
        expect(page.locator("#search-results .show-all")).to_have_count(0)  # all are shown now
        page.screenshot(path=str(SHOTS / "search-play-phone-full.png"), full_page=True)
        page.close()
    assert not problems, problems


def chat_settings(library: Library, llm_server: ScriptedLLMServer, data_dir: Path | None = None) -> Settings:
    """Settings over ``library`` whose planner is the scripted model server; ``[api] video_roots``
    is left unset, as shipped (on loopback: the folders of the ingested videos)."""
    models = {
        "chat": "openai:scripted",
        "options": {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "timeout_s": 30}},
    }
    return Settings(data_dir=data_dir or library.data_dir, models=models)


def test_ask_streams_each_step_then_a_cited_answer_and_keeps_the_conversation(
    browser: Any, library: Library, llm_server: ScriptedLLMServer
) -> None:
    from playwright.sync_api import expect

    search = {"video_id": library.video_id, "query": "blue ocean", "top_k": 2}
    # A long unbroken string (a URL) in the answer: it wraps inside the Ask panel.
    url_in_answer = "https://example.org/" + "x" * 300
    answer = f"The ocean shows from 0:05. {url_in_answer}"
    llm_server.script(
        [
            tool_call("clip_search", search, call_id="s1"),
            # The model takes its time over the answer: the step is on the page meanwhile.
            replace(tool_call("finish", {"answer": answer, "citations": [[5.0, 8.0]]}), seconds=2.5),
            tool_call("finish", {"answer": "An apple, at the start.", "citations": [[0.0, 5.0]]}),
        ]
    )
    with serve(create_app(chat_settings(library, llm_server))) as url:
        page, problems = open_page(browser, url)
        expect(page.locator(".video-row", has_text="fruit and sea.mp4")).to_be_visible(timeout=20_000)
        page.fill("#ask-q", "Web page: when does the blue ocean show?")
        page.press("#ask-q", "Enter")
        turn = page.locator("#conversation .turn").first
        step = turn.locator(".step").first
        # The step in words: the tool (its name as the title), the query, where, what it found.
        expect(step.locator(".tool")).to_have_text("searched the clips", timeout=30_000)
        assert step.locator(".tool").get_attribute("title") == "clip_search"
        # Streamed: the step is shown while the answer is still being written.
        expect(turn.locator(".pending")).to_contain_text("thinking… 1 step")
        expect(turn.locator(".answer-text")).to_have_count(0)
        expect(step.locator(".query")).to_have_text("“blue ocean” in fruit and sea.mp4")
        expect(step.locator(".observation")).not_to_be_empty()
        assert "{" not in step.inner_text() and '"' not in step.inner_text()  # no raw JSON
        thinking = screenshot(page, "ask-streaming")
        in_view(page, "#conversation .turn .step")
        assert thinking.size == (DESKTOP["width"], DESKTOP["height"])

        expect(turn.locator(".answer-text")).to_have_text(answer, timeout=30_000)
        # The long answer wraps inside the Ask panel; the trace id links to the whole trace.
        overflow = page.evaluate(
            "() => ['#ask-panel', '#conversation .answer-text'].map(s => {"
            " const e = document.querySelector(s); return e.scrollWidth - e.clientWidth; })"
        )
        assert overflow == [0, 0], overflow  # no content runs past the panel or the answer's box
        assert_fits(page, DESKTOP["width"])
        link = turn.locator("a.trace-link")
        href = link.get_attribute("href") or ""
        assert re.fullmatch(r"/api/traces/[0-9a-f]{16}", href), href
        expect(link).to_have_text(f"trace {href.rsplit('/', 1)[1]}")
        traced = page.evaluate(f"async () => (await fetch('{href}')).json()")
        assert traced["answer"] == answer and traced["trace"][0]["tool"] == "clip_search"
        cited = turn.locator(".evidence")
        expect(cited).to_have_count(1)
        expect(cited.locator(".time")).to_have_text("0:05.0–0:08.0")
        expect(cited.locator(".level")).to_have_text("retrieved")
        expect(turn.locator("details.trace summary")).to_have_text("2 steps")

        # A second question: the first stays on the page above it.
        page.fill("#ask-q", "Web page: and what is at the start?")
        page.click("#ask-form button")
        turns = page.locator("#conversation .turn")
        expect(turns).to_have_count(2)
        expect(turns.nth(1).locator(".answer-text")).to_have_text("An apple, at the start.", timeout=30_000)
        expect(turns.nth(0).locator(".question")).to_contain_text("when does the blue ocean show?")
        expect(page.locator("#ask-agent")).to_be_enabled()  # a chat model here: the agents are on

        # A citation plays its moment, marked.
        wait_images(page, "#conversation .evidence img")
        cited.click()
        page.wait_for_function(
            "() => Math.abs(document.querySelector('#player').currentTime - 5) < 0.3", timeout=30_000
        )
        page.evaluate("() => document.querySelector('#player').pause()")
        in_view(page, "#player")
        answered = screenshot(page, "ask-answered")
        assert_marked(answered, page, 5.0, 8.0, player_state(page)["d"])
        not_blank(answered, cited.locator("img").bounding_box())
        # At phone width after the ask (the URL included) nothing is wider than the screen.
        page.set_viewport_size(PHONE)
        turns.nth(0).locator(".answer-text").scroll_into_view_if_needed()
        screenshot(page, "ask-answered-phone")
        assert_fits(page, PHONE["width"])
        no_cli_syntax(page)
        page.close()
    assert not problems, problems
    assert llm_server.pending == 0


def test_a_question_asked_before_the_agent_menu_fills_goes_to_the_default_agent(
    browser: Any, library: Library, llm_server: ScriptedLLMServer
) -> None:
    """CI caught the page sending ``"agent": null`` (a 422) when the question went out before
    ``/api/strategies`` answered; here that answer never comes, so the race is lost every time."""
    from playwright.sync_api import expect

    llm_server.script([tool_call("finish", {"answer": "An apple.", "citations": [[0.0, 5.0]]})])
    with serve(create_app(chat_settings(library, llm_server))) as url:
        page = browser.new_page(viewport=DESKTOP)
        page.route("**/api/strategies", lambda route: route.abort())
        page.goto(url)
        expect(page.locator(".video-row", has_text="fruit and sea.mp4")).to_be_visible(timeout=20_000)
        expect(page.locator("#ask-agent option")).to_have_count(0)
        page.fill("#ask-q", "Web page: what is at the start?")
        page.press("#ask-q", "Enter")
        expect(page.locator("#conversation .turn .answer-text")).to_have_text("An apple.", timeout=30_000)
        page.close()
    assert llm_server.pending == 0


@pytest.fixture(scope="module")
def two_videos(library: Library, tmp_path_factory: pytest.TempPathFactory) -> tuple[Library, str]:
    """A copy of the shared library with a second video ingested into it (the shared one stays as
    other modules expect it)."""
    from media import text_video

    from vidscope.flows.ingest import run_ingest
    from vidscope.models.open_store import open_store

    base = tmp_path_factory.mktemp("web-compare")
    shutil.copytree(library.data_dir, base / "data")
    copy = Library(base / "data", library.root, library.outside, library.video, library.video_id)
    # Other modules may have added videos to the shared library before this one runs: the copy keeps
    # only its own video, so the page lists exactly the two this module compares.
    store = open_store(copy.settings())
    for row in store.rows(store.videos, columns=["video_id"]).to_pylist():
        if row["video_id"] != library.video_id:
            store.delete_video(row["video_id"])
    second = text_video(base / "videos" / "green field.mp4", duration=4.0, texts=[(0.0, 4.0, "GREEN FIELD")])
    (report,) = run_ingest([str(second)], copy.settings())
    assert not report.failed, report
    return copy, report.video_id or ""


def test_compare_streams_its_steps_and_cites_clickable_moments_of_each_video(
    browser: Any, two_videos: tuple[Library, str], llm_server: ScriptedLLMServer
) -> None:
    from playwright.sync_api import expect

    library, second = two_videos
    llm_server.script(
        [
            text('{"type": "comparison"}'),
            tool_call("temporal_grounding", {"video_id": library.video_id, "query": "the sea"}, call_id="g"),
            replace(
                tool_call(
                    "answer",
                    {
                        "answer": "Only the first video shows the sea.",
                        "citations": [
                            {"video_id": library.video_id, "start": 5.0, "end": 8.0},
                            {"video_id": second, "start": 0.0, "end": 4.0},  # no tool looked there
                        ],
                    },
                    call_id="a",
                ),
                seconds=2.0,
            ),
        ]
    )
    settings = chat_settings(library, llm_server, library.data_dir)
    with serve(create_app(settings)) as url:
        page, problems = open_page(browser, url)
        boxes = page.locator("#compare-videos input[type=checkbox]")
        expect(boxes).to_have_count(2, timeout=20_000)
        page.fill("#compare-q", "Which of these videos shows the sea?")
        page.click("#compare-form button")  # nothing ticked: one line, no request
        expect(page.locator("#compare-hint")).to_have_text("pick at least one video to compare")
        expect(page.locator("#comparisons .turn")).to_have_count(0)

        for box in boxes.all():
            box.check()
        page.select_option("#compare-agent", "sama")
        with page.expect_request("**/api/compare/stream") as sent:
            page.click("#compare-form button")
        body = sent.value.post_data_json
        assert sorted(body["videos"]) == sorted([library.video_id, second]) and body["agent"] == "sama"
        turn = page.locator("#comparisons .turn").first
        grounding = turn.locator(".step[data-tool=temporal_grounding]")
        expect(grounding).to_be_visible(timeout=30_000)
        expect(turn.locator(".answer-text")).to_have_count(0)  # the step came before the answer
        expect(grounding.locator(".query")).to_have_text("“the sea” in fruit and sea.mp4")

        expect(turn.locator(".answer-text")).to_have_text(
            "Only the first video shows the sea.", timeout=30_000
        )
        expect(turn.locator(".compare-meta")).to_contain_text("answer by sama (")
        cited = turn.locator(".evidence")
        expect(cited).to_have_count(2)
        expect(cited.nth(0)).to_contain_text("fruit and sea.mp4")
        # SAMA's grounding candidates are "hints, not evidence" (issue 35): the moment they pointed
        # at is echoed and unverified, its badge says why; nothing pointed at the second.
        expect(cited.nth(0)).to_have_class("moment evidence unverified")
        expect(cited.nth(0).locator(".level")).to_have_text("echoed")
        assert "hints" in (cited.nth(0).locator(".level").get_attribute("title") or "")
        expect(cited.nth(1)).to_contain_text("green field.mp4")
        expect(cited.nth(1)).to_have_class("moment evidence unverified")
        expect(cited.nth(1).locator(".level")).to_have_text("none")

        # A cited moment of the second video plays there.
        cited.nth(1).click()
        page.wait_for_function(
            f"() => document.querySelector('#player').currentSrc.endsWith('/api/videos/{second}/stream')"
            " && document.querySelector('#player').readyState >= 1",
            timeout=30_000,
        )
        page.evaluate("() => document.querySelector('#player').pause()")
        expect(page.locator("#now-playing")).to_have_text("green field.mp4 · 0:00.0–0:04.0")
        in_view(page, "#player")
        in_view(page, "#comparisons .turn .answer-text")
        image = screenshot(page, "compare-answered")
        assert_marked(image, page, 0.0, 4.0, player_state(page)["d"])

        # ← and → move between the cited moments (the list last played from) and play them.
        page.keyboard.press("ArrowLeft")
        expect(cited.nth(0)).to_have_class("moment evidence unverified playing")
        expect(page.locator("#now-playing")).to_have_text("fruit and sea.mp4 · 0:05.0–0:08.0")
        page.keyboard.press("ArrowRight")
        expect(cited.nth(1)).to_have_class("moment evidence unverified playing")
        # At phone width after the comparison nothing is wider than the screen.
        page.set_viewport_size(PHONE)
        turn.locator(".answer-text").scroll_into_view_if_needed()
        screenshot(page, "compare-answered-phone")
        assert_fits(page, PHONE["width"])
        no_cli_syntax(page)
        page.close()
    assert not problems, problems
    assert llm_server.pending == 0


def test_a_video_that_cannot_play_says_why_on_the_page(browser: Any, library: Library) -> None:
    from playwright.sync_api import expect

    # Outside the configured roots: the library says so, and a click explains it.
    with serve(create_app(library.settings(video_roots=[library.outside]))) as url:
        page, problems = open_page(browser, url)
        row = page.locator(".video-row", has_text="fruit and sea.mp4")
        expect(row.locator(".unplayable")).to_have_text("cannot play", timeout=20_000)
        row.click()
        expect(page.locator("#player-error")).to_have_text(
            "fruit and sea.mp4 cannot be played: its file is outside [api] video_roots"
        )
        in_view(page, "#player-error")
        screenshot(page, "library-outside-roots")
        page.close()
    assert not problems, problems

    # The default config on loopback plays it; moved away after the page loaded, the server's
    # reason for the failed stream is shown, not a silent black player.
    with serve(create_app(Settings(data_dir=library.data_dir))) as url:
        page, problems = open_page(browser, url)
        row = page.locator(".video-row", has_text="fruit and sea.mp4")
        expect(row).to_be_visible(timeout=20_000)
        expect(row.locator(".unplayable")).to_have_count(0)
        moved = library.video.with_name("moved away.mp4")
        library.video.rename(moved)
        try:
            row.click()
            error = page.locator("#player-error")
            expect(error).to_have_text(
                "fruit and sea.mp4 cannot be played: its file is no longer where it was ingested from "
                "(moved or deleted)",
                timeout=20_000,
            )
        finally:
            moved.rename(library.video)
        in_view(page, "#player-error")
        image = screenshot(page, "library-moved")
        box = page.locator("#player-error").bounding_box()
        assert box is not None
        inside = image.getpixel((int(box["x"] + 3), int(box["y"] + 3)))
        assert inside[0] > inside[2] + 10, inside  # the reason sits on its reddish background
        page.close()
    assert all("404" in p for p in problems), problems  # only the refused media requests are logged


@pytest.mark.slow
def test_an_ingestion_started_on_the_page_shows_each_stage_live_then_the_video_plays(
    browser: Any, library: Library, tmp_path: Path
) -> None:
    from media import text_video
    from playwright.sync_api import expect

    data = tmp_path / "data"
    shutil.copytree(library.data_dir, data)
    folder = tmp_path / "new videos"
    text_video(folder / "harbour.mp4", duration=3.0, texts=[(0.0, 3.0, "HARBOUR")])
    settings = Settings(data_dir=data, api=ApiSettings(video_roots=[folder]))
    with serve(create_app(settings)) as url:
        page, problems = open_page(browser, url)
        expect(page.locator(".video-row")).not_to_have_count(0, timeout=20_000)
        page.fill("#ingest-path", "harbour.mp4")  # relative to a video root
        page.click("#ingest-form button")
        status = page.locator("#ingest-status")
        # While it runs: the job's state and a chip per stage, updated as the stages go.
        expect(status).to_contain_text("ingesting 1 file: running", timeout=30_000)
        expect(status.locator(".chip").first).to_be_visible(timeout=30_000)
        seen = page.evaluate("() => [...document.querySelectorAll('#ingest-status .chip')].map(c => c.title)")
        screenshot(page, "ingest-running")
        expect(status).to_have_text("ingestion done", timeout=240_000)
        assert seen and all(": " in title for title in seen), seen
        row = page.locator(".video-row", has_text="harbour.mp4")
        expect(row.locator(".summary")).to_have_text(re.compile(r"^ready\b"))
        row.click()
        page.wait_for_function("() => document.querySelector('#player').readyState >= 1", timeout=30_000)
        expect(page.locator("#player-error")).to_be_hidden()
        page.close()
    assert not problems, problems


def test_with_a_token_the_page_asks_for_it_then_shows_the_library(browser: Any, library: Library) -> None:
    from playwright.sync_api import expect

    with serve(create_app(library.settings(token=TOKEN))) as url:
        page = browser.new_page()
        page.goto(url)
        expect(page.locator("#login")).to_be_visible(timeout=20_000)
        expect(page.locator("#main")).to_be_hidden()
        page.fill("#token", "wrong")
        page.click("#login-form button")
        expect(page.locator("#status")).to_contain_text("log-in failed")
        page.fill("#token", TOKEN)
        page.click("#login-form button")
        expect(page.locator(".video-row", has_text="fruit and sea.mp4")).to_be_visible()
        # Media requests carry the session cookie: a thumbnail loads without a header.
        status = page.evaluate(
            f"async () => (await fetch('/api/videos/{library.video_id}/thumbnail?t=1')).status"
        )
        assert status == 200
        page.close()


def test_a_videos_overview_plays_a_chapter_on_click_and_marks_search_hits_on_its_transcript(
    browser: Any, tmp_path: Path
) -> None:
    """The view per video (issue 39): summary, chapters, highlights, transcript, at phone width."""
    from media import text_video
    from playwright.sync_api import expect

    from vidscope.flows.ingest import run_ingest

    # Two parts of 12 s told by slides only (a title, then what it is about): two chapters.
    slides = [(0, 3, "BREAD BAKING"), (3, 12, "FLOUR WATER YEAST"), (12, 15, "VOLCANO LAVA")]
    video = text_video(
        tmp_path / "videos" / "two parts.mp4",
        duration=24.0,
        fps=5,
        texts=slides + [(15, 24, "MAGMA ASH CRUST")],
    )
    settings = Settings(data_dir=tmp_path / "data")
    (report,) = run_ingest([str(video)], settings, optimize=False)
    assert report.status == "ok", report
    with serve(create_app(settings)) as url:
        page, problems = open_page(browser, url, PHONE)
        row = page.locator(".video-row", has_text="two parts.mp4")
        expect(row).to_be_visible(timeout=20_000)
        row.locator("button.about").click()
        chapters = page.locator("#chapters .chapter")
        expect(chapters).to_have_count(2, timeout=20_000)
        expect(chapters.locator(".title")).to_have_text(["BREAD BAKING", "VOLCANO LAVA"])
        expect(chapters.nth(1).locator(".time")).to_have_text("0:12.0")
        expect(page.locator("#overview-title")).to_have_text("two parts.mp4")
        expect(page.locator("#overview-summary")).to_contain_text("MAGMA ASH CRUST")
        expect(page.locator("#highlights .highlight")).not_to_have_count(0)
        lines = page.locator("#transcript .line")
        expect(lines).to_have_count(4)

        # A moment search marks the lines its moments overlap, and the query's words in them.
        page.fill("#search-q", "magma crust")
        with page.expect_response("**/api/moments*") as answered:
            page.press("#search-q", "Enter")
        found = [m for m in answered.value.json()["moments"] if m["kind"] == "clip"]
        expect(page.locator("#search-results .card").first).to_be_visible(timeout=30_000)
        spans = [
            (float(a), float(b))
            for a, b in zip(
                lines.evaluate_all("ls => ls.map(l => l.dataset.start)"),
                lines.evaluate_all("ls => ls.map(l => l.dataset.end)"),
                strict=True,
            )
        ]
        expected = [any(m["start"] < b and m["end"] > a for m in found) for a, b in spans]
        hit = lines.evaluate_all("ls => ls.map(l => l.classList.contains('hit'))")
        assert hit == expected and hit[-1], (hit, found)
        marked = page.locator("#transcript .line.hit mark").all_inner_texts()
        assert {"MAGMA", "CRUST"} <= set(marked) and set(marked) <= {"MAGMA", "CRUST"}, marked
        expect(page.locator("#transcript-hits")).to_contain_text("found by “magma crust”")

        # Clicking a chapter plays the video from its start; the player comes into view.
        chapters.nth(1).click()
        page.wait_for_function(
            "() => { const p = document.querySelector('#player');"
            " return p.readyState >= 1 && Math.abs(p.currentTime - 12) < 0.6; }",
            timeout=30_000,
        )
        page.evaluate("() => document.querySelector('#player').pause()")
        in_view(page, "#player")
        assert page.get_attribute("#range-mark", "data-end") == "24"
        expect(page.locator("#now-playing")).to_have_text("two parts.mp4 · 0:12.0–0:24.0")
        # Nothing is wider than the phone: not the page, not a line of the overview.
        page.locator("#overview-panel").scroll_into_view_if_needed()
        shot = screenshot(page, "overview-phone")
        assert shot.size == (PHONE["width"], PHONE["height"])
        assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
        widest = page.evaluate(
            "() => Math.max(...[...document.querySelectorAll('#overview-panel *')]"
            ".map(e => e.getBoundingClientRect().right))"
        )
        assert widest <= PHONE["width"], widest
        page.screenshot(path=str(SHOTS / "overview-phone-full.png"), full_page=True)
        page.close()
    assert not problems, problems
