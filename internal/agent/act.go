package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/apodex/apodex/internal/llm"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/tool"
)

// act runs the calls of one turn and appends their results to the history in
// call order. It returns the finish request, if one was accepted.
func (l *loop) act(ctx context.Context, calls []llm.ToolCall) *tool.Finish {
	for _, c := range calls {
		l.append(record.TypeToolCall, record.ToolCall{Turn: l.turns, CallID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	results := make([]tool.Result, len(calls))
	durations := make([]int64, len(calls))
	windows := make([]window, len(calls))
	allowed := len(calls)
	if max := l.cfg.Budget.MaxToolCalls; max > 0 && l.toolCalls+allowed > max {
		allowed = max - l.toolCalls
	}
	// Calls run in parallel, except serial ones, which are barriers: a
	// serial call starts when every earlier call has ended, and later calls
	// start after it, so "claim, then write" or "add, then view" in one turn
	// happen in that order. finish (or the agent's FinishTool, a subagent's
	// report) runs last, seeing every effect.
	sem := make(chan struct{}, l.cfg.Parallel)
	var wg sync.WaitGroup
	var finishes []int
	run := func(i int) {
		// The host's clock, not the agent's: the windows are compared with
		// file mtimes (attributeDeltas).
		windows[i].start = time.Now()
		results[i], durations[i] = l.invoke(ctx, calls[i])
		windows[i].end = time.Now()
	}
	for i, c := range calls {
		t, known := l.tools.Get(c.Name)
		switch {
		case i >= allowed:
			results[i] = tool.Errorf("not run: the tool-call budget of %d is used up", l.cfg.Budget.MaxToolCalls)
		case c.Name == "finish" || c.Name == l.cfg.FinishTool:
			finishes = append(finishes, i)
		case known && tool.IsSerial(t):
			wg.Wait()
			run(i)
		default:
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				run(i)
			}()
		}
	}
	wg.Wait()
	for _, i := range finishes {
		results[i], durations[i] = l.invoke(ctx, calls[i])
		if f := results[i].Finish; f != nil && l.cfg.Gate != nil {
			if err := l.cfg.Gate(f.Summary); err != nil {
				results[i] = tool.Errorf("finish refused: %v", err)
			}
		}
	}
	l.toolCalls += allowed

	attributeDeltas(results, windows)
	var finish *tool.Finish
	for i, c := range calls {
		res := results[i]
		l.recordResult(c, res, durations[i])
		l.history = append(l.history, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: res.Output, IsError: res.IsError, Protected: res.Protected})
		if res.Finish != nil && finish == nil {
			finish = res.Finish
		}
		if l.cfg.OnStep != nil {
			first, _, _ := strings.Cut(res.Output, "\n")
			l.cfg.OnStep(Step{Agent: l.cfg.ID, Turn: l.turns, Tool: c.Name, Args: shorten(c.Arguments, 80), IsError: res.IsError, Output: shorten(first, 80)})
		}
	}
	return finish
}

// window is when a call ran, on the real clock (file mtimes are real).
type window struct{ start, end time.Time }

func (w window) contains(t time.Time) bool { return !t.Before(w.start) && !t.After(w.end) }

// attributeDeltas records each changed path once per turn. A tool's exact
// deltas win over snapshot-observed ones (bash). When several observed calls
// saw the same change, it goes to the call with the narrowest run window that
// contains the file's mtime (the first in call order when none does): calls
// running side by side all see each other's files, and only timing can tell
// them apart.
func attributeDeltas(results []tool.Result, windows []window) {
	claimed := map[string]bool{}
	for _, r := range results {
		if !r.Observed {
			for _, d := range r.Deltas {
				claimed[d.Path] = true
			}
		}
	}
	owner := map[string]int{}
	for i, r := range results {
		if !r.Observed {
			continue
		}
		for _, d := range r.Deltas {
			if claimed[d.Path] {
				continue
			}
			j, seen := owner[d.Path]
			if !seen || better(windows[i], windows[j], d.MTime) {
				owner[d.Path] = i
			}
		}
	}
	for i := range results {
		if !results[i].Observed {
			continue
		}
		kept := results[i].Deltas[:0:0]
		for _, d := range results[i].Deltas {
			if j, ok := owner[d.Path]; ok && j == i {
				kept = append(kept, d)
			}
		}
		results[i].Deltas = kept
	}
}

// better reports whether window a explains a change at t better than b.
func better(a, b window, t time.Time) bool {
	if t.IsZero() || !a.contains(t) {
		return false
	}
	return !b.contains(t) || a.end.Sub(a.start) < b.end.Sub(b.start)
}

// invoke runs one call, turning every kind of misuse into an observation.
func (l *loop) invoke(ctx context.Context, c llm.ToolCall) (res tool.Result, ms int64) {
	start := l.cfg.Clock.Now()
	defer func() {
		if p := recover(); p != nil {
			res = tool.Errorf("tool %s failed internally: %v; try a different approach", c.Name, p)
		}
		ms = l.cfg.Clock.Now().Sub(start).Milliseconds()
	}()
	t, ok := l.tools.Get(c.Name)
	if !ok {
		return tool.Errorf("unknown tool %q; the tools you can call are: %s", c.Name, strings.Join(l.tools.Names(), ", ")), 0
	}
	args := strings.TrimSpace(c.Arguments)
	if args == "" {
		args = "{}"
	}
	if !json.Valid([]byte(args)) {
		return tool.Errorf("the arguments of %s are not valid JSON (%s); send one JSON object matching the tool's schema: %s",
			c.Name, shorten(c.Arguments, 200), t.Spec().Parameters), 0
	}
	return t.Call(tool.WithCallID(ctx, c.ID), json.RawMessage(args)), 0
}

func (l *loop) recordResult(c llm.ToolCall, res tool.Result, ms int64) {
	ev := record.ToolResult{Turn: l.turns, CallID: c.ID, Name: c.Name, IsError: res.IsError, Output: res.Output, DurationMS: ms, Meta: res.Meta}
	if res.Full != nil {
		ref, err := l.cfg.Log.PutBlob(res.Full)
		if err != nil {
			l.recordErr = err
		}
		ev.FullRef, ev.FullBytes = ref, len(res.Full)
	}
	// The file changes go first: a process killed between them and the
	// result leaves the call interrupted (and retried) with every change it
	// made on record, never a result whose changes are missing.
	for _, d := range res.Deltas {
		fd := record.FileDelta{CallID: c.ID, Path: d.Path, Before: d.Before, After: d.After, Bytes: d.Bytes}
		fd.Content, fd.ContentRef = l.keepContent(d.Path, d.Bytes)
		l.append(record.TypeFileDelta, fd)
	}
	l.append(record.TypeToolResult, ev)
}

// inline is the largest body the record keeps in an event rather than in a
// blob: a blob costs a file creation and two fsyncs per step.
const inline = 4 << 10

// keepContent keeps a changed file's content when small enough: inline when
// it is short non-empty UTF-8 text (JSON would not round-trip other bytes),
// else as a blob.
func (l *loop) keepContent(path string, size int64) (content, ref string) {
	if l.cfg.FS == nil || size > l.cfg.MaxContentBlob {
		return "", ""
	}
	p, err := l.cfg.FS.Resolve(path)
	if err != nil {
		return "", ""
	}
	data, err := l.cfg.FS.ReadRegular(p, l.cfg.MaxContentBlob) // never through a swapped-in link
	if err != nil {
		return "", "" // deleted, not a regular file, or grown too large
	}
	if len(data) > 0 && len(data) <= inline && utf8.Valid(data) {
		return string(data), ""
	}
	ref, err = l.cfg.Log.PutBlob(data)
	if err != nil {
		l.recordErr = err
		return "", ""
	}
	return "", ref
}

// storeMessage renders a message for the record, moving a large content body
// to a blob ("content_ref") so the event log stays small.
func (l *loop) storeMessage(m llm.Message) json.RawMessage {
	type stored struct {
		llm.Message
		ContentRef string `json:"content_ref,omitempty"`
		Bytes      int    `json:"content_bytes,omitempty"`
	}
	s := stored{Message: m}
	if len(m.Content) > inline {
		ref, err := l.cfg.Log.PutBlob([]byte(m.Content))
		if err != nil {
			l.recordErr = err
		} else {
			s.Content, s.ContentRef, s.Bytes = "", ref, len(m.Content)
		}
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return json.RawMessage(fmt.Sprintf("%q", err.Error()))
	}
	return raw
}

// recordRequest records the messages added since the last request.
func (l *loop) recordRequest(specs []llm.ToolSpec) {
	ev := record.ModelRequest{Turn: l.turns, From: l.recorded, Follows: l.respSeq}
	for _, m := range l.history[l.recorded:] {
		ev.Messages = append(ev.Messages, l.storeMessage(m))
	}
	if raw, err := json.Marshal(specs); err == nil {
		// The same set turn after turn: PutBlob knows the blob and returns
		// at once.
		ev.ToolsRef, err = l.cfg.Log.PutBlob(raw)
		if err != nil {
			l.recordErr = err
		}
	}
	l.recorded = len(l.history)
	l.reqSeq = l.append(record.TypeModelRequest, ev)
}
