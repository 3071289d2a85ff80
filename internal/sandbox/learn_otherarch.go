//go:build linux && !amd64 && !arm64

package sandbox

// learnLegacy: no seccomp filter is built for this architecture
// (nativeArch), so Watch refuses before it matters.
func learnLegacy() map[uint32]watched { return nil }
