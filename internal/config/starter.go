package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/internal/atomicfile"
)

// keyDoc documents one key of the file for the starter.
type keyDoc struct {
	key string // dotted: grace, breaker.cooldown, servers.NAME.grace
	doc string // what it does, a sentence ((unset: ...) where it has no default value)
	// example is the TOML value shown for a key with no default value of
	// its own; "" shows the built-in default, taken from Defaults.
	example string
}

// keyDocs is every key of the file, in the order the starter names them.
// TestStarterNamesEveryKey holds it equal to the schema (file, breaker,
// server) and to the keys configs/config.toml documents.
var keyDocs = []keyDoc{
	{key: "grace", doc: "SIGTERM grace of the stop cascade before SIGKILL; every grace is at most 5m."},
	{key: "eof_grace", doc: "A dead host's server gets this long to exit on stdin EOF before a signal."},
	{key: "linger", doc: "A shared server (supervisor ensure) outlives its last session by this."},
	{key: "retention", doc: "Ended sessions and exited processes stay listed this long."},
	{key: "health_interval", doc: "Liveness check period of shared servers (at least 10ms)."},
	{key: "ready_timeout", doc: "How long ensure waits for a shared server to become ready."},
	{key: "max_instances", doc: "Live instances of one --name per session; the newest wins (0: no cap)."},
	{key: "volatile_env", doc: "Variables left out of a shared server's key besides the built-in list (SUPERVISOR_*, terminal and IDE handles...); X_* matches a prefix."},
	{key: "memory_max", example: `"2G"`, doc: "Memory cap of each server that sets no limits of its own (unset: none)."},
	{key: "cpu_max", example: "1", doc: "CPU cap of each server that sets no limits of its own (unset: none)."},
	{key: "pids_max", example: "512", doc: "Process cap of each server that sets no limits of its own (unset: none)."},
	{key: "sandbox", example: "true", doc: "Run every server in a sandbox: it reads the system, its program and directory, writes the temp dir, never your secrets (docs/sandbox.md)."},
	{key: "allow_read", example: `["~/notes"]`, doc: "Paths every sandboxed server may also read (~ is your home)."},
	{key: "allow_write", example: `["~/scratch"]`, doc: "Paths every sandboxed server may also write."},
	{key: "allow_env", example: `["GITHUB_TOKEN", "MYAPP_*"]`, doc: "Variables every sandboxed server sees beyond PATH, HOME, locale and the like."},
	{key: "network", example: `"none"`, doc: "A sandboxed server's network: all, none, or \"host:port,...\" it reaches through the egress proxy (unset: all)."},
	{key: "open_files", example: `1024`, doc: "The most files a sandboxed server may hold open (unset: 4096)."},

	{key: "breaker.threshold", doc: "Consecutive failed starts that open a server's circuit breaker."},
	{key: "breaker.cooldown", doc: "First open period; it doubles on each reopening up to max_cooldown."},
	{key: "breaker.max_cooldown", doc: "The longest open period."},
	{key: "breaker.start_period", doc: "An exit within this long of the start is a failed start."},

	{key: "servers.NAME.grace", example: `"30s"`, doc: "This server's SIGTERM grace (unset: grace above)."},
	{key: "servers.NAME.health", example: `"http://127.0.0.1:8080/healthz"`, doc: "ensure's health check: none, tcp or an http:// URL (unset: tcp)."},
	{key: "servers.NAME.max_instances", example: "2", doc: "Live instances per session (unset: max_instances above)."},
	{key: "servers.NAME.share", example: "true", doc: "true: one process for all sessions (run --share); false: never shared (unset: shared if it speaks the stateless MCP revision)."},
	{key: "servers.NAME.lazy", example: "true", doc: "Serve the handshake and lists from a cache; start on the first call (run --lazy)."},
	{key: "servers.NAME.idle", example: `"10m"`, doc: "Stop a lazy server after this long idle; the next call starts it (run --idle)."},
	{key: "servers.NAME.flatten", example: "false", doc: "false keeps npx resident instead of running the program it would run."},
	{key: "servers.NAME.memory_max", example: `"1G"`, doc: `This server's memory cap (run --memory-max); "none" lifts memory_max.`},
	{key: "servers.NAME.cpu_max", example: "0.5", doc: `This server's CPU cap (run --cpu-max); "none" lifts cpu_max.`},
	{key: "servers.NAME.pids_max", example: "100", doc: `This server's process cap (run --pids-max); "none" lifts pids_max.`},
	{key: "servers.NAME.sandbox", example: "true", doc: "true: run it in a sandbox (run --sandbox); false: unconfined even if sandbox above is true."},
	{key: "servers.NAME.allow_read", example: `["~/docs"]`, doc: "Paths it may also read (run --allow-read), beside allow_read above."},
	{key: "servers.NAME.allow_write", example: `["~/projects/app"]`, doc: "Paths it may also write (run --allow-write)."},
	{key: "servers.NAME.allow_env", example: `["GITHUB_TOKEN"]`, doc: "Variables it also sees (run --allow-env)."},
	{key: "servers.NAME.network", example: `"api.github.com:443"`, doc: "all, none or host:port,... (run --network), over network above; asks for the sandbox."},
	{key: "servers.NAME.open_files", example: `8192`, doc: "run --open-files, over open_files above; asks for the sandbox."},
}

