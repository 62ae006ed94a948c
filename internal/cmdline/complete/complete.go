// Package complete completes apodex command lines for bash, zsh and fish:
// the scripts (Script) ask the binary itself (apodex __complete WORDS…),
// and Table.Words answers from the command table, so commands,
// subcommands, flags and flag values are the table's own and run, eval
// and world ids are the ones under the home of the moment. It never
// writes anything.
package complete

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/world"
)

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

// Script is the completion script of shell (bash, zsh or fish).
func Script(shell string) (string, bool) {
	s, ok := map[string]string{"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}[shell]
	return s, ok
}

// Kinds of positional arguments, for completion.
const (
	Run   = "RUN"
	Eval  = "EVAL"
	World = "WORLD"
	File  = "FILE"
	Dir   = "DIR"
)

// Table is what completion knows of the commands, from the command
// table itself.
type Table struct {
	// Commands are the command names, in the order --help lists them.
	Commands []string
	// Subcommands are the words that may follow a command (its
	// subcommands, or the fixed values of its first argument).
	Subcommands map[string][]string
	// Positional is what the positional arguments of a command (or
	// "command subcommand") are: Run, Eval, World, File or Dir.
	Positional map[string][]string
	// Flags are the flags (--name) of a command, or of its subcommand sub,
	// each with the form of its value ("" for a switch).
	Flags func(command, sub string) map[string]string
}

// Words is the candidates for the last of words (the words after
// "apodex"), filtered by what it already holds: one per line for the
// scripts; ":files" and ":dirs" ask the shell for its own path completion.
func (t Table) Words(words []string) []string {
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
		return prefixed(cur, t.Commands...)
	}
	name := before[i]
	if !slices.Contains(t.Commands, name) {
		return nil
	}
	rest := before[i+1:]
	if name == "help" {
		if len(rest) > 0 {
			return nil
		}
		return t.Words([]string{cur})
	}
	sub := ""
	if len(rest) > 0 && slices.Contains(t.Subcommands[name], rest[0]) {
		sub = rest[0]
	}
	forms := t.Flags(name, sub)
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
	if subs := t.Subcommands[name]; len(subs) > 0 && args == 0 {
		out := prefixed(cur, subs...)
		for _, k := range t.Positional[name] { // eval SUITE.yaml
			out = append(out, values(k, cur, home)...)
		}
		return out
	}
	key := name
	if sub != "" {
		key += " " + sub
	}
	var out []string
	for _, k := range t.Positional[key] {
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
		return Dir
	case "log-level":
		return cmdline.NamePlaceholders["log-level"]
	}
	return ""
}

// values are the candidates for a value of form (a placeholder: a|b|c,
// RUN, EVAL, WORLD, FILE, DIR, …) starting with cur.
func values(form, cur, home string) []string {
	switch form {
	case Run, Eval, World:
		return prefixed(cur, IDs(form, cmdline.HomeDir(home))...)
	case File, "PATH":
		return []string{":files"}
	case Dir:
		return []string{":dirs"}
	}
	if strings.Contains(form, "|") || (form != "" && strings.ToLower(form) == form) {
		return prefixed(cur, strings.Split(form, "|")...)
	}
	return nil
}

// IDs are the run ids (newest first, and latest), eval ids or world ids
// under home.
func IDs(kind, home string) []string {
	var out []string
	switch kind {
	case Run, Eval:
		sub := map[string]string{Run: "runs", Eval: "evals"}[kind]
		ents, _ := os.ReadDir(filepath.Join(home, sub))
		for i := len(ents) - 1; i >= 0; i-- {
			if ents[i].IsDir() {
				out = append(out, ents[i].Name())
			}
		}
		if kind == Run && len(out) > 0 {
			out = append(out, "latest")
		}
	case World:
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
