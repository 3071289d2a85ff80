package proc

import (
	"slices"
	"testing"
	"unicode/utf16"
)

// le encodes s as UTF-16LE bytes, the way a process's memory holds it.
func le(s string) []byte {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u), byte(u>>8))
	}
	return b
}

func TestDecodeEnvBlock(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want []string
	}{
		{"empty", nil, nil},
		{"only the terminator", le("\x00\x00"), nil},
		{"one entry", le("A=1\x00\x00"), []string{"A=1"}},
		{"markers among others", le("PATH=C:\\bin\x00SUPERVISOR_PROC_ID=p-1\x00X=\x00\x00"),
			[]string{"PATH=C:\\bin", "SUPERVISOR_PROC_ID=p-1", "X="}},
		{"drive cwd entries kept", le("=C:=C:\\work\x00A=b\x00\x00"), []string{"=C:=C:\\work", "A=b"}},
		{"non-ASCII and a surrogate pair", le("NAME=héllo 🐧\x00\x00"), []string{"NAME=héllo 🐧"}},
		{"slack after the double NUL ignored", le("A=1\x00\x00B=2\x00\x00"), []string{"A=1"}},
		{"truncated last entry dropped", le("A=1\x00SUPERVISOR_PROC_ID=p-12"), []string{"A=1"}},
		{"no double NUL: complete entries kept", le("A=1\x00B=2\x00"), []string{"A=1", "B=2"}},
		{"odd trailing byte dropped", append(le("A=1\x00\x00"), 0x41), []string{"A=1"}},
		{"unpaired surrogate", append(append(le("A="), 0x00, 0xD8), le("\x00\x00")...), []string{"A=\uFFFD"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decodeEnvBlock(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("decodeEnvBlock = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDecodeUTF16LE(t *testing.T) {
	tests := []struct {
		in   []byte
		want string
	}{
		{nil, ""},
		{le(`"C:\Program Files\node.exe" server.js --port 8080`), `"C:\Program Files\node.exe" server.js --port 8080`},
		{le("ünï 🐧"), "ünï 🐧"},
		{append(le("ab"), 0x63), "ab"}, // a read cut mid-unit
	}
	for _, tt := range tests {
		if got := decodeUTF16LE(tt.in); got != tt.want {
			t.Errorf("decodeUTF16LE(% x) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
