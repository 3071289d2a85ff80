package api

import (
	"math"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/shutdown"
)

func TestGraceOf(t *testing.T) {
	maxMS := shutdown.MaxGrace.Milliseconds()
	for _, tc := range []struct {
		ms   int64
		want time.Duration
		ok   bool
	}{
		{0, 0, true}, // the default
		{1500, 1500 * time.Millisecond, true},
		{maxMS, shutdown.MaxGrace, true},
		{maxMS + 1, 0, false},
		{int64(1000000 * time.Hour / time.Millisecond), 0, false},
		{math.MaxInt64, 0, false}, // would overflow to a negative Duration
		{-1, 0, false},
	} {
		got, err := GraceOf(tc.ms)
		if (err == nil) != tc.ok || tc.ok && got != tc.want {
			t.Errorf("GraceOf(%d) = %v, %v; want %v, ok %v", tc.ms, got, err, tc.want, tc.ok)
		}
	}
}
