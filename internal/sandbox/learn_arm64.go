//go:build linux

package sandbox

// learnLegacy: arm64 has only the *at calls.
func learnLegacy() map[uint32]watched { return nil }
