// Package hosts owns the agent hosts' MCP config files: where each host
// (Claude Code, Cursor, VS Code, Codex, ...) keeps its servers on Linux,
// macOS and Windows, how to wrap every stdio server in `supervisor run` and
// put it back exactly as it was, and the SessionEnd hooks that end a
// session when its host does.
//
// Edits are surgical: an Editor per format (JSON/JSONC, TOML, YAML) splices
// text into the file, so comments, key order and formatting survive, and
// Uninstall restores each file byte for byte. Writes re-read the file right
// before writing, go through a temp file and a rename, follow symlinks to
// the real file, keep its mode and leave a backup beside it.
//
// # Caveats
//
// Hosts that cache their config (Claude Code reads ~/.claude.json at
// session start and rewrites it while it runs) see an edit at their next
// start; a host that rewrites the file from memory after our edit undoes
// it, which `supervisor hosts` shows as unwrapped servers.
package hosts

import (
	"fmt"
	"os"
	"path"
	"runtime"
	"strings"
)

// Env is what host paths are computed from: the target OS, the home
// directory and the environment. Tests pass any OS.
type Env struct {
	GOOS   string // "linux", "darwin" or "windows"
	Home   string
	Getenv func(string) string
}

// CurrentEnv is this process's environment.
func CurrentEnv() (Env, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return Env{}, fmt.Errorf("home directory: %w", err)
	}
	return Env{GOOS: runtime.GOOS, Home: home, Getenv: os.Getenv}, nil
}

func (e Env) getenv(k string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(k)
}

