package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// cmdCompletion prints a completion script for the command names and each
// command's flags, taken from the command table itself.
func cmdCompletion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("completion", "bash|zsh|fish   (e.g. source <(apodex completion bash))", stdout, stderr)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give the shell: bash, zsh or fish")
	}
	var names []string
	flags := map[string][]string{}
	for _, c := range commands() {
		names = append(names, c.name)
		flags[c.name] = commandFlags(c)
	}
	switch pos[0] {
	case "bash":
		fmt.Fprintln(stdout, "# apodex bash completion: source <(apodex completion bash)")
		fmt.Fprintln(stdout, "_apodex() {\n  local cur=${COMP_WORDS[COMP_CWORD]}\n  if [ \"$COMP_CWORD\" -eq 1 ]; then COMPREPLY=($(compgen -W \""+strings.Join(names, " ")+"\" -- \"$cur\")); return; fi\n  case ${COMP_WORDS[1]} in")
		for _, n := range names {
			fmt.Fprintf(stdout, "    %s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\"));;\n", n, strings.Join(flags[n], " "))
		}
		fmt.Fprintln(stdout, "  esac\n  [ ${#COMPREPLY[@]} -eq 0 ] && COMPREPLY=($(compgen -f -- \"$cur\"))\n}\ncomplete -F _apodex apodex")
	case "zsh":
		fmt.Fprintln(stdout, "#compdef apodex\n# apodex zsh completion: apodex completion zsh > \"${fpath[1]}/_apodex\"\n_apodex() {\n  if (( CURRENT == 2 )); then compadd "+strings.Join(names, " ")+"; return; fi\n  case $words[2] in")
		for _, n := range names {
			fmt.Fprintf(stdout, "    %s) compadd -- %s; _files;;\n", n, strings.Join(flags[n], " "))
		}
		fmt.Fprintln(stdout, "  esac\n}\ncompdef _apodex apodex")
	case "fish":
		fmt.Fprintln(stdout, "# apodex fish completion: apodex completion fish > ~/.config/fish/completions/apodex.fish")
		for _, c := range commands() {
			fmt.Fprintf(stdout, "complete -c apodex -n __fish_use_subcommand -a %s -d %q\n", c.name, clip(c.summary, 60))
			for _, f := range flags[c.name] {
				fmt.Fprintf(stdout, "complete -c apodex -n '__fish_seen_subcommand_from %s' -l %s\n", c.name, strings.TrimPrefix(f, "--"))
			}
		}
	default:
		return usagef("unknown shell %q: use bash, zsh or fish", pos[0])
	}
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

// commandFlags is flagsOf(c, "").
func commandFlags(c command) []string { return flagsOf(c, "") }

// flagsOf asks a command (or its subcommand sub) for its help and reads
// its flag names (--name).
func flagsOf(c command, sub string) []string {
	if c.name == "help" || c.name == "completion" {
		return nil
	}
	var args []string
	if sub != "" {
		args = append(args, sub)
	}
	var b strings.Builder
	c.run(context.Background(), append(args, "--help"), &b, io.Discard)
	var out []string
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "  --") {
			out = append(out, strings.Fields(line)[0])
		}
	}
	return out
}
