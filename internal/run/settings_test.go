package run_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/apodex/apodex/internal/record"
	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runstate"
)

// TestSettingsRoundTrip: every field of Settings, set to a value that is
// neither zero nor its default, comes back as it was from run_started,
// both as ReadStarted reads it (show, resume's caller) and as the record's
// projection gives it to resume and replay. A field that is not recorded
// (json:"-", unexported, a type that does not survive JSON) fails it.
func TestSettingsRoundTrip(t *testing.T) {
	var want run.Settings
	n := fill(t, reflect.ValueOf(&want).Elem(), "Settings", 1)
	if n < 30 {
		t.Fatalf("filled only %d fields: the test no longer reaches them", n)
	}
	leaves(reflect.ValueOf(want), reflect.ValueOf(run.Defaults()), "Settings", func(path string, v, d reflect.Value) {
		if reflect.DeepEqual(v.Interface(), d.Interface()) {
			t.Errorf("%s: the filled value %v is the default", path, v)
		}
	})
	dir := t.TempDir()
	log, err := record.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.Append(record.TypeRunStarted, "", record.RunStarted{RunID: "x", Settings: &want}); err != nil {
		t.Fatal(err)
	}
	log.Close()

	rec, err := run.ReadStarted(dir)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "ReadStarted", rec.Settings, want)
	st := runstate.New()
	c, err := record.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range c.Events {
		if err := st.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	diff(t, "the projection", run.SettingsFrom(st.Settings), want)
}

// TestOldSettingsRead: run_started settings as records held them before
// the effort, synthesis and verifier settings were recorded read back with
// those fields zero (effort and synthesis off, the verifier's default),
// which is how such runs were resumed and replayed.
func TestOldSettingsRead(t *testing.T) {
	old := `{"seq":1,"time":"2026-01-01T00:00:00Z","type":"run_started","agent":"","run_id":"x","objective":"o",` +
		`"model":{"provider":"scripted","stream":false},"sandbox":{"kind":"bwrap","network":false},"budget":{},"inputs":[],"tools":[],"versions":{},` +
		`"settings":{"mode":"team","team":{"concurrency":8,"isolation":"per-agent","plan":false,"sub_budget":{"max_turns":30,"max_tool_calls":100,"max_tokens":0},"sub_timeout":"0s"},` +
		`"budget":{"max_turns":50,"max_tool_calls":200,"max_tokens":2000000},"context":{"window":32768,"at":0.8,"to":0.5,"keep_recent":2,"keep_tail":6},` +
		`"soft_deadline":"0s","timeout":"0s","sandbox":"auto","network":false,"limits":{"mem_limit":4294967296},"command_timeout":"2m0s",` +
		`"scratch_quota":268435456,"max_attempts":6,"evidence":{"corpus":false,"fetch_private":false}}}`
	var rs record.RunStarted
	if err := (record.Event{Raw: []byte(old)}).Decode(&rs); err != nil {
		t.Fatal(err)
	}
	s := run.SettingsFrom(rs.Settings)
	want := record.TeamSettings{Concurrency: 8, Isolation: "per-agent", SubBudget: record.BudgetSettings{MaxTurns: 30, MaxToolCalls: 100}}
	if !reflect.DeepEqual(s.Team, want) || s.Mode != run.ModeTeam || s.Limits.MemLimit != 4<<30 || s.CommandTimeout.D().String() != "2m0s" {
		t.Fatalf("old settings read as %+v", s)
	}
}

