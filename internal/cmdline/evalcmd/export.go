package evalcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apodex/apodex/internal/cmdline"
	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/termtext"
	"github.com/apodex/apodex/internal/trajectory/export"
)

func Export(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cmdline.NewFlagSet("export", "--format chat|atif|native [flags] RUN|EVAL...", stdout, stderr)
	home := fs.HomeFlag()
	format := fs.String("format", "chat", "chat (JSONL, one line per context segment of each agent), atif (Harbor ATIF trajectory.json per run) or native (the run directory as a .tar.gz)")
	fs.Choices("format", "chat", "atif", "native")
	out := fs.String("out", "", "where to write: a file for chat; a directory for atif (RUN/trajectory.json) and native (RUN.tar.gz); default stdout")
	flavor := fs.String("flavor", export.FlavorOpenAI, "chat: openai (OpenAI's fine-tuning file) or hf (Hugging Face chat templates, TRL: arguments as objects, tool messages named, reasoning_content)")
	argForm := fs.String("arguments", "", "chat: tool-call arguments as an object or a JSON string (default: object for hf, string for openai)")
	mask := fs.String("mask", "", "chat: also give weight 0 to assistant turns that are: failed (a call returned an error), invalid-tool (comma-separated); copied context always is")
	meta := fs.String("metadata", "", "chat: write each line's metadata (run, agent, role, parent, segment, eval scores) to this JSONL file, line for line; \"inline\" puts it in each line under \"metadata\"")
	atifVersion := fs.String("atif-version", "1.8", "atif: the schema version written, 1.7 or 1.8")
	layout := fs.String("layout", "", "atif with --out: harbor writes each run as a Harbor trial directory (config.json, result.json, agent/trajectory.json)")
	drop := fs.String("drop", "", "drop rollouts with: "+strings.Join(export.DropNames, ",")+" (comma-separated; docs/export.md defines each)")
	reqVerified := fs.Bool("require-verified", false, "keep a rollout only if its verifier passed (reject sampling)")
	gold := fs.String("gold", "", "JSON file {\"WORLD or RUN\": \"answer\"}: keep a rollout only if its answer contains the gold answer")
	minGrade := fs.String("min-grade", "", "keep a rollout only if its HDS6 grade reaches N (total, 0–48) or CAPABILITY=N (0–8); needs `apodex grade` first")
	report := fs.String("report", "", "write every rollout kept or dropped, with the reasons, to this JSON file")
	follow := fs.String("follow", "", "EVAL_ID: export each rollout of a running eval as it finishes; end when the eval does")
	natsFlag := fs.String("nats", "", "with --follow: collect the eval's results and records from this NATS URL (an eval queued from another host; default $APODEX_NATS_URL, else the config key nats)")
	pos, err := fs.Parse(args)
	if err != nil {
		return err
	}
	o := &export.Exporter{Format: *format, Out: *out, Filter: export.Filter{MinTotal: -1}, Layout: *layout}
	switch o.Format {
	case "chat", "atif", "native":
	default:
		return cmdline.Usagef("--format %q: use chat, atif or native", o.Format)
	}
	if err := chatOptions(o, *flavor, *argForm, *mask, *meta == "inline"); err != nil {
		return err
	}
	switch *atifVersion {
	case "1.7", "1.8":
		o.ATIF = "ATIF-v" + *atifVersion
	default:
		return cmdline.Usagef("--atif-version %q: use 1.7 or 1.8", *atifVersion)
	}
	if o.Layout != "" && (o.Layout != export.LayoutHarbor || o.Format != "atif" || o.Out == "") {
		return cmdline.Usagef("--layout %q: only --layout harbor, with --format atif and --out DIR", o.Layout)
	}
	if *drop != "" {
		if o.Filter.Drop, err = export.ParseDrop(*drop); err != nil {
			return cmdline.Usagef("%v", err)
		}
	}
	o.Filter.RequireVerified = *reqVerified
	if *gold != "" {
		raw, err := os.ReadFile(*gold)
		if err == nil {
			err = json.Unmarshal(raw, &o.Filter.Gold)
		}
		if err != nil {
			return cmdline.Usagef("--gold %s: %v; give a JSON object mapping each world (or run id) to its answer", *gold, err)
		}
	}
	if *minGrade != "" {
		if err := export.ParseMinGrade(*minGrade, &o.Filter); err != nil {
			return cmdline.Usagef("%v", err)
		}
		if err := export.UseGrades(&o.Filter); err != nil {
			return cmdline.Usagef("%v", err)
		}
	}
	if (len(pos) == 0) == (*follow == "") {
		return cmdline.Usagef("give run or eval ids (see `apodex runs`), or --follow EVAL_ID")
	}
	o.W = termtext.JSON(stdout) // training data, exactly (C1 and bidi controls \u-escaped: the same JSON)
	if o.Format == "native" {
		o.W = termtext.Raw(stdout) // a tar
	}
	if o.Out != "" && o.Format == "chat" {
		f, err := os.Create(o.Out)
		if err != nil {
			return fmt.Errorf("--out: %w; pass a writable path", err)
		}
		defer f.Close()
		o.W = f
	}
	if *meta != "" && *meta != "inline" && o.Format == "chat" {
		f, err := os.Create(*meta)
		if err != nil {
			return fmt.Errorf("--metadata: %w; pass a writable path", err)
		}
		defer f.Close()
		o.Meta = f
	}
	h := cmdline.HomeDir(*home)
	if *follow != "" {
		url, uerr := natsURL(*natsFlag, h)
		if uerr != nil {
			return uerr
		}
		fctx, stop := ctx, func() error { return nil }
		if url != "" {
			if fctx, stop, err = followQueued(ctx, url, h, *follow); err != nil {
				return err
			}
		}
		err = followEval(fctx, o, h, *follow)
		if serr := stop(); err == nil {
			err = serr
		}
	} else {
		for _, id := range pos {
			if err = exportID(o, h, id); err != nil {
				break
			}
		}
	}
	if *report != "" {
		raw, _ := json.MarshalIndent(map[string]any{"trajectories": o.Report}, "", "  ")
		if werr := os.WriteFile(*report, append(raw, '\n'), 0o644); werr != nil && err == nil {
			err = fmt.Errorf("--report: %w", werr)
		}
	}
	return err
}

