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
  for (const k of kids.flat(Infinity)) {
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

function badge(text, cls) { return el("span", { class: "badge " + (cls || text) }, text); }

// fill replaces n's children with kids (arrays flattened, nulls skipped):
// replaceChildren would print an array as "a,[object HTMLSpanElement]".
function fill(n, ...kids) { n.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false).map((k) => (k instanceof Node ? k : document.createTextNode(String(k))))); }

// Words for the record's codes; an unknown code is shown with spaces.
const REASONS = {
  completed: "the agent finished and the final gate accepted its work", gate_failed: "the final gate failed", budget_turns: "ran out of turns",
  budget_tool_calls: "ran out of tool calls", budget_tokens: "ran out of tokens", soft_deadline: "hit its soft deadline",
  hard_timeout: "hit its hard timeout", cancelled: "was cancelled", model_error: "the model kept failing", crashed: "crashed",
  stopped: "was stopped (resumable)",
};
function words(code) { return code ? (REASONS[code] || code.replaceAll("_", " ")) : ""; }

function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

function fmtTokens(n) { n = n || 0; return n >= 10000 ? (n / 1000).toFixed(1) + "k" : String(n); }

function fmtDuration(ms) {
  if (!(ms >= 0)) return "";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + " min " + Math.round(s % 60) + " s";
  return Math.floor(m / 60) + " h " + (m % 60) + " min";
}

// state is one word for a run: running, paused, stopped, or how it ended.
function state(r) {
  if (r.liveness === "live") return r.paused ? "paused" : "running";
  if (r.liveness === "stopped") return r.paused ? "paused" : "stopped";
  return r.status || "finished";
}
const STATE_WORDS = { running: "Running", paused: "Paused", stopped: "Stopped", completed: "Completed", failed: "Failed", cancelled: "Cancelled" };

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

const PAGE = 20;

// listQuery is the run list's filters and page, kept in the URL (#/?status=failed&page=2).
function listQuery() {
  const q = new URLSearchParams((location.hash.split("?")[1]) || "");
  return { q: q.get("q") || "", status: q.get("status") || "", mode: q.get("mode") || "", page: Math.max(1, Number(q.get("page")) || 1) };
}
function setListQuery(f) {
  const q = new URLSearchParams();
  for (const k of ["q", "status", "mode"]) if (f[k]) q.set(k, f[k]);
  if (f.page > 1) q.set("page", f.page);
  const h = "#/" + (q.toString() ? "?" + q : "");
  if (location.hash !== h) location.hash = h; else loadRuns();
}

let filtersBound = false;
function bindFilters() {
  if (filtersBound) return;
  filtersBound = true;
  const change = () => setListQuery({ q: $("f-q").value.trim(), status: $("f-status").value, mode: $("f-mode").value, page: 1 });
  $("f-q").addEventListener("input", () => { clearTimeout(bindFilters.t); bindFilters.t = setTimeout(change, 250); });
  $("f-status").addEventListener("change", change);
  $("f-mode").addEventListener("change", change);
  $("run-filters").addEventListener("submit", (ev) => { ev.preventDefault(); change(); });
  $("page-prev").onclick = () => { const f = listQuery(); f.page--; setListQuery(f); };
  $("page-next").onclick = () => { const f = listQuery(); f.page++; setListQuery(f); };
}

