package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/world"
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
	switch pos[0] {
	case "bash":
		fmt.Fprint(stdout, bashCompletion)
	case "zsh":
		fmt.Fprint(stdout, zshCompletion)
	case "fish":
		fmt.Fprint(stdout, fishCompletion)
	default:
		return cmdline.Usagef("unknown shell %q: use bash, zsh or fish", pos[0])
	}
	return nil
}

// The scripts call the binary that is being completed with the words so
// far; a line ":files" or ":dirs" asks the shell for its own path
// completion.
const (
	bashCompletion = `# apodex bash completion: source <(apodex completion bash)
_apodex() {
  local cur=${COMP_WORDS[COMP_CWORD]} line IFS=$'\n'
  COMPREPLY=()
  for line in $("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null); do
    case $line in
      :files) compopt -o filenames 2>/dev/null; COMPREPLY+=($(compgen -f -- "$cur"));;
      :dirs) compopt -o filenames 2>/dev/null; COMPREPLY+=($(compgen -d -- "$cur"));;
      *) COMPREPLY+=("$line");;
    esac
  done
}
complete -F _apodex apodex
`
	zshCompletion = `#compdef apodex
# apodex zsh completion: apodex completion zsh > "${fpath[1]}/_apodex" (or source <(apodex completion zsh) after compinit)
_apodex() {
  local line
  local -a cands
  for line in "${(@f)$(${words[1]} __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}"; do
    case $line in
      :files) _files;;
      :dirs) _files -/;;
      '') ;;
      *) cands+=("$line");;
    esac
  done
  (( ${#cands} )) && compadd -Q -- "${cands[@]}"
}
compdef _apodex apodex
`
	fishCompletion = `# apodex fish completion: apodex completion fish > ~/.config/fish/completions/apodex.fish
function __apodex_complete
    set -l words (commandline -opc) (commandline -ct)
    for line in ($words[1] __complete $words[2..-1] 2>/dev/null)
        switch $line
            case :files
                __fish_complete_path (commandline -ct)
            case :dirs
                __fish_complete_directories (commandline -ct)
            case '*'
                echo $line
        end
    end
end
complete -c apodex -f -a '(__apodex_complete)'
`
)

// subcommands are the words that may follow a command (its subcommands,
// or the fixed values of its first argument).
var subcommands = map[string][]string{
	"worlds":     {"build", "list", "show", "check", "gen"},
	"eval":       {"show", "resume"},
	"config":     {"show"},
	"completion": {"bash", "zsh", "fish"},
}

// Kinds of positional arguments, for completion.
const (
	argRun   = "RUN"
	argEval  = "EVAL"
	argWorld = "WORLD"
	argFile  = "FILE"
	argDir   = "DIR"
)

// positional is what the positional arguments of a command (or
// "command subcommand") are.
var positional = map[string][]string{
	"show": {argRun}, "log": {argRun}, "board": {argRun}, "verify": {argRun}, "evidence": {argRun},
	"claims": {argRun}, "review": {argRun}, "replay": {argRun}, "grade": {argRun}, "pivot": {argRun},
	"say": {argRun}, "messages": {argRun}, "status": {argRun}, "pause": {argRun}, "resume": {argRun},
	"cancel": {argRun}, "attach": {argRun}, "rm": {argRun},
	"export": {argRun, argEval}, "eval show": {argEval}, "eval resume": {argEval}, "eval": {argFile},
	"worlds show": {argWorld}, "worlds check": {argWorld}, "worlds build": {argDir},
}

// cmdComplete is `apodex __complete WORDS…`: the candidates for the last
// word (which may be empty) after the words before it, one per line.
func cmdComplete(args []string, stdout io.Writer) {
	for _, c := range complete(args) {
		fmt.Fprintln(stdout, c)
	}
}

