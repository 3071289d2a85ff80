package leanrun

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// parseArgs reads what `supervisor run` would read, the way cobra's pflag
// reads it, or says why the run goes to `supervisor run`.
func TestParseArgs(t *testing.T) {
	eight := 8
	for _, tc := range []struct {
		args []string
		want Spec
		why  string // a part of the hand-over's reason; "" for none
	}{
		{args: []string{"--", "srv", "--name", "x"}, want: Spec{Argv: []string{"srv", "--name", "x"}}},
		{args: []string{"--name=a", "--name", "b", "--cwd", "/d", "--session=s", "--", "srv"},
			want: Spec{Name: "b", Dir: "/d", Session: "s", Argv: []string{"srv"}}},
		{args: []string{"--grace", "1500ms", "--max-instances", "010", "--", "srv"},
			want: Spec{Grace: 1500 * time.Millisecond, MaxInstances: &eight, Argv: []string{"srv"}}},
		{args: []string{"--name", "-x", "--", "srv"}, want: Spec{Name: "-x", Argv: []string{"srv"}}},
		{args: []string{"--share", "--lazy", "--", "srv"}, want: Spec{Share: true, Lazy: true, Argv: []string{"srv"}}},
		{args: []string{"--sandbox", "--", "srv"}, want: Spec{Sandbox: &sandbox.Spec{Enabled: true}, Argv: []string{"srv"}}},
		{args: []string{"--sandbox", "--allow-env", "X", "--", "srv"}, why: "--allow-env is for supervisor run"},
		{args: []string{"--share=false", "--", "srv"}, why: "--share=false is for supervisor run"},
		{args: []string{"--lazy=true", "--", "srv"}, why: "--lazy=true is for supervisor run"},
		{args: []string{"--idle", "1m", "--", "srv"}, why: "--idle is for supervisor run"},
		{args: []string{"-h"}, why: "-h is for supervisor run"},
		{args: []string{"srv"}, why: "srv is for supervisor run"},
		{args: []string{"--name", "x"}, why: "no -- before the command"},
		{args: []string{"--name", "--", "srv"}, why: "--name needs a value"},
		{args: []string{"--"}, why: "no command after --"},
		{args: []string{"--grace", "soon", "--", "srv"}, why: "--grace soon"},
		{args: []string{"--grace", "1000h", "--", "srv"}, why: "--grace 1000h"},
		{args: []string{"--max-instances", "-1", "--", "srv"}, why: "--max-instances -1"},
		{args: []string{"--max-instances", "09", "--", "srv"}, why: "--max-instances 09"},
	} {
		got, why := parseArgs(tc.args)
		if tc.why != "" {
			if !strings.Contains(why, tc.why) {
				t.Errorf("%q: hand-over %q, want one saying %q", tc.args, why, tc.why)
			}
			continue
		}
		if why != "" || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v (hand-over %q), want %+v", tc.args, got, why, tc.want)
		}
	}
}

// given names what the parent does not have, or has otherwise: the
// parent here is a real process with an environment of its own.
func TestGivenNamesWhatTheParentAdded(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.Env = []string{"KEEP=1", "CHANGED=old", "_=/usr/bin/x"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Start returns at the exec's close of its descriptors, before the
	// kernel has set the new environment's bounds: until then it reads
	// empty.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if env, err := proc.Environ(cmd.Process.Pid); err == nil && len(env) > 0 || time.Now().After(deadline) {
			break
		}
	}
	got := Given([]string{"KEEP=1", "CHANGED=new", "ADDED=2", "_=/usr/bin/y"}, cmd.Process.Pid)
	if want := []string{"CHANGED", "ADDED"}; !reflect.DeepEqual(got, want) {
		t.Errorf("given = %q, want %q", got, want)
	}
	if got := Given([]string{"A=1"}, 1<<30); got != nil {
		t.Errorf("given with no parent to read = %q, want none", got)
	}
}
