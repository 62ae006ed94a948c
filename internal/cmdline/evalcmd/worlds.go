package evalcmd

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/sandbox"
	"github.com/apodex/apodex/internal/world"
	"github.com/apodex/apodex/internal/world/gen"
)

// Worlds is `apodex worlds build|list|show|check|gen`.
func Worlds(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	subs := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"build": worldsBuild, "list": worldsList, "show": worldsShow, "check": worldsCheck, "gen": worldsGen,
	}
	if len(args) == 0 || subs[args[0]] == nil {
		fmt.Fprintln(stdout, "Usage: apodex worlds build DIR... | list | show ID [--json] | check ID [--json] |\n       gen file|search|code --seed N [--count K] [--level 1-5] --out DIR [--build]")
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
			return nil
		}
		return cmdline.Usagef("unknown subcommand %q", args[0])
	}
	return subs[args[0]](ctx, args[1:], stdout, stderr)
}

func worldsBuild(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("worlds build", "DIR...", stdout, stderr)
	home := fs.HomeFlag()
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return cmdline.Usagef("give one or more world directories (each with a world.yaml; make some with `apodex worlds gen`)")
	}
	st := world.NewStore(cmdline.HomeDir(*home))
	var failed error
	for _, dir := range pos {
		w, fresh, err := st.Build(dir)
		if err != nil {
			fmt.Fprintf(stderr, "apodex worlds build: %s: %v\n", dir, err)
			failed = cmdline.ExitError(cmdline.ExitFailed)
			continue
		}
		note := "stored"
		if !fresh {
			note = "already stored"
		}
		fmt.Fprintf(stdout, "%s  %s  %s (%s)\n", w.ID, w.Name, note, dir)
	}
	return failed
}

func worldsList(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("worlds list", "[--json]", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.Bool("json", false, "print JSON")
	if _, err := fs.Parse(args); err != nil {
		return err
	}
	ws, err := world.NewStore(cmdline.HomeDir(*home)).List()
	if err != nil {
		return fmt.Errorf("%v", err)
	}
	if *jsonOut {
		if ws == nil {
			ws = []*world.World{}
		}
		cmdline.WriteJSON(stdout, ws)
		return nil
	}
	if len(ws) == 0 {
		fmt.Fprintln(stdout, "no worlds stored; make some with `apodex worlds gen file --seed 1 --out worlds/ --build`")
	}
	for _, w := range ws {
		fmt.Fprintf(stdout, "%s  %-7s %-22s %s  %d files\n", w.ID, w.Family, w.Name, world.Coords(w.Diff), len(w.Files))
	}
	return nil
}

func oneWorld(name string, args []string, stdout, stderr io.Writer) (*world.World, bool, error) {
	fs := cmdline.NewFlagSet("worlds "+name, "ID [--json]", stdout, stderr)
	home := fs.HomeFlag()
	jsonOut := fs.Bool("json", false, "print JSON")
	pos, err := fs.Parse(args)
	if err != nil {
		return nil, false, err
	}
	if len(pos) != 1 {
		return nil, false, cmdline.Usagef("give one world id (see `apodex worlds list`)")
	}
	w, err := world.NewStore(cmdline.HomeDir(*home)).Get(pos[0])
	if err != nil {
		return nil, false, err
	}
	return w, *jsonOut, nil
}

func worldsShow(_ context.Context, args []string, stdout, stderr io.Writer) error {
	w, jsonOut, err := oneWorld("show", args, stdout, stderr)
	if w == nil {
		return err
	}
	if jsonOut {
		cmdline.WriteJSON(stdout, w)
		return nil
	}
	world.Render(stdout, w)
	return nil
}

func worldsCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	w, jsonOut, err := oneWorld("check", args, stdout, stderr)
	if w == nil {
		return err
	}
	runner, err := sandbox.New(sandbox.KindAuto)
	if err != nil {
		fmt.Fprintf(stderr, "apodex worlds check: %v; the verifier runs WITHOUT isolation\n", err)
		runner = sandbox.None{}
	}
	rep := world.Check(ctx, w, runner)
	if jsonOut {
		cmdline.WriteJSON(stdout, rep)
	} else {
		world.RenderCheck(stdout, w, rep)
	}
	if !rep.OK {
		return cmdline.ExitError(cmdline.ExitFailed)
	}
	return nil
}

func worldsGen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("worlds gen", "file|search|code --seed N [--count K] [--level 1-5] --out DIR [--build]", stdout, stderr)
	home := fs.HomeFlag()
	seed := fs.Int64("seed", 1, "first seed")
	count := fs.Int("count", 1, "worlds to generate, seeds N, N+1, …")
	level := fs.Int("level", 1, "difficulty level, 1 (easy) to 5 (hard)")
	out := fs.String("out", "", "directory to write the worlds into, one sub-directory each (<family>-l<level>-s<seed>)")
	doBuild := fs.Bool("build", false, "also store each world (as `apodex worlds build`)")
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return cmdline.Usagef("name one family: file, search or code")
	case *out == "":
		return cmdline.Usagef("pass --out DIR, where the world directories go")
	case *count < 1 || *level < 1 || *level > 5:
		return cmdline.Usagef("need --count ≥ 1 and --level 1 to 5")
	}
	st := world.NewStore(cmdline.HomeDir(*home))
	for i := 0; i < *count; i++ {
		s := gen.Spec{Family: pos[0], Seed: *seed + int64(i), Level: *level}
		dir := filepath.Join(*out, s.Name())
		if _, err := gen.Generate(s, dir); err != nil {
			return cmdline.Usagef("%v", err)
		}
		if !*doBuild {
			fmt.Fprintln(stdout, dir)
			continue
		}
		w, _, err := st.Build(dir)
		if err != nil {
			return fmt.Errorf("%v", err)
		}
		fmt.Fprintf(stdout, "%s  %s\n", w.ID, dir)
	}
	return nil
}