// TestSandboxFor: resume and replay run commands in the sandbox the
// record says the run was isolated with, refuse a record that contradicts
// itself (naming both fields and values), and run one unisolated only on
// the user's --sandbox none.
func TestSandboxFor(t *testing.T) {
	// rec is a record isolated with kind, asked for with asked; net sets
	// the network on both sides as the run records it (mode "" for none).
	rec := func(kind, asked, mode string) record.RunStarted {
		net := mode != ""
		return record.RunStarted{RunID: "r1", Sandbox: record.SandboxSettings{Kind: kind, Network: net, NetworkMode: mode},
			Settings: &run.Settings{Sandbox: asked, Network: net, HostNetwork: mode == "host" && kind != "none"}}
	}
	networkOn := rec("bwrap", "auto", "")
	networkOn.Settings.Network = true
	hostOn := rec("bwrap", "auto", "outbound")
	hostOn.Settings.HostNetwork = true
	// A record from before settings were recorded: nothing contradicts its
	// sandbox.
	noSettings := record.RunStarted{RunID: "r1", Sandbox: record.SandboxSettings{Kind: "bwrap", Network: true, NetworkMode: "host"}}
	noSettingsChroot := noSettings
	noSettingsChroot.Sandbox.Kind = "chroot"
	cases := []struct {
		name  string
		rec   record.RunStarted
		user  string
		want  string
		error []string // what the refusal names
	}{
		{"bwrap asked auto", rec("bwrap", "auto", ""), "", "bwrap", nil},
		{"native asked native", rec("native", "native", ""), "", "native", nil},
		{"old record without the ask", rec("bwrap", "", ""), "", "bwrap", nil},
		{"unavailable: the ask again", rec("unavailable", "native", ""), "", "native", nil},
		{"network outbound", rec("bwrap", "auto", "outbound"), "", "bwrap", nil},
		{"network host", rec("bwrap", "auto", "host"), "", "bwrap", nil},
		{"none needs consent", rec("none", "none", ""), "", "", []string{"without a sandbox", "--sandbox none"}},
		{"none with consent", rec("none", "none", "host"), "none", "none", nil},
		{"settings tampered to none", rec("bwrap", "none", ""), "", "", []string{`sandbox.kind is "bwrap"`, `settings.sandbox is "none"`}},
		{"kind tampered to none", rec("none", "auto", ""), "", "", []string{`sandbox.kind is "none"`, `settings.sandbox is "auto"`}},
		{"bwrap asked, native recorded", rec("native", "bwrap", ""), "", "", []string{`sandbox.kind is "native"`, `settings.sandbox is "bwrap"`}},
		{"tampered, with consent", rec("bwrap", "none", ""), "none", "none", nil},
		{"network tampered on", networkOn, "", "", []string{"sandbox.network is false", "settings.network is true"}},
		{"host network tampered on", hostOn, "", "", []string{`sandbox.network_mode is "outbound"`, "settings.host_network is true"}},
		{"unknown kind", rec("chroot", "auto", ""), "", "", []string{`sandbox.kind is "chroot"`}},
		{"no settings recorded", noSettings, "", "bwrap", nil},
		{"no settings, unknown kind", noSettingsChroot, "", "", []string{`sandbox.kind is "chroot"`}},
		{"a bad --sandbox", rec("bwrap", "auto", ""), "bwrap", "", []string{`--sandbox "bwrap"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := run.SandboxFor(c.rec, c.user)
			if c.error == nil {
				if err != nil || got != c.want {
					t.Fatalf("got %q, %v; want %q", got, err, c.want)
				}
				return
			}
			var ce *run.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %q, %v; want a refusal", got, err)
			}
			for _, w := range c.error {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal %q does not name %s", err, w)
				}
			}
		})
	}
}

// fill sets every field under v to a value that is not zero, numbering
// them from n; it returns the next number. A kind it does not know, or a
// field it cannot set, fails the test: the record could not hold it.
func fill(t *testing.T, v reflect.Value, path string, n int) int {
	t.Helper()
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				t.Errorf("%s.%s is unexported: the record cannot hold it", path, f.Name)
				continue
			}
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == "-" {
				t.Errorf("%s.%s is left out of JSON: the record cannot hold it", path, f.Name)
			}
			n = fill(t, v.Field(i), path+"."+f.Name, n)
		}
		return n
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		return fill(t, v.Elem(), path, n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		return fill(t, v.Index(1), path+"[1]", fill(t, v.Index(0), path+"[0]", n))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		n = fill(t, e, path+"[]", fill(t, k, path+"{}", n))
		v.SetMapIndex(k, e)
		return n
	case reflect.String:
		v.SetString(fmt.Sprintf("%s-%d", path, n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(1000 + n)) // no default is 1000 and up to 1100
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(1000 + n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(n) / 1000)
	default:
		t.Errorf("%s: a %s; teach fill how to set one", path, v.Kind())
	}
	return n + 1
}

// leaves calls f with each field of a and b that is not a struct, by path.
func leaves(a, b reflect.Value, path string, f func(path string, a, b reflect.Value)) {
	if a.Kind() == reflect.Struct {
		for i := range a.NumField() {
			leaves(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name, f)
		}
		return
	}
	f(path, a, b)
}

func diff(t *testing.T, what string, got, want run.Settings) {
	t.Helper()
	leaves(reflect.ValueOf(got), reflect.ValueOf(want), "Settings", func(path string, g, w reflect.Value) {
		if !reflect.DeepEqual(g.Interface(), w.Interface()) {
			t.Errorf("%s: %s came back as %#v, was recorded as %#v", what, path, g.Interface(), w.Interface())
		}
	})
}
