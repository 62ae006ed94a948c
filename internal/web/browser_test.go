package web_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/web"
)

// browser starts headless Chromium with a fresh profile, or skips the test
// when no Chromium is installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("no chromium binary on PATH: apt-get install -y chromium (.ci/run installs it) to run the browser tests")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1400),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	if err := chromedp.Do(bctx); err != nil { // the first run starts the browser; no timeout on it
		cancelB()
		cancelA()
		t.Fatalf("start chromium %s: %v", bin, err)
	}
	ctx, cancelT := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(func() { cancelT(); cancelB(); cancelA() })
	return ctx
}

// screenshot writes the page to $APODEX_ARTIFACTS (else the test's
// artifact dir: go test -artifacts keeps it) and checks it is not blank.
// A name ending -top.png is the viewport only.
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	shot := chromedp.FullScreenshot(100)
	if strings.HasSuffix(name, "-top.png") {
		shot = chromedp.CaptureScreenshot() // the viewport only
	}
	return saveShot(t, ctx, name, shot)
}

// screenshotOf writes the element sel matches, as screenshot does.
func screenshotOf(t *testing.T, ctx context.Context, name, sel string) string {
	t.Helper()
	return saveShot(t, ctx, name, chromedp.Screenshot(css(sel)))
}

func saveShot(t *testing.T, ctx context.Context, name string, shot chromedp.Action[[]byte]) string {
	t.Helper()
	buf, err := chromedp.Run(ctx, shot)
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("APODEX_ARTIFACTS")
	if dir == "" {
		dir = t.ArtifactDir()
	}
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	colors := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colors[r>>12<<8|g>>12<<4|bl>>12] = true
		}
	}
	if len(colors) < 4 {
		t.Errorf("screenshot %s looks blank (%d colours)", path, len(colors))
	}
	t.Logf("screenshot: %s", path)
	return path
}

func TestPageListsRuns(t *testing.T) {
	ctx := browser(t)
	home := t.TempDir()
	finishedTeamRun(t, home, "team-done")
	srv := serve(t, web.Config{Home: home})
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(css(`#runs tbody a`))); err != nil {
		t.Fatal(err)
	}
	table := text(t, ctx, `#runs`)
	if !strings.Contains(table, "team-done") || !strings.Contains(table, "Completed") {
		t.Errorf("run list %q", table)
	}
	// The finished run's page: board titles, a timeline lane per agent, files.
	if err := chromedp.Do(ctx,
		clickWhenThere(`#runs tbody a`),
		chromedp.WaitVisible(css(`#board .item`)),
		chromedp.WaitVisible(css(`#timeline svg .bar`)),
		chromedp.WaitVisible(css(`#files button`)),
	); err != nil {
		t.Fatal(err)
	}
	boardText := text(t, ctx, `#board`)
	lanes := eval[int](t, ctx, `document.querySelectorAll("#timeline svg .bar").length`)
	if err := chromedp.Do(ctx, clickWhenThere(`#files button`), chromedp.WaitVisible(css(`#file-content`))); err != nil {
		t.Fatal(err)
	}
	filesText := text(t, ctx, `#files`)
	if err := chromedp.Do(ctx, poll(`document.getElementById("file-content").textContent.includes("563")`)); err != nil {
		t.Errorf("the report's content never showed: %v", err)
	}
	for _, title := range []string{"North total", "South total", "Report"} {
		if !strings.Contains(boardText, title) {
			t.Errorf("board %q lacks %q", boardText, title)
		}
	}
	if lanes != 6 {
		t.Errorf("%d timeline bars, want 6 (lead, A1, A2, the verifiers V1 and V2, A3)", lanes)
	}
	if !strings.Contains(filesText, "/outputs/report.md") {
		t.Errorf("files %q", filesText)
	}
	screenshot(t, ctx, "page-finished-run.png")

	// Dark: the system's preference turns the page dark, text stays light.
	dark := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	})
	if err := chromedp.Do(ctx, dark); err != nil {
		t.Fatal(err)
	}
	bg := eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`)
	fg := eval[string](t, ctx, `getComputedStyle(document.body).color`)
	if bg != "rgb(13, 17, 23)" || fg != "rgb(230, 237, 243)" {
		t.Errorf("dark scheme: background %s, text %s", bg, fg)
	}
	screenshot(t, ctx, "page-finished-run-dark-top.png")
}

// During a live scripted team run the board on the page changes without a
// reload, and a message typed into the box reaches the run's record.
func TestPageFollowsALiveRunAndSendsAMessage(t *testing.T) {
	ctx := browser(t)
	home := t.TempDir()
	done := liveTeamRun(t, home, "team-live", 150*time.Millisecond)
	srv := serve(t, web.Config{Home: home})
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/#/runs/team-live"), chromedp.WaitVisible(css(`#board .item`))); err != nil {
		t.Fatal(err)
	}
	before := eval[int](t, ctx, `document.querySelectorAll("#board .item.resolved").length`)
	eval[bool](t, ctx, `window.__loaded = true`) // gone if the page reloads
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(css(`#say-text`), "Please also mention the grand total."),
		chromedp.Click(css(`#say-send`)),
		poll(`document.getElementById("say-status").textContent.includes("M1")`),
		chromedp.WaitVisible(css(`#board .item.resolved`)), // items get resolved later
	); err != nil {
		t.Fatal(err)
	}
	status := text(t, ctx, `#say-status`)
	same := eval[bool](t, ctx, `window.__loaded === true`)
	if before != 0 {
		t.Errorf("%d items were resolved when the page first showed the board; the run must still be early", before)
	}
	if !same {
		t.Error("the page was reloaded; the board must change in place")
	}
	if !strings.Contains(status, "M1") {
		t.Errorf("say status %q", status)
	}
	screenshot(t, ctx, "page-live-run-top.png")
	<-done
	// The page shows the end of the run without a reload.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(css(`#board .col[data-state=resolved] .item:nth-child(4)`)), poll(`document.getElementById("live").textContent === "run finished"`)); err != nil {
		t.Fatal(err)
	}
	c, err := record.Read(filepath.Join(home, "runs", "team-live"))
	if err != nil {
		t.Fatal(err)
	}
	delivered := false
	for _, e := range c.Events {
		if e.Type == "message" && strings.Contains(string(e.Raw), "grand total") {
			delivered = true
		}
	}
	if !delivered {
		t.Error("the message typed into the page never reached the record")
	}
	screenshot(t, ctx, "page-live-run-end.png")
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// poll waits until js is true in the page.
// clickWhenThere clicks the first element sel matches, in the page itself,
// as soon as there is one: a live page re-renders lists, so a node found by
// one protocol call may be gone by the next ("Could not find node").
func clickWhenThere(sel string) chromedp.Action[chromedp.Void] {
	return poll(fmt.Sprintf(`(e => !!e && (e.click(), true))(document.querySelector(%q))`, sel))
}

func poll(js string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](js)(ctx, t)
		return chromedp.Void{}, err
	}
}
