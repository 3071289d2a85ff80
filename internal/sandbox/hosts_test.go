package sandbox

import (
	"strings"
	"testing"
)

func TestParseHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		list, want, err string
	}{
		{"api.github.com:443", "api.github.com:443", ""},
		{" API.GitHub.com.:443 , *.example.com:8080", "api.github.com:443 *.example.com:8080", ""},
		{"10.0.0.5:5432,[::1]:8080", "10.0.0.5:5432 [::1]:8080", ""},
		{"example.com", "", "want none, all"},
		{"example.com,b.com:443", "", `"example.com" has no port`},
		{"example.com:http", "", "not a number"},
		{"example.com:70000", "", "not a number"},
		{"::1:80", "", "in brackets"},
		{"[10.0.0.1]:80", "", "not an IPv6"},
		{"exa mple.com:80", "", "not a host name"},
		{"*.:80", "", "not a host name"},
		{",", "", "want none, all"},
		{"bogus", "", "want none, all"},
		{"a.com:1,bogus", "", `"bogus" has no port`},
	} {
		hosts, err := ParseHosts(tc.list)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.list, err, tc.err)
			}
			continue
		}
		var got []string
		for _, h := range hosts {
			got = append(got, h.String())
		}
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("%q: %v %v, want %s", tc.list, got, err, tc.want)
		}
	}
	// Validate takes the modes and lists alike.
	for _, n := range []string{"", "all", "none", "a.b:1"} {
		if err := (Spec{Network: n}).Validate(); err != nil {
			t.Errorf("network %q: %v", n, err)
		}
	}
}

func TestAdmits(t *testing.T) {
	t.Parallel()
	hosts, err := ParseHosts("api.github.com:443,*.example.com:443,10.0.0.5:5432,[::1]:8080")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		port int
		want bool
	}{
		{"api.github.com", 443, true},
		{"API.GITHUB.COM.", 443, true},
		{"api.github.com", 80, false},
		{"github.com", 443, false},
		{"evil-api.github.com", 443, false},
		{"a.example.com", 443, true},
		{"a.b.example.com", 443, true},
		{"example.com", 443, false}, // *.domain is beneath it, not it
		{"badexample.com", 443, false},
		{"10.0.0.5", 5432, true},
		{"::ffff:10.0.0.5", 5432, true}, // the same address, mapped
		{"10.0.0.6", 5432, false},
		{"::1", 8080, true},
		{"[::1]", 8080, true},
		{"0:0:0:0:0:0:0:1", 8080, true},
		{"localhost", 8080, false}, // a name is not the address it resolves to
	} {
		if got := Admits(hosts, tc.name, tc.port); got != tc.want {
			t.Errorf("Admits(%s, %d) = %v, want %v", tc.name, tc.port, got, tc.want)
		}
	}
}
