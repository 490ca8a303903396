// vidscope's page: library, ingest, ask, compare, search, and a player that jumps to evidence moments.
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

function setStatus(text, isError = false) {
  const status = $("#status");
  status.textContent = text;
  status.classList.toggle("error", isError);
}

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  if (response.status === 401) {
    showLogin();
    throw new Error("log in first");
  }
  if (!response.ok) {
    let detail = response.statusText;
    try {
      const body = await response.json();
      detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
    } catch (_) { /* not JSON */ }
    throw new Error(`${response.status}: ${detail}`);
  }
  return response.status === 204 ? null : response.json();
}

function postJson(path, body) {
  return api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
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

// ------------------------------------------------------------------ library

async function loadLibrary() {
  videos = await api("/api/videos");
  const body = $("#videos");
  body.replaceChildren();
  const select = $("#ask-video");
  const previous = select.value;
  select.replaceChildren();
  for (const video of videos) {
    const stages = el("td");
    for (const [name, state] of Object.entries(video.stages)) {
      stages.append(el("span", { className: `stage ${state}`, title: state, text: name }));
    }
    const row = el(
      "tr",
      { className: "video-row", dataset: { videoId: video.video_id } },
      el("td", { text: video.file_name }),
      el("td", { text: fmtTime(video.duration) }),
      el("td", { text: String(video.clips) }),
      stages,
    );
    row.addEventListener("click", () => selectVideo(video.video_id));
    body.append(row);
    select.append(el("option", { value: video.video_id, text: video.file_name }));
  }
  if (videos.some((v) => v.video_id === previous)) select.value = previous;
  fillCompareChoices();
  await loadStrategies();
  setStatus(`${videos.length} video${videos.length === 1 ? "" : "s"}`);
}

function selectVideo(videoId) {
  $("#ask-video").value = videoId;
  for (const row of document.querySelectorAll(".video-row")) {
    row.classList.toggle("selected", row.dataset.videoId === videoId);
  }
}

$("#ingest-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const out = $("#ingest-status");
  try {
    let job = await postJson("/api/ingest", { paths: [$("#ingest-path").value] });
    while (job.state === "queued" || job.state === "running") {
      const done = job.progress.filter((p) => p.event !== "started" && p.event !== "progress").length;
      out.textContent = `ingesting ${job.files.length} file(s): ${job.state}, ${done} stages finished`;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      job = await api(`/api/ingest/${job.job_id}`);
    }
    const refused = Object.entries(job.refused).map(([p, why]) => `${p}: ${why}`).join("; ");
    out.textContent = `ingestion ${job.state}${job.error ? ` (${job.error})` : ""}${refused ? `; refused ${refused}` : ""}`;
    await loadLibrary();
  } catch (error) {
    out.textContent = `ingestion refused: ${error.message}`;
  }
});

// ------------------------------------------------------------------ player

function playAt(videoId, start) {
  const player = $("#player");
  const video = videos.find((v) => v.video_id === videoId);
  player.dataset.requestedStart = String(start);
  const seek = () => {
    player.currentTime = start;
    player.play().catch(() => { /* autoplay may be refused; the position is set */ });
  };
  if (player.dataset.videoId !== videoId) {
    player.dataset.videoId = videoId;
    player.src = `/api/videos/${videoId}/stream`;
    player.addEventListener("loadedmetadata", seek, { once: true });
    player.load();
  } else if (player.readyState >= 1) {
    seek();
  } else {
    player.addEventListener("loadedmetadata", seek, { once: true });
  }
  $("#now-playing").textContent = `${video ? video.file_name : videoId} from ${fmtTime(start)}`;
}

// A thumbnail of the moment that plays it when clicked; ``label`` (a file name) is shown under it.
// A cited moment: its thumbnail, its range and its evidence level (perceived, retrieved, echoed,
// none: what the agent's tools actually returned there; only the first two verify it).
function evidenceButton(videoId, start, end, extraClass = "", label = "", level = "") {
  const button = el(
    "button",
    {
      type: "button",
      className: `evidence ${extraClass}`.trim(),
      dataset: { videoId, start: String(start), end: String(end) },
      title: `play from ${fmtTime(start)}`,
    },
    el("img", {
      src: `/api/videos/${videoId}/thumbnail?t=${encodeURIComponent(start)}`,
      alt: `frame at ${fmtTime(start)}`,
      loading: "lazy",
    }),
    el("span", { className: "time", text: `${fmtTime(start)}–${fmtTime(end)}` }),
    ...(level ? [el("span", { className: `level level-${level}`, text: level })] : []),
    ...(label ? [el("span", { className: "video", text: label })] : []),
  );
  button.addEventListener("click", () => playAt(videoId, start));
  return button;
}

// ------------------------------------------------------------------ ask

$("#ask-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const out = $("#answer");
  const video = $("#ask-video").value;
  out.replaceChildren(el("p", { className: "meta", text: "thinking…" }));
  try {
    const result = await postJson("/api/ask", {
      video,
      question: $("#ask-q").value,
      agent: $("#ask-agent").value || null,
    });
    const list = el("div", { className: "evidence-list" });
    for (const c of result.citations) {
      list.append(evidenceButton(c.video_id, c.start, c.end, c.verified ? "" : "unverified", "", c.evidence));
    }
    const kind = result.extractive ? "extractive answer" : `answer (${result.model})`;
    out.replaceChildren(
      el("p", { className: "answer-text", id: "answer-text", text: result.answer }),
      ...(result.choice ? [el("p", { text: `Choice ${result.choice}: ${result.choice_text || ""}` })] : []),
      list,
      el("p", {
        className: "meta",
        text: `${kind} · ${result.seconds.toFixed(2)} s · ${result.trace.length} steps · trace ${result.query_id}`,
      }),
    );
  } catch (error) {
    out.replaceChildren(el("p", { className: "meta", text: `no answer: ${error.message}` }));
  }
});

