//go:build unix

package top

import "testing"

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		in   string
		quit bool
		sort string
	}{
		{"q", true, ""}, {"\x03", true, ""}, {"\x1b", true, ""}, {"\x1b[A", false, ""},
		{"c", false, "cpu"}, {"m", false, "mem"}, {"h", false, "host"}, {"x", false, ""}, {"", false, ""},
	} {
		quit, sort := key([]byte(tc.in))
		if quit != tc.quit || sort != tc.sort {
			t.Errorf("key(%q) = %v, %q; want %v, %q", tc.in, quit, sort, tc.quit, tc.sort)
		}
	}
}
