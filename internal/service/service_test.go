package service

import (
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const bin = "/opt/sv/bin/supervisor"

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// recorder is a Runner that records every command; fail makes the named
// subcommand fail like systemctl without a user bus.
type recorder struct {
	calls []string
	fail  string
}

func (r *recorder) run(name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	r.calls = append(r.calls, line)
	if r.fail != "" && strings.Contains(line, r.fail) {
		return []byte("Failed to connect to bus: No medium found\n"), errors.New("exit status 1")
	}
	return nil, nil
}

func TestServiceSystemdUnit(t *testing.T) {
	unit, err := Systemd.Render(bin)
	if err != nil {
		t.Fatal(err)
	}
	s := string(unit)
	for _, want := range []string{
		"\nExecStart=" + bin + " daemon --foreground\n",
		"\nKillMode=process\n",
		"\nRestart=on-failure\n",
		"\nWantedBy=default.target\n",
		"\nDescription=",
		"\nDocumentation=https://",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("unit lacks %q:\n%s", want, s)
		}
	}
	// No ExecStop: it would run `daemon stop` against whichever daemon owns
	// the socket whenever this unit's daemon exits 0.
	if strings.Contains(s, "\nExecStop=") {
		t.Errorf("unit has an ExecStop:\n%s", s)
	}
	if strings.Contains(s, "/home/") || strings.Contains(s, "/root") {
		t.Errorf("unit hard-codes a home:\n%s", s)
	}
	if _, err := Systemd.Render("supervisor"); err == nil {
		t.Error("a relative binary path was accepted")
	}
}

func TestServiceSystemdQuoting(t *testing.T) {
	for in, want := range map[string]string{
		"/a/b":         "/a/b",
		"/a b/c":       `"/a b/c"`,
		"/100%/x":      "/100%%/x",
		`/a"b\c/x`:     `"/a\"b\\c/x"`,
		"/Users/x y/s": `"/Users/x y/s"`,
	} {
		if got := systemdQuote(in); got != want {
			t.Errorf("systemdQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestServiceLaunchdPlist(t *testing.T) {
	plist, err := Launchd.Render("/Users/a & b/bin/supervisor")
	if err != nil {
		t.Fatal(err)
	}
	// Well-formed XML, the escaped path reads back as given.
	dec := xml.NewDecoder(strings.NewReader(string(plist)))
	var strs []string
	var inString bool
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("plist is not XML: %v\n%s", err, plist)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inString = tok.Name.Local == "string"
		case xml.CharData:
			if inString {
				strs = append(strs, string(tok))
			}
		case xml.EndElement:
			inString = false
		}
	}
	got := strings.Join(strs, "|")
	if want := Label + "|/Users/a & b/bin/supervisor|daemon|--foreground"; !strings.HasPrefix(got, want) {
		t.Errorf("plist strings %q, want prefix %q", got, want)
	}
	for _, want := range []string{"<key>RunAtLoad</key>\n\t<true/>", "<key>SuccessfulExit</key>\n\t\t<false/>", "<key>AbandonProcessGroup</key>\n\t<true/>"} {
		if !strings.Contains(string(plist), want) {
			t.Errorf("plist lacks %q", want)
		}
	}
}

func TestServicePaths(t *testing.T) {
	for _, c := range []struct {
		m    *Manager
		env  map[string]string
		want string
	}{
		{Systemd, map[string]string{"HOME": "/h"}, "/h/.config/systemd/user/supervisor.service"},
		{Systemd, map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "/x"}, "/x/systemd/user/supervisor.service"},
		{Systemd, map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "rel"}, "/h/.config/systemd/user/supervisor.service"},
		{Launchd, map[string]string{"HOME": "/h"}, "/h/Library/LaunchAgents/" + Label + ".plist"},
	} {
		got, err := c.m.Path(env(c.env))
		if err != nil || got != c.want {
			t.Errorf("%s %v: %q, %v; want %q", c.m.Name, c.env, got, err, c.want)
		}
	}
	if _, err := Systemd.Path(env(nil)); err == nil {
		t.Error("no HOME and no XDG_CONFIG_HOME: no error")
	}
}