async function loadRuns() {
  $("crumb").textContent = "";
  bindFilters();
  const f = listQuery();
  if (document.activeElement !== $("f-q")) $("f-q").value = f.q;
  $("f-status").value = f.status;
  $("f-mode").value = f.mode;
  try {
    const all = await api("/runs");
    all.sort((a, b) => Date.parse(b.started) - Date.parse(a.started));
    const needle = f.q.toLowerCase();
    const runs = all.filter((r) => (!f.status || state(r) === f.status || (f.status === "live" && state(r) === "running")) &&
      (!f.mode || (r.mode || "react") === f.mode) &&
      (!needle || r.id.toLowerCase().includes(needle) || (r.objective || "").toLowerCase().includes(needle)));
    const pages = Math.max(1, Math.ceil(runs.length / PAGE));
    const page = Math.min(f.page, pages);
    const shown = runs.slice((page - 1) * PAGE, page * PAGE);
    const now = Date.now();
    fill($("runs").querySelector("tbody"), shown.map((r) => {
      const st = state(r);
      const end = r.finished ? Date.parse(r.finished) : (st === "running" || st === "paused" ? now : NaN);
      return el("tr", { "data-state": st },
        el("td", {}, el("a", { href: "#/runs/" + encodeURIComponent(r.id) }, r.id)),
        el("td", {}, badge(STATE_WORDS[st] || st, st)),
        el("td", { class: "reason" }, r.termination_reason ? words(r.termination_reason) : (st === "stopped" ? "not running; apodex resume continues it" : "")),
        el("td", {}, r.mode || "react"),
        el("td", { class: "objective", title: r.objective || "" }, (r.objective || "").length > 120 ? r.objective.slice(0, 119) + "…" : (r.objective || "")),
        el("td", {}, fmtTime(r.started)),
        el("td", { class: "num" }, fmtDuration(end - Date.parse(r.started))),
        el("td", { class: "num" }, fmtTokens(r.usage && r.usage.total_tokens)));
    }));
    $("page-info").textContent = runs.length ? `${(page - 1) * PAGE + 1}–${(page - 1) * PAGE + shown.length} of ${runs.length} runs` + (runs.length < all.length ? ` (${all.length} in all)` : "") + ` · page ${page} of ${pages}` : (all.length ? `No run matches these filters (${all.length} in all).` : "");
    $("page-prev").disabled = page <= 1;
    $("page-next").disabled = page >= pages;
    $("no-runs").hidden = all.length > 0;
    $("runs").hidden = shown.length === 0;
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
      if (["evidence", "claim", "claim_mark", "verdict", "run_finished"].includes(e.type)) this.stale.add("claims");
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

  // summary is the header: what state the run is in and why, then the
  // delivery and verification verdicts, failures first.
  async summary() {
    const r = await api(this.base);
    if (this.closed) return;
    const u = r.usage || {};
    const st = state(r);
    this.mode = r.mode || "react";
    $("verdict").className = "verdict " + st;
    $("run-title").textContent = (STATE_WORDS[st] || st) + ": run " + r.run_id;
    let why = "";
    if (st === "paused") why = "No new model calls or dispatches until it is resumed: the Resume button below, or apodex resume " + r.run_id + ".";
    else if (st === "running") why = "Running now; this page follows it live.";
    else if (st === "stopped") why = "Stopped without finishing (killed or crashed); apodex resume " + r.run_id + " continues it.";
    else if (r.termination_reason) why = "It ended because " + words(r.termination_reason) + ".";
    fill($("headline"), badge(STATE_WORDS[st] || st, st), " ", why);
    const end = r.finished ? Date.parse(r.finished) : Date.now();
    fill($("run-facts"), [this.mode === "team" ? "team run" : "ReAct run (one agent)",
      r.model && r.model.provider ? "model " + [r.model.provider, r.model.name].filter(Boolean).join(" ") : "",
      fmtDuration(end - Date.parse(r.started)), plural(r.turns, "turn"), plural(r.tool_calls, "tool call") + (r.tool_errors ? ` (${r.tool_errors} failed)` : ""),
      fmtTokens(u.total_tokens) + " tokens", "started " + fmtTime(r.started)].filter(Boolean).join(" · "));
    fill($("run-objective"), el("strong", {}, "Objective: "), r.objective || "", r.summary ? [el("br"), el("strong", {}, "The agent's summary: "), r.summary] : null);

    // Problems: the gate's failures, else the error (one line per reason).
    const problems = (r.failures && r.failures.length) ? r.failures : (r.error ? r.error.replace(/^the final gate failed: /, "").split("; ") : []);
    $("problems").hidden = problems.length === 0;
    fill($("problems"), el("h2", {}, st === "completed" ? "Problems noted" : "Why it " + (st === "failed" ? "failed" : "stopped")),
      el("ul", { class: "fails" }, problems.map((p) => el("li", {}, p))));

    const d = r.delivery;
    const dEntries = d ? [...d.entries].sort((a, b) => (a.status === "delivered") - (b.status === "delivered")) : [];
    $("delivery").className = "card " + (!d ? "none" : d.ok ? "ok" : "bad");
    fill($("delivery-body"), !d ? el("p", { class: "muted" }, st === "running" || st === "paused" ? "Not yet: outputs are reconciled when the run finishes." : "No delivery was recorded.") : [
      el("p", { class: "verdict-line" }, d.ok ? "✓ Delivered: every declared output arrived." : "✗ Not delivered: " + (d.reason || "see below")),
      el("ul", { class: "lines" }, dEntries.map((x) => el("li", { class: x.status === "delivered" ? "pass" : "fail" },
        x.status === "delivered" ? "✓ " : "✗ ", el("code", {}, x.path),
        x.status === "delivered" ? ` · ${x.bytes} B by ${x.agent || "?"}` : ` · ${(x.reason || x.status).replaceAll("_", " ")}${x.detail ? ": " + x.detail : ""}`)),
        (d.undeclared || []).map((p) => el("li", { class: "muted" }, "· ", el("code", {}, p), " was written but never declared, so not delivered")))]);

    const checks = [...(r.verification || [])].sort((a, b) => a.passed - b.passed);
    const failed = checks.filter((c) => !c.passed).length;
    $("verification").className = "card " + (!checks.length ? "none" : failed ? "bad" : "ok");
    fill($("verification-body"), !checks.length ? el("p", { class: "muted" }, st === "running" || st === "paused" ? "Not yet: checks run when the agent finishes." : "No deliverable checks or verifier clauses: the task declared none.") : [
      el("p", { class: "verdict-line" }, failed ? `✗ ${failed} of ${checks.length} checks failed` : `✓ All ${checks.length} checks passed`),
      el("ul", { class: "lines" }, checks.map((c) => el("li", { class: c.passed ? "pass" : "fail" },
        c.passed ? "✓ " : "✗ ", c.label, c.detail ? el("div", { class: "detail" }, c.detail) : null)))]);
    $("intervene").hidden = r.liveness === "finished";
    $("board-section").hidden = this.mode !== "team";
  }

  async board() {
    const b = await api(this.base + "/board");
    if (this.closed) return;
    const c = b.counts;
    $("board-counts").textContent = b.found ? `${c.open} open · ${c.in_progress} in progress · ${c.resolved} resolved · ${c.cancelled} cancelled` : "";
    if (!b.found) { fill($("board"), el("p", { class: "muted" }, this.mode === "team" ? "The lead has not planned yet: the board fills when it adds items." : "A ReAct run has no board: one agent works through the objective.")); return; }
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

  // claims draws the ledger: each claim (id, status) on the left, each
  // evidence ref once on the right, "cites" lines between them and
  // "conflicts" arcs between claims; the table below says it in words.
  async claims() {
    const g = await api(this.base + "/claims");
    if (this.closed) return;
    $("claims-section").hidden = g.nodes.length === 0;
    if (!g.nodes.length) return;
    const claims = g.nodes.filter((n) => n.kind === "claim"), ev = g.nodes.filter((n) => n.kind === "evidence");
    const row = 30, top = 34, H = top + row * Math.max(claims.length, ev.length), W = 960, cx = 470, ex = 560;
    const pos = {};
    claims.forEach((n, i) => { pos[n.id] = [cx, top + i * row]; });
    ev.forEach((n, i) => { pos[n.id] = [ex, top + i * row]; });
    const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Claims and the evidence they cite" });
    svg.append(el("svg:text", { x: 4, y: 14, class: "head" }, "claim · status"), el("svg:text", { x: ex + 12, y: 14, class: "head" }, "evidence it cites"));
    for (const e of g.edges) {
      const a = pos[e.from], b = pos[e.to];
      if (!a || !b) continue;
      if (e.kind === "conflicts") svg.append(el("svg:path", { class: "conflict", d: `M${a[0]},${a[1]} C${a[0] - 60},${a[1]} ${b[0] - 60},${b[1]} ${b[0]},${b[1]}` }, el("svg:title", {}, e.from + " conflicts with " + e.to)));
      else svg.append(el("svg:line", { class: "cites", x1: a[0], y1: a[1], x2: b[0], y2: b[1] }));
    }
    const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);
    for (const n of claims) {
      const [x, y] = pos[n.id];
      const flag = n.withdrawn ? "withdrawn" : n.load_bearing ? "load-bearing" : n.side ? "side" : "";
      const t = el("svg:text", { x: 4, y: y + 4 }, el("svg:tspan", { class: "cid" }, n.status ? n.id : ""), el("svg:tspan", { class: "st " + (n.status || "") }, n.status ? " " + n.status + (flag ? ", " + flag : "") + "  " : ""),
        clip(n.label, n.status ? 34 : 60));
      svg.append(el("svg:circle", { class: "claim " + (n.status || "") + (n.withdrawn ? " withdrawn" : "") + (n.load_bearing ? " lb" : ""), cx: x, cy: y, r: n.load_bearing ? 8 : 6 }, el("svg:title", {}, n.id + ": " + n.label)), t);
    }
    for (const n of ev) {
      const [x, y] = pos[n.id];
      const label = n.label && n.label !== n.id ? n.id + " · " + n.label : n.id;
      svg.append(el("svg:circle", { class: "evidence", cx: x, cy: y, r: 6 }), el("svg:text", { x: x + 12, y: y + 4 }, clip(label, 56), el("svg:title", {}, label)));
    }
    fill($("claims"), svg);
    // The verification card counts the claims' verdicts too.
    const ledgerClaims = claims.filter((n) => n.status && !n.withdrawn);
    const bad = ledgerClaims.filter((n) => n.status === "refuted" || n.status === "disputed");
    const count = (st) => ledgerClaims.filter((n) => n.status === st).length;
    fill($("claims-verdict"), !ledgerClaims.length ? null : [
      el("p", { class: "verdict-line " + (bad.length ? "fail" : "pass") }, (bad.length ? "✗ " : "✓ ") + "Claims: " +
        ["refuted", "disputed", "corroborated", "unresolved"].map((st) => count(st) ? count(st) + " " + st : "").filter(Boolean).join(", ") +
        ` (${ledgerClaims.filter((n) => n.load_bearing).length} load-bearing)`),
      el("ul", { class: "lines" }, [...bad, ...ledgerClaims.filter((n) => !bad.includes(n))].map((n) => el("li", { class: bad.includes(n) ? "fail" : "pass" },
        bad.includes(n) ? "✗ " : "✓ ", n.id + " " + n.status + (n.load_bearing ? ", load-bearing" : "") + ": " + n.label, n.why ? el("div", { class: "detail" }, n.why) : null)))]);
    const cites = {};
    for (const e of g.edges) if (e.kind === "cites") (cites[e.from] = cites[e.from] || []).push(e.to);
    const conflicts = {};
    for (const e of g.edges) if (e.kind === "conflicts") { (conflicts[e.from] = conflicts[e.from] || []).push(e.to); (conflicts[e.to] = conflicts[e.to] || []).push(e.from); }
    const ledger = claims.some((n) => n.status);
    $("claims-table").hidden = !ledger;
    fill($("claims-table").querySelector("tbody"), ledger ? claims.map((n) => el("tr", { class: n.withdrawn ? "withdrawn" : "" },
      el("th", { scope: "row" }, n.id),
      el("td", {}, badge(n.status, "claim-" + n.status), n.settled ? [" ", badge("settled", "settled")] : null, n.load_bearing ? [" ", badge("load-bearing", "lb")] : null,
        n.side ? [" ", badge("side", "side")] : null, n.withdrawn ? [" ", badge("withdrawn", "withdrawn")] : null,
        n.why ? el("div", { class: "detail" }, n.why + (n.withdrawn ? "; withdrawn: " + n.withdrawn : "") + (n.side ? "; side: " + n.side : "")) : null),
      el("td", {}, n.label, conflicts[n.id] ? el("div", { class: "detail" }, "conflicts with " + conflicts[n.id].join(", ")) : null),
      el("td", {}, [n.agent, n.item ? "on " + n.item : ""].filter(Boolean).join(" ")),
      el("td", {}, (cites[n.id] || []).map((r) => el("code", { class: "ref" }, r))))) : []);
  }

  async transcript() {
    const entries = await api(this.base + "/transcript?after=" + this.after);
    if (this.closed) return;
    const ol = $("transcript");
    for (const e of entries) {
      if (e.seq <= this.after && ol.lastChild && Number(ol.lastChild.dataset.seq) >= e.seq) continue;
      // A result goes under its call, so a step reads as one item.
      const call = e.kind === "tool_result" && e.call_id ? ol.querySelector(`li[data-call="${CSS.escape((e.agent || "") + "/" + e.call_id)}"]`) : null;
      if (call) {
        call.classList.add(e.is_error ? "error" : "ok");
        call.querySelector(".what").append(el("span", { class: e.is_error ? "res fail" : "res pass" }, e.is_error ? " → failed" : " → ok"));
        if (e.output) call.append(out(e.output, e.full_bytes));
        continue;
      }
      const w = say(e);
      if (!w) continue;
      ol.append(el("li", { class: "k-" + e.kind + (e.is_error ? " error" : ""), "data-seq": e.seq, "data-call": e.call_id ? (e.agent || "") + "/" + e.call_id : null },
        el("span", { class: "who" }, e.agent || "run"), el("span", { class: "what" }, w.what), w.text ? el("div", { class: "text" }, w.text) : null,
        e.kind === "tool_result" && e.output ? out(e.output, e.full_bytes) : null,
        (e.lines || []).map((l) => el("div", { class: "out" }, l))));
    }
    if (entries.length) this.after = Math.max(this.after, ...entries.map((e) => e.seq));
  }
}

function out(text, full) {
  const clipped = text.length > 600 ? text.slice(0, 600) + "…" : text;
  return el("pre", { class: "out" }, clipped, full ? `\n(${full} bytes in all; the model saw the start)` : "");
}

// args turns a tool call's JSON arguments into a short line: a command as
// it is, a path, else key: value pairs.
function args(tool, raw) {
  let a;
  try { a = JSON.parse(raw || "{}"); } catch (_) { return raw || ""; }
  if (a === null || typeof a !== "object") return String(raw);
  if (typeof a.command === "string") return a.command;
  const parts = [];
  for (const [k, v] of Object.entries(a)) {
    let s = typeof v === "string" ? v : Array.isArray(v) && v.every((x) => typeof x === "string") ? v.join(", ") : JSON.stringify(v);
    if (s.length > 160) s = s.slice(0, 159) + "…";
    parts.push(k + ": " + s);
  }
  return parts.join(" · ");
}

// say puts one transcript entry in words: {what, text}; null hides it.
function say(e) {
  const d = e.detail || "";
  switch (e.kind) {
    case "run_started": return { what: "run started", text: e.text + (d ? " (" + d.replace(/^run \S+: /, "") + ")" : "") };
    case "contract": return { what: d.startsWith("contract version") ? "the task changed (" + d.replace(/^contract /, "") + ")" : "the task" + d.replace(/^contract/, ""), text: e.text };
    case "assistant":
      if (e.text) return { what: "says" + (e.turn ? ` (turn ${e.turn}${e.tokens ? ", " + fmtTokens(e.tokens) + " tokens" : ""})` : ""), text: e.text };
      return { what: (e.turn ? `turn ${e.turn}: ` : "") + (d === "tool_calls" ? "calls tools" : d === "stop" ? "stops" : "answers") + (e.tokens ? ` (${fmtTokens(e.tokens)} tokens)` : "") };
    case "tool_call": return { what: el("span", {}, "runs ", el("code", {}, e.tool)), text: args(e.tool, e.arguments) };
    case "tool_result": return { what: el("span", {}, "result of ", el("code", {}, e.tool), e.is_error ? " (failed)" : "") };
    case "retry": return { what: "model call retried", text: d };
    case "model_error": return { what: "model call failed", text: d };
    case "user": return { what: "message from the user" + (e.class ? " (" + e.class.replaceAll("_", " ") + ")" : ""), text: e.text };
    case "observation": return { what: "note from the runtime" + (e.class ? " (" + e.class.replaceAll("_", " ") + ")" : ""), text: e.text };
    case "control": return { what: "sent a control", text: d };
    case "compaction": return { what: "history compacted", text: d };
    case "board": return { what: "board changed", text: d };
    case "assignment": return { what: "work assignment", text: d };
    case "agent": return { what: "agent started", text: d };
    case "report": return { what: "reports", text: (e.text || "") + (d ? " (" + d + ")" : "") };
    case "verdict": return { what: "verdict: " + d, text: e.text };
    case "lease": return { what: "outputs lease", text: d.replace(/^lease /, "") };
    case "warning": return { what: "warning" + (e.class ? " (" + e.class.replaceAll("_", " ") + ")" : ""), text: d };
    case "partial_result": return { what: "partial result" + (d ? " (" + d + ")" : ""), text: e.text };
    case "delivery": return { what: d === "delivered" ? "outputs delivered" : d === "nothing declared" ? "nothing was declared for delivery" : "outputs not all delivered" };
    case "verification": return { what: d.startsWith("passed") ? "check passed" : "check failed", text: d.replace(/^(passed|FAILED) /, "") };
    case "resumed": return { what: "run resumed", text: d };
    case "run_finished": return { what: "run finished", text: d + (e.text ? "\n" + e.text : "") };
    case "event":
      if (d === "claim") return { what: "states a claim (see Claims and evidence)" };
      if (d === "claim_mark") return { what: "marks a claim (see Claims and evidence)" };
      if (d === "precheck") return { what: "checked the deliverables before the final gate (the result is in the call above)" };
      return { what: "a record entry this page does not describe", text: d.replaceAll("_", " ") };
    default: return { what: "a record entry this page does not describe", text: e.kind };
  }
}
