//go:build !linux

package egress

import (
	"errors"
	"net"
	"os"
)

// Port is where a server finds its proxy inside its namespace (Linux).
const Port = 3128

// Namespace is Linux's: elsewhere there is none.
type Namespace struct {
	Fd       *os.File
	Listener net.Listener
}

// NewNamespace fails here: network namespaces are Linux's.
func NewNamespace() (*Namespace, error) {
	return nil, errors.New("network namespaces are Linux's")
}

// ListenIn fails here: network namespaces are Linux's.
func ListenIn(int, func() error) (net.Listener, error) {
	return nil, errors.New("network namespaces are Linux's")
}

// LoopbackUp does nothing here: there is no namespace to bring it up in.
func LoopbackUp() error { return nil }

// Close does nothing here.
func (n *Namespace) Close() error { return nil }

// NamespaceSupport says network namespaces are Linux's.
func NamespaceSupport() string { return "network namespaces are Linux's" }
