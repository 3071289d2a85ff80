package sandbox

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Host is one entry of a network list: the server may reach Name (a DNS
// name, *.domain for any name beneath domain, or an IP address) on Port,
// through the egress proxy.
type Host struct {
	Name string `json:"name"`
	Port int    `json:"port"`
}

func (h Host) String() string {
	if strings.Contains(h.Name, ":") {
		return "[" + h.Name + "]:" + strconv.Itoa(h.Port)
	}
	return h.Name + ":" + strconv.Itoa(h.Port)
}

// Hosts is s's network list, nil where its network is all or none.
func (s Spec) Hosts() ([]Host, error) {
	switch s.Network {
	case "", NetworkAll, NetworkNone:
		return nil, nil
	}
	return ParseHosts(s.Network)
}

// ParseHosts reads a network list, host:port entries split by commas:
// api.github.com:443, *.example.com:443, 10.0.0.5:5432, [::1]:8080.
func ParseHosts(list string) ([]Host, error) {
	if !strings.Contains(list, ":") {
		return nil, fmt.Errorf("network %q: want none, all, or a list of host:port", list)
	}
	var out []Host
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		h, err := parseHost(e)
		if err != nil {
			return nil, fmt.Errorf("network %q: %w", list, err)
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("network %q: want none, all, or a list of host:port", list)
	}
	return out, nil
}

func parseHost(e string) (Host, error) {
	i := strings.LastIndex(e, ":")
	if i < 0 {
		return Host{}, fmt.Errorf("%q has no port: write host:port (443 for https)", e)
	}
	name, portStr := e[:i], e[i+1:]
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return Host{}, fmt.Errorf("%q: the port %q is not a number from 1 to 65535", e, portStr)
	}
	if strings.HasPrefix(name, "[") && strings.HasSuffix(name, "]") {
		a, err := netip.ParseAddr(name[1 : len(name)-1])
		if err != nil || !a.Is6() {
			return Host{}, fmt.Errorf("%q: %s is not an IPv6 address", e, name)
		}
		return Host{Name: a.String(), Port: port}, nil
	}
	if a, err := netip.ParseAddr(name); err == nil {
		if a.Is6() {
			return Host{}, fmt.Errorf("%q: write an IPv6 address in brackets, [%s]:%d", e, name, port)
		}
		return Host{Name: a.String(), Port: port}, nil
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	label := strings.TrimPrefix(name, "*.")
	if label == "" || !validName(label) {
		return Host{}, fmt.Errorf("%q: %q is not a host name, *.domain or an IP address", e, name)
	}
	return Host{Name: name, Port: port}, nil
}

// validName is a DNS name's syntax: dot-separated labels of letters,
// digits, - and _, none empty or longer than 63.
func validName(n string) bool {
	if len(n) > 253 {
		return false
	}
	for _, l := range strings.Split(n, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Admits says the list lets a server reach name (as a client named it
// to the proxy) on port. A name matches its entry, or a *.domain entry
// it is beneath (not the domain itself); an IP address matches only the
// same address, never a name that resolves to it: the proxy resolves
// names after this check, so what a server may reach is what the user
// listed.
func Admits(hosts []Host, name string, port int) bool {
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")); err == nil {
		name = a.Unmap().String()
	} else {
		name = strings.TrimSuffix(strings.ToLower(name), ".")
	}
	for _, h := range hosts {
		if h.Port != port {
			continue
		}
		if h.Name == name {
			return true
		}
		if d, ok := strings.CutPrefix(h.Name, "*."); ok && strings.HasSuffix(name, "."+d) {
			return true
		}
	}
	return false
}
