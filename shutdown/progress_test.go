package shutdown

import (
	"testing"
	"time"
)

func TestProgressString(t *testing.T) {
	for _, tc := range []struct {
		p    Progress
		want string
	}{
		{Progress{Step: ExitedOnSIGTERM, Processes: 3, Wait: 5 * time.Second}, "SIGTERM sent to 3 processes, waiting up to 5s…"},
		{Progress{Step: Killed, Processes: 1, Wait: 5 * time.Second}, "SIGKILL sent to 1 process, waiting up to 5s…"},
		{Progress{Step: ExitedOnEOF, Processes: 2, Wait: 500 * time.Millisecond}, "waiting up to 500ms for 2 processes to exit on EOF…"},
		{Progress{Joined: true, Processes: 1, Wait: time.Second}, "1 process already being stopped, waiting up to 1s…"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.p, got, tc.want)
		}
	}
}