// join joins path elements with the target OS's separator.
func (e Env) join(elem ...string) string {
	p := path.Join(elem...)
	if e.GOOS == "windows" {
		return strings.ReplaceAll(p, "/", `\`)
	}
	return p
}

// appConfig is the per-user application config directory: ~/.config (or
// $XDG_CONFIG_HOME) on Linux, ~/Library/Application Support on macOS,
// %APPDATA% on Windows.
func (e Env) appConfig() string {
	switch e.GOOS {
	case "darwin":
		return e.join(e.Home, "Library", "Application Support")
	case "windows":
		if d := e.getenv("APPDATA"); d != "" {
			return d
		}
		return e.join(e.Home, "AppData", "Roaming")
	}
	return e.xdgConfig()
}

// xdgConfig is ~/.config (or $XDG_CONFIG_HOME), which some hosts use on
// macOS and Windows too.
func (e Env) xdgConfig() string {
	if d := e.getenv("XDG_CONFIG_HOME"); d != "" {
		return d
	}
	return e.join(e.Home, ".config")
}

// dotConfig is ~/.config/NAME on every OS, where the CLIs that ignore the
// platform's own config directory keep theirs (%USERPROFILE%\.config\NAME
// on Windows; $XDG_CONFIG_HOME/NAME elsewhere when that is set).
func (e Env) dotConfig(name string) string {
	if e.GOOS == "windows" {
		return e.join(e.Home, ".config", name)
	}
	return e.join(e.xdgConfig(), name)
}

// Format is a config file's syntax.
type Format string

const (
	JSON Format = "json" // JSON or JSONC
	TOML Format = "toml"
	YAML Format = "yaml"
)

// File is one config file of a host.
type File struct {
	Host   string
	Path   string
	Format Format
	// Project files live in a repository and are meant to be committed:
	// they get the bare name `supervisor`, not this machine's path.
	Project bool
	Schema  Schema
	// ClaudeProjects: also every projects["<dir>"].mcpServers (Claude
	// Code's ~/.claude.json holds local-scope servers there).
	ClaudeProjects bool
	// Hook: a settings file holding the host's SessionEnd hooks, not
	// servers.
	Hook bool
}

// Schemas are the server maps in src, a version of this file.
func (f File) Schemas(src []byte) ([]Schema, error) {
	out := []Schema{f.Schema}
	if !f.ClaudeProjects {
		return out, nil
	}
	dirs, err := jsonKeys(src, []string{"projects"})
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		s := f.Schema
		s.Path = []string{"projects", d, "mcpServers"}
		out = append(out, s)
	}
	return out, nil
}

// Host is one agent host.
type Host struct {
	Name  string // as the command line takes it
	Title string
	files func(e Env, project string) []File
}

// Files are the host's config files: per-user ones, and those of project
// (a directory) when it is not empty. Files that do not exist are included.
func (h Host) Files(e Env, project string) []File {
	fs := h.files(e, project)
	out := fs[:0]
	for _, f := range fs {
		if f.Path == "" || (f.Project && project == "") {
			continue
		}
		f.Host = h.Name
		out = append(out, f)
	}
	return out
}

var (
	mcpServersSchema = Schema{Path: []string{"mcpServers"}, Command: "command", Args: "args"}
	vscodeSchema     = Schema{Path: []string{"servers"}, Command: "command", Args: "args"}
	zedSchema        = Schema{Path: []string{"context_servers"}, Command: "command", Args: "args"}
	codexSchema      = Schema{Path: []string{"mcp_servers"}, Command: "command", Args: "args"}
	continueSchema   = Schema{Path: []string{"mcpServers"}, List: true, Command: "command", Args: "args"}
	gooseSchema      = Schema{Path: []string{"extensions"}, Command: "cmd", Args: "args"}
	opencodeSchema   = Schema{Path: []string{"mcp"}, Command: "command"}
	// Amp keeps its servers under one top-level key with a dot in it.
	ampSchema = Schema{Path: []string{"amp.mcpServers"}, Command: "command", Args: "args"}
)

func user(p string, f Format, s Schema) File { return File{Path: p, Format: f, Schema: s} }

func proj(project string, e Env, rel string, f Format, s Schema) File {
	if project == "" {
		return File{Project: true}
	}
	return File{Path: e.join(project, rel), Format: f, Schema: s, Project: true}
}

// table is every host, in the order `supervisor hosts` lists them.
var table = []Host{
	{"claude-code", "Claude Code", func(e Env, p string) []File {
		dir := e.Home
		if d := e.getenv("CLAUDE_CONFIG_DIR"); d != "" {
			dir = d
		}
		u := user(e.join(dir, ".claude.json"), JSON, mcpServersSchema)
		u.ClaudeProjects = true
		return []File{u, proj(p, e, ".mcp.json", JSON, mcpServersSchema)}
	}},
	{"claude-desktop", "Claude Desktop", func(e Env, p string) []File {
		return []File{user(e.join(e.appConfig(), "Claude", "claude_desktop_config.json"), JSON, mcpServersSchema)}
	}},
	{"cursor", "Cursor", func(e Env, p string) []File {
		return []File{
			user(e.join(e.Home, ".cursor", "mcp.json"), JSON, mcpServersSchema),
			proj(p, e, ".cursor/mcp.json", JSON, mcpServersSchema),
		}
	}},
	{"vscode", "VS Code", func(e Env, p string) []File {
		return []File{
			user(e.join(e.appConfig(), "Code", "User", "mcp.json"), JSON, vscodeSchema),
			proj(p, e, ".vscode/mcp.json", JSON, vscodeSchema),
		}
	}},
	{"windsurf", "Windsurf", func(e Env, p string) []File {
		return []File{user(e.join(e.Home, ".codeium", "windsurf", "mcp_config.json"), JSON, mcpServersSchema)}
	}},
	{"codex", "Codex CLI", func(e Env, p string) []File {
		dir := e.join(e.Home, ".codex")
		if d := e.getenv("CODEX_HOME"); d != "" {
			dir = d
		}
		return []File{
			user(e.join(dir, "config.toml"), TOML, codexSchema),
			proj(p, e, ".codex/config.toml", TOML, codexSchema),
		}
	}},
	{"gemini", "Gemini CLI", func(e Env, p string) []File {
		return []File{
			user(e.join(e.Home, ".gemini", "settings.json"), JSON, mcpServersSchema),
			proj(p, e, ".gemini/settings.json", JSON, mcpServersSchema),
		}
	}},
	{"qwen", "Qwen Code", func(e Env, p string) []File {
		// A fork of Gemini CLI: the same layout. Newer releases also
		// read a project's .mcp.json, which is Claude Code's project
		// file (install claude-code --project wraps it).
		return []File{
			user(e.join(e.Home, ".qwen", "settings.json"), JSON, mcpServersSchema),
			proj(p, e, ".qwen/settings.json", JSON, mcpServersSchema),
			proj(p, e, ".qwen/settings.local.json", JSON, mcpServersSchema),
		}
	}},
	{"zed", "Zed", func(e Env, p string) []File {
		dir := e.join(e.xdgConfig(), "zed")
		if e.GOOS == "windows" {
			dir = e.join(e.appConfig(), "Zed")
		}
		return []File{
			user(e.join(dir, "settings.json"), JSON, zedSchema),
			proj(p, e, ".zed/settings.json", JSON, zedSchema),
		}
	}},
	{"cline", "Cline", func(e Env, p string) []File {
		f := e.getenv("CLINE_MCP_SETTINGS_PATH")
		if f == "" {
			data := e.join(e.Home, ".cline", "data")
			if d := e.getenv("CLINE_DIR"); d != "" {
				data = e.join(d, "data")
			}
			if d := e.getenv("CLINE_DATA_DIR"); d != "" {
				data = d
			}
			f = e.join(data, "settings", "cline_mcp_settings.json")
		}
		return []File{user(f, JSON, mcpServersSchema)}
	}},
	{"roo-code", "Roo Code", func(e Env, p string) []File {
		return []File{
			user(e.join(e.appConfig(), "Code", "User", "globalStorage", "rooveterinaryinc.roo-cline", "settings", "mcp_settings.json"), JSON, mcpServersSchema),
			proj(p, e, ".roo/mcp.json", JSON, mcpServersSchema),
		}
	}},
	{"kilo", "Kilo Code", func(e Env, p string) []File {
		// Kilo Code 7 keeps its servers in opencode's format in
		// kilo.json[c]; .kilocode/mcp.json is the older extension's
		// project file.
		dir := e.dotConfig("kilo")
		return []File{
			user(e.join(dir, "kilo.json"), JSON, opencodeSchema),
			user(e.join(dir, "kilo.jsonc"), JSON, opencodeSchema),
			proj(p, e, "kilo.json", JSON, opencodeSchema),
			proj(p, e, "kilo.jsonc", JSON, opencodeSchema),
			proj(p, e, ".kilo/kilo.json", JSON, opencodeSchema),
			proj(p, e, ".kilo/kilo.jsonc", JSON, opencodeSchema),
			proj(p, e, ".kilocode/mcp.json", JSON, mcpServersSchema),
		}
	}},
	{"amp", "Amp", func(e Env, p string) []File {
		dir := e.dotConfig("amp")
		return []File{
			user(e.join(dir, "settings.json"), JSON, ampSchema),
			user(e.join(dir, "settings.jsonc"), JSON, ampSchema),
			proj(p, e, ".amp/settings.json", JSON, ampSchema),
			proj(p, e, ".amp/settings.jsonc", JSON, ampSchema),
		}
	}},
	{"lmstudio", "LM Studio", func(e Env, p string) []File {
		return []File{user(e.join(e.Home, ".lmstudio", "mcp.json"), JSON, mcpServersSchema)}
	}},
	{"continue", "Continue", func(e Env, p string) []File {
		return []File{user(e.join(e.Home, ".continue", "config.yaml"), YAML, continueSchema)}
	}},
	{"goose", "Goose", func(e Env, p string) []File {
		dir := e.join(e.xdgConfig(), "goose")
		if e.GOOS == "windows" {
			dir = e.join(e.appConfig(), "Block", "goose", "config")
		}
		return []File{user(e.join(dir, "config.yaml"), YAML, gooseSchema)}
	}},
	{"opencode", "opencode", func(e Env, p string) []File {
		dir := e.join(e.xdgConfig(), "opencode")
		fs := []File{
			user(e.join(dir, "opencode.json"), JSON, opencodeSchema),
			user(e.join(dir, "opencode.jsonc"), JSON, opencodeSchema),
		}
		if c := e.getenv("OPENCODE_CONFIG"); c != "" {
			fs = append(fs, user(c, JSON, opencodeSchema))
		}
		return append(fs,
			proj(p, e, "opencode.json", JSON, opencodeSchema),
			proj(p, e, "opencode.jsonc", JSON, opencodeSchema))
	}},
}

// All returns every host.
func All() []Host { return append([]Host(nil), table...) }

// Names are the host names the command line takes.
func Names() []string {
	var out []string
	for _, h := range table {
		out = append(out, h.Name)
	}
	return out
}

// Lookup returns the hosts named, in table order; an unknown name is an
// error that lists the valid ones.
func Lookup(names []string) ([]Host, error) {
	want := map[string]bool{}
	for _, n := range names {
		found := false
		for _, h := range table {
			found = found || h.Name == n
		}
		if !found {
			return nil, fmt.Errorf("unknown host %q (valid: %s)", n, strings.Join(Names(), ", "))
		}
		want[n] = true
	}
	var out []Host
	for _, h := range table {
		if want[h.Name] {
			out = append(out, h)
		}
	}
	return out, nil
}
