package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/internal/settings"
)

func TestRetentionInterval(t *testing.T) {
	tests := []struct {
		retention, want time.Duration
	}{
		{7 * 24 * time.Hour, time.Hour},
		{2 * time.Hour, time.Hour},
		{30 * time.Minute, 15 * time.Minute},
		{time.Second, 500 * time.Millisecond},
		{100 * time.Millisecond, 100 * time.Millisecond},
		{time.Millisecond, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := retentionInterval(tt.retention); got != tt.want {
			t.Errorf("retentionInterval(%v): got %v, want %v", tt.retention, got, tt.want)
		}
	}
}

func TestApplyEnvRetention(t *testing.T) {
	tests := []struct {
		value   string
		want    time.Duration
		wantErr bool
	}{
		{"", 7 * 24 * time.Hour, false},
		{"1s", time.Second, false},
		{"48h", 48 * time.Hour, false},
		{"7d", 0, true},
		{"0s", 0, true},
		{"-1h", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			s := settings.Defaults()
			err := s.ApplyEnv(func(k string) string {
				if k == settings.EnvRetention {
					return tt.value
				}
				return ""
			})
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), settings.EnvRetention) {
					t.Errorf("ApplyEnv(%s=%q): got %v, want an error naming the variable", settings.EnvRetention, tt.value, err)
				}
				return
			}
			if err != nil || s.Retention != tt.want {
				t.Errorf("ApplyEnv(%s=%q): got %v, %v; want %v, nil", settings.EnvRetention, tt.value, s.Retention, err, tt.want)
			}
		})
	}
}
