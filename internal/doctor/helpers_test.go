package doctor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/api"
)

func newDoctor(t *testing.T, only ...int) *Doctor {
	dir := t.TempDir()
	return &Doctor{
		Paths:    api.Paths{StateDir: dir, Socket: filepath.Join(dir, "s.sock")},
		OnlyPIDs: only, Getenv: func(string) string { return "" }, Grace: time.Second,
	}
}

func kinds(fs []Finding) map[Kind][]Finding {
	out := map[Kind][]Finding{}
	for _, f := range fs {
		out[f.Kind] = append(out[f.Kind], f)
	}
	return out
}
