package config

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// Render writes the effective settings as `apodex config show` prints
// them ("-" for an empty value), then each file of paths, lowest
// precedence first, and whether it was read.
func Render(w io.Writer, values []Value, paths []string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tSOURCE")
	for _, v := range values {
		val := v.Value
		if val == "" {
			val = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Key, val, v.Source)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nfiles, lowest precedence first (flags > env > profile > file defaults > default):")
	for _, p := range paths {
		state := "absent"
		if _, err := os.Stat(p); err == nil {
			state = "read"
		}
		fmt.Fprintf(w, "  %s (%s)\n", p, state)
	}
}

// ProfileSource says where the selected profile name came from: the
// --profile flag, APODEX_PROFILE (read with getenv), or the file.
func ProfileSource(flag bool, name string, getenv func(string) string) string {
	switch {
	case flag:
		return "flag --profile"
	case name == "":
		return "none selected"
	case getenv("APODEX_PROFILE") == name:
		return "env APODEX_PROFILE"
	}
	return "file (profile = " + fmt.Sprintf("%q", name) + ")"
}
