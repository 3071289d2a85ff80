package cgroup

import "testing"

func TestParseLimits(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"512M", 512 << 20, true}, {"2G", 2 << 30, true}, {"none", MemoryNone, true}, {"MAX", MemoryNone, true}, {"1.5GiB", 3 << 29, true}, {"67108864", 64 << 20, true},
		{"64K", 0, false}, {"lots", 0, false}, {"", 0, false}, {"-1G", 0, false}, {"1e30T", 0, false}, {"NaN", 0, false},
	} {
		got, err := ParseMemoryMax(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseMemoryMax(%q) = %d, %v; want %d (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{{"1", 1, true}, {"0.5", 0.5, true}, {"none", CPUNone, true}, {"0", 0, false}, {"half", 0, false}, {"Inf", 0, false}} {
		got, err := ParseCPUMax(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseCPUMax(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{{"100", 100, true}, {"none", PidsNone, true}, {"0", 0, false}, {"1.5", 0, false}} {
		got, err := ParsePidsMax(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParsePidsMax(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if s := FormatMemory(512 << 20); s != "512M" {
		t.Errorf("FormatMemory = %s, want 512M", s)
	}
}
