package shutdown

import "testing"

// The marker rules are pure and the same on every OS.
func TestMarkerTarget(t *testing.T) {
	targets := []Target{{ID: "p1", Session: "s1"}, {ID: "p2", Session: "s2"}}
	byID := map[string]int{"p1": 0, "p2": 1}
	skipP9 := func(id string) bool { return id == "p9" }
	tests := []struct {
		name   string
		env    []string
		opt    Options
		want   int
		wantOK bool
	}{
		{"proc marker", []string{"SUPERVISOR_PROC_ID=p2"}, Options{}, 1, true},
		{"proc marker wins over session", []string{"SUPERVISOR_SESSION_ID=s1", "SUPERVISOR_PROC_ID=p2"}, Options{WholeSession: true}, 1, true},
		{"session marker needs a whole session", []string{"SUPERVISOR_SESSION_ID=s1"}, Options{}, 0, false},
		{"session marker", []string{"SUPERVISOR_SESSION_ID=s2"}, Options{WholeSession: true}, 1, true},
		{"unknown proc falls to its session", []string{"SUPERVISOR_PROC_ID=p7", "SUPERVISOR_SESSION_ID=s1"}, Options{WholeSession: true}, 0, true},
		{"a proc someone else stops is not claimed", []string{"SUPERVISOR_PROC_ID=p9", "SUPERVISOR_SESSION_ID=s1"}, Options{WholeSession: true, SkipProc: skipP9}, 0, false},
		{"another instance's process", []string{"SUPERVISOR_SESSION_ID=s1", "SUPERVISOR_INSTANCE=b"}, Options{WholeSession: true, Instance: "a"}, 0, false},
		{"this instance's process", []string{"SUPERVISOR_SESSION_ID=s1", "SUPERVISOR_INSTANCE=a"}, Options{WholeSession: true, Instance: "a"}, 0, true},
		{"a log writer is never claimed", []string{"SUPERVISOR_PROC_ID=p2", "SUPERVISOR_SESSION_ID=s1", "SUPERVISOR_LOG_WRITER=1"}, Options{WholeSession: true}, 0, false},
		{"empty session marker", []string{"SUPERVISOR_SESSION_ID="}, Options{WholeSession: true}, 0, false},
		{"no markers", []string{"PATH=/bin"}, Options{WholeSession: true}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := markerTarget(tt.env, byID, targets, tt.opt)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("markerTarget(%q): got (%d, %v), want (%d, %v)", tt.env, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
