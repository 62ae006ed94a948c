package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/cmdline/complete"
)

// cmdCompletion prints a completion script. The script asks the binary
// itself what fits (apodex __complete WORDS…), so run ids, eval ids and
// world ids are the ones under the home of the moment, and commands,
// subcommands, flags and flag values are the command table's own.
func cmdCompletion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("completion", "bash|zsh|fish   (e.g. source <(apodex completion bash))", stdout, stderr)
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cmdline.Usagef("give the shell: bash, zsh or fish")
	}
	script, ok := complete.Script(pos[0])
	if !ok {
		return cmdline.Usagef("unknown shell %q: use bash, zsh or fish", pos[0])
	}
	fmt.Fprint(stdout, script)
	return nil
}

// subcommands are the words that may follow a command (its subcommands,
// or the fixed values of its first argument).
var subcommands = map[string][]string{
	"worlds":     {"build", "list", "show", "check", "gen"},
	"eval":       {"show", "resume"},
	"config":     {"show"},
	"completion": {"bash", "zsh", "fish"},
}

// positional is what the positional arguments of a command (or
// "command subcommand") are.
var positional = map[string][]string{
	"show": {complete.Run}, "log": {complete.Run}, "board": {complete.Run}, "verify": {complete.Run}, "workspace": {complete.Run}, "evidence": {complete.Run},
	"claims": {complete.Run}, "review": {complete.Run}, "replay": {complete.Run}, "grade": {complete.Run}, "pivot": {complete.Run},
	"say": {complete.Run}, "messages": {complete.Run}, "status": {complete.Run}, "pause": {complete.Run}, "resume": {complete.Run},
	"cancel": {complete.Run}, "attach": {complete.Run}, "rm": {complete.Run},
	"export": {complete.Run, complete.Eval}, "eval show": {complete.Eval}, "eval resume": {complete.Eval}, "eval": {complete.File},
	"worlds show": {complete.World}, "worlds check": {complete.World}, "worlds build": {complete.Dir},
}

// cmdComplete is `apodex __complete WORDS…`: the candidates for the last
// word (which may be empty) after the words before it, one per line.
func cmdComplete(args []string, stdout io.Writer) {
	for _, c := range completion().Words(args) {
		fmt.Fprintln(stdout, c)
	}
}

// completion is the command table as completion reads it.
func completion() complete.Table {
	t := complete.Table{Subcommands: subcommands, Positional: positional, Flags: func(name, sub string) map[string]string {
		c, _ := lookup(name)
		return flagForms(c, sub)
	}}
	for _, c := range commands() {
		t.Commands = append(t.Commands, c.name)
	}
	return t
}

// commandFlags is the flag names (--name) of a command.
func commandFlags(c command) []string { return flagsOf(c, "") }

// flagsOf is the flag names of a command or of its subcommand sub.
func flagsOf(c command, sub string) []string {
	forms := flagForms(c, sub)
	out := make([]string, 0, len(forms))
	for n := range forms {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// flagForms asks a command (or its subcommand sub) for its help and reads
// each flag's name (--name) and the form of its value ("" for a switch).
func flagForms(c command, sub string) map[string]string {
	out := map[string]string{}
	if c.name == "help" || c.name == "completion" {
		return out
	}
	var args []string
	if sub != "" {
		args = append(args, sub)
	}
	var b strings.Builder
	c.run(context.Background(), append(args, "--help"), &b, io.Discard)
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "  --") {
			out[f[0]] = strings.Join(f[1:], " ")
		}
	}
	return out
}
