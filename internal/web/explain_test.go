package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/apodex/apodex/internal/web"
)

// rawKinds are the transcript's entry kinds: the page says them in words.
var rawKinds = []string{"run_started", "contract", "assistant", "tool_call", "tool_result", "retry", "model_error", "user",
	"observation", "control", "compaction", "board", "assignment", "agent", "report", "verdict", "lease", "warning",
	"partial_result", "delivery", "verification", "resumed", "run_finished", "event"}

// openRun opens a run's page and waits for its header and transcript.
func openRun(t *testing.T, ctx context.Context, url, id string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/#/runs/"+id),
		poll(`document.getElementById("headline").textContent.length > 0`),
		chromedp.WaitVisible(css(`#transcript li`))); err != nil {
		t.Fatal(err)
	}
}

// readsInWords checks what every view must: no object's default string,
// no undefined or NaN, no raw transcript kind, no duplicate evidence label.
func readsInWords(t *testing.T, ctx context.Context) {
	t.Helper()
	body := text(t, ctx, `body`)
	for _, bad := range []string{"[object", "undefined", "NaN", "null"} {
		if strings.Contains(body, bad) {
			i := strings.Index(body, bad)
			t.Errorf("the page shows %q: …%s…", bad, body[max(0, i-60):min(len(body), i+40)])
		}
	}
	whats := eval[[]string](t, ctx, `[...document.querySelectorAll("#transcript .what")].map(e => e.textContent.trim())`)
	for _, w := range whats {
		for _, k := range rawKinds {
			if w == k || strings.Contains(k, "_") && strings.Contains(w, k) {
				t.Errorf("a transcript item is labelled with the raw kind %q: %q", k, w)
			}
		}
		if strings.Contains(w, "tool_calls") {
			t.Errorf("a transcript item shows a raw finish reason: %q", w)
		}
	}
	labels := eval[[]string](t, ctx, `[...document.querySelectorAll("#claims svg text")].map(e => e.textContent)`)
	for _, l := range labels {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == f[len(f)-1] && strings.HasPrefix(f[0], "/") {
			t.Errorf("the claim graph names %s twice: %q", f[0], l)
		}
	}
}

// TestPageExplainsAFailedRun: the header says it failed and why, the
// delivery and verification sections list their failures first, with
// their lines, and the transcript reads in words.
func TestPageExplainsAFailedRun(t *testing.T) {
	ctx := browser(t)
	home := t.TempDir()
	failedRun(t, home, "failed-run")
	srv := serve(t, web.Config{Home: home})
	openRun(t, ctx, srv.URL, "failed-run")
	if err := chromedp.Do(ctx, poll(`document.querySelectorAll("#verification-body li").length > 0`)); err != nil {
		t.Fatal(err)
	}
	head := text(t, ctx, `#verdict`)
	for _, want := range []string{"Failed: run failed-run", "the final gate failed", "Why it failed", "ReAct run",
		"/outputs/report.md missing", "Not delivered: 1 of 2 declared paths not delivered", "checks failed",
		`"1.00" but the recompute printed "6637.00"`} {
		if !strings.Contains(head, want) {
			t.Errorf("header lacks %q:\n%s", want, head)
		}
	}
	firstDelivery := text(t, ctx, `#delivery-body li:first-child`)
	firstCheck := text(t, ctx, `#verification-body li:first-child`)
	if !strings.Contains(firstDelivery, "✗") || !strings.Contains(firstDelivery, "report.md") {
		t.Errorf("the first delivery line is %q, want the failed report.md", firstDelivery)
	}
	if !strings.HasPrefix(firstCheck, "✗") || !strings.Contains(firstCheck, "exists /outputs/report.md") && !strings.Contains(firstCheck, "missing") {
		t.Errorf("the first check line is %q, want a failure with its detail", firstCheck)
	}
	if hidden := eval[bool](t, ctx, `document.getElementById("board-section").hidden`); !hidden {
		t.Error("a ReAct run shows a board section")
	}
	tr := text(t, ctx, `#transcript`)
	for _, want := range []string{"runs claim_outputs", "runs bash", "echo 1.00 > /outputs/sum.txt", "→ ok", "→ failed", "check failed", "run finished"} {
		if !strings.Contains(tr, want) {
			t.Errorf("transcript lacks %q", want)
		}
	}
	readsInWords(t, ctx)
	screenshotOf(t, ctx, "failed-header.png", `#verdict`)
	screenshotOf(t, ctx, "failed-transcript.png", `#transcript`)
	screenshot(t, ctx, "failed-top.png")
}

// TestPageExplainsAPausedRun: a paused live run says so in words (no
// "[object …]"), with what resumes it, and the verdicts say "not yet".
func TestPageExplainsAPausedRun(t *testing.T) {
	ctx := browser(t)
	home := t.TempDir()
	srv := serve(t, web.Config{Home: home}) // closed after the run ends (cleanups run last first)
	liveTeamRun(t, home, "team-paused", 300*time.Millisecond)
	if code, body := post(t, srv, "/api/runs/team-paused/control", `{"action":"pause"}`); code != http.StatusAccepted {
		t.Fatalf("pause: %d %v", code, body)
	}
	openRun(t, ctx, srv.URL, "team-paused")
	if err := chromedp.Do(ctx, poll(`document.getElementById("run-title").textContent.startsWith("Paused")`)); err != nil {
		t.Fatalf("the page never said the run is paused: %v (%q)", err, text(t, ctx, `#verdict`))
	}
	head := text(t, ctx, `#verdict`)
	for _, want := range []string{"Paused: run team-paused", "No new model calls", "apodex resume team-paused", "team run", "Not yet"} {
		if !strings.Contains(head, want) {
			t.Errorf("header lacks %q:\n%s", want, head)
		}
	}
	if eval[bool](t, ctx, `document.getElementById("intervene").hidden`) {
		t.Error("a paused run hides its controls")
	}
	readsInWords(t, ctx)
	screenshotOf(t, ctx, "paused-header.png", `#verdict`)
	screenshot(t, ctx, "paused-top.png")
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil { // let go of the stream
		t.Fatal(err)
	}
}

