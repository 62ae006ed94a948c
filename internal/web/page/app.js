// The Apodex page: a run list and a live run view. No framework, no build
// step; every text from a run goes into the DOM as text, never as markup.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...kids) {
  const n = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") n.setAttribute("class", v);
    else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v);
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null || k === false) continue;
    n.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return n;
}

async function api(path, opts) {
  const r = await fetch("/api" + path, Object.assign({ credentials: "same-origin", headers: { "Content-Type": "application/json" } }, opts));
  const body = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function showError(err) {
  const e = $("error");
  e.hidden = !err;
  e.textContent = err ? String(err.message || err) : "";
}

function fmtTime(t) {
  if (!t) return "";
  const d = new Date(t);
  return isNaN(d) ? "" : d.toLocaleString();
}

function badge(text) { return el("span", { class: "badge " + text }, text); }

// ---- routing ----

let current = null; // the open run view

function route() {
  if (current) { current.close(); current = null; }
  showError(null);
  const m = location.hash.match(/^#\/runs\/([A-Za-z0-9._-]+)/);
  $("runs-view").hidden = !!m;
  $("run-view").hidden = !m;
  if (m) { current = new RunView(m[1]); } else { loadRuns(); }
}
window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", route);

async function loadRuns() {
  $("crumb").textContent = "";
  try {
    const runs = await api("/runs");
    const tb = $("runs").querySelector("tbody");
    tb.replaceChildren(...runs.map((r) => el("tr", {},
      el("td", {}, el("a", { href: "#/runs/" + encodeURIComponent(r.id) }, r.id)),
      el("td", {}, badge(r.liveness), " ", r.liveness === "live" ? "" : badge(r.status)),
      el("td", {}, r.mode || ""),
      el("td", {}, r.objective),
      el("td", {}, fmtTime(r.started)),
      el("td", {}, (r.usage && r.usage.total_tokens) || 0))));
    $("no-runs").hidden = runs.length > 0;
  } catch (e) { showError(e); }
}

// ---- one run ----

class RunView {
  constructor(id) {
    this.id = id;
    this.base = "/runs/" + encodeURIComponent(id);
    this.after = 0;       // last transcript seq shown
    this.pending = null;  // a scheduled refresh
    this.stale = new Set(["summary", "board", "activity", "files", "claims", "transcript"]);
    $("crumb").textContent = "› " + id;
    $("run-title").textContent = "Run " + id;
    $("transcript").replaceChildren();
    $("file-view").hidden = true;
    this.bind();
    this.refresh();
    this.follow();
  }

  close() {
    if (this.es) this.es.close();
    clearTimeout(this.pending);
    this.closed = true;
  }

  bind() {
    $("say").onsubmit = async (ev) => {
      ev.preventDefault();
      const text = $("say-text").value.trim();
      if (!text) return;
      try {
        const r = await api(this.base + "/messages", { method: "POST", body: JSON.stringify({ text }) });
        $("say-status").textContent = "Message " + r.id + " queued: " + r.note;
        $("say-text").value = "";
      } catch (e) { $("say-status").textContent = "Not sent: " + e.message; }
    };
    $("say-text").onkeydown = (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); $("say").requestSubmit(); }
    };
    for (const b of document.querySelectorAll(".controls button[data-action]")) {
      b.onclick = async () => {
        const action = b.dataset.action;
        if (action === "cancel" && !confirm("Cancel this run? Delivered outputs are kept.")) return;
        try {
          const r = await api(this.base + "/control", { method: "POST", body: JSON.stringify({ action }) });
          $("say-status").textContent = action + ": " + r.note;
        } catch (e) { $("say-status").textContent = action + " refused: " + e.message; }
      };
    }
  }

  // follow opens the SSE stream; each record event marks views stale.
  follow() {
    this.es = new EventSource("/api" + this.base + "/stream");
    this.es.addEventListener("open", () => { $("live").textContent = "● live"; });
    this.es.addEventListener("record", (m) => {
      let e = {};
      try { e = JSON.parse(m.data); } catch (_) { return; }
      this.stale.add("summary").add("transcript").add("activity");
      if (e.type === "board" || e.type === "assignment") this.stale.add("board");
      if (e.type === "file_delta" || e.type === "tool_result" || e.type === "run_finished") this.stale.add("files");
      if (e.type === "evidence" || e.type === "run_finished") this.stale.add("claims");
      if (e.type === "run_finished") this.stale.add("board");
      this.schedule();
    });
    this.es.addEventListener("end", () => { this.es.close(); $("live").textContent = "run finished"; this.stale.add("summary").add("board"); this.schedule(); });
    this.es.addEventListener("error", () => { if (this.es.readyState === EventSource.CONNECTING) $("live").textContent = "reconnecting…"; });
  }

  schedule() {
    if (this.pending) return;
    this.pending = setTimeout(() => { this.pending = null; this.refresh(); }, 150);
  }

  async refresh() {
    const todo = [...this.stale];
    this.stale.clear();
    const jobs = { summary: () => this.summary(), board: () => this.board(), activity: () => this.activity(),
      files: () => this.files(), claims: () => this.claims(), transcript: () => this.transcript() };
    try {
      await Promise.all(todo.map((k) => jobs[k]()));
      showError(null);
    } catch (e) { showError(e); }
  }

  async summary() {
    const r = await api(this.base);
    if (this.closed) return;
    const u = r.usage || {};
    $("run-summary").replaceChildren(badge(r.liveness), " ", badge(r.status), r.paused ? [" ", badge("paused")] : [],
      " " + (r.mode || "") + " · " + r.objective + " · " + (u.total_tokens || 0) + " tokens · " + r.tool_calls + " tool calls · " + r.events + " events");
    $("intervene").hidden = r.liveness === "finished";
  }

  async board() {
    const b = await api(this.base + "/board");
    if (this.closed) return;
    const c = b.counts;
    $("board-counts").textContent = b.found ? `${c.open} open · ${c.in_progress} in progress · ${c.resolved} resolved · ${c.cancelled} cancelled` : "";
    if (!b.found) { $("board").replaceChildren(el("p", { class: "muted" }, "No board: this run has no plan (yet).")); return; }
    const cols = [["open", "Open"], ["in_progress", "In progress"], ["resolved", "Resolved"], ["cancelled", "Cancelled"]];
    $("board").replaceChildren(...cols.map(([state, name]) => el("div", { class: "col", "data-state": state },
      el("h3", {}, name),
      b.items.filter((it) => it.state === state).map((it) => el("article", { class: "item " + state, "data-id": it.id, tabindex: "0", title: it.objective },
        el("div", {}, el("span", { class: "id" }, it.id), el("span", { class: "title" }, it.title)),
        el("div", { class: "meta" }, [it.owners && it.owners.length ? "by " + it.owners.join(", ") : "", it.deps && it.deps.length ? "after " + it.deps.join(", ") : "", it.note || ""].filter(Boolean).join(" · ")))))));
  }

  // activity draws Figure 8: one lane per agent, its active window as a
  // bar on the run's time axis, the tool-call count at the right.
  async activity() {
    const a = await api(this.base + "/activity");
    if (this.closed) return;
    const t0 = Date.parse(a.start), t1 = Math.max(Date.parse(a.end), t0 + 1);
    const W = 900, left = 150, right = 70, lane = 26, top = 20;
    const H = top + lane * a.agents.length + 24;
    const x = (t) => left + (W - left - right) * ((Date.parse(t) - t0) / (t1 - t0));
    const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Agent activity timeline" });
    svg.append(el("svg:text", { x: W - right + 8, y: 14 }, "tools"));
    a.agents.forEach((g, i) => {
      const y = top + i * lane;
      const label = g.agent + (g.role ? " · " + g.role : "");
      svg.append(el("svg:text", { x: 4, y: y + 16 }, label.length > 22 ? label.slice(0, 21) + "…" : label));
      svg.append(el("svg:line", { class: "axis", x1: left, x2: W - right, y1: y + lane - 2, y2: y + lane - 2 }));
      if (g.queued && !g.queued.startsWith("0001")) {
        svg.append(el("svg:rect", { class: "queued", x: x(g.queued), y: y + 8, width: Math.max(1, x(g.from) - x(g.queued)), height: 6 }));
      }
      const bar = el("svg:rect", { class: "bar", x: x(g.from), y: y + 4, width: Math.max(3, x(g.to) - x(g.from)), height: 14, rx: 2, "data-agent": g.agent });
      bar.append(el("svg:title", {}, `${g.agent}${g.role ? " (" + g.role + (g.parent ? ", for " + g.parent : "") + ")" : ""}: ${(g.active_ms / 1000).toFixed(1)} s active, ${g.turns} turns, ${g.tool_calls} tool calls, ${g.tokens} tokens`));
      svg.append(bar);
      svg.append(el("svg:text", { x: W - right + 8, y: y + 16, class: "count" }, g.tool_calls));
    });
    svg.append(el("svg:text", { x: left, y: H - 4 }, "0 s"));
    svg.append(el("svg:text", { x: W - right - 40, y: H - 4 }, ((t1 - t0) / 1000).toFixed(1) + " s"));
    $("timeline").replaceChildren(a.agents.length ? svg : el("p", { class: "muted" }, "No agent has acted yet."));
  }

  async files() {
    const f = await api(this.base + "/files");
    if (this.closed) return;
    $("files").replaceChildren(...f.files.map((it) => el("li", {},
      el("button", { type: "button", onclick: () => this.open(it) }, it.path, el("span", { class: "muted" }, ` · ${it.bytes} B · ${it.producer}`)))));
    if (!f.files.length) $("files").replaceChildren(el("li", { class: "muted" }, "No files produced yet."));
  }

  async open(it) {
    $("file-view").hidden = false;
    $("file-name").textContent = it.path;
    $("file-prov").textContent = "made by " + it.producer + " with " + it.action + (it.line ? " · from " + it.line : "");
    $("file-content").textContent = "…";
    try {
      const r = await fetch("/api" + this.base + "/files" + it.path.split("/").map(encodeURIComponent).join("/"), { credentials: "same-origin" });
      $("file-content").textContent = r.ok ? await r.text() : "Not readable: " + ((await r.json().catch(() => ({}))).error || r.statusText);
    } catch (e) { $("file-content").textContent = String(e); }
  }

  async claims() {
    const g = await api(this.base + "/claims");
    if (this.closed) return;
    $("claims-section").hidden = g.nodes.length === 0;
    if (!g.nodes.length) return;
    const claims = g.nodes.filter((n) => n.kind === "claim"), ev = g.nodes.filter((n) => n.kind === "evidence");
    const row = 28, H = 20 + row * Math.max(claims.length, ev.length), W = 900;
    const pos = {};
    claims.forEach((n, i) => { pos[n.id] = [300, 20 + i * row]; });
    ev.forEach((n, i) => { pos[n.id] = [600, 20 + i * row]; });
    const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Claims and the evidence they cite" });
    for (const e of g.edges) {
      const a = pos[e.from], b = pos[e.to];
      if (a && b) svg.append(el("svg:line", { x1: a[0], y1: a[1], x2: b[0], y2: b[1] }));
    }
    const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);
    for (const n of claims) svg.append(el("svg:circle", { class: "claim", cx: pos[n.id][0], cy: pos[n.id][1], r: 6 }), el("svg:text", { x: 4, y: pos[n.id][1] + 4 }, clip(n.label, 40)));
    for (const n of ev) svg.append(el("svg:circle", { class: "evidence", cx: pos[n.id][0], cy: pos[n.id][1], r: 6 }), el("svg:text", { x: 612, y: pos[n.id][1] + 4 }, clip(n.id + " " + n.label, 44)));
    $("claims").replaceChildren(svg);
  }

  async transcript() {
    const entries = await api(this.base + "/transcript?after=" + this.after);
    if (this.closed) return;
    const ol = $("transcript");
    for (const e of entries) {
      if (e.seq <= this.after && ol.lastChild && Number(ol.lastChild.dataset.seq) >= e.seq) continue;
      const words = e.text || e.detail || (e.tool ? e.tool + " " + (e.arguments || "") : "");
      ol.append(el("li", { class: e.kind, "data-seq": e.seq },
        el("span", { class: "who" }, e.agent || "run"), el("span", { class: "kind" }, e.kind), words,
        e.output ? el("div", { class: "out" }, e.output.length > 600 ? e.output.slice(0, 600) + "…" : e.output) : null,
        (e.lines || []).map((l) => el("div", { class: "out" }, l))));
    }
    if (entries.length) this.after = Math.max(this.after, ...entries.map((e) => e.seq));
  }
}
