package sandbox

import (
	"fmt"
	"strings"
)

// Seatbelt is the macOS sandbox (sandbox-exec's profile language, SBPL).
// The profile is made from the same Rules Landlock enforces on Linux, in
// every build so that it is tested here; only macOS runs it.

// seatbeltSystem is what every process on macOS needs to read beyond a
// server's own rules: the system's libraries, frameworks and the dyld
// cache, its configuration, and the devices every program opens.
var seatbeltSystem = []string{
	"/System", "/Library", "/usr", "/bin", "/sbin", "/opt/homebrew", "/private/etc",
	"/private/var/db/timezone", "/private/var/db/dyld", "/dev",
}

// Profile is r as a Seatbelt profile: nothing but what r allows. Writes
// are allowed beneath r.Write, reads beneath r.Read and r.Write and the
// system, the network only where r has one, and signals only within the
// sandbox. r's rules have the deny list split out already, so the profile
// needs no deny rules of its own.
func Profile(r Rules) string {
	var b strings.Builder
	b.WriteString("(version 1)\n(deny default)\n")
	b.WriteString("(allow process-fork)\n(allow process-exec)\n(allow signal (target same-sandbox))\n")
	b.WriteString("(allow sysctl-read)\n(allow mach-lookup)\n(allow ipc-posix-shm)\n(allow iokit-open)\n")
	b.WriteString("(allow file-read-metadata)\n")
	read := append(append(append([]string(nil), seatbeltSystem...), r.Read...), r.Write...)
	fmt.Fprintf(&b, "(allow file-read* %s)\n", subpaths(read))
	if len(r.Write) > 0 {
		fmt.Fprintf(&b, "(allow file-write* %s)\n", subpaths(r.Write))
	}
	if r.NoNetwork {
		b.WriteString("(allow network* (remote unix-socket))\n")
		for _, port := range r.BindPorts {
			fmt.Fprintf(&b, "(allow network-bind network-inbound (local tcp \"*:%d\"))\n", port)
		}
		for _, port := range r.ConnectPorts {
			// The egress proxy, on this machine's loopback: that address
			// and port alone, which Landlock's port rules cannot say.
			fmt.Fprintf(&b, "(allow network-outbound (remote tcp \"localhost:%d\"))\n", port)
		}
	} else {
		b.WriteString("(allow network*)\n(allow system-socket)\n")
	}
	if r.Daemon != "" {
		// After the network's rules: the last rule that matches wins.
		fmt.Fprintf(&b, "(deny network-outbound (remote unix-socket (path-literal %s)))\n", sbplString(r.Daemon))
	}
	return b.String()
}

// subpaths is paths as SBPL subpath filters.
func subpaths(paths []string) string {
	parts := make([]string, len(paths))
	for i, p := range paths {
		parts[i] = fmt.Sprintf("(subpath %s)", sbplString(p))
	}
	return strings.Join(parts, " ")
}

// sbplString quotes s for SBPL, whose strings escape as Scheme's do: a
// path with a quote or a backslash in it stays one path.
func sbplString(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return `"` + s + `"`
}
