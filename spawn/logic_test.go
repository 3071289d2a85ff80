package spawn

import (
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestStartErrorMessage(t *testing.T) {
	tests := []struct {
		code int
		want string
	}{
		{CodeNotFound, "command not found"},
		{CodeNotExecutable, "not executable"},
		{125, "start"},
	}
	inner := errors.New("inner")
	for _, tt := range tests {
		e := &StartError{Name: "srv", Code: tt.code, Err: inner}
		if !strings.Contains(e.Error(), tt.want) || !strings.Contains(e.Error(), "srv") {
			t.Errorf("StartError{Code: %d}.Error(): got %q, want it to name srv and say %q", tt.code, e.Error(), tt.want)
		}
		if !errors.Is(e, inner) {
			t.Errorf("StartError{Code: %d}: errors.Is(inner) got false, want true", tt.code)
		}
	}
}

func TestWithMarkers(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"empty", nil, []string{"SUPERVISOR_SESSION_ID=s", "SUPERVISOR_PROC_ID=p"}},
		{"keeps others", []string{"A=1", "B=2"}, []string{"A=1", "B=2", "SUPERVISOR_SESSION_ID=s", "SUPERVISOR_PROC_ID=p"}},
		{
			"replaces existing",
			[]string{"SUPERVISOR_SESSION_ID=old", "A=1", "SUPERVISOR_PROC_ID=oldp", "SUPERVISOR_PROC_ID=older"},
			[]string{"A=1", "SUPERVISOR_SESSION_ID=s", "SUPERVISOR_PROC_ID=p"},
		},
		{
			"drops an inherited keep, instance and host",
			[]string{"SUPERVISOR_KEEP=1", "A=1", "SUPERVISOR_INSTANCE=other", "SUPERVISOR_HOST=1-2"},
			[]string{"A=1", "SUPERVISOR_SESSION_ID=s", "SUPERVISOR_PROC_ID=p"},
		},
		{
			"similar names are not markers",
			[]string{"SUPERVISOR_SESSION_IDX=1", "SUPERVISOR_SESSION=explicit"},
			[]string{"SUPERVISOR_SESSION_IDX=1", "SUPERVISOR_SESSION=explicit", "SUPERVISOR_SESSION_ID=s", "SUPERVISOR_PROC_ID=p"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.env)
			got := WithMarkers(tt.env, "s", "p", "")
			if !slices.Equal(got, tt.want) {
				t.Errorf("WithMarkers(%q): got %q, want %q", tt.env, got, tt.want)
			}
			if !slices.Equal(tt.env, in) {
				t.Errorf("WithMarkers modified its input: got %q, want %q", tt.env, in)
			}
		})
	}
}

func TestStatusExitCode(t *testing.T) {
	tests := []struct {
		st   Status
		want int
	}{
		{Status{Code: 0}, 0},
		{Status{Code: 7}, 7},
		{Status{Signal: syscall.SIGKILL}, 137},
		{Status{Signal: syscall.SIGTERM}, 143},
	}
	for _, tt := range tests {
		if got := tt.st.ExitCode(); got != tt.want {
			t.Errorf("%+v.ExitCode(): got %d, want %d", tt.st, got, tt.want)
		}
	}
}
