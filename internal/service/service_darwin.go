package service

// Native returns the service manager of this OS: launchd on macOS.
func Native() (*Manager, error) { return Launchd, nil }
