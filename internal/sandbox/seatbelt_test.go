package sandbox

import (
	"strings"
	"testing"
)

// The Seatbelt profile says what the rules say, and nothing more: built
// and checked here, run on macOS.
func TestSeatbeltProfile(t *testing.T) {
	r := Rules{Read: []string{"/Users/me/project"}, Write: []string{"/private/tmp/x", `/Users/me/we"ird\dir`},
		Daemon: "/Users/me/Library/Caches/supervisor/s.sock"}
	p := Profile(r)
	for _, want := range []string{
		"(version 1)\n(deny default)\n",
		`(subpath "/Users/me/project")`,
		`(allow file-write* (subpath "/private/tmp/x") (subpath "/Users/me/we\"ird\\dir"))`,
		"(allow network*)",
		"(allow signal (target same-sandbox))",
		`(deny network-outbound (remote unix-socket (path-literal "/Users/me/Library/Caches/supervisor/s.sock")))` + "\n",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("profile lacks %q:\n%s", want, p)
		}
	}
	if strings.Contains(p, `"/Users/me"`) || strings.Contains(p, ".ssh") {
		t.Errorf("profile opens more than the rules:\n%s", p)
	}
	r.NoNetwork, r.BindPorts = true, []int{8080}
	p = Profile(r)
	if strings.Contains(p, "(allow network*)\n") || !strings.Contains(p, `(local tcp "*:8080")`) || !strings.HasSuffix(p, "s.sock\")))\n") {
		t.Errorf("no-network profile:\n%s", p)
	}
	r.ConnectPorts = []int{40123}
	p = Profile(r)
	if !strings.Contains(p, `(allow network-outbound (remote tcp "localhost:40123"))`) || strings.Contains(p, "(allow network*)\n") {
		t.Errorf("a network list's profile does not allow its proxy alone:\n%s", p)
	}
	// Parentheses balance: sandbox-exec refuses a profile that does not.
	if strings.Count(p, "(") != strings.Count(p, ")") {
		t.Errorf("unbalanced profile:\n%s", p)
	}
}
