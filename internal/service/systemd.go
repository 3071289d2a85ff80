package service

import (
	"path/filepath"
	"strings"
)

// Systemd installs a systemd user unit under
// $XDG_CONFIG_HOME/systemd/user (default ~/.config/systemd/user).
var Systemd = &Manager{
	Name: "systemd user unit",
	render: func(binary string) ([]byte, error) {
		return renderTemplate("systemd", systemdTemplate, struct{ Exec string }{systemdQuote(binary)})
	},
	path: func(getenv func(string) string) (string, error) {
		dir := getenv("XDG_CONFIG_HOME")
		if !filepath.IsAbs(dir) { // unset or relative: the spec says ignore it
			h, err := home(getenv)
			if err != nil {
				return "", err
			}
			dir = filepath.Join(h, ".config")
		}
		return filepath.Join(dir, "systemd", "user", UnitName), nil
	},
	enable: func(string, int) []command {
		return []command{
			{args: []string{"systemctl", "--user", "daemon-reload"}},
			{args: []string{"systemctl", "--user", "enable", "--now", UnitName}},
		}
	},
	disable: func(string, int) []command {
		return []command{{args: []string{"systemctl", "--user", "disable", "--now", UnitName}}}
	},
	reload: func() []command {
		return []command{{args: []string{"systemctl", "--user", "daemon-reload"}}}
	},
}

// systemdQuote makes a path one word of an Exec line: specifiers escaped
// (% is %%), and quoted where it holds a space, quote or backslash.
func systemdQuote(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	if !strings.ContainsAny(s, " \t\"'\\") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}
