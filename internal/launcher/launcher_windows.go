package launcher

// unsupported: node_modules/.bin holds .cmd and .ps1 shims on Windows, which
// npm runs through its shell; nothing is flattened there.
func unsupported() string { return "not done on Windows" }
