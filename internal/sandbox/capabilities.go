package sandbox

import "fmt"

// Capabilities is what a machine can enforce of a sandbox.
type Capabilities struct {
	Mechanism  string `json:"mechanism"` // "landlock", or "" where none is built
	ABI        int    `json:"abi,omitempty"`
	Filesystem bool   `json:"filesystem"` // allow_read, allow_write, the deny list
	Network    bool   `json:"network"`    // network none
	Scoping    bool   `json:"scoping"`    // no signals or abstract sockets outside the sandbox
	Why        string `json:"why,omitempty"`
	// NoNamespace says why a network list's server cannot have a network
	// namespace of its own here ("" where it can): the daemon's to say,
	// as it makes them.
	NoNamespace string `json:"no_namespace,omitempty"`
	// NoDenialEvents says why what Landlock denies a server is not an
	// event here ("" where the daemon reads it from the kernel's audit):
	// the daemon's to say, as it reads them.
	NoDenialEvents string `json:"no_denial_events,omitempty"`
}

// Enforceable says why spec cannot be enforced with c, or nil: a server is
// refused rather than run with less than its policy asks.
func (c Capabilities) Enforceable(spec Spec) error {
	if !spec.Enabled {
		return nil
	}
	if !c.Filesystem {
		return fmt.Errorf("the sandbox cannot be enforced here: %s; run it without --sandbox, or on a kernel with Landlock", c.Why)
	}
	if spec.Network == NetworkNone && !c.Network {
		return fmt.Errorf("--network none cannot be enforced here: %s; use --network all", c.Why)
	}
	if hosts, _ := spec.Hosts(); hosts != nil {
		switch {
		case c.Mechanism != "landlock" && c.Mechanism != "seatbelt":
			return fmt.Errorf("--network %s: network lists are enforced on Linux and macOS only (the egress proxy); use --network none or all", spec.Network)
		case !c.Network:
			return fmt.Errorf("--network %s cannot be enforced here: %s; use --network all", spec.Network, c.Why)
		}
	}
	return nil
}

// String is the one line `supervisor status` shows.
func (c Capabilities) String() string {
	if !c.Filesystem {
		return "not available: " + c.Why
	}
	s := c.Mechanism + ": files"
	if c.ABI > 0 {
		s = fmt.Sprintf("%s ABI %d: files", c.Mechanism, c.ABI)
	}
	if c.Network {
		s += ", network none"
	}
	if c.Scoping {
		s += ", signals and abstract sockets"
	}
	switch {
	case !c.Network:
	case c.Mechanism == "seatbelt":
		s += "; network lists: through the egress proxy, whose address alone the profile allows"
	case c.NoNamespace != "":
		s += "; network lists: through the egress proxy, by port only (" + c.NoNamespace + "): a direct connection to another host on the proxy's port is not denied"
	default:
		s += "; network lists: through the egress proxy, in a network namespace"
	}
	if c.NoDenialEvents != "" {
		return s + "; denied files are not events (" + c.NoDenialEvents + ")"
	}
	return s + "; denied files are events (the kernel's audit)"
}
