// llmdeck gateway dashboard: polls /ui/api/state (schema llmdeck.gateway.ui/1) every 2 s and redraws.
// Everything from the gateway is data: written with textContent / setAttribute, never parsed as HTML.
"use strict";

const POLL_MS = 2000;
const HISTORY = 60; // polls of request rate kept per route for the sparkline
const history = new Map();
let lastState = null;

const $ = (sel) => document.querySelector(sel);

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === null || v === undefined) continue;
    if (k === "class") node.className = v;
    else if (k === "data") for (const [dk, dv] of Object.entries(v)) node.dataset[dk] = String(dv);
    else if (k === "title") node.title = String(v);
    else node.setAttribute(k, String(v));
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c === null || c === undefined ? "" : String(c)));
  return node;
}

function gib(bytes) {
  if (bytes === null || bytes === undefined) return "–";
  return (bytes / 2 ** 30).toFixed(2) + " GiB";
}

function ago(t, now) {
  if (t === null || t === undefined) return "never";
  const s = Math.max(0, now - t);
  if (s < 60) return s.toFixed(0) + " s ago";
  if (s < 3600) return (s / 60).toFixed(0) + " min ago";
  return (s / 3600).toFixed(1) + " h ago";
}

const LONG = 220; // characters of an error or a reason shown; the whole text is the tooltip

function clip(text) {
  return text.length > LONG ? text.slice(0, LONG) + "…" : text;
}

function num(v, digits, unit) {
  return v === null || v === undefined ? "–" : v.toFixed(digits) + (unit || "");
}

function hue(name) {
  let h = 0;
  for (const ch of name) h = (h * 31 + ch.codePointAt(0)) % 360;
  return h;
}

function segColor(seg) {
  return seg.kind === "model" ? "hsl(" + hue(seg.name) + " 62% 52%)" : null;
}

function renderPools(state) {
  const box = $("#pools");
  box.replaceChildren();
  for (const pool of state.pools) {
    const total = pool.total_bytes || 1;
    const bar = el("div", { class: "bar", data: { pool: pool.name } });
    const legend = el("div", { class: "legend" });
    for (const seg of pool.segments) {
      const label = seg.name + ": " + gib(seg.bytes) +
        (seg.kind === "model" ? " (planned " + gib(seg.planned_bytes) + ", measured " + gib(seg.measured_bytes) + ", " + seg.state + ")" : "");
      const div = el("div", {
        class: "seg", title: label,
        data: { kind: seg.kind, name: seg.name, bytes: seg.bytes, state: seg.state || "" },
      });
      div.style.width = (100 * seg.bytes / total).toFixed(3) + "%";
      const color = segColor(seg);
      if (color) div.style.backgroundColor = color;
      bar.append(div);
      const sw = el("span", { class: "sw", data: { kind: seg.kind } });
      sw.style.backgroundColor = color || getComputedStyle(div).backgroundColor;
      legend.append(el("span", { class: "item", data: { kind: seg.kind, name: seg.name } }, sw, label));
    }
    const title = el("div", { class: "pool-title" },
      el("strong", {}, pool.name === "host" ? "host memory" : pool.name),
      " ", el("span", { class: "muted" }, gib(pool.total_bytes) + " from " + pool.source + (pool.budget ? " · the budget's pool" : "")));
    box.append(el("div", { class: "pool", data: { pool: pool.name } }, title, bar, legend));
  }
  if (!state.pools.length) box.append(el("p", { class: "muted" }, "No memory reading (no /proc/meminfo here)."));
}

async function act(model, action) {
  if ((action === "stop" || action === "sleep") && !window.confirm(action + " " + model + "? Requests in flight finish first.")) return;
  const conn = $("#conn");
  try {
    const resp = await fetch("/ui/api/models/" + encodeURIComponent(model) + "/" + action, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Llmdeck-UI": "1" },
      body: "{}",
    });
    if (!resp.ok) {
      const data = await resp.json().catch(() => ({}));
      conn.hidden = false;
      conn.textContent = action + " " + model + ": " + ((data.error && data.error.message) || resp.status);
    }
  } catch (e) {
    conn.hidden = false;
    conn.textContent = action + " " + model + ": " + e;
  }
  poll(true);
}

