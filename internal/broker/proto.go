package broker

// Messages on the broker's socket.
const (
	MsgAttach   = "attach"   // daemon → broker: AttachRequest, fds stdin and stdout of the client
	MsgAttached = "attached" // broker → daemon: the client is relayed
	MsgDetach   = "detach"   // daemon → broker: end this client
	MsgDetached = "detached" // broker → daemon: the client is gone (EOF or detach)
	MsgStats    = "stats"    // daemon → broker, answered with Stats
	MsgCache    = "cache"    // daemon → broker, answered with CacheReply
	// MsgWatch (daemon → broker, AttachRequest without fds): a new daemon
	// takes over a client's connection after the old one went away;
	// answered with MsgAttached (or an error for a client not relayed),
	// then MsgDetached when the client goes.
	MsgWatch = "watch"
)

// AttachRequest names the client whose fds come with it.
type AttachRequest struct {
	ID      string `json:"id"`
	Session string `json:"session"`
	// Replay and Rest are what the client's front left (Handover).
	Replay []byte `json:"replay,omitempty"`
	Rest   []byte `json:"rest,omitempty"`
}

// CacheReply is the lazy-start cache and its generation (Stats.CacheGen).
type CacheReply struct {
	Gen   uint64 `json:"gen"`
	Cache *Cache `json:"cache,omitempty"`
}
