"""The web page in headless Chromium (Debian's, driven by Playwright) against a real server.

The library view lists the ingested video, the ask box answers with evidence thumbnails, and
clicking one seeks the player to the moment. A screenshot is taken under tmp_path and checked.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from llm_server import ScriptedLLMServer, text, tool_call
from PIL import Image, ImageStat
from test_api import TOKEN, Library, serve, shared_library

from vidscope.api import create_app
from vidscope.models.open_store import open_store

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
]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed at /usr/bin/chromium"
)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    return shared_library(tmp_path_factory)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def test_ask_then_click_evidence_plays_the_video_from_that_moment(
    browser: object, library: Library, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    with serve(create_app(library.settings())) as url:
        page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.goto(url)

        row = page.locator(".video-row", has_text="fruit and sea.mp4")
        expect(row).to_be_visible(timeout=20_000)
        expect(row.locator(".stage.done", has_text="ocr")).to_be_visible()
        row.click()
        assert page.locator("#ask-video").input_value() == library.video_id

        page.fill("#ask-q", "Where is the blue ocean?")
        page.click("#ask-form button")
        evidence = page.locator("#answer .evidence").first
        expect(evidence).to_be_visible(timeout=60_000)
        expect(page.locator("#answer-text")).to_contain_text("BLUE OCEAN")
        start = float(evidence.get_attribute("data-start") or "nan")
        assert start == 5.0
        expect(evidence.locator(".time")).to_have_text("0:05.0–0:08.0")
        # The citation's evidence level is shown (issue 28): a clip hit, so retrieved.
        expect(evidence.locator(".level")).to_have_text("retrieved")
        page.wait_for_function(
            "() => [...document.querySelectorAll('#answer .evidence img')]"
            ".every(img => img.complete && img.naturalWidth > 0)",
            timeout=20_000,
        )

        page.evaluate(
            """() => {
                window.seekedAt = [];
                const player = document.querySelector('#player');
                player.addEventListener('seeked', () => window.seekedAt.push(player.currentTime));
            }"""
        )
        evidence.click()
        page.wait_for_function("() => window.seekedAt.length > 0", timeout=30_000)
        seeked = page.evaluate("window.seekedAt[0]")
        assert abs(seeked - start) < 0.1, seeked
        state = page.evaluate(
            """() => { const p = document.querySelector('#player');
                p.pause();
                return {error: p.error && p.error.code, t: p.currentTime, d: p.duration,
                        src: p.currentSrc}; }"""
        )
        assert state["error"] is None and abs(state["d"] - 8.0) < 0.3
        assert start - 0.1 <= state["t"] <= 8.0
        assert state["src"].endswith(f"/api/videos/{library.video_id}/stream")
        expect(page.locator("#now-playing")).to_contain_text("fruit and sea.mp4 from 0:05.0")

        # The search box answers too: moments across the library, or the reason it cannot search yet.
        page.fill("#search-q", "blue ocean")
        page.click("#search-form button")
        store = open_store(library.settings())
        if store.count(store.clips):
            expect(page.locator("#search-results .hit").first).to_contain_text("fruit and sea.mp4")
        else:
            expect(page.locator("#search-results")).to_contain_text("library is empty")
            problems = [p for p in problems if "409" not in p]  # the refused request is logged

        box = evidence.bounding_box()
        shot = tmp_path / "page.png"
        page.screenshot(path=str(shot), full_page=False)
        page.close()
    assert not problems, problems

    image = Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")
    assert image.size == (1280, 900)
    assert max(hi - lo for lo, hi in image.getextrema()) > 100  # not a blank page
    assert box is not None
    thumb = image.crop((int(box["x"]), int(box["y"]), int(box["x"] + box["width"]), int(box["y"] + 80)))
    spread = ImageStat.Stat(thumb.convert("L")).stddev[0]
    assert spread > 20, f"the evidence thumbnail looks uniform (stddev {spread:.1f})"


def test_with_a_token_the_page_asks_for_it_then_shows_the_library(browser: object, library: Library) -> None:
    from playwright.sync_api import expect

    with serve(create_app(library.settings(token=TOKEN))) as url:
        page = browser.new_page()  # type: ignore[attr-defined]
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


@pytest.fixture(scope="module")
def two_videos(library: Library, tmp_path_factory: pytest.TempPathFactory) -> tuple[Library, str]:
    """A copy of the shared library with a second video ingested into it (the shared one stays as
    other modules expect it)."""
    import shutil

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


def test_the_compare_box_asks_across_the_ticked_videos_and_plays_a_cited_moment(
    browser: object, two_videos: tuple[Library, str]
) -> None:
    from playwright.sync_api import expect

    library, second = two_videos
    with serve(create_app(library.settings())) as url:
        page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.goto(url)

        # One checkbox per video of the library.
        boxes = page.locator("#compare-videos input[type=checkbox]")
        expect(boxes).to_have_count(2, timeout=20_000)
        page.fill("#compare-q", "Where is the blue ocean?")
        page.click("#compare-form button")  # nothing ticked: one line, no request
        expect(page.locator("#compare-answer")).to_have_text("pick at least one video to compare")

        page.locator("#compare-videos label", has_text="fruit and sea.mp4").locator("input").check()
        page.locator("#compare-videos label", has_text="green field.mp4").locator("input").check()
        with page.expect_response("**/api/compare") as response_info:
            page.click("#compare-form button")
        response = response_info.value
        assert response.status == 200
        sent = response.request.post_data_json
        assert sorted(sent["videos"]) == sorted([library.video_id, second]) and sent["agent"] == "sama"

        # No planner is configured: the best moment of each video, side by side, and the page says so.
        text = page.locator("#compare-text")
        expect(text).to_contain_text(
            'fruit and sea.mp4 0:05–0:08 (5.0–8.0s): on screen "BLUE OCEAN"', timeout=60_000
        )
        expect(text).to_contain_text('green field.mp4 0:00–0:04 (0.0–4.0s): on screen "GREEN FIELD"')
        expect(page.locator("#compare-answer .note")).to_contain_text("No planner model is configured")
        expect(page.locator("#compare-meta")).to_contain_text("extractive answer · 2 videos")
        ocean = page.locator("#compare-answer .evidence", has_text="fruit and sea.mp4")
        expect(ocean.locator(".time")).to_have_text("0:05.0–0:08.0")
        assert "unverified" not in (ocean.get_attribute("class") or "")

        # A cited time is clickable, like the ask box's evidence: the player jumps there.
        page.evaluate(
            """() => {
                window.seekedAt = [];
                const player = document.querySelector('#player');
                player.addEventListener('seeked', () => window.seekedAt.push(player.currentTime));
            }"""
        )
        ocean.click()
        page.wait_for_function("() => window.seekedAt.length > 0", timeout=30_000)
        assert abs(page.evaluate("window.seekedAt[0]") - 5.0) < 0.1
        expect(page.locator("#now-playing")).to_contain_text("fruit and sea.mp4 from 0:05.0")
        page.close()
    assert not problems, problems


def test_with_a_planner_the_compare_box_shows_the_agent_and_its_cited_moments(
    browser: object, two_videos: tuple[Library, str], llm_server: ScriptedLLMServer
) -> None:
    from playwright.sync_api import expect

    from vidscope.core.settings import ApiSettings, Settings

    library, second = two_videos
    models = {
        "chat": "openai:scripted",
        "options": {"openai": {"base_url": llm_server.base_url, "max_retries": 0, "timeout_s": 30}},
    }
    settings = Settings(data_dir=library.data_dir, api=ApiSettings(video_roots=[library.root]), models=models)
    llm_server.script(
        [
            text('{"type": "comparison"}'),
            tool_call("temporal_grounding", {"video_id": library.video_id, "query": "the sea"}, call_id="g"),
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
        ]
    )
    with serve(create_app(settings)) as url:
        page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        page.goto(url)
        expect(page.locator("#compare-videos input[type=checkbox]")).to_have_count(2, timeout=20_000)
        for box in page.locator("#compare-videos input[type=checkbox]").all():
            box.check()
        page.select_option("#compare-agent", "sama")
        page.fill("#compare-q", "Which of these videos shows the sea?")
        page.click("#compare-form button")
        expect(page.locator("#compare-text")).to_have_text(
            "Only the first video shows the sea.", timeout=60_000
        )
        expect(page.locator("#compare-meta")).to_contain_text("answer by sama (")
        expect(page.locator("#compare-answer .note")).to_have_count(0)
        cited = page.locator("#compare-answer .evidence")
        expect(cited).to_have_count(2)
        # The citation a tool returned evidence for is verified; the other is marked unverified.
        expect(cited.nth(0)).to_contain_text("fruit and sea.mp4")
        assert "unverified" not in (cited.nth(0).get_attribute("class") or "")
        expect(cited.nth(1)).to_contain_text("green field.mp4")
        expect(cited.nth(1)).to_have_class("evidence unverified")
        page.close()
    assert llm_server.pending == 0
