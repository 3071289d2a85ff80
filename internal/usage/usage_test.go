package usage

import (
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		name      string
		prev, cur Sample
		want      float64
	}{
		{"between two samples", Sample{At: at(10), CPU: 2 * time.Second}, Sample{At: at(12), CPU: 3 * time.Second}, 50},
		{"two CPUs busy", Sample{At: at(10), CPU: 0}, Sample{At: at(11), CPU: 2 * time.Second}, 200},
		{"no previous: since started", Sample{}, Sample{At: at(4), CPU: time.Second}, 25},
		{"a previous of another run (CPU went back)", Sample{At: at(2), CPU: 9 * time.Second}, Sample{At: at(4), CPU: time.Second}, 25},
		{"at the start", Sample{}, Sample{At: start}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percent(tc.prev, tc.cur, start); got != tc.want {
				t.Errorf("Percent = %v, want %v", got, tc.want)
			}
		})
	}
}