// ------------------------------------------------------------------ strategies

// The agent menus (ask: scope "video", compare: "videos") list the server's strategies, each
// with its help as the tooltip; the scope's default comes first-selected. A choice survives reloads.
async function loadStrategies() {
  const strategies = await api("/api/strategies");
  for (const select of document.querySelectorAll("select[data-scope]")) {
    const scope = select.dataset.scope;
    const previous = select.value;
    select.replaceChildren();
    for (const s of strategies.filter((s) => s.scopes.includes(scope))) {
      const option = el("option", { value: s.name, text: s.title, title: s.help });
      option.selected = s.default_for.includes(scope);
      select.append(option);
    }
    if ([...select.options].some((o) => o.value === previous)) select.value = previous;
  }
}

// ------------------------------------------------------------------ compare

// One checkbox per video of the library; the ones ticked before a reload stay ticked.
function fillCompareChoices() {
  const box = $("#compare-videos");
  const ticked = new Set(
    [...box.querySelectorAll("input:checked")].map((input) => input.value),
  );
  box.replaceChildren(el("legend", { text: "videos to compare" }));
  for (const video of videos) {
    const input = el("input", { type: "checkbox", name: "compare-video", value: video.video_id });
    input.checked = ticked.has(video.video_id);
    box.append(el("label", { dataset: { videoId: video.video_id } }, input, video.file_name));
  }
}

$("#compare-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const out = $("#compare-answer");
  const chosen = [...document.querySelectorAll("#compare-videos input:checked")].map((i) => i.value);
  if (!chosen.length) {
    out.replaceChildren(el("p", { className: "meta", text: "pick at least one video to compare" }));
    return;
  }
  out.replaceChildren(el("p", { className: "meta", text: "comparing…" }));
  try {
    const result = await postJson("/api/compare", {
      videos: chosen,
      question: $("#compare-q").value,
      agent: $("#compare-agent").value || null,
    });
    const names = Object.fromEntries(result.videos.map((v) => [v.video_id, v.file_name]));
    const list = el("div", { className: "evidence-list" });
    for (const c of result.citations) {
      list.append(
        evidenceButton(
          c.video_id, c.start, c.end, c.verified ? "" : "unverified", names[c.video_id] || c.video_id, c.evidence,
        ),
      );
    }
    const kind = result.extractive ? "extractive answer" : `answer by ${result.agent} (${result.model})`;
    out.replaceChildren(
      el("p", { className: "answer-text", id: "compare-text", text: result.answer }),
      ...(result.choice ? [el("p", { text: `Choice ${result.choice}` })] : []),
      list,
      ...(result.note ? [el("p", { className: "meta note", text: result.note })] : []),
      el("p", {
        className: "meta",
        id: "compare-meta",
        text: `${kind} · ${result.videos.length} videos · ${result.seconds.toFixed(2)} s · ${result.trace.length} steps`,
      }),
    );
  } catch (error) {
    out.replaceChildren(el("p", { className: "meta", text: `no answer: ${error.message}` }));
  }
});

// ------------------------------------------------------------------ search

$("#search-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const out = $("#search-results");
  out.replaceChildren(el("p", { className: "meta", text: "searching…" }));
  try {
    const q = encodeURIComponent($("#search-q").value);
    if ($("#search-mode").value === "moments") {
      showMoments(out, await api(`/api/moments?q=${q}`));
      return;
    }
    const result = await api(`/api/search?q=${q}`);
    const hits = result.hits.map((hit) => {
      const list = el("div", { className: "evidence-list" });
      for (const m of hit.moments) list.append(evidenceButton(hit.video_id, m.start, m.end));
      return el(
        "div",
        { className: "hit", dataset: { videoId: hit.video_id } },
        el("div", { className: "title", text: `${hit.file_name} · score ${hit.score.toFixed(2)}` }),
        ...(hit.caption ? [el("div", { className: "meta", text: hit.caption })] : []),
        list,
      );
    });
    out.replaceChildren(
      ...(hits.length ? hits : [el("p", { className: "meta", text: "no video matches" })]),
      el("p", { className: "meta", text: `${result.hits.length} videos · ${result.seconds.toFixed(2)} s` }),
    );
  } catch (error) {
    out.replaceChildren(el("p", { className: "meta", text: `search failed: ${error.message}` }));
  }
});

// Moments across the library: one row per moment (its video, span, what was said or shown).
function showMoments(out, result) {
  const rows = result.moments.map((m) =>
    el(
      "div",
      { className: "hit moment", dataset: { videoId: m.video_id } },
      el("div", { className: "title", text: `${m.file} · ${fmtTime(m.start)}–${fmtTime(m.end)} · score ${m.score.toFixed(1)}` }),
      ...(m.text ? [el("div", { className: "meta", text: m.text })] : []),
      el("div", { className: "evidence-list" }, evidenceButton(m.video_id, m.start, m.end)),
    ),
  );
  out.replaceChildren(
    ...(rows.length ? rows : [el("p", { className: "meta", text: "no moment matches" })]),
    ...result.notes.map((n) => el("p", { className: "meta", text: n })),
    el("p", { className: "meta", text: `${result.moments.length} moments · ${result.seconds.toFixed(2)} s` }),
  );
}

loadLibrary().catch((error) => setStatus(error.message, true));