// exportID exports a run, or every finished rollout of an eval.
func exportID(o *export.Exporter, home, id string) error {
	if ed := filepath.Join(home, "evals", id); strings.HasPrefix(id, "e-") && isDir(ed) {
		results, _, err := export.ReadRollouts(ed, 0)
		if err != nil {
			return err
		}
		for _, r := range results {
			if err := exportRollout(o, home, r); err != nil {
				return err
			}
		}
		return nil
	}
	dir, err := cmdline.FindRun(home, id)
	if err != nil {
		return err
	}
	if err := intactRecord(dir); err != nil {
		return err
	}
	return o.Export(dir, export.Context{})
}

// intactRecord refuses to export a run whose record fails its hash chain
// or head (training data must be what apodex recorded).
func intactRecord(dir string) error {
	if _, err := record.ReadChecked(dir); err != nil {
		return fmt.Errorf("run %s is not exported: %w (apodex verify --record %s)", filepath.Base(dir), err, filepath.Base(dir))
	}
	return nil
}

func isDir(p string) bool { st, err := os.Stat(p); return err == nil && st.IsDir() }

func exportRollout(o *export.Exporter, home string, r export.Rollout) error {
	if r.RunID == "" {
		o.NoRun(r)
		return nil
	}
	dir, err := cmdline.FindRun(home, r.RunID)
	if err != nil {
		return err
	}
	if err := intactRecord(dir); err != nil {
		return err
	}
	return o.Export(dir, r.Ctx)
}

// followEval exports rollouts as their lines reach results.jsonl, until
// the plan's every rollout has one (or ctx ends).
func followEval(ctx context.Context, o *export.Exporter, home, id string) error {
	ed := filepath.Join(home, "evals", id)
	if !isDir(ed) {
		return cmdline.Usagef("no eval %s under %s (see `apodex eval list`)", id, filepath.Join(home, "evals"))
	}
	var off int64
	seen := 0
	for {
		results, next, err := export.ReadRollouts(ed, off)
		if err != nil {
			return err
		}
		off = next
		for _, r := range results {
			if err := exportRollout(o, home, r); err != nil {
				return err
			}
			seen++
		}
		if total := export.EvalTotal(ed); total > 0 && seen >= total {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// chatOptions sets the chat flavour, argument form, masks and metadata.
func chatOptions(o *export.Exporter, flavor, args, mask string, inline bool) error {
	switch flavor {
	case export.FlavorOpenAI, export.FlavorHF:
	default:
		return cmdline.Usagef("--flavor %q: use openai or hf", flavor)
	}
	switch args {
	case "", export.ArgsObject, export.ArgsString:
	default:
		return cmdline.Usagef("--arguments %q: use object or string", args)
	}
	o.Chat = export.ChatOptions{Flavor: flavor, Arguments: args, InlineMetadata: inline, Mask: map[string]bool{}}
	if mask == "" {
		return nil
	}
	for _, m := range strings.Split(mask, ",") {
		switch m = strings.TrimSpace(m); m {
		case export.MaskFailed, export.MaskInvalidTool, export.MaskCopied:
			o.Chat.Mask[m] = true
		default:
			return cmdline.Usagef("--mask %q: use failed, invalid-tool (comma-separated)", m)
		}
	}
	return nil
}
