package leanrun

import (
	"reflect"
	"strings"
	"testing"
	"time"
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
