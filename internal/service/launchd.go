package service

import (
	"bytes"
	"encoding/xml"
	"path/filepath"
	"strconv"
)

// Launchd installs a launchd agent at ~/Library/LaunchAgents/<Label>.plist
// and bootstraps it into the user's gui domain.
var Launchd = &Manager{
	Name: "launchd agent",
	render: func(binary string) ([]byte, error) {
		var b bytes.Buffer
		if err := xml.EscapeText(&b, []byte(binary)); err != nil {
			return nil, err
		}
		return renderTemplate("launchd", launchdTemplate, struct{ Label, Binary string }{Label, b.String()})
	},
	path: func(getenv func(string) string) (string, error) {
		h, err := home(getenv)
		if err != nil {
			return "", err
		}
		return filepath.Join(h, "Library", "LaunchAgents", Label+".plist"), nil
	},
	enable: func(path string, uid int) []command {
		// bootout first (may fail: nothing loaded yet) so that a
		// reinstall loads the new plist.
		return []command{
			{args: []string{"launchctl", "bootout", domain(uid) + "/" + Label}, mayFail: true},
			{args: []string{"launchctl", "bootstrap", domain(uid), path}},
		}
	},
	disable: func(path string, uid int) []command {
		// may fail: the plist may be there without being loaded.
		return []command{{args: []string{"launchctl", "bootout", domain(uid) + "/" + Label}, mayFail: true}}
	},
}

func domain(uid int) string { return "gui/" + strconv.Itoa(uid) }