const starterHeader = `# supervisor config file, written by ` + "`supervisor config init`" + `.
#
# Every setting below is commented out, so as written this file changes
# nothing: each shows its built-in default or, for a key with no default
# value of its own, an example. To change one, delete the # in front of it
# (and in front of its [table] line), then run ` + "`supervisor daemon reload`" + `
# to apply the file to a running daemon (one started later reads it).
# ` + "`supervisor config show`" + ` prints the effective values and their sources.
#
# Durations are strings: "500ms", "5s", "30m", "168h" (days are not a unit).
# Unknown keys and bad values are errors, reported as FILE:LINE: why; the
# daemon refuses to start with them and a reload keeps the config it has.
# Daemon flags and the environment overrides (SUPERVISOR_RETENTION,
# SUPERVISOR_BREAKER_COOLDOWN, SUPERVISOR_LOG_MAX_MB) beat this file.
`

// tableIntros open each table of the starter.
var tableIntros = map[string]string{
	"breaker": "The circuit breaker: it stops restarting a server that keeps failing to start.",
	"servers.NAME": "Per-server overrides, a table per server: NAME is its run/ensure --name " +
		"(default: the command's base name). A flag on the command line beats them.",
}

// Starter returns the starter config file: every key with its default
// (or an example) and what it does, all commented out, so that it
// changes nothing until a line is uncommented.
//
// It is generated from keyDocs and the built-in defaults, not kept as a
// file: the defaults it shows cannot drift from the code, and a new key
// missing from keyDocs fails a test.
func Starter() string {
	defaults := map[string]string{}
	for _, x := range Defaults().Entries() {
		defaults[x.Key] = x.Value
	}
	var b strings.Builder
	b.WriteString(starterHeader)
	table := ""
	for _, k := range keyDocs {
		t, leaf := "", k.key
		if i := strings.LastIndexByte(k.key, '.'); i >= 0 {
			t, leaf = k.key[:i], k.key[i+1:]
		}
		if t != table {
			table = t
			b.WriteString("\n")
			comment(&b, tableIntros[t])
			fmt.Fprintf(&b, "#[%s]\n", t)
		}
		b.WriteString("\n")
		comment(&b, k.doc)
		v := k.example
		if v == "" {
			v = literal(k.key, defaults[k.key])
		}
		fmt.Fprintf(&b, "#%s = %s\n", leaf, v)
	}
	return b.String()
}

// comment writes text as "# " lines of at most 78 columns.
func comment(b *strings.Builder, text string) {
	line := "#"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 78 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
}

// literal writes v, a default as Entries shows it, as the TOML value of
// key: a duration as a short string ("168h", not "168h0m0s").
func literal(key, v string) string {
	switch schemaType(key) {
	case reflect.TypeFor[*duration]():
		d, err := time.ParseDuration(v)
		if err != nil {
			panic(fmt.Sprintf("config: default %s = %q: %v", key, v, err))
		}
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return strconv.Quote(s)
	case reflect.TypeFor[[]string]():
		var q []string
		for _, x := range strings.Split(v, ",") {
			if x != "" {
				q = append(q, strconv.Quote(x))
			}
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return v
}

// schemaType is the type of key's field in the schema.
func schemaType(key string) reflect.Type {
	t := reflect.TypeFor[file]()
	parts := strings.Split(key, ".")
	if parts[0] == "servers" && len(parts) == 3 {
		t, parts = reflect.TypeFor[server](), parts[2:]
	}
	for _, p := range parts {
		idx, ok := schemaFields(t)[p]
		if !ok {
			return nil
		}
		t = t.FieldByIndex(idx).Type
	}
	return t
}

// WriteStarter writes Starter to path: its directory created 0700 if
// missing, the file 0600 through a temp file and a rename, so that a
// reader never sees half of it. An existing file is refused with an error
// wrapping fs.ErrExist unless force; then the old file is kept as backup
// (path.bak, replacing an older one). A symlink at path (a dotfiles
// manager's) is written through: the file it names is replaced, the link
// kept. written is the file written.
func WriteStarter(path string, force bool) (written, backup string, err error) {
	target := path
	if t, err := filepath.EvalSymlinks(path); err == nil {
		target = t
	}
	exists := func() error {
		if _, err := os.Lstat(target); err == nil {
			return fmt.Errorf("%s: %w", path, fs.ErrExist)
		}
		return nil
	}
	if old, err := os.Lstat(target); err == nil {
		if !force {
			return "", "", exists()
		}
		data, err := os.ReadFile(target)
		switch {
		case errors.Is(err, fs.ErrNotExist): // a dangling link: nothing to keep
		case err != nil:
			return "", "", fmt.Errorf("keep the old %s: %w", target, err)
		default:
			backup = target + ".bak"
			if err := atomicfile.Write(backup, data, old); err != nil {
				return "", "", fmt.Errorf("keep the old %s as %s: %w", target, backup, err)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		return "", "", err
	}
	// Checked again right before the rename: a file created meanwhile
	// (another init) is not replaced without --force.
	still := exists
	if force {
		still = nil
	}
	if err := atomicfile.WriteIf(target, []byte(Starter()), nil, still); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", "", err
		}
		return "", "", fmt.Errorf("write %s: %w", target, err)
	}
	return target, backup, nil
}
