//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed-86a41135/supervisor/internal/config"
)

// configValues is `config show --json`'s values and the rows of `config
// show`'s table (the lines after its file: line).
func (in *instance) configValues() (values []config.Entry, table string) {
	in.t.Helper()
	var got struct {
		Values []config.Entry `json:"values"`
	}
	js := in.mustRun("config", "show", "--json")
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		in.t.Fatalf("config show --json: %v: %s", err, js)
	}
	_, table, _ = strings.Cut(in.mustRun("config", "show"), "\n")
	return got.Values, table
}

// TestConfigInit: `supervisor config init` writes the starter where
// `config show` looks (its directory 0700, the file 0600), says how to
// apply it, refuses to replace a file without --force, and keeps the old
// one as .bak with it. The file it writes changes nothing.
func TestConfigInit(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	path := filepath.Join(in.state, "conf", "config.toml") // a directory to create
	in.env = append(in.env, config.EnvConfig+"="+path)     // the last one wins
	beforeValues, beforeTable := in.configValues()
	starter := in.mustRun("config", "init", "--print")

	out := in.mustRun("config", "init")
	for _, want := range []string{path, "supervisor daemon reload"} {
		if !strings.Contains(out, want) {
			t.Errorf("config init says nothing of %q:\n%s", want, out)
		}
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != starter {
		t.Errorf("%s holds %q (%v), want what --print prints", path, got, err)
	}
	for p, mode := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
		if st, err := os.Stat(p); err != nil {
			t.Error(err)
		} else if st.Mode() != mode {
			t.Errorf("%s: mode %v, want %v", p, st.Mode(), mode)
		}
	}
	if values, table := in.configValues(); !slices.Equal(values, beforeValues) || table != beforeTable {
		t.Errorf("the starter changed the configuration:\n%s\nwas\n%s", table, beforeTable)
	}

	// An existing file is the user's: left alone, and the way to replace
	// it named.
	const mine = "grace = \"2s\"\n"
	if err := os.WriteFile(path, []byte(mine), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := in.run("config", "init")
	if code != 1 || !strings.Contains(stderr, path+" already exists") || !strings.Contains(stderr, "--force") || stdout != "" {
		t.Errorf("config init over a file: exit %d, stdout %q, stderr %q; want 1 naming %s and --force", code, stdout, stderr, path)
	}
	if got, _ := os.ReadFile(path); string(got) != mine {
		t.Errorf("the refused init changed %s to %q", path, got)
	}

	out = in.mustRun("config", "init", "--force")
	if !strings.Contains(out, path+".bak") {
		t.Errorf("config init --force does not say where the old file went:\n%s", out)
	}
	if got, _ := os.ReadFile(path + ".bak"); string(got) != mine {
		t.Errorf("%s.bak holds %q, want the old file %q", path, got, mine)
	}
	if got, _ := os.ReadFile(path); string(got) != starter {
		t.Errorf("config init --force left %q, want the starter", got)
	}
}

// TestConfigInitPrint: --print writes the starter to stdout and no file;
// written to the config file, it parses and changes no value.
func TestConfigInitPrint(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	beforeValues, beforeTable := in.configValues()
	starter, stderr, code := in.run("config", "init", "--print")
	if code != 0 || stderr != "" || !strings.Contains(starter, "#grace = \"5s\"") {
		t.Fatalf("config init --print: exit %d, stderr %q, stdout:\n%s", code, stderr, starter)
	}
	path := filepath.Join(in.state, "config.toml")
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("config init --print touched %s: %v", path, err)
	}

	in.writeConfig(starter)
	var show struct {
		File   string `json:"file"`
		Loaded bool   `json:"loaded"`
	}
	json.Unmarshal([]byte(in.mustRun("config", "show", "--json")), &show)
	if show.File != path || !show.Loaded {
		t.Errorf("config show read %q (loaded %v), want %s", show.File, show.Loaded, path)
	}
	if values, table := in.configValues(); !slices.Equal(values, beforeValues) || table != beforeTable {
		t.Errorf("the starter changed the configuration:\n%s\nwas\n%s", table, beforeTable)
	}

	// --force has nothing to replace with --print: a usage error, not a
	// silent choice.
	if _, stderr, code := in.run("config", "init", "--print", "--force"); code != 2 || !strings.Contains(stderr, "--force") {
		t.Errorf("config init --print --force: exit %d, stderr %q; want 2", code, stderr)
	}
}

// TestConfigMissingNamedFileWarns: a SUPERVISOR_CONFIG naming no file
// draws one warning on stderr (a typo in it would otherwise run
// everything on the defaults without a word); the default location
// missing draws none.
func TestConfigMissingNamedFileWarns(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	missing := filepath.Join(in.state, "config.toml") // newInstance's, not written
	warning := "supervisor: warning: SUPERVISOR_CONFIG names " + missing + ", which does not exist: using the defaults\n"
	home := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		env  []string // added to the instance's
		file string   // written to the instance's config file first
		want string   // stderr
	}{
		{name: "config show", args: []string{"config", "show"}, want: warning},
		{name: "config show --json", args: []string{"config", "show", "--json"}, want: warning},
		{name: "a file there", args: []string{"config", "show"}, file: "grace = \"2s\"\n"},
		{name: "the default location", args: []string{"config", "show"},
			env: []string{config.EnvConfig + "=", "HOME=" + home, "XDG_CONFIG_HOME="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(missing)
			if tc.file != "" {
				in.writeConfig(tc.file)
			}
			saved := in.env
			in.env = append(append([]string(nil), in.env...), tc.env...)
			defer func() { in.env = saved }()
			stdout, stderr, code := in.run(tc.args...)
			if code != 0 || stderr != tc.want {
				t.Errorf("supervisor %s: exit %d, stderr %q; want 0 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
			}
			if !strings.Contains(stdout, "grace") {
				t.Errorf("supervisor %s printed no configuration:\n%s", strings.Join(tc.args, " "), stdout)
			}
		})
	}
}

// TestInitHelpNamesContainerInit: `supervisor init` is the container's
// PID 1, which users take for the config file's init: its help says so
// first, and where the config file's is.
func TestInitHelpNamesContainerInit(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	out := in.mustRun("init", "--help")
	first, _, _ := strings.Cut(out, "\n")
	if !strings.Contains(first, "container init") || !strings.Contains(first, "supervisor config init") {
		t.Errorf("supervisor init --help begins %q; want it to say it is the container init and to name `supervisor config init`", first)
	}
}
