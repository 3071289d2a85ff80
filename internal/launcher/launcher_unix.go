//go:build unix

package launcher

// unsupported: a node_modules/.bin entry is the program itself here (a
// link to a script with a #! line), so it can be exec'd as npm would.
func unsupported() string { return "" }
