package sandbox

import (
	"slices"
	"testing"
)

func TestCollapse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"/h/n/a", "/h/n/b"}, []string{"/h/n/a", "/h/n/b"}},
		{[]string{"/h/n/a", "/h/n/b", "/h/n/c", "/h/o/x"}, []string{"/h/n", "/h/o/x"}},
		{[]string{"/h/n", "/h/n/deep/a", "/h/n/b"}, []string{"/h/n"}},
		// Never the home itself, nor /, however many files of it.
		{[]string{"/h/.a", "/h/.b", "/h/.c"}, []string{"/h/.a", "/h/.b", "/h/.c"}},
		{[]string{"/a", "/b", "/c"}, []string{"/a", "/b", "/c"}},
	} {
		if got := collapse(slices.Clone(tc.in), "/h"); !slices.Equal(got, tc.want) {
			t.Errorf("collapse(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLearnLeavesSecretsAndProbes(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	base := Rules{Read: []string{"/usr"}, Write: []string{"/tmp/x"}}
	touched := map[string]Access{
		"/usr/lib/libc.so":          {Read: true},  // covered
		home + "/.ssh/id_ed25519":   {Read: true},  // a secret, whether there or not
		home + "/no/such/module.js": {Read: true},  // a probe
		"/proc/self/status":         {Read: true},  // the system's
		home + "/.aws/credentials":  {Write: true}, // a secret written
		"/tmp/x/y":                  {Write: true}, // covered
	}
	l := Learn(base, []string{home + "/.ssh", home + "/.aws"}, home, touched, []string{"1.2.3.4:443", "9.9.9.9:53"})
	if len(l.Read)+len(l.Write) != 0 {
		t.Errorf("learnt rules %q %q, want none", l.Read, l.Write)
	}
	if !slices.Equal(l.Secrets, []string{home + "/.aws/credentials"}) {
		// The key does not exist here: a probe, not a secret read.
		t.Errorf("secrets %q, want the credentials written", l.Secrets)
	}
	if !slices.Equal(l.Hosts, []string{"1.2.3.4:443"}) {
		t.Errorf("hosts %q, want the resolver's port left out", l.Hosts)
	}
}