function renderModels(state) {
  const body = $("#models tbody");
  body.replaceChildren();
  const now = state.generated_at;
  for (const m of state.models) {
    const buttons = el("td", {});
    for (const a of m.actions) {
      const b = el("button", { type: "button", data: { action: a, model: m.name } }, a);
      b.addEventListener("click", () => act(m.name, a));
      buttons.append(b);
    }
    const phase = m.state === "failed" || (!m.progress && m.last_error) ? (m.last_error || "") : (m.progress || "");
    body.append(el("tr", { data: { model: m.name, state: m.state } },
      el("td", {}, el("strong", {}, m.name)),
      el("td", {}, m.aliases.join(", ")),
      el("td", {}, el("span", { class: "state", data: { state: m.state } }, m.state)),
      el("td", { class: "phase", title: phase.length > LONG ? phase : null }, clip(phase)),
      el("td", { class: "num" }, m.queue),
      el("td", { class: "num" }, m.in_flight),
      el("td", { class: "num" }, ago(m.last_used, now)),
      el("td", { class: "num", title: m.planned_how }, gib(m.planned_bytes)),
      el("td", { class: "num" }, gib(m.measured_bytes)),
      el("td", { class: "num" }, m.starts + " / " + m.evictions),
      buttons));
  }
  $("#no-models").hidden = state.models.length > 0;
  const b = state.budget;
  $("#budget").textContent = b ? "(budget " + (b.memory_gib === "auto" ? "auto" : b.memory_gib + " GiB") +
    ", " + b.kind + " memory, held " + gib(b.held_bytes) + ")" : "";
}

function spark(values) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 " + HISTORY + " 20");
  svg.setAttribute("preserveAspectRatio", "none");
  const max = Math.max(0.001, ...values);
  const pts = values.map((v, i) => (HISTORY - values.length + i) + "," + (19 - 18 * v / max).toFixed(2));
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", pts.join(" "));
  svg.append(line);
  return svg;
}

function renderRoutes(state) {
  const body = $("#routes tbody");
  body.replaceChildren();
  let window_s = null;
  for (const r of state.routes) {
    window_s = r.window_s;
    const h = history.get(r.alias) || [];
    h.push(r.requests_per_s || 0);
    while (h.length > HISTORY) h.shift();
    history.set(r.alias, h);
    body.append(el("tr", { data: { alias: r.alias } },
      el("td", {}, el("strong", {}, r.alias)),
      el("td", { class: "num" }, r.healthy + " / " + r.backends + " up"),
      el("td", { class: "num" }, r.in_flight),
      el("td", { class: "num" }, num(r.requests_per_s, 2)),
      el("td", {}, spark(h)),
      el("td", { class: "num" }, num(r.ttft_p50_ms, 1, " ms")),
      el("td", { class: "num" }, num(r.ttft_p95_ms, 1, " ms")),
      el("td", { class: "num" }, r.prompt_tokens + " / " + r.completion_tokens),
      el("td", { class: "num" }, num(r.completion_tokens_per_s, 1)),
      el("td", { class: "num" }, r.requests + " / " + r.errors)));
  }
  $("#window").textContent = window_s === null ? "–" : window_s.toFixed(0);
}

function renderEvents(state) {
  const list = $("#events");
  list.replaceChildren();
  for (const e of state.events) {
    const when = new Date(e.at * 1000).toLocaleTimeString();
    list.append(el("li", { data: { kind: e.kind, model: e.model, seq: e.seq, at: e.at }, title: e.reason.length > LONG ? e.reason : null },
      el("span", { class: "muted" }, when + " "),
      el("span", { class: "kind" }, e.kind),
      " ", el("strong", {}, e.model), ": ", clip(e.reason),
      e.count > 1 ? el("span", { class: "muted" }, " (×" + e.count + ")") : ""));
  }
  $("#no-events").hidden = state.events.length > 0;
}

function renderReports(state) {
  const list = $("#reports");
  list.replaceChildren();
  for (const r of state.reports) {
    if (!r.href.startsWith("/ui/results/")) continue;
    const a = el("a", { href: r.href, target: "_blank", rel: "noopener noreferrer" }, r.name);
    list.append(el("li", { data: { kind: r.kind } }, el("span", { class: "kind" }, r.kind), a,
      el("span", { class: "muted" }, " " + new Date(r.modified * 1000).toLocaleString())));
  }
  $("#no-reports").hidden = state.reports.length > 0;
}

function render(state) {
  renderPools(state);
  renderModels(state);
  renderRoutes(state);
  renderEvents(state);
  renderReports(state);
  const g = state.gateway;
  $("#summary").textContent = "v" + g.version + " · up " + (g.uptime_s / 60).toFixed(0) + " min · keys " +
    (g.keys_required ? "required" : "off") + (g.insecure ? " · INSECURE" : "") + " · updated " +
    new Date(state.generated_at * 1000).toLocaleTimeString();
  document.body.dataset.generated = String(state.generated_at);
}

let timer = null;
async function poll(once) {
  if (timer !== null && once) clearTimeout(timer);
  const conn = $("#conn");
  try {
    const resp = await fetch("/ui/api/state", { cache: "no-store", credentials: "same-origin" });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    lastState = await resp.json();
    render(lastState);
    if (conn.textContent.startsWith("no answer")) conn.hidden = true;
  } catch (e) {
    conn.hidden = false;
    conn.textContent = "no answer from the gateway (" + e.message + "); retrying";
  }
  timer = setTimeout(poll, POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => poll(false));