// complete is the candidates for the last of words (the words after
// "apodex"), filtered by what it already holds.
func complete(words []string) []string {
	words = joinEquals(words)
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	home := ""
	for i, w := range before {
		if v, ok := strings.CutPrefix(w, "--home="); ok {
			home = v
		} else if w == "--home" && i+1 < len(before) {
			home = before[i+1]
		}
	}
	// The command is the first word that is neither a global flag nor its value.
	i := 0
	for i < len(before) && strings.HasPrefix(before[i], "-") {
		if !strings.Contains(before[i], "=") {
			i++ // its value
		}
		i++
	}
	if i > len(before) { // completing a global flag's value
		return values(globalForm(before[len(before)-1]), cur, home)
	}
	if i == len(before) {
		if strings.HasPrefix(cur, "-") {
			return prefixed(cur, "--home", "--profile", "--log-level", "--help", "--version")
		}
		var names []string
		for _, c := range commands() {
			names = append(names, c.name)
		}
		return prefixed(cur, names...)
	}
	c, ok := lookup(before[i])
	if !ok {
		return nil
	}
	rest := before[i+1:]
	if c.name == "help" {
		if len(rest) > 0 {
			return nil
		}
		return complete([]string{cur})
	}
	sub := ""
	if len(rest) > 0 && slices.Contains(subcommands[c.name], rest[0]) {
		sub = rest[0]
	}
	forms := flagForms(c, sub)
	// The value of a flag: "--flag VALUE" or "--flag=VALUE".
	if n := len(rest); n > 0 && strings.HasPrefix(rest[n-1], "--") && !strings.Contains(rest[n-1], "=") {
		if form, ok := forms[rest[n-1]]; ok && form != "" && form != "[host]" {
			return values(form, cur, home)
		}
	}
	if name, v, ok := strings.Cut(cur, "="); ok && strings.HasPrefix(name, "--") {
		var out []string
		for _, x := range values(forms[name], v, home) {
			if !strings.HasPrefix(x, ":") {
				x = name + "=" + x
			}
			out = append(out, x)
		}
		return out
	}
	if strings.HasPrefix(cur, "-") {
		names := make([]string, 0, len(forms))
		for n := range forms {
			names = append(names, n)
		}
		sort.Strings(names)
		return prefixed(cur, names...)
	}
	// A positional argument.
	args := 0
	for j := 0; j < len(rest); j++ {
		if strings.HasPrefix(rest[j], "--") {
			if f := forms[strings.SplitN(rest[j], "=", 2)[0]]; f != "" && f != "[host]" && !strings.Contains(rest[j], "=") {
				j++
			}
			continue
		}
		args++
	}
	if subs := subcommands[c.name]; len(subs) > 0 && args == 0 {
		out := prefixed(cur, subs...)
		for _, k := range positional[c.name] { // eval SUITE.yaml
			out = append(out, values(k, cur, home)...)
		}
		return out
	}
	key := c.name
	if sub != "" {
		key += " " + sub
	}
	var out []string
	for _, k := range positional[key] {
		out = append(out, values(k, cur, home)...)
	}
	return out
}

// joinEquals undoes bash's split of "--flag=value" into "--flag", "=",
// "value" (COMP_WORDBREAKS): the value is then completed bare.
func joinEquals(words []string) []string {
	var out []string
	for i := 0; i < len(words); i++ {
		if words[i] == "=" && len(out) > 0 && strings.HasPrefix(out[len(out)-1], "--") && i != len(words)-1 {
			if i+1 == len(words)-1 { // completing the value: give it as a word of its own
				out = append(out, words[i+1])
				return out
			}
			out[len(out)-1] += "=" + words[i+1]
			i++
			continue
		}
		out = append(out, words[i])
	}
	return out
}

// globalForm is the form of a global flag's value.
func globalForm(flag string) string {
	switch strings.TrimLeft(flag, "-") {
	case "home":
		return argDir
	case "log-level":
		return cmdline.NamePlaceholders["log-level"]
	}
	return ""
}

// values are the candidates for a value of form (a placeholder: a|b|c,
// RUN, EVAL, WORLD, FILE, DIR, …) starting with cur.
func values(form, cur, home string) []string {
	switch form {
	case argRun, argEval, argWorld:
		return prefixed(cur, ids(form, cmdline.HomeDir(home))...)
	case argFile, "PATH":
		return []string{":files"}
	case argDir:
		return []string{":dirs"}
	}
	if strings.Contains(form, "|") || (form != "" && strings.ToLower(form) == form) {
		return prefixed(cur, strings.Split(form, "|")...)
	}
	return nil
}

// ids are the run ids (newest first, and latest), eval ids or world ids
// under home.
func ids(kind, home string) []string {
	var out []string
	switch kind {
	case argRun, argEval:
		sub := map[string]string{argRun: "runs", argEval: "evals"}[kind]
		ents, _ := os.ReadDir(filepath.Join(home, sub))
		for i := len(ents) - 1; i >= 0; i-- {
			if ents[i].IsDir() {
				out = append(out, ents[i].Name())
			}
		}
		if kind == argRun && len(out) > 0 {
			out = append(out, "latest")
		}
	case argWorld:
		ws, _ := world.NewStore(home).List()
		for _, w := range ws {
			out = append(out, w.ID)
		}
	}
	return out
}

// prefixed keeps the words that start with cur.
func prefixed(cur string, words ...string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, cur) {
			out = append(out, w)
		}
	}
	return out
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