// TestPageExplainsATeamRun: claims show their ids and statuses once each,
// evidence once each, and the run list has reasons, durations, filters
// and pages.
func TestPageExplainsATeamRun(t *testing.T) {
	ctx := browser(t)
	home := t.TempDir()
	for i := range 22 { // older runs, so the two real ones lead the first page
		fakeRun(t, home, fmt.Sprintf("old-%02d", i))
	}
	finishedTeamRun(t, home, "team-done")
	failedRun(t, home, "failed-run")
	srv := serve(t, web.Config{Home: home})
	openRun(t, ctx, srv.URL, "team-done")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(css(`#claims-table tbody tr`)), chromedp.WaitVisible(css(`#board .item`))); err != nil {
		t.Fatal(err)
	}
	head := text(t, ctx, `#verdict`)
	for _, want := range []string{"Completed: run team-done", "the final gate accepted its work", "Delivered: every declared output arrived", "the task declared none", "Claims: 2 corroborated (2 load-bearing)"} {
		if !strings.Contains(head, want) {
			t.Errorf("header lacks %q:\n%s", want, head)
		}
	}
	rows := eval[[]string](t, ctx, `[...document.querySelectorAll("#claims-table tbody tr")].map(r => r.innerText)`)
	ids := map[string]bool{}
	for _, r := range rows {
		id, _, _ := strings.Cut(r, "\t")
		if !strings.HasPrefix(id, "K") || ids[id] {
			t.Errorf("claim row %q: want a new K id", r)
		}
		ids[id] = true
		if !strings.Contains(r, "corroborated") && !strings.Contains(r, "unresolved") && !strings.Contains(r, "refuted") && !strings.Contains(r, "disputed") {
			t.Errorf("claim row %q has no status", r)
		}
	}
	if len(rows) < 2 {
		t.Errorf("%d claims, want the north and south totals", len(rows))
	}
	graph := eval[[]string](t, ctx, `[...document.querySelectorAll("#claims svg text")].map(e => e.textContent)`)
	seen := map[string]int{}
	for _, l := range graph {
		seen[l]++
		if seen[l] == 2 {
			t.Errorf("the graph shows %q twice", l)
		}
	}
	if g := strings.Join(graph, "\n"); !strings.Contains(g, "K1") || !strings.Contains(g, "corroborated") && !strings.Contains(g, "unresolved") {
		t.Errorf("the graph lacks claim ids or statuses:\n%s", g)
	}
	readsInWords(t, ctx)
	screenshotOf(t, ctx, "team-header.png", `#verdict`)
	screenshotOf(t, ctx, "team-claims.png", `#claims-section`)
	screenshotOf(t, ctx, "team-board.png", `#board-section`)
	if err := chromedp.Do(ctx, poll(`(document.getElementById("transcript-h").scrollIntoView({block: "start"}), true)`)); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "team-transcript-top.png")

	// The run list: newest first, 20 a page, reasons and durations.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/#/"), poll(`document.querySelectorAll("#runs tbody tr").length === 20`)); err != nil {
		t.Fatal(err)
	}
	info := text(t, ctx, `#page-info`)
	if !strings.Contains(info, "1–20 of 24 runs") {
		t.Errorf("pager %q", info)
	}
	list := text(t, ctx, `#runs`)
	for _, want := range []string{"the final gate failed", "accepted its work", "Failed", "Completed", "Stopped", "team", "react", "Duration", "Why it ended"} {
		if !strings.Contains(list, want) {
			t.Errorf("run list lacks %q", want)
		}
	}
	readsInWords(t, ctx)
	screenshotOf(t, ctx, "runs-list.png", `#runs-view`)
	if err := chromedp.Do(ctx, chromedp.Click(css(`#page-next`)), poll(`document.querySelectorAll("#runs tbody tr").length === 4`)); err != nil {
		t.Fatalf("page 2: %v", err)
	}
	if info := text(t, ctx, `#page-info`); !strings.Contains(info, "21–24 of 24") {
		t.Errorf("page 2: %q", info)
	}
	// Filters: failed runs only, then team runs only.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/#/?status=failed"), poll(`document.querySelectorAll("#runs tbody tr").length === 1`)); err != nil {
		t.Fatalf("status filter: %v", err)
	}
	if row := text(t, ctx, `#runs tbody tr`); !strings.Contains(row, "failed-run") || !strings.Contains(row, "the final gate failed") {
		t.Errorf("failed filter shows %q", row)
	}
	if err := chromedp.Do(ctx,
		poll(`(document.getElementById("f-status").value = "", document.getElementById("f-mode").value = "team", document.getElementById("f-mode").dispatchEvent(new Event("change")), true)`),
		poll(`document.querySelectorAll("#runs tbody tr").length === 1 && document.querySelector("#runs tbody tr").textContent.includes("team-done")`)); err != nil {
		t.Fatalf("mode filter: %v (%s)", err, text(t, ctx, `#runs`))
	}
	screenshotOf(t, ctx, "runs-filtered.png", `#runs-view`)
}
