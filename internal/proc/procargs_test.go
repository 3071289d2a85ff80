package proc

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

// procArgsBuf builds a kern.procargs2 buffer: argc, the executable path,
// pad NULs, then body verbatim.
func procArgsBuf(argc int32, exe string, pad int, body string) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(argc))
	b = append(b, exe...)
	b = append(b, 0)
	b = append(b, strings.Repeat("\x00", pad)...)
	return append(b, body...)
}

func TestParseProcArgs(t *testing.T) {
	tests := []struct {
		name     string
		buf      []byte
		wantArgv []string
		wantEnv  []string
		wantErr  bool
	}{
		{
			name:     "args and env, apple strings left out",
			buf:      procArgsBuf(2, "/bin/sleep", 5, "sleep\x0010\x00HOME=/Users/a\x00SUPERVISOR_SESSION_ID=s1\x00\x00executable_path=/bin/sleep\x00ptr_munge=\x00"),
			wantArgv: []string{"sleep", "10"},
			wantEnv:  []string{"HOME=/Users/a", "SUPERVISOR_SESSION_ID=s1"},
		},
		{
			name:     "no padding",
			buf:      procArgsBuf(1, "/x", 0, "x\x00A=1\x00\x00"),
			wantArgv: []string{"x"},
			wantEnv:  []string{"A=1"},
		},
		{
			name:     "empty argument kept",
			buf:      procArgsBuf(3, "/bin/sh", 2, "sh\x00\x00-c\x00\x00"),
			wantArgv: []string{"sh", "", "-c"},
		},
		{
			name:    "no arguments",
			buf:     procArgsBuf(0, "/bin/true", 3, "A=1\x00B=2\x00\x00"),
			wantEnv: []string{"A=1", "B=2"},
		},
		{
			name:     "buffer ends after the arguments",
			buf:      procArgsBuf(1, "/bin/true", 1, "true\x00"),
			wantArgv: []string{"true"},
		},
		{
			name:     "unterminated env tail dropped",
			buf:      procArgsBuf(1, "/a", 1, "a\x00A=1\x00SUPERVISOR_PROC_ID=ab"),
			wantArgv: []string{"a"},
			wantEnv:  []string{"A=1"},
		},
		{name: "empty", buf: nil, wantErr: true},
		{name: "short argc", buf: []byte{1, 0}, wantErr: true},
		{name: "negative argc", buf: procArgsBuf(-1, "/a", 1, "a\x00"), wantErr: true},
		{name: "argc beyond the buffer", buf: procArgsBuf(1000, "/a", 1, "a\x00"), wantErr: true},
		{name: "arguments cut short", buf: procArgsBuf(3, "/a", 1, "a\x00b\x00"), wantErr: true},
		{name: "argument unterminated", buf: procArgsBuf(2, "/a", 1, "a\x00bc"), wantErr: true},
		{name: "executable path unterminated", buf: append(binary.NativeEndian.AppendUint32(nil, 1), "/bin/sl"...), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv, env, err := parseProcArgs(tt.buf)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if !slices.Equal(argv, tt.wantArgv) {
				t.Errorf("argv = %q, want %q", argv, tt.wantArgv)
			}
			if !slices.Equal(env, tt.wantEnv) {
				t.Errorf("env = %q, want %q", env, tt.wantEnv)
			}
		})
	}
}
