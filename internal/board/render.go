package board

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// Render writes the board as a compact table, one item a line, and a
// summary line with what is ready to dispatch. It is what board_view shows
// the lead and what `apodex board` prints.
func (b *Board) Render(w io.Writer) error {
	if len(b.items) == 0 {
		_, err := io.WriteString(w, "The board is empty; add items with board_add.\n")
		return err
	}
	groups := false
	for _, it := range b.items {
		groups = groups || it.Group != ""
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	head := "ID\tSTATE\tTITLE\tDEPS\tOWNERS\tREFS\tNOTE"
	if groups {
		head = "ID\tSTATE\tGROUP\tTITLE\tDEPS\tOWNERS\tREFS\tNOTE"
	}
	fmt.Fprintln(tw, head)
	for _, it := range b.items {
		group := ""
		if groups {
			group = dash(it.Group) + "\t"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s%s\t%s\t%s\t%d\t%s\n", it.ID, it.State, group, clip(it.Title, 48),
			dash(strings.Join(it.Deps, ",")), dash(strings.Join(it.Owners, ",")), len(it.Refs), clip(it.Note, 60))
	}
	tw.Flush()
	var out strings.Builder
	for line := range strings.Lines(buf.String()) {
		out.WriteString(strings.TrimRight(line, " \n") + "\n")
	}
	out.WriteString(b.summary() + "\n")
	_, err := io.WriteString(w, out.String())
	return err
}

// summary is "4 items: 1 open, … · ready: T2, T4".
func (b *Board) summary() string {
	c := b.Counts()
	s := fmt.Sprintf("%d items: %d open, %d in progress, %d resolved, %d cancelled",
		c.Total(), c.Open, c.InProgress, c.Resolved, c.Cancelled)
	var ready []string
	for _, it := range b.items {
		if it.State == Open && b.Ready(it.ID) == nil {
			ready = append(ready, it.ID)
		}
	}
	if len(ready) > 0 {
		s += " · ready to dispatch: " + strings.Join(ready, ", ")
	}
	return s
}

// RenderItem writes one item in full: objective, deps with their states,
// dependents, owners, refs, note, readiness and history.
func (b *Board) RenderItem(w io.Writer, id string) error {
	it, err := b.get(id)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s · %s", it.ID, it.State)
	if it.Group != "" {
		fmt.Fprintf(bw, " · group %s", it.Group)
	}
	fmt.Fprintf(bw, "\ntitle: %s\nobjective: %s\n", it.Title, it.Objective)
	var deps []string
	for _, d := range it.Deps {
		deps = append(deps, fmt.Sprintf("%s (%s)", d, b.item(d).State))
	}
	fmt.Fprintf(bw, "deps: %s\n", dash(strings.Join(deps, ", ")))
	fmt.Fprintf(bw, "dependents: %s\n", dash(strings.Join(b.Dependents(it.ID), ", ")))
	fmt.Fprintf(bw, "owners: %s\n", dash(strings.Join(it.Owners, ", ")))
	fmt.Fprintf(bw, "refs: %s\n", dash(strings.Join(it.Refs, ", ")))
	if it.Note != "" {
		fmt.Fprintf(bw, "note: %s\n", strings.ReplaceAll(strings.TrimSpace(it.Note), "\n", "\n  "))
	}
	if it.State.Active() {
		ready := "yes"
		if err := b.Ready(it.ID); err != nil {
			ready = "no: " + strings.TrimPrefix(err.Error(), ErrNotReady.Error()+": ")
		}
		fmt.Fprintf(bw, "ready: %s\n", ready)
	}
	fmt.Fprintln(bw, "history:")
	for _, ch := range it.History {
		fmt.Fprintf(bw, "  #%d %s", ch.Seq, ch.Op)
		if ch.By != "" {
			fmt.Fprintf(bw, " by %s", ch.By)
		}
		if ch.Detail != "" {
			fmt.Fprintf(bw, ": %s", clip(ch.Detail, 120))
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip puts s on one line of at most n runes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
