package outcome

import (
	"testing"
	"time"
)

func TestCheckGrace(t *testing.T) {
	for _, g := range []time.Duration{0, time.Millisecond, MaxGrace} {
		if err := CheckGrace(g); err != nil {
			t.Errorf("CheckGrace(%v) = %v, want nil", g, err)
		}
	}
	for _, g := range []time.Duration{-time.Second, MaxGrace + 1, 1000000 * time.Hour} {
		if err := CheckGrace(g); err == nil {
			t.Errorf("CheckGrace(%v) = nil, want an error", g)
		}
	}
}
