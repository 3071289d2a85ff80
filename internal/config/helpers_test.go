package config

import (
	"strconv"

	"github.com/seed-86a41135/supervisor/api"
)

func itoa(n int) string { return strconv.Itoa(n) }

func runReq(name string) api.RunRequest {
	return api.RunRequest{Name: name, Argv: []string{"x"}}
}

func ensureReq(name, health string) api.EnsureRequest {
	return api.EnsureRequest{RunRequest: runReq(name), Health: health}
}