func TestServiceInstallUninstall(t *testing.T) {
	home := t.TempDir()
	rec := &recorder{}
	o := Options{Binary: bin, Getenv: env(map[string]string{"HOME": home}), UID: 501, Run: rec.run}
	path := filepath.Join(home, ".config/systemd/user/supervisor.service")

	r, err := Systemd.Install(o)
	if err != nil || r.CommandErr != nil || !r.Changed || r.Path != path {
		t.Fatalf("install: %+v, %v", r, err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(r.Unit) {
		t.Fatalf("written unit differs from the rendered one")
	}
	want := "systemctl --user daemon-reload,systemctl --user enable --now supervisor.service"
	if got := strings.Join(rec.calls, ","); got != want {
		t.Errorf("install ran %q, want %q", got, want)
	}

	// Again: idempotent, the file is left alone, the service (re)enabled.
	rec.calls = nil
	if r, err := Systemd.Install(o); err != nil || r.Changed || r.CommandErr != nil {
		t.Errorf("second install: %+v, %v", r, err)
	}

	rec.calls = nil
	r, err = Systemd.Uninstall(o)
	if err != nil || !r.Changed || r.CommandErr != nil {
		t.Fatalf("uninstall: %+v, %v", r, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unit still there: %v", err)
	}
	want = "systemctl --user disable --now supervisor.service,systemctl --user daemon-reload"
	if got := strings.Join(rec.calls, ","); got != want {
		t.Errorf("uninstall ran %q, want %q", got, want)
	}
	rec.calls = nil
	if r, err := Systemd.Uninstall(o); err != nil || r.Changed || len(rec.calls) != 0 {
		t.Errorf("uninstall of nothing: %+v, %v, ran %q", r, err, rec.calls)
	}
}

func TestServiceInstallWithoutManager(t *testing.T) {
	home := t.TempDir()
	rec := &recorder{fail: "daemon-reload"}
	o := Options{Binary: bin, Getenv: env(map[string]string{"HOME": home}), Run: rec.run}
	r, err := Systemd.Install(o)
	if err != nil {
		t.Fatal(err)
	}
	if r.CommandErr == nil || !strings.Contains(r.CommandErr.Error(), "Failed to connect to bus") {
		t.Errorf("CommandErr %v, want the bus failure", r.CommandErr)
	}
	if _, err := os.Stat(r.Path); err != nil {
		t.Errorf("unit not written: %v", err)
	}
	if len(rec.calls) != 1 {
		t.Errorf("ran %q after the first failure", rec.calls)
	}
	// Uninstall without a manager still removes the file.
	r, err = Systemd.Uninstall(o)
	if err != nil || r.CommandErr == nil || !r.Changed {
		t.Errorf("uninstall: %+v, %v", r, err)
	}
	if _, err := os.Stat(r.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unit still there: %v", err)
	}
}

func TestServiceLaunchdCommands(t *testing.T) {
	home := t.TempDir()
	rec := &recorder{fail: "bootout"} // nothing loaded yet: bootout fails, harmlessly
	o := Options{Binary: bin, Getenv: env(map[string]string{"HOME": home}), UID: 501, Run: rec.run}
	r, err := Launchd.Install(o)
	if err != nil || r.CommandErr != nil {
		t.Fatalf("install: %+v, %v", r, err)
	}
	want := "launchctl bootout gui/501/" + Label + ",launchctl bootstrap gui/501 " + r.Path
	if got := strings.Join(rec.calls, ","); got != want {
		t.Errorf("ran %q, want %q", got, want)
	}
	if r, err := Launchd.Uninstall(o); err != nil || r.CommandErr != nil || !r.Changed {
		t.Errorf("uninstall: %+v, %v", r, err)
	}
}

// The examples in configs/ are these templates rendered; they must not
// drift. UPDATE_CONFIGS=1 rewrites them.
func TestServiceConfigsExamples(t *testing.T) {
	unit, err := renderTemplate("systemd", systemdTemplate, struct{ Exec string }{"%h/go/bin/supervisor"})
	if err != nil {
		t.Fatal(err)
	}
	plist, err := Launchd.Render("/usr/local/bin/supervisor")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{
		"supervisor.service": unit,
		Label + ".plist":     plist,
	} {
		path := filepath.Join("..", "..", "configs", name)
		if os.Getenv("UPDATE_CONFIGS") != "" {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s differs from the embedded template (%v); regenerate with UPDATE_CONFIGS=1 go test ./service -run ConfigsExamples", path, err)
		}
	}
}
