// Workers of queued evals (apodex serve --nats URL): a section of the run
// list, refreshed every 5 s while the list is shown; hidden when the
// server has no queue (GET /api/workers answers 404).
"use strict";

const Workers = {
  timer: null,
  section() {
    let s = $("workers-section");
    if (s) return s;
    s = el("section", { id: "workers-section", "aria-labelledby": "workers-h", hidden: "" },
      el("h2", { id: "workers-h" }, "Workers ", el("span", { id: "workers-url", class: "muted" })),
      el("p", { id: "workers-error", role: "alert", hidden: "" }),
      el("table", { id: "workers" },
        el("thead", {}, el("tr", {}, ["Worker", "Host", "Running", "Done", "Last heartbeat"].map((h, i) => el("th", { scope: "col", class: i === 2 || i === 3 ? "num" : null }, h)))),
        el("tbody")),
      el("h3", {}, "Rollouts in flight"),
      el("table", { id: "in-flight" },
        el("thead", {}, el("tr", {}, ["Eval", "Rollout", "Worker", "Run", "Renewed"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody")));
    $("runs-view").append(s);
    return s;
  },
  async load() {
    const s = Workers.section();
    let st;
    try {
      const r = await fetch("/api/workers", { credentials: "same-origin" });
      if (r.status === 404) { s.hidden = true; return false; }
      st = await r.json();
      if (!r.ok) throw new Error(st.error || r.statusText);
    } catch (err) {
      s.hidden = false;
      $("workers-error").hidden = false;
      $("workers-error").textContent = String(err.message || err);
      return true;
    }
    s.hidden = false;
    $("workers-error").hidden = true;
    $("workers-url").textContent = "on " + st.url + ": " + plural(st.workers.length, "worker");
    fill($("workers").tBodies[0], st.workers.length ? st.workers.map((w) => el("tr", {},
      el("td", {}, w.name), el("td", {}, w.host), el("td", { class: "num" }, w.running), el("td", { class: "num" }, w.done), el("td", {}, fmtTime(w.heartbeat))))
      : el("tr", {}, el("td", { colspan: "5", class: "muted" }, "No worker is connected. Start one with apodex worker --nats " + st.url)));
    fill($("in-flight").tBodies[0], st.in_flight.length ? st.in_flight.map((f) => el("tr", {},
      el("td", {}, f.eval), el("td", {}, f.rollout), el("td", {}, f.worker), el("td", {}, f.run_id || ""), el("td", {}, fmtTime(f.renewed))))
      : el("tr", {}, el("td", { colspan: "5", class: "muted" }, "None.")));
    return true;
  },
  async refresh() {
    clearTimeout(Workers.timer);
    if ($("runs-view").hidden) return;
    if (await Workers.load()) Workers.timer = setTimeout(Workers.refresh, 5000);
  },
};
window.addEventListener("hashchange", () => setTimeout(Workers.refresh));
document.addEventListener("DOMContentLoaded", () => setTimeout(Workers.refresh));
