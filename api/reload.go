package api

// Config reload: `supervisor daemon reload` (the same as SIGHUP to the
// daemon) re-reads the config file with the environment and flags the
// daemon started with.
const (
	TypeDaemonReload = "daemon_reload" // client → daemon, no body; answered by reloaded or error
	TypeReloaded     = "reloaded"      // daemon → client
)

// Reloaded answers a reload that took: File is the config file read
// (Loaded false: it does not exist, so the built-in defaults apply).
type Reloaded struct {
	File   string `json:"file"`
	Loaded bool   `json:"loaded"`
}
