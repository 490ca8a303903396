// vidscope's page: search first, a player that plays a moment's range and marks it, the library,
// ingestion, and ask / compare conversations whose agent steps stream in as they happen.
// Everything from the server is inserted as text (never as HTML): video text is data.
"use strict";

const $ = (selector) => document.querySelector(selector);
let videos = [];

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "className") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function fmtTime(seconds) {
  const s = Math.max(0, seconds);
  const m = Math.floor(s / 60);
  const rest = (s - m * 60).toFixed(1).padStart(4, "0");
  return `${m}:${rest}`;
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function setStatus(text, isError = false) {
  const status = $("#status");
  status.textContent = text;
  status.classList.toggle("error", isError);
}

// ------------------------------------------------------------------ words for a page user

// Command-line advice in a server's note: a backticked command (`vidscope models pull`) or a flag
// (--all, --tau-soft). The notes are written for the terminal; the page keeps what they say and
// leaves out what to type (its own controls, such as "show", do what the flag would).
const CLI_ADVICE = /`[^`]*`|(^|[\s(/])--[a-z][\w-]*/i;

// ``text`` without its command-line advice: parenthesised parts and clauses (between "; ", ". ",
// " — " or ", or ") that carry a command or a flag are dropped; the rest is kept as written.
function plainWords(text) {
  let out = String(text || "").replace(/\s*\(([^()]*)\)/g, (whole, inner) => {
    if (!CLI_ADVICE.test(inner)) return whole;
    const kept = inner.split(/;\s*/).filter((part) => !CLI_ADVICE.test(part));
    return kept.length ? ` (${kept.join("; ")})` : "";
  });
  const pieces = out.split(/(;\s+|\.\s+|\s+[—–]\s+|,\s+or\s+)/);
  const kept = [];
  for (let i = 0; i < pieces.length; i += 2) {
    if (CLI_ADVICE.test(pieces[i])) continue;
    if (kept.length) kept.push(pieces[i - 1]);
    kept.push(pieces[i]);
  }
  out = kept.join("").replace(/\s+([,;.])/g, "$1").trim().replace(/[;,:—–]\s*$/, "");
  // The relevance bar's count, as a sentence ("1 weaker moment … is not shown").
  out = out.replace(
    /\b(\d+) weaker (moments?) under the relevance bar [\d.]+ not shown/,
    (_, n, word) => `${n} weaker ${word} under the relevance bar ${n === "1" ? "is" : "are"} not shown`,
  );
  return out.replace(/image-text/g, "image–text");
}

// A server note that points at the hidden weaker moments (the terminal's --all).
function mentionsHidden(note) {
  return /relevance bar/.test(note) && /--all\b/.test(note);
}

// The server's reason for a failed request: its JSON "detail" when it sent one.
async function failure(response) {
  let detail = response.statusText;
  try {
    const body = await response.json();
    detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
  } catch (_) { /* not JSON */ }
  detail = plainWords(detail);
  const error = new Error(`${response.status}: ${detail}`);
  error.detail = detail;
  return error;
}

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  if (response.status === 401) {
    showLogin();
    throw new Error("log in first");
  }
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

function postJson(path, body) {
  return api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
}

// POST ``body`` to a streaming question route (NDJSON): ``onStep`` sees each agent step as it
// arrives; resolves with the result, rejects with the server's error.
async function streamQuestion(path, body, onStep) {
  const response = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (response.status === 401) {
    showLogin();
    throw new Error("log in first");
  }
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buffer += value;
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).trim();
      buffer = buffer.slice(newline + 1);
      if (!line) continue;
      const event = JSON.parse(line);
      if (event.step) onStep(event.step);
      else if (event.result) return event.result;
      else if (event.error) throw new Error(`${event.error.status}: ${plainWords(event.error.message)}`);
    }
    if (done) throw new Error("the answer stream ended early");
  }
}

// ------------------------------------------------------------------ log-in

function showLogin() {
  $("#login").hidden = false;
  $("#main").hidden = true;
}

$("#login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  try {
    await postJson("/api/login", { token: $("#token").value });
    $("#login").hidden = true;
    $("#main").hidden = false;
    await loadLibrary();
  } catch (error) {
    setStatus(`log-in failed: ${error.message}`, true);
  }
});

// ------------------------------------------------------------------ player

// The moment being played: the player stops (or loops) at its end and the timeline marks it.
let range = null;
let lastMoment = null; // the result or citation last played, for ← and →

function thumbnailUrl(videoId, t) {
  return `/api/videos/${videoId}/thumbnail?t=${encodeURIComponent(Number(t).toFixed(2))}`;
}

function showPlayerError(text) {
  const box = $("#player-error");
  box.textContent = text;
  box.hidden = !text;
}

function markRange() {
  const player = $("#player");
  const mark = $("#range-mark");
  const duration = player.duration;
  if (!range || !Number.isFinite(duration) || duration <= 0) {
    mark.hidden = true;
    delete mark.dataset.start;
    delete mark.dataset.end;
    return;
  }
  const start = Math.min(range.start, duration);
  const end = Math.min(range.end, duration);
  mark.style.left = `${(100 * start) / duration}%`;
  mark.style.width = `${Math.max(0.5, (100 * (end - start)) / duration)}%`;
  mark.dataset.start = String(start);
  mark.dataset.end = String(end);
  mark.title = `${fmtTime(start)}–${fmtTime(end)}`;
  mark.hidden = false;
}

function movePlayhead() {
  const player = $("#player");
  const duration = player.duration;
  const at = Number.isFinite(duration) && duration > 0 ? player.currentTime / duration : 0;
  $("#playhead").style.left = `${100 * Math.min(1, Math.max(0, at))}%`;
}

// While a moment plays, watch its end more often than ``timeupdate`` does (every ~250 ms).
function watchEnd() {
  const player = $("#player");
  movePlayhead();
  if (range && !player.paused && player.currentTime >= range.end - 0.03) {
    if ($("#loop").checked) player.currentTime = range.start;
    else {
      // Rest on the moment's last frame, not on the first frame of what follows it.
      player.pause();
      player.currentTime = Math.max(range.start, range.end - 0.05);
    }
  }
  if (!player.paused) requestAnimationFrame(watchEnd);
}

function setupPlayer() {
  const player = $("#player");
  player.addEventListener("play", () => {
    // Play pressed at the end of the moment: play the moment again.
    if (range && player.currentTime >= range.end - 0.05) player.currentTime = range.start;
    requestAnimationFrame(watchEnd);
  });
  player.addEventListener("timeupdate", movePlayhead);
  player.addEventListener("durationchange", markRange);
  player.addEventListener("seeking", () => {
    // The user went somewhere else: the moment is no longer what plays.
    if (range && (player.currentTime < range.start - 0.5 || player.currentTime > range.end + 0.5)) {
      range = null;
      markRange();
    }
  });
  player.addEventListener("error", explainPlaybackError);
  $("#timeline").addEventListener("click", (event) => {
    const box = $("#timeline").getBoundingClientRect();
    if (!Number.isFinite(player.duration) || box.width <= 0) return;
    player.currentTime = ((event.clientX - box.left) / box.width) * player.duration;
  });
}

// A <video> only says "it failed": ask the server why (its JSON reason), and show it.
async function explainPlaybackError() {
  const player = $("#player");
  const videoId = player.dataset.videoId;
  if (!videoId) return;
  const video = videos.find((v) => v.video_id === videoId);
  const name = video ? video.file_name : videoId;
  try {
    const response = await fetch(`/api/videos/${videoId}/stream`, {
      credentials: "same-origin",
      headers: { Range: "bytes=0-0" },
    });
    if (!response.ok) {
      showPlayerError((await failure(response)).detail);
      forgetSource();
      return;
    }
  } catch (_) { /* the server is gone: say what the browser knows */ }
  const code = player.error ? player.error.code : 0;
  showPlayerError(`${name} cannot be played by this browser (media error ${code})`);
}

// Empty the player (no spinner over a file that will not come).
function forgetSource() {
  const player = $("#player");
  player.removeAttribute("src");
  delete player.dataset.videoId;
  player.controls = false; // Chromium's controls would spin on, waiting for it
  player.load();
}

// Play ``videoId`` from ``start``; with an ``end``, only the moment start–end (marked, stopped or
// looped at its end). The player is brought into view.
function playMoment(videoId, start, end = null, source = null) {
  const player = $("#player");
  const video = videos.find((v) => v.video_id === videoId);
  const name = video ? video.file_name : videoId;
  document.querySelectorAll(".playing").forEach((node) => node.classList.remove("playing"));
  if (source) {
    source.classList.add("playing");
    lastMoment = source;
  }
  $("#player-panel").scrollIntoView({ block: "nearest" });
  range = end !== null && end > start ? { start, end } : null;
  $("#now-playing").textContent = range
    ? `${name} · ${fmtTime(start)}–${fmtTime(end)}`
    : `${name} from ${fmtTime(start)}`;
  if (video && !video.playable) {
    forgetSource();
    markRange();
    showPlayerError(`${name} cannot be played: ${video.unplayable || "the server cannot read its file"}`);
    return;
  }
  showPlayerError("");
  player.dataset.requestedStart = String(start);
  const seek = () => {
    markRange();
    player.currentTime = start;
    player.play().catch(() => { /* autoplay may be refused; the position is set */ });
  };
  if (player.dataset.videoId !== videoId) {
    player.dataset.videoId = videoId;
    player.controls = true;
    player.src = `/api/videos/${videoId}/stream`;
    player.addEventListener("loadedmetadata", seek, { once: true });
    player.load();
  } else if (player.readyState >= 1) {
    seek();
  } else {
    player.addEventListener("loadedmetadata", seek, { once: true });
  }
}

function togglePlay() {
  const player = $("#player");
  if (!player.currentSrc) return;
  if (player.paused) player.play().catch(() => {});
  else player.pause();
}

// Space plays or pauses; ← and → play the previous or next result of the list last played from.
// Keys typed into a field, or pressed on the player itself (it has its own), are left alone.
document.addEventListener("keydown", (event) => {
  if (event.altKey || event.ctrlKey || event.metaKey) return;
  const target = event.target;
  if (target.closest("input, textarea, select, video, [contenteditable]")) return;
  if (event.key === " ") {
    event.preventDefault();
    togglePlay();
  } else if (event.key === "ArrowLeft" || event.key === "ArrowRight") {
    const list = lastMoment && lastMoment.isConnected
      ? lastMoment.closest(".moments")
      : document.querySelector("#search-results .moments");
    if (!list) return;
    const items = [...list.querySelectorAll(".moment")];
    if (!items.length) return;
    event.preventDefault();
    const at = items.indexOf(lastMoment);
    const step = event.key === "ArrowRight" ? 1 : -1;
    const next = items[at < 0 ? 0 : Math.min(items.length - 1, Math.max(0, at + step))];
    next.focus();
    next.click();
  }
});

// A focused button would also take space as a click when the key comes up: space is the player's.
document.addEventListener("keyup", (event) => {
  if (event.key === " " && !event.target.closest("input, textarea, select, video, [contenteditable]")) {
    event.preventDefault();
  }
});

// A moment that plays when clicked (the class ``moment``, with its video and range as data).
function momentButton(videoId, start, end, className, ...children) {
  const button = el(
    "button",
    {
      type: "button",
      className: `moment ${className}`.trim(),
      dataset: { videoId, start: String(start), end: String(end) },
      title: `play ${fmtTime(start)}–${fmtTime(end)}`,
    },
    ...children,
  );
  button.addEventListener("click", () => playMoment(videoId, start, end, button));
  return button;
}

function levelBadge(level, support = []) {
  // The title names the tool calls that found something here, and what (plain text, never markup).
  const found = support.map((s) => `${s.tool} (call ${s.call}): ${s.found}`);
  const title = [LEVELS[level] || "", ...found].filter(Boolean).join("\n");
  return el("span", { className: `level level-${level}`, title, text: level });
}

const LEVELS = {
  perceived: "a look at the frames or detections here saw something",
  retrieved: "a search over what was said, shown or seen found this moment",
  echoed: "only looks that found nothing, hints, overviews or the model's own ranges point here",
  none: "no tool returned anything here",
};

// A cited moment: its thumbnail, its range, its evidence level (perceived, retrieved, echoed,
// none: what the agent's tools actually returned there; only the first two verify it).
function evidenceButton(videoId, start, end, extraClass = "", label = "", level = "", support = []) {
  return momentButton(
    videoId, start, end, `evidence ${extraClass}`.trim(),
    el("img", { src: thumbnailUrl(videoId, start), alt: `frame at ${fmtTime(start)}`, loading: "lazy" }),
    el("span", { className: "time", text: `${fmtTime(start)}–${fmtTime(end)}` }),
    ...(level ? [levelBadge(level, support)] : []),
    ...(label ? [el("span", { className: "video", text: label })] : []),
  );
}

// ------------------------------------------------------------------ library

// What each ledger state of a stage means, for the dots' titles and the legend.
const STAGE_STATES = {
  done: "done",
  cached: "done before (reused)",
  skipped: "skipped: nothing to do, or switched off",
  unavailable: "not run: its model is not available",
  failed: "failed",
  blocked: "not run: a stage it needs failed",
  running: "running",
  pending: "not run yet",
};

// The legend's entries: one colour each (done and cached share one, as do failed and blocked).
const STAGE_LEGEND = [
  ["done", "done"], ["skipped", "skipped"], ["unavailable", "model missing"], ["failed", "failed"],
  ["running", "running"], ["pending", "to do"],
];

// A video's stages in a few words: "ready · 5 skipped", "failed: speech", "9/14 stages".
function stageSummary(stages) {
  const entries = Object.entries(stages);
  const named = (...states) => entries.filter(([, s]) => states.includes(s)).map(([n]) => n);
  const failed = named("failed", "blocked");
  const running = named("running");
  const pending = named("pending");
  if (failed.length) return { text: `failed: ${failed.join(", ")}`, state: "failed" };
  if (running.length) return { text: `running: ${running.join(", ")}`, state: "running" };
  if (pending.length) return { text: `${entries.length - pending.length}/${entries.length} stages`, state: "pending" };
  const quiet = [["skipped", named("skipped")], ["unavailable", named("unavailable")]]
    .filter(([, names]) => names.length)
    .map(([state, names]) => `${names.length} ${state === "unavailable" ? "without a model" : "skipped"}`);
  return { text: ["ready", ...quiet].join(" · "), state: "done" };
}

// The row of stage dots: each names its stage and state (title), the row reads as one image.
function stageDots(stages) {
  const entries = Object.entries(stages);
  const counts = {};
  for (const [, state] of entries) counts[state] = (counts[state] || 0) + 1;
  const label = Object.entries(counts).map(([state, n]) => `${n} ${state}`).join(", ");
  const dots = el("span", { className: "stages", role: "img", "aria-label": `stages: ${label}` });
  for (const [name, state] of entries) {
    dots.append(el("span", {
      className: `stage ${state}`, title: `${name}: ${STAGE_STATES[state] || state}`, dataset: { stage: name },
    }));
  }
  return dots;
}

function stageLegend() {
  return el(
    "p",
    { id: "stage-legend", className: "meta legend" },
    "stages: ",
    ...STAGE_LEGEND.map(([state, words]) => el(
      "span",
      { className: "legend-item", title: STAGE_STATES[state] },
      el("span", { className: `stage ${state}` }),
      words,
    )),
  );
}

async function loadLibrary() {
  videos = await api("/api/videos");
  const body = $("#videos");
  body.replaceChildren();
  const select = $("#ask-video");
  const previous = select.value;
  select.replaceChildren();
  for (const video of videos) {
    const summary = stageSummary(video.stages);
    const dots = stageDots(video.stages);
    const play = el(
      "button",
      { type: "button", className: "link", title: `play ${video.file_name}` },
      video.file_name,
    );
    const about = el("button", {
      type: "button", className: "about", title: `summary, chapters and transcript of ${video.file_name}`, text: "about",
    });
    about.addEventListener("click", (event) => {
      event.stopPropagation();
      selectVideo(video.video_id);
      showOverview(video.video_id);
    });
    const nameCell = el("td", { className: "name" }, play, about);
    if (!video.playable) {
      nameCell.append(el("span", { className: "unplayable", title: video.unplayable || "", text: "cannot play" }));
    }
    const row = el(
      "tr",
      { className: "video-row", dataset: { videoId: video.video_id } },
      el("td", {}, el("img", {
        className: "thumb", src: thumbnailUrl(video.video_id, Math.min(1, video.duration / 10)), alt: "", loading: "lazy",
      })),
      nameCell,
      el("td", { className: "length", text: fmtTime(video.duration) }),
      el("td", { className: "status" }, el("span", { className: `summary ${summary.state}`, text: summary.text }), dots),
    );
    row.addEventListener("click", () => {
      selectVideo(video.video_id);
      playMoment(video.video_id, 0);
    });
    body.append(row);
    select.append(el("option", { value: video.video_id, text: video.file_name }));
  }
  if (!videos.length) {
    body.append(el("tr", {}, el("td", { colspan: "4", className: "meta", text: "no video yet: ingest one below" })));
  }
  const legend = document.querySelector("#stage-legend");
  if (legend) legend.remove();
  if (videos.length) $("#library").after(stageLegend());
  if (videos.some((v) => v.video_id === previous)) select.value = previous;
  fillCompareChoices();
  await loadFeatures();
  await loadStrategies();
  setStatus(plural(videos.length, "video"));
}

function selectVideo(videoId) {
  $("#ask-video").value = videoId;
  for (const row of document.querySelectorAll(".video-row")) {
    row.classList.toggle("selected", row.dataset.videoId === videoId);
  }
}

const CHIP_STATES = { failed: "failed", blocked: "failed", skipped: "skipped", unavailable: "skipped" };

// Ingestion progress, live: each stage of each file as a chip (done / running with its share).
function showProgress(out, job) {
  const byVideo = new Map();
  for (const p of job.progress) {
    if (!byVideo.has(p.video_id)) byVideo.set(p.video_id, []);
    byVideo.get(p.video_id).push(p);
  }
  const lines = [...byVideo.entries()].map(([videoId, events]) =>
    el(
      "div",
      { className: "progress", dataset: { videoId } },
      el("span", { className: "meta", text: `video ${videoId.slice(0, 8)}` }),
      ...events.map((p) => {
        const running = p.event === "started" || p.event === "progress";
        const share = running && p.total ? ` ${Math.round((100 * (p.done || 0)) / p.total)}%` : "";
        return el("span", {
          className: `chip ${running ? "running" : CHIP_STATES[p.event] || "done"}`,
          title: `${p.stage}: ${p.event}`,
          dataset: { stage: p.stage },
          text: `${p.stage}${share}`,
        });
      }),
    ),
  );
  out.replaceChildren(
    el("p", { className: "meta", text: `ingesting ${plural(job.files.length, "file")}: ${job.state}` }),
    ...lines,
  );
}

$("#ingest-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const out = $("#ingest-status");
  try {
    let job = await postJson("/api/ingest", { paths: [$("#ingest-path").value] });
    while (job.state === "queued" || job.state === "running") {
      showProgress(out, job);
      await new Promise((resolve) => setTimeout(resolve, 500));
      job = await api(`/api/ingest/${job.job_id}`);
    }
    const refused = Object.entries(job.refused).map(([p, why]) => `${p}: ${why}`).join("; ");
    out.replaceChildren(el("p", {
      className: job.state === "failed" ? "error" : "meta",
      text: `ingestion ${job.state}${job.error ? ` (${plainWords(job.error)})` : ""}${refused ? `; refused ${refused}` : ""}`,
    }));
    await loadLibrary();
  } catch (error) {
    out.replaceChildren(el("p", { className: "error", text: `ingestion refused: ${error.message}` }));
  }
});

// ------------------------------------------------------------------ ask and compare

function shortText(text, limit = 220) {
  const flat = String(text || "").replace(/\s+/g, " ").trim();
  return flat.length > limit ? `${flat.slice(0, limit - 1)}…` : flat;
}

// What each tool does, in words (a tool not listed reads as its name with spaces).
const TOOL_WORDS = {
  clip_search: "searched the clips",
  library_search: "searched the library",
  global_browse: "read the video's overview",
  global_explore: "looked over the videos",
  frame_inspect: "looked at frames",
  frame_analysis: "looked at frames",
  temporal_grounding: "looked for when it happens",
  audio_query: "listened",
  subtitle_extractor: "read the transcript",
  subtitle_retriever: "searched the transcript",
  text_extract: "read the on-screen text",
  object_detect: "looked for objects",
  object_tracker: "followed objects",
  scene_detector: "found the scene changes",
  scene_graph: "read who does what",
  boundary_detect: "found where things change",
  clip_merge: "joined clips",
  clip_retrieve: "fetched clips",
  graph_retrieve: "searched the knowledge graph",
  video_reader: "watched a span",
  visual_query: "looked at a span",
  visual_similarity: "compared pictures",
  finish: "answered",
  answer: "answered",
};

// Steps that are not tool calls, in words.
const STEP_KINDS = {
  nudge: "reminded the model to use a tool or answer",
  "model-error": "the model failed",
  extractive: "answered from what was said and shown",
  refused: "a reply was set aside",
};

// The question a tool was asked, in words: its query (or question, text…) and where it looked.
// A long, wrapped prompt (an agent briefing another) reads as its question line only.
function stepAsked(args) {
  const names = Object.fromEntries(videos.map((v) => [v.video_id, v.file_name]));
  const value = ["query", "question", "queries", "text", "keywords", "target", "description"]
    .map((key) => args[key]).find((v) => v !== undefined && v !== null && v !== "");
  let asked = Array.isArray(value) ? value.join("; ") : typeof value === "string" ? value : "";
  if (asked.length > 160 || asked.includes("\n")) {
    const lines = asked.split("\n").map((l) => l.trim()).filter(Boolean);
    const question = lines.find((l) => /^question\s*:/i.test(l)) || lines.reverse().find((l) => l.endsWith("?"));
    if (question) asked = question.replace(/^question\s*:\s*/i, "");
  }
  const parts = asked ? [`“${shortText(asked, 160)}”`] : [];
  const ids = [args.video_id, ...(Array.isArray(args.video_ids) ? args.video_ids : [])].filter(Boolean);
  if (ids.length) parts.push(`in ${ids.map((id) => names[id] || id).join(", ")}`);
  const from = args.start ?? args.t0 ?? args.start_time;
  const to = args.end ?? args.t1 ?? args.end_time;
  if (typeof from === "number" && typeof to === "number") parts.push(`at ${fmtTime(from)}–${fmtTime(to)}`);
  return parts.join(" ");
}

// The gist of what a step returned: a count for a list, the answer or error of a reply, else
// its first words.
function stepGist(step) {
  if (step.tool === "finish" || step.tool === "answer") return shortText(step.arguments.answer || step.observation, 160);
  const said = step.observation || step.reasoning || "";
  let value = null;
  try { value = JSON.parse(said); } catch (_) { /* words, not JSON */ }
  if (Array.isArray(value)) return plural(value.length, "result");
  if (value && typeof value === "object") {
    for (const key of ["error", "answer", "summary", "text"]) {
      if (typeof value[key] === "string" && value[key]) return shortText(value[key], 160);
    }
    const list = Object.entries(value).find(([, v]) => Array.isArray(v));
    if (list) return `${list[1].length} ${list[0].replace(/_/g, " ")}`;
    return "";
  }
  return shortText(said, 160);
}

// One agent step as a list item: the tool in words, what it asked (and where), what it found.
// The tool's own name is its title; the whole step is in the answer's trace.
function stepItem(step) {
  const doing = step.tool
    ? TOOL_WORDS[step.tool] || step.tool.replace(/_/g, " ")
    : STEP_KINDS[step.kind] || step.kind.replace(/[-_]/g, " ");
  const asked = step.tool && step.tool !== "finish" && step.tool !== "answer" ? stepAsked(step.arguments || {}) : "";
  const gist = stepGist(step);
  return el(
    "li",
    { className: `step${step.ok ? "" : " failed"}`, dataset: { kind: step.kind, tool: step.tool || "" } },
    ...(step.phase ? [el("span", { className: "phase", text: step.phase })] : []),
    el("span", { className: step.tool ? "tool" : "tool kind", title: step.tool || step.kind, text: doing }),
    ...(asked ? [el("span", { className: "query", text: asked })] : []),
    ...(gist ? [el("span", { className: "observation", text: gist })] : []),
  );
}

// A question and what became of it, kept on the page: its steps stream in, then the answer.
function startTurn(container, question, context) {
  const steps = el("ol", { className: "steps" });
  const status = el("p", { className: "meta pending", text: "thinking…" });
  const turn = el(
    "article",
    { className: "turn" },
    el("p", { className: "question" }, el("strong", { text: question }), el("span", { className: "meta", text: ` · ${context}` })),
    steps,
    status,
  );
  container.append(turn);
  turn.scrollIntoView({ block: "nearest" });
  let count = 0;
  return {
    turn,
    step(step) {
      count += 1;
      steps.append(stepItem(step));
      status.textContent = `thinking… ${plural(count, "step")}`;
    },
    finish(...nodes) {
      status.remove();
      if (count) {
        // The steps fold away once answered; a click opens them again.
        const fold = el("details", { className: "trace" }, el("summary", { text: `${plural(count, "step")}` }));
        steps.replaceWith(fold);
        fold.append(steps);
      }
      turn.append(...nodes);
    },
    fail(message) {
      status.className = "error";
      status.textContent = `no answer: ${message}`;
    },
  };
}

$("#ask-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const videoId = $("#ask-video").value;
  const question = $("#ask-q").value;
  const video = videos.find((v) => v.video_id === videoId);
  // An empty menu (strategies not loaded yet, or failed to) leaves the choice to the server default.
  const agent = chosenAgent($("#ask-agent"));
  const turn = startTurn($("#conversation"), question, `${video ? video.file_name : videoId}${agent ? ` · ${agent}` : ""}`);
  $("#ask-q").value = "";
  try {
    const result = await streamQuestion("/api/ask/stream", { video: videoId, question, ...(agent ? { agent } : {}) }, (s) => turn.step(s));
    const list = el("div", { className: "evidence-list moments" });
    for (const c of result.citations) {
      list.append(evidenceButton(c.video_id, c.start, c.end, c.verified ? "" : "unverified", "", c.evidence, c.support || []));
    }
    const kind = result.fallback
      ? `extractive answer standing in: the agent reached none (${result.model})`
      : result.extractive ? "extractive answer" : `answer (${result.model})`;
    turn.finish(
      el("p", { className: "answer-text", text: result.answer }),
      ...(result.choice ? [el("p", { text: `Choice ${result.choice}: ${result.choice_text || ""}` })] : []),
      list,
      // The trace id opens the whole trace (GET /api/traces/{id}, kept for recent answers).
      el(
        "p",
        { className: "meta" },
        `${kind} · ${result.seconds.toFixed(2)} s · ${plural(result.trace.length, "step")} · `,
        el("a", {
          className: "trace-link", href: `/api/traces/${encodeURIComponent(result.query_id)}`, target: "_blank",
          rel: "noopener", title: "the whole trace: every step, its arguments and what it returned",
          text: `trace ${result.query_id}`,
        }),
      ),
    );
  } catch (error) {
    turn.fail(error.message);
  }
});

// The agent menus (ask: scope "video", compare: "videos") list the server's strategies, each
// with its help as the tooltip; the scope's default comes first-selected. A choice survives reloads.
async function loadStrategies() {
  const strategies = await api("/api/strategies");
  for (const select of document.querySelectorAll("select[data-scope]")) {
    const scope = select.dataset.scope;
    const previous = select.value;
    select.replaceChildren();
    for (const s of strategies.filter((s) => s.scopes.includes(scope))) {
      const option = el("option", { value: s.name, text: s.title, title: s.help, dataset: { needsPlanner: String(s.needs_planner), help: s.help } });
      option.selected = s.default_for.includes(scope);
      select.append(option);
    }
    if ([...select.options].some((o) => o.value === previous)) select.value = previous;
  }
  applyFeatures();
}

// What the server can do (GET /api/features): search by image, a chat model for the agents.
let features = null;

async function loadFeatures() {
  try {
    features = await api("/api/features");
  } catch (_) {
    features = null; // an older server: every control stays offered, the server says no when asked
  }
  applyFeatures();
}

// ``node`` is off for ``reason`` (or on again): disabled, the reason as its title and description.
function setOff(node, reason, onTitle = "") {
  if ("disabled" in node) node.disabled = Boolean(reason);
  else if (reason) node.setAttribute("aria-disabled", "true");
  else node.removeAttribute("aria-disabled");
  node.classList.toggle("off", Boolean(reason));
  if (reason) {
    node.title = reason;
    node.setAttribute("aria-description", reason);
  } else {
    node.title = onTitle;
    node.removeAttribute("aria-description");
  }
}

// Controls for what is off are disabled with the reason: "by image…" without visual search, and
// the agents that need a chat model when none can be used (the question is then answered
// extractively, from what was said and shown).
function applyFeatures() {
  if (!features) return;
  const visual = features.visual_search.on ? "" : plainWords(features.visual_search.reason);
  setOff($("#search-image"), visual);
  setOff($("#search-image-label"), visual, "find the moments that look like an image");
  const planner = features.planner.on
    ? ""
    : `${plainWords(features.planner.reason)}: questions are answered from what was said and shown`;
  for (const select of document.querySelectorAll("select[data-scope]")) {
    for (const option of select.options) {
      if (option.dataset.needsPlanner === "true") setOff(option, planner, option.dataset.help);
    }
    const usable = [...select.options].filter((o) => !o.disabled);
    if (usable.length && select.selectedOptions[0] && select.selectedOptions[0].disabled) select.value = usable[0].value;
    setOff(select, usable.length || !select.options.length ? "" : planner);
  }
}

// The agent a menu names, or null (the server's default) when it offers none that can be used.
function chosenAgent(select) {
  const option = select.selectedOptions[0];
  return select.disabled || !option || option.disabled ? null : option.value;
}

// One checkbox per video of the library; the ones ticked before a reload stay ticked.
function fillCompareChoices() {
  const box = $("#compare-videos");
  const ticked = new Set([...box.querySelectorAll("input:checked")].map((input) => input.value));
  box.replaceChildren(el("legend", { text: "videos to compare" }));
  for (const video of videos) {
    const input = el("input", { type: "checkbox", name: "compare-video", value: video.video_id });
    input.checked = ticked.has(video.video_id);
    box.append(el("label", { dataset: { videoId: video.video_id } }, input, video.file_name));
  }
}

$("#compare-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const hint = $("#compare-hint");
  const chosen = [...document.querySelectorAll("#compare-videos input:checked")].map((i) => i.value);
  if (!chosen.length) {
    hint.textContent = "pick at least one video to compare";
    return;
  }
  hint.textContent = "";
  const question = $("#compare-q").value;
  const agent = chosenAgent($("#compare-agent"));
  const turn = startTurn($("#comparisons"), question, `${plural(chosen.length, "video")}${agent ? ` · ${agent}` : ""}`);
  $("#compare-q").value = "";
  try {
    const result = await streamQuestion("/api/compare/stream", { videos: chosen, question, ...(agent ? { agent } : {}) }, (s) => turn.step(s));
    const names = Object.fromEntries(result.videos.map((v) => [v.video_id, v.file_name]));
    const list = el("div", { className: "evidence-list moments" });
    for (const c of result.citations) {
      list.append(evidenceButton(
        c.video_id, c.start, c.end, c.verified ? "" : "unverified", names[c.video_id] || c.video_id, c.evidence,
        c.support || [],
      ));
    }
    const kind = result.fallback
      ? `extractive answer standing in: ${result.agent} reached none (${result.model})`
      : result.extractive ? "extractive answer" : `answer by ${result.agent} (${result.model})`;
    turn.finish(
      el("p", { className: "answer-text", text: result.answer }),
      ...(result.choice ? [el("p", { text: `Choice ${result.choice}` })] : []),
      list,
      ...(result.note ? [el("p", { className: "meta note", text: plainWords(result.note) })] : []),
      el("p", {
        className: "meta compare-meta",
        text: `${kind} · ${plural(result.videos.length, "video")} · ${result.seconds.toFixed(2)} s · ${plural(result.trace.length, "step")}`,
      }),
    );
  } catch (error) {
    turn.fail(error.message);
  }
});

// ------------------------------------------------------------------ search

function searching(text) {
  $("#search-results").replaceChildren(el("p", { className: "meta", text }));
}

function searchFailed(error) {
  $("#search-results").replaceChildren(el("p", { className: "error", text: `search failed: ${error.message}` }));
}

// Moments matching ``query``; ``all`` adds those under the relevance bar (the "show" control).
async function findMoments(query, all = false) {
  searching(all ? "showing the weaker moments too…" : "searching…");
  try {
    showMoments(await api(`/api/moments?q=${encodeURIComponent(query)}${all ? "&all=true" : ""}`), all);
  } catch (error) {
    searchFailed(error);
  }
}

// A server's note in words; one about hidden weaker moments gets a "show" control that shows them.
function noteLine(note, query = null) {
  const line = el("p", { className: "meta note", text: plainWords(note) });
  if (query !== null && mentionsHidden(note)) {
    const show = el("button", { type: "button", className: "show-all", text: "show", title: "also show the moments under the relevance bar" });
    show.addEventListener("click", () => findMoments(query, true));
    line.append(" ", show);
  }
  return line;
}

$("#search-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  if ($("#search-mode").value === "moments") {
    await findMoments($("#search-q").value);
    return;
  }
  searching("searching…");
  try {
    showVideos(await api(`/api/search?q=${encodeURIComponent($("#search-q").value)}`));
  } catch (error) {
    searchFailed(error);
  }
});

// An image chosen: the moments that look like it (POST /api/search/image, the same answer as
// /api/moments). A server without visual search says why (404, 503): that reason is shown.
$("#search-image").addEventListener("change", async () => {
  const file = $("#search-image").files[0];
  if (!file) return;
  searching(`searching by image ${file.name}…`);
  const form = new FormData();
  form.append("image", file);
  try {
    showMoments(await api("/api/search/image?k=10", { method: "POST", body: form }), true); // no "show": an image has no bar
  } catch (error) {
    searchFailed(error);
  } finally {
    $("#search-image").value = "";
  }
});

function relevanceText(m) {
  if (typeof m.relevance === "number") return `relevance ${Math.round(m.relevance * 100)}%`;
  return `score ${m.score.toFixed(1)}`;
}

// Moments across the library, as cards: thumbnail, video, range, what was said or shown, level.
function showMoments(result, all = false) {
  lastSearch = result;
  markTranscript();
  const cards = result.moments.map((m) =>
    momentButton(
      m.video_id, m.start, m.end, "card",
      el("img", { src: thumbnailUrl(m.video_id, (m.start + m.end) / 2), alt: "", loading: "lazy" }),
      el("span", { className: "card-body" },
        el("span", { className: "title", text: m.file }),
        el("span", { className: "when" },
          el("span", { className: "time", text: `${fmtTime(m.start)}–${fmtTime(m.end)}` }),
          el("span", { className: "relevance", text: relevanceText(m) }),
          levelBadge(m.evidence || "retrieved")),
        ...(m.text ? [el("span", { className: "said", text: m.text })] : [])),
    ),
  );
  $("#search-results").replaceChildren(
    ...(cards.length
      ? [el("div", { className: "cards moments" }, ...cards)]
      : [el("p", { className: "meta", text: "no moment matches" })]),
    ...result.notes.map((n) => noteLine(n, all ? null : result.query)),
    el("p", { className: "meta", text: `${plural(result.moments.length, "moment")} · ${result.seconds.toFixed(2)} s` }),
  );
}

// Whole videos that match, each with its best moments.
function showVideos(result) {
  const hits = result.hits.map((hit) =>
    el(
      "div",
      { className: "hit", dataset: { videoId: hit.video_id } },
      el("div", { className: "title", text: `${hit.file_name} · score ${hit.score.toFixed(2)}` }),
      ...(hit.caption ? [el("div", { className: "meta", text: hit.caption })] : []),
      el("div", { className: "evidence-list moments" },
        ...hit.moments.map((m) => evidenceButton(hit.video_id, m.start, m.end))),
    ),
  );
  $("#search-results").replaceChildren(
    ...(hits.length ? hits : [el("p", { className: "meta", text: "no video matches" })]),
    ...(result.notes || []).map((n) => noteLine(n)),
    el("p", { className: "meta", text: `${plural(result.hits.length, "video")} · ${result.seconds.toFixed(2)} s` }),
  );
}

// ------------------------------------------------------------------ one video: what it is about

let lastSearch = null; // the moments last found, marked on the transcript of their video
let overviewVideo = null;

// The words of a query worth marking in a line (three letters or more, lower case).
function queryWords(query) {
  return [...new Set((query || "").toLowerCase().match(/[\p{L}\p{N}]{3,}/gu) || [])];
}

// ``text`` as text nodes, with the query's words inside <mark> elements (never parsed as HTML).
function markedText(text, words) {
  const out = [];
  if (!words.length) return [document.createTextNode(text)];
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp(`(${escaped.join("|")})`, "giu");
  let at = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > at) out.push(document.createTextNode(text.slice(at, match.index)));
    out.push(el("mark", { text: match[0] }));
    at = match.index + match[0].length;
  }
  if (at < text.length) out.push(document.createTextNode(text.slice(at)));
  return out;
}

// The last search's moments on the open transcript: each line they overlap is a hit, and the
// query's words in it are marked.
function markTranscript() {
  const lines = [...document.querySelectorAll("#transcript .line")];
  const moments = lastSearch && overviewVideo
    ? lastSearch.moments.filter((m) => m.video_id === overviewVideo && (m.kind || "clip") === "clip")
    : [];
  const words = moments.length ? queryWords(lastSearch.query) : [];
  let hits = 0;
  for (const line of lines) {
    const start = Number(line.dataset.start);
    const end = Number(line.dataset.end);
    const hit = moments.some((m) => m.start < end && m.end > start);
    line.classList.toggle("hit", hit);
    hits += hit ? 1 : 0;
    line.querySelector(".said").replaceChildren(...markedText(line.dataset.text, hit ? words : []));
  }
  $("#transcript-hits").textContent = hits ? `· ${plural(hits, "line")} found by “${lastSearch.query}”` : "";
}

// A chapter, highlight or transcript line: it plays its moment when clicked.
function overviewItem(videoId, start, end, className, title, text) {
  const button = momentButton(
    videoId, start, end, className,
    el("span", { className: "time", text: fmtTime(start) }),
    ...(title ? [el("span", { className: "title", text: title })] : []),
    el("span", { className: "said", text }),
  );
  button.dataset.text = text;
  return el("li", {}, button);
}

// A video's summary, chapters (click to play), highlights and transcript (search hits marked).
async function showOverview(videoId) {
  const panel = $("#overview-panel");
  const video = videos.find((v) => v.video_id === videoId);
  overviewVideo = videoId;
  panel.hidden = false;
  $("#overview-title").textContent = video ? video.file_name : videoId;
  $("#overview-summary").textContent = "";
  $("#overview-note").textContent = "loading…";
  for (const list of ["#chapters", "#highlights", "#transcript"]) $(list).replaceChildren();
  let overview = null;
  let lines = [];
  try {
    [overview, lines] = await Promise.all([
      api(`/api/videos/${videoId}/summary`).catch((error) => ({ error })),
      api(`/api/videos/${videoId}/transcript`),
    ]);
  } catch (error) {
    $("#overview-note").textContent = error.message;
    return;
  }
  if (overviewVideo !== videoId) return; // another video was opened meanwhile
  if (overview.error) {
    $("#overview-note").textContent = overview.error.detail || overview.error.message; // in words (failure())
  } else {
    $("#overview-summary").textContent = overview.summary;
    $("#overview-note").textContent = plainWords(overview.note || "");
    $("#chapters").replaceChildren(...overview.chapters.map((c) =>
      overviewItem(videoId, c.start, c.end, "chapter", c.title, c.summary)));
    $("#highlights").replaceChildren(...overview.highlights.map((h) =>
      overviewItem(videoId, h.start, h.end, "highlight", "", h.text)));
  }
  $("#highlights-title").hidden = !$("#highlights").children.length;
  $("#transcript").replaceChildren(...lines.map((line) => {
    const item = overviewItem(videoId, line.start, line.end, `line ${line.source}`, "", line.text);
    return item;
  }));
  if (!lines.length) $("#transcript").append(el("li", { className: "meta", text: "nothing said or shown" }));
  markTranscript();
}

setupPlayer();
loadLibrary().catch((error) => setStatus(error.message, true));
