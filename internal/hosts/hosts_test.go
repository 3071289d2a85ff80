package hosts

import (
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestPathsPerOS(t *testing.T) {
	type paths map[string][]string // host → user files
	for _, tc := range []struct {
		goos, home string
		env        map[string]string
		want       paths
	}{
		{"linux", "/home/u", nil, paths{
			"claude-code":    {"/home/u/.claude.json"},
			"claude-desktop": {"/home/u/.config/Claude/claude_desktop_config.json"},
			"cursor":         {"/home/u/.cursor/mcp.json"},
			"vscode":         {"/home/u/.config/Code/User/mcp.json"},
			"windsurf":       {"/home/u/.codeium/windsurf/mcp_config.json"},
			"codex":          {"/home/u/.codex/config.toml"},
			"gemini":         {"/home/u/.gemini/settings.json"},
			"zed":            {"/home/u/.config/zed/settings.json"},
			"cline":          {"/home/u/.cline/data/settings/cline_mcp_settings.json"},
			"continue":       {"/home/u/.continue/config.yaml"},
			"goose":          {"/home/u/.config/goose/config.yaml"},
			"opencode":       {"/home/u/.config/opencode/opencode.json", "/home/u/.config/opencode/opencode.jsonc"},
			"qwen":           {"/home/u/.qwen/settings.json"},
			"roo-code":       {"/home/u/.config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json"},
			"kilo":           {"/home/u/.config/kilo/kilo.json", "/home/u/.config/kilo/kilo.jsonc"},
			"amp":            {"/home/u/.config/amp/settings.json", "/home/u/.config/amp/settings.jsonc"},
			"lmstudio":       {"/home/u/.lmstudio/mcp.json"},
		}},
		{"linux", "/home/u", map[string]string{
			"CLAUDE_CONFIG_DIR": "/cfg/claude", "CODEX_HOME": "/cfg/codex", "XDG_CONFIG_HOME": "/xdg",
			"CLINE_DATA_DIR": "/cfg/cline", "OPENCODE_CONFIG": "/cfg/oc.json",
		}, paths{
			"claude-code":    {"/cfg/claude/.claude.json"},
			"claude-desktop": {"/xdg/Claude/claude_desktop_config.json"},
			"vscode":         {"/xdg/Code/User/mcp.json"},
			"codex":          {"/cfg/codex/config.toml"},
			"zed":            {"/xdg/zed/settings.json"},
			"cline":          {"/cfg/cline/settings/cline_mcp_settings.json"},
			"goose":          {"/xdg/goose/config.yaml"},
			"opencode":       {"/xdg/opencode/opencode.json", "/xdg/opencode/opencode.jsonc", "/cfg/oc.json"},
		}},
		{"linux", "/home/u", map[string]string{"CLINE_MCP_SETTINGS_PATH": "/x/mcp.json", "CLINE_DIR": "/y"}, paths{
			"cline": {"/x/mcp.json"},
		}},
		{"linux", "/home/u", map[string]string{"CLINE_DIR": "/y"}, paths{
			"cline": {"/y/data/settings/cline_mcp_settings.json"},
		}},
		{"darwin", "/Users/u", nil, paths{
			"claude-code":    {"/Users/u/.claude.json"},
			"claude-desktop": {"/Users/u/Library/Application Support/Claude/claude_desktop_config.json"},
			"vscode":         {"/Users/u/Library/Application Support/Code/User/mcp.json"},
			"zed":            {"/Users/u/.config/zed/settings.json"},
			"goose":          {"/Users/u/.config/goose/config.yaml"},
			"opencode":       {"/Users/u/.config/opencode/opencode.json", "/Users/u/.config/opencode/opencode.jsonc"},
		}},
		{"windows", `C:\Users\u`, map[string]string{"APPDATA": `C:\Users\u\AppData\Roaming`}, paths{
			"claude-code":    {`C:\Users\u\.claude.json`},
			"claude-desktop": {`C:\Users\u\AppData\Roaming\Claude\claude_desktop_config.json`},
			"cursor":         {`C:\Users\u\.cursor\mcp.json`},
			"vscode":         {`C:\Users\u\AppData\Roaming\Code\User\mcp.json`},
			"windsurf":       {`C:\Users\u\.codeium\windsurf\mcp_config.json`},
			"codex":          {`C:\Users\u\.codex\config.toml`},
			"gemini":         {`C:\Users\u\.gemini\settings.json`},
			"zed":            {`C:\Users\u\AppData\Roaming\Zed\settings.json`},
			"continue":       {`C:\Users\u\.continue\config.yaml`},
			"goose":          {`C:\Users\u\AppData\Roaming\Block\goose\config\config.yaml`},
			"opencode":       {`C:\Users\u\.config\opencode\opencode.json`, `C:\Users\u\.config\opencode\opencode.jsonc`},
			"qwen":           {`C:\Users\u\.qwen\settings.json`},
			"roo-code":       {`C:\Users\u\AppData\Roaming\Code\User\globalStorage\rooveterinaryinc.roo-cline\settings\mcp_settings.json`},
			"kilo":           {`C:\Users\u\.config\kilo\kilo.json`, `C:\Users\u\.config\kilo\kilo.jsonc`},
			"amp":            {`C:\Users\u\.config\amp\settings.json`, `C:\Users\u\.config\amp\settings.jsonc`},
			"lmstudio":       {`C:\Users\u\.lmstudio\mcp.json`},
		}},
	} {
		t.Run(tc.goos+" "+strings.Join(keys(tc.env), ","), func(t *testing.T) {
			e := Env{GOOS: tc.goos, Home: tc.home, Getenv: func(k string) string { return tc.env[k] }}
			for _, h := range All() {
				want, ok := tc.want[h.Name]
				if !ok {
					continue
				}
				var got []string
				for _, f := range h.Files(e, "") {
					got = append(got, f.Path)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: got %q, want %q", h.Name, got, want)
				}
			}
		})
	}
}

func TestProjectFiles(t *testing.T) {
	e := Env{GOOS: "linux", Home: "/home/u", Getenv: func(string) string { return "" }}
	want := map[string][]string{
		"claude-code": {"/p/.mcp.json"},
		"cursor":      {"/p/.cursor/mcp.json"},
		"vscode":      {"/p/.vscode/mcp.json"},
		"codex":       {"/p/.codex/config.toml"},
		"gemini":      {"/p/.gemini/settings.json"},
		"zed":         {"/p/.zed/settings.json"},
		"opencode":    {"/p/opencode.json", "/p/opencode.jsonc"},
		"qwen":        {"/p/.qwen/settings.json", "/p/.qwen/settings.local.json"},
		"roo-code":    {"/p/.roo/mcp.json"},
		"kilo":        {"/p/kilo.json", "/p/kilo.jsonc", "/p/.kilo/kilo.json", "/p/.kilo/kilo.jsonc", "/p/.kilocode/mcp.json"},
		"amp":         {"/p/.amp/settings.json", "/p/.amp/settings.jsonc"},
	}
	for _, h := range All() {
		var got []string
		for _, f := range h.Files(e, "/p") {
			if f.Project {
				got = append(got, f.Path)
			}
		}
		if !reflect.DeepEqual(got, want[h.Name]) {
			t.Errorf("%s: project files %q, want %q", h.Name, got, want[h.Name])
		}
		for _, f := range h.Files(e, "") {
			if f.Project {
				t.Errorf("%s: project file %s without a project", h.Name, f.Path)
			}
		}
	}
}

func TestLookup(t *testing.T) {
	hs, err := Lookup([]string{"vscode", "claude-code"})
	if err != nil || len(hs) != 2 || hs[0].Name != "claude-code" {
		t.Fatalf("got %v, %v", hs, err)
	}
	_, err = Lookup([]string{"claude"})
	if err == nil || !strings.Contains(err.Error(), `unknown host "claude"`) || !strings.Contains(err.Error(), "claude-code, claude-desktop") {
		t.Fatalf("got %v, want an error listing the valid names", err)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
