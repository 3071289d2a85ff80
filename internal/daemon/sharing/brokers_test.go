package sharing

import (
	"slices"
	"strings"
	"testing"

	"github.com/seed-86a41135/supervisor/api"
)

func TestBrokerKeysKeepApart(t *testing.T) {
	base := strings.Repeat("a", 64)
	keys := []string{
		base,
		LimitedKey(base, "memory 128M"),
		LimitedKey(base, "memory 256M"),
		SoloKey(base, "client-1"),
		SoloKey(base, "client-2"),
	}
	for i := range keys {
		for j := range i {
			if keys[i] == keys[j] {
				t.Errorf("keys %d and %d are the same: %s", i, j, keys[i])
			}
		}
	}
	// A daemon after a restart finds a broker by its key: a pure
	// function of what it runs.
	if a, b := LimitedKey(base, "x"), LimitedKey(strings.Clone(base), "x"); a != b {
		t.Errorf("LimitedKey is not stable: %s then %s", a, b)
	}
	p := api.Paths{Socket: "/run/user/1/supervisor/daemon.sock"}
	if got := BrokerSocket(p, keys[1]); got != "/run/user/1/supervisor/b-"+keys[1][:16]+".sock" {
		t.Errorf("BrokerSocket = %s", got)
	}
	if got := BrokerSession(keys[1]); got != "broker-"+keys[1][:12] {
		t.Errorf("BrokerSession = %s", got)
	}
}

func TestBrokerEnv(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env       []string
		want      []string
		wantDrops []string
	}{
		{"adds GOMAXPROCS for the broker alone", []string{"A=1"}, []string{"A=1", "GOMAXPROCS=1"}, []string{"GOMAXPROCS"}},
		{"keeps the client's", []string{"GOMAXPROCS=4"}, []string{"GOMAXPROCS=4"}, nil},
		{"keeps the client's in any case", []string{"gomaxprocs=4"}, []string{"gomaxprocs=4"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, drop := BrokerEnv(tc.env)
			if !slices.Equal(got, tc.want) || !slices.Equal(drop, tc.wantDrops) {
				t.Errorf("BrokerEnv(%q) = %q, drop %q; want %q, drop %q", tc.env, got, drop, tc.want, tc.wantDrops)
			}
		})
	}
}

func TestBrokerRoom(t *testing.T) {
	for _, tc := range []struct {
		l    api.Limits
		want string
	}{
		{api.Limits{}, ""},
		{api.Limits{PidsMax: 64, MemoryMax: 128 << 20}, ""},
		{api.Limits{PidsMax: 8}, "pids_max 8 is too small"},
		{api.Limits{MemoryMax: 1 << 20}, "is too small for a shared server"},
	} {
		got := BrokerRoom(&tc.l)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("BrokerRoom(%+v) = %q, want %q", tc.l, got, tc.want)
		}
	}
}
