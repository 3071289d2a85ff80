package broker

import (
	"os"
	"os/exec"
)

func setGroup(*exec.Cmd) {}

// terminate has no gentle form on Windows; the closed stdin was the ask.
func terminate(int) {}

func kill(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}
