//go:build !linux && !darwin

package sandbox

import (
	"errors"
	"runtime"
)

// Support says what this system can enforce: nothing yet outside Linux.
func Support() Capabilities {
	return Capabilities{Why: "sandboxing is built on Landlock, which " + runtime.GOOS + " does not have (macOS Seatbelt profiles are not built yet)"}
}

// Confine fails: there is nothing to confine with here.
func Confine(Rules) error {
	return errors.New("cannot sandbox: " + Support().Why)
}

// LimitResources fails: there is no sandbox here.
func LimitResources(int, Rules) error {
	return errors.New("cannot sandbox: " + Support().Why)
}

// Confined fails: there is no sandbox here.
func Confined(Rules, func() error) error {
	return errors.New("cannot sandbox: " + Support().Why)
}

// Wrap leaves a command as it is: there is no sandbox to wrap it in.
func Wrap(path string, argv []string, _ Rules) (string, []string) { return path, argv }
