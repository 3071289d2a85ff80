package api

import "testing"

func TestNewerVersion(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"0.1.0", "0.0.9", true},
		{"0.1.0-dev", "0.0.9-old", true},
		{"0.0.9-old", "0.1.0-dev", false},
		{"1.2.3", "1.2.3", false},
		{"v1.10.0", "1.9.9", true},
		{"1.2.3", "1.2.10", false},
		{"devel", "0.1.0", true}, // unparsable and different: taken as newer
		{"devel", "devel", false},
	}
	for _, tt := range tests {
		if got := NewerVersion(tt.a, tt.b); got != tt.want {
			t.Errorf("NewerVersion(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
