package proc

// Cgroup returns "": macOS has no cgroups.
func Cgroup(pid int) (string, error) { return "", nil }
