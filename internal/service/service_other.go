//go:build !linux && !darwin

package service

// Native returns the service manager of this OS: none known here.
func Native() (*Manager, error) { return nil, ErrUnsupported }
