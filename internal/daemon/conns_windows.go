package daemon

// fdLimit: Windows has no per-process handle limit of note (about 16
// million); the caps keep to a figure like a generous unix one.
func fdLimit() int { return 1 << 16 }
